#!/usr/bin/env bash
# `make demo`: picolet's main job, for real, on this machine.
#
# Starts a private containerd, or CRI-O with DEMO_RUNTIME=crio (its own
# root, state, socket and CNI bridge under $DEMO_DIR, so the host's runtime,
# if any, is untouched), imports the locally built busybox and pause images
# (no registry needed), runs the release picolet against it with the static
# pods in examples/manifests, and shows them running with `picolet get
# pods`. Leaves everything running until Ctrl-C (or exits after showing the
# pods when DEMO_WAIT=0), then stops the pods' containers and cleans up.
# Exits non-zero when the pods do not come up, with the tail of picolet's
# log.
#
# picolet finds the runtime by `containerRuntimeEndpoint` alone; the demo's
# config below points it at the private socket. A node's own CRI-O is at
# `containerRuntimeEndpoint: unix:///var/run/crio/crio.sock`, with CRI-O's
# `cgroup_manager = "cgroupfs"` (picolet's cgroup driver; see the README).
#
# Env: DEMO_DIR (default /tmp/picolet-demo), DEMO_WAIT=0|1, DEMO_IMAGES (the
# directory of busybox.tar and pause.tar; default target/test-images),
# DEMO_RUNTIME=containerd|crio, CRIO_ASSETS (a folder with crio and pinns,
# plain or .xz; default ../shared/cri-o beside the repo), NO_COLOR (no bold
# even on a terminal; there is none when stdout is not).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
DEMO_DIR=${DEMO_DIR:-/tmp/picolet-demo}
DEMO_WAIT=${DEMO_WAIT:-1}
DEMO_RUNTIME=${DEMO_RUNTIME:-containerd}
bin="$repo/target/release/picolet"
images="${DEMO_IMAGES:-$repo/target/test-images}"
sock="$DEMO_DIR/$DEMO_RUNTIME.sock"
admin="$DEMO_DIR/picolet.sock"
bridge=pcldemo0
subnet=10.88.77

# Bold only for a person at a terminal: a log file gets plain text.
if [[ -t 1 && -z ${NO_COLOR:-} ]]; then
  bold=$'\033[1m' plain=$'\033[0m'
else
  bold='' plain=''
fi
log() { printf '%sdemo:%s %s\n' "$bold" "$plain" "$*"; }
die() { log "$*" >&2; exit 1; }

case $DEMO_RUNTIME in
  containerd|crio) ;;
  *) die "DEMO_RUNTIME=$DEMO_RUNTIME: expected containerd or crio" ;;
esac
[[ -x $bin ]] || die "$bin is missing: run 'make demo' (or 'make build')"
for t in pause busybox; do
  [[ -f $images/$t.tar ]] || die "$images/$t.tar is missing: run 'make demo' (or 'make images IMAGES=\"busybox pause\"')"
done

cleanup() {
  log "stopping picolet, the demo pods and $DEMO_RUNTIME"
  [[ -n ${picolet_pid:-} ]] && kill "$picolet_pid" 2>/dev/null && wait "$picolet_pid" 2>/dev/null || true
  if [[ $DEMO_RUNTIME == crio ]]; then
    # CRI-O leaves containers running when it stops: kill them in its runc root.
    for c in $(runc --root "$DEMO_DIR/runc" list -q 2>/dev/null); do
      runc --root "$DEMO_DIR/runc" kill "$c" KILL >/dev/null 2>&1 || true
      runc --root "$DEMO_DIR/runc" delete --force "$c" >/dev/null 2>&1 || true
    done
  elif [[ -S $sock ]]; then
    for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
    done
    sleep 1
    for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks rm -f "$t" >/dev/null 2>&1 || true
    done
    for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io containers rm "$c" >/dev/null 2>&1 || true
    done
  fi
  [[ -n ${runtime_pid:-} ]] && kill "$runtime_pid" 2>/dev/null && wait "$runtime_pid" 2>/dev/null || true
  grep " $DEMO_DIR/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  ip link del "$bridge" 2>/dev/null || true
  for d in /sys/fs/cgroup/*/picolet-demo /sys/fs/cgroup/picolet-demo; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf "$DEMO_DIR"
}

mkdir -p "$DEMO_DIR"/{root,state,cni,runc,manifests,logs,picolet}
trap cleanup EXIT
trap 'exit 130' INT TERM

snapshotter=overlayfs
mkdir -p "$DEMO_DIR/ovl"/{l,u,w,m}
if ! mount -t overlay overlay -o "lowerdir=$DEMO_DIR/ovl/l,upperdir=$DEMO_DIR/ovl/u,workdir=$DEMO_DIR/ovl/w" "$DEMO_DIR/ovl/m" 2>/dev/null; then
  snapshotter=native
else
  umount "$DEMO_DIR/ovl/m"
fi
rm -rf "$DEMO_DIR/ovl"

cat > "$DEMO_DIR/cni/10-demo.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "picolet-demo",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$subnet.0/24"}]],
              "dataDir": "$DEMO_DIR/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

start_containerd() {
  cat > "$DEMO_DIR/containerd.toml" <<TOML
# Private containerd for the picolet demo.
version = 2
root = "$DEMO_DIR/root"
state = "$DEMO_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    # Harmless with CAP_SYS_RESOURCE, required without it.
    restrict_oom_score_adj = true
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "$snapshotter"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$DEMO_DIR/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$DEMO_DIR/cni"
TOML

  log "starting a private containerd ($snapshotter snapshotter) at $sock"
  containerd --config "$DEMO_DIR/containerd.toml" >"$DEMO_DIR/containerd.log" 2>&1 &
  runtime_pid=$!
  for _ in $(seq 100); do ctr --address "$sock" version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr --address "$sock" version >/dev/null

  log "importing the locally built busybox and pause images"
  for t in pause busybox; do
    ctr --address "$sock" -n k8s.io images import "$images/$t.tar" >/dev/null
  done
}

# crio or pinns from $CRIO_ASSETS: the executable, or NAME.xz unpacked into
# $DEMO_DIR/bin after checking it against SHA256SUMS when that lists it.
# Sets $found.
crio_binary() {
  local dir=${CRIO_ASSETS:-$repo/../shared/cri-o} name=$1
  found=$dir/$name
  [[ -x $found ]] && return
  [[ -f $dir/$name.xz ]] || die "no $name (or $name.xz) in $dir: set CRIO_ASSETS to a folder with crio and pinns"
  if grep -q " \*\?$name.xz\$" "$dir/SHA256SUMS" 2>/dev/null; then
    (cd "$dir" && grep " \*\?$name.xz\$" SHA256SUMS | sha256sum --check --quiet) ||
      die "$dir/$name.xz does not match $dir/SHA256SUMS"
  fi
  found=$DEMO_DIR/bin/$name
  xz -dc "$dir/$name.xz" >"$found"
  chmod 755 "$found"
}

start_crio() {
  local crio pinns storage=overlay
  [[ $snapshotter == overlayfs ]] || storage=vfs
  mkdir -p "$DEMO_DIR"/{bin,crio-logs,tmp,crio.conf.d}
  crio_binary crio; crio=$found
  crio_binary pinns; pinns=$found
  cp "$repo/tests/harness/runc-clamp-oom.sh" "$DEMO_DIR/bin/"
  echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$DEMO_DIR/policy.json"
  cat > "$DEMO_DIR/crio.conf" <<TOML
# Private CRI-O for the picolet demo.
[crio]
root = "$DEMO_DIR/root"
runroot = "$DEMO_DIR/state"
storage_driver = "$storage"
log_dir = "$DEMO_DIR/crio-logs"
version_file = "$DEMO_DIR/state/version"
version_file_persist = "$DEMO_DIR/root/version"
clean_shutdown_file = "$DEMO_DIR/root/clean.shutdown"
[crio.api]
listen = "$sock"
stream_address = "127.0.0.1"
stream_port = "0"
[crio.runtime]
default_runtime = "runc"
# picolet's cgroup driver.
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = "$pinns"
container_exits_dir = "$DEMO_DIR/state/exits"
container_attach_socket_dir = "$DEMO_DIR/state/attach"
namespaces_dir = "$DEMO_DIR/state/ns"
[crio.runtime.runtimes.runc]
# runc, unable to lower oom_score_adj without CAP_SYS_RESOURCE otherwise.
runtime_path = "$DEMO_DIR/bin/runc-clamp-oom.sh"
runtime_root = "$DEMO_DIR/runc"
monitor_path = "/usr/bin/conmon"
# CRI-O refuses a memory limit below this (default 12MiB); the example
# counter, sized for a 256 MiB board, asks for 8Mi.
container_min_memory = "4MiB"
[crio.image]
pause_image = "registry.k8s.io/pause:3.9"
signature_policy = "$DEMO_DIR/policy.json"
[crio.network]
network_dir = "$DEMO_DIR/cni"
plugin_dirs = ["/usr/lib/cni"]
[crio.metrics]
enable_metrics = false
[crio.nri]
enable_nri = false
TOML

  log "importing the locally built busybox and pause images"
  local store="containers-storage:[$storage@$DEMO_DIR/root+$DEMO_DIR/state]"
  skopeo --policy "$DEMO_DIR/policy.json" copy --quiet "oci-archive:$images/pause.tar" "${store}registry.k8s.io/pause:3.9"
  skopeo --policy "$DEMO_DIR/policy.json" copy --quiet "oci-archive:$images/busybox.tar" "${store}docker.io/library/busybox:latest"

  log "starting a private CRI-O ($($crio --version | head -n 1 | cut -d' ' -f3), $storage storage) at $sock"
  TMPDIR=$DEMO_DIR/tmp "$crio" --config "$DEMO_DIR/crio.conf" --config-dir "$DEMO_DIR/crio.conf.d" \
    >"$DEMO_DIR/crio.log" 2>&1 &
  runtime_pid=$!
  for _ in $(seq 100); do "$crio" status --socket "$sock" info >/dev/null 2>&1 && break; sleep 0.1; done
  "$crio" status --socket "$sock" info >/dev/null 2>&1 || die "CRI-O does not answer; see $DEMO_DIR/crio.log"
}

start_$DEMO_RUNTIME

cp "$repo"/examples/manifests/*.yaml "$DEMO_DIR/manifests/"
cat > "$DEMO_DIR/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $DEMO_DIR/manifests
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
cgroupRoot: /picolet-demo
podLogsDir: $DEMO_DIR/logs
fileCheckFrequency: 5s
YAML

log "starting picolet $("$bin" version | cut -d' ' -f2)"
"$bin" run --config "$DEMO_DIR/config.yaml" --root-dir "$DEMO_DIR/picolet" \
  --hostname-override demo-node --admin-socket "$admin" >"$DEMO_DIR/picolet.log" 2>&1 &
picolet_pid=$!

want=$(ls "$DEMO_DIR"/manifests/*.yaml | wc -l)
log "waiting for the $want example pods to run"
running=0
for _ in $(seq 120); do
  running=$("$bin" get pods --admin-socket "$admin" 2>/dev/null | awk 'NR>1 && $3=="Running"' | wc -l || true)
  [[ $running -ge $want ]] && break
  kill -0 "$picolet_pid" 2>/dev/null || break
  sleep 1
done
echo
"$bin" get pods --admin-socket "$admin" -o wide || true
echo
if [[ $running -lt $want ]]; then
  log "only $running of $want pods are running; the end of $DEMO_DIR/picolet.log:" >&2
  tail -n 30 "$DEMO_DIR/picolet.log" | sed 's/^/    /' >&2
  exit 1
fi
log "picolet: pid $picolet_pid, $(awk '/VmRSS/{print $2" "$3}' /proc/$picolet_pid/status) resident, $(awk '/Threads/{print $2}' /proc/$picolet_pid/status) threads"
log "container logs are in the kubelet layout under $DEMO_DIR/logs; the counter says:"
# The counter ticks every 5 s: show its second tick once it is there.
counter_log() { cat "$DEMO_DIR"/logs/default_counter-demo-node_*/count/0.log 2>/dev/null || true; }
for _ in $(seq 60); do
  [[ $(counter_log | grep -c 'tick') -ge 2 ]] && break
  sleep 0.5
done
counter_log | tail -n 2 | sed 's/^/    /'
log "picolet's own log: $DEMO_DIR/picolet.log"
if [[ $DEMO_WAIT == 1 && -t 0 ]]; then
  log "try: $bin get pods --admin-socket $admin   (Ctrl-C stops the demo)"
  wait "$picolet_pid"
fi
