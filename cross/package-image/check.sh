#!/bin/sh
# /usr/share/picolet/package-check.sh of the package test image -- owned by
# the packaging work (cross/install/, cross/deb.sh, cross/package-test.sh;
# issue #25). Run once by picolet-package-test.service under systemd.
#
# Installs picolet's package (/usr/share/picolet/debs/1-*.deb) with dpkg,
# starts it, upgrades it in place to 2-*.deb, removes and purges it, and
# prints one line per check on the console:
#   PICOLET-PKG PASS <check> [detail]   /   PICOLET-PKG FAIL <check> [detail]
# then "PICOLET-PKG-DONE passed=N failed=M" and powers off. The checks:
# - the package installs, is enabled and not started (README: check the
#   config, then start it);
# - Type=notify: with containerd masked, `systemctl start` leaves picolet
#   "activating" with STATUS= saying what it waits for; only once containerd
#   runs and picolet sent READY=1 does `systemctl is-active` say active;
# - the board's static pod (hello) runs; its container ID and its task's PID
#   are recorded;
# - the upgrade restarts picolet (a new MainPID, active again), keeps the
#   admin's edit of the conffile, and the pod's container is the same one,
#   still running with the same PID and no restart;
# - remove: picolet stopped and disabled, binary gone, config and state
#   kept, the pod's container still running (picolet's stop leaves pods);
#   purge: /etc/picolet and /var/lib/picolet gone.
# Every wait polls for the event it needs with a deadline (picolet.timeout=
# on the kernel command line bounds the whole run); busybox ash.

# Debian's busybox ash runs its own applets before $PATH: dpkg's programs
# by their paths.
dpkg=/usr/bin/dpkg dpkg_deb=/usr/bin/dpkg-deb dpkg_query=/usr/bin/dpkg-query
DEBS=/usr/share/picolet/debs
CONFIG=/etc/picolet/config.yaml
NODE="$(hostname)"
POD="hello-$NODE"
TIMEOUT=400
for arg in $(cat /proc/cmdline); do
    case "$arg" in picolet.timeout=*) TIMEOUT="${arg#picolet.timeout=}" ;; esac
done
now() { cut -d. -f1 /proc/uptime; }
DEADLINE=$(($(now) + TIMEOUT))
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "PICOLET-PKG PASS $*"; }
bad() { fail=$((fail + 1)); echo "PICOLET-PKG FAIL $*"; }
# check NAME DETAIL CMD...: one line, PASS when CMD succeeds.
check() {
    name="$1" detail="$2"
    shift 2
    if "$@"; then ok "$name" "$detail"; else bad "$name" "$detail"; fi
}
# wait_for SECONDS CMD...: CMD polled until it succeeds; false after
# SECONDS or at the run's deadline.
wait_for() {
    end=$(($(now) + $1))
    [ "$end" -le "$DEADLINE" ] || end=$DEADLINE
    shift
    until "$@"; do
        [ "$(now)" -lt "$end" ] || return 1
        sleep 0.2
    done
}
finish() {
    if [ "$fail" -gt 0 ]; then
        echo "---- state at the first failure's end ----"
        systemctl status --no-pager picolet containerd 2>&1 | head -n 40
        journalctl --no-pager -n 60 -u picolet 2>&1
        picolet get pods 2>&1
        ctr -n k8s.io tasks ls 2>&1
        echo "---- end of state ----"
    fi
    echo "PICOLET-PKG-DONE passed=$pass failed=$fail uptime=$(cut -d' ' -f1 /proc/uptime)"
    sync
    poweroff -f
}
# stop_here NAME DETAIL: a failed check that the rest depends on.
stop_here() {
    bad "$1" "$2"
    finish
}

show() { systemctl show -p "$1" --value "$2" 2>/dev/null; }
is_active() { [ "$(systemctl is-active "$1" 2>/dev/null)" = "$2" ]; }
pod_line() { picolet get pods 2>/dev/null | awk -v p="$POD" '$1 == p'; }
pod_running() { pod_line | grep -q ' Running '; }
container_id() {
    picolet get pods "$POD" -o json 2>/dev/null |
        sed -n 's/.*"containerID": *"[a-z-]*:\/\/\([0-9a-f]*\)".*/\1/p' | head -n 1
}
task_pid() { ctr -n k8s.io tasks ls 2>/dev/null | awk -v c="$1" '$1 == c && $3 == "RUNNING" { print $2 }'; }
installed() { "$dpkg_query" -W -f='${Status} ${Version}' picolet 2>/dev/null; }
waiting_status() { show StatusText picolet | grep -q .; }
new_main_pid() {
    p="$(show MainPID picolet)"
    [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != "$1" ] && is_active picolet active
}
same_pod_adopted() { [ "$(container_id)" = "$1" ] && pod_running; }
# The task's PID is the one before, and the pod's container never restarted.
not_restarted() { [ "$(task_pid "$1")" = "$2" ] && [ "$(pod_line | awk '{ print $4 }')" = 0 ]; }
no_unit_file() { [ ! -e /lib/systemd/system/picolet.service ] && [ ! -e /usr/lib/systemd/system/picolet.service ]; }

old="$(ls "$DEBS"/1-*.deb)" new="$(ls "$DEBS"/2-*.deb)"
v1="$("$dpkg_deb" -f "$old" Version)" v2="$("$dpkg_deb" -f "$new" Version)"
echo "package check: $NODE, systemd $(systemctl --version | head -n 1 | cut -d' ' -f2), $("$dpkg" --version | head -n 1)"
echo "package check: install $(basename "$old") ($v1), upgrade to $(basename "$new") ($v2)"
check pid1-is-systemd "$(cat /proc/1/comm)" [ "$(cat /proc/1/comm)" = systemd ]
check upgrade-is-newer "$v2 > $v1" "$dpkg" --compare-versions "$v2" gt "$v1"

# containerd up once, for the images (preloaded: there is no network).
systemctl start containerd || stop_here containerd-starts "$(systemctl is-active containerd)"
for tarball in /usr/share/picolet/images/*.tar; do
    ctr -n k8s.io images import "$tarball" >/dev/null || stop_here images-import "$tarball"
done
ok containerd-starts "images $(ctr -n k8s.io images ls -q | grep -c .)"

# --- install -------------------------------------------------------------------------
if out="$("$dpkg" -i "$old" 2>&1)"; then ok dpkg-install "$(installed)"; else echo "$out"; stop_here dpkg-install "$(installed)"; fi
check installed-version "$(installed)" [ "$(installed)" = "install ok installed $v1" ]
check enabled-on-install "$(systemctl is-enabled picolet 2>&1)" [ "$(systemctl is-enabled picolet 2>&1)" = enabled ]
check not-started-by-install "$(systemctl is-active picolet)" is_active picolet inactive
check picolet-check-config "$(picolet check --config $CONFIG 2>&1 | tail -n 1)" picolet check --config $CONFIG

# --- Type=notify: activating until READY=1 --------------------------------------
# Masked, containerd cannot be started by picolet's Wants=: picolet runs
# and waits for the runtime, not ready.
systemctl stop containerd
systemctl mask --runtime --quiet containerd
systemctl start --no-block picolet
if wait_for 60 waiting_status; then
    st="$(show StatusText picolet)"
    check activating-before-ready "is-active=$(systemctl is-active picolet) STATUS=$st" is_active picolet activating
else
    bad activating-before-ready "no STATUS= from picolet in 60s: $(systemctl is-active picolet)"
fi
systemctl unmask --runtime --quiet containerd
systemctl start containerd
if wait_for 120 is_active picolet active; then
    ok active-after-ready "MainPID=$(show MainPID picolet) STATUS=$(show StatusText picolet)"
else
    stop_here active-after-ready "$(systemctl is-active picolet) STATUS=$(show StatusText picolet)"
fi
pid1="$(show MainPID picolet)"
check main-pid-is-picolet "$(cat /proc/"$pid1"/comm 2>&1)" [ "$(cat /proc/"$pid1"/comm 2>/dev/null)" = picolet ]

# --- the static pod ----------------------------------------------------------------
wait_for 180 pod_running || stop_here static-pod-running "$(pod_line)"
cid="$(container_id)"
tpid="$(task_pid "$cid")"
if [ -n "$cid" ] && [ -n "$tpid" ]; then
    ok static-pod-running "$POD container $(echo "$cid" | cut -c1-12) task pid $tpid"
else
    stop_here static-pod-running "container '$cid' task pid '$tpid'"
fi

# --- upgrade in place -----------------------------------------------------------------
echo "# edited by the package test" >>$CONFIG
if out="$("$dpkg" -i "$new" 2>&1)"; then ok dpkg-upgrade "$(installed)"; else echo "$out"; bad dpkg-upgrade "$(installed)"; fi
check upgraded-version "$(installed)" [ "$(installed)" = "install ok installed $v2" ]
if wait_for 60 new_main_pid "$pid1"; then
    ok upgrade-restarted-picolet "MainPID $pid1 -> $(show MainPID picolet), $(systemctl is-active picolet)"
else
    bad upgrade-restarted-picolet "MainPID $pid1 -> $(show MainPID picolet), $(systemctl is-active picolet)"
fi
check conffile-edit-kept "$CONFIG" grep -q '^# edited by the package test$' $CONFIG
if wait_for 60 same_pod_adopted "$cid"; then
    ok same-container-after-upgrade "$(echo "$cid" | cut -c1-12): $(pod_line)"
else
    bad same-container-after-upgrade "was $(echo "$cid" | cut -c1-12), now '$(container_id)': $(pod_line)"
fi
check container-not-restarted "task pid $tpid -> $(task_pid "$cid"), restarts $(pod_line | awk '{ print $4 }')" \
    not_restarted "$cid" "$tpid"

# --- remove, purge ----------------------------------------------------------------------
if out="$("$dpkg" -r picolet 2>&1)"; then ok dpkg-remove "$(installed)"; else echo "$out"; bad dpkg-remove "$(installed)"; fi
check removed-state "$(installed)" [ "$(installed)" = "deinstall ok config-files $v2" ]
wait_for 60 is_active picolet inactive
check stopped-on-remove "$(systemctl is-active picolet)" is_active picolet inactive
check binary-removed "/usr/bin/picolet" [ ! -e /usr/bin/picolet ]
check unit-removed "picolet.service" no_unit_file
check disabled-on-remove "no multi-user.target.wants link" [ ! -e /etc/systemd/system/multi-user.target.wants/picolet.service ]
check config-kept-on-remove "$CONFIG" grep -q '^# edited by the package test$' $CONFIG
check state-kept-on-remove "/var/lib/picolet" [ -d /var/lib/picolet ]
check pod-kept-on-remove "task pid $(task_pid "$cid")" [ "$(task_pid "$cid")" = "$tpid" ]
if out="$("$dpkg" --purge picolet 2>&1)"; then ok dpkg-purge "$(installed)"; else echo "$out"; bad dpkg-purge "$(installed)"; fi
check purged "$(installed)" [ -z "$("$dpkg_query" -W -f='${Status}' picolet 2>/dev/null | grep -v 'not-installed')" ]
check config-removed-on-purge "/etc/picolet" [ ! -e /etc/picolet ]
if grep -qs ' /var/lib/picolet/' /proc/self/mounts; then
    check state-kept-while-mounted "$(grep -c ' /var/lib/picolet/' /proc/self/mounts) mounts" [ -d /var/lib/picolet ]
else
    check state-removed-on-purge "/var/lib/picolet" [ ! -e /var/lib/picolet ]
fi
finish
