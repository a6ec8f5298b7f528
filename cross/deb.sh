#!/usr/bin/env bash
# cross/deb.sh -- owned by the packaging work (cross/install/,
# cross/install.sh; issue #25).
#
# `make deb ARCH=arm64|armhf|riscv64|amd64`: a Debian package of picolet,
# built with Debian's own tool (dpkg-deb --build) from a tree staged by
# cross/install.sh (DESTDIR) and the binary `make cross` built for ARCH.
# It carries DEBIAN/control, conffiles (/etc/picolet/config.yaml: dpkg
# keeps the admin's edits on upgrade) and maintainer scripts that reload,
# enable and (on upgrade) restart the unit only when systemd is running
# (a chroot or an image build has no systemd; deb-systemd-helper's job,
# without needing it). The package lands in target/deb/.
#
# lintian (if installed) is left with what is meant, overridden in the
# package: systemctl called directly (not deb-systemd-helper), the 0700 state
# directory, and the static binary read as a library or as embedding libyaml.
#
# Usage: cross/deb.sh ARCH        Env: BIN (default: make cross's binary),
#                                      DEB_MAINTAINER ("Name <mail>"),
#                                      DEB_VERSION (default: Cargo.toml's;
#                                      `make image-test-package` packs the
#                                      same binary twice, the second with a
#                                      higher version, to test an upgrade)
set -euo pipefail

here=$(dirname "${BASH_SOURCE[0]}")
source "$here/common.sh"
arch=${1:?usage: cross/deb.sh arm64|armhf|riscv64|amd64}
case $arch in
    arm64) triple=aarch64-unknown-linux-musl ;;
    armhf) triple=armv7-unknown-linux-gnueabihf ;;
    riscv64) triple=riscv64gc-unknown-linux-gnu ;;
    amd64) triple=x86_64-unknown-linux-musl ;;
    *) echo "deb: unknown ARCH '$arch' (arm64, armhf, riscv64, amd64)" >&2; exit 1 ;;
esac
bin=${BIN:-$(picolet_bin "$triple")}
[[ -f $bin ]] || { echo "deb: no binary at $bin: make cross CROSS_TARGETS=$triple" >&2; exit 1; }
version=${DEB_VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/Cargo.toml" | head -1)}
[[ $version =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "deb: '$version' is not a Debian version" >&2; exit 1; }
# The glibc targets need the C library; the musl ones are static.
case $triple in *-gnu*) depends="libc6" ;; *) depends="" ;; esac

maintainer=${DEB_MAINTAINER:-picolet developers <picolet@example.org>}
out=${CARGO_TARGET_DIR:-$REPO/target}/deb
stage=$out/picolet_${version}_$arch
rm -rf "$stage"
mkdir -p "$stage"
BIN=$bin DESTDIR=$(realpath "$stage") PREFIX=/usr bash "$here/install.sh" >/dev/null
install -d -m 0755 "$stage/DEBIAN" "$stage/usr/share/doc/picolet"
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)

{
    echo "Package: picolet"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $installed_size"
    [[ -n $depends ]] && echo "Depends: $depends"
    echo "Recommends: containerd | cri-o, runc | crun, containernetworking-plugins"
    echo "Section: admin"
    echo "Priority: optional"
    echo "Description: kubelet for edge boards"
    echo " picolet runs Kubernetes pods (static pods, and pods from an API server"
    echo " when joined to a cluster) on a CRI container runtime, with kubelet's"
    echo " configuration format and semantics, in a few MiB of memory."
} >"$stage/DEBIAN/control"
echo /etc/picolet/config.yaml >"$stage/DEBIAN/conffiles"

# systemd is running when /run/systemd/system exists (sd_booted(3)).
cat >"$stage/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
    if [ -z "$2" ]; then
        # First install: enabled, started once the config is right
        # (`picolet check --config /etc/picolet/config.yaml`).
        systemctl enable picolet.service || true
    else
        # Upgrade: picolet alone restarts (KillMode=process), pods keep running.
        systemctl --no-block try-restart picolet.service || true
    fi
fi
exit 0
SH
cat >"$stage/DEBIAN/prerm" <<'SH'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    # picolet stops; the pods' containers keep running until removed
    # (README, "Uninstall": remove the static pods first).
    systemctl --no-block stop picolet.service || true
fi
exit 0
SH
cat >"$stage/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
    if [ -d /run/systemd/system ]; then
        systemctl disable picolet.service >/dev/null 2>&1 || true
        systemctl daemon-reload || true
    fi
fi
if [ "$1" = purge ]; then
    # State, cache and certificates. Never through a pod's mount (a
    # hostPath bind, a secret's tmpfs): then it stays for the admin.
    # ($DPKG_ROOT: dpkg's --root without chroot, as in image builds.)
    if grep -qs " $DPKG_ROOT/var/lib/picolet/" /proc/self/mounts; then
        echo "picolet: $DPKG_ROOT/var/lib/picolet still has mounts (findmnt -R /var/lib/picolet); left in place" >&2
    else
        rm -rf "$DPKG_ROOT/var/lib/picolet"
    fi
fi
exit 0
SH
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
{
    echo "picolet ($version) unstable; urgency=medium"
    echo
    echo "  * Built from picolet's source with make deb (README: Install on a board)."
    echo
    echo " -- $maintainer  $(date -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n >"$stage/usr/share/doc/picolet/changelog.gz"
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: picolet"
    echo
    echo "Files: *"
    echo "Copyright: picolet developers"
    echo "License: Apache-2.0"
    echo " On Debian systems, the full text of the Apache License 2.0 is in"
    echo " /usr/share/common-licenses/Apache-2.0."
} >"$stage/usr/share/doc/picolet/copyright"
install -d -m 0755 "$stage/usr/share/lintian/overrides"
cat >"$stage/usr/share/lintian/overrides/picolet" <<'TXT'
# The unit is handled without requiring deb-systemd-helper, only when systemd runs.
picolet: maintainer-script-calls-systemctl *
# picolet's state (certificates, cached Secrets) is root's alone.
picolet: non-standard-dir-perm 0700 != 0755 [var/lib/picolet/]
# A static (musl) or self-contained binary: no shared library, and its YAML
# decoder is picolet's own.
picolet: shared-library-lacks-prerequisites [usr/bin/picolet]
picolet: embedded-library libyaml [usr/bin/picolet]
picolet: statically-linked-binary [usr/bin/picolet]
TXT

dpkg-deb --root-owner-group --build "$stage" "$out/picolet_${version}_$arch.deb"
echo "built $out/picolet_${version}_$arch.deb"
