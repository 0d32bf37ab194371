#!/usr/bin/env bash
# Where does the gateway spend its time? Same setup as run.sh (a server, SERVER=demo by default, and the gateway,
# one session each), then `perf record` (software cpu-clock sampling, DWARF call graphs) on the gateway process
# only while wrk drives the echo tool through it, and prints the top functions (self and inclusive).
#
#   bench/gateway/profile.sh                 # -t2 -c64, 10 s
#   CONNS=1 THREADS=1 bench/gateway/profile.sh
#   SESSIONS=64 THREADS=64 bench/gateway/profile.sh   # 64 agent sessions, wrk thread N on session N
#
# Environment: DURATION (10s), CONNS (64), THREADS (2), SESSIONS (1), FREQ (sampling Hz, 2000), NO_BUILD=1, KEEP=1 (keeps
# perf.data in the work directory for `perf report -i`), plus those of lib.sh.
# Needs perf (`apt-get install -y linux-perf`). Traffic goes to 127.0.0.1 only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/lib.sh"
CONNS="${CONNS:-64}"
THREADS="${THREADS:-2}"
FREQ="${FREQ:-2000}"
SESSIONS="${SESSIONS:-1}"
command -v perf >/dev/null || { echo "perf is missing: apt-get install -y linux-perf" >&2; exit 2; }

build_if_needed
check_idle
start_targets
echo "warm-up: $WARMUP" >&2
[[ "$SESSIONS" == 1 ]] || GW_SESSION="$(open_sessions "$GW_URL" "$GW_TOOL" "$SESSIONS")"
run_wrk warm-gateway "$GW_URL" "$GW_SESSION" "$GW_TOOL" 2 64 "$WARMUP" >/dev/null

secs="${DURATION%s}"
perf record -F "$FREQ" -e cpu-clock --call-graph dwarf,16384 -p "$GW_PID" -o "$WORK/perf.data" -- sleep "$((secs + 1))" \
    >"$WORK/perf-record.log" 2>&1 &
PERF_PID=$!
PIDS+=("$PERF_PID")
perf stat -e task-clock,context-switches,cpu-migrations -p "$GW_PID" -o "$WORK/perf-stat.txt" -- sleep "$((secs + 1))" \
    >/dev/null 2>&1 &
STAT_PID=$!
PIDS+=("$STAT_PID")
sleep 0.5
line="$(run_wrk profile-gateway "$GW_URL" "$GW_SESSION" "$GW_TOOL" "$THREADS" "$CONNS" "$DURATION")"
wait "$PERF_PID" || true
wait "$STAT_PID" || true
echo "$line" >&2
requests="$(field "$line" requests)"
echo "== gateway per call (perf stat over the run; a little longer than wrk) =="
awk -v n="$requests" '
    $2 == "msec" && $3 == "task-clock" {gsub(",", "", $1); printf "  CPU time          %8.1f µs per call\n", $1 * 1000 / n}
    $2 == "context-switches" || $2 == "cpu-migrations" {gsub(",", "", $1); printf "  %-16s  %8.2f per call\n", $2, $1 / n}
' "$WORK/perf-stat.txt"
echo

report() {
    perf report -i "$WORK/perf.data" --stdio --no-children --percent-limit 0.7 --sort "$1" -g none 2>/dev/null \
        | grep -v '^#' | sed '/^$/d' | head -"${2:-40}" || true
}
echo "== self time by function (top) =="
report symbol 45
echo
echo "== self time by shared object =="
report dso 10
echo
echo "== breakdown (phases, innermost meaningful frame) =="
perf script -i "$WORK/perf.data" -F comm,tid,time,ip,sym 2>/dev/null >"$WORK/perf-script.txt"
python3 "$HERE/breakdown.py" "$WORK/perf-script.txt" "$requests" "$FREQ" || true
echo
echo "== inclusive (children) time by function =="
perf report -i "$WORK/perf.data" --stdio --children --percent-limit 3 --sort symbol -g none 2>/dev/null \
    | grep -v '^#' | sed '/^$/d' | head -60 || true
