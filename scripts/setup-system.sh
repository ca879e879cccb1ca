#!/usr/bin/env bash
# scripts/setup-system.sh - install the Debian packages the full test suite needs, once per machine:
#   make (building jemalloc, memd's allocator), chromium, chromium-driver, fonts-noto-cjk (the
#   console's browser test) and syncthing (the two-device sync test). Run as root (CI runs it before the tests); idempotent and quick when
#   everything is installed. Not root and a package missing: it says what to install and fails.
set -euo pipefail

PACKAGES=(make chromium chromium-driver fonts-noto-cjk syncthing)
die() { echo "setup-system: error: $*" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
((${#missing[@]})) || exit 0
[[ $(id -u) -eq 0 ]] || die "missing Debian packages: ${missing[*]}; install them as root: sudo $0"
command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install them"
echo "setup-system: installing ${missing[*]} (apt-get)" >&2
exec 8>/var/lock/memd-setup-system.lock
flock 8
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || die "apt-get update failed"
apt-get install -y -qq "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
