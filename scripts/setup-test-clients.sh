#!/usr/bin/env bash
# scripts/setup-test-clients.sh - install the third-party clients the test suite
# drives memd with, all pinned:
#   - the official Python MCP SDK (tests/mcp_client/requirements.txt), in
#       ${MEMD_TEST_CLIENTS_DIR:-$HOME/.cache/memory-hub/mcp-client}/venv
#   - NoneBot2, its OneBot v11 adapter and nonebug, for the QQ bridge example
#     (examples/qq-bridge/requirements-test.txt), in
#       ${MEMD_EXAMPLES_CLIENTS_DIR:-$HOME/.cache/memory-hub/examples}/qq-bridge/venv
#   - @cordisjs/core and yaml, for the dsh-memory example
#     (examples/agent-mcp/dsh-memory/package-lock.json), in
#       ${MEMD_EXAMPLES_CLIENTS_DIR:-$HOME/.cache/memory-hub/examples}/dsh-memory/node_modules
# Idempotent: what was built from the same pins is reused (~0.1 s). Concurrent
# runs wait for each other. stdout ends with
#   bridge_python=<path of the bridge venv's python>
#   dsh_modules=<path of the dsh-memory node_modules>
#   python=<path of the MCP SDK venv's python>        (always the last line)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${MEMD_TEST_CLIENTS_DIR:-${HOME:?HOME is not set}/.cache/memory-hub/mcp-client}
EXAMPLES=${MEMD_EXAMPLES_CLIENTS_DIR:-$HOME/.cache/memory-hub/examples}
PY=${PYTHON:-python3}

log() { echo "setup-test-clients: $*" >&2; }
die() { echo "setup-test-clients: error: $*" >&2; exit 1; }

command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=/path/to/python3, 3.10 or newer)"

# venv DIR REQS IMPORT_CHECK [PIP_ARGS…]: a venv at DIR/venv with REQS installed (--no-deps,
# wheels only unless PIP_ARGS say otherwise), rebuilt when REQS or the Python changes.
venv() {
    local dir=$1 reqs=$2 check=$3
    shift 3
    local venv=$dir/venv stamp
    [[ -f $reqs ]] || die "missing $reqs"
    stamp=$( { cat "$reqs"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-64)
    ready() {
        [[ -x $venv/bin/python && -f $venv/.memd-stamp && $(cat "$venv/.memd-stamp") == "$stamp" ]] \
            && "$venv/bin/python" -c "$check" >/dev/null 2>&1
    }
    mkdir -p "$dir"
    if ! ready; then
        exec 9>"$dir/.setup.lock"
        flock 9
        if ! ready; then
            log "installing $(basename "$reqs") into $venv"
            rm -rf "$venv"
            "$PY" -m venv "$venv" || die "$PY -m venv failed"
            PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$venv/bin/python" -m pip install \
                --quiet --progress-bar off --no-deps --only-binary=:all: "$@" -r "$reqs" >&2 \
                || die "pip install -r $reqs failed"
            "$venv/bin/python" -c "$check" >/dev/null || die "what $reqs installs does not import"
            printf '%s' "$stamp" > "$venv/.memd-stamp"
        fi
        exec 9>&-
    fi
}

# node_modules DIR PACKAGE_DIR CHECK_PATH: `npm ci` of PACKAGE_DIR's lock file into DIR.
node_modules() {
    local dir=$1 pkg=$2 check=$3 stamp
    [[ -f $pkg/package-lock.json ]] || die "missing $pkg/package-lock.json"
    command -v npm >/dev/null 2>&1 || die "npm not found (install Node.js 18 or newer)"
    stamp=$(cat "$pkg/package.json" "$pkg/package-lock.json" | sha256sum | cut -c1-64)
    ready() {
        [[ -f $dir/.memd-stamp && $(cat "$dir/.memd-stamp") == "$stamp" && -e $dir/node_modules/$check ]]
    }
    mkdir -p "$dir"
    if ! ready; then
        exec 9>"$dir/.setup.lock"
        flock 9
        if ! ready; then
            log "installing $pkg/package-lock.json into $dir/node_modules"
            rm -rf "$dir/node_modules" "$dir/.memd-stamp"
            cp "$pkg/package.json" "$pkg/package-lock.json" "$dir/"
            (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2) \
                || die "npm ci in $dir failed"
            printf '%s' "$stamp" > "$dir/.memd-stamp"
        fi
        exec 9>&-
    fi
}

venv "$EXAMPLES/qq-bridge" "$ROOT/examples/qq-bridge/requirements-test.txt" \
    'import nonebot, nonebug, nonebot.adapters.onebot.v11, httpx, pytest_asyncio' \
    --no-binary async-asgi-testclient
node_modules "$EXAMPLES/dsh-memory" "$ROOT/examples/agent-mcp/dsh-memory" "@cordisjs/core/package.json"
venv "$DIR" "$ROOT/tests/mcp_client/requirements.txt" 'import mcp.client.stdio, mcp.client.streamable_http'

echo "bridge_python=$EXAMPLES/qq-bridge/venv/bin/python"
echo "dsh_modules=$EXAMPLES/dsh-memory/node_modules"
echo "python=$DIR/venv/bin/python"
