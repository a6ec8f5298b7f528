#!/usr/bin/env bash
# cross/package-test.sh -- owned by the packaging work (cross/install/,
# cross/deb.sh, cross/package-image/; issue #25).
#
# `make image-test-package BOARD=qemu-x86_64`: picolet's Debian package on a
# systemd node. Packs `make cross`'s binary for the board twice with
# cross/deb.sh (Cargo.toml's version, then the same binary as
# <version>+repack1, the upgrade), builds the package test image
# (cross/mkimage.sh with IMAGE_VARIANT=package: Debian bookworm's systemd as
# PID 1, dpkg, containerd/runc/CNI as in the board image, the two .debs; into
# out/<board>-package/) and boots it once under qemu-system (TCG, serial
# console, no disk, no network card). In the guest,
# cross/package-image/check.sh installs the package with dpkg -i, starts it
# and checks Type=notify, that the board's static pod runs, upgrades in place
# (a new MainPID; the pod's container the same one, not restarted), removes
# and purges; it prints one "PICOLET-PKG PASS|FAIL <check> ..." line per
# check. This script fails on any FAIL, on a missing summary line, or when
# the boot outlives its timeout, showing the tail of the console.
#
# Usage: cross/package-test.sh BOARD
# Env:   PACKAGE_TEST_TIMEOUT (seconds for the boot, default 420)
#        PACKAGE_TEST_MEM (MiB, default 1024: the root tmpfs holds the images
#        and containers), IMAGE_TEST_VERBOSE=1 (stream the console)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# == 1 )) || die "usage: $0 BOARD"
board="$1"
bdir="$REPO/boards/$board"
[[ -f "$bdir/board.env" ]] || die "no board profile boards/$board"
QEMU_SYSTEM="" QEMU_MACHINE="" IMAGE_UNSUPPORTED=""
# shellcheck source=/dev/null
source "$bdir/board.env"
[[ -n "$QEMU_SYSTEM" && -z "$IMAGE_UNSUPPORTED" ]] || die "board $board has no qemu image: it runs on real hardware only"
for tool in "$QEMU_SYSTEM" dpkg-deb cpio readelf gzip apt-get; do
    command -v "$tool" >/dev/null || die "$tool not found: make cross-deps installs it (cross/deps.sh)"
done
timeout_s="${PACKAGE_TEST_TIMEOUT:-420}"
mem="${PACKAGE_TEST_MEM:-1024}"
t0=$(date +%s)

# --- the two packages: the release, and the same binary as an upgrade ---------------
bash "$CROSS_DIR/build.sh" "$TARGET_TRIPLE"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/Cargo.toml" | head -1)
debdir="${CARGO_TARGET_DIR:-$REPO/target}/deb"
bash "$CROSS_DIR/deb.sh" "$DEB_ARCH" >&2
DEB_VERSION="$version+repack1" bash "$CROSS_DIR/deb.sh" "$DEB_ARCH" >&2
old="$debdir/picolet_${version}_$DEB_ARCH.deb" new="$debdir/picolet_${version}+repack1_$DEB_ARCH.deb"

# --- the image ---------------------------------------------------------------------------
IMAGE_VARIANT=package PACKAGE_DEBS="$old $new" bash "$CROSS_DIR/mkimage.sh" "$board"
img="$OUT/$board-package"
build_s=$(($(date +%s) - t0))
log "packages and image built in ${build_s}s"

# --- the boot -------------------------------------------------------------------------------
tdir="$img/test"
rm -rf "$tdir"
mkdir -p "$tdir"
logf="$tdir/console.log"
# The board's command line (qemu-x86_64's has no_timer_check: see its
# board.env).
cmdline="$(cat "$img/cmdline.txt") picolet.test=1 picolet.timeout=$((timeout_s - 60))"
log "boot: $QEMU_SYSTEM $QEMU_MACHINE -m $mem (TCG, timeout ${timeout_s}s), console in $logf"
start=$(date +%s)
set +e
# shellcheck disable=SC2086
qemu_cmd=(nice -n "${CROSS_NICE:-10}" timeout -k 10 "$timeout_s"
    "$QEMU_SYSTEM" $QEMU_MACHINE -accel tcg -m "$mem" -nographic -monitor none
    -no-reboot -nic none
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "$cmdline")
if [[ "${IMAGE_TEST_VERBOSE:-0}" == 1 ]]; then
    "${qemu_cmd[@]}" </dev/null 2>&1 | tee "$logf"
    rc=${PIPESTATUS[0]}
else
    "${qemu_cmd[@]}" </dev/null >"$logf" 2>&1
    rc=$?
fi
set -e
boot_s=$(($(date +%s) - start))

console() { tr -d '\r' <"$logf"; }
console | grep -a -E '^(PICOLET-PKG|package check:)' | sed 's/^/  | /' || true
done_line="$(console | grep -a '^PICOLET-PKG-DONE ' | tail -n 1 || true)"
fails="$(console | grep -a -c '^PICOLET-PKG FAIL ' || true)"
passes="$(console | grep -a -c '^PICOLET-PKG PASS ' || true)"
if [[ -z "$done_line" || "$fails" != 0 ]]; then
    echo "---- tail of $logf ----" >&2
    console | tail -n 100 >&2
    echo "---- end of console ----" >&2
    console | grep -a '^PICOLET-PKG FAIL ' >&2 || true
    [[ -n "$done_line" ]] || {
        if (( rc == 124 || rc == 137 )); then
            die "no PICOLET-PKG-DONE within ${timeout_s}s (qemu killed): the guest's checks did not finish"
        fi
        die "qemu exited ($rc) without PICOLET-PKG-DONE: the guest's checks did not finish"
    }
    die "$fails of the package checks failed (see the FAIL lines above)"
fi
echo
echo "image-test-package $board: $(basename "$old") installed under systemd, upgraded in place to"
echo "  $(basename "$new") (same container), removed and purged"
echo "  build ${build_s}s, boot ${boot_s}s (qemu wall), guest ${done_line##*uptime=}s"
echo "image-test-package: $passes passed, 0 failed"
