#!/usr/bin/env bash
# Memory per live stdio session: the gateway with `switchyard demo-server --stdio` as a per-agent stdio backend,
# N agent sessions each holding its own backend process (one echo call each), then the gateway's RSS and the
# summed RSS of its child processes, per session.
#
#   SESSIONS=50 bench/gateway/stdio_sessions.sh      (NO_BUILD=1 and BIN as for run.sh)
#
# Traffic stays on 127.0.0.1; everything started is stopped on exit (the children with the gateway).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BACKEND=stdio
source "$HERE/lib.sh"
SESSIONS="${SESSIONS:-50}"

build_if_needed
start_targets

children() { cat /proc/"$GW_PID"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -c . || true; }
children_rss_kib() {
    local total=0 pid
    for pid in $(cat /proc/"$GW_PID"/task/*/children 2>/dev/null); do
        total=$((total + $(rss_kib "$pid" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

before_gw="$(rss_kib "$GW_PID")"; before_children="$(children_rss_kib)"; before_count="$(children)"
for _ in $(seq 1 "$SESSIONS"); do
    session="$(open_session "$GW_URL")"
    probe "$GW_URL" "$session" "$GW_TOOL" || { echo "echo through a new session failed" >&2; exit 1; }
done
after_gw="$(rss_kib "$GW_PID")"; after_children="$(children_rss_kib)"; after_count="$(children)"

added=$((after_count - before_count))
echo "sessions opened: $SESSIONS; backend processes: $before_count -> $after_count (+$added)"
echo "gateway RSS: $before_gw KiB -> $after_gw KiB ($(( (after_gw - before_gw) / SESSIONS )) KiB per session)"
echo "children RSS: $before_children KiB -> $after_children KiB ($(( (after_children - before_children) / (added > 0 ? added : 1) )) KiB per process)"
