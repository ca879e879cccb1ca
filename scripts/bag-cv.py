#!/usr/bin/env python3
"""Measures bagging over training seeds in the trainer's grouped cross-validation.

For each seed, fits the trainer's model (scripts/train-rerank.py: same PARAMS,
ROUNDS, folds and blend, SEEDS set to that one seed) on each fold's training
part and keeps the raw scores of the held-out queries. A bag of K seeds scores a candidate with the mean of
its K models' raw scores (what a model file holding all K models' trees, each
leaf divided by K, gives). Prints cross-validated recall@5 per set for each
seed set and K, the single-seed mean over every seed and, with --draws, the
mean and spread over random bags of K of all the seeds.

  F=target/rerank-features
  $HOME/.cache/memory-hub/train-rerank-venv/bin/python scripts/bag-cv.py \
      $F/locomo-dev.jsonl $F/madial-zh-dev.jsonl $F/madial-en-dev.jsonl \
      $F/madial-zh2en-dev.jsonl $F/madial-en2zh-dev.jsonl --model dialogue --draws 200 \
      [--sets 3] [--per-set 8] [--rate 0.05 --rounds 200] [--raws FILE.npz | --load-raws FILE.npz]

The files in the trainer's order (the rows' order is part of a fit). Run after
scripts/train-rerank.sh, which exports the features.
"""

import argparse
import importlib.util
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("tr", os.path.join(HERE, "train-rerank.py"))
tr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tr)


def oof_raw(qs, nf, seed):
    """Out-of-fold raw scores of every query, fitted with `seed`."""
    tr.SEEDS = [seed]
    folds = tr.folds_of(qs)
    raw = [None] * len(qs)
    for k in range(tr.FOLDS):
        model = tr.fit([q for q, f in zip(qs, folds) if f != k], nf)
        for i, (q, f) in enumerate(zip(qs, folds)):
            if f == k:
                raw[i] = model.predict(q["x"][:, :nf])
    return raw


def draws(qs, raws, seeds, ks, n):
    """Mean and spread of recall@5 over `n` random bags of K of the seeds (without repeats)."""
    rng = np.random.default_rng(7)
    out = {}
    for k in ks:
        tables = []
        for _ in range(n):
            bag = rng.choice(seeds, size=k, replace=False)
            mean = [np.mean([raws[s][i] for s in bag], axis=0) for i in range(len(qs))]
            tables.append(tr.table(qs, [tr.recall5(tr.by_model(m, q), q) for m, q in zip(mean, qs)]))
        out[k] = {stat: {d: round(float(f([t[d] for t in tables])), 4) for d in tables[0]}
                  for stat, f in (("mean", np.mean), ("sd", np.std))}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--model", choices=["dialogue", "question"], default="dialogue")
    ap.add_argument("--sets", type=int, default=3)
    ap.add_argument("--per-set", type=int, default=8)
    ap.add_argument("--first-seed", type=int, default=7)
    ap.add_argument("--rate", type=float, default=tr.PARAMS["learning_rate"])
    ap.add_argument("--rounds", type=int, default=tr.ROUNDS)
    ap.add_argument("--ks", default="1,3,5,8")
    ap.add_argument("--out", help="JSON file for the figures")
    ap.add_argument("--draws", type=int, default=0,
                    help="also score this many random bags of K of all the seeds, per K")
    ap.add_argument("--load-raws", help="read the raw scores from a --raws file instead of fitting")
    ap.add_argument("--raws", help="NumPy file (.npz) for every seed's out-of-fold raw scores")
    args = ap.parse_args()
    tr.PARAMS["learning_rate"] = args.rate
    tr.ROUNDS = args.rounds
    qs = tr.load(args.files)
    if args.model == "dialogue":
        qs, nf = [q for q in qs if tr.is_dialogue(q)], len(tr.FEATURES)
    else:
        nf = tr.QUESTION_FEATURES
    ks = [int(k) for k in args.ks.split(",")]
    seeds = [args.first_seed + i for i in range(args.sets * args.per_set)]
    raws = {}
    single = {}
    saved = np.load(args.load_raws) if args.load_raws else None
    for s in seeds:
        raws[s] = ([saved[f"seed{s}_q{i}"] for i in range(len(qs))] if saved is not None
                   else oof_raw(qs, nf, s))
        single[s] = tr.table(qs, [tr.recall5(tr.by_model(r, q), q) for r, q in zip(raws[s], qs)])
        print(f"seed {s}: {single[s]}", file=sys.stderr, flush=True)
    if args.raws:
        np.savez_compressed(args.raws, **{f"seed{s}_q{i}": r for s in seeds for i, r in enumerate(raws[s])})
    sets = []
    for j in range(args.sets):
        group = seeds[j * args.per_set:(j + 1) * args.per_set]
        row = {"seeds": group, "k": {}}
        for k in ks:
            mean = [np.mean([raws[s][i] for s in group[:k]], axis=0) for i in range(len(qs))]
            row["k"][k] = tr.table(qs, [tr.recall5(tr.by_model(m, q), q) for m, q in zip(mean, qs)])
        sets.append(row)
    datasets = list(single[seeds[0]])
    single_mean = {d: round(float(np.mean([single[s][d] for s in seeds])), 4) for d in datasets}
    single_sd = {d: round(float(np.std([single[s][d] for s in seeds])), 4) for d in datasets}
    out = {"model": args.model, "rate": args.rate, "rounds": args.rounds,
           "single_seed": {str(s): single[s] for s in seeds},
           "single_seed_mean": single_mean, "single_seed_sd": single_sd, "sets": sets,
           "draws": draws(qs, raws, seeds, ks, args.draws) if args.draws else None}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    print("single-seed mean", single_mean, "sd", single_sd)
    for k, t in (out["draws"] or {}).items():
        print(f"{args.draws} random bags of K={k}: mean", t["mean"], "sd", t["sd"])
    for row in sets:
        for k, t in row["k"].items():
            print(f"seeds {row['seeds'][0]}-{row['seeds'][-1]} K={k}:",
                  " ".join(f"{d} {v:.3f}" for d, v in t.items()))


if __name__ == "__main__":
    main()
