#!/usr/bin/env bash
# Proves the Debian package on a machine without Swift: makes a minimal Debian root with
# debootstrap, installs the package in it with apt (which brings its dependencies), and there,
# with no Swift anywhere, runs `countdown --version`, `start`, `list`, `run` until an expiry,
# `serve` answering /healthz, and `doctor`. Fails if the binary links to anything of the Swift
# toolchain or anything is missing. Needs root (chroot, mount) and Debian's mirror.
#
# Usage: Packaging/test-without-swift.sh PACKAGE.deb [--root DIR] [--suite bookworm]
#   --root DIR     the folder for the Debian root (default: a new temporary folder, removed
#                  afterwards); an existing root made by an earlier run is reused
#   --suite NAME   the Debian release (default: the one this machine runs, else bookworm)
set -euo pipefail

deb=""
root=""
suite=$( (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)
suite=${suite:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
while [ $# -gt 0 ]; do
    case "$1" in
        --root) root=$2; shift 2 ;;
        --suite) suite=$2; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "test-without-swift.sh: unknown option '$1'" >&2; exit 64 ;;
        *) deb=$1; shift ;;
    esac
done
[ -f "$deb" ] || { echo "test-without-swift.sh: give the .deb to test (not found: '$deb')" >&2; exit 64; }
[ "$(id -u)" -eq 0 ] || { echo "test-without-swift.sh: needs root (debootstrap, chroot)" >&2; exit 77; }
command -v debootstrap >/dev/null 2>&1 || { echo "test-without-swift.sh: needs debootstrap" >&2; exit 69; }

cleanup_root=false
if [ -z "$root" ]; then
    root=$(mktemp -d /tmp/countdown-debian.XXXXXX)
    cleanup_root=true
fi
# The root's own folder is the chroot's `/`: every user must be able to enter it (mktemp made it
# 0700, and then nothing but root could load even the C library there).
chmod 0755 "$root"
mounted=false
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    if $mounted; then umount -l "$root/proc" 2>/dev/null || true; fi
    if $cleanup_root; then rm -rf "$root"; fi
}
trap cleanup EXIT

step() { echo "==> $*"; }
fail() { echo "test-without-swift.sh: $*" >&2; exit 1; }

if [ ! -x "$root/usr/bin/apt-get" ]; then
    step "debootstrap --variant=minbase $suite into $root"
    timeout 900 debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$root.debootstrap.log" 2>&1 \
        || { tail -20 "$root.debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
fi
mount -t proc proc "$root/proc"
mounted=true

# Inside the root: a clean environment, nothing of this machine's PATH or Swift.
inside() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

step "no Swift in the root"
if inside sh -c 'command -v swift || ls -d /opt/swift* /usr/lib/swift* 2>/dev/null' ; then
    fail "the root has Swift (above): it proves nothing"
fi

step "apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/countdown.deb"
inside sh -c 'timeout 600 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq /tmp/countdown.deb' \
    > "$root/tmp/install.log" 2>&1 || { tail -30 "$root/tmp/install.log" >&2; fail "installing the package failed"; }

step "what the binary links to"
inside ldd /usr/bin/countdown | tee "$root/tmp/ldd.txt"
if grep -E 'not found|swift' "$root/tmp/ldd.txt"; then fail "the binary links to something missing or of Swift (above)"; fi
inside getent passwd countdown >/dev/null || fail "the package made no countdown user"
[ -d "$root/var/lib/countdown" ] || fail "the package made no /var/lib/countdown"
for file in /usr/share/man/man1/countdown.1.gz /usr/share/bash-completion/completions/countdown \
    /usr/share/zsh/vendor-completions/_countdown /usr/share/fish/vendor_completions.d/countdown.fish \
    /lib/systemd/system/countdown.service /lib/systemd/system/countdown-serve.service /etc/default/countdown; do
    [ -f "$root$file" ] || fail "the package has no $file"
done

step "systemd-analyze verify: the units as systemd reads them"
inside sh -c 'DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends systemd' \
    > "$root/tmp/systemd.log" 2>&1 || { tail -20 "$root/tmp/systemd.log" >&2; fail "installing systemd failed"; }
verified=$(inside systemd-analyze verify --man=no countdown.service countdown-serve.service 2>&1) \
    || fail "systemd-analyze refused the units: $verified"
# An unknown or misspelt setting is only a message: any message fails.
[ -z "$verified" ] || fail "systemd-analyze found problems in the units: $verified"

step "countdown --version"
version=$(inside countdown --version)
echo "    $version"
echo "$version" | grep -Eq '^countdown [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{40}(-modified)?\)$' \
    || fail "unexpected --version: $version"

db=/var/lib/countdown/test.sqlite
user_command=(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/countdown LANG=C.UTF-8
    setpriv --reuid=countdown --regid=countdown --init-groups env COUNTDOWN_DB=$db)
as_user() { "${user_command[@]}" "$@"; }

step "start, list"
rm -f "$root$db" "$root$db-wal" "$root$db-shm"  # a root reused from an earlier run
as_user countdown start order-2 1h --group payments
as_user countdown start order-1 4s --group payments
as_user countdown list | tee "$root/tmp/list.txt"
grep -q order-1 "$root/tmp/list.txt" && grep -q order-2 "$root/tmp/list.txt" || fail "list does not show both"

step "run until order-1 expires"
as_user sh -c 'countdown run > /tmp/run.out 2> /tmp/run.err & pid=$!
    for _ in $(seq 1 300); do grep -q order-1 /tmp/run.out && break; sleep 0.1; done
    kill -TERM $pid; wait $pid'
expiry=$(head -n 1 "$root/tmp/run.out")
echo "    $expiry"
echo "$expiry" | grep -q '"event":"expired"' && echo "$expiry" | grep -q '"key":"order-1"' \
    || { cat "$root/tmp/run.err" >&2; fail "countdown run printed no expiry of order-1 within 30 s"; }

step "serve, /healthz"
# Not through a function: $! is then the server itself (chroot, env and setpriv exec it).
"${user_command[@]}" countdown serve --port 0 > "$root/tmp/serve.out" 2> "$root/tmp/serve.err" &
server_pid=$!
port=""
for _ in $(seq 1 300); do
    port=$(sed -n 's|^countdown serve: http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$root/tmp/serve.out")
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$port" ] || { cat "$root/tmp/serve.err" >&2; fail "countdown serve did not start listening within 30 s"; }
health=$(timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3; cat <&3")
echo "$health" | head -1
echo "$health" | head -1 | grep -q ' 200 ' || fail "/healthz did not answer 200: $health"
kill -TERM "$server_pid"
for _ in $(seq 1 150); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server_pid" 2>/dev/null; then fail "countdown serve did not stop within 15 s of SIGTERM"; fi
wait "$server_pid" || fail "countdown serve exited with status $? after SIGTERM: $(cat "$root/tmp/serve.err")"
server_pid=""

step "doctor"
as_user countdown doctor | tee "$root/tmp/doctor.txt"
grep -q '^version' "$root/tmp/doctor.txt" || fail "doctor names no version"

step "remove and purge"
inside sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq countdown' > "$root/tmp/purge.log" 2>&1 \
    || { cat "$root/tmp/purge.log" >&2; fail "purging the package failed"; }
[ ! -e "$root/usr/bin/countdown" ] || fail "the binary is still there after purge"
[ -f "$root$db" ] || fail "purging removed the store"

echo "==> the package works on Debian $suite without Swift"
