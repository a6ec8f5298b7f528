#!/usr/bin/env bash
# cross/image-test.sh -- owned by the cross-build work (cross/, boards/).
#
# `make image-test BOARD=qemu-x86_64|qemu-aarch64`: boots the board image
# built by `make image` (out/<board>/) in qemu-system under TCG (never KVM),
# serial console only, no network card, with a fresh ext4 disk as the
# persistent state device. The image's init runs in test mode
# (picolet.test=1): it prints "PICOLET-POD-RUNNING <seconds since boot>"
# once picolet reports the example static pod Running, then powers off.
# Boot 1 starts from an empty disk; boot 2 keeps the disk and must show the
# pod Running again (adopted or restarted from the persisted state). Each
# boot has a hard timeout; on failure the tail of its console log is shown.
#
# Usage: cross/image-test.sh BOARD
# Env:   IMAGE_TEST_TIMEOUT (seconds per boot, default 300)
#        IMAGE_TEST_VERBOSE=1 (stream the console while it boots)
#        IMAGE_TEST_MEM (MiB, default 512), IMAGE_TEST_POD (default hello)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# == 1 )) || die "usage: $0 BOARD"
board="$1"
bdir="$REPO/boards/$board"
[[ -f "$bdir/board.env" ]] || die "no board profile boards/$board"
QEMU_SYSTEM="" QEMU_MACHINE=""
# shellcheck source=/dev/null
source "$bdir/board.env"
[[ -n "$QEMU_SYSTEM" ]] || die "board $board has no QEMU_SYSTEM: it runs on real hardware only"
command -v "$QEMU_SYSTEM" >/dev/null || die "$QEMU_SYSTEM not found (make cross-deps)"
img="$OUT/$board"
for f in vmlinuz initrd.img cmdline.txt; do
    [[ -f "$img/$f" ]] || die "$img/$f missing: run 'make image BOARD=$board' first"
done
timeout_s="${IMAGE_TEST_TIMEOUT:-300}"
mem="${IMAGE_TEST_MEM:-512}"
pod="${IMAGE_TEST_POD:-hello}"
tdir="$img/test"
rm -rf "$tdir"
mkdir -p "$tdir"

# Fresh state disk: sparse raw file, ext4 with the label the boards use.
disk="$tdir/disk.img"
truncate -s 2G "$disk"
mkfs.ext4 -q -F -L picolet-data "$disk"

cmdline="$(cat "$img/cmdline.txt") picolet.test=1 picolet.testpod=$pod picolet.timeout=$((timeout_s - 30))"

boot() { # N -> sets MARKER_LINE, BOOT_WALL
    local n="$1" logf="$tdir/console-boot$1.log" start rc
    log "boot $n: $QEMU_SYSTEM $QEMU_MACHINE -m $mem (TCG, timeout ${timeout_s}s), console in $logf"
    start=$(date +%s)
    set +e
    # shellcheck disable=SC2086
    qemu_cmd=(nice -n "${CROSS_NICE:-10}" timeout -k 10 "$timeout_s"
        "$QEMU_SYSTEM" $QEMU_MACHINE -accel tcg -m "$mem" -nographic -monitor none
        -no-reboot -nic none
        -kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "$cmdline"
        -drive "file=$disk,format=raw,if=virtio,cache=writeback")
    if [[ "${IMAGE_TEST_VERBOSE:-0}" == 1 ]]; then
        "${qemu_cmd[@]}" </dev/null 2>&1 | tee "$logf"
        rc=${PIPESTATUS[0]}
    else
        "${qemu_cmd[@]}" </dev/null >"$logf" 2>&1
        rc=$?
    fi
    set -e
    BOOT_WALL=$(($(date +%s) - start))
    MARKER_LINE="$(tr -d '\r' <"$logf" | grep -a '^PICOLET-POD-RUNNING ' | tail -n 1 || true)"
    if [[ -z "$MARKER_LINE" ]]; then
        echo "---- tail of $logf ----" >&2
        tr -d '\r' <"$logf" | tail -n 80 >&2
        echo "---- end of console ----" >&2
        if (( rc == 124 || rc == 137 )); then
            die "boot $n: no PICOLET-POD-RUNNING within ${timeout_s}s (qemu killed)"
        fi
        die "boot $n: qemu exited ($rc) without PICOLET-POD-RUNNING"
    fi
    echo "  $MARKER_LINE   (host wall clock ${BOOT_WALL}s)"
    tr -d '\r' <"$logf" | grep -a -A6 '^PICOLET-POD-RUNNING ' | tail -n +2 | sed 's/^/  | /'
}

boot 1
first="$MARKER_LINE" first_wall=$BOOT_WALL
grep -q ' boot=1 ' <<<"$first " || die "boot 1 did not start from a fresh disk: $first"
boot 2
second="$MARKER_LINE" second_wall=$BOOT_WALL
grep -q ' boot=2 ' <<<"$second " || die "boot 2 did not find boot 1's state on the disk: $second"

t1="$(awk '{ print $2 }' <<<"$first")"
t2="$(awk '{ print $2 }' <<<"$second")"
echo
echo "image-test $board: pod '$pod' Running"
echo "  boot 1 (empty disk):           ${t1}s after kernel start (qemu wall ${first_wall}s)"
echo "  boot 2 (disk from boot 1):     ${t2}s after kernel start (qemu wall ${second_wall}s)"
echo "image-test: 2 passed, 0 failed"
