#!/usr/bin/env bash
# Trains the relevance model (src/relevance_weights.json) on the dev sets:
# exports every hit of many searches with its evidence
# (tests/calibration/relevance_features.rs: the dev sets as roots of 5
# memories to 100k, their queries under their own and another scene,
# off-topic questions, spans copied from memories, other sets' queries held
# out), then fits four logistic models with grouped cross-validation
# (scripts/train-relevance.py): `lexical`, `semantic`, and `reranked` and
# `dialogue`, which also read the second stage's evidence for a question's
# and a conversation's hybrid hits.
#
#   scripts/train-relevance.sh [EVAL_DIR] [TRAINER OPTIONS]   # default ../shared/eval
#   scripts/train-relevance.sh ../shared/eval --only dialogue   # refit one model, keep the others
#
# `--only VARIANTS` refits only those and keeps the others (and their
# figures) from src/relevance_weights.json.
#
# Writes src/relevance_weights.json (with the cross-validated figures) and
# tests/fixtures/relevance-parity.jsonl (the trainer's own predictions, which
# a unit test compares with the Rust evaluator); the full report goes to
# target/relevance-training/report.json. Needs the model and the lexicon
# (scripts/setup.sh). Reuses the eval vector cache, so a rerun embeds only the
# large roots' filler once.
set -euo pipefail
cd "$(dirname "$0")/.."
EVAL_DIR=${1:-../shared/eval}
shift || true
OUT=target/relevance-training
VENV=${MEMD_TRAIN_VENV:-$HOME/.cache/memory-hub/train-relevance-venv}
# Reuse the rows of the last export with MEMD_REUSE_ROWS=1 (an export takes minutes).
REUSE=${MEMD_REUSE_ROWS:-0}
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet numpy==2.4.6
fi
cat tests/fixtures/off-topic-queries.jsonl tests/fixtures/unrelated-queries.jsonl > "$OUT/off-topic.jsonl"
if [ "$REUSE" != 1 ] || [ ! -s "$OUT/rows.jsonl" ]; then
  cargo run --release --example relevance_features -- "$EVAL_DIR" "$OUT/off-topic.jsonl" "$OUT/rows.jsonl" \
    --vector-cache "$HOME/.cache/memory-hub/eval-vectors.db" --large 10000,100000
fi
"$VENV/bin/python" scripts/train-relevance.py "$OUT/rows.jsonl" \
  --out src/relevance_weights.json --report "$OUT/report.json" \
  --parity tests/fixtures/relevance-parity.jsonl "$@"
