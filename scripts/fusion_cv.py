#!/usr/bin/env python3
"""Offline fusion experiments with leave-one-dataset-out cross-validation.

Replays hybrid fusion from `memd eval --per-query` files (full text and
semantic lists 50 deep) so fusion rules can be compared without re-running
search. Produce the inputs with:

    for d in madial-zh-dev madial-en-dev madial-zh2en-dev madial-en2zh-dev locomo-dev; do
      memd --root /tmp/r eval ../shared/eval/$d --depth 50 \
        --per-query /tmp/q/base-$d.jsonl --vector-cache ~/.cache/memory-hub/eval-vectors.db
    done
    python3 scripts/fusion_cv.py /tmp/q ../shared/eval

It prints recall@5 of: plain RRF (k=60, equal weights, what hybrid did),
the script rule (a full-text hit in another script than the query adds
nothing; no parameter is fitted), and two tuned families (RRF k / semantic
weight / AND-pass weight / script penalty; score-gap weights), each with the
best full-dev figure and the leave-one-dataset-out held-out figure.
"""
import collections
import itertools
import json
import re
import sys

SETS = ["madial-zh-dev", "madial-en-dev", "madial-zh2en-dev", "madial-en2zh-dev", "locomo-dev"]
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z]+")


def cjk_share(text):
    """Same as memory_hub::query::cjk_share."""
    c, l = len(CJK.findall(text)), len(LATIN.findall(text))
    return c / (c + l) if c + l else 0.5


def load(runs, evaldir):
    data = {}
    for s in SETS:
        corpus = {}
        for line in open(f"{evaldir}/{s}/corpus.jsonl"):
            if line.strip():
                o = json.loads(line)
                corpus[o["id"]] = cjk_share(o["text"])
        per = collections.defaultdict(dict)
        for line in open(f"{runs}/base-{s}.jsonl"):
            o = json.loads(line)
            per[o["qid"]][o["mode"]] = o
        qs = []
        for m in per.values():
            ft, se = m["fulltext"], m["semantic"]
            qs.append(dict(q=cjk_share(ft["query"]), rel=set(ft["relevant"]), ft=ft["ranked"],
                           fts=ft["scores"], ftp=ft["passes"], se=se["ranked"], ses=se["scores"]))
        data[s] = (corpus, qs)
    return data


def r5(ranked, rel):
    return len([x for x in ranked[:5] if x in rel]) / len(rel) if rel else 0.0


def fuse(q, corpus, k=60, lam=1.0, ws=1.0, wand=1.0, gap_t=0.0, gap_s=0.0):
    ts, ss = q["fts"], q["ses"]
    gt = (ts[0] - ts[min(4, len(ts) - 1)]) / ts[0] if ts and ts[0] > 0 else 0.0
    gs = ss[0] - ss[min(4, len(ss) - 1)] if ss else 0.0
    wt = 1 + gap_t * gt
    ws = ws * (1 + gap_s * 10 * gs)
    sc = collections.defaultdict(float)
    for i, (id_, pa) in enumerate(zip(q["ft"], q["ftp"])):
        w = wt * (wand if pa == "and" else 1.0)
        if abs(q["q"] - corpus.get(id_, 0.5)) > 0.5:
            w *= lam
        if w > 0:
            sc[id_] += w / (k + i + 1)
    for i, id_ in enumerate(q["se"]):
        sc[id_] += ws / (k + i + 1)
    return sorted(sc, key=lambda x: (-sc[x], x))


def score(data, p):
    return {s: sum(r5(fuse(q, data[s][0], **p), q["rel"]) for q in data[s][1]) / len(data[s][1])
            for s in SETS}


def mean(r, sets):
    return sum(r[s] for s in sets) / len(sets)


def report(name, data, grid):
    res = [(p, score(data, p)) for p in grid]
    best = max(res, key=lambda x: mean(x[1], SETS))
    print(f"\n{name}: best on all dev sets {best[0]}")
    for h in SETS:
        train = [s for s in SETS if s != h]
        b = max(res, key=lambda x: mean(x[1], train))
        print(f"  {h:18} full-dev {best[1][h]:.3f}  held-out {b[1][h]:.3f}  (chosen without it: {b[0]})")


def main():
    data = load(sys.argv[1], sys.argv[2])
    for name, p in [("plain RRF", {}), ("script rule", {"lam": 0.0})]:
        r = score(data, p)
        print(f"{name:12}", "  ".join(f"{s} {r[s]:.3f}" for s in SETS))
    report("RRF k / semantic weight / AND weight / script penalty", data,
           [dict(k=k, lam=l, ws=w, wand=a) for k, l, w, a in itertools.product(
               [10, 20, 40, 60, 100], [0, 0.1, 0.25, 0.5], [0.6, 0.8, 1.0, 1.25, 1.5], [1.0, 1.5, 2.0])])
    report("score-gap weights (with the script rule)", data,
           [dict(lam=0.0, gap_t=a, gap_s=b) for a, b in itertools.product([0, 0.5, 1, 2, 4], repeat=2)])


if __name__ == "__main__":
    main()
