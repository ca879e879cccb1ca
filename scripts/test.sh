#!/usr/bin/env bash
# The whole test suite: installs what the tests need (idempotent, cached under
# $HOME), then runs every Rust test with nextest (cargo test if nextest is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# The semantic tests need the real model and ONNX Runtime (idempotent, ~0.4 s when installed).
bash scripts/setup.sh >/dev/null
# The MCP tests drive memd with the official Python MCP SDK (pinned, venv under $HOME/.cache).
MEMD_MCP_PYTHON=$(bash scripts/setup-test-clients.sh | sed -n 's/^python=//p')
export MEMD_MCP_PYTHON
# The console test drives headless Chromium with selenium (Debian chromium + chromedriver, pinned selenium).
bash scripts/setup-browser.sh >/dev/null
# The API fuzz test runs schemathesis against openapi.yaml (pinned, venv under $HOME/.cache).
bash scripts/api-fuzz.sh --setup-only

# The two-device sync test needs Syncthing (Debian package; installed when running as root).
if ! command -v syncthing >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && apt-get install -y -qq syncthing; } >/dev/null 2>&1 ||
    echo "test.sh: could not install syncthing; scripts/sync-test.sh is skipped" >&2
fi

status=0
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --no-fail-fast "$@" || status=$?
else
  cargo test --no-fail-fast "$@" || status=$?
fi
# Two roots, two Syncthing instances, two `memd serve` on loopback (about 30 s).
if [ $# -eq 0 ] && command -v syncthing >/dev/null 2>&1; then
  cargo build --quiet
  bash scripts/sync-test.sh || status=$?
fi
exit $status
