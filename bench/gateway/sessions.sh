#!/usr/bin/env bash
# Many agent sessions: SESSIONS agent sessions opened on the gateway, each with one `tools/call` so that each gets
# its own backend session (the bench backend over HTTP by default), then the gateway's RSS and how long opening
# them took. The backend counts the sessions the gateway opened and ended (`GET /stats`), so the line also says how
# many backend sessions the gateway still holds.
#
#   bench/gateway/sessions.sh                         # 10 000 sessions, 64 at a time
#   SESSIONS=200 CONCURRENCY=8 bench/gateway/sessions.sh
#
# Environment: SESSIONS (10000), CONCURRENCY (64 sessions opened at once, each worker on its own keep-alive
# connection), SUMMARY=FILE (append the figures as one key=value line), and those of lib.sh (SERVER defaults to
# fast here; LEDGER, AUTH, NO_BUILD, BIN, NICE, WAIT_IDLE, GATEWAY_ENV, KEEP). The gateway's
# backend session table (max_backend_sessions) and max_backend_sessions_per_principal are raised to TABLE_SIZE
# (SESSIONS by default), because every session here belongs to one principal and each keeps its backend session. Traffic stays on 127.0.0.1; everything started is
# stopped on exit.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SERVER="${SERVER:-fast}"
source "$HERE/lib.sh"
SESSIONS="${SESSIONS:-10000}"
CONCURRENCY="${CONCURRENCY:-64}"
TABLE_SIZE="${TABLE_SIZE:-$SESSIONS}"
GATEWAY_SERVER_TOML="max_backend_sessions = $TABLE_SIZE
max_backend_sessions_per_principal = $TABLE_SIZE
${GATEWAY_SERVER_TOML:-}"
[[ "$SERVER" == fast && "$BACKEND" == http ]] || { echo "sessions.sh counts backend sessions: needs SERVER=fast BACKEND=http" >&2; exit 2; }

build_if_needed
[[ -x "$BENCH_SESSIONS" ]] || { echo "no session opener at $BENCH_SESSIONS (cargo build --release --example bench_sessions)" >&2; exit 2; }
check_idle
start_targets

STATS_URL="${DIRECT_URL%/mcp}/stats"
backend_stat() { curl -sS "$STATS_URL" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
opened0="$(backend_stat sessions_opened)"; deleted0="$(backend_stat sessions_deleted)"
rss0="$(rss_kib "$GW_PID")"
echo "opening $SESSIONS sessions, $CONCURRENCY at a time" >&2
line="$(SY_AUTHORIZATION="$GW_AUTHORIZATION" "${PRIO[@]}" "$BENCH_SESSIONS" "$GW_URL" "$GW_TOOL" "$SESSIONS" "$CONCURRENCY")"
seconds="$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")"
sleep 1  # the gateway ends the sessions it evicts with a DELETE in the background
rss1="$(rss_kib "$GW_PID")"; hwm="$(hwm_kib "$GW_PID")"
opened=$(( $(backend_stat sessions_opened) - opened0 )); deleted=$(( $(backend_stat sessions_deleted) - deleted0 ))

awk -v n="$SESSIONS" -v s="$seconds" -v rss0="$rss0" -v rss1="$rss1" -v hwm="$hwm" -v opened="$opened" \
    -v deleted="$deleted" -v table="$TABLE_SIZE" -v ledger="$LEDGER" -v auth="$AUTH" -v summary="${SUMMARY:-}" 'BEGIN {
    printf "%d agent sessions (initialize + one call each; fast backend over HTTP, %s ledger, auth %s): opened in %.2f s (%.0f sessions/s); gateway RSS %.1f MiB before, %.1f MiB after (%+.1f KiB per session), peak %.1f MiB; backend sessions opened %d, ended by the gateway %d, held at the end %d (the gateway holds at most %d)\n", \
        n, ledger, auth, s, n / s, rss0 / 1024, rss1 / 1024, (rss1 - rss0) / n, hwm / 1024, opened, deleted, opened - deleted, table
    if (summary != "") printf "sessions=%d seconds=%s rss0_kib=%d rss1_kib=%d hwm_kib=%d opened=%d deleted=%d\n", \
        n, s, rss0, rss1, hwm, opened, deleted >> summary
}'
