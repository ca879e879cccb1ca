#!/usr/bin/env bash
# CPU of an idle `memd serve` over many Markdown documents: the watcher must
# not react to memd's own reads, so an idle daemon should use ~0% of a core.
# Creates a temp root with N notes of ~SIZE bytes, starts the server on a
# loopback port 0, lets it settle, then reads utime+stime from
# /proc/<pid>/stat over SECONDS and prints the share of one core, plus how
# many "documents synced" log lines appeared while idle.
# Usage: scripts/bench-idle.sh [--docs 1000] [--size 51200] [--seconds 60] [--memd target/release/memd]
set -euo pipefail
cd "$(dirname "$0")/.."
docs=1000 size=51200 seconds=60 memd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --docs) docs=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --memd) memd=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$memd" ]; then
  cargo build --quiet
  memd=target/debug/memd
fi
root=$(mktemp -d)
log="$root.log"
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$root" "$log"; }
trap cleanup EXIT
mkdir -p "$root/memories/notes"
echo '{"backup": {"daily": false}}' > "$root/config.json"
line="the quick brown fox jumps over the lazy dog 敏捷的棕色狐狸跳过了懒狗"
for i in $(seq 1 "$docs"); do
  d="$root/memories/notes/$((i % 20))"
  mkdir -p "$d"
  {
    printf -- '---\ntitle: Note %s\ntags: [bench]\n---\n# Note %s\n' "$i" "$i"
    n=0
    while [ $n -lt "$size" ]; do printf '%s %s\n\n' "$line" "$i"; n=$((n + ${#line} + 8)); done
  } > "$d/n$i.md"
done
echo "root: $docs documents, $(du -sh "$root/memories" | cut -f1)"
MEMD_ROOT="$root" MEMD_LOG=info MEMD_MODELS_DIR="$root/no-models" \
  "$memd" serve --listen 127.0.0.1:0 > /dev/null 2> "$log" &
pid=$!
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# Settle: wait until it listens (startup indexes every document first), then
# until a 5 s window costs under 1% of a core (index merges finish), 10 min at most.
for _ in $(seq 1 600); do grep -q "serving /v1" "$log" && break; sleep 1; done
hz=$(getconf CLK_TCK)
for _ in $(seq 1 120); do
  a=$(ticks); sleep 5; b=$(ticks)
  [ $((b - a)) -lt $((hz * 5 / 100)) ] && break
done
# One real edit, so a watcher that reacts to its own reads would start looping.
echo "edited" >> "$root/memories/notes/1/n1.md"
sleep 3
prev=$(wc -c < "$log")
syncs_before=$(grep -c "documents synced" "$log" || true)
t0=$(ticks)
sleep "$seconds"
t1=$(ticks)
syncs_after=$(grep -c "documents synced" "$log" || true)
awk -v t="$((t1 - t0))" -v hz="$hz" -v s="$seconds" \
  'BEGIN { printf "idle CPU: %d ticks in %d s = %.2f%% of one core\n", t, s, 100 * t / (hz * s) }'
echo "document syncs logged while idle: $((syncs_after - syncs_before))"
echo "log lines while idle: $(( $(wc -l < "$log") - $(head -c "$prev" "$log" | wc -l) ))"
