"""Citations: map the `[n]` markers of an answer to the chunks they name, drop the ones
that name nothing, check each against its chunk, and list the documents referenced.

Also home of the two small text tools the answer side shares (the extractive answerer
uses the same sentence splitter and content words, so what it quotes verifies here)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from groundwork.prompt import source_label
from groundwork.types import Citation, Hit

# ---- sentences ------------------------------------------------------------------------

# Words whose trailing period does not end a sentence: titles, Latin abbreviations and a
# few common shorthands. Lower-case, without the final period.
_ABBREVIATIONS = frozenset("""
mr mrs ms dr prof st sr jr gen col lt sgt capt rev hon mt ft no nos fig figs vol vols
vs e.g i.e cf ca approx dept est op al eq eqs ref refs sec ch pp
jan feb mar apr jun jul aug sep sept oct nov dec
""".split())

# Punctuation that can end a sentence, closing quotes/brackets, then whitespace.
_END = re.compile(r"[.!?\u2026]+[\"'\u2019\u201d)\]]*\s+")
# A line break that starts a new unit anyway: blank line, or a list item.
_BREAK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*\u2022\u25aa]|\d{1,3}[.)])\s)")
_WORD_BEFORE = re.compile(r"([\w.]+)[.!?\u2026]*[\"'\u2019\u201d)\]]*\s+$")


def _ends_sentence(text: str, match: re.Match) -> bool:
    rest = text[match.end():match.end() + 1]
    if not rest or not (rest.isupper() or rest.isdigit() or rest in "\"'(\u201c[\u2018"):
        return False
    if text[match.start()] != ".":
        return True  # ! ? and ellipses always end one
    word = _WORD_BEFORE.search(text[max(0, match.start() - 40):match.end()])
    token = (word.group(1) if word else "").lower().rstrip(".")
    if token in _ABBREVIATIONS:
        return False
    last = token.rsplit(".", 1)[-1]
    return not (len(last) == 1 and last.isalpha())  # initials: "J. Smith", "U.S. Navy"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of `text`, whitespace trimmed. Keeps
    abbreviations ("e.g.", "Dr."), initials and decimals ("3.5") inside a sentence, and
    breaks at blank lines and list items (a single line break is just a wrapped line)."""
    cuts = [0]
    for m in _BREAK.finditer(text):
        cuts.append(m.end())
    for m in _END.finditer(text):
        if _ends_sentence(text, m):
            cuts.append(m.end())
    cuts = sorted(set(cuts)) + [len(text)]
    spans = []
    for start, end in zip(cuts, cuts[1:]):
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece.rstrip())
        if trail > lead:
            spans.append((start + lead, start + trail))
    return spans


def split_sentences(text: str) -> list[str]:
    return [" ".join(text[s:e].split()) for s, e in sentence_spans(text)]


# ---- content words --------------------------------------------------------------------

_STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it
its itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
s t don doesn didn isn aren wasn weren won can't cannot may might must shall upon via per
""".split())
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def _stem(word: str) -> str:
    # Just enough to match "days"/"day", "refunds"/"refund", "policies"/"policy".
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Lower-cased, lightly stemmed words that carry meaning (stopwords dropped)."""
    return {_stem(w) for w in (t.lower() for t in _TOKEN.findall(text))
            if w not in _STOPWORDS and (len(w) > 1 or w.isdigit())}


# ---- markers --------------------------------------------------------------------------

# "[1]", "[1, 3]", "[2-4]", "[1; 2]"; at most three digits so "[2020]" is left alone.
_MARKER = re.compile(r"\[\s*\d{1,3}(?:\s*(?:[,;]|-|\u2013)\s*\d{1,3})*\s*\]")
# The same with the blanks before it, so a removed marker takes its space along.
_SPACED_MARKER = re.compile(r"[ \t]*(" + _MARKER.pattern + ")")
_NUMBER_RANGE = re.compile(r"(\d{1,3})\s*(?:-|\u2013)\s*(\d{1,3})|(\d{1,3})")
MAX_RANGE = 10  # a wider or reversed range keeps only its two ends
MIN_COVERAGE = 0.5


def _numbers(marker: str) -> list[int]:
    out: list[int] = []
    for lo, hi, single in _NUMBER_RANGE.findall(marker):
        if single:
            nums = [int(single)]
        else:
            a, b = int(lo), int(hi)
            nums = list(range(a, b + 1)) if 0 <= b - a < MAX_RANGE else [a, b]
        out += [n for n in nums if n not in out]
    return out


def _claims(text: str, spans: list[tuple[int, int]], pos: int) -> tuple[str, str]:
    """The clause right before the marker at `pos`, and its whole sentence. A marker
    that opens a sentence ("... 30 days. [1] Next") belongs to the sentence before."""
    if not spans:
        return "", ""
    i = max([k for k, (s, _) in enumerate(spans) if s <= pos] or [0])
    start, end = spans[i]
    if not _MARKER.sub("", text[start:pos]).strip() and i > 0:
        start, end = spans[i - 1]
        pos = end
    clause = _MARKER.split(text[start:pos])[-1]
    if not clause.strip():  # "[1][2]": the clause is the one before the whole run
        clause = next((c for c in reversed(_MARKER.split(text[start:pos])) if c.strip()), "")
    return clause, _MARKER.sub(" ", text[start:end])


def _verified(claims: tuple[str, str], chunk_text: str) -> bool:
    chunk = content_words(chunk_text)
    for claim in claims:
        words = content_words(claim)
        shared = len(words & chunk)
        if words and shared >= min(2, len(words)) and shared / len(words) >= MIN_COVERAGE:
            return True
    return False


def resolve_citations(
    text: str, hits: Sequence[Hit], *,
    chunk_urls: Mapping[tuple[str, int], str] | None = None,
    kb_names: Mapping[str, str] | None = None,
) -> tuple[str, tuple[Citation, ...], tuple[int, ...], tuple[str, ...]]:
    """Return (cleaned text, citations in order of first use, dropped marker numbers,
    filenames of the documents referenced, unique, in order of first use).

    Marker `[n]` names `hits[n-1]`. Lists (`[1, 3]`), runs (`[1][3]`) and ranges (`[2-4]`,
    expanded only when ascending and shorter than MAX_RANGE, else just the two ends) are
    understood. In the cleaned text every kept number is written as its own `[n]`;
    numbers outside 1..len(hits) are removed and reported as dropped.

    Verification rule: a citation is `verified` when, for the sentence carrying its first
    marker, either the clause just before the marker or the whole sentence (markers
    removed) has content words (stopwords dropped, light stemming) of which at least
    MIN_COVERAGE (half) also occur in the cited chunk, and at least two of them (one, when
    the claim has a single content word). Sentences quoted from the chunk always pass; a
    sentence that shares little vocabulary with the chunk fails. A chunk cited several
    times is verified if any of its markers passes.

    `chunk_urls` maps (document id, chunk index) to a link that overrides the
    document's `source_url`; `kb_names` maps kb ids to display names for `source`."""
    spans = sentence_spans(text)
    first_use: list[int] = []
    verified: dict[int, bool] = {}
    dropped: list[int] = []

    def rewrite(match: re.Match) -> str:
        kept = []
        for n in _numbers(match.group(1)):
            if 1 <= n <= len(hits):
                kept.append(n)
                if n not in first_use:
                    first_use.append(n)
                if not verified.get(n):
                    claims = _claims(text, spans, match.start(1))
                    verified[n] = _verified(claims, hits[n - 1].chunk.text)
            elif n not in dropped:
                dropped.append(n)
        if kept:
            return match.group(0)[:match.start(1) - match.start()] + "".join(
                f"[{n}]" for n in kept)
        # Nothing left: drop the blanks before it too ("days [9]." -> "days."), unless a
        # word follows directly and would be glued on.
        follows = text[match.end():match.end() + 1]
        return " " if follows.isalnum() and match.start(1) > match.start() else ""

    cleaned = _SPACED_MARKER.sub(rewrite, text)

    citations = []
    for n in first_use:
        hit = hits[n - 1]
        url = (chunk_urls or {}).get(hit.key) or hit.document.source_url
        citations.append(Citation(
            number=n, document_id=hit.document.id, filename=hit.document.filename,
            chunk_index=hit.chunk.index, page=hit.chunk.page, score=hit.score,
            text=hit.chunk.text, source=source_label(hit.document, kb_names), url=url,
            verified=verified[n],
        ))
    documents = tuple(dict.fromkeys(c.filename for c in citations))
    return cleaned, tuple(citations), tuple(dropped), documents
