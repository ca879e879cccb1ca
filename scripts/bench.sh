#!/usr/bin/env bash
# The performance table: every goal measured in one run on one seeded zh/en corpus,
# against a real `memd serve` process, with SQLite FTS5 (bigram) and raw tantivy as
# baselines measured in the same run. Prints a Markdown table and writes it as JSON.
# Usage: scripts/bench.sh [--facts 10000] [--queries 500] [--json target/bench/table.json]
#        scripts/bench.sh --detail [options of the detailed bench, see docs/benchmarks.md]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--detail" ]; then
  shift
  exec cargo bench --bench memd -- "$@"
fi
exec cargo bench --bench memd -- --table "$@"
