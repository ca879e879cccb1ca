#!/usr/bin/env bash
# Exports the learned-fusion features of the dev sets and trains the model with
# k-fold cross-validation by conversation (scripts/train-fusion.py).
#
#   scripts/train-fusion.sh [EVAL_DIR]   # default /work/shared/eval
#
# Writes src/index/fusion_weights.json (the checked-in weights) and prints the
# rule, cross-validated and full-dev figures per dataset. Needs the model
# (scripts/setup.sh) and a debug build (cargo build). Reuses the eval vector
# cache, so a rerun embeds nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
EVAL_DIR=${1:-/work/shared/eval}
OUT=target/fusion-features
VENV=target/train-fusion-venv
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet numpy==2.4.6
fi
files=()
for d in locomo-dev madial-zh-dev madial-en-dev madial-zh2en-dev madial-en2zh-dev; do
  target/debug/memd --json eval "$EVAL_DIR/$d" --mode fulltext \
    --vector-cache "$HOME/.cache/memory-hub/eval-vectors.db" \
    --features "$OUT/$d.jsonl" > "$OUT/$d.eval.json"
  files+=("$OUT/$d.jsonl")
done
"$VENV/bin/python" scripts/train-fusion.py "${files[@]}" \
  --out src/index/fusion_weights.json --report "$OUT/report.json"
