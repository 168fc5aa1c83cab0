"""Document -> chunks, along its structure.

A chunk never crosses a section (heading path) boundary, prefers to end where a
paragraph ends, otherwise where a sentence ends, and only splits inside a sentence when
the sentence alone is larger than a chunk. Consecutive chunks of a section overlap by
whole trailing sentences. Each chunk's text is the exact slice
`extracted.text[char_start:char_end]`, so offsets always point at the source.

Sizes are counted in the embedder's own tokens (default) or in characters (seed 000's
1,500-character mode). In token mode the heading prefix is charged to the chunk, so
`Chunk.embed_text` fits the embedder's window.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .types import BLOCK_SEPARATOR, Chunk, Extracted

_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "Fig.",
                  "No.", "St.", "al.", "approx.", "Inc.", "Ltd.", "Jr.", "Sr.", "cf.")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass(frozen=True)
class _Unit:
    """A sentence (or a piece of one) with its place in the document."""

    start: int
    end: int
    page: int | None
    paragraph: int  # index of the block it came from
    cost: int


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) spans of the sentences of `text`, abbreviations kept intact."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        candidate = text[start:match.start()].rstrip()
        if any(candidate.endswith(abbr) for abbr in _ABBREVIATIONS):
            continue
        spans.append((start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in ((s, len(text[:e].rstrip())) for s, e in spans) if e > s]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chunk_document(extracted: Extracted, document_id: str, *,
                   count_tokens: Callable[[str], int], max_tokens: int,
                   unit: str = "tokens", size: int = 180, overlap: int = 30) -> list[Chunk]:
    """Split `extracted` into overlapping, structure-respecting chunks."""
    cost = count_tokens if unit == "tokens" else len
    text = extracted.text
    chunks: list[Chunk] = []
    for heading_path, units in _sections(extracted, cost):
        prefix = " > ".join(heading_path)
        budget = size
        if unit == "tokens" and prefix:
            budget = max(16, min(size, max_tokens - count_tokens(prefix) - 1))
        for piece in _pack(_fit_units(units, text, budget, cost), budget, overlap, unit == "chars"):
            start, end = piece[0].start, piece[-1].end
            body = text[start:end]
            pages = tuple(sorted({u.page for u in piece if u.page is not None}))
            chunk = Chunk(document_id=document_id, index=len(chunks), text=body,
                          heading_path=heading_path, pages=pages, char_start=start,
                          char_end=end)
            embed_text = chunk.embed_text
            chunks.append(Chunk(**{**chunk.__dict__, "token_count": count_tokens(embed_text),
                                   "content_hash": content_hash(embed_text)}))
    return chunks


def _sections(extracted: Extracted, cost: Callable[[str], int]):
    """Yield (heading_path, sentence units) per section, in document order."""
    path: list[tuple[int, str]] = []
    units: list[_Unit] = []
    offset = 0
    pending_heading: tuple[int, int, int | None] | None = None  # a heading with no body yet
    for index, block in enumerate(extracted.blocks):
        start = offset
        offset += len(block.text) + len(BLOCK_SEPARATOR)
        if block.kind == "heading":
            if units:
                yield tuple(h for _, h in path), units
                units = []
            level = block.level or 1
            if not units and pending_heading and level <= path[-1][0]:
                # An empty section (not a parent of this one): keep its heading as text
                # so nothing is lost.
                s, e, page = pending_heading
                yield tuple(h for _, h in path[:-1]), [_Unit(s, e, page, -1, cost(extracted.text[s:e]))]
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, block.text)]
            pending_heading = (start, start + len(block.text), block.page)
            continue
        pending_heading = None
        if block.kind in ("table", "code", "list"):
            spans = _line_spans(block.text)
        else:
            spans = split_sentences(block.text)
        for s, e in spans:
            piece = block.text[s:e]
            units.append(_Unit(start + s, start + e, block.page, index, cost(piece)))
    if units:
        yield tuple(h for _, h in path), units
    elif pending_heading:
        s, e, page = pending_heading
        yield tuple(h for _, h in path[:-1]), [_Unit(s, e, page, -1, cost(extracted.text[s:e]))]


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.split("\n"):
        if line.strip():
            spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def _fit_units(units: Sequence[_Unit], text: str, budget: int, cost) -> list[_Unit]:
    """Split any unit larger than the budget at word boundaries."""
    fitted: list[_Unit] = []
    for u in units:
        if u.cost <= budget:
            fitted.append(u)
            continue
        words = [(m.start() + u.start, m.end() + u.start) for m in re.finditer(r"\S+", text[u.start:u.end])]
        piece_start, used, last_end = None, 0, None
        for ws, we in words:
            c = max(1, cost(text[ws:we]))
            if piece_start is not None and used + c > budget:
                fitted.append(_Unit(piece_start, last_end, u.page, u.paragraph, used))
                piece_start, used = None, 0
            if piece_start is None:
                piece_start = ws
            used += c
            last_end = we
        if piece_start is not None:
            fitted.append(_Unit(piece_start, last_end, u.page, u.paragraph, used))
    return fitted


def _pack(units: Sequence[_Unit], budget: int, overlap: int, by_span: bool) -> list[list[_Unit]]:
    """Greedy packing with paragraph preference and sentence overlap. `by_span` measures
    a candidate chunk by its character span (separators included) instead of summing
    unit costs."""

    def size(group: Sequence[_Unit]) -> int:
        if not group:
            return 0
        return group[-1].end - group[0].start if by_span else sum(x.cost for x in group)

    pieces: list[list[_Unit]] = []
    current: list[_Unit] = []
    i = 0
    while i < len(units):
        u = units[i]
        if current and size([*current, u]) > budget:
            # Prefer ending at the last paragraph boundary when it keeps the chunk
            # at least half full.
            cut = len(current)
            if u.paragraph == current[-1].paragraph:
                for j in range(len(current) - 1, 0, -1):
                    if current[j].paragraph != current[j - 1].paragraph:
                        if size(current[:j]) >= budget // 2:
                            cut = j
                        break
            done, rest = current[:cut], current[cut:]
            pieces.append(done)
            current = _overlap_tail(done, overlap, budget, size) + rest
            if size([*current, u]) > budget:
                current = rest
                if current and size([*current, u]) > budget:
                    pieces.append(current)
                    current = []
            continue
        current.append(u)
        i += 1
    if current:
        pieces.append(current)
    return pieces


def _overlap_tail(done: Sequence[_Unit], overlap: int, budget: int, size) -> list[_Unit]:
    """Trailing whole sentences of `done` worth at most `overlap`; at least the last
    sentence when it is no more than half a chunk, so neighbours always share text."""
    if overlap <= 0 or len(done) < 2:
        return []
    tail: list[_Unit] = []
    for u in reversed(done[1:]):
        if size([u, *tail]) > overlap:
            break
        tail.insert(0, u)
    if not tail and size(done[-1:]) <= budget // 2:
        tail = [done[-1]]
    return tail
