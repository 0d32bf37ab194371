#!/usr/bin/env bash
# Gateway overhead benchmark: an MCP server's `echo` called directly and through Switchyard, in the same run.
#
#   bench/gateway/run.sh                      # 10 s per measurement, 1 round, the demo server
#   DURATION=5s ROUNDS=3 bench/gateway/run.sh # shorter runs, more rounds (table shows the median of the rounds)
#   SERVER=fast LEDGER=memory bench/gateway/run.sh  # the minimal bench backend, the memory ledger
#   bench/all.sh                              # every row of the call-path table (see README.md)
#
# Environment:
#   DURATION   wrk duration of each measurement (default 10s)
#   WARMUP     wrk duration of the warm-up of each target (default 3s)
#   ROUNDS     how many times the four measurements are repeated (default 1); the table shows medians
#   NO_BUILD=1 skip `cargo build --release` (use the existing target/release/switchyard)
#   BIN        the switchyard binary (default target/release/switchyard)
#   WAIT_IDLE=SECONDS  wait up to that long for the machine to be idle (<10% CPU busy) before starting
#   RETRY_BUSY=N  measure again (up to N times, after waiting like WAIT_IDLE) when other processes used more
#              than 5% of the CPU during a measurement; the table reports the worst remaining interference
#   NICE=-10   run wrk, gateway and server at that nice level (less disturbed by other work; needs root)
#   KEEP=1     keep the work directory (logs, raw wrk output) and print its path
#   GATEWAY_ENV / DEMO_ENV  extra NAME=VALUE words for the gateway / direct server process, e.g.
#              GATEWAY_ENV="TOKIO_WORKER_THREADS=1" (tokio's default runtime reads it)
#   SERVER, BACKEND, AUTH, LEDGER, PG_URL  what is measured (see lib.sh): demo|fast, http|stdio,
#              none|apikey|jwt, sqlite|memory|postgres
#   IDLE=SECONDS  after the measurements, the gateway's CPU over that long idle (default 10; 0 skips it)
#   SUMMARY=FILE  also append the row's figures to FILE as one key=value line (what bench/all.sh reads)
#
# What it does: builds release, starts the server (SERVER) and `switchyard serve` (one backend: that server,
# over BACKEND) on free loopback ports, opens ONE MCP session per target with curl (initialize + notifications/
# initialized) shared by all wrk connections, warms both up, then runs wrk --latency against direct and gateway,
# interleaved: -t1 -c1, then -t2 -c64. Each request is a `tools/call` of echo with a fresh JSON-RPC id
# (bench/gateway/call.lua); every response is checked (HTTP 200, a JSON-RPC "result", the echoed text) and a run
# with any failure aborts the benchmark. Finally it prints a table (latency, requests/s, CPU time per call of
# gateway, backend and wrk), the CPU other processes used during the measurements, the peak RSS (VmHWM) of
# both servers, and the gateway's CPU while idle. Traffic goes to 127.0.0.1 only. Everything it starts is stopped on exit. See README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/lib.sh"

build_if_needed
check_idle
start_targets

echo "warm-up: $WARMUP per target" >&2
run_wrk warm-direct "$DIRECT_URL" "$DIRECT_SESSION" echo 2 64 "$WARMUP" >/dev/null
run_wrk warm-gateway "$GW_URL" "$GW_SESSION" "$GW_TOOL" 2 64 "$WARMUP" >/dev/null


RETRY_BUSY="${RETRY_BUSY:-0}"
# % of the machine CPU used by processes other than ours during a measurement (integer)
other_load_pct() {
    awk -v line="$1" 'BEGIN {
        n = split(line, kv, " ")
        for (i = 1; i <= n; i++) { split(kv[i], p, "="); v[p[1]] = p[2] }
        other = v["machine_busy_ticks"] - v["gw_cpu_ticks"] - v["backend_cpu_ticks"] - v["wrk_cpu_ticks"]
        printf "%d", (v["machine_total_ticks"] > 0) ? 100 * other / v["machine_total_ticks"] : 0 }'
}

RESULTS="$WORK/results"
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
    for shape in "1 1" "2 64"; do
        read -r t c <<<"$shape"
        for target in direct gateway; do
            if [[ $target == direct ]]; then url=$DIRECT_URL s=$DIRECT_SESSION tool=echo
            else url=$GW_URL s=$GW_SESSION tool=$GW_TOOL; fi
            echo "round $round: $target -t$t -c$c -d$DURATION" >&2
            for attempt in $(seq 0 "$RETRY_BUSY"); do
                line="$(run_wrk "r$round-$target-c$c" "$url" "$s" "$tool" "$t" "$c" "$DURATION")"
                other="$(other_load_pct "$line")"
                (( other <= 5 )) && break
                echo "  other processes used ${other}% of the CPU during it$( ((attempt < RETRY_BUSY)) && echo '; measuring again')" >&2
                (( attempt < RETRY_BUSY )) && check_idle
            done
            echo "$round $target $c $line" >>"$RESULTS"
        done
    done
done

GW_HWM="$(hwm_kib "$GW_PID")"; GW_RSS="$(rss_kib "$GW_PID")"
DIRECT_HWM="$(hwm_kib "$DIRECT_PID")"; DIRECT_RSS="$(rss_kib "$DIRECT_PID")"

# Idle: the gateway's CPU over IDLE seconds with no traffic, a second after the last measurement (its background
# work, timers and any thread that spins instead of sleeping).
IDLE="${IDLE:-10}"
IDLE_TICKS=""
if (( IDLE > 0 )); then
    echo "idle: the gateway's CPU over ${IDLE} s without traffic" >&2
    sleep 1
    idle0="$(cpu_ticks "$GW_PID")"; sleep "$IDLE"; IDLE_TICKS=$(( $(cpu_ticks "$GW_PID") - idle0 ))
fi

# Table: per connection count, the median across rounds of p50, p99 and requests/s.
awk -v tck="$CLK_TCK" -v busy="$BUSY_BEFORE" -v gw_hwm="$GW_HWM" -v gw_rss="$GW_RSS" -v direct_hwm="$DIRECT_HWM" \
    -v direct_rss="$DIRECT_RSS" -v rounds="$ROUNDS" -v duration="$DURATION" -v idle="$IDLE" -v idle_ticks="$IDLE_TICKS" \
    -v summary="${SUMMARY:-}" -v row="${ROW:-}" -v server="$SERVER" "$(cat "$HERE/stats.awk")"'
{
    key = $2 "," $3
    $1 = $2 = $3 = ""
    line = $0
    rps = val(line, "requests") / (val(line, "duration_us") / 1e6)
    p50[key] = p50[key] (p50[key] == "" ? "" : ",") val(line, "p50_us")
    p99[key] = p99[key] (p99[key] == "" ? "" : ",") val(line, "p99_us")
    r[key] = r[key] (r[key] == "" ? "" : ",") rps
    n[key] += val(line, "requests")
    gwt[key] += val(line, "gw_cpu_ticks"); dmt[key] += val(line, "backend_cpu_ticks")
    # CPU used by other processes during this measurement, as % of the machine; the worst measurement is reported
    other = val(line, "machine_busy_ticks") - val(line, "gw_cpu_ticks") - val(line, "backend_cpu_ticks") - val(line, "wrk_cpu_ticks")
    other_pct = (val(line, "machine_total_ticks") > 0) ? 100 * other / val(line, "machine_total_ticks") : 0
    steal_pct = (val(line, "machine_total_ticks") > 0) ? 100 * val(line, "steal_ticks") / val(line, "machine_total_ticks") : 0
    if (other_pct > max_other) max_other = other_pct
    if (steal_pct > max_steal) max_steal = steal_pct
    wrkt[key] += val(line, "wrk_cpu_ticks")
}
END {
    printf "\nrounds: %d, %s per measurement; every request checked (HTTP 200 + JSON-RPC result); machine %d%% busy before\n\n", rounds, duration, busy
    printf "| connections | target  | median (µs) | p99 (µs) | requests/s | requests checked | gateway CPU µs/call | backend CPU µs/call | wrk CPU µs/call |\n"
    printf "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n"
    split("1 64", cs, " ")
    for (ci = 1; ci <= 2; ci++) {
        c = cs[ci]
        for (ti = 1; ti <= 2; ti++) {
            t = (ti == 1) ? "direct" : "gateway"; k = t "," c
            gwcpu = (t == "gateway") ? sprintf("%.1f", gwt[k] * 1e6 / tck / n[k]) : "–"
            printf "| %d | %-7s | %d | %d | %.0f | %d | %s | %.1f | %.1f |\n", c, t, median(p50[k]), median(p99[k]), median(r[k]), n[k], \
                gwcpu, dmt[k] * 1e6 / tck / n[k], wrkt[k] * 1e6 / tck / n[k]
        }
    }
    printf "\n| connections | added median (µs) | added p99 (µs) | throughput ratio (gateway/direct) |\n"
    printf "|---:|---:|---:|---:|\n"
    for (ci = 1; ci <= 2; ci++) {
        c = cs[ci]; d = "direct," c; g = "gateway," c
        printf "| %d | %+d | %+d | %.2f× |\n", c, median(p50[g]) - median(p50[d]), median(p99[g]) - median(p99[d]), \
            median(r[g]) / median(r[d])
    }
    printf "\nother processes during the measurements: up to %.1f%% of the machine CPU; hypervisor steal up to %.1f%%\n", max_other, max_steal
    if (max_other > 5) printf "WARNING: other processes used more than 5%% of the CPU during a measurement; rerun on a quiet machine\n"
    printf "\ngateway RSS: peak (VmHWM) %.1f MiB, now (VmRSS) %.1f MiB\n", gw_hwm / 1024, gw_rss / 1024
    printf "%s server RSS (direct): peak (VmHWM) %.1f MiB, now (VmRSS) %.1f MiB\n", server, direct_hwm / 1024, direct_rss / 1024
    if (idle_ticks != "") printf "gateway idle: %.0f ms of CPU over %d s without traffic\n", idle_ticks * 1000 / tck, idle
    if (summary != "") {
        printf "row=%s", row >> summary
        for (ci = 1; ci <= 2; ci++) {
            c = cs[ci]
            for (ti = 1; ti <= 2; ti++) {
                t = (ti == 1) ? "direct" : "gateway"; k = t "," c
                printf " %s_p50_%d=%d %s_p99_%d=%d %s_rps_%d=%.0f", t, c, median(p50[k]), t, c, median(p99[k]), t, c, median(r[k]) >> summary
            }
            printf " gw_cpu_%d=%.1f", c, gwt["gateway," c] * 1e6 / tck / n["gateway," c] >> summary
        }
        printf " gw_hwm_kib=%d idle_s=%d idle_ms=%s other_pct=%.1f\n", gw_hwm, idle, \
            (idle_ticks == "") ? "-" : sprintf("%.0f", idle_ticks * 1000 / tck), max_other >> summary
    }
}' "$RESULTS"
