#!/usr/bin/env bash
# cross/build.sh -- owned by the cross-build work (cross/, boards/).
#
# `make cross`: builds picolet's release binary for each target triple given
# (with cross/config.toml's linkers; niced), then prints a size table and
# fails if a stripped binary exceeds the size budget (default 4 MiB; the
# release profile already strips). Binaries land in target/<triple>/release/.
#
# Usage: cross/build.sh TRIPLE...     Env: CROSS_SIZE_BUDGET (bytes)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# )) || die "usage: $0 TRIPLE..."
budget="${CROSS_SIZE_BUDGET:-$((4 * 1024 * 1024))}"
cd "$REPO"

for t in "$@"; do
    triple_info "$t"
    log "building $t"
    cross_cargo build --release --locked --target "$t" --bin picolet
done

over=0
printf '\n%-32s %10s %8s  %-22s %s\n' TARGET BYTES MiB LINKAGE BUDGET
for t in "$@"; do
    triple_info "$t"
    bin="$(picolet_bin "$t")"
    [[ -f "$bin" ]] || die "$bin missing after build"
    bytes="$(stat -c %s "$bin")"
    if grep -q 'Requesting program interpreter' <<<"$(readelf -lW "$bin")"; then
        linkage="dynamic ($(readelf -dW "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | paste -sd, -))"
    else
        linkage="static"
    fi
    if grep -q ' \.symtab ' <<<"$(readelf -SW "$bin")"; then linkage+=", NOT stripped"; fi
    verdict="ok (<= $((budget / 1024 / 1024)) MiB)"
    if (( bytes > budget )); then verdict="OVER BUDGET"; over=1; fi
    printf '%-32s %10d %8s  %-22s %s\n' "$t" "$bytes" "$(awk -v b="$bytes" 'BEGIN { printf "%.2f", b / 1048576 }')" "$linkage" "$verdict"
done
echo
(( over == 0 )) || die "a binary is over the $budget-byte budget"
