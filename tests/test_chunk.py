import re

import pytest

from groundwork.chunk import chunk_document, split_sentences
from groundwork.types import Block, Extracted


def sentences(n, topic="refund"):
    return " ".join(f"Sentence {i} explains the {topic} rule number {i} in plain words." for i in range(n))


def doc(*blocks):
    return Extracted(title="t", blocks=tuple(blocks), content_type="text/markdown")


def chunks_of(extracted, local_embedder, **kwargs):
    return chunk_document(extracted, "d1", count_tokens=local_embedder.count_tokens,
                          max_tokens=local_embedder.max_tokens, **kwargs)


def test_offsets_are_exact_slices_and_nothing_is_lost(local_embedder):
    extracted = doc(Block("heading", "Policy", level=1), Block("paragraph", sentences(30)),
                    Block("paragraph", sentences(12, "shipping")), Block("heading", "Other", level=2),
                    Block("table", "a | b\n1 | 2"))
    chunks = chunks_of(extracted, local_embedder)
    text = extracted.text
    for c in chunks:
        assert text[c.char_start:c.char_end] == c.text
    covered = set()
    for c in chunks:
        covered.update(range(c.char_start, c.char_end))
    for i, ch in enumerate(text):
        if not ch.isspace() and i not in covered:
            # only heading text may live outside chunk bodies: it is in heading_path
            assert any(text.find(h) <= i < text.find(h) + len(h) for h in ("Policy", "Other")), i


def test_every_chunk_fits_the_model_window(local_embedder):
    long_heading = "Section " + " ".join(["heading"] * 40)
    extracted = doc(Block("heading", long_heading, level=1), Block("paragraph", sentences(80)))
    chunks = chunks_of(extracted, local_embedder)
    assert len(chunks) > 3
    for c in chunks:
        assert c.token_count == local_embedder.count_tokens(c.embed_text)
        assert c.token_count <= local_embedder.max_tokens


def test_chunks_end_on_sentence_boundaries_and_overlap(local_embedder):
    extracted = doc(Block("paragraph", sentences(60)))
    chunks = chunks_of(extracted, local_embedder, size=120, overlap=30)
    assert len(chunks) >= 4
    for c in chunks:
        assert c.text.startswith("Sentence ") and c.text.endswith("words.")
    for a, b in zip(chunks, chunks[1:]):
        assert b.char_start < a.char_end, "neighbours must overlap"
        shared = extracted.text[b.char_start:a.char_end]
        assert local_embedder.count_tokens(shared) <= 60


def test_paragraph_boundary_preferred(local_embedder):
    first, second = sentences(6, "alpha"), sentences(6, "beta")
    extracted = doc(Block("paragraph", first), Block("paragraph", second))
    # both paragraphs do not fit together, each fits alone: the cut falls between them
    size = local_embedder.count_tokens(first) + 20
    chunks = chunks_of(extracted, local_embedder, size=size, overlap=0)
    assert [c.text for c in chunks] == [first, second]


def test_heading_path_is_prefixed_to_embedded_text(local_embedder):
    extracted = doc(Block("heading", "Refunds", level=1), Block("heading", "Damaged items", level=2),
                    Block("paragraph", "Claims must be filed within 48 hours."),
                    Block("heading", "Shipping", level=1), Block("paragraph", "We ship worldwide."))
    chunks = chunks_of(extracted, local_embedder)
    assert [c.heading_path for c in chunks] == [("Refunds", "Damaged items"), ("Shipping",)]
    assert chunks[0].embed_text == "Refunds > Damaged items\nClaims must be filed within 48 hours."
    assert chunks[0].text == "Claims must be filed within 48 hours."


def test_chunks_never_cross_sections(local_embedder):
    extracted = doc(Block("heading", "A", level=1), Block("paragraph", "Short a."),
                    Block("heading", "B", level=1), Block("paragraph", "Short b."))
    assert [c.text for c in chunks_of(extracted, local_embedder)] == ["Short a.", "Short b."]


def test_pages_follow_blocks(local_embedder):
    extracted = doc(Block("paragraph", sentences(3), page=1), Block("paragraph", sentences(3, "x"), page=2))
    chunks = chunks_of(extracted, local_embedder)
    assert chunks[0].pages == (1, 2)
    small = chunks_of(extracted, local_embedder, size=60, overlap=0)
    assert small[0].pages == (1,) and small[-1].pages == (2,)


def test_character_mode_for_seed_000(local_embedder):
    extracted = doc(Block("paragraph", sentences(120)))
    chunks = chunks_of(extracted, local_embedder, unit="chars", size=1500, overlap=200)
    assert len(chunks) > 3
    assert all(len(c.text) <= 1500 for c in chunks)
    assert max(len(c.text) for c in chunks) > 1200


def test_oversized_sentence_is_split_at_words(local_embedder):
    run_on = " ".join(f"word{i}" for i in range(600))
    chunks = chunks_of(doc(Block("paragraph", run_on)), local_embedder, size=100, overlap=10)
    assert len(chunks) >= 3
    assert all(c.token_count <= 100 for c in chunks)
    joined = " ".join(c.text for c in chunks)
    assert set(re.findall(r"word\d+", joined)) == set(run_on.split())


@pytest.mark.parametrize("text,expected", [
    ("Dr. Smith arrived. He left at 5.30 p.m. today. Then, e.g. tea. Done!",
     ["Dr. Smith arrived.", "He left at 5.30 p.m. today.", "Then, e.g. tea.", "Done!"]),
    ("One. Two? Three!", ["One.", "Two?", "Three!"]),
])
def test_sentence_splitter(text, expected):
    assert [text[s:e] for s, e in split_sentences(text)] == expected
