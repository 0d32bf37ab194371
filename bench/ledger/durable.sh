#!/usr/bin/env bash
# Durability at the memory ledger's speed: the fast bench backend (examples/bench_backend.rs) called directly and
# through gateways on the memory, SQLite and PostgreSQL ledgers, in one sitting, in three shapes:
#   c1   one connection (-t1 -c1): the added median
#   c64  one agent session, 64 connections (-t2 -c64)
#   s64  64 agent sessions, one connection each (-t64 -c64, wrk thread N on session N)
# then the fleet: two gateways on one PostgreSQL schema, 32 connections each, against one gateway with 64.
# Every request is a `tools/call` of `echo` with a fresh JSON-RPC id, every answer checked (bench/gateway/call.lua).
#
#   bench/ledger/durable.sh                               # builds release, 3 rounds of 5 s, about 6 minutes
#   NO_BUILD=1 NICE=-10 bench/ledger/durable.sh           # the sitting for BENCHMARKS.md (quiet machine)
#   NO_BUILD=1 DURATION=1s WARMUP=1s ROUNDS=1 bench/ledger/durable.sh   # does every row work (about 90 s)
#
# Per shape, a fresh gateway per ledger is started (all three side by side, idle while another is measured) and
# warmed up; rounds interleave direct, memory, SQLite, PostgreSQL; the table shows medians across rounds. When a
# shape's gateways stop, their ledgers log what their writers did (`ledger writers: …`, debug level): batches, jobs
# per batch, the wait of a call's claim for its batch, the batch's time and its commit's, batch sizes. The
# PostgreSQL server's CPU (the backends serving the gateway, found by its client ports: not other users of the
# server, nor its WAL writer) is measured during its rows and reported as a share of the machine; with NICE those
# backends run at NICE too (PG_NICE). Knobs: DURATION (5s), WARMUP (2s), ROUNDS (3), SHAPES ("c1 c64 s64"), FLEET
# (1; 0 skips it), IDLE (5 s of idle CPU per gateway, and of the PostgreSQL server processes serving it; 0 skips
# it), PG_NICE (1: with NICE, the server's backends of the benchmark's gateways run at NICE too; 0 leaves them at
# their own), EXTRA (TOML appended to every gateway's configuration, `\n` for a line break: e.g. a [[limits]]
# table), DEMO_ENV (NAME=VALUE words for the bench backend: BENCH_BACKEND_SSE=1 makes it answer with SSE streams),
# and lib.sh's NO_BUILD, BIN, NICE, PG_URL, KEEP, GATEWAY_ENV.
# Traffic stays on 127.0.0.1; everything started is stopped at exit and the PostgreSQL schemas are dropped.
set -euo pipefail

SERVER=fast
DURATION="${DURATION:-5s}"
WARMUP="${WARMUP:-2s}"
ROUNDS="${ROUNDS:-3}"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../gateway/lib.sh"
SHAPES="${SHAPES:-c1 c64 s64}"
FLEET="${FLEET:-1}"
IDLE="${IDLE:-5}"
command -v psql >/dev/null || { echo "psql is missing (the PostgreSQL rows create and drop schemas)" >&2; exit 2; }

SCHEMAS=()
drop_schemas() {
    local schema
    for schema in "${SCHEMAS[@]}"; do psql "$PG_URL" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; done
    cleanup
}
trap drop_schemas EXIT

# wrk threads and connections of a shape
shape_wrk() { case "$1" in c1) echo "1 1" ;; c64 | fleet) echo "2 64" ;; s64) echo "64 64" ;; esac; }
shape_sessions() { [[ "$1" == s64 ]] && echo 64 || echo 1; }

# The ledger URL of a row ("postgres" gets a fresh schema; pass a schema to share it).
ledger_url() {
    case "$1" in
        memory|sqlite) echo "$1" ;;
        postgres)
            local separator='?'
            [[ "$PG_URL" == *\?* ]] && separator='&'
            echo "$PG_URL${separator}schema=$2" ;;
    esac
}

# start_gateway NAME LEDGER_URL → sets GW_URL GW_PID (the gateway logs its ledger's writer counts at shutdown)
start_gateway() {
    mkdir -p "$WORK/$1"
    printf '[server]\ndata_dir = "%s"\n[ledger]\nurl = "%s"\n[[backends]]\nname = "fast"\nurl = "%s"\n%b' \
        "$WORK/$1" "$2" "$DIRECT_URL" "${EXTRA:-}" >"$WORK/$1.toml"
    # shellcheck disable=SC2086 # GATEWAY_ENV is a list of NAME=VALUE words
    start "$1" "${PRIO[@]}" env SWITCHYARD_LOG="switchyard=info,switchyard::ledger=debug" \
        ${GATEWAY_ENV:-} "$BIN" serve --config "$WORK/$1.toml" --listen 127.0.0.1:0
    GW_URL="$START_URL" GW_PID="$LAST_PID"
}

# writers_line LOG LABEL → the last `ledger writers:` line of a gateway's log (access lines included), labelled
writers_line() { { grep -a "ledger writers: " "$1" || true; } | tail -1 | sed -n "s/.*ledger writers: \(.*\)/writers $2 \1/p"; }

# pg_backends GW_PID... → the PostgreSQL server processes serving those gateways (found by their client ports);
# other users of the same server are neither counted nor touched.
pg_backends() {
    local ports gw
    for gw in "$@"; do
        ports="${ports:+$ports,}$(ss -Htnp state established '( dport = :5432 )' | grep "pid=$gw," \
            | awk '{ n = split($3, a, ":"); printf "%s%s", sep, a[n]; sep = "," }')"
    done
    ports="$(echo "${ports:-}" | sed 's/,,*/,/g; s/^,//; s/,$//')"
    [[ -n "$ports" ]] || return 0
    psql "$PG_URL" -Atc "SELECT pid FROM pg_stat_activity WHERE client_port IN ($ports)"
}

# With NICE, the server processes serving a gateway get the benchmark's priority too: left at 0 while wrk, the
# backend and the gateways run at NICE, they have a tenth of their weight on a busy machine and the PostgreSQL
# rows measure their starvation, not the ledger. They end with the gateway's connections. PG_NICE=0: left alone.
prioritize_pg_backends() {
    local pid
    [[ -n "${NICE:-}" && "${PG_NICE:-1}" == 1 ]] || return 0
    for pid in $(pg_backends "$@"); do
        echo "$NICE" >"/proc/$pid/autogroup" 2>/dev/null || true
        renice -n "$NICE" -p "$pid" >/dev/null 2>&1 || true
    done
}

pg_ticks() {  # CPU ticks of the server processes serving the gateways GW_PID...
    local total=0 pid
    for pid in $(pg_backends "$@"); do total=$((total + $(cpu_ticks "$pid"))); done
    echo "$total"
}

# ledger_wchar GW_PID → the bytes the gateway's SQLite threads (named `switchyard-ledg…`: the writer and the
# checkpointer) passed to `write` calls so far: the log frames and the checkpoints' copies. Per call it does not
# depend on the machine's load, where calls/s do (docs/ledger.md, *Where a durable call's time goes*). Batches a
# caller ran on a runtime thread (`by_callers` in the writers' line) are not counted.
ledger_wchar() {
    local total=0 task
    for task in /proc/"$1"/task/*; do
        [[ "$(cat "$task/comm" 2>/dev/null)" == switchyard-ledg* ]] || continue
        total=$((total + $(awk '/^wchar/ {print $2}' "$task/io" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

RESULTS="$WORK/results"; : >"$RESULTS"
# measure SHAPE ROW URL SESSIONS TOOL PID → one line in RESULTS
measure() {
    local shape="$1" row="$2" url="$3" sessions="$4" tool="$5" pid="$6" t c line pg0 pg1 w0 w1
    read -r t c <<<"$(shape_wrk "$shape")"
    GW_PID="$pid" GW_URL="$url"
    pg0="$(pg_ticks "$pid")"; w0="$(ledger_wchar "$pid")"
    line="$(run_wrk "$shape-$row-$RANDOM" "$url" "$sessions" "$tool" "$t" "$c" "$DURATION")"
    pg1="$(pg_ticks "$pid")"; w1="$(ledger_wchar "$pid")"
    echo "shape=$shape row=$row $line pg_ticks=$((pg1 - pg0)) ledger_wchar=$((w1 - w0))" >>"$RESULTS"
    echo "  $shape $row: $(field "$line" requests) calls, p50 $(field "$line" p50_us) µs" >&2
}

build_if_needed
check_idle
start direct "${PRIO[@]}" env ${DEMO_ENV:-} "$BENCH_BACKEND" --listen 127.0.0.1:0
DIRECT_URL="$START_URL" DIRECT_PID="$LAST_PID"
STATS="$WORK/ledger-stats"; : >"$STATS"

for shape in $SHAPES; do
    n="$(shape_sessions "$shape")"
    echo "== shape $shape ($(shape_wrk "$shape" | sed 's/ / threads, /') connections, $n session(s)) ==" >&2
    declare -A URL PID SESS
    URL[direct]="$DIRECT_URL"; PID[direct]="$DIRECT_PID"
    SESS[direct]="$(open_sessions "$DIRECT_URL" echo "$n")"
    for row in memory sqlite postgres; do
        schema="sy_bench_${$}_${shape}_$RANDOM"; SCHEMAS+=("$schema")
        start_gateway "gw-$shape-$row" "$(ledger_url "$row" "$schema")"
        URL[$row]="$GW_URL"; PID[$row]="$GW_PID"
        SESS[$row]="$(open_sessions "$GW_URL" fast__echo "$n")"
    done
    read -r t c <<<"$(shape_wrk "$shape")"
    for row in direct memory sqlite postgres; do
        tool=fast__echo; [[ $row == direct ]] && tool=echo
        GW_PID="${PID[$row]}" GW_URL="${URL[$row]}"
        run_wrk "warm-$shape-$row" "${URL[$row]}" "${SESS[$row]}" "$tool" "$t" "$c" "$WARMUP" >/dev/null
    done
    prioritize_pg_backends "${PID[postgres]}"
    for round in $(seq 1 "$ROUNDS"); do
        for row in direct memory sqlite postgres; do
            tool=fast__echo; [[ $row == direct ]] && tool=echo
            measure "$shape" "$row" "${URL[$row]}" "${SESS[$row]}" "$tool" "${PID[$row]}"
        done
    done
    for row in memory sqlite postgres; do
        if (( IDLE > 0 )); then
            idle0="$(cpu_ticks "${PID[$row]}")"; pg_idle0="$(pg_ticks "${PID[$row]}")"; sleep "$IDLE"
            echo "idle shape=$shape row=$row ms=$(( ($(cpu_ticks "${PID[$row]}") - idle0) * 1000 / CLK_TCK ))" \
                "pg_ms=$(( ($(pg_ticks "${PID[$row]}") - pg_idle0) * 1000 / CLK_TCK ))" >>"$STATS"
        fi
        echo "rss shape=$shape row=$row hwm_kib=$(hwm_kib "${PID[$row]}")" >>"$STATS"
        kill -TERM "${PID[$row]}"; wait "${PID[$row]}" 2>/dev/null || true
        writers_line "$WORK/gw-$shape-$row.err" "shape=$shape row=$row" >>"$STATS"
    done
    unset URL PID SESS
done

if [[ "$FLEET" == 1 ]]; then
    echo "== fleet: two gateways on one PostgreSQL schema ==" >&2
    schema="sy_bench_${$}_fleet"; SCHEMAS+=("$schema")
    start_gateway gw-fleet-a "$(ledger_url postgres "$schema")"; A_URL="$GW_URL" A_PID="$GW_PID"
    start_gateway gw-fleet-b "$(ledger_url postgres "$schema")"; B_URL="$GW_URL" B_PID="$GW_PID"
    A_SESS="$(open_sessions "$A_URL" fast__echo 1)"; B_SESS="$(open_sessions "$B_URL" fast__echo 1)"
    GW_PID="$A_PID" GW_URL="$A_URL"; run_wrk warm-fleet-a "$A_URL" "$A_SESS" fast__echo 2 64 "$WARMUP" >/dev/null
    GW_PID="$B_PID" GW_URL="$B_URL"; run_wrk warm-fleet-b "$B_URL" "$B_SESS" fast__echo 2 64 "$WARMUP" >/dev/null
    prioritize_pg_backends "$A_PID" "$B_PID"
    for round in $(seq 1 "$ROUNDS"); do
        measure fleet one "$A_URL" "$A_SESS" fast__echo "$A_PID"
        pg0="$(pg_ticks "$A_PID" "$B_PID")"; a0="$(cpu_ticks "$A_PID")"; b0="$(cpu_ticks "$B_PID")"
        GW_PID="$A_PID" GW_URL="$A_URL"
        run_wrk "fleet-a-$round" "$A_URL" "$A_SESS" fast__echo 1 32 "$DURATION" >"$WORK/fleet-a" &
        fleet_a=$!
        GW_PID="$B_PID" GW_URL="$B_URL"
        run_wrk "fleet-b-$round" "$B_URL" "$B_SESS" fast__echo 1 32 "$DURATION" >"$WORK/fleet-b"
        wait "$fleet_a"
        pg1="$(pg_ticks "$A_PID" "$B_PID")"; a1="$(cpu_ticks "$A_PID")"; b1="$(cpu_ticks "$B_PID")"
        la="$(cat "$WORK/fleet-a")"; lb="$(cat "$WORK/fleet-b")"
        echo "shape=fleet row=two requests=$(( $(field "$la" requests) + $(field "$lb" requests) )) duration_us=$(field "$lb" duration_us) p50_us=$(field "$lb" p50_us) gw_cpu_ticks=$(( a1 - a0 + b1 - b0 )) machine_total_ticks=$(field "$lb" machine_total_ticks) pg_ticks=$((pg1 - pg0))" >>"$RESULTS"
        echo "  fleet two: $(( $(field "$la" requests) + $(field "$lb" requests) )) calls" >&2
    done
    kill -TERM "$A_PID" "$B_PID"; wait "$A_PID" "$B_PID" 2>/dev/null || true
    for side in a b; do
        writers_line "$WORK/gw-fleet-$side.err" "shape=fleet row=$side" >>"$STATS"
    done
fi

awk -v tck="$CLK_TCK" -v rounds="$ROUNDS" -v duration="$DURATION" -v stats="$STATS" "$(cat "$HERE/stats.awk")"'
function add(map, k, v) { map[k] = map[k] (map[k] == "" ? "" : ",") v }
{
    k = val($0, "shape") SUBSEP val($0, "row")
    add(rps, k, val($0, "requests") / (val($0, "duration_us") / 1e6))
    add(p50, k, val($0, "p50_us"))
    n[k] += val($0, "requests"); cpu[k] += val($0, "gw_cpu_ticks"); pg[k] += val($0, "pg_ticks")
    wchar[k] += val($0, "ledger_wchar")
    total[k] += val($0, "machine_total_ticks")
    if (val($0, "machine_busy_ticks") != "" && val($0, "machine_total_ticks") > 0) {
        other = val($0, "machine_busy_ticks") - val($0, "gw_cpu_ticks") - val($0, "backend_cpu_ticks") \
            - val($0, "wrk_cpu_ticks") - val($0, "pg_ticks")
        if (100 * other / val($0, "machine_total_ticks") > max_other) max_other = 100 * other / val($0, "machine_total_ticks")
    }
}
END {
    while ((getline line < stats) > 0) {
        k = val(line, "shape") SUBSEP val(line, "row")
        if (line ~ /^writers/) { sub(/^writers shape=[^ ]* row=[^ ]* /, "", line); writers[k] = line }
        if (line ~ /^idle/) { idle[k] = val(line, "ms"); pg_idle[k] = val(line, "pg_ms") }
        if (line ~ /^rss/) hwm[k] = val(line, "hwm_kib")
    }
    printf "\n%d round(s) of %s per measurement (medians); fast backend; every answer checked.\n\n", rounds, duration
    printf "| shape | row | calls/s | vs direct | vs memory | gateway CPU µs/call | median µs | added median µs | PostgreSQL server: %% of machine, CPU µs/call | SQLite bytes written per call | idle CPU ms | peak RSS MiB |\n"
    printf "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    split("c1 c64 s64", shapes, " "); split("direct memory sqlite postgres", rows, " ")
    for (s = 1; s <= 3; s++) for (r = 1; r <= 4; r++) {
        sh = shapes[s]; row = rows[r]; k = sh SUBSEP row
        if (!(k in n)) continue
        d = median(rps[sh SUBSEP "direct"]); m = median(rps[sh SUBSEP "memory"]); x = median(rps[k])
        printf "| %s | %s | %.0f | %.2f× | %s | %s | %d | %s | %s | %s | %s | %s |\n", sh, row, x, x / d, \
            (row == "direct") ? "–" : sprintf("%.2f×", x / m), \
            (row == "direct") ? "–" : sprintf("%.1f", cpu[k] * 1e6 / tck / n[k]), median(p50[k]), \
            (row == "direct") ? "–" : sprintf("%+d", median(p50[k]) - median(p50[sh SUBSEP "direct"])), \
            (row == "postgres") ? sprintf("%.0f%%, %.0f", 100 * pg[k] / total[k], pg[k] * 1e6 / tck / n[k]) : "–", \
            (row == "sqlite") ? sprintf("%.0f", wchar[k] / n[k]) : "–", \
            !(k in idle) ? "–" : (row == "postgres") ? sprintf("%s (server %s)", idle[k], pg_idle[k]) : idle[k], (k in hwm) ? sprintf("%.1f", hwm[k] / 1024) : "–"
    }
    if (("fleet" SUBSEP "one") in n) {
        one = median(rps["fleet" SUBSEP "one"]); two = median(rps["fleet" SUBSEP "two"])
        printf "\nFleet on one PostgreSQL schema, 64 connections: one gateway %.0f calls/s (%.1f µs gateway CPU/call, server %.0f%% of the machine); two gateways with 32 each %.0f calls/s combined (%.2f× one; %.1f µs CPU/call both gateways, server %.0f%%).\n", \
            one, cpu["fleet" SUBSEP "one"] * 1e6 / tck / n["fleet" SUBSEP "one"], 100 * pg["fleet" SUBSEP "one"] / total["fleet" SUBSEP "one"], \
            two, two / one, cpu["fleet" SUBSEP "two"] * 1e6 / tck / n["fleet" SUBSEP "two"], 100 * pg["fleet" SUBSEP "two"] / total["fleet" SUBSEP "two"]
    }
    printf "\nOther processes used up to %.0f%% of the machine during a measurement%s.\n", max_other, \
        (max_other > 5) ? " — more than 5%: rerun on a quiet machine" : ""
    printf "\nLedger writers per gateway (whole shape: warm-up and every round):\n\n"
    for (k in writers) { split(k, part, SUBSEP); printf "- %s %s: %s\n", part[1], part[2], writers[k] }
}' "$RESULTS"
echo "bench/ledger/durable.sh took ${SECONDS} s" >&2
