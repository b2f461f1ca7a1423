#!/usr/bin/env bash
# Builds the `countdown` tool for servers without Swift, and lays out what is shipped:
#
#   countdown-VERSION-linux-ARCH.tar.gz        the binary, its man page, completions for bash, zsh
#                                              and fish, README, LICENSE and CHANGELOG
#   countdown-VERSION-linux-ARCH.debug         the binary's debug symbols, for crash reports
#   countdown_VERSION_DEBARCH.deb              the Debian package, with the systemd units
#   SHA256SUMS
#
# The Swift runtime and Foundation are linked into the binary (--static-swift-stdlib): it needs
# only the C library and libsqlite3 at run time, which this script checks (readelf), with the
# package checked by lintian when it is installed.
#
# Usage: Packaging/build-release.sh [--output DIR] [--configuration release|debug]
#   --output DIR          where the files go (default: .build/artifacts)
#   --configuration C     release (the default: what is shipped), or debug (a quick check of the
#                         packaging itself, reusing a debug build)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
output="$root/.build/artifacts"
configuration=release
while [ $# -gt 0 ]; do
    case "$1" in
        --output) output=$2; shift 2 ;;
        --configuration) configuration=$2; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-release.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
done
case "$configuration" in
    release|debug) ;;
    *) echo "build-release.sh: invalid --configuration '$configuration': give release or debug" >&2; exit 64 ;;
esac
for tool in swift gcc readelf objdump objcopy strip dpkg-deb dpkg gzip tar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || { echo "build-release.sh: '$tool' is needed and not installed" >&2; exit 69; }
done
cd "$root"

version=$(sed -n 's/^ *public static let version = "\([0-9.]*\)"$/\1/p' Sources/CountdownStoreCore/Version.swift)
[ -n "$version" ] || { echo "build-release.sh: no version in Sources/CountdownStoreCore/Version.swift" >&2; exit 1; }
arch=$(uname -m)
debian_arch=$(dpkg --print-architecture)
name="countdown-$version-linux-$arch"
# Dates in the archives are the commit's, so that the same commit gives the same files.
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH=$epoch

echo "==> building countdown $version ($configuration, Swift runtime linked in)"
# The Swift runtime and Foundation linked in; the C++ runtime and libgcc's unwinder too (the
# BoringSSL of PostgreSQL's TLS is C++): a folder holding only the static libstdc++, searched
# before the system's, stands for the -lstdc++ SwiftPM adds. No run path: nothing is looked for
# beside the binary.
static_libs="$root/.build/static-libs"
mkdir -p "$static_libs"
ln -sf "$(gcc -print-file-name=libstdc++.a)" "$static_libs/libstdc++.a"
build_flags=(-c "$configuration" --static-swift-stdlib --disable-local-rpath
    -Xswiftc -Xclang-linker -Xswiftc -static-libgcc -Xlinker "-L$static_libs"
    -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now)
swift build "${build_flags[@]}" --product countdown
binary="$(swift build "${build_flags[@]}" --show-bin-path)/countdown"

echo "==> checking what it needs at run time"
# Only the C library (with its libm, libdl, libpthread, librt) and libsqlite3; nothing of the
# Swift toolchain, and no run path into it.
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort)
echo "$needed" | sed 's/^/    /'
allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libutil\.so\.1|ld-linux[-a-z0-9_.]*\.so\.[0-9]+|libsqlite3\.so\.0)$'
unexpected=$(echo "$needed" | grep -Ev "$allowed" || true)
if [ -n "$unexpected" ]; then
    echo "build-release.sh: the binary needs libraries other than the C library and libsqlite3:" >&2
    echo "$unexpected" >&2
    exit 1
fi
if readelf -d "$binary" | grep -E '\((RUNPATH|RPATH)\)'; then
    echo "build-release.sh: the binary has a run path (above): it would look for libraries in the build machine's folders" >&2
    exit 1
fi
# The newest versioned symbol of each library, for the package's dependencies.
newest_symbol() {
    objdump -T "$binary" | grep -o "$1_[0-9][0-9.]*" | sed "s/$1_//" | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1
}
glibc=$(newest_symbol GLIBC)
echo "    needs glibc $glibc or later, and libsqlite3"

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$output"

echo "==> stripping (debug symbols kept apart in $name.debug)"
objcopy --only-keep-debug "$binary" "$output/$name.debug"
chmod 0644 "$output/$name.debug"
stripped="$staging/countdown"
strip --strip-all --remove-section=.comment --remove-section=.note -o "$stripped" "$binary"
objcopy --add-gnu-debuglink="$output/$name.debug" "$stripped"
chmod 0755 "$stripped"

echo "==> the man page, from the same help text as --help"
# swift-argument-parser's generate-manual (the tool its GenerateManual plugin runs) reads the
# binary's own description of its commands. Built here by itself: the plugin would build every
# product of the package again, without the flags above.
parser="$root/.build/checkouts/swift-argument-parser"
[ -d "$parser" ] || { echo "build-release.sh: no swift-argument-parser checkout in .build/checkouts" >&2; exit 1; }
swift build --package-path "$parser" --scratch-path "$root/.build/generate-manual" -c release \
    --product generate-manual
manual="$staging/manual"
mkdir -p "$manual"
date=$(date -u -d "@$epoch" +%Y-%m-%d)
"$root/.build/generate-manual/release/generate-manual" "$stripped" --output-directory "$manual" \
    --date "$date" --section 1 --authors "The CountdownStore authors"
# An empty line in mdoc is a paragraph break groff warns about: said as one.
sed 's/^$/.Pp/' "$manual/countdown.1" > "$staging/countdown.1"

echo "==> completions"
# bash-completion sources its files: no interpreter line.
"$stripped" --generate-completion-script bash | sed '1{/^#!/d}' > "$staging/countdown.bash"
"$stripped" --generate-completion-script zsh > "$staging/_countdown"
"$stripped" --generate-completion-script fish > "$staging/countdown.fish"
"$stripped" --version

echo "==> $name.tar.gz"
tree="$staging/$name"
install -D -m 0755 "$stripped" "$tree/bin/countdown"
install -D -m 0644 "$staging/countdown.1" "$tree/share/man/man1/countdown.1"
install -D -m 0644 "$staging/countdown.bash" "$tree/share/bash-completion/completions/countdown"
install -D -m 0644 "$staging/_countdown" "$tree/share/zsh/site-functions/_countdown"
install -D -m 0644 "$staging/countdown.fish" "$tree/share/fish/vendor_completions.d/countdown.fish"
install -m 0644 README.md LICENSE CHANGELOG.md "$tree/"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$staging" -czf "$output/$name.tar.gz" "$name"

deb="countdown_${version}_${debian_arch}.deb"
echo "==> $deb"
package="$staging/deb"
install -D -m 0755 "$stripped" "$package/usr/bin/countdown"
install -d -m 0755 "$package/usr/share/man/man1"
gzip -9n < "$staging/countdown.1" > "$package/usr/share/man/man1/countdown.1.gz"
chmod 0644 "$package/usr/share/man/man1/countdown.1.gz"
install -D -m 0644 "$staging/countdown.bash" "$package/usr/share/bash-completion/completions/countdown"
install -D -m 0644 "$staging/_countdown" "$package/usr/share/zsh/vendor-completions/_countdown"
install -D -m 0644 "$staging/countdown.fish" "$package/usr/share/fish/vendor_completions.d/countdown.fish"
install -D -m 0644 Packaging/systemd/countdown.service "$package/lib/systemd/system/countdown.service"
install -D -m 0644 Packaging/systemd/countdown-serve.service "$package/lib/systemd/system/countdown-serve.service"
install -D -m 0644 Packaging/debian/default "$package/etc/default/countdown"
install -D -m 0644 Packaging/debian/copyright "$package/usr/share/doc/countdown/copyright"
gzip -9n < README.md > "$package/usr/share/doc/countdown/README.md.gz"
gzip -9n < CHANGELOG.md > "$package/usr/share/doc/countdown/CHANGELOG.md.gz"
# A native package's changelog, in Debian's format, pointing at the project's own.
{
    echo "countdown ($version) unstable; urgency=medium"
    echo
    echo "  * countdown $version: see /usr/share/doc/countdown/CHANGELOG.md.gz."
    echo
    echo " -- $(sed -n 's/^Maintainer: //p' Packaging/debian/control)  $(LC_ALL=C date -u -R -d "@$epoch")"
} | gzip -9n > "$package/usr/share/doc/countdown/changelog.gz"
chmod 0644 "$package"/usr/share/doc/countdown/*
install -d -m 0755 "$package/DEBIAN"
size_kib=$(du -k -s --exclude=DEBIAN "$package" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$debian_arch/" -e "s/@GLIBC@/$glibc/" -e "s/@SIZE@/$size_kib/" \
    Packaging/debian/control > "$package/DEBIAN/control"
install -m 0755 Packaging/debian/postinst Packaging/debian/prerm Packaging/debian/postrm "$package/DEBIAN/"
echo "/etc/default/countdown" > "$package/DEBIAN/conffiles"
(cd "$package" && find usr lib etc -type f ! -path 'etc/*' -print0 | sort -z | xargs -0 md5sum) > "$package/DEBIAN/md5sums"
chmod 0644 "$package/DEBIAN/control" "$package/DEBIAN/conffiles" "$package/DEBIAN/md5sums"
find "$package" -type d -exec chmod 0755 {} +
dpkg-deb --root-owner-group -Zxz --build "$package" "$output/$deb" >/dev/null

if command -v lintian >/dev/null 2>&1; then
    echo "==> lintian"
    lintian --fail-on error --display-info "$output/$deb"
fi

(cd "$output" && sha256sum "$name.tar.gz" "$name.debug" "$deb" > SHA256SUMS)
echo "==> done, in $output:"
(cd "$output" && ls -l "$name.tar.gz" "$name.debug" "$deb" SHA256SUMS | awk '{ printf "    %12d  %s\n", $5, $9 }')
echo "    binary $(stat -c %s "$stripped") bytes stripped, $(stat -c %s "$binary") before"
