#!/usr/bin/env bash
# Trains the second stage of hybrid search (src/rerank_model.json for
# questions, src/rerank_dialogue_model.json for dialogues): exports
# every hybrid candidate of the dev sets with its features (`memd eval
# --features`), then fits LightGBM lambdarank trees with k-fold
# cross-validation grouped by conversation and dialogue
# (scripts/train-rerank.py).
#
#   scripts/train-rerank.sh [EVAL_DIR]   # default ../shared/eval (beside the clone)
#
# Writes each model (trees, `enabled`, the cross-validated figures) and its
# parity file, tests/fixtures/rerank-parity.jsonl and
# tests/fixtures/rerank-dialogue-parity.jsonl (the trainer's raw scores of a
# sample of candidates, which a unit test compares with the Rust evaluator);
# the report goes to target/rerank-features/report.json. Needs
# the model and the lexicon (scripts/setup.sh) and a debug build (cargo
# build). The features do not depend on the checked-in models.
set -euo pipefail
cd "$(dirname "$0")/.."
EVAL_DIR=${1:-../shared/eval}
OUT=target/rerank-features
VENV=${MEMD_RERANK_VENV:-$HOME/.cache/memory-hub/train-rerank-venv}
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import lightgbm' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet numpy==2.4.6 lightgbm==4.7.0
fi
files=()
for d in locomo-dev madial-zh-dev madial-en-dev madial-zh2en-dev madial-en2zh-dev; do
  target/debug/memd --json eval "$EVAL_DIR/$d" --mode hybrid \
    --vector-cache "$HOME/.cache/memory-hub/eval-vectors.db" \
    --features "$OUT/$d.jsonl" > "$OUT/$d.eval.json"
  files+=("$OUT/$d.jsonl")
done
"$VENV/bin/python" scripts/train-rerank.py "${files[@]}" \
  --out src/rerank_model.json --parity tests/fixtures/rerank-parity.jsonl \
  --dialogue-out src/rerank_dialogue_model.json \
  --dialogue-parity tests/fixtures/rerank-dialogue-parity.jsonl \
  --report "$OUT/report.json"
