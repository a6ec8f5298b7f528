#!/usr/bin/env bash
# cross/install.sh -- owned by the packaging work (cross/install/,
# cross/deb.sh; issue #25).
#
# `make install`: installs picolet as a systemd service under $DESTDIR
# (empty: this machine; `make deb` stages a package tree with it):
#   $PREFIX/bin/picolet                        the binary ($BIN)
#   $PREFIX/lib/systemd/system/picolet.service the unit (Type=notify,
#                                              KillMode=process)
#   /etc/picolet/config.yaml                   the example config, only if
#                                              none is there (it is the
#                                              admin's file after that)
#   /etc/kubernetes/manifests (0755), /var/lib/picolet (0700),
#   /var/log/pods (0755)                       the directories picolet uses
# The unit's ExecStart names /usr/bin/picolet; another PREFIX rewrites it.
# Nothing is started or enabled here (the package's postinst does that).
#
# Usage: cross/install.sh        Env: BIN (default target/release/picolet),
#                                     DESTDIR, PREFIX (default /usr)
set -euo pipefail

here=$(dirname "${BASH_SOURCE[0]}")
BIN=${BIN:-target/release/picolet}
PREFIX=${PREFIX:-/usr}
DESTDIR=${DESTDIR:-}

[[ -f $BIN ]] || { echo "install: no binary at $BIN (make build, or BIN=target/<triple>/release/picolet after make cross)" >&2; exit 1; }

install -d -m 0755 "$DESTDIR$PREFIX/bin" "$DESTDIR$PREFIX/lib/systemd/system" \
    "$DESTDIR/etc/picolet" "$DESTDIR/etc/kubernetes/manifests" "$DESTDIR/var/log/pods"
install -d -m 0700 "$DESTDIR/var/lib/picolet"
install -m 0755 "$BIN" "$DESTDIR$PREFIX/bin/picolet"
unit=$(mktemp)
trap 'rm -f "$unit"' EXIT
sed "s|^ExecStart=/usr/bin/picolet |ExecStart=$PREFIX/bin/picolet |" "$here/install/picolet.service" >"$unit"
install -m 0644 "$unit" "$DESTDIR$PREFIX/lib/systemd/system/picolet.service"
if [[ -e $DESTDIR/etc/picolet/config.yaml ]]; then
    echo "install: keeping the existing $DESTDIR/etc/picolet/config.yaml"
else
    install -m 0644 "$here/install/config.yaml" "$DESTDIR/etc/picolet/config.yaml"
fi
echo "installed picolet under ${DESTDIR:-/}$PREFIX; then: systemctl daemon-reload && systemctl enable --now picolet"
