#!/usr/bin/env bash
# scripts/setup-browser.sh - install what the console's browser test needs:
#   - checks Debian's chromium, chromium-driver and fonts-noto-cjk (scripts/setup-system.sh installs them);
#   - Python selenium, pinned in tests/console/requirements.txt, in a venv under
#     ${MEMD_TEST_CLIENTS_DIR:-$HOME/.cache/memory-hub/mcp-client}/browser-venv
#   - axe-core from npm, pinned in tests/console/axe/package-lock.json, in
#     ${MEMD_TEST_CLIENTS_DIR:-…}/browser-axe/node_modules (the test injects it
#     into the page for its accessibility check; the console never loads it)
# Idempotent and quick when installed. The packages missing: it fails with a
# message saying what to install. The last three lines on stdout are
#   axe=<path of axe.min.js>
#   chromedriver=<path>
#   python=<path of the venv's python>
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQS=$ROOT/tests/console/requirements.txt
DIR=${MEMD_TEST_CLIENTS_DIR:-${HOME:?HOME is not set}/.cache/memory-hub/mcp-client}
VENV=$DIR/browser-venv
PY=${PYTHON:-python3}
PACKAGES=(chromium chromium-driver fonts-noto-cjk)

log() { echo "setup-browser: $*" >&2; }
die() { echo "setup-browser: error: $*" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if ((${#missing[@]})); then
    die "missing Debian packages: ${missing[*]}; install them as root: scripts/setup-system.sh"
fi
DRIVER=$(command -v chromedriver) || die "chromium-driver is installed but chromedriver is not on PATH"

[[ -f $REQS ]] || die "missing $REQS"
command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=/path/to/python3, 3.10 or newer)"
STAMP=$( { cat "$REQS"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-64)
ready() {
    [[ -x $VENV/bin/python && -f $VENV/.memd-stamp && $(cat "$VENV/.memd-stamp") == "$STAMP" ]] \
        && "$VENV/bin/python" -c 'import selenium.webdriver' >/dev/null 2>&1
}
mkdir -p "$DIR"
if ! ready; then
    exec 9>"$DIR/.browser-setup.lock"
    flock 9
    if ! ready; then
        log "installing Python selenium into $VENV"
        rm -rf "$VENV"
        "$PY" -m venv "$VENV" || die "$PY -m venv failed"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$VENV/bin/python" -m pip install \
            --quiet --progress-bar off --no-deps --only-binary=:all: -r "$REQS" >&2 \
            || die "pip install -r $REQS failed"
        "$VENV/bin/python" -c 'import selenium.webdriver' || die "the installed selenium does not import"
        printf '%s' "$STAMP" > "$VENV/.memd-stamp"
    fi
fi
# axe-core: `npm ci` of the pinned lock file, rebuilt when it changes.
AXE_PKG=$ROOT/tests/console/axe
AXE_DIR=$DIR/browser-axe
AXE_JS=$AXE_DIR/node_modules/axe-core/axe.min.js
command -v npm >/dev/null 2>&1 || die "npm not found (install Node.js 18 or newer)"
AXE_STAMP=$(cat "$AXE_PKG/package.json" "$AXE_PKG/package-lock.json" | sha256sum | cut -c1-64)
axe_ready() { [[ -f $AXE_DIR/.memd-stamp && $(cat "$AXE_DIR/.memd-stamp") == "$AXE_STAMP" && -f $AXE_JS ]]; }
mkdir -p "$AXE_DIR"
if ! axe_ready; then
    exec 8>"$AXE_DIR/.setup.lock"
    flock 8
    if ! axe_ready; then
        log "installing axe-core into $AXE_DIR/node_modules"
        rm -rf "$AXE_DIR/node_modules" "$AXE_DIR/.memd-stamp"
        cp "$AXE_PKG/package.json" "$AXE_PKG/package-lock.json" "$AXE_DIR/"
        (cd "$AXE_DIR" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2) \
            || die "npm ci in $AXE_DIR failed"
        [[ -f $AXE_JS ]] || die "axe-core installed no $AXE_JS"
        printf '%s' "$AXE_STAMP" > "$AXE_DIR/.memd-stamp"
    fi
    exec 8>&-
fi
echo "axe=$AXE_JS"
echo "chromedriver=$DRIVER"
echo "python=$VENV/bin/python"
