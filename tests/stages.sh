# tests/stages.sh -- owned by the integration test harness (tests/harness).
#
# Sourced by .ci/run and tests/test.sh (not run on its own): times named
# stages of a run and prints them as one table at the end. Each finished
# stage appends "name<TAB>seconds<TAB>result" to $STAGES_FILE, so a stage
# run in a background lane, or by a nested script, lands in the same table.
# shellcheck shell=bash

STAGES_FILE="$(realpath -m "${STAGES_FILE:-${CARGO_TARGET_DIR:-target}/stages.tsv}")"
export STAGES_FILE

# stage NAME CMD...: runs CMD, records its wall time and result, and
# returns its status.
stage() {
    local name="$1" start rc
    shift
    echo "== stage $name: $*"
    start=$(date +%s)
    "$@" && rc=0 || rc=$?
    stage_record "$name" "$(( $(date +%s) - start ))" "$rc"
    echo "== stage $name: $([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)") in $(( $(date +%s) - start ))s"
    return "$rc"
}

stage_record() { # name seconds rc
    mkdir -p "$(dirname "$STAGES_FILE")"
    printf '%s\t%s\t%s\n' "$1" "$2" "$([[ $3 == 0 ]] && echo ok || echo "FAILED ($3)")" >>"$STAGES_FILE"
}

# The table of every stage recorded so far, in the order they ended, and
# the wall time since $STAGES_T0 (seconds since the epoch) when it is set.
stage_table() {
    echo
    echo "== stages"
    printf '%-34s %8s  %s\n' STAGE SECONDS RESULT
    [[ -f "$STAGES_FILE" ]] && while IFS=$'\t' read -r name secs res; do
        printf '%-34s %8s  %s\n' "$name" "$secs" "$res"
    done <"$STAGES_FILE"
    if [[ -n "${STAGES_T0:-}" ]]; then
        local total=$(( $(date +%s) - STAGES_T0 ))
        printf '%-34s %8s  (%dm%02ds wall clock)\n' total "$total" $((total / 60)) $((total % 60))
    fi
}
