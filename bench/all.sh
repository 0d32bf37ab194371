#!/usr/bin/env bash
# The call-path benchmark in one command: the minimal bench backend (examples/bench_backend.rs) called directly
# and through Switchyard, at 1 and 64 connections, once per row, then SESSIONS agent sessions; prints one
# markdown table (ratios against the direct baseline measured in the same run as each row) plus the idle, the
# interference and the sessions lines, ready for BENCHMARKS.md.
#
#   bench/all.sh                                          # 10 s per measurement, 1 round, 10 000 sessions
#   NICE=-10 ROUNDS=1 DURATION=5s WAIT_IDLE=20 RETRY_BUSY=1 bench/all.sh
#   DURATION=1s WARMUP=1s IDLE=2 SESSIONS=200 bench/all.sh   # a quick check that every row works
#
# Rows (ROWS selects and orders them; default all): memory, sqlite, postgres (the ledger, with the backend over
# HTTP and no agent authentication), stdio (the backend as a stdio process), apikey and jwt (authenticated agents);
# stdio, apikey and jwt use the SQLite ledger, the gateway's default, so each differs from the sqlite row in one
# thing. Each row is one bench/gateway/run.sh; SESSIONS=0 skips bench/gateway/sessions.sh. Every knob of run.sh
# (DURATION, WARMUP, ROUNDS, NO_BUILD, BIN, WAIT_IDLE, RETRY_BUSY, NICE, IDLE, GATEWAY_ENV, KEEP, PG_URL) applies
# to every row. KEEP=1 keeps each row's full output in the work directory.
set -euo pipefail

SERVER=fast
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/gateway/lib.sh"
ROWS="${ROWS:-memory sqlite postgres stdio apikey jwt}"
SESSIONS="${SESSIONS:-10000}"
IDLE="${IDLE:-10}"

# What each row changes: the ledger, how the gateway reaches the backend, how agents authenticate.
row_settings() {
    case "$1" in
        memory) echo "LEDGER=memory BACKEND=http AUTH=none" ;;
        sqlite) echo "LEDGER=sqlite BACKEND=http AUTH=none" ;;
        postgres) echo "LEDGER=postgres BACKEND=http AUTH=none" ;;
        stdio) echo "LEDGER=sqlite BACKEND=stdio AUTH=none" ;;
        apikey) echo "LEDGER=sqlite BACKEND=http AUTH=apikey" ;;
        jwt) echo "LEDGER=sqlite BACKEND=http AUTH=jwt" ;;
        *) echo "unknown row $1 (rows: memory sqlite postgres stdio apikey jwt)" >&2; return 2 ;;
    esac
}
for row in $ROWS; do row_settings "$row" >/dev/null; done

build_if_needed
export NO_BUILD=1 BIN SERVER DURATION WARMUP ROUNDS IDLE
for row in $ROWS; do
    echo "== row $row: $(row_settings "$row") ==" >&2
    # shellcheck disable=SC2046 # the settings are NAME=VALUE words
    env $(row_settings "$row") ROW="$row" SUMMARY="$WORK/rows" "$HERE/run.sh" >"$WORK/row-$row.txt"
done
: >"$WORK/sessions.txt"
if (( SESSIONS > 0 )); then
    echo "== $SESSIONS agent sessions ==" >&2
    env LEDGER=sqlite BACKEND=http AUTH=none SESSIONS="$SESSIONS" "$HERE/sessions.sh" >"$WORK/sessions.txt"
fi

awk -v duration="$DURATION" -v rounds="$ROUNDS" -v idle="$IDLE" '
function v(key) { return (key in f) ? f[key] : "" }
BEGIN {
    label["memory"] = "memory ledger"; label["sqlite"] = "SQLite ledger"; label["postgres"] = "PostgreSQL ledger"
    label["stdio"] = "stdio backend (SQLite ledger)"; label["apikey"] = "API-key agent (SQLite ledger)"
    label["jwt"] = "JWT agent (SQLite ledger)"
}
{
    delete f
    for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    n++; row[n] = v("row")
    d1[n] = v("direct_p50_1"); add50[n] = v("gateway_p50_1") - v("direct_p50_1"); add99[n] = v("gateway_p99_1") - v("direct_p99_1")
    drps[n] = v("direct_rps_64"); grps[n] = v("gateway_rps_64")
    cpu1[n] = v("gw_cpu_1"); cpu64[n] = v("gw_cpu_64"); hwm[n] = v("gw_hwm_kib"); idle_ms[n] = v("idle_ms")
    if (v("other_pct") + 0 > other) other = v("other_pct") + 0
    if (row[n] == "memory") memory_rps = grps[n]
}
END {
    printf "%s per measurement, %d round(s); backend: examples/bench_backend.rs over HTTP unless the row says otherwise; " \
        "\"direct\" is that backend called without the gateway in the same run as the row; every response checked.\n\n", duration, rounds
    printf "| row | direct median, 1 conn (µs) | added median, 1 conn (µs) | added p99, 1 conn (µs) | direct calls/s, 64 conn | gateway calls/s, 64 conn | throughput vs direct, 64 conn | vs memory ledger, 64 conn | gateway CPU µs/call, 1 conn | gateway CPU µs/call, 64 conn | CPU/call 1 conn ÷ 64 conn | gateway peak RSS (MiB) |\n"
    printf "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    for (i = 1; i <= n; i++) {
        printf "| %s | %d | %+d | %+d | %.0f | %.0f | %.2f× | %s | %.1f | %.1f | %.2f× | %.1f |\n", label[row[i]], d1[i], add50[i], add99[i], \
            drps[i], grps[i], grps[i] / drps[i], (memory_rps > 0) ? sprintf("%.2f×", grps[i] / memory_rps) : "–", \
            cpu1[i], cpu64[i], cpu1[i] / cpu64[i], hwm[i] / 1024
    }
    if (idle > 0) {
        printf "\nGateway CPU over %d s idle (starting 1 s after its row'"'"'s last measurement):", idle
        for (i = 1; i <= n; i++) printf "%s %s %s ms", (i > 1) ? ";" : "", label[row[i]], idle_ms[i]
        printf ".\n"
    }
    printf "\nOther processes used up to %.1f%% of the machine CPU during a measurement%s.\n", other, \
        (other > 5) ? " — more than 5%: rerun on a quiet machine" : ""
}' "$WORK/rows"
if [[ -s "$WORK/sessions.txt" ]]; then echo; cat "$WORK/sessions.txt"; fi
echo >&2
echo "bench/all.sh took ${SECONDS} s" >&2
