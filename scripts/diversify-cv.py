#!/usr/bin/env python3
"""Measures session diversification and a session prior over the second stage's order, cross-validated.

Input: the LoCoMo export `scripts/train-rerank.sh` writes (target/rerank-features/*.jsonl, all
five sets, since the second stage is fitted on all of them) and the LoCoMo queries (for the
category and the text). Every query is scored by the second stage fitted without its
conversation or dialogue (the folds of scripts/train-rerank.py); the top 5 is then re-picked
from the top DEPTH:

- `session`: greedy (MMR-like) picks, a candidate's score lowered by lambda for each hit
  already picked from its session;
- `prior`: a candidate's score raised by mu times the summed score of its session's candidates
  (over 10).

Each is applied to every question, to the questions a pattern calls multi-part, or to LoCoMo's
multi-hop questions only (an oracle: the upper bound of any gate). Prints recall@5 per LoCoMo
category; nothing is fitted on the figures it prints, so a setting that helps would still need
choosing on some conversations and reporting on the others.

    $MEMD_RERANK_VENV/bin/python scripts/diversify-cv.py [EVAL_DIR]   # default ../shared/eval
"""

import collections
import importlib.util
import json
import pathlib
import re
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("train_rerank", HERE / "train-rerank.py")
tr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tr)

SETS = ["locomo-dev", "madial-zh-dev", "madial-en-dev", "madial-zh2en-dev", "madial-en2zh-dev"]
DEPTH = 20
MULTI = re.compile(
    r"\b(and|both|how many|what are|which \w+s|what \w+s|activities|things|kinds|types|ways)\b",
    re.I)


def cv_raw(qs):
    """Each query's raw scores from the model fitted without its group."""
    folds = tr.folds_of(qs)
    out = [None] * len(qs)
    for k in range(tr.FOLDS):
        model = tr.fit([q for q, f in zip(qs, folds) if f != k])
        for i, (q, f) in enumerate(zip(qs, folds)):
            if f == k:
                out[i] = model.predict(q["x"])
    return out


def sessions(path):
    """(qid) -> the session of each candidate, in file order."""
    out = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            out[r["qid"]].append(r["candidate"].get("session"))
    return out


def diversified(score, sess, lam):
    pool = list(np.argsort(-score, kind="stable")[:DEPTH])
    picked, count = [], collections.Counter()
    while pool and len(picked) < 5:
        best = max(pool, key=lambda i: score[i] - lam * (count[sess[i]] if sess[i] else 0))
        pool.remove(best)
        picked.append(best)
        count[sess[best]] += 1
    return picked


def with_prior(score, sess, mu):
    total = collections.defaultdict(float)
    for s, v in zip(sess, score):
        if s:
            total[s] += v
    prior = np.array([total[s] / 10 if s else 0.0 for s in sess])
    return list(np.argsort(-(score + mu * prior), kind="stable")[:5])


def main():
    eval_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parent.parent / "shared/eval")
    feats = HERE.parent / "target/rerank-features"
    qs = tr.load([str(feats / f"{s}.jsonl") for s in SETS])
    raw = cv_raw(qs)
    sess = sessions(feats / "locomo-dev.jsonl")
    meta = {}
    with open(eval_dir / "locomo-dev/queries.jsonl") as f:
        for line in f:
            q = json.loads(line)
            meta[q["qid"]] = (str(q["category"]), q["query"])
    locomo = [(q, r) for q, r in zip(qs, raw) if q["dataset"] == "locomo-dev"]
    fused = {id(q): q["x"][:, tr.FEATURES.index("fused_norm")] for q, _ in locomo}
    gates = {
        "all": lambda qid: True,
        "pattern": lambda qid: bool(MULTI.search(meta[qid][1])),
        "multi-hop": lambda qid: meta[qid][0] == "1",
    }

    def report(name, pick):
        by = collections.defaultdict(list)
        for q, r in locomo:
            score = (1 - tr.BLEND) / (1 + np.exp(-r)) + tr.BLEND * fused[id(q)]
            top = pick(q["qid"], score, sess[q["qid"]])
            by[meta[q["qid"]][0]].append(float(q["y"][top].sum()) / q["total"])
        cats = {c: round(float(np.mean(v)), 4) for c, v in sorted(by.items())}
        every = round(float(np.mean([x for v in by.values() for x in v])), 4)
        print(f"{name:32} all {every}  by category {cats}", flush=True)

    report("second stage (cv)", lambda qid, s, ss: list(np.argsort(-s, kind="stable")[:5]))
    for gate, on in gates.items():
        for lam in (0.03, 0.1, 0.3):
            report(f"session lambda={lam} on {gate}", lambda qid, s, ss, lam=lam, on=on: (
                diversified(s, ss, lam) if on(qid) else list(np.argsort(-s, kind="stable")[:5])))
    for mu in (-0.2, 0.2, 0.5, 1.0):
        report(f"session prior mu={mu}", lambda qid, s, ss, mu=mu: with_prior(s, ss, mu))


if __name__ == "__main__":
    main()
