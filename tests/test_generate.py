import socket
import time
import traceback

import pytest

from fake_openai import serve_fake_openai
from groundwork.cite import resolve_citations
from groundwork.errors import LLMError
from groundwork.generate import ESCALATE_TOOL
from groundwork.generate.extractive import ABSTENTION_TEXT, extractive_answer
from groundwork.generate.openai_compat import OpenAICompatLLM
from groundwork.prompt import REFUSAL, build_messages
from groundwork.types import Chunk, Context, Document, Hit, Message

SECRET = "sk-test-0123456789abcdef"

CHUNKS = [
    ("shipping.pdf", "Orders ship from our warehouse in Leeds. Standard delivery takes three "
     "to five business days. Express delivery arrives the next working day if you order "
     "before 2 p.m."),
    ("refunds.pdf", "Returns policy. We offer a 30-day refund window from the date of "
     "delivery. Refunds are processed to the original payment method within 5 business "
     "days. Gift cards cannot be refunded."),
    ("warranty.pdf", "All appliances carry a two-year warranty. The warranty covers defects "
     "in materials and workmanship, e.g. a faulty motor. It does not cover accidental "
     "damage."),
]


def make_hits(chunks=CHUNKS) -> list[Hit]:
    hits = []
    for i, (filename, text) in enumerate(chunks):
        doc = Document(id=f"d{i}", tenant="default", kb_id="support", filename=filename,
                       title=filename, content_type="application/pdf", size=len(text),
                       content_hash=f"h{i}")
        hits.append(Hit(Chunk(document_id=doc.id, index=0, text=text), doc, 0.8 - i / 10))
    return hits


@pytest.fixture(scope="module")
def embedder():
    """The real all-MiniLM-L6-v2, loaded once for this module."""
    from groundwork.embed.local import LocalEmbedder
    return LocalEmbedder()


# ---- OpenAI-compatible client against a fake server speaking the real protocol ----------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grounded_messages(question="How long do refunds take?"):
    context = Context(hits=tuple(make_hits()))
    return build_messages(context, [Message("user", question)])


def test_complete_returns_text_and_usage_and_sends_the_grounded_prompt():
    with serve_fake_openai(api_key=SECRET) as server:
        llm = OpenAICompatLLM(server, "fake-model", SECRET, max_retries=0)
        generation = llm.complete(grounded_messages())
        request = server.requests[-1]
    assert generation.text == "The context has sources [1] [2] [3]."
    assert generation.usage.output_tokens == 7
    assert generation.usage.input_tokens > 50
    assert not generation.escalate and not generation.abstained
    assert request["model"] == "fake-model"
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert "---KNOWLEDGE BASE CONTEXT---" in request["messages"][0]["content"]
    assert "tools" not in request


def test_missing_key_sends_a_placeholder():
    with serve_fake_openai(lambda body: "ok") as server:
        generation = OpenAICompatLLM(server, "local", None, max_retries=0).complete(
            [{"role": "user", "content": "hi"}])
        assert server.headers[-1]["authorization"] == "Bearer not-needed"
    assert generation.text == "ok"


def test_escalation_tool_call_sets_escalate():
    with serve_fake_openai() as server:
        llm = OpenAICompatLLM(server, "fake-model", None, max_retries=0)
        generation = llm.complete(grounded_messages("Let me talk to a human please"),
                                  tools=[ESCALATE_TOOL])
        assert server.requests[-1]["tools"][0]["function"]["name"] == "escalate_to_human"
        plain = llm.complete(grounded_messages("Refund window?"), tools=[ESCALATE_TOOL])
    assert generation.escalate is True and generation.text
    assert plain.escalate is False


def test_stream_yields_the_reply_in_pieces():
    reply = "Refunds take 30 days [2]. Ask me anything else."
    with serve_fake_openai(lambda body: reply) as server:
        pieces = list(OpenAICompatLLM(server, "m", None, max_retries=0).stream(
            grounded_messages()))
        assert server.requests[-1]["stream"] is True
    assert len(pieces) > 3
    assert "".join(pieces) == reply


def test_wrong_key_becomes_llm_error_without_the_key():
    with serve_fake_openai(api_key="the-right-key") as server:
        with pytest.raises(LLMError) as info:
            OpenAICompatLLM(server, "fake-model", SECRET, max_retries=0).complete(
                grounded_messages())
    message = info.value.message
    assert "401" in message and server.base_url in message and "fake-model" in message
    assert "\n" not in message
    assert SECRET not in "".join(traceback.format_exception(info.value))


def test_server_error_becomes_llm_error():
    with serve_fake_openai() as server:
        llm = OpenAICompatLLM(server, "fake-model", None, max_retries=0)
        with pytest.raises(LLMError, match=r"HTTP 500"):
            llm.complete([{"role": "user", "content": "please fail [[500]]"}])
        server.fail_with = 503
        with pytest.raises(LLMError, match=r"HTTP 503"):
            list(llm.stream([{"role": "user", "content": "hi"}]))


def test_retries_then_gives_up():
    with serve_fake_openai() as server:
        server.fail_with = 500
        llm = OpenAICompatLLM(server, "fake-model", None, max_retries=1)
        with pytest.raises(LLMError):
            llm.complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 2


def test_unreachable_server_and_timeout_become_llm_errors():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMError, match="unreachable") as info:
        OpenAICompatLLM(url, "m", SECRET, max_retries=0).complete(
            [{"role": "user", "content": "hi"}])
    assert url in info.value.message and SECRET not in info.value.message

    def slow(body):
        time.sleep(1.5)
        return "late"

    with serve_fake_openai(slow) as server:
        with pytest.raises(LLMError, match="timed out"):
            OpenAICompatLLM(server, "m", None, timeout=0.3, max_retries=0).complete(
                [{"role": "user", "content": "hi"}])


# ---- extractive answerer ---------------------------------------------------------------

def test_extractive_quotes_the_answering_sentence_with_its_marker(embedder):
    hits = make_hits()
    generation = extractive_answer("How many days do I have to ask for a refund?", hits,
                                   embedder)
    assert not generation.abstained
    assert "We offer a 30-day refund window from the date of delivery. [2]" in generation.text
    assert "[1]" not in generation.text and "[3]" not in generation.text
    assert generation.usage.total_tokens == 0
    # Every quoted sentence verifies against the chunk it cites.
    cleaned, citations, dropped, documents = resolve_citations(generation.text, hits)
    assert dropped == () and documents == ("refunds.pdf",)
    assert citations and all(c.verified for c in citations)


def test_extractive_finds_the_answer_in_a_later_chunk(embedder):
    generation = extractive_answer("Does the warranty cover accidental damage?",
                                   make_hits(), embedder, max_sentences=1)
    assert generation.text == "It does not cover accidental damage. [3]"


def test_extractive_abstains_on_an_unrelated_question(embedder):
    generation = extractive_answer("Who painted the ceiling of the Sistine Chapel?",
                                   make_hits(), embedder)
    assert generation.abstained
    assert generation.text == ABSTENTION_TEXT
    assert REFUSAL in generation.text and "human" in generation.text
    assert "[" not in generation.text


def test_extractive_abstains_without_hits(embedder):
    assert extractive_answer("Refund window?", [], embedder).abstained


def test_extractive_skips_duplicate_sentences_from_overlapping_chunks(embedder):
    overlap = [CHUNKS[1], ("refunds-copy.pdf", CHUNKS[1][1])]
    generation = extractive_answer("How long is the refund window?", make_hits(overlap),
                                   embedder)
    assert generation.text.count("We offer a 30-day refund window") == 1
