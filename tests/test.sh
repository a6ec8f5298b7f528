#!/usr/bin/env bash
# tests/test.sh -- `make test`; owned by the integration test harness.
#
# Everything CI runs after installing the packages, as timed stages in
# three lanes that run side by side, because on 2 cores no serial order
# fits CI's budget: the release builds are mostly one long single-threaded
# LTO step each, and the integration tests mostly wait.
#
#   foreground  `make check`, the fast tier (rustfmt, clippy, unit tests):
#               a slip fails the run in its first minutes, and stops the
#               other lanes. Then the test images and the integration suite
#               (tests/suite.sh): every test binary on containerd and on
#               CRI-O, the runtime-free ones once, several at a time;
#               then the fleet test (`make test-fleet`: hollow nodes, its
#               own build with the `hollow` feature) and a fixed subset of
#               Kubernetes' node conformance tests with picolet as the node
#               (`make conformance-ci`, issue #27).
#   release     (background, niced) the x86_64 musl release binary, the
#               qemu-x86_64 firmware image booted twice (`image-test`) and
#               once more with 256 MiB and cgroup v2 for eviction (that
#               boot in a session of its own, not niced: see own_session),
#               then the release binaries of the boards (`make cross`: size, static
#               linkage and start-up checked for all four).
#   The Debian package under systemd (`make image-test-package`: its own
#   image with systemd and dpkg, one boot that installs, upgrades and
#   purges) is not a stage: about 6 min on a loaded machine, and this lane
#   is the run's longest, so each minute here is a minute of CI;
#   `make test-full` runs it.
#   cross       (background, niced) the unit tests of armv7 under
#               qemu-user (`make test-cross`), in a target dir of its own
#               (aarch64's and riscv64's run in `make test-full`); then
#               the qemu-x86_64 image's power cut at its first boot's
#               image import, then 3 times during pod churn
#               (`image-test-powercut`, issue #23; `make test-full` cuts
#               100), once the release lane has booted that image: this
#               lane ends minutes before the release lane, so the cuts
#               add no wall-clock time of their own. Their boots run in a
#               session of their own, not niced (see powercut_stage).
#
# The background lanes run at nice 10 so the foreground's tests, which
# wait on timers, get the CPU when they need it. Their output goes to
# target/lane-<name>.log and is printed when they end. Any lane failing
# fails the run; a failing fast tier stops the others at once.
# Env: SUITE_JOBS, SUITE_THREADS (tests/suite.sh -j/-t), TEST_RUNTIMES,
#      CI_CROSS_TEST_TARGETS, TEST_LANES=0 (every stage one
#      after the other: slower, for telling a load-induced failure from a
#      real one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/stages.sh
: "${STAGES_T0:=$(date +%s)}"
export STAGES_T0
make=(make --no-print-directory)
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"

# The release lane says when the qemu-x86_64 image is built and booted
# (image_ready) or that it ended without it (release_ended), for the power
# cuts in the cross lane.
image_ready="$target/lane-release.image-ready"
release_ended="$target/lane-release.ended"

release_lane() {
    stage cross-x86_64 "${make[@]}" cross CROSS_TARGETS=x86_64-unknown-linux-musl
    stage image-test "${make[@]}" image-test BOARD=qemu-x86_64
    touch "$image_ready"
    stage image-test-eviction own_session "${make[@]}" image-test-eviction BOARD=qemu-x86_64
    stage cross "${make[@]}" cross
}

# A target dir of its own: `cargo test` holds its build directory's lock
# while the tests run, and the host's (target/debug) is the foreground's.
# No debug info (RUST_BACKTRACE is off there; a panic still names its line).
# The boards' unit tests run for armv7, the 32-bit one, where usize,
# atomics and alignment differ from the host's. aarch64 and riscv64 are
# 64-bit little-endian like the host, whose unit tests run in the fast tier;
# their release binaries are built and started in the release lane, and the
# static musl build runs real pods in the image boots. Their unit tests run
# in `make test-full`: each target's test build is a whole debug build of
# the dependency graph (about 200 CPU-seconds), which CI's 40 minutes on 2
# cores do not hold.
cross_lane() {
    CARGO_TARGET_DIR="$target/lane-cross" CARGO_PROFILE_DEV_DEBUG=0 \
        stage test-cross "${make[@]}" test-cross CROSS_TARGETS="${CI_CROSS_TEST_TARGETS:-armv7-unknown-linux-gnueabihf}"
    stage image-test-powercut powercut_stage
}

# The power cuts (tests/power_cuts.rs), on the image the release lane
# built and booted. A guest's deadlines (picolet's 120 s CRI calls,
# containerd's own) run on the host's clock, so a guest starved of CPU
# misses them and its boot grows far past its work: niced in a lane beside
# the suite, a boot took ~560 s (2026-12-02). So the test binary is built
# here, niced, and the boots run in a session of their own (with
# autogroup scheduling, CPU is shared between sessions first), raised back
# from the lane's nice 10 where that is allowed, like the foreground's
# tests that wait on timers. A lane stopped stops that session too.
powercut_stage() {
    "${CARGO:-cargo}" test --locked --test power_cuts --no-run >/dev/null || return
    echo "waiting for the release lane's qemu-x86_64 image"
    until [[ -e "$image_ready" ]]; do
        if [[ -e "$release_ended" ]]; then
            echo "the release lane ended before its image-test passed: no image to cut the power of"
            return 1
        fi
        sleep 5
    done
    # -o image: the image the release lane booted, not built again.
    own_session "${make[@]}" -o image image-test-powercut BOARD=qemu-x86_64 POWER_CUTS=3
}

# Runs "$@" in a session of its own, raised back from its lane's nice 10
# where that is allowed: for the qemu guests whose deadlines run on the
# host's clock (the power cuts, and the eviction boot with 256 MiB, which
# niced beside the suite took 85 s to start containerd and did not finish
# its scenario in 300 s, 2026-12-06). A lane stopped stops that session.
own_session() {
    nice -n -10 setsid "$@" &
    local pid=$! rc=0
    trap 'pkill -KILL -s "$pid" 2>/dev/null; exit 143' TERM INT
    wait "$pid" || rc=$?
    trap - TERM INT
    return "$rc"
}

foreground() {
    stage check "${make[@]}" check || return 99
    stage images "${make[@]}" images || return 1
    stage suite "${make[@]}" test-suite || return 1
    local rc=0
    stage fleet "${make[@]}" test-fleet || rc=1
    stage conformance "${make[@]}" conformance-ci || rc=1
    return "$rc"
}

# `tests/test.sh --lane NAME`: one background lane, as started below.
if [[ "${1:-}" == --lane ]]; then
    # setsid made the lane a session, and with the kernel's autogroup
    # scheduling (on by default) CPU is shared between sessions first and
    # by nice only within one: the session itself must be niced, or two
    # lanes take two thirds of the CPU from the foreground's tests.
    echo 10 >/proc/self/autogroup 2>/dev/null || true
    renice -n 10 -p $$ >/dev/null
    [[ "$2" == release ]] && trap 'touch "$release_ended"' EXIT
    "${2}_lane"
    exit 0
fi

rm -f "$image_ready" "$release_ended"

if [[ "${TEST_LANES:-1}" == 0 ]]; then
    foreground
    release_lane
    cross_lane
    exit 0
fi

declare -A lane_pid=()
for lane in release cross; do
    log="$target/lane-$lane.log"
    echo "== lane $lane runs in the background (nice 10); its output: $log"
    # setsid: a process group of its own, to be stopped whole.
    setsid bash "${BASH_SOURCE[0]}" --lane "$lane" >"$log" 2>&1 </dev/null &
    lane_pid[$lane]=$!
done
stop_lanes() {
    for lane in "${!lane_pid[@]}"; do kill -- -"${lane_pid[$lane]}" 2>/dev/null || true; done
}
trap 'stop_lanes' INT TERM

fg_rc=0
foreground || fg_rc=$?
if (( fg_rc == 99 )); then
    echo "== the fast tier failed: stopping the other lanes"
    stop_lanes
fi
rc=$fg_rc
for lane in release cross; do
    echo "== waiting for lane $lane"
    lane_rc=0
    wait "${lane_pid[$lane]}" || lane_rc=$?
    echo "== lane $lane's output ($target/lane-$lane.log)"
    cat "$target/lane-$lane.log"
    echo "== lane $lane: $([[ $lane_rc == 0 ]] && echo ok || echo "FAILED (exit $lane_rc)")"
    (( lane_rc == 0 )) || rc=1
done
exit "$rc"
