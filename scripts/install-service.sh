#!/usr/bin/env bash
# Installs a systemd user unit that keeps `memd serve` running and restarts it
# when it exits. Usage:
#   scripts/install-service.sh [--root DIR] [--bin PATH] [--no-enable]
# Defaults: root = $MEMD_ROOT, else memd's default root (the platform's data
# directory, ~/.local/share/memd; asked from the binary and written into the
# unit), bin = target/release/memd of this checkout, else `memd` on PATH.
# The unit goes to ${XDG_CONFIG_HOME:-~/.config}/systemd/user/memd.service;
# without --no-enable it is enabled and started with `systemctl --user`.
# Logs: journalctl --user -u memd. Remove: systemctl --user disable --now memd.
set -euo pipefail
cd "$(dirname "$0")/.."

root="${MEMD_ROOT:-}"
bin="$PWD/target/release/memd"
[ -x "$bin" ] || bin="$(command -v memd || echo "$bin")"
enable=1
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --no-enable) enable=0; shift ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "memd binary not found at $bin (cargo build --release, or cargo install --locked --path .)" >&2; exit 1; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
if [ -z "$root" ]; then
  # The unit names the root itself: the service's environment may differ from this shell's.
  root=$(env -u MEMD_ROOT "$bin" stats --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["root"])')
fi
mkdir -p "$root"
root="$(cd "$root" && pwd)"
echo "root: $root"

unit_dir="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
mkdir -p "$unit_dir"
unit="$unit_dir/memd.service"
cat > "$unit.tmp" <<UNIT
[Unit]
Description=memd — local-first memory service for AI agents
After=default.target

[Service]
Type=simple
Environment=MEMD_ROOT=$root
Environment=MEMD_LOG=info
ExecStart=$bin serve
# SIGTERM makes memd finish in-flight requests and exit 0; acknowledged writes are already durable.
KillSignal=SIGTERM
TimeoutStopSec=20
Restart=always
RestartSec=2

[Install]
WantedBy=default.target
UNIT
mv "$unit.tmp" "$unit"
echo "wrote $unit"

if [ "$enable" = 1 ]; then
  if command -v systemctl >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1; then
    systemctl --user daemon-reload
    systemctl --user enable --now memd.service
    echo "memd.service enabled and started (journalctl --user -u memd for logs)"
  else
    echo "no systemd user session here: start it later with 'systemctl --user enable --now memd'" >&2
  fi
fi
