#!/bin/sh
# /init of the package test image -- owned by the packaging work (cross/install/,
# cross/deb.sh, cross/package-test.sh; issue #25). cross/package-image/stage.sh
# installs it as /init of the initramfs.
#
# The little systemd cannot do here before it starts: the busybox applets
# (the image has no coreutils or util-linux), the kernel modules of the
# board (mkimage.sh's list, dependencies first; there is no udev to load
# them), the sysctls of a container node, and room in the root tmpfs (half
# the RAM by default) for the images, containers and pods. Then systemd
# becomes PID 1 (exec keeps the PID).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox mkdir -p /proc
/bin/busybox mount -t proc -o nosuid,nodev,noexec proc /proc
# Applets only where the image has no real program (`--install` would
# replace dpkg, systemctl's neighbours, ... with busybox's).
for p in $(/bin/busybox --list-full); do
    [ -e "/$p" ] || [ -L "/$p" ] || /bin/busybox ln -s /bin/busybox "/$p"
done
mount -o remount,size=75% / 2>/dev/null
if [ -r /lib/modules/picolet.modules ]; then
    while read -r ko; do
        insmod "/lib/modules/$(uname -r)/$ko" 2>/dev/null
    done </lib/modules/picolet.modules
fi
for s in net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1; do
    sysctl -qw "$s" 2>/dev/null
done
exec /lib/systemd/systemd "$@"
