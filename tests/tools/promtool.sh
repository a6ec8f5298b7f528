#!/usr/bin/env bash
# tests/tools/promtool.sh -- owned by the integration test harness.
#
# Puts Prometheus's `promtool` at DEST/bin/promtool, for tests/node_cli.rs
# to check the node's /metrics text. Debian ships promtool only inside the
# `prometheus` package, and installing that package also installs, enables
# and (under systemd) starts a Prometheus server: a test must not leave a
# service running on the user's machine. So the package is downloaded, not
# installed, and only usr/bin/promtool (a static Go program) is unpacked.
# Idempotent: does nothing when DEST/bin/promtool runs.
#
# Usage: tests/tools/promtool.sh DEST
set -euo pipefail
dest="${1:?usage: $0 DEST}"
bin="$dest/bin/promtool"
if [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; then
    exit 0
fi
die() { echo "promtool.sh: error: $*" >&2; exit 1; }
command -v apt-get >/dev/null || die "apt-get not found: install Prometheus's promtool yourself at $bin"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "promtool.sh: downloading Debian's prometheus package to unpack promtool (nothing is installed)"
# apt-get download runs as the _apt user where it can; a root-owned temp
# dir is not writable for it, hence the mode.
chmod 0777 "$work"
if ! (cd "$work" && apt-get download -q prometheus >"$work/log" 2>&1); then
    # The package lists may be missing on a fresh machine.
    apt-get update -q >/dev/null 2>&1 || true
    (cd "$work" && apt-get download -q prometheus >"$work/log" 2>&1) ||
        { cat "$work/log" >&2; die "apt-get download prometheus failed"; }
fi
deb="$(ls "$work"/prometheus_*.deb 2>/dev/null | head -n 1)"
[[ -n "$deb" ]] || die "apt-get download left no prometheus_*.deb"
dpkg-deb -x "$deb" "$work/x"
[[ -x "$work/x/usr/bin/promtool" ]] || die "$(basename "$deb") has no usr/bin/promtool"
mkdir -p "$dest/bin"
install -m 0755 "$work/x/usr/bin/promtool" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "promtool.sh: $("$bin" --version 2>&1 | head -n 1) at $bin"
