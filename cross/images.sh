#!/usr/bin/env bash
# cross/images.sh -- owned by the cross-build work (cross/, boards/).
#
# Builds the two container images a board image preloads, for the board's
# architecture, as OCI image-layout tarballs that `ctr images import` takes:
#   OUTDIR/busybox.tar  docker.io/library/busybox:latest  (the arch's
#                       busybox-static + applet links, /etc/passwd, /etc/group)
#   OUTDIR/pause.tar    registry.k8s.io/pause:3.9  (tests/images/pause.c built
#                       with the arch's cross gcc, -static)
# tests/images/build-images.sh does the same for the build machine's own
# architecture only; this one takes the architecture as arguments. Output
# is reproducible: sorted tar entries, fixed times and owners, gzip -n.
#
# Usage: cross/images.sh OUTDIR BUSYBOX CC OCI_ARCH [OCI_VARIANT]
#   BUSYBOX  a static busybox binary of the target architecture
#   CC       C cross compiler (aarch64-linux-gnu-gcc, gcc, ...)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
umask 022
export LC_ALL=C

(( $# >= 4 )) || die "usage: $0 OUTDIR BUSYBOX CC OCI_ARCH [OCI_VARIANT]"
outdir="$1" busybox="$2" cc="$3" oci_arch="$4" oci_variant="${5:-}"
pause_src="$REPO/tests/images/pause.c"
[[ -f "$pause_src" ]] || die "$pause_src missing"
[[ -x "$busybox" ]] || die "$busybox missing"
command -v "$cc" >/dev/null || die "$cc not found (make cross-deps)"
if grep -q 'program interpreter' <<<"$(readelf -lW "$busybox")"; then
    die "$busybox is dynamically linked (need busybox-static)"
fi
strip_tool="${cc%gcc}strip"
command -v "$strip_tool" >/dev/null || strip_tool=strip

platform="\"architecture\":\"$oci_arch\",\"os\":\"linux\"${oci_variant:+,\"variant\":\"$oci_variant\"}"
mkdir -p "$outdir"
work="$(mktemp -d "$outdir/.images.XXXXXX")"
trap 'rm -rf "$work"' EXIT

reproducible_tar() { # DIR OUT ENTRIES...
    local dir="$1" out="$2"
    shift 2
    tar -C "$dir" -cf "$out" --format=gnu --sort=name --mtime=@0 \
        --owner=0 --group=0 --numeric-owner "$@"
}

add_blob() { # LAYOUT FILE -> prints "sha256:<hex> <size>"
    local hex
    hex="$(sha256sum "$2" | cut -d' ' -f1)"
    mkdir -p "$1/blobs/sha256"
    cp "$2" "$1/blobs/sha256/$hex"
    echo "sha256:$hex $(stat -c %s "$2")"
}

oci_image() { # REF_NAME TAG ROOTFS CONFIG_JSON_BODY OUT
    local name="$1" tag="$2" root="$3" cfg="$4" out="$5"
    local d="$work/oci-$tag" layout="$work/oci-$tag/layout"
    mkdir -p "$layout"
    local entries
    mapfile -t entries < <(cd "$root" && ls -A)
    reproducible_tar "$root" "$d/layer.tar" "${entries[@]}"
    local diff_id="sha256:$(sha256sum "$d/layer.tar" | cut -d' ' -f1)"
    gzip -n -9 -c "$d/layer.tar" >"$d/layer.tgz"
    local ldig lsize cdig csize mdig msize
    read -r ldig lsize < <(add_blob "$layout" "$d/layer.tgz")
    printf '{"created":"1970-01-01T00:00:00Z",%s,"config":{%s},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"picolet cross/images.sh"}]}' \
        "$platform" "$cfg" "$diff_id" >"$d/config.json"
    read -r cdig csize < <(add_blob "$layout" "$d/config.json")
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
        "$cdig" "$csize" "$ldig" "$lsize" >"$d/manifest.json"
    read -r mdig msize < <(add_blob "$layout" "$d/manifest.json")
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{%s},"annotations":{"io.containerd.image.name":"%s:%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$mdig" "$msize" "$platform" "$name" "$tag" "$tag" >"$layout/index.json"
    printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
    reproducible_tar "$layout" "$d/image.tar" blobs index.json oci-layout
    mv "$d/image.tar" "$out"
    log "$out: $name:$tag ($oci_arch${oci_variant:+/$oci_variant}) $mdig"
}

env_json='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

# busybox: applet links from the list the binary itself prints (run under
# qemu-user when it is a foreign binary; binfmt is not assumed).
bb="$work/busybox-root"
mkdir -p "$bb"/{bin,etc,tmp,root,proc,sys,dev,run,var,usr/bin}
chmod 1777 "$bb/tmp"
chmod 0700 "$bb/root"
cp "$busybox" "$bb/bin/busybox"
chmod 0755 "$bb/bin/busybox"
list_applets() {
    local q
    if "$busybox" --list >/dev/null 2>&1; then "$busybox" --list; return; fi
    for q in qemu-aarch64-static qemu-arm-static qemu-riscv64-static qemu-x86_64-static; do
        if command -v "$q" >/dev/null && "$q" "$busybox" --list 2>/dev/null; then return; fi
    done
    die "cannot run $busybox to list its applets (install qemu-user-static)"
}
while read -r applet; do
    [[ -n "$applet" && "$applet" != busybox && "$applet" != */* ]] || continue
    ln -sf busybox "$bb/bin/$applet"
done < <(list_applets | sort -u)
ln -sf ../../bin/busybox "$bb/usr/bin/env"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$bb/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$bb/etc/group"
oci_image docker.io/library/busybox latest "$bb" "$env_json,\"Cmd\":[\"sh\"]" "$outdir/busybox.tar"

# pause
pr="$work/pause-root"
mkdir -p "$pr"
"$cc" -static -Os -Wall -o "$pr/pause" "$pause_src" || die "$cc -static $pause_src failed (is libc6-dev-<arch>-cross installed?)"
"$strip_tool" "$pr/pause"
oci_image registry.k8s.io/pause 3.9 "$pr" "$env_json,\"Entrypoint\":[\"/pause\"],\"WorkingDir\":\"/\"" "$outdir/pause.tar"
