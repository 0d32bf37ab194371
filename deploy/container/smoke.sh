#!/usr/bin/env bash
# The container's smoke test, as CI runs it: builds the image with build.sh from a local binary, checks that it
# is configured as deploy/container/Dockerfile says (same_image.py), runs it with podman, waits for /healthz,
# runs the image's own health check command, calls the demo backend's `echo` tool through /mcp (initialize,
# notifications/initialized, tools/call) and checks the answer, then stops and removes the container and the
# image.
#
#   deploy/container/smoke.sh [BINARY]      (default target/release/switchyard)
#
# Needs buildah, podman, runc and curl, as root. The container shares the host's network and the gateway listens
# on a free loopback port (no port mapping, no firewall rules); it runs under runc with no default ulimits, which
# also works where crun or raising limits is not permitted (nested containers, hybrid cgroups).
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BINARY="${1:-$ROOT/target/release/switchyard}"
IMAGE="localhost/switchyard:smoke-$$"
NAME="switchyard-smoke-$$"
# A Python with the `dockerfile` package (deploy/requirements.txt; scripts/test installs it there).
DEPLOY_PYTHON="${DEPLOY_PYTHON:-$VENV/bin/python}"

# fail (deploy/lib.sh) shows the container's log after its message.
on_fail() {
    if podman container exists "$NAME" 2>/dev/null; then
        printf -- '--- container log ---\n' >&2
        podman logs "$NAME" >&2 2>&1 || true
    fi
}
for command in buildah podman runc curl python3; do
    need "$command"
done
[[ -x "$DEPLOY_PYTHON" ]] || fail "no $DEPLOY_PYTHON (pip install -r deploy/requirements.txt into target/deploy-venv)"

CONTAINERS_CONF="$(mktemp "${TMPDIR:-/tmp}/switchyard-containers.XXXXXX.conf")"
printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"
export CONTAINERS_CONF
podman() { command podman --runtime runc "$@"; }
cleanup() {
    podman rm --force --time 5 "$NAME" >/dev/null 2>&1 || true
    podman rmi --force "$IMAGE" >/dev/null 2>&1 || true
    rm -f "$CONTAINERS_CONF"
}
trap cleanup EXIT

"$ROOT/deploy/container/build.sh" "$BINARY" "$IMAGE" || fail "build.sh"

# The image is configured as the Dockerfile's (user, volume, port, health check, entrypoint, ...).
podman image inspect "$IMAGE" | "$DEPLOY_PYTHON" "$ROOT/deploy/container/same_image.py" "$ROOT/deploy/container/Dockerfile" ||
    fail "the image differs from deploy/container/Dockerfile"

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"
# --no-healthcheck: podman schedules health checks with systemd timers, absent here; the check runs below.
podman run --detach --name "$NAME" --network host --no-healthcheck "$IMAGE" \
    serve --listen "127.0.0.1:$PORT" >/dev/null || fail "podman run"

for _ in $(seq 1 100); do
    curl -fsS "$BASE/healthz" >/dev/null 2>&1 && break
    [[ "$(podman inspect --format '{{.State.Running}}' "$NAME")" == true ]] || fail "the container stopped"
    sleep 0.2
done
curl -fsS "$BASE/healthz" >/dev/null || fail "no /healthz at $BASE within 20 s"
podman exec "$NAME" /usr/local/bin/switchyard healthcheck --url "$BASE/healthz" >/dev/null ||
    fail "the image's health check command failed"

headers="$(mktemp "${TMPDIR:-/tmp}/switchyard-smoke-headers.XXXXXX")"
trap 'rm -f "$headers"; cleanup' EXIT
post() {
    curl -sS --max-time 20 -X POST "$BASE/mcp" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' "$@"
}
post -D "$headers" -o /dev/null -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"smoke","version":"1"}}}' ||
    fail "initialize"
session="$(awk -F': *' 'tolower($1) == "mcp-session-id" { sub(/\r$/, "", $2); print $2 }' "$headers")"
[[ -n "$session" ]] || fail "initialize gave no Mcp-Session-Id"
protocol=(-H "Mcp-Session-Id: $session" -H 'MCP-Protocol-Version: 2025-11-25')
post "${protocol[@]}" -o /dev/null -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' ||
    fail "notifications/initialized"
answer="$(post "${protocol[@]}" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"hello from the container"}}}')" ||
    fail "tools/call"
# The answer is JSON or one SSE event holding it.
text="$(printf '%s\n' "$answer" | sed -n 's/^data: //p; /^{/p' | python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["result"]["content"][0]["text"])')" ||
    fail "tools/call answered: $answer"
[[ "$text" == "hello from the container" ]] || fail "echo answered '$text'"

# SIGTERM: shutdown_grace (5 s, not ready but serving), then the drain; the SIGKILL must come well after both.
podman stop --time 30 "$NAME" >/dev/null || fail "podman stop"
status="$(podman inspect --format '{{.State.ExitCode}}' "$NAME")"
[[ "$status" == 0 ]] || fail "the gateway exited with status $status on SIGTERM"
printf 'container smoke test passed: %s served tools/call demo__echo and stopped cleanly\n' "$IMAGE"
