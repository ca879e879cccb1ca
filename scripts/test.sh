#!/usr/bin/env bash
# The whole test suite: installs what the tests need (idempotent, cached under
# $HOME), then runs every Rust test with nextest (cargo test if nextest is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# The semantic tests need the real model and ONNX Runtime (idempotent, ~0.4 s when installed).
bash scripts/setup.sh >/dev/null
# The MCP tests drive memd with the official Python MCP SDK; the examples' tests run on NoneBot2 +
# nonebug and on @cordisjs/core (all pinned, venvs and node_modules under $HOME/.cache).
CLIENTS=$(bash scripts/setup-test-clients.sh)
MEMD_MCP_PYTHON=$(sed -n 's/^python=//p' <<<"$CLIENTS")
MEMD_BRIDGE_PYTHON=$(sed -n 's/^bridge_python=//p' <<<"$CLIENTS")
MEMD_DSH_MODULES=$(sed -n 's/^dsh_modules=//p' <<<"$CLIENTS")
export MEMD_MCP_PYTHON MEMD_BRIDGE_PYTHON MEMD_DSH_MODULES
# The console test drives headless Chromium with selenium (Debian chromium + chromedriver, pinned selenium).
bash scripts/setup-browser.sh >/dev/null
# The API fuzz test runs schemathesis against openapi.yaml (pinned, venv under $HOME/.cache).
bash scripts/api-fuzz.sh --setup-only

# The two-device sync test (tests/integration/sync_test.rs runs scripts/sync-test.sh) needs
# Syncthing from Debian, installed with the browser by scripts/setup-system.sh (as root, once).
command -v syncthing >/dev/null 2>&1 \
  || { echo "test.sh: syncthing is missing; install it as root: scripts/setup-system.sh" >&2; exit 1; }

# `full-tests` turns on the tests that need what the lines above install (a plain `cargo test`
# runs the hermetic tier only and lists those as ignored, with what each needs).
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --features full-tests --no-fail-fast "$@"
else
  cargo test --features full-tests --no-fail-fast "$@"
fi
