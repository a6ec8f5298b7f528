#!/usr/bin/env bash
# build-images.sh -- owned by the integration test harness (tests/images).
#
# Builds the container images that picolet's integration tests (and the
# demo) need, as OCI image-layout tarballs that `ctr -n k8s.io images
# import` accepts. No registry is reachable from CI and we do not want
# docker, so the images are assembled here from files already on the
# machine:
#
#   OUTDIR/busybox.tar  docker.io/library/busybox:latest
#                       Debian's static /bin/busybox plus applet symlinks,
#                       /etc/passwd and /etc/group; Cmd ["sh"].
#   OUTDIR/pause.tar    registry.k8s.io/pause:3.9 (containerd's sandbox_image)
#                       our tests/images/pause.c built static as /pause.
#   OUTDIR/agnhost.tar  registry.k8s.io/e2e-test-images/agnhost:2.63.0 (and
#                       the suite's other agnhost tags): the e2e suite's
#                       agnhost binary ($AGNHOST, from ../shared/kube) as
#                       /agnhost, the entrypoint (command `pause`, as
#                       upstream), /agnhost-2 and /localhost.{crt,key}
#                       (tests/images/agnhost-tls/), over the
#                       busybox rootfs, with the host's bash and curl and
#                       the libraries they link (tests run them in it, as in
#                       the upstream image). For `make conformance`
#                       (examples/conformance/).
#   OUTDIR/e2e-busybox.tar  the busybox rootfs under the e2e suite's busybox
#                       names.
#   OUTDIR/nonroot.tar  registry.k8s.io/e2e-test-images/nonroot:1.5: the
#                       busybox rootfs with user 1234.
#   OUTDIR/nonewprivs.tar  registry.k8s.io/e2e-test-images/nonewprivs:1.4:
#                       the busybox rootfs with our tests/images/nnp.c as
#                       /usr/local/bin/nnp, setuid root (Cmd ["nnp"]), for
#                       the AllowPrivilegeEscalation tests.
#   OUTDIR/e2e-pause.tar  the pause image as registry.k8s.io/pause:3.10.2,
#                       the suite's name for it.
#   OUTDIR/grpc-health.tar  docker.io/picolet/grpc-health:test
#                       tests/images/grpc-health/ (cargo example
#                       grpc_health_server, with the glibc it links) as
#                       /grpc-health-server: a grpc.health.v1 server on port
#                       50051 for gRPC probes; `exec /grpc-health-server
#                       not-serving` and `... serving` flip its answer. The
#                       slow one on a fresh checkout: it compiles picolet's
#                       dependencies in the dev profile (which the tests
#                       then reuse), with cargo's progress shown.
#
# Only the images named on the command line are built (busybox, pause and
# grpc-health when none is named; the demo needs only busybox and pause). An image that cannot be
# built is an error naming what to install, never a warning: a test whose
# image is missing must fail, not pass by skipping.
#
# Output is deterministic (sorted tar entries, fixed mtime and owners, gzip
# without name/time), so rebuilding yields the same digests. The script is
# idempotent (a tarball newer than all its inputs is left alone) and safe to
# run concurrently: it holds a lock on OUTDIR and renames finished files into
# place atomically.
#
# Usage: tests/images/build-images.sh [OUTDIR [IMAGE...]]
#          OUTDIR default target/test-images; IMAGE: busybox pause grpc-health
#          agnhost e2e-busybox nonroot nonewprivs e2e-pause
# Env:   BUSYBOX=/path/to/static/busybox  (default /bin/busybox)
#        AGNHOST=/path/to/agnhost  (for the agnhost image)
#        CC=gcc  CARGO=cargo
set -euo pipefail
umask 022
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
outdir="${1:-$repo/target/test-images}"
(($# > 0)) && shift
all_images=(busybox pause grpc-health agnhost e2e-busybox nonroot nonewprivs e2e-pause)
default_images=(busybox pause grpc-health)
wanted=("$@")
((${#wanted[@]})) || wanted=("${default_images[@]}")
busybox="${BUSYBOX:-/bin/busybox}"
cc="${CC:-gcc}"
pause_src="$here/pause.c"
nnp_src="$here/nnp.c"
agnhost_tls="$here/agnhost-tls"
cargo="${CARGO:-cargo}"
grpc_health_srcs=("$here/grpc-health/main.rs" "$here/grpc-health/server.rs" "$repo/src/rt.rs" "$repo/Cargo.lock")
self="$here/build-images.sh"

# Fixed timestamp for every tar entry and for the image configs.
epoch=0
created="1970-01-01T00:00:00Z"

die() { echo "build-images.sh: $*" >&2; exit 1; }

# need COMMAND WHAT-TO-INSTALL: fails naming the package unless COMMAND runs.
need() { command -v "$1" >/dev/null || die "$1 not found: $2"; }

# Fails unless $cc can link statically (the static libc is in libc6-dev).
need_static_libc() {
    local libc
    need "$cc" "apt-get install gcc libc6-dev (or run 'make deps')"
    libc="$("$cc" -print-file-name=libc.a 2>/dev/null || true)"
    [[ "$libc" == /* && -f "$libc" ]] ||
        die "no static libc (libc.a) for $cc, needed for $1: apt-get install libc6-dev (or run 'make deps')"
}

# --- platform -----------------------------------------------------------------

oci_platform() {
    # Prints: architecture [variant]
    local deb
    deb="$(dpkg --print-architecture 2>/dev/null || uname -m)"
    case "$deb" in
        amd64 | x86_64) echo "amd64" ;;
        arm64 | aarch64) echo "arm64" ;;
        armhf | armv7l) echo "arm v7" ;;
        armel) echo "arm v5" ;;
        riscv64) echo "riscv64" ;;
        i386 | i686) echo "386" ;;
        ppc64el | ppc64le) echo "ppc64le" ;;
        s390x) echo "s390x" ;;
        *) die "unsupported architecture '$deb'" ;;
    esac
}
read -r arch variant <<<"$(oci_platform)"
variant="${variant:-}"

if [[ -n "$variant" ]]; then
    platform_json="\"architecture\":\"$arch\",\"os\":\"linux\",\"variant\":\"$variant\""
else
    platform_json="\"architecture\":\"$arch\",\"os\":\"linux\""
fi

# --- helpers ------------------------------------------------------------------

sha256() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# Deterministic tar of the given top-level entries of directory $1 into $2.
det_tar() {
    local dir="$1" out="$2"
    shift 2
    tar --create --file="$out" --directory="$dir" \
        --format=gnu --sort=name --mtime="@$epoch" \
        --owner=0 --group=0 --numeric-owner \
        --no-acls --no-xattrs --no-selinux \
        "$@"
}

# True if $1 exists and is newer than every other argument.
fresh() {
    local out="$1" in
    shift
    [[ -f "$out" ]] || return 1
    for in in "$@"; do
        [[ "$out" -nt "$in" ]] || return 1
    done
}

# Stores a file as a blob of the layout in $1; prints "digest size".
put_blob() {
    local layout="$1" file="$2" d
    d="$(sha256 "$file")"
    mkdir -p "$layout/blobs/sha256"
    cp "$file" "$layout/blobs/sha256/$d"
    echo "sha256:$d $(size "$file")"
}

# make_image NAME TAG ROOTFS_DIR CONFIG_FRAGMENT OUT_TAR [NAME:TAG...]
#   CONFIG_FRAGMENT is the JSON object body of the image config's "config".
#   Further NAME:TAG arguments name the same image again in the layout's
#   index (one entry each; `ctr images import` creates one image per entry).
make_image() {
    local name="$1" tag="$2" rootfs="$3" cfg="$4" out="$5"
    shift 5
    local aliases=("$@")
    local work layout entries
    work="$(mktemp -d "$outdir/.work.XXXXXX")"
    layout="$work/layout"
    mkdir -p "$layout/blobs/sha256"

    # Layer: uncompressed tar (its digest is the diff_id), then gzip -n.
    mapfile -t entries < <(cd "$rootfs" && ls -A | sort)
    det_tar "$rootfs" "$work/layer.tar" "${entries[@]}"
    local diff_id
    diff_id="sha256:$(sha256 "$work/layer.tar")"
    gzip -n -9 <"$work/layer.tar" >"$work/layer.tar.gz"
    local layer_digest layer_size
    read -r layer_digest layer_size <<<"$(put_blob "$layout" "$work/layer.tar.gz")"

    # Image config.
    printf '{"created":"%s",%s,"config":{%s},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"%s","created_by":"picolet tests/images/build-images.sh"}]}' \
        "$created" "$platform_json" "$cfg" "$diff_id" "$created" >"$work/config.json"
    local config_digest config_size
    read -r config_digest config_size <<<"$(put_blob "$layout" "$work/config.json")"

    # Manifest.
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
        "$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
    local manifest_digest manifest_size
    read -r manifest_digest manifest_size <<<"$(put_blob "$layout" "$work/manifest.json")"

    # Layout index, naming the image for containerd and for OCI tools.
    local entries_json ref
    entries_json=""
    for ref in "$name:$tag" "${aliases[@]}"; do
        entries_json+="${entries_json:+,}$(printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{%s},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}' \
            "$manifest_digest" "$manifest_size" "$platform_json" "$ref" "${ref##*:}")"
    done
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' \
        "$entries_json" >"$layout/index.json"
    printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

    chmod -R u=rwX,go=rX "$layout"
    det_tar "$layout" "$work/image.tar" blobs index.json oci-layout
    mv -f "$work/image.tar" "$out.tmp.$$"
    mv -f "$out.tmp.$$" "$out"
    rm -rf "$work"
    echo "built $out: $name:$tag $manifest_digest ($arch${variant:+/$variant})"
}

# --- rootfs builders ----------------------------------------------------------

busybox_rootfs() {
    local root="$1" applet
    [[ -x "$busybox" ]] || die "$busybox not found (apt-get install busybox-static, or run 'make deps')"
    if command -v readelf >/dev/null && readelf -l "$busybox" 2>/dev/null | grep -q 'interpreter'; then
        die "$busybox is dynamically linked; install busybox-static"
    fi
    mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root,run,var,usr/bin}
    chmod 1777 "$root/tmp"
    chmod 0700 "$root/root"
    cp -L "$busybox" "$root/bin/busybox"
    chmod 0755 "$root/bin/busybox"
    while read -r applet; do
        [[ -n "$applet" && "$applet" != "busybox" && "$applet" != */* ]] || continue
        ln -sf busybox "$root/bin/$applet"
    done < <("$busybox" --list | sort -u)
    # Shebangs like #!/usr/bin/env sh.
    ln -sf ../../bin/busybox "$root/usr/bin/env"
    local need
    for need in sh sleep echo cat ls test httpd nc touch true false env id wget ps mkdir rm kill hostname; do
        [[ -L "$root/bin/$need" ]] || die "$busybox has no '$need' applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"
    chmod 0644 "$root/etc/passwd" "$root/etc/group"
}

pause_rootfs() {
    local root="$1"
    need_static_libc "the pause image"
    need strip "apt-get install binutils (or run 'make deps')"
    mkdir -p "$root"
    "$cc" -static -Os -Wall -o "$root/pause" "$pause_src" || die "compiling $pause_src failed (static libc needs libc6-dev)"
    strip "$root/pause"
    chmod 0755 "$root/pause"
}

# Builds the cargo example grpc_health_server for the host, in the dev
# profile the integration tests build in, so that it reuses their compiled
# dependencies (a static build for its own target compiled them all once
# more: minutes of CI). The binary is dynamically linked, so the glibc
# libraries it needs, and the loader, are copied into the image at their
# host paths. Fails naming what to install when that is not possible here.
grpc_health_rootfs() {
    local root="$1" bin lib
    need "$cargo" "install Rust with rustup (https://rustup.rs)"
    need protoc "apt-get install protobuf-compiler (or run 'make deps'); picolet's build script compiles the CRI protos"
    need strip "apt-get install binutils (or run 'make deps')"
    need ldd "apt-get install libc-bin"
    echo "build-images.sh: building the grpc-health image: cargo build --example grpc_health_server" >&2
    (cd "$repo" && "$cargo" build --example grpc_health_server) ||
        die "cargo build --example grpc_health_server failed (see above); it needs Rust (rustup), gcc, libc6-dev and protobuf-compiler ('make deps')"
    bin="${CARGO_TARGET_DIR:-$repo/target}/debug/examples/grpc_health_server"
    [[ -x "$bin" ]] || die "cargo built no $bin"
    mkdir -p "$root/tmp"
    chmod 1777 "$root/tmp"
    cp "$bin" "$root/grpc-health-server"
    strip "$root/grpc-health-server"
    chmod 0755 "$root/grpc-health-server"
    # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader
    # as "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
    while read -r lib; do
        [[ -f "$lib" ]] || continue
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
        chmod 0755 "$root$lib"
    done < <(ldd "$bin" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p')
    [[ -n "$(find "$root" -name 'libc.so*' -print -quit)" ]] || die "ldd named no libc for $bin"
}

# copy_with_libs BIN ROOT DEST: the dynamically linked host binary BIN as
# ROOT/DEST, with the shared libraries and loader that ldd names, at their
# host paths.
copy_with_libs() {
    local bin="$1" root="$2" dest="$3" lib
    mkdir -p "$root$(dirname "$dest")"
    cp -L "$bin" "$root$dest"
    chmod 0755 "$root$dest"
    while read -r lib; do
        [[ -f "$lib" ]] || continue
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
        chmod 0755 "$root$lib"
    done < <(ldd "$bin" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p')
}

# --- main ---------------------------------------------------------------------

for image in "${wanted[@]}"; do
    [[ " ${all_images[*]} " == *" $image "* ]] || die "unknown image '$image' (known: ${all_images[*]})"
done

mkdir -p "$outdir"
exec 9>"$outdir/.build-images.lock"
flock 9

env_path='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'
stage="$(mktemp -d "$outdir/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

build_busybox() {
    if fresh "$outdir/busybox.tar" "$self" "$busybox"; then
        echo "up to date: $outdir/busybox.tar"
        return
    fi
    busybox_rootfs "$stage/busybox"
    make_image docker.io/library/busybox latest "$stage/busybox" \
        "$env_path,\"Cmd\":[\"sh\"]" "$outdir/busybox.tar"
}

build_pause() {
    if fresh "$outdir/pause.tar" "$self" "$pause_src"; then
        echo "up to date: $outdir/pause.tar"
        return
    fi
    pause_rootfs "$stage/pause"
    make_image registry.k8s.io/pause 3.9 "$stage/pause" \
        "$env_path,\"Entrypoint\":[\"/pause\"],\"WorkingDir\":\"/\"" "$outdir/pause.tar"
}

build_grpc_health() {
    if fresh "$outdir/grpc-health.tar" "$self" "${grpc_health_srcs[@]}"; then
        echo "up to date: $outdir/grpc-health.tar"
        return
    fi
    grpc_health_rootfs "$stage/grpc-health"
    make_image docker.io/picolet/grpc-health test "$stage/grpc-health" \
        "$env_path,\"Entrypoint\":[\"/grpc-health-server\"],\"ExposedPorts\":{\"50051/tcp\":{}},\"WorkingDir\":\"/\"" \
        "$outdir/grpc-health.tar"
}

# The e2e suite's names (`e2e.test --list-images`) that examples/conformance
# needs, all served by the two images below.
e2e_busybox_names=(registry.k8s.io/e2e-test-images/busybox:1.37.0-1)
# glibc-dns-testing runs `hostname` and bash commands, which this image has.
agnhost_names=(registry.k8s.io/e2e-test-images/agnhost:2.55 gcr.io/k8s-authenticated-test/agnhost:2.6
    registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0)

build_agnhost() {
    local agnhost="${AGNHOST:-}"
    [[ -n "$agnhost" && -x "$agnhost" ]] ||
        die "set AGNHOST to the e2e suite's agnhost binary (../shared/kube/agnhost.xz, unpacked; examples/conformance does this)"
    if fresh "$outdir/agnhost.tar" "$self" "$busybox" "$agnhost" "$(command -v bash)" "$(command -v curl)" \
        "$agnhost_tls/localhost.crt" "$agnhost_tls/localhost.key"; then
        echo "up to date: $outdir/agnhost.tar"
        return
    fi
    need bash "apt-get install bash"
    need curl "apt-get install curl (or run 'make deps')"
    need ldd "apt-get install libc-bin"
    busybox_rootfs "$stage/agnhost"
    cp -L "$agnhost" "$stage/agnhost/agnhost"
    chmod 0755 "$stage/agnhost/agnhost"
    ln -s agnhost "$stage/agnhost/agnhost-2"
    # netexec's --tls-cert-file /localhost.crt (the https lifecycle hooks'
    # handler): a throwaway self-signed identity for localhost, made for
    # these tests with openssl and kept in the repo so the image's digest
    # stays the same; nothing trusts it.
    install -m 0644 "$agnhost_tls/localhost.crt" "$agnhost_tls/localhost.key" "$stage/agnhost/"
    copy_with_libs "$(command -v bash)" "$stage/agnhost" /bin/bash
    copy_with_libs "$(command -v curl)" "$stage/agnhost" /usr/bin/curl
    make_image registry.k8s.io/e2e-test-images/agnhost 2.63.0 "$stage/agnhost" \
        "$env_path,\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"],\"WorkingDir\":\"/\"" "$outdir/agnhost.tar" \
        "${agnhost_names[@]}"
}

build_e2e_busybox() {
    if fresh "$outdir/e2e-busybox.tar" "$self" "$busybox"; then
        echo "up to date: $outdir/e2e-busybox.tar"
        return
    fi
    busybox_rootfs "$stage/e2e-busybox"
    make_image registry.k8s.io/e2e-test-images/busybox 1.36.1-1 "$stage/e2e-busybox" \
        "$env_path,\"Cmd\":[\"sh\"]" "$outdir/e2e-busybox.tar" "${e2e_busybox_names[@]}"
}

# The suite's pause image, which it also runs as a test container: ours,
# under the name e2e.test asks for.
build_e2e_pause() {
    if fresh "$outdir/e2e-pause.tar" "$self" "$pause_src"; then
        echo "up to date: $outdir/e2e-pause.tar"
        return
    fi
    pause_rootfs "$stage/e2e-pause"
    make_image registry.k8s.io/pause 3.10.2 "$stage/e2e-pause" \
        "$env_path,\"Entrypoint\":[\"/pause\"],\"WorkingDir\":\"/\"" "$outdir/e2e-pause.tar"
}

# The suite's nonroot image: the busybox rootfs, run as user 1234
# (runAsNonRoot tests).
build_nonroot() {
    if fresh "$outdir/nonroot.tar" "$self" "$busybox"; then
        echo "up to date: $outdir/nonroot.tar"
        return
    fi
    busybox_rootfs "$stage/nonroot"
    make_image registry.k8s.io/e2e-test-images/nonroot 1.5 "$stage/nonroot" \
        "$env_path,\"Cmd\":[\"sh\"],\"User\":\"1234\"" "$outdir/nonroot.tar"
}

# The suite's nonewprivs image: the busybox rootfs with nnp setuid root,
# run as the test's uid; det_tar keeps the mode bits, owner root.
build_nonewprivs() {
    if fresh "$outdir/nonewprivs.tar" "$self" "$busybox" "$nnp_src"; then
        echo "up to date: $outdir/nonewprivs.tar"
        return
    fi
    need_static_libc "the nonewprivs image"
    busybox_rootfs "$stage/nonewprivs"
    mkdir -p "$stage/nonewprivs/usr/local/bin"
    "$cc" -static -Os -Wall -o "$stage/nonewprivs/usr/local/bin/nnp" "$nnp_src" ||
        die "compiling $nnp_src failed (static libc needs libc6-dev)"
    strip "$stage/nonewprivs/usr/local/bin/nnp"
    chmod 4755 "$stage/nonewprivs/usr/local/bin/nnp"
    make_image registry.k8s.io/e2e-test-images/nonewprivs 1.4 "$stage/nonewprivs" \
        "$env_path,\"Cmd\":[\"nnp\"]" "$outdir/nonewprivs.tar"
}

for image in "${wanted[@]}"; do
    "build_${image//-/_}"
done
