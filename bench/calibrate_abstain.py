"""Calibrate the extractive answerer's abstention threshold on XQuAD (English).

Cases, built per question from shared/eval/data/xquad-en:
  answerable    = the question's own paragraph + 2 paragraphs from other articles
  other-article = 3 paragraphs from other articles (kind "unanswerable" in the code)
  same-article  = 3 other paragraphs of the question's own article, kept only when none
                  of them contains a gold answer string (topical, like a kb's results)
A deterministic sample of questions (hash of the id) is split in two by another hash.
On the calibration half the lexical weight is chosen by the mixed AUC and the threshold
by accuracy on a realistic mix: answerable cases weigh 1/2, each negative kind 1/4. The
held-out half reports that accuracy, false abstentions on answerable cases, abstention
precision/recall per negative kind, and how often the answer text contains a gold XQuAD
answer string. The previous rule (answerable vs other-article only) is still computed
and printed for reference.

    OMP_NUM_THREADS=1 .venv/bin/python bench/calibrate_abstain.py [--sample 400] [--write]
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
sys.path.insert(0, str(ROOT / "bench"))
from results import cpu_model, write_section  # noqa: E402
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


def _best_threshold(scores: np.ndarray, unanswerable: np.ndarray,
                    weights: np.ndarray | None = None) -> tuple[float, float]:
    """Threshold (abstain when score < t) with the best (weighted) accuracy. Candidates are
    midpoints between observed scores; among equally good ones take the middle of the
    plateau, so a wide gap between the two kinds is split in half rather than at one edge."""
    weights = np.ones(len(scores)) if weights is None else weights
    weights = weights / weights.sum()
    values = np.unique(scores)
    candidates = np.concatenate([[values[0] - 1e-3], (values[1:] + values[:-1]) / 2,
                                 [values[-1] + 1e-3]])
    accs = np.array([np.sum(weights * ((scores < t) == unanswerable)) for t in candidates])
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


# The realistic mix the threshold is now chosen on: answerable cases weigh one half, the
# two negative kinds one quarter each (whatever their counts), i.e. answerable vs an
# equal mix of other-article and same-article passages.
MIX = {"answerable": 0.5, "unanswerable": 0.25, "same-article": 0.25}
KIND_NAMES = {"unanswerable": "other-article", "same-article": "same-article"}


class Mix:
    """Scores of one half's cases of every kind for one lexical weight."""

    def __init__(self, scores: dict[str, np.ndarray]) -> None:
        self.scores = scores
        parts = [(k, s) for k, s in scores.items() if len(s)]
        self.all = np.concatenate([s for _, s in parts])
        self.negative = np.concatenate([np.full(len(s), k != "answerable") for k, s in parts])
        self.weights = np.concatenate([np.full(len(s), MIX[k] / len(s)) for k, s in parts])

    def auc(self) -> float:
        """Mixed separation: mean of AUC(answerable vs each negative kind)."""
        pos = self.scores["answerable"]
        aucs = [_auc(np.concatenate([pos, self.scores[k]]),
                     np.array([False] * len(pos) + [True] * len(self.scores[k])))
                for k in ("unanswerable", "same-article")]
        return float(np.mean(aucs))

    def threshold(self) -> tuple[float, float]:
        return _best_threshold(self.all, self.negative, self.weights)

    def report(self, t: float) -> dict:
        """Balanced accuracy on the mix, false abstentions on answerable, and per
        negative kind the abstention recall and precision. Precision is taken at equal
        prevalence (one case of that kind per answerable case):
        recall / (recall + false-abstention rate)."""
        fa = float(np.mean(self.scores["answerable"] < t))
        out = {"false_abstain": fa,
               "accuracy": float(np.sum(self.weights * ((self.all < t) == self.negative)))}
        for kind in ("unanswerable", "same-article"):
            rec = float(np.mean(self.scores[kind] < t))
            out[kind] = {"recall": rec, "precision": rec / (rec + fa) if rec + fa else float("nan"),
                         "n": len(self.scores[kind])}
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--write", action="store_true", help="refresh the section in bench/RESULTS.md")
    args = parser.parse_args()
    started = time.perf_counter()

    from groundwork.embed.local import LocalEmbedder
    embedder = CachedEmbedder(LocalEmbedder())
    cases = build_cases(args.sample)
    embedder.prefetch([c["question"] for c in cases]
                      + [s for c in cases for h in c["hits"] for s in split_sentences(h.chunk.text)])
    by = {(half, kind): [c for c in cases if c["half"] == half and c["kind"] == kind]
          for half in ("calibration", "held-out") for kind in MIX}

    def best_scores(cs: list[dict], weight: float) -> np.ndarray:
        out = []
        for c in cs:
            ranked = rank_sentences(c["question"], c["hits"], embedder, lexical_weight=weight)
            out.append(ranked[0].score if ranked else -1.0)
        return np.array(out)

    def mix(half: str, weight: float) -> Mix:
        return Mix({kind: best_scores(by[half, kind], weight) for kind in MIX})

    old_rows, new_rows = [], []
    for w in WEIGHTS:
        cal, held = mix("calibration", w), mix("held-out", w)
        # Previous rule, kept for reference: answerable vs other-article only.
        two = lambda m: (np.concatenate([m.scores["answerable"], m.scores["unanswerable"]]),
                         np.array([False] * len(m.scores["answerable"])
                                  + [True] * len(m.scores["unanswerable"])))
        t_old, cal_acc_old = _best_threshold(*two(cal))
        old_rows.append({"weight": w, "threshold": round(t_old, 3), "cal_acc": cal_acc_old,
                         "cal_auc": _auc(*two(cal)), **_metrics(*two(held), round(t_old, 3)),
                         "same_recall": float(np.mean(held.scores["same-article"] < round(t_old, 3)))})
        # Current rule: the realistic mix.
        t_new, cal_acc_new = cal.threshold()
        new_rows.append({"weight": w, "threshold": round(t_new, 3), "cal_acc": cal_acc_new,
                         "cal_auc": cal.auc(), "held": held.report(round(t_new, 3))})
    # The weight by calibration AUC (less noisy than accuracy), then its threshold.
    old = max(old_rows, key=lambda r: (round(r["cal_auc"], 4), r["cal_acc"], -r["weight"]))
    chosen = max(new_rows, key=lambda r: (round(r["cal_auc"], 4), r["cal_acc"], -r["weight"]))
    w, t = chosen["weight"], chosen["threshold"]

    def quality(weight: float, threshold: float) -> dict:
        """Answers on held-out answerable cases (with the current `select` rule), and
        how often a negative case still gets an answer."""
        q = {"n": 0, "answered": 0, "contained": 0, "top1": 0, "sentences": 0}
        for c in by["held-out", "answerable"]:
            gen = extractive_answer(c["question"], c["hits"], embedder, threshold=threshold,
                                    lexical_weight=weight)
            ranked = rank_sentences(c["question"], c["hits"], embedder, lexical_weight=weight)
            q["n"] += 1
            q["top1"] += bool(ranked) and _contains(ranked[0].text, c["answers"])
            if not gen.abstained:
                q["answered"] += 1
                q["contained"] += _contains(gen.text, c["answers"])
                q["sentences"] += gen.text.count(" [")
        return q

    q_new, q_old = quality(w, t), quality(old["weight"], old["threshold"])
    elapsed = time.perf_counter() - started

    n_q = {h: len(by[h, "answerable"]) for h in ("calibration", "held-out")}
    n_same = {h: len(by[h, "same-article"]) for h in ("calibration", "held-out")}
    h = chosen["held"]
    lines = [
        f"Questions: {args.sample} sampled from XQuAD-en (1,190), split {n_q['calibration']} "
        f"calibration / {n_q['held-out']} held-out. Each question gives an answerable case (its own "
        "paragraph + 2 paragraphs of other articles), an **other-article** negative (3 paragraphs "
        "of other articles) and, when none of them contains a gold answer string, a "
        "**same-article** negative (3 other paragraphs of its own article: topical passages, like "
        f"a kb returns; {n_same['calibration']} calibration / {n_same['held-out']} held-out). "
        "Score = (1-w)·cosine + w·lexical overlap of the best sentence; abstain when it is "
        "below t (abstention = positive class).",
        "",
        "### Chosen now: threshold on the realistic mix",
        "",
        "t maximises accuracy on the calibration half with answerable cases weighing 1/2 and "
        "each negative kind 1/4 (answerable vs an equal mix of the two kinds); w is chosen by "
        "the calibration mixed AUC (mean of AUC vs each kind). Held-out: accuracy on the same "
        "weighted mix; per negative kind, abstention recall and precision (precision at equal "
        "prevalence, one case of that kind per answerable case: recall / (recall + false "
        "abstention rate)).",
        "",
        "| w | calib. mixed AUC | t | calib. acc. | held-out acc. | false abstain (answerable) "
        "| other-article recall | other-article precision | same-article recall "
        "| same-article precision |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in new_rows:
        mark = " **(chosen)**" if r is chosen else ""
        hr = r["held"]
        lines.append(f"| {r['weight']:.2f}{mark} | {r['cal_auc']:.4f} | {r['threshold']:.3f} "
                     f"| {r['cal_acc']:.3f} | {hr['accuracy']:.3f} | {hr['false_abstain']:.3f} "
                     f"| {hr['unanswerable']['recall']:.3f} | {hr['unanswerable']['precision']:.3f} "
                     f"| {hr['same-article']['recall']:.3f} | {hr['same-article']['precision']:.3f} |")

    def qline(q: dict) -> str:
        return (f"answered {q['answered']} of {q['n']} ({q['answered'] / max(1, q['n']):.1%}); the "
                f"answer contains a gold answer string in {q['contained'] / max(1, q['answered']):.1%} "
                f"of answered cases ({q['contained'] / max(1, q['n']):.1%} of all answerable), "
                f"{q['sentences'] / max(1, q['answered']):.2f} sentences quoted on average; the "
                f"top-ranked sentence alone contains it in {q['top1'] / max(1, q['n']):.1%}")

    lines += [
        "",
        f"- **Chosen: LEXICAL_WEIGHT = {w}, CALIBRATED_THRESHOLD = {t}.** Held-out: accuracy on the "
        f"mix {h['accuracy']:.3f}; false abstentions on answerable {h['false_abstain']:.1%}; "
        f"other-article negatives abstained on {h['unanswerable']['recall']:.1%} (precision "
        f"{h['unanswerable']['precision']:.3f}); same-article negatives abstained on "
        f"{h['same-article']['recall']:.1%} (precision {h['same-article']['precision']:.3f}).",
        f"- Why: the previous rule (below) calibrated against other-article passages only, which "
        "a kb search rarely returns (its results are topical); at its threshold "
        f"(w = {old['weight']}, t = {old['threshold']}) same-article negatives were abstained on "
        f"only {old['same_recall']:.1%} of the time (held-out), i.e. the answerer quoted "
        "unrelated sentences from on-topic passages. The mix accepts more false abstentions on "
        "answerable questions in exchange for abstaining on most on-topic-but-unanswering "
        "passages; other-article negatives stay almost fully covered.",
        f"- Answer quality at the chosen settings (held-out answerable, current `select`: the best "
        f"sentence must reach t, the others >= 0.6 x best): {qline(q_new)}.",
        f"- Same, at the previous settings (w = {old['weight']}, t = {old['threshold']}): {qline(q_old)}.",
        "",
        "### Previous rule, for reference: answerable vs other-article only",
        "",
        "| lexical weight w | calib. AUC | threshold t | calib. acc. | held-out acc. "
        "| abstain precision | abstain recall | false abstain (answerable) | same-article recall |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in old_rows:
        mark = " (was chosen)" if r is old else ""
        lines.append(f"| {r['weight']:.2f}{mark} | {r['cal_auc']:.4f} | {r['threshold']:.3f} "
                     f"| {r['cal_acc']:.3f} | {r['accuracy']:.3f} | {r['precision']:.3f} "
                     f"| {r['recall']:.3f} | {r['false_abstain']:.3f} | {r['same_recall']:.3f} |")
    lines += [
        "",
        f"- Values in `extractive.py` when run: CALIBRATED_THRESHOLD = {CALIBRATED_THRESHOLD}, "
        f"LEXICAL_WEIGHT = {LEXICAL_WEIGHT}. Run time {elapsed:.0f} s.",
    ]
    table = "\n".join(lines)
    print(table)
    print(f"\nchosen: LEXICAL_WEIGHT = {w}, CALIBRATED_THRESHOLD = {t}")
    if not args.write:
        return 0
    load = os.getloadavg()
    header = [
        f"- Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} "
        f".venv/bin/python bench/calibrate_abstain.py --sample {args.sample} --write`",
        f"- Date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}",
        f"- Machine: {platform.platform()}, Python {platform.python_version()}, CPU "
        f"{cpu_model()}, nproc {os.cpu_count()}; load average at the end {load[0]:.2f} / "
        f"{load[1]:.2f} / {load[2]:.2f}",
        "- Embedder: all-MiniLM-L6-v2 (LocalEmbedder)", "",
    ]
    write_section(HEADING, "\n".join(header) + "\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
