# cross/package-image/stage.sh -- owned by the packaging work (cross/install/,
# cross/deb.sh, cross/package-test.sh; issue #25).
#
# Sourced by cross/mkimage.sh when IMAGE_VARIANT=package: turns the board's
# initramfs into the package test image, a node whose PID 1 is Debian's
# systemd and which has dpkg but no picolet, only picolet's .debs
# ($PACKAGE_DEBS, first the one to install, then the upgrade) in
# /usr/share/picolet/debs/ as 1-<name>.deb, 2-<name>.deb. At boot,
# cross/package-image/init.sh (as /init) loads the kernel modules and execs
# systemd, and picolet-package-test.service runs check.sh, which installs,
# upgrades, removes and purges the package and prints one PICOLET-PKG line
# per check on the console (cross/package-test.sh reads them).
# Uses mkimage.sh's variables ($stage, $pkgs, $work, $DEB_ARCH) and helpers
# (copy_from_tree, add_elf_deps). Not run on its own.
# shellcheck shell=bash

# systemd, dpkg and the tar it runs (busybox tar lacks the GNU options dpkg-deb
# passes), and the libraries their programs link (the ELF closure
# below copies only the ones needed, from this list of packages).
PACKAGE_IMAGE_WHOLE=(systemd libsystemd-shared dpkg tar)
PACKAGE_IMAGE_LIBS=(libsystemd0 libacl1 libapparmor1 libargon2-1 libaudit1 libcap-ng0
    libblkid1 libbz2-1.0 libcap2 libcrypt1 libcryptsetup12 libdevmapper1.02.1 libfdisk1
    libffi8 libgcrypt20 libgpg-error0 libip4tc2 libjson-c5 libkmod2 liblz4-1 liblzma5
    libmd0 libmount1 libp11-kit0 libpam0g libpcre2-8-0 libselinux1 libssl3 libudev1
    libuuid1 libzstd1 zlib1g)

package_image_fetch() {
    log "fetching systemd and dpkg for $DEB_ARCH"
    bash "$CROSS_DIR/fetch-debs.sh" "$DEB_ARCH" "$pkgs" \
        "${PACKAGE_IMAGE_WHOLE[@]}" "${PACKAGE_IMAGE_LIBS[@]}" >>"$work/packages.txt"
    # The packages copied whole (less their documentation), apart.
    bash "$CROSS_DIR/fetch-debs.sh" "$DEB_ARCH" "$work/whole" "${PACKAGE_IMAGE_WHOLE[@]}" >/dev/null
    rm -rf "$work/whole/usr/share/"{doc,man,locale,lintian,bug,zsh,bash-completion,polkit-1}
}

package_image_stage() {
    local here="$CROSS_DIR/package-image" f n=1 deb unit
    install -m 0755 "$here/init.sh" "$stage/init"
    cp -a "$work/whole/." "$stage/"
    while read -r f; do
        add_elf_deps "$stage/$f"
    done < <(cd "$work/whole" && find . -type f -perm -u+x -printf '%P\n')
    # libsystemd-shared is a library, not executable, but links more.
    for f in "$stage"/lib/"$multiarch"/systemd/*.so "$stage"/usr/lib/"$multiarch"/systemd/*.so; do
        [[ -e "$f" ]] && add_elf_deps "$f"
    done
    # dpkg looks for ldconfig on $PATH; with no shared libraries installed
    # by any package here, there is nothing for it to do.
    printf '#!/bin/sh\nexit 0\n' >"$stage/sbin/ldconfig"
    chmod 0755 "$stage/sbin/ldconfig"

    # containerd's own unit, as its package installs it (not enabled:
    # check.sh starts it).
    install -D -m 0644 "$pkgs/lib/systemd/system/containerd.service" \
        "$stage/lib/systemd/system/containerd.service"

    # An empty dpkg database, as on a fresh system.
    mkdir -p "$stage/var/lib/dpkg/"{info,updates,triggers,alternatives} "$stage/var/log"
    : >"$stage/var/lib/dpkg/status"
    : >"$stage/var/lib/dpkg/available"

    # The identity systemd wants: a fixed machine ID (an empty one would
    # make this a first boot, with presets applied), os-release, the groups
    # its units name.
    echo 5d0c6f8e1a2b4c3d9e8f7a6b5c4d3e2f >"$stage/etc/machine-id"
    printf 'PRETTY_NAME="picolet package test image (Debian bookworm systemd)"\nID=debian\nVERSION_ID=12\n' \
        >"$stage/etc/os-release"
    tr 'A-Z_' 'a-z-' <<<"$board" >"$stage/etc/hostname"
    printf '127.0.0.1 localhost\n::1 localhost\n' >"$stage/etc/hosts"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$stage/etc/passwd"
    printf 'root:x:0:\ntty:x:5:\ndisk:x:6:\nsystemd-journal:x:101:\nnogroup:x:65534:\n' >"$stage/etc/group"

    # Boot to multi-user.target with the test service; no login prompts
    # (no getty here), no logind (no D-Bus here).
    unit="$stage/etc/systemd/system"
    mkdir -p "$unit/multi-user.target.wants" "$stage/etc/systemd/journald.conf.d"
    ln -sfn /lib/systemd/system/multi-user.target "$unit/default.target"
    install -m 0644 "$here/picolet-package-test.service" "$unit/picolet-package-test.service"
    ln -sfn ../picolet-package-test.service "$unit/multi-user.target.wants/picolet-package-test.service"
    for f in getty.target systemd-logind.service systemd-networkd-wait-online.service; do
        ln -sfn /dev/null "$unit/$f"
    done
    printf '[Journal]\nStorage=volatile\n' >"$stage/etc/systemd/journald.conf.d/picolet-image.conf"
    install -m 0755 "$here/check.sh" "$stage/usr/share/picolet/package-check.sh"

    mkdir -p "$stage/usr/share/picolet/debs"
    for deb in $PACKAGE_DEBS; do
        cp "$deb" "$stage/usr/share/picolet/debs/$n-$(basename "$deb")"
        n=$((n + 1))
    done
}
