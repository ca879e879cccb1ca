#!/usr/bin/env bash
# The soak: a real `memd serve` under a steady mixed load (writes, ingest, forgets
# paced to what those add so the live set stays the same size, full-text, semantic and
# hybrid searches, recall, consolidation every 5 minutes) for an hour, its resident set
# sampled every 10 s. Exits 0 when RSS stays within 10% of
# its value at the end of the warm-up (5 minutes) and no request failed.
# A script for people (an hour long), not part of the test suite.
# Usage: scripts/soak.sh [--soak SECONDS] [--warmup SECONDS] [--sample SECONDS]
#                        [--facts N] [--json target/bench/soak.json]
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
case " ${args[*]:-} " in
  *" --soak "*) ;;
  *) args=(--soak 3600 "${args[@]}") ;;
esac
exec cargo bench --bench memd -- "${args[@]}"
