"""The KB map: what each document of a kb is about, as the AVAILABLE KNOWLEDGE section
of seed 002 (`KB "Name": N documents` then `- "Doc Title" [topics] -- summary`).

Stored at ingest, per kb document (`Store.put_summary`), removed with the document:

- summary: the one or two most central sentences, by centroid summarisation (Radev et
  al. 2004): each sentence of 5-60 words is scored by the cosine between its content
  words and the document's content-word frequencies, so the sentences that use most of
  the document's recurring vocabulary win; they are shown in document order, within
  300 characters. Lexical rather than embedding centrality on purpose: chunk vectors
  only say which *chunk* is central, scoring sentences with the model would mean
  embedding every sentence again at ingest (with an API embedder, paying for it), and a
  word-overlap choice is deterministic and easy to explain. Lead sentences were not
  used because a document often opens with boilerplate (dates, greetings, notices).
- keywords: the document's 60 most frequent content words (plurals folded) and repeated
  two-word phrases, with counts, one row per term (`Store.document_keywords`).
- topics: the 5 keywords most distinctive against the kb, TF-IDF with the kb's
  documents as the corpus: (1 + ln tf) * ln((1 + N) / df), where df counts the kb's
  documents having the term among their keywords (`Store.term_counts`, an index
  lookup; a term outside another document's top 60 is not counted there). Topics are
  stored at ingest against the kb as it then was, and recomputed when the map is read
  for the (at most `MAX_DOCUMENTS`) entries shown, so that early documents stay
  distinctive as the kb grows. Reading the map for a chat costs one short row per
  document plus two indexed queries over the entries shown.

Documents outside a kb (record or conversation files) get no summary: the map is per kb.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .graph import COMMON, index_graph, one_line, sentences
from .types import Chunk, Document, KnowledgeBase

if TYPE_CHECKING:
    from .store import Store

MAX_DOCUMENTS = 20  # listed per kb in the prompt; the rest become "... and N more"
SUMMARY_CHARS = 300
SNIPPET_CHARS = 200
TOPICS = 5
KEYWORDS = 60
_WORD = re.compile(r"[^\W\d_][\w\-]*[^\W_]")


@dataclass(frozen=True)
class MapEntry:
    document_id: str
    title: str
    filename: str
    summary: str = ""
    topics: tuple[str, ...] = ()


def _content_words(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence.casefold()) if len(w) >= 3 and w not in COMMON]


def summarise(chunks: Sequence[Chunk], *, max_sentences: int = 2, max_chars: int = SUMMARY_CHARS) -> str:
    """The document's most central sentences (see the module docstring)."""
    units = [s for s, _ in sentences(chunks)]
    candidates = [(i, s) for i, s in enumerate(units) if 5 <= len(s.split()) <= 60] or list(enumerate(units))
    if not candidates:
        return ""
    bags = [set(_content_words(s)) for _, s in candidates]
    centroid = Counter(w for s in units for w in _content_words(s))
    norm = math.sqrt(sum(c * c for c in centroid.values())) or 1.0

    def score(k: int) -> float:
        return sum(centroid[w] for w in bags[k]) / (norm * math.sqrt(len(bags[k]) or 1))

    ranked = sorted(range(len(candidates)), key=lambda k: (-score(k), candidates[k][0]))
    chosen = [ranked[0]]
    for k in ranked[1:max_sentences]:
        if sum(len(candidates[c][1]) + 1 for c in [*chosen, k]) <= max_chars:
            chosen.append(k)
    return one_line(" ".join(candidates[k][1] for k in sorted(chosen)), max_chars)


def keyword_counts(chunks: Sequence[Chunk], *, limit: int = KEYWORDS) -> dict[str, int]:
    """Content words (plural folded into the commoner form) and repeated word pairs."""
    words: Counter = Counter()
    pairs: Counter = Counter()
    for sentence, _ in sentences(chunks):
        tokens = _WORD.findall(sentence.casefold())
        words.update(t for t in tokens if len(t) >= 3 and t not in COMMON)
        pairs.update(f"{a} {b}" for a, b in zip(tokens, tokens[1:])
                     if len(a) >= 3 and len(b) >= 3 and a not in COMMON and b not in COMMON)
    for word in list(words):
        plural = word + "s"
        if plural in words and word in words:
            keep, drop = (word, plural) if words[word] >= words[plural] else (plural, word)
            words[keep] += words.pop(drop)
    counts = Counter(words)
    counts.update({pair: n for pair, n in pairs.items() if n >= 2})
    return dict(counts.most_common(limit))


def distinctive_topics(keywords: Mapping[str, int], documents: int, df: Mapping[str, int], *,
                       n: int = TOPICS) -> list[str]:
    """The `n` keywords with the highest TF-IDF in a kb of `documents` documents where
    `df[term]` of them (this one included) have the term; a pair replaces the single
    words it contains."""

    def score(term: str) -> float:
        idf = math.log((1 + documents) / max(df.get(term, 1), 1))  # > 0: alone, frequency decides
        return (1 + math.log(max(keywords[term], 1))) * idf * (1.2 if " " in term else 1.0)

    chosen: list[str] = []
    for term in sorted(keywords, key=lambda t: (-score(t), t)):
        if len(chosen) >= n:
            break
        if any(term in c.split() for c in chosen):
            continue  # a word of a pair already chosen
        chosen = [c for c in chosen if c not in term.split()]
        chosen.append(term)
    return chosen


def index_summary(store: Store, document: Document, chunks: Sequence[Chunk]) -> None:
    """Compute and store a kb document's summary, keywords and topics (at ingest). The
    keywords are written first so that the kb's counts include exactly this version."""
    if document.kb_id is None:
        return
    keywords = keyword_counts(chunks)
    summary = summarise(chunks)
    store.put_summary(document.tenant, document.id, summary, [], keywords)
    documents, df = store.term_counts(document.tenant, document.kb_id, list(keywords))
    store.put_summary(document.tenant, document.id, summary, distinctive_topics(keywords, documents, df))


def reindex(store: Store, tenant: str, kb_id: str | None = None) -> int:
    """Rebuild graph facts and summaries from stored chunks (documents ingested before
    the graph existed); returns how many documents were indexed. No re-embedding."""
    count = 0
    for document in store.list_documents(tenant, kb_id):
        chunks = store.get_chunks(tenant, document.id)
        if chunks:
            index_graph(store, document, chunks)
            index_summary(store, document, chunks)
            count += 1
    return count


def _relevance(entry: MapEntry, words: set[str]) -> int:
    terms = {w for t in entry.topics for w in t.split()} | set(_content_words(entry.title))
    return len(words & terms)


def kb_map_entries(store: Store, tenant: str, kb_id: str, *, limit: int | None = None,
                   queries: Sequence[str] = ()) -> tuple[int, list[MapEntry]]:
    """(documents in the kb, entries in ingest order, topics recomputed against the kb
    as it is now). With `limit`, at most that many entries: those whose title and topics
    share most words with `queries` (ties: ingest order)."""
    entries = store.kb_map(tenant, kb_id)
    total = len(entries)
    if limit is not None and total > limit:
        words = {w for q in queries for w in _content_words(q)}
        order = sorted(range(total), key=lambda i: (-_relevance(entries[i], words), i))
        entries = [entries[i] for i in sorted(order[:max(limit, 0)])]
    keywords = store.document_keywords(tenant, [e.document_id for e in entries])
    documents, df = store.term_counts(tenant, kb_id, sorted({t for kw in keywords.values() for t in kw}))
    return total, [replace(e, topics=tuple(distinctive_topics(keywords[e.document_id], documents, df)))
                   if keywords.get(e.document_id) else e for e in entries]


def format_kb_map(kb: KnowledgeBase, entries: Sequence[MapEntry], *, total: int | None = None,
                  max_documents: int = MAX_DOCUMENTS) -> str:
    """Seed 002's AVAILABLE KNOWLEDGE block for one kb: the first `max_documents`
    entries, and a `... and N more documents` line for the rest of `total` (default:
    the number of entries)."""
    total = len(entries) if total is None else total
    lines = [f'KB "{one_line(kb.name, 120)}": {total} document{"" if total == 1 else "s"}']
    shown = list(entries[:max_documents])
    for e in shown:
        line = f'- "{one_line(e.title or e.filename, 120)}"'
        if e.topics:
            line += " [" + ", ".join(e.topics) + "]"
        if e.summary:
            line += " -- " + one_line(e.summary, SNIPPET_CHARS)
        lines.append(line)
    if total > len(shown):
        lines.append(f"... and {total - len(shown)} more documents")
    return "\n".join(lines)


def kb_map_context(store: Store, tenant: str, kbs: Sequence[KnowledgeBase], queries: Sequence[str], *,
                   max_documents: int = MAX_DOCUMENTS) -> str:
    """The AVAILABLE KNOWLEDGE body of a chat over `kbs`: one block per non-empty kb,
    listing at most `max_documents` documents (those closest to the queries)."""
    blocks = []
    for kb in kbs:
        total, entries = kb_map_entries(store, tenant, kb.id, limit=max_documents, queries=queries)
        if total:
            blocks.append(format_kb_map(kb, entries, total=total, max_documents=max_documents))
    return "\n\n".join(blocks)
