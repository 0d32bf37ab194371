#!/usr/bin/env bash
# Instructions the gateway executes per tools/call, counted by callgrind: repeatable whatever else the machine
# runs, so it can compare two builds where a wall-clock benchmark cannot (not a timed benchmark).
#
# The fast backend (examples/bench_backend.rs) runs natively; the gateway (memory ledger, anonymous agent) runs
# under `valgrind --tool=callgrind --trace-children=no`. One agent session, then CALLS sequential `fast__echo`
# calls on one keep-alive connection (bench/gateway/call.lua's request, a fresh id each), measured twice: with
# BASE calls and with CALLS calls. Per call = (Ir(CALLS) − Ir(BASE)) / (CALLS − BASE), so start-up, discovery and
# the session's handshake cancel out.
#
# EXTRA: TOML tables added to the gateway's configuration before its backend, to price a feature, e.g. a
# `[[limits]]` rate no call reaches: EXTRA=$'[[limits]]\nprincipals = ["*"]\nrate = "1000000/s"\n'.
#
# LEDGER: the gateway's `[ledger] url` (default `memory`); `sqlite` prices the durable default (the file in the
# run's scratch data_dir; its writer threads are counted with the rest of the process).
#
# PAD: that many `x` after the echo's `hello` (default 0), to price a larger result (what the ledger stores).
#
# Usage: BIN=<release switchyard> BACKEND_BIN=<release bench_backend> [CALLS=2000] [BASE=200] [EXTRA=…] [LEDGER=…] [PAD=…] callgrind.sh
# Prints: callgrind BIN=… calls=… base=… ir_calls=… ir_base=… ir_per_call=…
set -euo pipefail
BIN="${BIN:?the release switchyard binary}"
BACKEND_BIN="${BACKEND_BIN:?the release bench_backend binary}"
CALLS="${CALLS:-2000}"
BASE="${BASE:-200}"
EXTRA="${EXTRA:-}"
LEDGER="${LEDGER:-memory}"
WORK="$(mktemp -d /tmp/sy-callgrind.XXXXXX)"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Starts "$@" with stdout to $WORK/$1.out; waits for its address; sets URL and PID.
start() {
    local name="$1"; shift
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 1 600); do
        URL="$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$WORK/$name.out" | head -1 || true)"
        [[ -n "$URL" ]] && return 0
        kill -0 "$PID" 2>/dev/null || { cat "$WORK/$name.err" >&2; exit 1; }
        sleep 0.1
    done
    echo "$name did not report its address" >&2; exit 1
}

# One measurement: the gateway's total Ir after `calls` calls.
measure() {
    local calls="$1" out="$WORK/callgrind.$1"
    mkdir -p "$WORK/data.$calls"
    printf '[server]\ndata_dir = "%s"\n[ledger]\nurl = "%s"\n%s\n[[backends]]\nname = "fast"\nurl = "%s"\n' \
        "$WORK/data.$calls" "$LEDGER" "$EXTRA" "$BACKEND_URL" >"$WORK/gateway.$calls.toml"
    start "gateway.$calls" valgrind --tool=callgrind --trace-children=no --callgrind-out-file="$out" \
        "$BIN" serve --config "$WORK/gateway.$calls.toml" --listen 127.0.0.1:0
    local gateway_pid="$PID"
    python3 - "$URL" "$calls" "${PAD:-0}" <<'EOF'
import http.client, json, sys, time, urllib.parse
url, calls, text = urllib.parse.urlparse(sys.argv[1]), int(sys.argv[2]), "hello" + "x" * int(sys.argv[3])
base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25"}
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
def post(body, session=None):
    headers = dict(base, **({"Mcp-Session-Id": session} if session else {}))
    conn.request("POST", url.path, json.dumps(body), headers)
    response = conn.getresponse()
    return response, response.read()
init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "sy-callgrind", "version": "0"}}}
response, _ = post(init)
session = response.getheader("mcp-session-id")
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
def call(id):
    return post({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                 "params": {"name": "fast__echo", "arguments": {"text": text}}}, session)
for attempt in range(600):  # discovery runs in the background: wait until the tool is routed
    _, body = call(1)
    if b'"result"' in body and b"hello" in body and b'"isError":true' not in body:
        break
    time.sleep(0.1)
else:
    sys.exit("the gateway never routed fast__echo: %r" % body)
for n in range(calls):
    status, body = call(1000 + n)
    if status.status != 200 or b'"result"' not in body or b"hello" not in body:
        sys.exit("bad answer: %r" % body)
EOF
    kill -INT "$gateway_pid"
    wait "$gateway_pid" 2>/dev/null || true
    awk '/^summary:/ {print $2}' "$out"
}

start backend "$BACKEND_BIN" --listen 127.0.0.1:0
BACKEND_URL="$URL"
ir_base="$(measure "$BASE")"
ir_calls="$(measure "$CALLS")"
per_call=$(( (ir_calls - ir_base) / (CALLS - BASE) ))
echo "callgrind BIN=$BIN ledger=$LEDGER pad=${PAD:-0} calls=$CALLS base=$BASE ir_calls=$ir_calls ir_base=$ir_base ir_per_call=$per_call"
