#!/usr/bin/env bash
# scripts/setup-test-clients.sh - install the third-party MCP client the test
# suite drives memd with: the official Python MCP SDK from PyPI, pinned in
# tests/mcp_client/requirements.txt, in a venv under
#   ${MEMD_TEST_CLIENTS_DIR:-$HOME/.cache/memory-hub/mcp-client}/venv
# Idempotent: a venv built from the same pins is reused (~0.1 s). Concurrent
# runs wait for each other. The last line on stdout is
#   python=<path of the venv's python>
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQS=$ROOT/tests/mcp_client/requirements.txt
DIR=${MEMD_TEST_CLIENTS_DIR:-${HOME:?HOME is not set}/.cache/memory-hub/mcp-client}
VENV=$DIR/venv
PY=${PYTHON:-python3}

log() { echo "setup-test-clients: $*" >&2; }
die() { echo "setup-test-clients: error: $*" >&2; exit 1; }

[[ -f $REQS ]] || die "missing $REQS"
command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=/path/to/python3, 3.10 or newer)"
STAMP=$( { cat "$REQS"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-64)

ready() {
    [[ -x $VENV/bin/python && -f $VENV/.memd-stamp && $(cat "$VENV/.memd-stamp") == "$STAMP" ]] \
        && "$VENV/bin/python" -c 'import mcp.client.stdio, mcp.client.streamable_http' >/dev/null 2>&1
}

mkdir -p "$DIR"
if ! ready; then
    exec 9>"$DIR/.setup.lock"
    flock 9
    if ! ready; then
        log "installing the Python MCP SDK into $VENV"
        rm -rf "$VENV"
        "$PY" -m venv "$VENV" || die "$PY -m venv failed"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$VENV/bin/python" -m pip install \
            --quiet --progress-bar off --no-deps --only-binary=:all: -r "$REQS" >&2 \
            || die "pip install -r $REQS failed"
        ready_check=$("$VENV/bin/python" -c 'import mcp, importlib.metadata as m; print(m.version("mcp"))') \
            || die "the installed SDK does not import"
        printf '%s' "$STAMP" > "$VENV/.memd-stamp"
        log "installed mcp $ready_check"
    fi
fi
echo "python=$VENV/bin/python"
