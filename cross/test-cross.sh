#!/usr/bin/env bash
# cross/test-cross.sh -- owned by the cross-build work (cross/, boards/).
#
# `make test-cross`: runs picolet's unit tests (`cargo test --lib`) built for
# each target triple, executed under qemu-user (qemu-<arch>-static as cargo's
# runner; `-L <sysroot>` for glibc targets so the dynamic loader is found).
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

# CROSS_TEST_DEPS_OPT_LEVEL: the dependencies' opt-level for these builds
# (the dev profile's is 1; CI's lane uses 0, cheaper to build).
deps_opt=()
if [[ -n "${CROSS_TEST_DEPS_OPT_LEVEL:-}" ]]; then
    deps_opt=(--config "profile.dev.package.\"*\".opt-level=$CROSS_TEST_DEPS_OPT_LEVEL")
fi

total_pass=0 total_fail=0 failed_targets=()
declare -A summary
for t in "$@"; do
    triple_info "$t"
    if [[ -n "$QEMU_USER" ]]; then
        command -v "$QEMU_USER" >/dev/null || die "$QEMU_USER not found (make cross-deps)"
        runner="$QEMU_USER"
        [[ -n "$SYSROOT" ]] && runner+=" -L $SYSROOT"
        export "$RUNNER_VAR=$runner"
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
    cross_cargo "${deps_opt[@]}" test --locked --lib --target "$t" -- "${skips[@]}" 2>&1 | tee "$logf"
    rc=${PIPESTATUS[0]}
    set -e
    line="$(grep -E '^test result:' "$logf" | tail -n 1 || true)"
    pass="$(sed -n 's/.* \([0-9]\+\) passed.*/\1/p' <<<"$line")"
    fail="$(sed -n 's/.* \([0-9]\+\) failed.*/\1/p' <<<"$line")"
    ign="$(sed -n 's/.* \([0-9]\+\) ignored.*/\1/p' <<<"$line")"
    total_pass=$((total_pass + ${pass:-0}))
    total_fail=$((total_fail + ${fail:-0}))
    if (( rc != 0 )); then
        failed_targets+=("$t")
        summary[$t]="FAILED (rc=$rc): ${line:-no test result line (build failure?)}"
    else
        summary[$t]="ok: ${pass:-0} passed, ${ign:-0} ignored, ${#skips[@]} skip args"
    fi
    rm -f "$logf"
    [[ -n "$QEMU_USER" ]] && unset "$RUNNER_VAR"
done

echo
echo "== test-cross summary"
for t in "$@"; do printf '  %-32s %s\n' "$t" "${summary[$t]}"; done
echo "test-cross: $total_pass passed, $total_fail failed"
(( ${#failed_targets[@]} == 0 )) || die "failing targets: ${failed_targets[*]}"
