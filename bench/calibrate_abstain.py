"""Calibrate the extractive answerer's abstention threshold on XQuAD (English).

Cases, built per question from shared/eval/data/xquad-en:
  answerable   = the question's own paragraph + 2 paragraphs from other articles
  unanswerable = 3 paragraphs from other articles
A deterministic sample of questions (hash of the id) is split in two by another hash:
the calibration half picks the lexical weight and the threshold that maximise accuracy
(each question gives one case of each kind, so accuracy is also balanced accuracy); the
held-out half reports accuracy, precision and recall of abstention, and how often the
answer text contains a gold XQuAD answer string.

    OMP_NUM_THREADS=1 .venv/bin/python bench/calibrate_abstain.py [--sample 400]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

from groundwork.cite import split_sentences
from groundwork.generate.extractive import (
    CALIBRATED_THRESHOLD, LEXICAL_WEIGHT, extractive_answer, rank_sentences)
from groundwork.types import Chunk, Document, Hit

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("XQUAD_DIR", "/work/shared/eval/data/xquad-en"))
WEIGHTS = (0.0, 0.15, 0.3, 0.45, 0.6)
HEADING = "## Abstention threshold (extractive answerer)"


def _h(text: str, salt: str) -> int:
    return int(hashlib.sha256(f"{salt}:{text}".encode()).hexdigest()[:12], 16)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class CachedEmbedder:
    """Embeds every distinct text once (the corpus is 240 paragraphs)."""

    def __init__(self, inner) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.cache: dict[str, np.ndarray] = {}

    def prefetch(self, texts: list[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        for start in range(0, len(todo), 128):
            batch = todo[start:start + 128]
            for text, vector in zip(batch, self.inner.embed(batch)):
                self.cache[text] = vector

    def embed(self, texts):
        self.prefetch(list(texts))
        return np.stack([self.cache[t] for t in texts])

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def _hits(paragraphs: list[dict]) -> list[Hit]:
    hits = []
    for p in paragraphs:
        doc = Document(id=p["_id"], tenant="default", kb_id="xquad", filename=p["_id"],
                       title=p["title"], content_type="text/plain", size=len(p["text"]),
                       content_hash="")
        hits.append(Hit(Chunk(document_id=p["_id"], index=0, text=p["text"]), doc, 0.5))
    return hits


def build_cases(sample: int) -> list[dict]:
    queries = _read(DATA / "queries.jsonl")
    corpus = {p["_id"]: p for p in _read(DATA / "corpus.jsonl")}
    qrels = {}
    for line in (DATA / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, pid, *_ = line.split("\t")
        qrels[qid] = pid
    queries = sorted(queries, key=lambda q: _h(q["_id"], "sample"))[:sample]
    cases = []
    for q in queries:
        own = corpus[qrels[q["_id"]]]
        others = sorted(pid for pid, p in corpus.items() if p["title"] != own["title"])
        rng = random.Random(_h(q["_id"], "passages"))
        distractors = rng.sample(others, 5)
        half = "calibration" if _h(q["_id"], "split") % 2 == 0 else "held-out"
        answerable = [own] + [corpus[d] for d in distractors[:2]]
        rng.shuffle(answerable)
        # A harder, reported-only kind: 3 other paragraphs of the same article (topical,
        # like a real kb), kept only when none of them contains a gold answer string.
        siblings = sorted(pid for pid, p in corpus.items()
                          if p["title"] == own["title"] and pid != own["_id"])
        same = [corpus[pid] for pid in rng.sample(siblings, min(3, len(siblings)))]
        kinds = [("answerable", answerable),
                 ("unanswerable", [corpus[d] for d in distractors[2:]])]
        if not any(_contains(p["text"], q["answers"]) for p in same):
            kinds.append(("same-article", same))
        for kind, paras in kinds:
            cases.append({"id": q["_id"], "question": q["text"], "answers": q["answers"],
                          "kind": kind, "half": half, "hits": _hits(paras)})
    return cases


def _best_threshold(scores: np.ndarray, unanswerable: np.ndarray) -> tuple[float, float]:
    """Threshold (abstain when score < t) with the best accuracy. Candidates are midpoints
    between observed scores; among equally good ones take the middle of the plateau, so a
    wide gap between the two kinds is split in half rather than at one edge."""
    values = np.unique(scores)
    candidates = np.concatenate([[values[0] - 1e-3], (values[1:] + values[:-1]) / 2,
                                 [values[-1] + 1e-3]])
    accs = np.array([np.mean((scores < t) == unanswerable) for t in candidates])
    best = np.flatnonzero(accs >= accs.max() - 1e-12)
    return float((candidates[best[0]] + candidates[best[-1]]) / 2), float(accs.max())


def _auc(scores: np.ndarray, unanswerable: np.ndarray) -> float:
    """P(an answerable case outscores an unanswerable one); threshold-free separation."""
    pos, neg = scores[~unanswerable], scores[unanswerable]
    return float(np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])))


def _metrics(scores: np.ndarray, unanswerable: np.ndarray, t: float) -> dict:
    abstain = scores < t
    tp = int(np.sum(abstain & unanswerable))
    return {"accuracy": float(np.mean(abstain == unanswerable)),
            "precision": tp / max(1, int(np.sum(abstain))),
            "recall": tp / max(1, int(np.sum(unanswerable))),
            "false_abstain": float(np.mean(abstain[~unanswerable]))}


def _contains(text: str, answers: list[str]) -> bool:
    norm = " ".join(text.lower().split())
    return any(" ".join(a.lower().split()) in norm for a in answers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    started = time.perf_counter()

    from groundwork.embed.local import LocalEmbedder
    embedder = CachedEmbedder(LocalEmbedder())
    cases = build_cases(args.sample)
    embedder.prefetch([c["question"] for c in cases]
                      + [s for c in cases for h in c["hits"] for s in split_sentences(h.chunk.text)])
    hard = [c for c in cases if c["kind"] == "same-article"]
    cases = [c for c in cases if c["kind"] != "same-article"]
    halves = {h: [c for c in cases if c["half"] == h] for h in ("calibration", "held-out")}
    una = {h: np.array([c["kind"] == "unanswerable" for c in cs]) for h, cs in halves.items()}

    def best_scores(cs: list[dict], weight: float) -> np.ndarray:
        out = []
        for c in cs:
            ranked = rank_sentences(c["question"], c["hits"], embedder, lexical_weight=weight)
            out.append(ranked[0].score if ranked else -1.0)
        return np.array(out)

    rows = []
    for w in WEIGHTS:
        cal, held = best_scores(halves["calibration"], w), best_scores(halves["held-out"], w)
        t, cal_acc = _best_threshold(cal, una["calibration"])
        rows.append({"weight": w, "threshold": round(t, 3), "cal_acc": cal_acc,
                     "cal_auc": _auc(cal, una["calibration"]),
                     **_metrics(held, una["held-out"], round(t, 3))})
    # The weight by calibration AUC (less noisy than accuracy at ~99%), then its threshold.
    chosen = max(rows, key=lambda r: (round(r["cal_auc"], 4), r["cal_acc"], -r["weight"]))
    w, t = chosen["weight"], chosen["threshold"]

    # Do the answers quote the gold answer? (held-out answerable cases, chosen settings)
    answerable = [c for c in halves["held-out"] if c["kind"] == "answerable"]
    answered = contained = top1 = 0
    for c in answerable:
        gen = extractive_answer(c["question"], c["hits"], embedder, threshold=t,
                                lexical_weight=w)
        ranked = rank_sentences(c["question"], c["hits"], embedder, lexical_weight=w)
        top1 += bool(ranked) and _contains(ranked[0].text, c["answers"])
        if not gen.abstained:
            answered += 1
            contained += _contains(gen.text, c["answers"])
    hard_held = [c for c in hard if c["half"] == "held-out"]
    hard_scores = best_scores(hard_held, w)
    hard_recall = float(np.mean(hard_scores < t)) if hard_held else float("nan")
    # For comparison: calibrating against the hard kind instead (answerable vs same-article).
    def mixed(half: str) -> tuple[np.ndarray, np.ndarray]:
        pos = [c for c in halves[half] if c["kind"] == "answerable"]
        neg = [c for c in hard if c["half"] == half]
        return (best_scores(pos + neg, w),
                np.array([False] * len(pos) + [True] * len(neg)))
    hard_t, _ = _best_threshold(*mixed("calibration"))
    hard_m = _metrics(*mixed("held-out"), round(hard_t, 3))
    elapsed = time.perf_counter() - started

    n_q = {h: len(cs) // 2 for h, cs in halves.items()}
    lines = [
        f"Questions: {args.sample} sampled from XQuAD-en (1,190), split "
        f"{n_q['calibration']} calibration / {n_q['held-out']} held-out; each gives one "
        "answerable and one unanswerable case. Score = (1-w)·cosine + w·lexical overlap; "
        "abstain when the best sentence scores below t. Threshold chosen on the calibration "
        "half; figures below are on the held-out half (abstention = positive class).",
        "",
        "| lexical weight w | calib. AUC | threshold t | calib. acc. | held-out acc. "
        "| abstain precision | abstain recall | false abstain (answerable) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        mark = " **(chosen)**" if r is chosen else ""
        lines.append(f"| {r['weight']:.2f}{mark} | {r['cal_auc']:.4f} | {r['threshold']:.3f} "
                     f"| {r['cal_acc']:.3f} "
                     f"| {r['accuracy']:.3f} | {r['precision']:.3f} | {r['recall']:.3f} "
                     f"| {r['false_abstain']:.3f} |")
    lines += [
        "",
        f"- Answer quality with the chosen settings (held-out answerable cases, n={len(answerable)}): "
        f"answered {answered} ({answered / max(1, len(answerable)):.1%}); the answer text "
        f"contains a gold answer string in {contained / max(1, answered):.1%} of answered "
        f"cases ({contained / max(1, len(answerable)):.1%} of all answerable); the top-ranked "
        f"sentence alone contains it in {top1 / max(1, len(answerable)):.1%}.",
        f"- Harder unanswerable cases (3 other paragraphs of the question's own article, none "
        f"containing a gold answer; held-out n={len(hard_held)}, not used for calibration): "
        f"abstention recall {hard_recall:.1%} at the chosen settings. Retrieval from one kb "
        "returns topical passages like these, so expect more confident wrong quotes there "
        "than the main table suggests. Calibrating on answerable vs these instead would give "
        f"t = {hard_t:.3f}: held-out accuracy {hard_m['accuracy']:.3f}, abstention recall "
        f"{hard_m['recall']:.3f}, false abstentions on answerable {hard_m['false_abstain']:.3f}.",
        f"- Values in `extractive.py` when run: CALIBRATED_THRESHOLD = {CALIBRATED_THRESHOLD}, "
        f"LEXICAL_WEIGHT = {LEXICAL_WEIGHT}. Run time {elapsed:.0f} s.",
    ]
    table = "\n".join(lines)
    print(table)
    print(f"\nchosen: LEXICAL_WEIGHT = {w}, CALIBRATED_THRESHOLD = {t}")
    if args.no_write:
        return 0
    cpu = _cpu_model()
    header = [
        "", HEADING, "",
        f"- Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} "
        f".venv/bin/python bench/calibrate_abstain.py --sample {args.sample}`",
        f"- Date: {dt.datetime.now().isoformat(timespec='seconds')}",
        f"- Platform: {platform.platform()}, Python {platform.python_version()}, "
        f"CPU: {cpu} ({os.cpu_count()} logical cores)",
        "- Embedder: all-MiniLM-L6-v2 (LocalEmbedder)", "", "",
    ]
    results = ROOT / "bench" / "RESULTS.md"
    prefix = "" if results.exists() else "# Benchmark results\n"
    with results.open("a") as fh:
        fh.write(prefix + "\n".join(header) + table + "\n")
    print(f"appended to {results}", file=sys.stderr)
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
