#!/bin/sh
# runc-clamp-oom.sh -- owned by the test harness (tests/harness/crio.rs);
# the demo (examples/demo.sh) uses it too.
#
# The OCI runtime a private CRI-O runs on a machine whose root lacks
# CAP_SYS_RESOURCE: runc, after raising `process.oomScoreAdj` in the
# bundle's config.json to no lower than this process's own oom_score_adj.
# CRI-O asks for -998 for sandboxes; without the capability runc cannot
# lower its score and fails with "failed to update /proc/self/oom_score_adj:
# Permission denied". containerd has `restrict_oom_score_adj` for this;
# CRI-O has no such option.
#
# Only `create` (and `run`) name a bundle; every other call passes through.
# The real runc is $RUNC, else the first `runc` on PATH.
set -eu
bundle=
prev=
for arg in "$@"; do
    case "$prev" in --bundle|-b) bundle=$arg ;; esac
    case "$arg" in --bundle=*) bundle=${arg#--bundle=} ;; esac
    prev=$arg
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
    want=$(sed -n 's/.*"oomScoreAdj": *\(-\{0,1\}[0-9]\{1,\}\).*/\1/p' "$bundle/config.json")
    own=$(cat /proc/self/oom_score_adj)
    if [ -n "$want" ] && [ "$want" -lt "$own" ]; then
        sed -i "s/\"oomScoreAdj\": *-\{0,1\}[0-9]\{1,\}/\"oomScoreAdj\":$own/" "$bundle/config.json"
    fi
fi
exec "${RUNC:-runc}" "$@"
