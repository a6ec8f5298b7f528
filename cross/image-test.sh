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
# IMAGE_TEST_SCENARIO=eviction (`make image-test-eviction`) boots once
# instead, with 256 MiB and the unified cgroup hierarchy, and init runs the
# eviction scenario (cross/scenarios/eviction/): a Guaranteed pod, a
# Burstable one and a BestEffort pod that grows its memory until it is
# stopped, beside the board's static pods. It passes on
# "PICOLET-EVICTION-PASS": the hog was Evicted (phase Failed, a message
# naming memory.available) while the other pods kept running without a
# restart and picolet was never restarted nor OOM-killed; then the
# MemoryPressure condition cleared and the static hog ran again.
#
# Usage: cross/image-test.sh BOARD
# Env:   IMAGE_TEST_TIMEOUT (seconds per boot, default 300)
#        IMAGE_TEST_VERBOSE=1 (stream the console while it boots)
#        IMAGE_TEST_MEM (MiB, default 512; 256 for the eviction scenario),
#        IMAGE_TEST_POD (default hello), IMAGE_TEST_SCENARIO (eviction)
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
scenario="${IMAGE_TEST_SCENARIO:-}"
case "$scenario" in
    "") mem="${IMAGE_TEST_MEM:-512}" ;;
    eviction) mem="${IMAGE_TEST_MEM:-256}" ;;
    *) die "unknown IMAGE_TEST_SCENARIO '$scenario' (known: eviction)" ;;
esac
pod="${IMAGE_TEST_POD:-hello}"
tdir="$img/test"
rm -rf "$tdir"
mkdir -p "$tdir"

# Fresh state disk: sparse raw file, ext4 with the label the boards use.
disk="$tdir/disk.img"
truncate -s 2G "$disk"
mkfs.ext4 -q -F -L picolet-data "$disk"

cmdline="$(cat "$img/cmdline.txt") picolet.test=1 picolet.testpod=$pod picolet.timeout=$((timeout_s - 30))"
marker=PICOLET-POD-RUNNING
if [[ "$scenario" == eviction ]]; then
    # The initramfs root is a tmpfs capped at half the RAM, and the image
    # unpacks to ~106 MiB: at 256 MiB it must be a ramfs (no cap).
    cmdline+=" rootfstype=ramfs picolet.scenario=eviction picolet.cgroup=v2"
    marker=PICOLET-EVICTION-PASS
fi

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
    MARKER_LINE="$(tr -d '\r' <"$logf" | grep -a "^$marker " | tail -n 1 || true)"
    if [[ -z "$MARKER_LINE" ]]; then
        echo "---- tail of $logf ----" >&2
        tr -d '\r' <"$logf" | tail -n 80 >&2
        echo "---- end of console ----" >&2
        tr -d '\r' <"$logf" | grep -a '^PICOLET-EVICTION-FAIL ' >&2 || true
        if (( rc == 124 || rc == 137 )); then
            die "boot $n: no $marker within ${timeout_s}s (qemu killed)"
        fi
        die "boot $n: qemu exited ($rc) without $marker"
    fi
    echo "  $MARKER_LINE   (host wall clock ${BOOT_WALL}s)"
    if [[ "$scenario" == eviction ]]; then
        tr -d '\r' <"$logf" | sed -n '/^eviction scenario: /,/^PICOLET-EVICTION-PASS /p' | sed 's/^/  | /'
    else
        tr -d '\r' <"$logf" | grep -a -A6 "^$marker " | tail -n +2 | sed 's/^/  | /'
    fi
}

if [[ "$scenario" == eviction ]]; then
    boot 1
    echo
    echo "image-test $board (eviction, ${mem} MiB, cgroup v2): the BestEffort hog was evicted;"
    echo "  the Guaranteed, Burstable and static pods kept running, picolet was never OOM-killed;"
    echo "  MemoryPressure cleared and the hog ran again"
    echo "  (qemu wall ${BOOT_WALL}s)"
    echo "image-test-eviction: 1 passed, 0 failed"
    exit 0
fi

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
