#!/usr/bin/env bash
# cross/fetch-debs.sh -- owned by the cross-build work (cross/, boards/).
#
# Downloads Debian packages of a given architecture (`apt-get download
# PKG:ARCH`; never installed) into the cache out/cache/debs/<arch>/ and
# extracts them with `dpkg-deb -x` into DEST. A kernel metapackage
# (linux-image-arm64, ...) is resolved to the versioned package it depends
# on, since the metapackage itself holds no files. Cached .debs whose
# version is still apt's candidate are reused, so rebuilding an image works
# without downloading again.
#
# Usage: cross/fetch-debs.sh ARCH DEST PKG...
#        prints "PKG VERSION" for each package extracted.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

(( $# >= 3 )) || die "usage: $0 ARCH DEST PKG..."
arch="$1" dest="$2"
shift 2
debs="$CACHE/debs/$arch"
mkdir -p "$debs" "$dest"

# apt's candidate versions, all asked in one `apt-cache policy` (each run
# loads apt's whole cache: seconds apiece on a busy machine).
declare -A cand=()
candidates() {
    local name ver
    while read -r name ver; do
        cand[$name]="$ver"
    done < <(apt-cache policy "${@/%/:$arch}" 2>/dev/null | awk -v a=":$arch" '
        /^[^ ].*:$/ { name = substr($0, 1, length($0) - 1); sub(a "$", "", name) }
        /^  Candidate:/ { print name, $2 }')
}
candidate() {
    [[ -n "${cand[$1]+x}" ]] || candidates "$1"
    echo "${cand[$1]:-}"
}

resolve() {
    local pkg="$1" dep
    case "$pkg" in
        linux-image-[a-z]*)
            dep="$(apt-cache depends --no-recommends --no-suggests "$pkg:$arch" 2>/dev/null |
                   sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*\).*/\1/p' | head -n 1)"
            [[ -n "$dep" ]] || die "cannot resolve kernel metapackage $pkg:$arch"
            echo "$dep" ;;
        *) echo "$pkg" ;;
    esac
}

resolved=()
for want in "$@"; do resolved+=("$(resolve "$want")"); done
candidates "${resolved[@]}"
for pkg in "${resolved[@]}"; do
    ver="$(candidate "$pkg")"
    if [[ -z "$ver" || "$ver" == "(none)" ]]; then
        die "no $pkg for $arch in apt's lists (did 'make cross-deps' add the $arch architecture and run apt-get update?)"
    fi
    file="$debs/${pkg}_${ver//:/%3a}_$arch.deb"
    if [[ ! -s "$file" ]]; then
        log "downloading $pkg:$arch $ver"
        tmp="$(mktemp -d "$debs/.dl.XXXXXX")"
        (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg:$arch=$ver" >/dev/null) ||
            { rm -rf "$tmp"; die "apt-get download $pkg:$arch=$ver failed"; }
        mv "$tmp"/*.deb "$file"
        rm -rf "$tmp"
    fi
    dpkg-deb -x "$file" "$dest"
    echo "$pkg $ver"
done
