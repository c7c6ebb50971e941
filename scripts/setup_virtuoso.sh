#!/usr/bin/env bash
# Unpack Virtuoso 7.2 (Debian's virtuoso-opensource-7-bin) into a folder, without a system install.
#
# Usage: scripts/setup_virtuoso.sh [DEST]      (DEST defaults to <repo>/.tools/virtuoso)
#
# Why this way: the Freebase setups of ToG and PoG run on Virtuoso, and the KG tests and benchmarks
# need a real one on loopback. A system install (`apt-get install`) would start a service, ask
# debconf questions and need root-owned state; `apt-get download` + `dpkg -x` only writes files
# into DEST. Runtime libraries the machine lacks (e.g. libminizip1, libpcre3, and on a slim image
# libldap-2.5-0 and its own dependencies) are found from the package's dependency closure, minus
# what dpkg says is installed, and unpacked beside it; `ldd` then proves nothing is missing.
#
# Idempotent: when DEST/.complete exists and the binaries still resolve all their libraries, it
# only prints the paths (well under a second). `apt-get update` runs only if a download fails.
# Set PPOGA_VIRTUOSO_BUNDLE_ALL=1 to unpack every library of the closure (except libc6), as a
# machine with none of them would need; used to check the script against a bare image.
#
# Prints, on its last lines:
#   VIRTUOSO_HOME=<DEST>
#   virtuoso-t=<DEST>/usr/bin/virtuoso-t
#   isql-vt=<DEST>/usr/bin/isql-vt
#   LD_LIBRARY_PATH=<the folders to put on LD_LIBRARY_PATH>
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${repo_root}/.tools/virtuoso}"
package="virtuoso-opensource-7-bin"
marker="${dest}/.complete"

lib_dirs() {
    local dir
    for dir in "$1/usr/lib/x86_64-linux-gnu" "$1/lib/x86_64-linux-gnu" "$1/usr/lib" "$1/lib"; do
        [ -d "${dir}" ] && printf '%s:' "${dir}"
    done
    return 0
}

missing_libs() {
    # Prints "binary: library" for every shared library ldd cannot resolve.
    local libpath bin
    libpath="$(lib_dirs "$1")"
    for bin in virtuoso-t isql-vt; do
        LD_LIBRARY_PATH="${libpath%:}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" ldd "$1/usr/bin/${bin}" \
            | awk -v b="${bin}" '/not found/ {print b ": " $1}'
    done
}

report() {
    local libpath
    libpath="$(lib_dirs "${dest}")"
    echo "VIRTUOSO_HOME=${dest}"
    echo "virtuoso-t=${dest}/usr/bin/virtuoso-t"
    echo "isql-vt=${dest}/usr/bin/isql-vt"
    echo "LD_LIBRARY_PATH=${libpath%:}"
}

if [ -f "${marker}" ] && [ -x "${dest}/usr/bin/virtuoso-t" ] && [ -z "$(missing_libs "${dest}")" ]; then
    report
    exit 0
fi

for tool in apt-get apt-cache dpkg dpkg-query ldd; do
    command -v "${tool}" >/dev/null || { echo "setup_virtuoso: '${tool}' not found; this needs a Debian/Ubuntu machine." >&2; exit 1; }
done

# Which packages to fetch: the binary package plus the libraries of its dependency closure that
# this machine does not have (all of them but libc6 with PPOGA_VIRTUOSO_BUNDLE_ALL=1).
closure() {
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "${package}" | grep -v '^[ <]' | sort -u
}
if ! apt-cache show "${package}" >/dev/null 2>&1; then
    echo "setup_virtuoso: ${package} unknown to apt; running apt-get update" >&2
    apt-get update -qq
fi
wanted=("${package}")
while read -r name; do
    case "${name}" in
        lib*) ;;
        *) continue ;;
    esac
    [ "${name}" = "libc6" ] && continue
    if [ "${PPOGA_VIRTUOSO_BUNDLE_ALL:-0}" != "1" ] \
        && [ "$(dpkg-query -W -f='${db:Status-Status}' "${name}" 2>/dev/null || true)" = "installed" ]; then
        continue
    fi
    wanted+=("${name}")
done < <(closure)

staging="$(mktemp -d "${TMPDIR:-/tmp}/ppoga-virtuoso-debs.XXXXXX")"
trap 'rm -rf "${staging}"' EXIT
# apt-get download writes into the working directory; the _apt user may not write there, so let
# root download unsandboxed without the warning.
if ! (cd "${staging}" && apt-get download -qq -o APT::Sandbox::User=root "${wanted[@]}" >/dev/null); then
    echo "setup_virtuoso: download failed; running apt-get update and retrying" >&2
    apt-get update -qq
    (cd "${staging}" && apt-get download -qq -o APT::Sandbox::User=root "${wanted[@]}" >/dev/null)
fi

rm -rf "${dest}.partial"
mkdir -p "${dest}.partial"
for deb in "${staging}"/*.deb; do
    dpkg -x "${deb}" "${dest}.partial"
    basename "${deb}" >>"${dest}.partial/.packages"
done

problems="$(missing_libs "${dest}.partial")"
if [ -n "${problems}" ]; then
    echo "setup_virtuoso: unpacked into ${dest}.partial but these libraries are still missing:" >&2
    echo "${problems}" >&2
    echo "Install them (apt-get install <package>) or rerun with PPOGA_VIRTUOSO_BUNDLE_ALL=1." >&2
    exit 1
fi

rm -rf "${dest}"
mv "${dest}.partial" "${dest}"
touch "${marker}"
echo "setup_virtuoso: unpacked $(wc -l <"${dest}/.packages") package(s) into ${dest}" >&2
report
