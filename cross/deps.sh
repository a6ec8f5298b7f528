#!/usr/bin/env bash
# cross/deps.sh -- owned by the cross-build work (cross/, boards/).
#
# Installs what `make cross`, `make test-cross` and `make image` need on a
# fresh Debian bookworm machine (CI runs this as root): cross linkers and
# sysroots, qemu-user and qemu-system, cpio/e2fsprogs for images, the Rust
# std of each cross target, and the foreign dpkg architectures whose
# packages (kernel, busybox, containerd, ...) `make image` downloads.
# Idempotent: apt runs only when something is missing.
set -euo pipefail

PACKAGES=(
    protobuf-compiler gcc libc6-dev musl-tools
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
    gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
    qemu-user-static qemu-system-x86 qemu-system-arm
    cpio gzip xz-utils zstd e2fsprogs binutils file
)
RUST_TARGETS=(aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf
              riscv64gc-unknown-linux-gnu x86_64-unknown-linux-musl)
# Debian architectures of the boards' images (riscv64 is not a bookworm
# release architecture: see boards/README.md).
FOREIGN_ARCHES=(arm64 armhf)

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# (Outputs are captured before grepping: `cmd | grep -q` under pipefail
# fails when grep exits early and cmd gets SIGPIPE.)
missing=()
for p in "${PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
need_update=0
foreign="$(dpkg --print-foreign-architectures)"
for a in "${FOREIGN_ARCHES[@]}"; do
    if ! grep -qx "$a" <<<"$foreign"; then
        echo "cross-deps: dpkg --add-architecture $a"
        as_root dpkg --add-architecture "$a"
        need_update=1
    fi
done
if (( ${#missing[@]} )) || (( need_update )); then
    export DEBIAN_FRONTEND=noninteractive
    # A mirror hiccup on one index must not stop us; install reports real gaps.
    as_root apt-get update -q || echo "cross-deps: warning: apt-get update reported errors" >&2
fi
if (( ${#missing[@]} )); then
    echo "cross-deps: installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "cross-deps: Debian packages present"
fi

if command -v rustup >/dev/null; then
    installed="$(rustup target list --installed)"
    want=()
    for t in "${RUST_TARGETS[@]}"; do
        grep -qx "$t" <<<"$installed" || want+=("$t")
    done
    if (( ${#want[@]} )); then
        rustup target add "${want[@]}"
    fi
else
    echo "cross-deps: warning: no rustup; make sure the std of ${RUST_TARGETS[*]} is installed" >&2
fi
