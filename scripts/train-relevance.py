#!/usr/bin/env python3
"""Trains the relevance model (src/relevance_weights.json) with grouped cross-validation.

Input: the JSONL rows `cargo run --example relevance_features` writes (one line
per hit of many searches, with every feature of `relevance::FEATURES`, whether
the hit is about its query, its cross-validation group and its kind). Run
through `scripts/train-relevance.sh`, which exports the rows and runs this in
a venv under $HOME/.cache.

Model: L2-regularised logistic regressions on standardised features, one
for hits with a cosine of the calibrated model (`semantic`), one for the rest
(`lexical`), and for the hybrid hits the second stage ranked, one reading its
evidence too for a question's (`reranked`, beside `semantic`) and one for a
conversation's (`dialogue`, instead of `semantic`, fitted on conversations
only: its off-topic searches are the off-topic questions asked three at a
time as a conversation). Evidence never counts against a hit: the weights of the evidence
features (MONOTONE) are kept at or above zero. Positives are the labelled relevant hits of the dev queries and
the memory each copied span comes from; negatives are every hit of an
off-topic question (the `tune` split only: `test` questions are never fitted
on), of a dev query searched under another user's or conversation's scene,
group-chat filler found by any query, and the other hits of dev queries
(weighed less: many are near misses; so are the hits of another user's
memories, who lived through similar things).

Cross-validation: k folds by group (a LoCoMo conversation, a MADial dialogue
across its language versions, a span's memory, an off-topic question).
Every row is scored by the model fitted without its group; the thresholds and
the figures reported come from those out-of-fold scores only.

Operating point, per variant: the lowest threshold at which at most
--off-topic-rate of the off-topic `tune` questions keep a hit in the top
five (out of fold; each question counted once per root and mode: the
largest probability among its first five hits decides); then reported on
the `test` questions, the other-scene queries, the spans and recall@5 per
dataset with the decision on and off. Zero (no question answered at all)
lets the single worst of tens of thousands of searches set the threshold.
`reranked`'s point counts the off-topic questions `semantic` answers beside
it. `dialogue`'s is the highest threshold at which no dev set's recall@5
drops more than --dialogue-max-drop below the decision off (out of fold),
never one at which more off-topic `tune` conversations keep a hit than under
the judgement it replaces (`semantic`, with the last turn's beside it).
"""

import argparse
import collections
import json
import math
import sys

import numpy as np

LEXICAL = ["coverage", "bm25", "phrase", "translated", "terms", "dialogue", "coverage_terms",
           "known", "docs", "length", "best_lexical", "lexical_gap", "content", "content_known"]
SEMANTIC = LEXICAL + ["cosine", "cjk", "mixed", "cosine_cjk", "cosine_mixed", "cosine_lexical",
                      "known_cosine", "length_cosine", "best_cosine", "cosine_gap"]
# The second stage's evidence (relevance::STAGE_FEATURES), for hybrid hits it ranked.
RERANKED = SEMANTIC + ["stage", "stage_best", "stage_gap", "stage_lift", "stage_spread",
                       "stage_text_rrf", "stage_sem_rrf", "stage_fused"]
# The `dialogue` variant reads the same evidence for a conversation's hybrid hits.
DIALOGUE = RERANKED


def staged(r, dialogue):
    """A hybrid hit the second stage ranked, of a conversation or of a question."""
    return r["hasCosine"] and r.get("hasStage", False) and r["features"]["dialogue"] == dialogue


# Each variant: its features and the rows it judges. `semantic` keeps every
# hit with a cosine (hybrid without the second stage among them); `reranked`
# the hybrid hits of a question (one turn) that the second stage ranked,
# `dialogue` those of a conversation.
VARIANTS = (
    ("lexical", LEXICAL, lambda r: not r["hasCosine"]),
    ("semantic", SEMANTIC, lambda r: r["hasCosine"]),
    ("reranked", RERANKED, lambda r: staged(r, 0)),
    ("dialogue", DIALOGUE, lambda r: staged(r, 1)),
)
# The variants that read the second stage's evidence (their own near-miss
# weight; their figures say what the decision was without them).
SECOND = ("reranked", "dialogue")
# Held-out off-topic searches never fitted on, only reported.
HELD_OUT_KINDS = ("other-set",)
# Evidence that a hit is about its query: more of it never lowers the probability.
MONOTONE = {"coverage", "bm25", "phrase", "translated", "lexical", "coverage_terms", "known",
            "cosine", "cosine_lexical", "known_cosine", "content", "content_known",
            "stage", "stage_text_rrf", "stage_sem_rrf", "stage_fused"}


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            rows.append(json.loads(line))
    return rows


def label(r):
    return 1.0 if r["relevant"] else 0.0


def weight(r, near_miss, other):
    if r["relevant"]:
        return 1.0
    if r.get("chatter"):
        return 1.0
    if r["kind"] == "labelled":
        return near_miss
    if r["kind"] in ("other-user", "other-conversation"):
        return other
    return 1.0


def fit(x, y, w, l2, monotone=None):
    """Weighted logistic regression by Newton's method, the weights flagged in
    `monotone` kept at or above zero (an active set: a weight that would turn
    negative is held at zero, and released when the gradient asks for more);
    returns (mean, scale, coef, bias)."""
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    z1 = np.hstack([z, np.ones((len(z), 1))])
    n = z1.shape[1]
    beta = np.zeros(n)
    reg = np.full(n, l2)
    reg[-1] = 0.0
    wn = w / w.sum()
    mono = np.zeros(n, dtype=bool)
    if monotone is not None:
        mono[:-1] = monotone
    held = np.zeros(n, dtype=bool)

    def gradient(beta):
        p = 1.0 / (1.0 + np.exp(-(z1 @ beta)))
        grad = z1.T @ (wn * (p - y)) + reg * beta
        hess = (z1 * (wn * p * (1 - p))[:, None]).T @ z1 + np.diag(reg) + 1e-9 * np.eye(n)
        return grad, hess

    for _ in range(30):
        for _ in range(100):
            free = ~held
            grad, hess = gradient(beta)
            step = np.zeros(n)
            step[free] = np.linalg.solve(hess[np.ix_(free, free)], grad[free])
            after = beta - step
            crossing = mono & free & (after < 0)
            if crossing.any():
                # Go as far as the first weight that reaches zero, and hold it there.
                t = np.min(beta[crossing] / step[crossing])
                beta = beta - max(0.0, min(1.0, t)) * step
                stop = crossing & (beta <= 1e-12)
                beta[stop] = 0.0
                held |= stop
                continue
            beta = after
            if np.max(np.abs(step)) < 1e-10:
                break
        grad, _ = gradient(beta)
        release = held & (grad < -1e-9)
        if not release.any():
            break
        held &= ~release
    return mean, scale, beta[:-1], beta[-1]


def predict(model, x):
    mean, scale, coef, bias = model
    return 1.0 / (1.0 + np.exp(-(((x - mean) / scale) @ coef + bias)))


def matrix(rows, names):
    return np.array([[r["features"][n] for n in names] for r in rows], dtype=np.float64)


def folds_of(groups, k):
    order = sorted(set(groups))
    return {g: i % k for i, g in enumerate(order)}


def query_key(r):
    return (r["root"], r["dataset"], r["qid"], r["mode"], r["kind"])


def metrics(rows, scores, threshold):
    """Figures at one threshold over rows with out-of-fold scores."""
    by_query = collections.defaultdict(list)
    for r, s in zip(rows, scores):
        by_query[query_key(r)].append((r, s))
    answered = collections.Counter()
    asked = collections.Counter()
    recall_on = collections.defaultdict(float)
    recall_off = collections.defaultdict(float)
    queries = collections.Counter()
    spans_kept = [0, 0]
    chatter_kept = [0, 0]
    for r, s in zip(rows, scores):
        if r.get("chatter") and r["rank"] <= 5 and r["kind"] == "labelled":
            chatter_kept[1] += 1
            chatter_kept[0] += 1 if s >= threshold else 0
    for key, hits in by_query.items():
        r0 = hits[0][0]
        kind = r0["kind"]
        kept = [(r, s) for r, s in hits if s >= threshold]
        if kind in ("off-topic", "other-user", "other-conversation") + HELD_OUT_KINDS:
            name = kind if kind != "off-topic" else "off-topic-" + r0["split"]
            asked[name] += 1
            answered[name] += 1 if any(r["rank"] <= 5 for r, _ in kept) else 0
        elif kind == "labelled" and r0["relevantTotal"] > 0:
            name = (r0["root"].split(":")[0], r0["dataset"], r0["mode"])
            queries[name] += 1
            total = r0["relevantTotal"]
            recall_off[name] += sum(1 for r, _ in hits if r["rank"] <= 5 and r["relevant"]) / total
            recall_on[name] += sum(1 for r, _ in kept if r["rank"] <= 5 and r["relevant"]) / total
        elif kind == "span":
            spans_kept[1] += 1
            spans_kept[0] += 1 if any(r["relevant"] for r, _ in kept) else 0
    return {
        "answered": {k: answered[k] / asked[k] for k in sorted(asked)},
        "asked": dict(asked),
        "recall": {
            "/".join(k): {
                "off": round(recall_off[k] / queries[k], 4),
                "on": round(recall_on[k] / queries[k], 4),
                "queries": queries[k],
            }
            for k in sorted(queries)
        },
        "spans_kept": spans_kept[0] / max(1, spans_kept[1]),
        "chatter_kept": chatter_kept[0] / max(1, chatter_kept[1]),
        "chatter_hits": chatter_kept[1],
    }


def dev_recall_drop(m):
    """The largest drop of recall@5 over the full dev roots (decision on vs off)."""
    drops = [v["off"] - v["on"] for k, v in m["recall"].items() if k.startswith("dev/")]
    return max(drops) if drops else 0.0


def margins(model, rows, key="features"):
    """Each row's probability under a variant as written, less its threshold."""
    m = (np.array(model["mean"]), np.array(model["scale"]), np.array(model["weights"]),
         model["bias"])
    x = np.array([[r[key][n] for n in model["features"]] for r in rows], dtype=np.float64)
    return predict(m, x) - model["threshold"] if rows else np.zeros(0)


class Joint:
    """A variant judged beside others, the judgement further above its
    threshold counting (search): `reranked` beside `semantic`, so the second
    stage's evidence only ever adds hits; `dialogue` instead of `semantic`
    (beside_semantic False). In a conversation whose last turn a person
    spoke, the hit is judged by `lexical` on that turn alone too."""

    def __init__(self, out, train, all_rows, beside_semantic=True):
        semantic = margins(out["semantic"], all_rows)
        turn = np.full(len(all_rows), -np.inf)
        last = [i for i, r in enumerate(all_rows) if r.get("lastTurn")]
        if last:
            turn[last] = margins(out["lexical"], [all_rows[i] for i in last], "lastTurn")
        # The judgements as they were without this variant, and those kept beside it.
        self.current = np.maximum(semantic, turn)
        self.fixed = self.current if beside_semantic else turn
        self.answered = set()
        for r, m in zip(train, self.fixed):
            if r["kind"] == "off-topic" and r["rank"] <= 5 and m >= 0:
                self.answered.add(query_key(r))

    def recall_point(self, rows, scores, max_drop):
        """The highest threshold at which no dev set's recall@5 drops more
        than `max_drop` below the decision off, but never one at which more
        off-topic `tune` searches keep a hit than without this variant."""
        guard = metrics(rows, self.before(), 0.5)["answered"].get("off-topic-tune", 0.0)
        grid = np.round(np.arange(0.01, 0.99, 0.01), 2)
        valid = [t for t in grid
                 if metrics(rows, self.scores(scores, t), t)["answered"].get("off-topic-tune", 0.0)
                 <= guard]
        if not valid:
            return 0.99
        near = [t for t in valid if dev_recall_drop(metrics(rows, self.scores(scores, t), t))
                <= max_drop]
        return float(max(near) if near else min(valid))

    def operating_point(self, best, rate):
        """The lowest threshold at which at most `rate` of the off-topic
        tune questions keep a hit, counting those the kept judgements answer."""
        allowed = max(0, int(rate * len(best)) - len(self.answered & set(best)))
        rest = sorted((s for q, s in best.items() if q not in self.answered), reverse=True)
        if allowed >= len(rest):
            return 0.01
        return float(min(0.99, rest[allowed] + 1e-4))

    def scores(self, scores, t):
        """Scores that clear `t` exactly when some judgement keeps the hit."""
        return np.maximum(scores - t, self.fixed) + t

    def before(self):
        """Scores that clear 0.5 exactly when the judgements without this variant keep the hit."""
        return self.current + 0.5


def parity_rows(variant, model, vrows):
    """What the final model (as written, rounded) predicts for a sample of its rows."""
    rounded = (np.array(model["mean"]), np.array(model["scale"]),
               np.array(model["weights"]), model["bias"])
    step = max(1, len(vrows) // 50)
    sample = vrows[::step][:50]
    ps = predict(rounded, matrix(sample, model["features"]))
    return [{"variant": variant, "features": r["features"], "hasCosine": r["hasCosine"],
             "probability": round(float(p), 6)} for r, p in zip(sample, ps)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--out", required=True)
    ap.add_argument("--report")
    ap.add_argument("--parity", help="write (features, probability) of sample rows here")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--l2", type=float, default=1e-2)
    ap.add_argument("--near-miss", type=float, default=0.3)
    ap.add_argument("--reranked-near-miss", type=float, default=0.0,
                    help="near-miss weight of the reranked variant: the second stage already "
                         "orders the hits of a question, so its decision is only whether the "
                         "question is about the root")
    ap.add_argument("--dialogue-near-miss", type=float, default=0.0,
                    help="near-miss weight of the dialogue variant")
    ap.add_argument("--dialogue-max-drop", type=float, default=0.01,
                    help="the dialogue variant's operating point: the highest threshold at which "
                         "no dev set's recall@5 drops more than this below the decision off")
    ap.add_argument("--other", type=float, default=0.3,
                    help="weight of hits of queries searched under another user's or conversation's scene")
    ap.add_argument("--max-drop", type=float, default=0.05,
                    help="warn when dev recall@5 drops more than this with the decision on")
    ap.add_argument("--off-topic-rate", type=float, default=0.0005,
                    help="share of off-topic tune questions (per root and mode) allowed to keep a hit")
    ap.add_argument("--dialogue-off-topic", action="store_true",
                    help="also fit on off-topic questions asked as three-turn conversations")
    ap.add_argument("--dump", help="write every row's out-of-fold probability here (JSONL)")
    ap.add_argument("--only", help="refit only these variants (comma-separated); the others, "
                                   "their figures included, are kept from the --out file")
    args = ap.parse_args()
    rows = load(args.rows)

    def fitted(r, variant):
        # Off-topic conversations are the dialogue variant's off-topic searches.
        return (variant == "dialogue" or args.dialogue_off_topic
                or not r["qid"].startswith("off-topic-dialogue-"))
    out = {}
    report = {}
    parity = []
    kept = {}
    if args.only:
        with open(args.out) as f:
            kept = json.load(f)
    for variant, names, judges in VARIANTS:
        vrows = [r for r in rows if judges(r) and fitted(r, variant)]
        if args.only and variant not in args.only.split(","):
            out[variant] = kept[variant]
            parity.extend(parity_rows(variant, out[variant], vrows))
            continue
        train = [r for r in vrows if not (r["kind"] == "off-topic" and r["split"] == "test")
                 and r["kind"] not in HELD_OUT_KINDS]
        x = matrix(train, names)
        mono = [n in MONOTONE for n in names]
        y = np.array([label(r) for r in train])
        near_miss = {"reranked": args.reranked_near_miss,
                     "dialogue": args.dialogue_near_miss}.get(variant, args.near_miss)
        w = np.array([weight(r, near_miss, args.other) for r in train])
        # Every query weighs the same in total, whatever its number of hits.
        per_query = collections.Counter(query_key(r) for r in train)
        w = w / np.array([per_query[query_key(r)] for r in train])
        groups = [r["group"] for r in train]
        fold = folds_of(groups, args.folds)
        oof = np.zeros(len(train))
        for k in range(args.folds):
            test = np.array([fold[g] == k for g in groups])
            model = fit(x[~test], y[~test], w[~test], args.l2, mono)
            oof[test] = predict(model, x[test])
        # Off-topic test questions: scored by the model fitted on all training rows.
        final = fit(x, y, w, args.l2, mono)
        held = [r for r in vrows if (r["kind"] == "off-topic" and r["split"] == "test")
                or r["kind"] in HELD_OUT_KINDS]
        held_scores = predict(final, matrix(held, names)) if held else np.array([])
        all_rows = train + held
        all_scores = np.concatenate([oof, held_scores])
        if args.dump:
            with open(f"{args.dump}.{variant}", "w") as f:
                for r, p in zip(all_rows, all_scores):
                    f.write(json.dumps({**r, "oof": float(p)}) + "\n")
        # The operating point from out-of-fold scores of tune questions only.
        best = collections.defaultdict(float)
        for r, s in zip(train, oof):
            if r["kind"] == "off-topic" and r["rank"] <= 5:
                best[query_key(r)] = max(best[query_key(r)], float(s))
        joint = None
        if variant == "dialogue":
            joint = Joint(out, train, all_rows, beside_semantic=False)
            threshold = joint.recall_point(all_rows, all_scores, args.dialogue_max_drop)
        elif variant in SECOND:
            joint = Joint(out, train, all_rows)
            threshold = joint.operating_point(best, args.off_topic_rate)
        else:
            tops = np.array(sorted(best.values())) if best else np.zeros(1)
            point = float(np.quantile(tops, 1.0 - args.off_topic_rate)) \
                if args.off_topic_rate > 0 else float(tops.max())
            threshold = float(min(0.99, point + 1e-4))

        def judged(t):
            return all_scores if joint is None else joint.scores(all_scores, t)

        m = metrics(all_rows, judged(threshold), threshold)
        # Keep dev recall within --max-drop where the off-topic point allows it.
        if dev_recall_drop(m) > args.max_drop:
            print(f"{variant}: at the off-topic point {threshold:.4f} dev recall drops "
                  f"{dev_recall_drop(m):.3f} > {args.max_drop}", file=sys.stderr)
        curve = []
        for t in np.linspace(0.02, 0.98, 49):
            mt = metrics(all_rows, judged(t), t)
            curve.append({
                "threshold": round(float(t), 3),
                "offTopicTuneAnswered": round(mt["answered"].get("off-topic-tune", 0.0), 4),
                "offTopicTestAnswered": round(mt["answered"].get("off-topic-test", 0.0), 4),
                "otherSceneAnswered": round(mt["answered"].get("other-user", 0.0), 4),
                "otherSetAnswered": round(mt["answered"].get("other-set", 0.0), 4),
                "devRecallDrop": round(dev_recall_drop(mt), 4),
            })
        mean, scale, coef, bias = final
        out[variant] = {
            "features": names,
            "mean": [round(float(v), 6) for v in mean],
            "scale": [round(float(v), 6) for v in scale],
            "weights": [round(float(v), 6) for v in coef],
            "bias": round(float(bias), 6),
            "threshold": round(threshold, 6),
        }
        report[variant] = {"threshold": threshold, "cv": m, "curve": curve,
                           "rows": len(vrows), "positives": int(sum(label(r) for r in vrows))}
        if joint is not None:
            # The same rows judged without this variant (what it adds).
            report[variant]["before"] = metrics(all_rows, joint.before(), 0.5)
            print(f"{variant} without it: {json.dumps(report[variant]['before'])[:2000]}",
                  file=sys.stderr)
        parity.extend(parity_rows(variant, out[variant], vrows))
        print(f"{variant}: threshold {threshold:.4f}; {json.dumps(m, indent=None)[:2000]}", file=sys.stderr)
    out["trained_by"] = "scripts/train-relevance.sh"
    out["operating_point"] = {"off_topic_rate": args.off_topic_rate,
                              "near_miss": args.near_miss,
                              "reranked_near_miss": args.reranked_near_miss,
                              "dialogue_near_miss": args.dialogue_near_miss,
                              "dialogue_max_drop": args.dialogue_max_drop,
                              "other": args.other, "l2": args.l2,
                              "folds": args.folds}
    out["cv"] = {v: {"threshold": report[v]["threshold"],
                     "offTopicAnswered": report[v]["cv"]["answered"],
                     "spansKept": report[v]["cv"]["spans_kept"],
                     "chatterKept": report[v]["cv"]["chatter_kept"],
                     "recallAt5": report[v]["cv"]["recall"],
                     **({"without": {"offTopicAnswered": report[v]["before"]["answered"],
                                     "recallAt5": report[v]["before"]["recall"]}}
                        if "before" in report[v] else {})} for v in report}
    for v in out:
        if v in kept.get("cv", {}) and v not in report:
            out["cv"][v] = kept["cv"][v]
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if args.parity:
        with open(args.parity, "w") as f:
            for p in parity:
                f.write(json.dumps(p) + "\n")


if __name__ == "__main__":
    main()
