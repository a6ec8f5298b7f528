#!/usr/bin/env bash
# cross/test-cross.sh -- owned by the cross-build work (cross/, boards/).
#
# `make test-cross`: runs picolet's unit tests (`cargo test --lib`) built for
# each target triple, executed under qemu-user (qemu-<arch>-static; `-L
# <sysroot>` for glibc targets so the dynamic loader is found), with a
# timeout (below).
# x86_64 musl runs natively. Tests that fail only because of qemu-user
# emulation are listed in cross/qemu-skip.txt (with the reason) and skipped;
# the list is printed so it never hides silently. Exits non-zero if any
# target's tests fail. The closing line is "N passed, N failed".
#
# Usage: cross/test-cross.sh TRIPLE...
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# )) || die "usage: $0 TRIPLE..."
cd "$REPO"
skipfile="$CROSS_DIR/qemu-skip.txt"
export RUST_BACKTRACE=0

# A test binary under qemu-user that runs past CROSS_TEST_TIMEOUT seconds
# (default 600; the armv7 run takes ~20 s) is taken as hung and run once
# more with one test thread. qemu-user 7.2 (Debian 12) can deadlock the
# child of a fork made while another guest thread runs: a unit test that
# spawned `openssl` was seen waiting 18 minutes on its child, stuck on a
# futex before its exec. `timeout` kills the whole process group, the
# stuck child with it. A second hang fails the run.
timeout_s="${CROSS_TEST_TIMEOUT:-600}"

total_pass=0 total_fail=0 failed_targets=()
declare -A summary
for t in "$@"; do
    triple_info "$t"
    runner=""
    if [[ -n "$QEMU_USER" ]]; then
        command -v "$QEMU_USER" >/dev/null || die "$QEMU_USER not found (make cross-deps)"
        runner="$QEMU_USER"
        [[ -n "$SYSROOT" ]] && runner+=" -L $SYSROOT"
    fi
    skips=()
    if [[ -f "$skipfile" ]]; then
        # Format: <triple or *> <test name filter> <reason...>
        while read -r pat name reason; do
            [[ -z "$pat" || "$pat" == \#* ]] && continue
            # shellcheck disable=SC2053
            if [[ "$t" == $pat ]]; then
                log "$t: skipping $name under qemu-user: $reason"
                skips+=(--skip "$name")
            fi
        done <"$skipfile"
    fi
    log "testing $t${QEMU_USER:+ under $runner}"
    logf="$(mktemp)"
    set +e
    cross_cargo test --locked --lib --no-run --target "$t" 2>&1 | tee "$logf"
    rc=${PIPESTATUS[0]}
    set -e
    if (( rc == 0 )); then
        bin="$(sed -n 's/^ *Executable unittests src\/lib.rs (\(.*\))$/\1/p' "$logf" | tail -n 1)"
        [[ -n "$bin" ]] || die "$t: no unit test executable in cargo's output"
        run=()
        [[ -n "$QEMU_USER" ]] && run=($runner)
        for threads in "" 1; do
            set +e
            timeout -k 10 "$timeout_s" "${run[@]}" "$bin" ${threads:+--test-threads=$threads} "${skips[@]}" 2>&1 | tee "$logf"
            rc=${PIPESTATUS[0]}
            set -e
            (( rc == 124 || rc == 137 )) && [[ -z "$threads" ]] || break
            log "$t: the unit tests ran past ${timeout_s}s under qemu-user (hung; see above): once more with one test thread"
        done
    fi
    line="$(grep -E '^test result:' "$logf" | tail -n 1 || true)"
    pass="$(sed -n 's/.* \([0-9]\+\) passed.*/\1/p' <<<"$line")"
    fail="$(sed -n 's/.* \([0-9]\+\) failed.*/\1/p' <<<"$line")"
    ign="$(sed -n 's/.* \([0-9]\+\) ignored.*/\1/p' <<<"$line")"
    total_pass=$((total_pass + ${pass:-0}))
    total_fail=$((total_fail + ${fail:-0}))
    if (( rc != 0 )); then
        failed_targets+=("$t")
        if (( rc == 124 || rc == 137 )); then
            summary[$t]="FAILED: hung twice past ${timeout_s}s under qemu-user"
        else
            summary[$t]="FAILED (rc=$rc): ${line:-no test result line (build failure?)}"
        fi
    else
        summary[$t]="ok: ${pass:-0} passed, ${ign:-0} ignored, ${#skips[@]} skip args"
    fi
    rm -f "$logf"
done

echo
echo "== test-cross summary"
for t in "$@"; do printf '  %-32s %s\n' "$t" "${summary[$t]}"; done
echo "test-cross: $total_pass passed, $total_fail failed"
(( ${#failed_targets[@]} == 0 )) || die "failing targets: ${failed_targets[*]}"
