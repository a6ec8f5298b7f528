#!/usr/bin/env bash
# tests/suite.sh -- owned by the integration test harness (tests/harness).
#
# Runs integration test binaries (tests/*.rs) on one or more container
# runtimes, several binaries at a time. `cargo test --test a --test b` runs
# its binaries one after the other, and most integration tests wait (for a
# runtime, a probe period, a grace period) rather than compute, so on two
# cores a serial run left the CPU idle most of the time. The harness is
# already safe across processes (each instance claims its own network slot,
# temp dirs, cgroup root and ports; images and unpacked binaries are built
# under file locks), so whole binaries can run side by side.
#
# One job is one (runtime, binary) pair. Jobs start slowest first, as
# last measured (target/suite-durations.tsv, written at the end of each
# run; the order below stands in on a fresh clone), so that a long binary
# does not start last. Each job's output goes to target/suite-logs/; a
# failing job's log is printed whole, a passing one's only its summary.
# The run ends with a table of jobs by duration and the closing line
# "suite: N passed, N failed".
#
# Usage: tests/suite.sh [-j JOBS] [-t THREADS] -r "RUNTIME..." [-o "TEST..."] TEST...
#   JOBS     binaries at once (default 3)
#   THREADS  --test-threads of each binary (default 2)
#   RUNTIME  containerd | crio; a test named ..._only_on_<other> is skipped
#   -o       tests that start no container runtime: run once, as job any/TEST
#   TEST     a file name of tests/ without .rs, run once per RUNTIME
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=3 threads=2 runtimes="containerd" all_runtimes="containerd crio" once=""
while getopts "j:t:r:o:" o; do
    case "$o" in
        j) jobs="$OPTARG" ;;
        t) threads="$OPTARG" ;;
        r) runtimes="$OPTARG" ;;
        o) once="$OPTARG" ;;
        *) echo "usage: $0 [-j JOBS] [-t THREADS] -r RUNTIMES TEST..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
(( $# )) || [[ -n "$once" ]] || { echo "suite.sh: no test named" >&2; exit 2; }

target="${CARGO_TARGET_DIR:-target}"
logs="$target/suite-logs"
durations="$target/suite-durations.tsv"
rm -rf "$logs"
mkdir -p "$logs"

# Slowest first when nothing was measured yet (CI, a fresh clone).
default_order="control_plane api_chaos api_cache static_pods eviction kubelet_fidelity probes ephemeral
 harness_smoke api_tokens api_bootstrap node_exec api_configs hostile_input
 node_cli api_logs apiserver node_serving runtimes node_logs api_events
 api_stats node_api volume_ownership"

# --- build --------------------------------------------------------------------
echo "suite: building" $once "$@"
build_log="$logs/build.log"
args=()
for t in $once "$@"; do args+=(--test "$t"); done
if ! cargo test --no-run "${args[@]}" 2>"$build_log"; then
    cat "$build_log" >&2
    echo "suite: the test binaries did not build" >&2
    exit 1
fi
declare -A exe=()
while read -r src path; do
    name="$(basename "$src" .rs)"
    exe[$name]="$path"
done < <(sed -n 's/^ *Executable tests\/\([^ ]*\) (\(.*\))$/\1 \2/p' "$build_log")
for t in $once "$@"; do
    [[ -n "${exe[$t]:-}" ]] || { cat "$build_log" >&2; echo "suite: no executable for tests/$t.rs" >&2; exit 1; }
done

# --- order ----------------------------------------------------------------------
# A job's weight: its last measured seconds, else its place in default_order
# (earlier is heavier), else last.
declare -A weight=()
rank=1000000
for t in $default_order; do weight[$t]=$rank; rank=$((rank - 1000)); done
if [[ -f "$durations" ]]; then
    while IFS=$'\t' read -r rt t secs; do weight["$rt/$t"]="$secs"; done <"$durations"
fi
queue=()
while read -r _ job; do queue+=("$job"); done < <(
    for t in $once; do echo "${weight[any/$t]:-${weight[$t]:-0}} any/$t"; done
    for rt in $runtimes; do
        for t in "$@"; do
            echo "${weight[$rt/$t]:-${weight[$t]:-0}} $rt/$t"
        done
    done | sort -k1,1nr -s)

# --- run --------------------------------------------------------------------------
declare -A pid_job=() started=() took=() result=()
passed=0 failed=0 failed_jobs=()

run_job() { # runtime|any test
    local rt="$1" t="$2" skips=()
    if [[ "$rt" == any ]]; then
        exec "${exe[$t]}" --test-threads="$threads"
    fi
    for other in $all_runtimes; do
        [[ "$other" == "$rt" ]] || skips+=(--skip "only_on_$other")
    done
    PICOLET_TEST_RUNTIME="$rt" exec "${exe[$t]}" --test-threads="$threads" "${skips[@]}"
}

finish() { # pid rc
    local job="${pid_job[$1]}" rc="$2" log line p f
    log="$logs/${job//\//-}.log"
    took[$job]=$(( $(date +%s) - started[$job] ))
    line="$(grep -E '^test result:' "$log" | tail -n 1 || true)"
    p="$(sed -n 's/.* \([0-9]\+\) passed.*/\1/p' <<<"$line")"
    f="$(sed -n 's/.* \([0-9]\+\) failed.*/\1/p' <<<"$line")"
    passed=$((passed + ${p:-0}))
    if (( rc == 0 )); then
        result[$job]="ok: ${line#test result: ok. }"
        echo "suite: $job passed in ${took[$job]}s (${p:-0} passed)"
    else
        failed=$((failed + ${f:-1}))
        failed_jobs+=("$job")
        result[$job]="FAILED (rc=$rc): ${line:-no result line}"
        echo "suite: $job FAILED in ${took[$job]}s; its output:"
        sed 's/^/    /' "$log"
    fi
    unset "pid_job[$1]"
}

echo "suite: ${#queue[@]} jobs, $jobs at a time, $threads test threads each"
for job in "${queue[@]}"; do
    while (( ${#pid_job[@]} >= jobs )); do
        wait -n -p done_pid "${!pid_job[@]}" && rc=0 || rc=$?
        finish "$done_pid" "$rc"
    done
    rt="${job%%/*}" t="${job#*/}"
    started[$job]=$(date +%s)
    run_job "$rt" "$t" >"$logs/${job//\//-}.log" 2>&1 </dev/null &
    pid_job[$!]="$job"
    echo "suite: started $job"
done
while (( ${#pid_job[@]} )); do
    wait -n -p done_pid "${!pid_job[@]}" && rc=0 || rc=$?
    finish "$done_pid" "$rc"
done

# --- report -------------------------------------------------------------------------
{
    for job in "${queue[@]}"; do printf '%s\t%s\t%s\n' "${job%%/*}" "${job#*/}" "${took[$job]}"; done
} >"$durations"
echo
echo "== suite: jobs by duration"
for job in "${queue[@]}"; do printf '%6ss  %-34s %s\n' "${took[$job]}" "$job" "${result[$job]}"; done | sort -k1,1nr
echo "suite: logs in $logs"
(( ${#failed_jobs[@]} == 0 )) || echo "suite: failed: ${failed_jobs[*]}"
echo "suite: $passed passed, $failed failed"
(( ${#failed_jobs[@]} == 0 ))
