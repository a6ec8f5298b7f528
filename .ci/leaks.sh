#!/usr/bin/env bash
# .ci/leaks.sh -- the end of every CI run: nothing the tests started is left.
#
# Fails, listing each leftover, when any of these survive `make test`:
# a picolet, container runtime, shim, conmon, etcd, control-plane or qemu
# process (by its 15-character comm); a mount under a test's temp dir (picolet-test.*, picolet-kube.*,
# a runtime's .tmp* dir) or a pod network namespace; a test bridge (pcl<N>);
# a test's temp dir. A leak left on a developer's machine is tomorrow's
# unexplained failure, so CI treats one as a failure today.
set -uo pipefail
tmp="${TMPDIR:-/tmp}"
leaks=()

# Zombies (stat Z) are left out: they hold nothing, and whether they are
# reaped is up to the machine's init, not to the tests.
procs="$(ps -eo pid=,stat=,comm=,args= | awk '$2 !~ /^Z/ && $3 ~ /^(picolet|containerd|containerd-shim|crio|conmon|etcd|kube-apiserver|kube-controller|kube-scheduler|qemu-system-x86|qemu-system-aar|qemu-system-arm)$/')"
[[ -n "$procs" ]] && while read -r l; do leaks+=("process: $l"); done <<<"$procs"

mounts="$(awk -v t="$tmp/" '{ m = $5; if ((index(m, t) == 1 && (m ~ /\/picolet-/ || index(m, t ".tmp") == 1)) || m ~ /\/netns\/cni-/) print m }' /proc/self/mountinfo)"
[[ -n "$mounts" ]] && while read -r l; do leaks+=("mount: $l"); done <<<"$mounts"

bridges="$(ls /sys/class/net 2>/dev/null | grep -E '^pcl[0-9]+$' || true)"
[[ -n "$bridges" ]] && while read -r l; do leaks+=("bridge: $l"); done <<<"$bridges"

dirs="$(find "$tmp" -maxdepth 1 \( -name 'picolet-test.*' -o -name 'picolet-kube.*' -o -name 'picolet-ctrd.*' -o -name 'picolet-crio.*' -o -name 'picolet-ovl-probe*' \) 2>/dev/null || true)"
[[ -n "$dirs" ]] && while read -r l; do leaks+=("temp dir: $l"); done <<<"$dirs"

if (( ${#leaks[@]} )); then
    echo "leaks: ${#leaks[@]} things the tests left behind:"
    printf '  %s\n' "${leaks[@]}"
    exit 1
fi
echo "leaks: none (no test process, mount, bridge or temp dir left)"
