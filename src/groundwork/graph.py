"""The knowledge graph of a kb: entities and relations extracted at ingest, walked at
answer time (ARCHITECTURE §3.4).

Extraction is offline, deterministic and explainable; no model is involved:

1. Sentences: each chunk is cut at blank lines and list/heading lines, then into
   sentences (`chunk.split_sentences`). Overlapping chunks repeat whole sentences, so a
   sentence is counted once and remembers every chunk it appears in.
2. Entities, per sentence:
   - runs of capitalised words, acronyms and codes joined by single spaces, optionally
     across "of", "for", "de", "&"... ("ADA Standards of Care", "Bank of England"), or
     followed by a number that is not a year ("ISO 9001", "Type 2 Diabetes");
   - acronyms ("FDA", "NHS") and terms mixing letters and digits or inner capitals
     ("HbA1c", "COVID-19", "eGFR"), but not quantities ("5mg", "2nd");
   - double-quoted terms of one to five words ("Sick Day Rules").
   Leading and trailing stop/common words are dropped ("The Eiffel Tower" -> "Eiffel
   Tower", "However" -> nothing). A single capitalised word that starts a sentence is
   only kept if the same word is capitalised somewhere mid-sentence in the document
   (otherwise it is just a sentence start). Title-case lines that look like headings
   give only their acronyms and codes.
   Matching key: case-folded word tokens ("COVID-19" -> "covid 19", "Acme's" ->
   "acme"); display name: the most frequent surface form. Type guess: `acronym`
   (one all-caps token), `term` (has a digit or inner capitals, or was quoted), `name`
   (capitalised words). Description: the first sentence it appears in, trimmed.
3. Relations: two entities in the same sentence are `related_to`, weighted by the
   number of sentences they share. When two entities are adjacent and the few words
   between them contain a verb from a small table ("lowers" -> `reduces`, "leads to"
   -> `causes`, "is part of" -> `part_of`...), the relation takes that verb's label and
   its direction (passive "is measured by" is reversed). Every entity and relation
   keeps the chunk indexes it came from.

Limits, honestly: only *named* things are found; lower-case common nouns ("insulin",
"kidney function") are not entities unless quoted, so a text that never capitalises its
key terms gives a sparse graph. Title-case prose and all-caps shouting produce noise;
"and" never joins a name ("Food and Drug Administration" becomes two entities);
aliases ("Food and Drug Administration" / "FDA") are not merged; co-occurrence is
not meaning, and the verb table is small and English-only. Queries match entities by
exact normalised name (word n-grams of the question, singular/plural folded), never
by substring or meaning.

Search: the query's n-grams are looked up as entity keys, then the store walks 1-2
hops of relations with a recursive CTE, filtered by tenant and scope in SQL
(`Store.graph_neighbourhood`); `build_result` ranks and aggregates what it found, and
`format_graph` renders the KNOWLEDGE GRAPH CONTEXT lines of seed 002.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .chunk import split_sentences
from .store.textquery import STOP_WORDS
from .types import Chunk, Document, KnowledgeBase, Scope

if TYPE_CHECKING:
    from .store import Store

MAX_ENTITIES = 15  # in the prompt's graph section
MAX_CONNECTIONS = 20
MAX_DOCUMENT_ENTITIES = 5000  # per document, by mentions
MAX_DOCUMENT_RELATIONS = 20000
MAX_QUERY_KEYS = 400
_MAX_PHRASE = 6  # words in one entity name
_MAX_SENTENCE_ENTITIES = 8  # pairs per sentence grow quadratically
_MAX_GAP_WORDS = 8  # words between two entities for a verb to type their relation
_DESCRIPTION_CHARS = 200

# Words that start sentences capitalised or name nothing in particular.
COMMON = STOP_WORDS | frozenset("""
also although however therefore thus hence meanwhile moreover furthermore otherwise
yes no not please note notes see table figure fig section chapter page step steps example
summary introduction conclusion overview background results methods discussion appendix
today yesterday tomorrow monday tuesday wednesday thursday friday saturday sunday january
february march april may june july august september october november december mr mrs ms
dr prof sir madam dear hello hi thanks thank many every each another overall finally
first second third next last one two three four five ten since unless whereas whether
let us we our you it this these those there here what when where which who why how
""".split())
CONNECTORS = frozenset({"of", "for", "de", "del", "la", "le", "van", "von", "der", "du", "da", "&", "on"})

_TOKEN = re.compile(r"[^\W_](?:[\w'’.\-/&]*[^\W_])?")
_KEY_TOKEN = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"['’]s\b")
_QUANTITY = re.compile(r"\d+(?:[.,]\d+)?[a-zA-Zµ%]{1,4}|\d+(?:st|nd|rd|th)", re.I)
_YEAR = re.compile(r"1[89]\d\d|20\d\d")
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,60})[\"”]")
_LINE_MARK = re.compile(r"^\s*(?:#{1,6}|[*\-•>]|\d{1,3}[.)])\s+")
_PARAGRAPHS = re.compile(r"\n\s*\n|\n(?=\s*(?:#{1,6}|[*\-•>]|\d{1,3}[.)])\s)")
_SPACE = re.compile(r"\s+")

_VERBS = {  # label: its verb forms, "|"-separated
    "causes": "causes|caused|cause|leads to|led to|lead to|results in|resulted in|triggers|triggered",
    "treats": "treats|treated|treat",
    "prevents": "prevents|prevented|prevent",
    "reduces": "reduces|reduced|reduce|lowers|lowered|lower|decreases|decreased|decrease",
    "increases": "increases|increased|increase|raises|raised|raise|improves|improved|improve",
    "inhibits": "inhibits|inhibited|inhibit|blocks|blocked|block",
    "requires": "requires|required|require|needs|needed",
    "includes": "includes|included|include|contains|contained|contain|comprises|comprised",
    "uses": "uses|used|use",
    "produces": "produces|produced|produce|manufactures|manufactured|makes|made",
    "regulates": "regulates|regulated|regulate|oversees|oversaw|approves|approved|approve",
    "owns": "owns|owned|acquired|acquires|acquire|bought|buys",
    "founded": "founded|co-founded|founds",
    "measures": "measures|measured|measure|monitors|monitored|monitor|tests|tested",
    "replaces": "replaces|replaced|replace|supersedes|superseded",
    "located_in": "located in|based in|headquartered in",
    "part_of": "part of|member of|belongs to|belong to|subsidiary of|division of",
    "is_a": "is a|is an|was a|was an",
}
_VERB_LABEL = {form: label for label, forms in _VERBS.items() for form in forms.split("|")}
_VERB = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _VERB_LABEL), key=len, reverse=True)) + r")\b")
_PASSIVE = re.compile(r"\b(?:is|are|was|were|be|been|being)\b.*\bby(?:\s+(?:the|a|an))?$")
_CLAUSE_BREAK = re.compile(r"[;:()\[\]]|\bbut\b|\bwhile\b|\bwhereas\b|\bunlike\b|\bnot\b")


@dataclass(frozen=True)
class Entity:
    """A named thing. At ingest `chunks` are the chunk indexes of its document; in a
    search result `depth` is its distance in hops from an entity the query named and
    `refs` are (document id, chunk index) pairs where it appears."""

    key: str  # normalised name: what matching and relations use
    name: str
    type: str  # acronym | name | term
    description: str = ""
    mentions: int = 1
    chunks: tuple[int, ...] = ()
    depth: int = 0
    refs: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Relation:
    """`source --[type]--> target` between entity keys; `weight` counts the sentences
    that state it."""

    source: str
    target: str
    type: str = "related_to"
    weight: int = 1
    description: str = ""
    chunks: tuple[int, ...] = ()
    refs: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class GraphResult:
    matched: tuple[str, ...] = ()  # keys of the entities the query named
    entities: tuple[Entity, ...] = ()  # nearest first
    relations: tuple[Relation, ...] = ()


# -- text helpers (shared with kbmap) -------------------------------------------------
def normalise(name: str) -> str:
    """The matching key of a name: case-folded word tokens, possessive dropped."""
    return " ".join(_KEY_TOKEN.findall(_POSSESSIVE.sub("", name).casefold()))


def one_line(text: str, limit: int = _DESCRIPTION_CHARS) -> str:
    """Whitespace folded; cut at a word boundary with an ellipsis past `limit`."""
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:-")
    return cut + "…"


def sentences(chunks: Iterable[Chunk]) -> list[tuple[str, tuple[int, ...]]]:
    """The document's sentences in order, each once, with the chunks it appears in."""
    found: dict[str, list[int]] = {}
    for chunk in chunks:
        for paragraph in _PARAGRAPHS.split(chunk.text):
            paragraph = _SPACE.sub(" ", " ".join(_LINE_MARK.sub("", line) for line in paragraph.splitlines()))
            for start, end in split_sentences(paragraph.strip()):
                sentence = paragraph.strip()[start:end].strip()
                if sentence:
                    where = found.setdefault(sentence, [])
                    if chunk.index not in where:
                        where.append(chunk.index)
    return [(s, tuple(where)) for s, where in found.items()]


# -- extraction -----------------------------------------------------------------------
@dataclass
class _Token:
    text: str
    kind: str  # cap | acronym | code | number | word
    start: int
    end: int


def _kind(token: str) -> str:
    letters = [c for c in token if c.isalpha()]
    if not letters:
        return "number" if token[0].isdigit() else "word"
    if any(c.isdigit() for c in token):
        return "word" if _QUANTITY.fullmatch(token) else "code"
    upper = sum(c.isupper() for c in letters)
    if upper == len(letters) and 2 <= len(letters) <= 10:
        return "acronym"
    if token[0].isupper():
        return "cap"
    return "code" if upper else "word"  # eGFR, mRNA, iPhone


def _tokens(sentence: str) -> list[_Token]:
    return [_Token(m.group(), _kind(m.group()), m.start(), m.end()) for m in _TOKEN.finditer(sentence)]


def _heading_like(sentence: str, tokens: list[_Token]) -> bool:
    words = [t for t in tokens if t.kind != "number" and len(t.text) > 3]
    caps = sum(t.kind in ("cap", "acronym") for t in words)
    shouting = sum(t.kind == "acronym" for t in words)
    return (len(words) >= 3 and caps == len(words) and not sentence.rstrip().endswith((".", "?", "!"))
            ) or (len(words) >= 3 and shouting * 2 > len(words))


def _common(token: _Token) -> bool:
    return token.kind not in ("acronym", "code") and normalise(token.text) in COMMON


def _phrases(sentence: str, tokens: list[_Token], mid_caps: set[str] | None):
    """(start, end, surface, type) of the capitalised/acronym/code runs of a sentence."""
    heading = _heading_like(sentence, tokens)
    joined = lambda a, b: sentence[tokens[a].end:tokens[b].start] == " "  # noqa: E731
    i, n = 0, len(tokens)
    while i < n:
        if tokens[i].kind not in ("cap", "acronym", "code"):
            i += 1
            continue
        parts, j = [i], i
        while j + 1 < n and joined(j, j + 1):
            nxt = tokens[j + 1]
            if nxt.kind in ("cap", "acronym", "code"):
                parts.append(j + 1)
            elif (nxt.kind == "number" and tokens[j].kind in ("cap", "acronym") and len(nxt.text) <= 5
                  and not _YEAR.fullmatch(nxt.text)):
                parts.append(j + 1)
            elif (nxt.text.lower() in CONNECTORS and j + 2 < n and joined(j + 1, j + 2)
                  and tokens[j + 2].kind in ("cap", "acronym")):
                parts += [j + 1, j + 2]
            else:
                break
            j = parts[-1]
        i = j + 1
        while parts and (_common(tokens[parts[0]]) or tokens[parts[0]].text.lower() in CONNECTORS
                         or tokens[parts[0]].kind == "number"):
            parts.pop(0)
        while parts and (_common(tokens[parts[-1]]) or tokens[parts[-1]].text.lower() in CONNECTORS):
            parts.pop()
        if not parts or len(parts) > _MAX_PHRASE:
            continue
        kinds = [tokens[p].kind for p in parts]
        if heading and not (len(parts) == 1 and kinds[0] in ("acronym", "code")):
            continue
        if len(parts) == 1 and kinds[0] == "cap":
            word = normalise(tokens[parts[0]].text)
            if len(word) < 2:
                continue
            if mid_caps is not None and parts[0] == 0 and word not in mid_caps:
                continue  # just a capitalised sentence start
        start, end = tokens[parts[0]].start, tokens[parts[-1]].end
        surface = _POSSESSIVE.sub("", sentence[start:end])
        if "code" in kinds or "number" in kinds:
            kind = "term"
        elif kinds == ["acronym"]:
            kind = "acronym"
        else:
            kind = "name"
        yield start, end, surface, kind


def _sentence_entities(sentence: str, mid_caps: set[str]) -> list[tuple[int, int, str, str, str]]:
    """(start, end, key, surface, type) of the entities of one sentence, in order."""
    found = [(s, 1, e, normalise(surface), surface, kind)
             for s, e, surface, kind in _phrases(sentence, _tokens(sentence), mid_caps)]
    for m in _QUOTED.finditer(sentence):
        words = m.group(1).split()
        key = normalise(m.group(1))
        if 1 <= len(words) <= 5 and key and not all(w in COMMON for w in key.split()):
            found.append((m.start(1), 0, m.end(1), key, m.group(1).strip(), "term"))  # quoted wins a tie
    found.sort()
    seen: set[str] = set()
    result = []
    for start, _, end, key, surface, kind in found:
        if key and key not in seen and not key.isdigit():
            seen.add(key)
            result.append((start, end, key, surface, kind))
    return result


def _mid_caps(all_sentences: Sequence[str]) -> set[str]:
    """Capitalised words seen somewhere other than at the start of a sentence."""
    words: set[str] = set()
    for sentence in all_sentences:
        for token in _tokens(sentence)[1:]:
            if token.kind == "cap":
                words.add(normalise(token.text))
    return words


def _relation_type(gap: str) -> tuple[str, bool]:
    """(label, reversed) from the words between two adjacent entities."""
    text = _SPACE.sub(" ", gap.lower()).strip(" ,-–—")
    if not text or len(text.split()) > _MAX_GAP_WORDS or _CLAUSE_BREAK.search(text):
        return "related_to", False
    verbs = list(_VERB.finditer(text))
    if not verbs:
        return "related_to", False
    return _VERB_LABEL[verbs[-1].group(1)], bool(_PASSIVE.search(text))


def extract_graph(chunks: Sequence[Chunk]) -> tuple[list[Entity], list[Relation]]:
    """Entities and relations of one document's chunks (see the module docstring)."""
    units = sentences(chunks)
    mid_caps = _mid_caps([s for s, _ in units])
    surfaces: dict[str, Counter] = defaultdict(Counter)
    types: dict[str, Counter] = defaultdict(Counter)
    first: dict[str, str] = {}
    mentions: Counter = Counter()
    entity_chunks: dict[str, set[int]] = defaultdict(set)
    weights: Counter = Counter()
    rel_first: dict[tuple[str, str, str], str] = {}
    rel_chunks: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    for sentence, where in units:
        found = _sentence_entities(sentence, mid_caps)[:_MAX_SENTENCE_ENTITIES]
        for _, _, key, surface, kind in found:
            surfaces[key][surface] += 1
            types[key][kind] += 1
            first.setdefault(key, sentence)
            mentions[key] += 1
            entity_chunks[key].update(where)
        for a in range(len(found)):
            for b in range(a + 1, len(found)):
                label, backwards = "related_to", False
                if b == a + 1:
                    label, backwards = _relation_type(sentence[found[a][1]:found[b][0]])
                source, target = found[a][2], found[b][2]
                if backwards:
                    source, target = target, source
                if label == "related_to" and target < source:
                    source, target = target, source  # undirected: one row per pair
                edge = (source, target, label)
                weights[edge] += 1
                rel_first.setdefault(edge, sentence)
                rel_chunks[edge].update(where)
    kept = {key for key, _ in mentions.most_common(MAX_DOCUMENT_ENTITIES)}
    entities = [Entity(key=key, name=surfaces[key].most_common(1)[0][0], type=types[key].most_common(1)[0][0],
                       description=one_line(first[key]), mentions=mentions[key],
                       chunks=tuple(sorted(entity_chunks[key])))
                for key in mentions if key in kept]
    relations = [Relation(source=s, target=t, type=label, weight=w, description=one_line(rel_first[(s, t, label)]),
                          chunks=tuple(sorted(rel_chunks[(s, t, label)])))
                 for (s, t, label), w in weights.most_common(MAX_DOCUMENT_RELATIONS) if s in kept and t in kept]
    return entities, relations


def index_graph(store: Store, document: Document, chunks: Sequence[Chunk]) -> None:
    """Extract and store a document's graph, replacing what it had (at ingest)."""
    entities, relations = extract_graph(chunks)
    store.put_graph(document.tenant, document.id, entities, relations)


# -- search -----------------------------------------------------------------------------
_QUERY_NOISE = re.compile(r"\b(?:Recent conversation|Current query|user|assistant|developer):", re.I)


def query_keys(query: str) -> list[str]:
    """Candidate entity keys named by a question: its word n-grams (1-6 words) that
    neither start nor end with a stop word, with the last word's plural folded both
    ways ("statins" also looks up "statin")."""
    words = normalise(_QUERY_NOISE.sub(" ", query)).split()
    keys: list[str] = []
    for size in range(1, _MAX_PHRASE + 1):
        for i in range(len(words) - size + 1):
            gram = words[i:i + size]
            if gram[0] in COMMON or gram[-1] in COMMON or gram[0].isdigit():
                continue
            if size == 1 and len(gram[0]) < 2:
                continue
            keys.append(" ".join(gram))
            last = gram[-1]
            if last.endswith("s") and len(last) > 3:
                keys.append(" ".join([*gram[:-1], last[:-1]]))
            elif last.isalpha():
                keys.append(" ".join([*gram[:-1], last + "s"]))
    return list(dict.fromkeys(keys))


def graph_search(store: Store, scope: Scope, query: str | Sequence[str], *, hops: int = 2,
                 limit: int = MAX_ENTITIES, relation_limit: int = MAX_CONNECTIONS) -> GraphResult:
    """Entities the query names, and their neighbourhood up to `hops` (1-2) relations
    away, inside `scope` (tenant and kbs filtered in the store's SQL)."""
    queries = [query] if isinstance(query, str) else list(query)
    keys = list(dict.fromkeys(k for q in queries for k in query_keys(q)))[:MAX_QUERY_KEYS]
    if not keys or limit <= 0:
        return GraphResult()
    return store.graph_neighbourhood(scope, keys, hops=max(1, min(int(hops), 2)), limit=limit,
                                     relation_limit=relation_limit)


def build_result(reached: Sequence[tuple[str, int]], entity_rows: Iterable[tuple],
                 relation_rows: Iterable[tuple], relation_limit: int) -> GraphResult:
    """Aggregate a store's rows into a GraphResult (shared by every store).

    `reached`: (key, depth) ranked best first; `entity_rows`: (key, name, type,
    description, mentions, document id, chunk indexes); `relation_rows`: (source,
    target, type, weight, description, document id, chunk indexes), both endpoints in
    `reached`. Per key, the name, type and description come from the document that
    mentions it most; a typed relation hides `related_to` between the same pair."""
    depth = dict(reached)
    best: dict[str, tuple] = {}
    mentions: Counter = Counter()
    refs: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for key, name, kind, description, count, document_id, chunks in entity_rows:
        mentions[key] += count
        refs[key].extend((document_id, c) for c in chunks)
        if key not in best or count > best[key][3]:
            best[key] = (name, kind, description, count)
    entities = tuple(Entity(key=key, name=best[key][0], type=best[key][1], description=best[key][2],
                            mentions=mentions[key], depth=d, refs=tuple(refs[key][:10]))
                     for key, d in reached if key in best)
    weight: Counter = Counter()
    heaviest: dict[tuple[str, str, str], tuple[int, str]] = {}
    rel_refs: dict[tuple[str, str, str], list[tuple[str, int]]] = defaultdict(list)
    for source, target, kind, w, description, document_id, chunks in relation_rows:
        edge = (source, target, kind)
        weight[edge] += w
        rel_refs[edge].extend((document_id, c) for c in chunks)
        if edge not in heaviest or w > heaviest[edge][0]:
            heaviest[edge] = (w, description)
    typed = {frozenset((s, t)) for s, t, kind in weight if kind != "related_to"}
    edges = [e for e in weight if e[0] in best and e[1] in best
             and not (e[2] == "related_to" and frozenset(e[:2]) in typed)]
    edges.sort(key=lambda e: (min(depth[e[0]], depth[e[1]]), max(depth[e[0]], depth[e[1]]),
                              -weight[e], e))
    relations = tuple(Relation(source=s, target=t, type=kind, weight=weight[(s, t, kind)],
                               description=heaviest[(s, t, kind)][1], refs=tuple(rel_refs[(s, t, kind)][:10]))
                      for s, t, kind in edges[:relation_limit])
    matched = tuple(key for key, d in reached if d == 0 and key in best)
    return GraphResult(matched=matched, entities=entities, relations=relations)


def format_graph(result: GraphResult, *, description_chars: int = 160) -> str:
    """Seed 002's KNOWLEDGE GRAPH CONTEXT body: one `Related entities:` line, then one
    `Connections:` line per relation; empty when nothing was found."""
    if not result.entities:
        return ""
    names = {e.key: one_line(e.name, 80) for e in result.entities}
    described = []
    for e in result.entities:
        text = one_line(e.description, description_chars).rstrip(".").replace(";", ",")  # ";" separates
        described.append(f"{names[e.key]} ({e.type})" + (f" -- {text}" if text else ""))
    lines = ["Related entities: " + "; ".join(described)]
    for r in result.relations:
        line = f"Connections: {names[r.source]} --[{r.type}]--> {names[r.target]}"
        lines.append(line + (f": {one_line(r.description, description_chars)}" if r.description else ""))
    return "\n".join(lines)


def graph_context(store: Store, tenant: str, kbs: Sequence[KnowledgeBase], queries: Sequence[str]) -> str:
    """The graph section of a chat over `kbs` (empty without kbs or matches)."""
    if not kbs or not queries:
        return ""
    scope = Scope(tenant=tenant, kb_ids=tuple(kb.id for kb in kbs))
    return format_graph(graph_search(store, scope, queries, hops=2, limit=MAX_ENTITIES,
                                     relation_limit=MAX_CONNECTIONS))
