import pytest

from groundwork.cite import content_words, resolve_citations, split_sentences
from groundwork.types import Chunk, Document, Hit

REFUNDS = ("We offer a 30-day refund window from the date of delivery. Refunds are "
           "processed to the original payment method within 5 business days.")
SHIPPING = "Damaged-on-arrival claims must be filed within 48 hours of delivery."
HOURS = "Our office hours are 9 to 6, Monday to Friday, in Bengaluru."


def make_hit(doc_id, filename, text, *, index=0, pages=(), score=0.5, kb_id="support",
             url=None) -> Hit:
    document = Document(id=doc_id, tenant="default", kb_id=kb_id, filename=filename,
                        title=filename, content_type="text/plain", size=len(text),
                        content_hash="h", source_url=url)
    return Hit(Chunk(document_id=doc_id, index=index, text=text, pages=pages), document, score)


@pytest.fixture
def hits():
    return [make_hit("d1", "refunds.pdf", REFUNDS, index=2, pages=(3,), score=0.91,
                     url="https://example.com/refunds"),
            make_hit("d2", "shipping.pdf", SHIPPING, score=0.72),
            make_hit("d1", "refunds.pdf", "Refunds exclude gift cards.", index=3, score=0.6),
            make_hit("d3", "hours.txt", HOURS, kb_id=None, score=0.4)]


def test_markers_map_to_hits_in_order_of_first_use(hits):
    text = ("Damaged items must be claimed within 48 hours of delivery [2]. "
            "The refund window is 30 days from delivery [1].")
    cleaned, citations, dropped, documents = resolve_citations(text, hits)
    assert cleaned == text
    assert dropped == ()
    assert [c.number for c in citations] == [2, 1]
    first, second = citations
    assert (first.document_id, first.filename, first.chunk_index) == ("d2", "shipping.pdf", 0)
    assert (second.chunk_index, second.page, second.score) == (2, 3, 0.91)
    assert second.text == REFUNDS
    assert second.source == "support (refunds.pdf)"
    assert second.url == "https://example.com/refunds" and first.url is None
    assert documents == ("shipping.pdf", "refunds.pdf")


def test_unknown_markers_are_dropped_and_reported(hits):
    text = "Refunds take 30 days [7]. Office hours are 9 to 6 [4][0]. See [1, 9]."
    cleaned, citations, dropped, documents = resolve_citations(text, hits)
    assert cleaned == "Refunds take 30 days. Office hours are 9 to 6 [4]. See [1]."
    assert dropped == (7, 0, 9)
    assert [c.number for c in citations] == [4, 1]
    assert citations[0].source == "attachment (hours.txt)"
    assert documents == ("hours.txt", "refunds.pdf")


@pytest.mark.parametrize("marker, kept, dropped", [
    ("[1-3]", [1, 2, 3], ()),
    ("[1, 3]", [1, 3], ()),
    ("[1;3]", [1, 3], ()),
    ("[1][3]", [1, 3], ()),
    ("[2\u20134]", [2, 3, 4], ()),
    ("[3-1]", [3, 1], ()),  # reversed: only the ends
    ("[1-200]", [1], (200,)),  # absurd width: only the ends, 200 is out of range
    ("[2-6]", [2, 3, 4], (5, 6)),
])
def test_lists_runs_and_ranges(hits, marker, kept, dropped):
    cleaned, citations, got_dropped, _ = resolve_citations(f"Refund facts {marker}.", hits)
    assert [c.number for c in citations] == kept
    assert got_dropped == dropped
    assert cleaned == "Refund facts " + "".join(f"[{n}]" for n in kept) + "."


def test_documents_referenced_are_unique(hits):
    _, citations, _, documents = resolve_citations("A [1]. B [3]. C [1].", hits)
    assert [c.number for c in citations] == [1, 3]
    assert documents == ("refunds.pdf",)


def test_non_markers_are_left_alone(hits):
    text = "The 2020 report [2020] uses list[0] and no citations."
    cleaned, citations, dropped, _ = resolve_citations(text, hits)
    assert citations == () and dropped == (0,)
    assert cleaned == "The 2020 report [2020] uses list and no citations."


def test_quoted_sentence_verifies_and_made_up_one_does_not(hits):
    text = ("We offer a 30-day refund window from the date of delivery. [1] "
            "Our premium members get free helicopter delivery to Mars [2].")
    _, citations, _, _ = resolve_citations(text, hits)
    verified = {c.number: c.verified for c in citations}
    assert verified == {1: True, 2: False}


def test_paraphrase_verifies_clause_by_clause(hits):
    text = "Refunds take 30 days from delivery [1] and damage claims 48 hours [2]."
    _, citations, _, _ = resolve_citations(text, hits)
    assert [c.verified for c in citations] == [True, True]
    _, swapped, _, _ = resolve_citations(
        "Our office is open from 9 to 6 on weekdays in Bengaluru [2].", hits)
    assert [c.verified for c in swapped] == [False]


def test_chunk_urls_override_document_url(hits):
    urls = {("d1", 2): "https://example.com/refunds#chunk-2"}
    _, citations, _, _ = resolve_citations("Thirty days [1].", hits, chunk_urls=urls)
    assert citations[0].url == "https://example.com/refunds#chunk-2"


def test_sentence_splitter_keeps_abbreviations_and_decimals():
    text = ("Dr. Smith measured 3.5 kg, e.g. on Monday. Mr. J. R. Tolkien agreed! Did he? "
            "Yes.\n\n- first item\n- second item\nwrapped line")
    assert split_sentences(text) == [
        "Dr. Smith measured 3.5 kg, e.g. on Monday.", "Mr. J. R. Tolkien agreed!",
        "Did he?", "Yes.", "- first item", "- second item wrapped line"]


def test_content_words_drop_stopwords_and_stem():
    assert content_words("The refunds are processed within 5 days.") == {
        "refund", "processed", "within", "5", "day"}
