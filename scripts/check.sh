#!/usr/bin/env bash
# Everything a commit must pass: formatting, clippy with warnings as errors,
# docs without warnings, and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
scripts/test.sh "$@"
