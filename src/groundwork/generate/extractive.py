"""The answerer used when no LLM is configured: quote the retrieved sentences that best
answer the question, each with its chunk's `[n]`, or abstain.

Sentences are scored against the question by cosine similarity of their embeddings (one
`embed` call for the question and every sentence), blended with the share of the
question's content words the sentence contains. Below the calibrated threshold the
answerer says it does not have the information and offers a human instead."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from groundwork.cite import content_words, split_sentences
from groundwork.embed import Embedder
from groundwork.prompt import REFUSAL
from groundwork.types import Generation, Hit, Usage

# Both chosen by bench/calibrate_abstain.py on XQuAD-en (400 questions, split into a
# calibration and a held-out half): the weight by AUC, the threshold by accuracy on a
# realistic mix where answerable cases count half and each kind of unanswerable case a
# quarter: passages from other articles, and the harder, topical passages from the
# question's own article (what one kb returns). Held-out at 0.437: accuracy 0.917 on the
# mix, 7.3% false abstentions on answerable questions, abstention recall 1.000 on
# other-article and 0.813 on same-article passages; 93% of answers contain the gold
# answer string. See bench/RESULTS.md, "Abstention threshold (extractive answerer)".
CALIBRATED_THRESHOLD = 0.437
# Weight of lexical overlap in the sentence score (0 = cosine only).
LEXICAL_WEIGHT = 0.45
# A sentence may join the answer when it scores at least this share of the best one (and
# above the threshold): questions often need two or three facts ("potassium and
# creatinine"), each in its own sentence.
RELATIVE = 0.6
# Sentence pairs more similar than this count as the same sentence (overlapping chunks).
DUPLICATE_COSINE = 0.92
MIN_WORDS = 4  # shorter pieces are headings or fragments, not answers

ESCALATION_OFFER = "I can pass your question to a human colleague if you would like."
ABSTENTION_TEXT = f"{REFUSAL}. {ESCALATION_OFFER}"


@dataclass(frozen=True)
class ScoredSentence:
    text: str
    hit_number: int  # 1-based position of its hit, i.e. its [n]
    position: int  # order of the sentence inside its chunk
    score: float
    cosine: float
    vector: np.ndarray


_CACHE: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_CACHE_SIZE = 50_000  # ~75 MB of 384-d vectors at most
_CACHE_LOCK = threading.Lock()


def _embed_cached(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embed with a bounded LRU per (model, text): the same chunks are retrieved again
    and again, and re-embedding their sentences dominated the answerer's time."""
    model = getattr(embedder, "model_id", "")
    with _CACHE_LOCK:
        found = {t: _CACHE[(model, t)] for t in texts if (model, t) in _CACHE}
        for t in found:
            _CACHE.move_to_end((model, t))
    todo = list(dict.fromkeys(t for t in texts if t not in found))
    if todo:
        fresh = np.asarray(embedder.embed(todo), dtype=np.float32)
        with _CACHE_LOCK:
            for t, v in zip(todo, fresh):
                found[t] = _CACHE[(model, t)] = v
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return np.vstack([found[t] for t in texts])


def lexical_overlap(question_words: set[str], sentence: str) -> float:
    """Share of the question's content words that the sentence contains."""
    if not question_words:
        return 0.0
    return len(question_words & content_words(sentence)) / len(question_words)


def rank_sentences(question: str, hits: Sequence[Hit], embedder: Embedder, *,
                   lexical_weight: float = LEXICAL_WEIGHT) -> list[ScoredSentence]:
    """Every sentence of the hits' chunks, best first."""
    candidates: list[tuple[str, int, int]] = []
    for number, hit in enumerate(hits, start=1):
        for position, sentence in enumerate(split_sentences(hit.chunk.text)):
            if len(sentence.split()) >= MIN_WORDS:
                candidates.append((sentence, number, position))
    if not candidates or not question.strip():
        return []
    vectors = _embed_cached(embedder, [question] + [c[0] for c in candidates])
    cosines = vectors[1:] @ vectors[0]
    question_words = content_words(question)
    ranked = []
    for (sentence, number, position), cosine, vector in zip(candidates, cosines, vectors[1:]):
        lexical = lexical_overlap(question_words, sentence)
        score = (1 - lexical_weight) * float(cosine) + lexical_weight * lexical
        ranked.append(ScoredSentence(sentence, number, position, score, float(cosine), vector))
    ranked.sort(key=lambda s: -s.score)
    return ranked


def select(ranked: Sequence[ScoredSentence], max_sentences: int, *,
           relative: float = RELATIVE) -> list[ScoredSentence]:
    """The best sentence plus those close behind it, without near-duplicates, in context
    order (by hit, then by position in the chunk)."""
    if not ranked:
        return []
    # The threshold decides whether to answer at all (on the best sentence); supporting
    # sentences only need to come close to the best one.
    floor = relative * ranked[0].score
    chosen: list[ScoredSentence] = []
    for sentence in ranked:
        if len(chosen) >= max_sentences or sentence.score < floor:
            break
        if any(float(sentence.vector @ c.vector) >= DUPLICATE_COSINE
               or sentence.text == c.text for c in chosen):
            continue
        chosen.append(sentence)
    return sorted(chosen, key=lambda s: (s.hit_number, s.position))


def extractive_answer(question: str, hits: Sequence[Hit], embedder: Embedder, *,
                      threshold: float = CALIBRATED_THRESHOLD,
                      max_sentences: int = 3,
                      lexical_weight: float = LEXICAL_WEIGHT) -> Generation:
    """Quote up to `max_sentences` supporting sentences, each followed by its `[n]`, or
    abstain (`abstained=True`) when the best sentence scores below `threshold`."""
    ranked = rank_sentences(question, hits, embedder, lexical_weight=lexical_weight)
    if not ranked or ranked[0].score < threshold:
        return Generation(text=ABSTENTION_TEXT, usage=Usage(), abstained=True)
    chosen = select(ranked, max_sentences)
    text = " ".join(f"{s.text} [{s.hit_number}]" for s in chosen)
    return Generation(text=text, usage=Usage())
