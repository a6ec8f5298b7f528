#!/bin/sh
# /init of picolet board images -- owned by the cross-build work (cross/,
# boards/); cross/mkimage.sh installs this file as /init of the initramfs.
#
# PID 1 of a picolet node booted from kernel + initramfs (busybox-static,
# containerd, runc, CNI plugins, picolet). It brings up the minimum a
# container node needs and then keeps picolet running:
#   proc/sys/dev/run/tmp, cgroups (v2 unified unless picolet.cgroup=v1 or the
#   kernel lacks cgroup2), kernel modules, loopback, hostname, the persistent
#   disk on /var/lib (else a tmpfs), containerd, the preloaded images (once),
#   then picolet in a restart loop, all logging to the console.
# Kernel command line options (all optional):
#   picolet.data=DEV|LABEL=x|none   persistent state device (board default)
#   picolet.hostname=NAME           node name (default: the board name)
#   picolet.cgroup=v1|v2            cgroup hierarchy
#   picolet.test=1                  image-test mode: print PICOLET-POD-RUNNING
#                                   when the test pod runs, then power off
#   picolet.testpod=NAME            pod to wait for (default: hello)
#   picolet.scenario=eviction       test mode runs the eviction scenario instead:
#                                   the static pods of /usr/share/picolet/
#                                   scenarios/eviction/ are added (a Guaranteed
#                                   pod, a Burstable one and a BestEffort memory
#                                   hog), and it prints PICOLET-EVICTION-PASS
#                                   once the hog was Evicted while the other
#                                   pods and picolet survived, the pressure
#                                   ended and the hog ran again (else
#                                   PICOLET-EVICTION-FAIL)
#   picolet.timeout=SECONDS         test mode gives up after this (default 270)
#   picolet.shell=1                 also start a root shell on the console
#   picolet.verbose=N               picolet -v level
#   picolet.net=slirp               configure eth0 for qemu's user-mode network
#                                   (10.0.2.15/24, gateway 10.0.2.2); without
#                                   it the network card, if any, stays down
#   picolet.trace=signals           print every SIGKILL, SIGTERM and SIGINT
#                                   the kernel delivers (sender and target,
#                                   from tracefs), to find who kills what
#   picolet.report=SECONDS          print one PICOLET-PODS line every SECONDS:
#                                   boot number, uptime, picolet's restarts and
#                                   each pod as name:STATUS:restarts (the power
#                                   cut test, tests/power_cuts.rs, reads them)
# A kubeconfig at the root of the persistent state disk (/var/lib/kubelet.conf)
# makes picolet join that cluster (--kubeconfig).
# busybox ash is the shell here: no bash features.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umask 022

/bin/busybox mkdir -p /proc /sys /dev /run /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s 2>/dev/null

mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount -t devtmpfs -o mode=0755,nosuid devtmpfs /dev 2>/dev/null || true
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=000 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /dev/shm
mount -t tmpfs -o nosuid,nodev,mode=0755 run /run
mount -t tmpfs -o nosuid,nodev,mode=1777 tmp /tmp
ln -sf /proc/self/fd /dev/fd 2>/dev/null
ln -sf /proc/self/fd/0 /dev/stdin 2>/dev/null
ln -sf /proc/self/fd/1 /dev/stdout 2>/dev/null
ln -sf /proc/self/fd/2 /dev/stderr 2>/dev/null

BOARD=unknown
[ -r /etc/picolet/board ] && BOARD="$(cat /etc/picolet/board)"
DATA_DEVICE=none
[ -r /etc/picolet/data-device ] && DATA_DEVICE="$(cat /etc/picolet/data-device)"

log() { echo "init: $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# Command line options.
HOSTNAME_OPT="" CGROUP_OPT="" TEST=0 SCENARIO="" TESTPOD=hello TIMEOUT=270 SHELL_OPT=0 VERBOSE=""
NET_OPT="" REPORT="" TRACE=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        picolet.data=*) DATA_DEVICE="${arg#picolet.data=}" ;;
        picolet.hostname=*) HOSTNAME_OPT="${arg#picolet.hostname=}" ;;
        picolet.cgroup=*) CGROUP_OPT="${arg#picolet.cgroup=}" ;;
        picolet.test=1) TEST=1 ;;
        picolet.testpod=*) TESTPOD="${arg#picolet.testpod=}" ;;
        picolet.scenario=*) SCENARIO="${arg#picolet.scenario=}" ;;
        picolet.timeout=*) TIMEOUT="${arg#picolet.timeout=}" ;;
        picolet.shell=1) SHELL_OPT=1 ;;
        picolet.verbose=*) VERBOSE="${arg#picolet.verbose=}" ;;
        picolet.net=*) NET_OPT="${arg#picolet.net=}" ;;
        picolet.report=*) REPORT="${arg#picolet.report=}" ;;
        picolet.trace=*) TRACE="${arg#picolet.trace=}" ;;
    esac
done
log "picolet image for board $BOARD, kernel $(uname -r) $(uname -m), up $(uptime_s)s"

# --- signal trace (picolet.trace=signals) ------------------------------------
if [ "$TRACE" = signals ]; then
    t=/sys/kernel/tracing
    mount -t tracefs -o nosuid,nodev,noexec tracefs $t 2>/dev/null
    if [ -w $t/events/signal/signal_generate/filter ]; then
        echo 'sig == 9 || sig == 15 || sig == 2' >$t/events/signal/signal_generate/filter
        echo 1 >$t/events/signal/signal_generate/enable
        cat $t/trace_pipe &
        log "tracing SIGKILL, SIGTERM and SIGINT (signal_generate lines)"
    else
        log "picolet.trace=signals: this kernel has no tracefs signal events"
    fi
fi

# --- cgroups ----------------------------------------------------------------
if [ "$CGROUP_OPT" != v1 ] && grep -qw cgroup2 /proc/filesystems; then
    mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate cgroup2 /sys/fs/cgroup
    # Let picolet create child cgroups with every controller the kernel has.
    for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
        echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || log "cannot enable cgroup controller $c"
    done
    log "cgroup v2: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
else
    mount -t tmpfs -o nosuid,nodev,noexec,mode=0755 cgroup /sys/fs/cgroup
    for c in $(awk 'NR > 1 && $4 == 1 { print $1 }' /proc/cgroups); do
        mkdir -p "/sys/fs/cgroup/$c"
        mount -t cgroup -o "nosuid,nodev,noexec,$c" "$c" "/sys/fs/cgroup/$c" || log "cannot mount cgroup v1 $c"
    done
    # The usual combined hierarchies' names.
    [ -d /sys/fs/cgroup/cpu ] && ln -sf cpu /sys/fs/cgroup/cpu,cpuacct 2>/dev/null
    log "cgroup v1: $(ls /sys/fs/cgroup | tr '\n' ' ')"
fi

# --- kernel modules (list made by mkimage.sh, dependencies first) -----------
if [ -r /lib/modules/picolet.modules ]; then
    n=0
    while read -r ko; do
        insmod "/lib/modules/$(uname -r)/$ko" 2>/dev/null && n=$((n + 1))
    done </lib/modules/picolet.modules
    log "loaded $n kernel modules"
fi
for s in net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1; do
    sysctl -qw "$s" 2>/dev/null || true
done

# --- network identity ----------------------------------------------------------
ip link set lo up
# A node name is a DNS subdomain: board names like qemu-x86_64 need fixing.
NODE="$(echo "${HOSTNAME_OPT:-$BOARD}" | tr 'A-Z_' 'a-z-')"
hostname "$NODE"
echo "$NODE" >/etc/hostname
printf '127.0.0.1 localhost\n::1 localhost\n127.0.1.1 %s\n' "$NODE" >/etc/hosts
[ -e /etc/resolv.conf ] || : >/etc/resolv.conf
# qemu's user-mode network (slirp): fixed addresses, no DHCP client needed.
if [ "$NET_OPT" = slirp ]; then
    # The card shows up once its virtio_pci driver, just loaded, probed it.
    i=0
    while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do
        i=$((i + 1))
        sleep 0.1
    done
    if ip link set eth0 up 2>/dev/null; then
        ip addr add 10.0.2.15/24 dev eth0
        ip route add default via 10.0.2.2
        log "eth0: 10.0.2.15/24, gateway 10.0.2.2 (qemu user network)"
    else
        log "picolet.net=slirp: no eth0"
    fi
fi

# --- persistent state on /var/lib -------------------------------------------------
mkdir -p /var/lib /var/log
DATA_MOUNTED=0
if [ "$DATA_DEVICE" != none ]; then
    dev="$DATA_DEVICE"
    i=0
    while [ $i -lt 50 ]; do
        case "$DATA_DEVICE" in
            LABEL=* | UUID=*) dev="$(findfs "$DATA_DEVICE" 2>/dev/null)" ;;
        esac
        [ -n "$dev" ] && [ -b "$dev" ] && break
        i=$((i + 1))
        sleep 0.1
    done
    if [ -n "$dev" ] && [ -b "$dev" ] && mount -t ext4 -o noatime "$dev" /var/lib; then
        DATA_MOUNTED=1
        log "persistent state: $dev on /var/lib"
    else
        log "persistent state device $DATA_DEVICE not usable: state is in RAM and lost at reboot"
    fi
fi
[ $DATA_MOUNTED = 1 ] || mount -t tmpfs -o mode=0755 varlib /var/lib
# CNI's state (cached results, host-local's IP leases) describes network
# namespaces, which die with the kernel: it lives in RAM. On the disk, a
# power cut left libcni's cached results truncated, and every StopPodSandbox
# of the previous boot's sandboxes then failed ("unexpected end of JSON
# input"), leaving their pods Terminating for good.
mkdir -p /var/lib/cni
mount -t tmpfs -o mode=0755,size=8m cni /var/lib/cni
# Logs stay in RAM (SD card wear); picolet bounds them with containerLogMaxSize.
mount -t tmpfs -o mode=0755,size=64m varlog /var/log
BOOT=1
if [ -r /var/lib/picolet-image/boots ]; then BOOT=$(($(cat /var/lib/picolet-image/boots) + 1)); fi
mkdir -p /var/lib/picolet-image
echo $BOOT >/var/lib/picolet-image/boots
log "boot number $BOOT on this state"

[ "$SHELL_OPT" = 1 ] && setsid cttyhack sh -l &

# --- containerd ------------------------------------------------------------------
HAVE_CONTAINERD=0
if [ -x /usr/bin/containerd ]; then
    HAVE_CONTAINERD=1
    mkdir -p /run/containerd
    (
        while :; do
            containerd --config /etc/containerd/config.toml --log-level warn
            log "containerd exited ($?); restarting in 2s"
            sleep 2
        done
    ) &
    i=0
    until ctr version >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 600 ]; then log "containerd did not come up in 60s"; break; fi
        sleep 0.1
    done
    log "containerd up at $(uptime_s)s"
    # Preloaded images, imported once (they persist with /var/lib).
    imported=0
    for tarball in /usr/share/picolet/images/*.tar; do
        [ -e "$tarball" ] || continue
        ref="$(cat "${tarball%.tar}.ref")"
        if ctr -n k8s.io images ls -q 2>/dev/null | grep -qxF "$ref"; then
            log "image $ref present"
        elif ctr -n k8s.io images import "$tarball" >/dev/null; then
            log "imported $ref at $(uptime_s)s"
            imported=1
        else
            log "importing $tarball failed"
        fi
    done
    # containerd writes an import's unpacked layers through the page cache
    # and does not sync them, while its metadata (bolt) is synced at once.
    # A power cut before the kernel's writeback left an image listed as
    # present whose files were empty (a 0-byte /pause: every sandbox died
    # at start, on every boot after). Nothing runs from them until they are
    # on the disk.
    if [ $imported = 1 ]; then
        sync
        log "imported images synced to disk at $(uptime_s)s"
    fi
else
    log "this image has no containerd (see boards/README.md); picolet will wait for a runtime"
fi

# --- eviction scenario: its pods, and the check -------------------------------------------
# The line of `picolet get pods` for static pod NAME (NAME-<node>).
pod_line() { picolet get pods 2>/dev/null | awk -v p="$1-$NODE" '$1 == p'; }
# picolet's eviction passes since it started (GET /node).
passes() { picolet get node -o json 2>/dev/null | tr ',' '\n' | sed -n 's/.*"passes": *\([0-9]*\).*/\1/p'; }
# The pods that must survive the pressure: Running, never restarted.
SURVIVORS="guaranteed burstable hello"
survivors_running() {
    for p in $SURVIVORS; do
        pod_line $p | awk '$3 == "Running" && $4 == 0 { ok = 1 } END { exit !ok }' || return 1
    done
}
# Each survivor that is not Running without a restart, as " name:phase/restarts=N".
survivors_failing() {
    for p in $SURVIVORS; do
        pod_line $p | awk '$3 == "Running" && $4 == 0 { ok = 1 } END { exit !ok }' ||
            printf ' %s:%s' $p "$(pod_line $p | awk '{ print $3 "/restarts=" $4 }')"
    done
}
# picolet reports the node condition MemoryPressure true (GET /node).
memory_pressure() { picolet get node -o json 2>/dev/null | tr -d ' \n' | grep -q '"MemoryPressure":true'; }
now_s() { cut -d. -f1 /proc/uptime; }
# The check, polled every second. 1. The hog is Evicted. 2. Two more
# eviction passes ran (time enough to evict another pod if the pressure
# stayed) and the survivors run: the Guaranteed, Burstable and hello pods
# must be Running with no restart, the hog Failed with reason Evicted and a
# message naming memory.available, and picolet never restarted (its restart
# loop counts in /run/picolet.restarts) nor named by the OOM killer. 3. The
# pressure ends after evictionPressureTransitionPeriod and the static hog
# runs again (it does not grow twice), the survivors still untouched.
eviction_check() {
    end=$(($(now_s) + TIMEOUT))
    until pod_line hog | grep -q ' Evicted '; do
        if [ "$(now_s)" -ge "$end" ]; then
            echo "PICOLET-EVICTION-FAIL $(uptime_s): the hog was not evicted within ${TIMEOUT}s"
            picolet get node || true
            picolet get pods || true
            return 0
        fi
        sleep 1
    done
    at="$(uptime_s)"
    p0="$(passes)"
    echo "eviction scenario: the hog was evicted at ${at}s (pass ${p0:-?}); waiting for two more passes"
    # The hog's own status, before it runs again: phase Failed, reason
    # Evicted (one JSON chunk per pod, cut at each pod's metadata).
    hog="$(picolet get pods -o json | tr -d '\n' | sed 's/"metadata": *{/\n/g' | grep "\"name\": *\"hog-$NODE\"")"
    while [ "$(now_s)" -lt "$end" ]; do
        [ "$(passes)" -ge $((${p0:-0} + 2)) ] && survivors_running && break
        sleep 1
    done
    fail="$(survivors_failing)"
    echo "$hog" | grep -q '"phase": *"Failed"' || fail="$fail hog-phase:$(echo "$hog" | grep -o '"phase": *"[A-Za-z]*"')"
    echo "$hog" | grep -q '"reason": *"Evicted"' || fail="$fail hog-not-reason-Evicted"
    echo "$hog" | grep -q '"message": *"The node was low on resource: memory[^"]*memory.available' ||
        fail="$fail hog-message-not-memory.available"
    echo "eviction scenario: at $(uptime_s)s, pass $(passes):"
    picolet get node
    picolet get pods
    picolet get node -o json | tr ',' '\n' | grep -E '"(passes|notifiedPasses|lastPassMicros|maxPassMicros)"' | tr '\n' ' '
    echo
    echo "hog: $(echo "$hog" | grep -o '"message": *"[^"]*"\|"phase": *"[A-Za-z]*"\|"reason": *"Evicted"' | tr '\n' ' ')"
    # The pressure ends and the static hog runs again: a new container,
    # not the evicted one, which a runtime slow to stop it (a starved
    # guest's containerd took 30 s) may still show Running after the
    # readmission.
    evicted_id="$(echo "$hog" | grep -o '"containerID": *"[^"]*"' | head -1)"
    echo "eviction scenario: the evicted container: ${evicted_id:-none}"
    hog_runs_again() {
        pod_line hog | awk '$3 == "Running" { ok = 1 } END { exit !ok }' || return 1
        id="$(picolet get pods -o json 2>/dev/null | tr -d '\n' | sed 's/"metadata": *{/\n/g' |
            grep "\"name\": *\"hog-$NODE\"" | grep -o '"containerID": *"[^"]*"' | head -1)"
        [ -n "$id" ] && [ "$id" != "$evicted_id" ]
    }
    cleared=""
    while [ "$(now_s)" -lt "$end" ]; do
        if [ -z "$cleared" ] && ! memory_pressure; then
            cleared="$(uptime_s)"
            echo "eviction scenario: MemoryPressure cleared at ${cleared}s"
        fi
        [ -n "$cleared" ] && hog_runs_again && break
        sleep 1
    done
    [ -n "$cleared" ] || fail="$fail memory-pressure-not-cleared"
    hog_runs_again ||
        fail="$fail hog-not-running-again:$(pod_line hog | awk '{ print $3 }')"
    fail="$fail$(survivors_failing)"
    [ "$(cat /run/picolet.restarts 2>/dev/null)" = 0 ] || fail="$fail picolet-restarted"
    dmesg | grep -q 'Killed process [0-9]* (picolet)' && fail="$fail picolet-oom-killed"
    echo "eviction scenario: at $(uptime_s)s:"
    picolet get pods
    echo "picolet: $(grep -E '^(Vm(RSS|HWM)|Rss(Anon|File|Shmem))' /proc/"$(pidof picolet | cut -d' ' -f1)"/status | tr -s ' \t\n' ' ')"
    echo "kernel OOM kills during the test: $(dmesg | grep -c 'Killed process')"
    dmesg | grep 'Killed process' | sed 's/^/  /'
    if [ -z "$fail" ]; then
        echo "PICOLET-EVICTION-PASS $at boot=$BOOT board=$BOARD mem=$(awk '/MemTotal/ { print $2 }' /proc/meminfo)kB"
    else
        echo "PICOLET-EVICTION-FAIL $at:$fail"
    fi
}
if [ "$SCENARIO" = eviction ]; then
    cp /usr/share/picolet/scenarios/eviction/*.yaml /etc/kubernetes/manifests/
    # The pressure must be seen to end within the test's time (kubelet's
    # default transition period is 5 minutes).
    grep -q '^evictionPressureTransitionPeriod:' /etc/picolet/config.yaml ||
        echo 'evictionPressureTransitionPeriod: 10s' >>/etc/picolet/config.yaml
    log "eviction scenario: static pods $(ls /usr/share/picolet/scenarios/eviction | tr '\n' ' ')"
fi

# --- test mode: wait for the pod, report, power off -------------------------------------
if [ "$TEST" = 1 ] && [ "$SCENARIO" = eviction ]; then
    (
        eviction_check
        sync
        sleep 1
        poweroff -f
    ) &
elif [ "$TEST" = 1 ]; then
    (
        end=$(($(cut -d. -f1 /proc/uptime) + TIMEOUT))
        while [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ]; do
            if picolet get pods 2>/dev/null | awk -v p="$TESTPOD" '
                    NR > 1 && (index($1, p "-") == 1 || $1 == p || index($1, "/" p "-") > 0) && / Running / { found = 1 }
                    END { exit !found }'; then
                echo "PICOLET-POD-RUNNING $(uptime_s) boot=$BOOT board=$BOARD"
                picolet get pods
                sync
                sleep 1
                poweroff -f
            fi
            sleep 1
        done
        echo "PICOLET-POD-TIMEOUT $(uptime_s) boot=$BOOT: pod $TESTPOD not Running after ${TIMEOUT}s"
        picolet get pods || true
        [ "$HAVE_CONTAINERD" = 1 ] && ctr -n k8s.io containers ls && ctr -n k8s.io tasks ls
        sync
        poweroff -f
    ) &
fi

# --- report: the pods, one line every REPORT seconds ---------------------------------
if [ -n "$REPORT" ]; then
    (
        while :; do
            pods="$(picolet get pods 2>/dev/null | awk 'NR > 1 && NF >= 4 { printf " %s:%s:%s", $1, $3, $4 }')"
            echo "PICOLET-PODS boot=$BOOT t=$(uptime_s) restarts=$(cat /run/picolet.restarts 2>/dev/null)$pods"
            sleep "$REPORT"
        done
    ) &
fi

# --- picolet, restarted whenever it exits ------------------------------------------
mkdir -p /run/picolet /var/lib/picolet
# A kubeconfig dropped on the state disk joins the node to that cluster.
KUBECONFIG_OPT=""
if [ -f /var/lib/kubelet.conf ]; then
    KUBECONFIG_OPT=/var/lib/kubelet.conf
    log "joining the cluster of /var/lib/kubelet.conf"
fi
# Back off from 2s to 30s while it keeps failing fast; a run that lasted a
# minute resets the delay.
restarts=0 delay=2
while :; do
    log "starting picolet (restart $restarts) at $(uptime_s)s"
    echo $restarts >/run/picolet.restarts
    started=$(cut -d. -f1 /proc/uptime)
    # shellcheck disable=SC2086
    picolet run --config /etc/picolet/config.yaml --board "$BOARD" \
        --hostname-override "$NODE" ${VERBOSE:+-v $VERBOSE} \
        ${KUBECONFIG_OPT:+--kubeconfig $KUBECONFIG_OPT}
    rc=$?
    if [ $(($(cut -d. -f1 /proc/uptime) - started)) -ge 60 ]; then delay=2; fi
    log "picolet exited with status $rc; restarting in ${delay}s"
    restarts=$((restarts + 1))
    sleep $delay
    delay=$((delay * 2))
    [ $delay -le 30 ] || delay=30
done
