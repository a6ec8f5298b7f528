#!/usr/bin/env bash
# tests/tools/debs.sh -- owned by the integration test harness.
#
# Installs the Debian packages named that are missing, and nothing else:
# the apt lists are refreshed only when something is missing, and
# --no-install-recommends keeps out what nobody asked for. Used by `make
# deps` (everything the tests need) and by the demos (only what they run).
#
# No system service is started or enabled: Debian's containerd package,
# say, enables and starts a system-wide containerd, but the tests and the
# demos each run a private one in a temp dir. So the install runs under a
# policy-rc.d that refuses every start (as Debian's own image builders do),
# and the units of the packages installed here are then disabled. A
# package the machine already had is not touched.
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
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\n# tests/tools/debs.sh: no service starts while it installs.\nexit 101\n' |
        "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod 0755 "$policy"
    own_policy=1
fi
rc=0
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" || rc=$?
(( own_policy )) && "${as_root[@]}" rm -f "$policy"
(( rc == 0 )) || exit "$rc"
if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
    units=()
    for p in "${missing[@]}"; do
        while read -r f; do units+=("$(basename "$f")"); done < <(
            dpkg -L "$p" 2>/dev/null | grep -E '^(/usr)?/lib/systemd/system/[^/]+\.(service|socket|timer)$' || true)
    done
    if (( ${#units[@]} )); then
        echo "$label: disabling the system services these packages enabled: ${units[*]}"
        "${as_root[@]}" systemctl disable --now "${units[@]}" >/dev/null 2>&1 || true
    fi
fi
