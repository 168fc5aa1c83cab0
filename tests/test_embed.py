"""Embedders: the local model's contract, windows for over-long text, and the
OpenAI-compatible embeddings backend against a local server speaking the real protocol."""

import numpy as np
import pytest

from fake_openai import serve_fake_openai
from groundwork import pipeline
from groundwork.config import load_settings
from groundwork.embed import embed_batched, split_to_fit
from groundwork.engine import Engine
from groundwork.errors import EmbedError
from groundwork.types import DEFAULT_TENANT, Scope


def test_local_embedder_contract(local_embedder):
    vectors = local_embedder.embed(["refund window", "return policy", "penguin feeding"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert local_embedder.max_tokens == 254 and local_embedder.model_id.endswith("all-MiniLM-L6-v2")


def test_long_text_is_embedded_in_windows_not_truncated(local_embedder):
    head = " ".join(["alpha"] * 300)
    tail = "The secret ingredient is cardamom and it is added at the very end."
    text = head + " " + tail
    assert local_embedder.count_tokens(text) > local_embedder.max_tokens
    windows = split_to_fit(local_embedder, text)
    assert len(windows) == 2 and windows[-1].endswith("very end.")
    pooled = embed_batched(local_embedder, [text])[0]
    truncated = local_embedder.embed([text])[0]  # what the model alone keeps (the head)
    probe = local_embedder.embed(["cardamom secret ingredient"])[0]
    assert pooled @ probe > truncated @ probe + 0.05


def test_openai_compatible_embeddings_backend(tmp_path):
    from groundwork.embed.openai_api import OpenAIEmbedder

    with serve_fake_openai(api_key="sk-embed") as server:
        embedder = OpenAIEmbedder(model="text-embedding-3-small", base_url=server, api_key="sk-embed", dimensions=48)
        vectors = embedder.embed(["refund window days", "refund days", "zebra"])
        assert vectors.shape == (3, 48) and embedder.dim == 48
        assert embedder.model_id == "openai:text-embedding-3-small@48"
        assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
        assert server.requests[-1]["dimensions"] == 48 and server.requests[-1]["model"] == "text-embedding-3-small"
        settings = load_settings(home=tmp_path / "h", embedder="openai", embed_base_url=server,
                                 embed_api_key="sk-embed", embed_model="text-embedding-3-small",
                                 embed_dimensions=48)
        engine = Engine.open(settings)
        kb = engine.store.create_kb(DEFAULT_TENANT, "kb")
        pipeline.ingest_bytes(engine, b"Refunds are issued within 30 days.", "refunds.txt", kb_id=kb.id)
        pipeline.ingest_bytes(engine, b"Zebras eat hay.", "zebra.txt", kb_id=kb.id)
        hits = pipeline.search(engine, "refunds days", scope=Scope(kb_ids=(kb.id,)), mode="vector", top_k=1)
        assert hits[0].document.filename == "refunds.txt"
        wrong = OpenAIEmbedder(model="m", base_url=server, api_key="sk-wrong")
        with pytest.raises(EmbedError) as err:
            wrong.embed(["x"])
        assert "sk-wrong" not in err.value.message and server in err.value.message
