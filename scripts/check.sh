#!/usr/bin/env bash
# The static checks every commit must pass: formatting, clippy with warnings as errors (every
# target, the full test tier included) and docs without warnings. `.ci/run` runs this, then the
# test suite (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets --features full-tests -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
