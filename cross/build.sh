#!/usr/bin/env bash
# cross/build.sh -- owned by the cross-build work (cross/, boards/).
#
# `make cross`: builds picolet's release binary for each target triple given
# (with cross/config.toml's linkers; niced), then prints a size table and
# fails if a stripped binary exceeds the size budget (default 4 MiB; the
# release profile already strips), if a musl binary is not static, if one
# still has its symbol table, or if one does not start (`--version` under
# qemu-user). CI runs it on every landing. Binaries land in target/<triple>/release/.
#
# The budget is the boards': 4 MiB for the targets they ship (aarch64,
# armv7, riscv64). x86_64 builds only for the qemu-x86_64 test board and
# CI; the same source is about 27% larger in x86_64 code (measured: 3.76 MiB
# aarch64 musl against 4.77 MiB x86_64 musl, with the API-server client), so
# its budget is 5 MiB (CROSS_SIZE_BUDGET_X86_64). Release builds add
# cross/release.toml (no .eh_frame_hdr: -192 KiB on aarch64; see there).
#
# Usage: cross/build.sh TRIPLE...     Env: CROSS_SIZE_BUDGET,
#                                          CROSS_SIZE_BUDGET_X86_64 (bytes)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# )) || die "usage: $0 TRIPLE..."
board_budget="${CROSS_SIZE_BUDGET:-$((4 * 1024 * 1024))}"
x86_budget="${CROSS_SIZE_BUDGET_X86_64:-$((5 * 1024 * 1024))}"
budget_of() { if [[ $1 == x86_64-* ]]; then echo "$x86_budget"; else echo "$board_budget"; fi; }
cd "$REPO"

# One cargo run for all the targets: each one's link-time optimisation is
# one long single-threaded step, and with every target in one build graph
# cargo runs another target's compiles beside it on the second core (one
# target after another left a core idle through each LTO).
targets=()
for t in "$@"; do
    triple_info "$t"
    targets+=(--target "$t")
done
log "building $*"
cross_cargo --config "$CROSS_DIR/release.toml" build --release --locked "${targets[@]}" --bin picolet

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
    budget="$(budget_of "$t")"
    verdict="ok (<= $((budget / 1024 / 1024)) MiB)"
    if (( bytes > budget )); then verdict="OVER BUDGET ($budget bytes)"; over=1; fi
    # The musl targets ship as one static file that runs on any distro (or
    # none): a dynamic one is a build mistake, whatever its size.
    if [[ $t == *-musl && $linkage != static* ]]; then verdict+="; NOT STATIC"; over=1; fi
    if [[ $linkage == *"NOT stripped"* ]]; then verdict+="; NOT STRIPPED"; over=1; fi
    # It starts: `picolet --version` under qemu-user (natively on x86_64).
    runner=()
    if [[ -n "$QEMU_USER" ]] && command -v "$QEMU_USER" >/dev/null; then
        runner=("$QEMU_USER")
        [[ -n "$SYSROOT" ]] && runner+=(-L "$SYSROOT")
    fi
    if [[ -z "$QEMU_USER" || ${#runner[@]} -gt 0 ]]; then
        if ! "${runner[@]}" "$bin" --version >/dev/null 2>&1; then verdict+="; DOES NOT START"; over=1; fi
    fi
    printf '%-32s %10d %8s  %-22s %s\n' "$t" "$bytes" "$(awk -v b="$bytes" 'BEGIN { printf "%.2f", b / 1048576 }')" "$linkage" "$verdict"
done
echo
(( over == 0 )) || die "a binary is over its size budget, not static where it must be, or not stripped"
