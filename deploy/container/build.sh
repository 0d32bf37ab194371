#!/usr/bin/env bash
# Assembles Switchyard's container image from a local binary with buildah, pulling no base image: the image holds
# the binary, the shared libraries it loads (as `ldd` lists them, the dynamic loader included), the system's CA
# certificates, a non-root user, a writable data directory and the configuration of deploy/container/switchyard.toml
# — the same image, to its user, paths and settings, as deploy/container/Dockerfile builds.
#
#   deploy/container/build.sh [BINARY] [IMAGE]
#
# BINARY: default target/release/switchyard (`cargo build --release --locked` makes it).
# IMAGE:  default localhost/switchyard:latest.
# Needs buildah, run as root (or inside `buildah unshare`).
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BINARY="${1:-$ROOT/target/release/switchyard}"
IMAGE="${2:-localhost/switchyard:latest}"
# The Dockerfile's user; a fixed number, so volumes and Kubernetes' runAsUser agree with it.
USER_ID=10001
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# Docker's image format: the OCI one has no health check.
export BUILDAH_FORMAT=docker

need buildah "Debian: apt-get install buildah"
need ldd "Debian: libc-bin"
[[ -x "$BINARY" ]] || fail "no binary at $BINARY (build it: cargo build --release --locked)"
VERSION="$("$BINARY" --version)" || fail "$BINARY --version failed: it does not run here"
VERSION="${VERSION#switchyard }"

umask 022
ROOTFS="$(mktemp -d "${TMPDIR:-/tmp}/switchyard-rootfs.XXXXXX")"
# The staging directory becomes the image's root directory.
chmod 0755 "$ROOTFS"
container=""
cleanup() {
    [[ -n "$container" ]] && buildah rm "$container" >/dev/null 2>&1
    rm -rf "$ROOTFS"
}
trap cleanup EXIT

# Each file at the path the binary asks for, its content followed through symbolic links.
place() {
    local source="$1" target="$2"
    install -D -m "$(stat -L -c %a "$source")" "$(readlink -f "$source")" "$ROOTFS$target"
}

place "$BINARY" /usr/local/bin/switchyard
# The release profile's line tables (debug = 1) are most of the binary; symbols stay, for backtraces.
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$ROOTFS/usr/local/bin/switchyard"
fi
# `ldd` prints "name => /path (address)" for a library and "/path (address)" for the loader; a binary built
# statically has neither, and needs none.
libraries="$(ldd "$BINARY" 2>/dev/null | grep -oE '/[^ ]+' || true)"
for library in $libraries; do
    place "$library" "$library"
done
if [[ -f "$CA_BUNDLE" ]]; then
    place "$CA_BUNDLE" "$CA_BUNDLE"
else
    printf 'build.sh: warning: no %s here; backends over HTTPS will not be trusted in the image\n' "$CA_BUNDLE" >&2
fi
install -D -m 0644 "$ROOT/deploy/container/switchyard.toml" "$ROOTFS/etc/switchyard/switchyard.toml"
mkdir -p "$ROOTFS/etc"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nswitchyard:x:%d:%d:Switchyard:/var/lib/switchyard:/usr/sbin/nologin\n' \
    "$USER_ID" "$USER_ID" >"$ROOTFS/etc/passwd"
printf 'root:x:0:\nswitchyard:x:%d:\n' "$USER_ID" >"$ROOTFS/etc/group"
# Names of backends and identity providers resolve through /etc/hosts, then DNS (the runtime mounts both files).
printf 'hosts: files dns\n' >"$ROOTFS/etc/nsswitch.conf"
install -d -m 1777 "$ROOTFS/tmp"
install -d -m 0700 -o "$USER_ID" -g "$USER_ID" "$ROOTFS/var/lib/switchyard"

container="$(buildah from scratch)"
# Copied through a mount so that ownership and modes stay as staged (the data directory the user's).
mountpoint="$(buildah mount "$container")"
cp -a "$ROOTFS/." "$mountpoint/"
buildah umount "$container" >/dev/null
buildah config \
    --user "$USER_ID:$USER_ID" \
    --env SWITCHYARD_CONFIG=/etc/switchyard/switchyard.toml \
    --workingdir /var/lib/switchyard \
    --volume /var/lib/switchyard \
    --port 8808/tcp \
    --entrypoint '["/usr/local/bin/switchyard"]' \
    --cmd 'serve --listen 0.0.0.0:8808' \
    --healthcheck 'CMD /usr/local/bin/switchyard healthcheck' \
    --healthcheck-interval 10s --healthcheck-timeout 6s --healthcheck-start-period 10s --healthcheck-retries 3 \
    --label org.opencontainers.image.title=switchyard \
    --label "org.opencontainers.image.description=An MCP gateway: one Streamable HTTP endpoint in front of many MCP servers" \
    --label "org.opencontainers.image.version=$VERSION" \
    "$container"
buildah commit --quiet --format docker "$container" "$IMAGE" >/dev/null
printf 'built %s (switchyard %s)\n' "$IMAGE" "$VERSION"
