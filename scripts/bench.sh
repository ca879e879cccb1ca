#!/usr/bin/env bash
# Benchmarks on a seeded synthetic zh/en corpus, each figure beside a baseline
# measured in the same run (library and HTTP, full text and hybrid).
# Usage: scripts/bench.sh [--facts 10000,100000[,1000000]] [--queries 1000] [--model auto|real|hash] [--no-http]
#        [--no-vectors | --vectors-only | --filtered-only] [--writes N | --writes-only]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench memd -- "$@"
