# cross/common.sh -- owned by the cross-build work (cross/, boards/).
#
# Shared helpers sourced by the scripts in cross/ (not run on its own):
# repo paths, logging, the cargo invocation with cross/config.toml, and the
# per-triple facts (qemu-user binary, glibc sysroot, binutils prefix) that
# several scripts need. Kept in one place so a new target is added once.
# shellcheck shell=bash

CROSS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$CROSS_DIR/.." && pwd)"
OUT="${OUT:-$REPO/out}"
CACHE="${CACHE:-$OUT/cache}"
CARGO="${CARGO:-cargo}"
# Other engineers share the machine's 2 cores: builds run niced.
NICE=(nice -n "${CROSS_NICE:-10}")

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }

cross_cargo() {
    "${NICE[@]}" "$CARGO" --config "$CROSS_DIR/config.toml" "$@"
}

# triple_info TRIPLE -> sets QEMU_USER, SYSROOT (empty for static musl),
# TOOLPREFIX (binutils prefix), RUNNER_VAR (CARGO_TARGET_<TRIPLE>_RUNNER).
triple_info() {
    local t="$1"
    case "$t" in
        aarch64-unknown-linux-musl) QEMU_USER=qemu-aarch64-static SYSROOT="" TOOLPREFIX=aarch64-linux-gnu- ;;
        armv7-unknown-linux-gnueabihf) QEMU_USER=qemu-arm-static SYSROOT=/usr/arm-linux-gnueabihf TOOLPREFIX=arm-linux-gnueabihf- ;;
        riscv64gc-unknown-linux-gnu) QEMU_USER=qemu-riscv64-static SYSROOT=/usr/riscv64-linux-gnu TOOLPREFIX=riscv64-linux-gnu- ;;
        x86_64-unknown-linux-musl) QEMU_USER="" SYSROOT="" TOOLPREFIX="" ;;
        *) die "unknown target triple '$t' (see cross/common.sh)" ;;
    esac
    RUNNER_VAR="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$t")_RUNNER"
}

# Path of the release binary that `make cross` builds for TRIPLE.
picolet_bin() { echo "${CARGO_TARGET_DIR:-$REPO/target}/$1/release/picolet"; }
