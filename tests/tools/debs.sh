#!/usr/bin/env bash
# tests/tools/debs.sh -- owned by the integration test harness.
#
# Installs the Debian packages named that are missing, and nothing else:
# the apt lists are refreshed only when something is missing, and
# --no-install-recommends keeps out what nobody asked for. Used by `make
# deps` (everything the tests need) and by the demos (only what they run).
#
# Usage: tests/tools/debs.sh LABEL PACKAGE...
set -euo pipefail
label="$1"
shift
missing=()
for p in "$@"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
    echo "$label: all present ($*)"
    exit 0
fi
echo "$label: installing ${missing[*]}"
as_root=()
[[ $(id -u) -eq 0 ]] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
