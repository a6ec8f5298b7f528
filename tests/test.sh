#!/usr/bin/env bash
# tests/test.sh -- `make test`; owned by the integration test harness.
#
# Everything CI runs after installing the packages, as timed stages:
#
#   1. check        the fast tier (`make check`: rustfmt, clippy, unit
#                   tests): a slip fails here, in the first minutes.
#   2. two lanes, side by side:
#      - the suite  (foreground) the test images, then every integration
#                   test binary on containerd and on CRI-O, and the
#                   runtime-free ones once (tests/suite.sh). These mostly
#                   wait on runtimes, probes and grace periods.
#      - the builds (background, niced) the release binary of every shipped
#                   target with its size and linkage checks (`make cross`),
#                   the unit tests of the board targets under qemu-user
#                   (`make test-cross`), the fuzz targets, and the
#                   qemu-x86_64 firmware image booted twice (`image-test`)
#                   and once more with 256 MiB for eviction. These compute.
#      Overlapping them is what keeps CI within its budget on 2 cores; the
#      builds run at nice 10 so the suite's waits stay short.
#   3. the stage table (.ci/run prints it with its own stages).
#
# The background lane's output goes to target/lane.log and is printed
# after the suite. Either lane failing fails the run; both always finish.
# Env: SUITE_JOBS, SUITE_THREADS (tests/suite.sh -j/-t), TEST_RUNTIMES,
#      CI_FUZZ_SECONDS, CI_CROSS_TEST_TARGETS, TEST_LANES=0 (run the lanes
#      one after the other: slower, for telling a load-induced failure from
#      a real one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/stages.sh
: "${STAGES_T0:=$(date +%s)}"
export STAGES_T0
make=(make --no-print-directory)
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"

stage check "${make[@]}" check

builds_lane() {
    stage cross "${make[@]}" cross
    stage test-cross "${make[@]}" test-cross CROSS_TARGETS="${CI_CROSS_TEST_TARGETS:-aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf riscv64gc-unknown-linux-gnu}"
    stage fuzz "${make[@]}" fuzz FUZZ_PROFILE=dev FUZZ_SECONDS="${CI_FUZZ_SECONDS:-30}"
    stage image-test "${make[@]}" image-test BOARD=qemu-x86_64
    stage image-test-eviction "${make[@]}" image-test-eviction BOARD=qemu-x86_64
}

suite_lane() {
    stage images "${make[@]}" images
    stage suite "${make[@]}" test-suite
}

lane_log="$target/lane.log"
if [[ "${TEST_LANES:-1}" == 0 ]]; then
    suite_lane
    builds_lane
    exit 0
fi

echo "== the build lane runs in the background (niced); its output: $lane_log"
( set -e; builds_lane ) >"$lane_log" 2>&1 </dev/null &
lane=$!
# A failing suite must not leave the lane running unseen.
trap 'kill -- -$lane 2>/dev/null || kill $lane 2>/dev/null || true' INT TERM

suite_rc=0
suite_lane || suite_rc=$?
echo "== waiting for the build lane"
lane_rc=0
wait "$lane" || lane_rc=$?
echo "== the build lane's output ($lane_log)"
cat "$lane_log"
echo "== the build lane: $([[ $lane_rc == 0 ]] && echo ok || echo "FAILED (exit $lane_rc)")"
(( suite_rc == 0 && lane_rc == 0 ))
