"""Turning a natural-language question into a keyword query for BM25 backends."""

from __future__ import annotations

import re

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t don
""".split())

_WORD = re.compile(r"\w+", re.UNICODE)


def keywords(query: str, max_terms: int = 64) -> list[str]:
    """Lower-cased content words of `query`, de-duplicated, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS and word not in seen:
            seen[word] = None
    return list(seen)[:max_terms]


def fts5_match(query: str) -> str | None:
    """An FTS5 MATCH expression: each keyword quoted (so no user text is parsed as FTS
    syntax), OR-ed so BM25 ranks by how many and how rare the matches are."""
    terms = keywords(query)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
