#!/usr/bin/env bash
# cross/mkimage.sh -- owned by the cross-build work (cross/, boards/).
#
# `make image BOARD=<board>`: builds a bootable kernel + initramfs for one
# board profile (boards/<board>/) into out/<board>/:
#   vmlinuz      the board architecture's Debian bookworm kernel
#   initrd.img   cpio.gz: cross/init.sh as /init, busybox-static, picolet
#                (from `make cross` for the board's triple), containerd +
#                runc + CNI plugins from Debian with the glibc libraries they
#                need, the kernel modules the node needs, the preloaded pause
#                and busybox images, and the board's rootfs/ overlay
#   cmdline.txt  kernel command line; config.txt too for Raspberry Pis
# Debian packages are downloaded (never installed) by cross/fetch-debs.sh
# into out/cache/. Nothing here needs a network at boot.
#
# IMAGE_VARIANT=package builds the package test image into
# out/<board>-package/ instead (cross/package-image/stage.sh: systemd as
# PID 1, dpkg, and the picolet .debs of $PACKAGE_DEBS to install at boot in
# place of the picolet binary and cross/init.sh; `make image-test-package`).
#
# Usage: cross/mkimage.sh BOARD
# Env:   PICOLET_BIN=/path  use this picolet binary instead of `make cross`'s
#        IMAGE_VARIANT=package, PACKAGE_DEBS="old.deb new.deb"
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# == 1 )) || die "usage: $0 BOARD   (boards: $(cd "$REPO/boards" && ls -d */ | tr -d / | tr '\n' ' '))"
board="$1"
bdir="$REPO/boards/$board"
[[ -f "$bdir/board.env" ]] || die "no board profile boards/$board/board.env"
IMAGE_UNSUPPORTED="" RPI_CONFIG_TXT=0 MODULES="" QEMU_SYSTEM=""
# shellcheck source=/dev/null
source "$bdir/board.env"
variant="${IMAGE_VARIANT:-}"
case "$variant" in
    "" | package) ;;
    *) die "unknown IMAGE_VARIANT '$variant' (known: package)" ;;
esac
dest="$OUT/$board${variant:+-$variant}"
mkdir -p "$dest"

# --- picolet ---------------------------------------------------------------------
if [[ "$variant" == package ]]; then
    picolet=""   # the image carries picolet's packages instead
    for deb in ${PACKAGE_DEBS:-}; do [[ -f "$deb" ]] || die "PACKAGE_DEBS: no $deb"; done
    [[ -n "${PACKAGE_DEBS:-}" ]] || die "IMAGE_VARIANT=package needs PACKAGE_DEBS (make image-test-package builds them)"
elif [[ -n "${PICOLET_BIN:-}" ]]; then
    picolet="$PICOLET_BIN"
    log "using PICOLET_BIN=$picolet"
else
    bash "$CROSS_DIR/build.sh" "$TARGET_TRIPLE"
    picolet="$(picolet_bin "$TARGET_TRIPLE")"
fi
[[ "$variant" == package || -f "$picolet" ]] || die "picolet binary $picolet missing"

if [[ -n "$IMAGE_UNSUPPORTED" ]]; then
    cp "$picolet" "$dest/picolet"
    cp "$bdir/config.yaml" "$dest/config.yaml"
    {
        echo
        echo "================================================================"
        echo " $board: NO BOOT IMAGE BUILT"
        echo " $IMAGE_UNSUPPORTED"
        echo " Built instead: $dest/picolet ($TARGET_TRIPLE) and $dest/config.yaml"
        echo "================================================================"
    } >&2
    exit 0
fi

case "$DEB_ARCH" in
    amd64) multiarch=x86_64-linux-gnu ;;
    arm64) multiarch=aarch64-linux-gnu ;;
    armhf) multiarch=arm-linux-gnueabihf ;;
    *) die "no multiarch tuple for $DEB_ARCH" ;;
esac

work="$dest/.work"
rm -rf "$work"
pkgs="$work/pkgs"
stage="$work/initramfs"
mkdir -p "$pkgs" "$stage"

# --- Debian packages of the board's architecture -----------------------------------
log "fetching Debian packages for $DEB_ARCH"
bash "$CROSS_DIR/fetch-debs.sh" "$DEB_ARCH" "$pkgs" \
    "$KERNEL_PACKAGE" busybox-static containerd runc containernetworking-plugins \
    libc6 libseccomp2 libgcc-s1 >"$work/packages.txt"
if [[ "$variant" == package ]]; then
    # shellcheck source=package-image/stage.sh
    source "$CROSS_DIR/package-image/stage.sh"
    package_image_fetch
fi
sed 's/^/  /' "$work/packages.txt" >&2

kver="$(ls "$pkgs/lib/modules")"
[[ -n "$kver" && -f "$pkgs/boot/vmlinuz-$kver" ]] || die "kernel image not found in $KERNEL_PACKAGE"

# --- helpers -------------------------------------------------------------------------
# Copies absolute path P of the package tree into the stage, recreating the
# symlink chain (targets are resolved inside the tree, never on the host).
copy_from_tree() {
    local p="$1" n=0 t
    while (( n++ < 16 )); do
        mkdir -p "$stage$(dirname "$p")"
        if [[ -L "$pkgs$p" ]]; then
            t="$(readlink "$pkgs$p")"
            ln -sfn "$t" "$stage$p"
            [[ "$t" == /* ]] || t="$(dirname "$p")/$t"
            p="$(realpath -m -s "$t")"
        elif [[ -f "$pkgs$p" ]]; then
            cp -p "$pkgs$p" "$stage$p"
            echo "$p"
            return 0
        else
            die "$p not found in the $DEB_ARCH packages"
        fi
    done
    die "symlink loop at $1"
}

# ld.so-like closure: the ELF interpreter and every DT_NEEDED library of the
# given staged files, searched in the multiarch library directories.
declare -A seen_lib=()
add_elf_deps() {
    local f="$1" interp lib dir found real
    readelf -h "$f" >/dev/null 2>&1 || return 0
    interp="$(readelf -lW "$f" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
    if [[ -n "$interp" && -z "${seen_lib[$interp]:-}" ]]; then
        seen_lib[$interp]=1
        copy_from_tree "$interp" >/dev/null
    fi
    for lib in $(readelf -dW "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [[ -z "${seen_lib[$lib]:-}" ]] || continue
        seen_lib[$lib]=1
        found=""
        for dir in "/lib/$multiarch" "/usr/lib/$multiarch" /lib /usr/lib \
                   "/lib/$multiarch/systemd" "/usr/lib/$multiarch/systemd"; do
            if [[ -e "$pkgs$dir/$lib" || -L "$pkgs$dir/$lib" ]]; then found="$dir/$lib"; break; fi
        done
        [[ -n "$found" ]] || die "$(basename "$f") needs $lib, not found in the fetched $DEB_ARCH packages"
        real="$(copy_from_tree "$found")"
        add_elf_deps "$stage$real"
    done
}

# --- userland ------------------------------------------------------------------------
log "staging the initramfs"
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,run,tmp,root,etc/picolet,usr/bin,usr/sbin,usr/lib/cni,var/lib,var/log,usr/share/picolet/images}
chmod 1777 "$stage/tmp"
chmod 0700 "$stage/root"
[[ "$variant" == package ]] || install -m 0755 "$CROSS_DIR/init.sh" "$stage/init"
install -m 0755 "$pkgs/bin/busybox" "$stage/bin/busybox"
ln -sf busybox "$stage/bin/sh"
# The kernel opens /dev/console for /init before devtmpfs is mounted.
mknod -m 0600 "$stage/dev/console" c 5 1
mknod -m 0666 "$stage/dev/null" c 1 3
[[ "$variant" == package ]] || install -m 0755 "$picolet" "$stage/usr/bin/picolet"
for b in containerd containerd-shim-runc-v2 ctr; do
    install -m 0755 "$pkgs/usr/bin/$b" "$stage/usr/bin/$b"
done
install -m 0755 "$pkgs/usr/sbin/runc" "$stage/usr/sbin/runc"
ln -sf ../sbin/runc "$stage/usr/bin/runc"
for p in bridge host-local loopback; do
    install -m 0755 "$pkgs/usr/lib/cni/$p" "$stage/usr/lib/cni/$p"
done
for f in "$stage/usr/bin/"* "$stage/usr/sbin/runc" "$stage/usr/lib/cni/"*; do
    [[ -L "$f" ]] || add_elf_deps "$f"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/etc/passwd"
printf 'root:x:0:\n' >"$stage/etc/group"
[[ "$variant" != package ]] || package_image_stage

# --- kernel modules --------------------------------------------------------------------
moddir="$pkgs/lib/modules/$kver"
declare -A mod_path=() mod_done=()
while read -r rel; do
    n="$(basename "$rel")"
    n="${n%.ko*}"
    mod_path[${n//-/_}]="$rel"
done < <(cd "$moddir" && find kernel -name '*.ko*')
builtin_mods=" $(sed 's|.*/||; s|\.ko.*||; s|-|_|g' "$moddir/modules.builtin" | tr '\n' ' ') "
modlist=()
add_module() { # NAME [soft]: a soft dependency (an alias) may be absent
    local m="${1//-/_}" rel info dep
    [[ -z "${mod_done[$m]:-}" ]] || return 0
    mod_done[$m]=1
    if [[ "$builtin_mods" == *" $m "* ]]; then return 0; fi
    rel="${mod_path[$m]:-}"
    if [[ -z "$rel" ]]; then
        [[ "${2:-}" == soft ]] || log "warning: kernel $kver has no module $m (built in under another name, or absent)"
        return 0
    fi
    case "$rel" in
        *.ko) info="$(tr '\0' '\n' <"$moddir/$rel" | grep -a -E '^(depends|softdep)=' || true)" ;;
        *.ko.xz) info="$(xz -dc "$moddir/$rel" | tr '\0' '\n' | grep -a -E '^(depends|softdep)=' || true)" ;;
        *.ko.zst) info="$(zstd -dcq "$moddir/$rel" | tr '\0' '\n' | grep -a -E '^(depends|softdep)=' || true)" ;;
        *) die "unknown module format $rel" ;;
    esac
    for dep in $(sed -n 's/^depends=//p' <<<"$info" | tr ',' ' '); do
        add_module "$dep"
    done
    for dep in $(sed -n 's/^softdep=.*pre: *\([^:]*\)\( post:.*\)\{0,1\}$/\1/p' <<<"$info"); do
        add_module "$dep" soft
    done
    mkdir -p "$stage/lib/modules/$kver/$(dirname "$rel")"
    case "$rel" in
        *.ko) cp "$moddir/$rel" "$stage/lib/modules/$kver/$rel" ;;
        *.ko.xz) rel="${rel%.xz}"; xz -dc "$moddir/$rel.xz" >"$stage/lib/modules/$kver/$rel" ;;
        *.ko.zst) rel="${rel%.zst}"; zstd -dcq "$moddir/$rel.zst" >"$stage/lib/modules/$kver/$rel" ;;
    esac
    modlist+=("$rel")
}
for m in $MODULES; do add_module "$m"; done
mkdir -p "$stage/lib/modules/$kver"
printf '%s\n' "${modlist[@]}" >"$stage/lib/modules/picolet.modules"
cp "$moddir/modules.builtin" "$stage/lib/modules/$kver/" 2>/dev/null || true
log "kernel $kver: ${#modlist[@]} modules: $(printf '%s ' "${modlist[@]##*/}")"

# --- images, configuration, overlay ----------------------------------------------------------
bash "$CROSS_DIR/images.sh" "$work/images" "$pkgs/bin/busybox" "$CROSS_CC" "$OCI_ARCH" "$OCI_VARIANT"
cp "$work/images/busybox.tar" "$work/images/pause.tar" "$stage/usr/share/picolet/images/"
echo docker.io/library/busybox:latest >"$stage/usr/share/picolet/images/busybox.ref"
echo registry.k8s.io/pause:3.9 >"$stage/usr/share/picolet/images/pause.ref"
# The image tests' scenarios (cross/image-test.sh), inert unless
# picolet.scenario= names one on the kernel command line.
mkdir -p "$stage/usr/share/picolet/scenarios"
cp -a "$CROSS_DIR/scenarios/." "$stage/usr/share/picolet/scenarios/"
cp -a "$bdir/rootfs/." "$stage/"
# The package test image gets picolet's config from the package.
[[ "$variant" == package ]] || install -m 0644 "$bdir/config.yaml" "$stage/etc/picolet/config.yaml"
info="$stage/etc/picolet/image-info"
if [[ "$variant" == package ]]; then
    # /etc/picolet is the package's: a purge must find only its own files.
    rmdir "$stage/etc/picolet"
    info="$stage/usr/share/picolet/image-info"
else
    echo "$board" >"$stage/etc/picolet/board"
    echo "${DATA_DEVICE:-none}" >"$stage/etc/picolet/data-device"
fi
{
    echo "board=$board"
    echo "triple=$TARGET_TRIPLE"
    echo "kernel=$kver"
    sed 's/^/package=/' "$work/packages.txt"
} >"$info"

# --- outputs ---------------------------------------------------------------------------------
log "writing $dest"
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -6 -n >"$dest/initrd.img.tmp"
mv "$dest/initrd.img.tmp" "$dest/initrd.img"
cp "$pkgs/boot/vmlinuz-$kver" "$dest/vmlinuz"
cp "$bdir/config.yaml" "$dest/config.yaml"
cp "$work/packages.txt" "$dest/packages.txt"
echo "$KERNEL_CMDLINE" >"$dest/cmdline.txt"
if [[ "$RPI_CONFIG_TXT" == 1 ]]; then
    {
        echo "# config.txt for $board, written by picolet's cross/mkimage.sh."
        echo "# Put next to the Raspberry Pi firmware files (see boards/README.md)."
        [[ "$RPI_ARM_64BIT" == 1 ]] && echo "arm_64bit=1"
        echo "enable_uart=1"
        echo "kernel=vmlinuz"
        echo "initramfs initrd.img followkernel"
        echo "device_tree=$RPI_DTB"
        echo "disable_overscan=1"
    } >"$dest/config.txt"
fi
rm -rf "$work"

echo
echo "image for $board${variant:+ ($variant variant)} ($BOARD_DESCRIPTION):"
printf '  %-12s %10s  %s\n' FILE BYTES NOTE
printf '  %-12s %10d  %s\n' vmlinuz "$(stat -c %s "$dest/vmlinuz")" "Debian $kver"
if [[ "$variant" == package ]]; then
    printf '  %-12s %10d  %s\n' initrd.img "$(stat -c %s "$dest/initrd.img")" "cpio.gz (systemd, dpkg, $(for d in $PACKAGE_DEBS; do basename "$d"; done | tr '\n' ' '))"
else
    printf '  %-12s %10d  %s\n' initrd.img "$(stat -c %s "$dest/initrd.img")" "cpio.gz (picolet $(stat -c %s "$picolet") bytes)"
fi
printf '  %-12s %10s  %s\n' cmdline.txt "" "$KERNEL_CMDLINE"
[[ -f "$dest/config.txt" ]] && printf '  %-12s %10s  %s\n' config.txt "" "Raspberry Pi firmware configuration"
echo
