#!/usr/bin/env bash
# scripts/api-fuzz.sh - property-based fuzzing of the /v1 API against openapi.yaml.
#
# Starts `memd serve` on 127.0.0.1 (a free port) over a fresh temporary root,
# issues a root token and a group token, and runs schemathesis (pinned in
# tests/api_fuzz/requirements.txt, installed into a venv under $HOME/.cache)
# once with each token: no request may get a server error, every status code,
# content type and header must be declared by the spec, and every body must
# match its schema. --strict adds schemathesis's input-acceptance checks.
#
#   scripts/api-fuzz.sh [--max-time SECONDS] [--strict]    (default 60 s per token)
#   scripts/api-fuzz.sh --setup-only                       (install schemathesis, run nothing)
#
# MEMD_BIN names the binary (default target/debug/memd, built if missing).
# The integration test `api_fuzz` runs this with a short budget.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MAX_TIME=60
SETUP_ONLY=
# The two input-acceptance checks compare the server's validation with the
# schema field by field; they are on with --strict (see README: API fuzzing).
CHECKS=(--checks all --exclude-checks positive_data_acceptance,negative_data_rejection)
while [[ $# -gt 0 ]]; do
    case $1 in
        --max-time) MAX_TIME=$2; shift 2 ;;
        --strict) CHECKS=(--checks all); shift ;;
        --setup-only) SETUP_ONLY=1; shift ;;
        *) echo "api-fuzz: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { echo "api-fuzz: $*" >&2; }
die() { echo "api-fuzz: error: $*" >&2; exit 1; }

REQS=$ROOT/tests/api_fuzz/requirements.txt
DIR=${MEMD_TEST_CLIENTS_DIR:-${HOME:?HOME is not set}/.cache/memory-hub}/api-fuzz
VENV=$DIR/venv
PY=${PYTHON:-python3}
STAMP=$( { cat "$REQS"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-64)
ready() {
    [[ -x $VENV/bin/schemathesis && -f $VENV/.memd-stamp && $(cat "$VENV/.memd-stamp") == "$STAMP" ]]
}
mkdir -p "$DIR"
if ! ready; then
    exec 9>"$DIR/.setup.lock"
    flock 9
    if ! ready; then
        log "installing schemathesis into $VENV"
        rm -rf "$VENV"
        "$PY" -m venv "$VENV" || die "$PY -m venv failed"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$VENV/bin/python" -m pip install \
            --quiet --progress-bar off --no-deps -r "$REQS" >&2 || die "pip install -r $REQS failed"
        printf '%s' "$STAMP" > "$VENV/.memd-stamp"
    fi
fi

[[ -z $SETUP_ONLY ]] || exit 0

MEMD=${MEMD_BIN:-$ROOT/target/debug/memd}
if [[ ! -x $MEMD ]]; then
    (cd "$ROOT" && cargo build --quiet --bin memd) || die "cargo build failed"
fi

WORK=$(mktemp -d)
SERVER=
cleanup() {
    if [[ -n $SERVER ]]; then
        kill -TERM "$SERVER" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVER" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

export MEMD_ROOT=$WORK/root
mkdir -p "$MEMD_ROOT"
secret() { "$MEMD" --json token issue --name "$1" --preset "$2" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["secret"])'; }
ROOT_TOKEN=$(secret fuzz-root dsh-desktop)
GROUP_TOKEN=$(secret fuzz-group qq-group-1)

"$MEMD" serve --listen 127.0.0.1:0 > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVER=$!
ADDR=
for _ in $(seq 100); do
    ADDR=$(sed -n 's|^listening on http://||p' "$WORK/serve.out" | head -n 1)
    [[ -n $ADDR ]] && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/serve.err" >&2; die "memd serve exited"; }
    sleep 0.1
done
[[ -n $ADDR ]] || die "memd serve did not start"
log "memd serve on $ADDR"

status=0
# schemathesis keeps its caches in the working directory: keep them out of the repository.
cd "$WORK"
for who in root group; do
    if [[ $who == root ]]; then token=$ROOT_TOKEN; else token=$GROUP_TOKEN; fi
    log "schemathesis with the $who token (${MAX_TIME}s)"
    # revokeToken and setConfig are excluded: with a root token they revoke the
    # fuzzer's own token or change the listen address within seconds.
    if ! "$VENV/bin/schemathesis" run "$ROOT/openapi.yaml" --url "http://$ADDR" \
        -H "Authorization: Bearer $token" "${CHECKS[@]}" \
        --exclude-operation-id revokeToken --exclude-operation-id setConfig \
        --max-time "$MAX_TIME" --workers 2 --request-timeout 30 --seed 1 \
        --no-color >&2; then
        status=1
    fi
done
if grep -q "panicked" "$WORK/serve.err"; then
    log "the server panicked:"; grep -A3 "panicked" "$WORK/serve.err" >&2; status=1
fi
exit $status
