# Shared by the scripts of this directory (source it; not executable on its own).
# Provides: HERE ROOT BIN BENCH_BACKEND BENCH_SESSIONS LUA, build_if_needed, cpu_busy_pct, check_idle,
# start_targets (sets DIRECT_URL DIRECT_PID GW_URL GW_PID DIRECT_SESSION GW_SESSION GW_TOOL), open_sessions, run_wrk, field,
# cpu_ticks, hwm_kib, rss_kib, WORK (a fresh directory). Everything started is stopped by the EXIT trap.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
ROUNDS="${ROUNDS:-1}"
BIN="${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/switchyard}"
# The benchmark's own programs (examples/bench_backend.rs, examples/bench_sessions.rs), built beside BIN.
BENCH_BACKEND="$(dirname "$BIN")/examples/bench_backend"
BENCH_SESSIONS="$(dirname "$BIN")/examples/bench_sessions"
LUA="$HERE/call.lua"
# Which MCP server is measured, directly and behind the gateway: SERVER=demo (`switchyard demo-server`, default)
# or fast (examples/bench_backend.rs, a minimal hyper server whose own cost does not hide the gateway's).
# How the gateway reaches it: BACKEND=http (default) or stdio (the same server started by the gateway with
# `--stdio`); the direct baseline is always the server over HTTP.
# How agents authenticate: AUTH=none (default), apikey ([[auth.api_keys]]) or jwt ([auth.jwt] with a cached JWKS
# file, RS256 token).
# Where the gateway's call ledger lives: LEDGER=sqlite (default, the gateway's default), memory or postgres (a
# fresh schema at PG_URL, dropped at exit).
# GATEWAY_SERVER_TOML: extra lines for the gateway's [server] section.
SERVER="${SERVER:-demo}"
BACKEND="${BACKEND:-http}"
AUTH="${AUTH:-none}"
LEDGER="${LEDGER:-sqlite}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
PG_SCHEMA=""
GW_AUTHORIZATION=""
# NICE=-10 (say) runs wrk, the gateway and the demo server at that priority, so that other work on a shared
# machine disturbs the measurement less (negative values need root).
# The kernel groups processes by session (autogroup) and shares the CPU fairly between groups before nice
# counts, so the benchmark first moves into a session of its own and gives that group the same nice level.
PRIO=()
if [[ -n "${NICE:-}" ]]; then
    if [[ -z "${SY_OWN_SESSION:-}" && -e /proc/self/autogroup ]]; then
        SY_OWN_SESSION=1 exec setsid --wait "$BASH" "$0" "$@"
    fi
    if [[ -e /proc/self/autogroup ]]; then
        echo "$NICE" >/proc/self/autogroup || echo "cannot set the autogroup nice level" >&2
    fi
    PRIO=(nice -n "$NICE")
fi

command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl is missing: apt-get install -y curl" >&2; exit 2; }

build_if_needed() {
    if [[ "${NO_BUILD:-}" != 1 ]]; then
        echo "building: cargo build --release --bin switchyard --example bench_backend --example bench_sessions" >&2
        (cd "$ROOT" && cargo build --release --bin switchyard --example bench_backend --example bench_sessions) >&2
    fi
    [[ -x "$BIN" ]] || { echo "no binary at $BIN" >&2; exit 2; }
    if [[ "$SERVER" == fast ]]; then
        [[ -x "$BENCH_BACKEND" ]] || { echo "no bench backend at $BENCH_BACKEND (cargo build --release --example bench_backend)" >&2; exit 2; }
    fi
}

# Other load on the machine skews everything (2 cores shared by wrk, gateway and backend): measure it first.
cpu_busy_pct() {  # CPU busy % of the whole machine over 2 s, from /proc/stat
    local a b
    a=($(head -1 /proc/stat)); sleep 2; b=($(head -1 /proc/stat))
    local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
    for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
    echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}
check_idle() {  # sets BUSY_BEFORE; with WAIT_IDLE=SECONDS, first waits up to that long for a quiet machine
    BUSY_BEFORE="$(cpu_busy_pct)"
    local waited=0
    while (( BUSY_BEFORE > 10 && waited < ${WAIT_IDLE:-0} )); do
        echo "machine ${BUSY_BEFORE}% busy; waiting for it to calm down (${waited}/${WAIT_IDLE}s)" >&2
        sleep 8; waited=$((waited + 10))
        BUSY_BEFORE="$(cpu_busy_pct)"
    done
    echo "machine CPU busy before the run: ${BUSY_BEFORE}% (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    if (( BUSY_BEFORE > 10 )); then
        echo "WARNING: the machine is busy (${BUSY_BEFORE}% CPU) before the benchmark; results will be skewed" >&2
    fi
}

WORK="$(mktemp -d /tmp/sy-bench.XXXXXX)"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ -n "$PG_SCHEMA" ]]; then
        psql "$PG_URL" -qc "DROP SCHEMA IF EXISTS $PG_SCHEMA CASCADE" >/dev/null 2>&1 \
            || echo "could not drop the PostgreSQL schema $PG_SCHEMA" >&2
    fi
    if [[ "${KEEP:-}" == 1 ]]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Start a process whose first stdout line names its address (`http://127.0.0.1:PORT/mcp`).
# Sets START_URL and LAST_PID (not in a subshell, so PIDS keeps the process for the trap).
start() {
    local name="$1"; shift
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    local url="" i
    for i in $(seq 1 200); do
        url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$WORK/$name.out" 2>/dev/null | head -1 || true)"
        [[ -n "$url" ]] && break
        kill -0 "$LAST_PID" 2>/dev/null || { echo "$name exited:" >&2; cat "$WORK/$name.err" >&2; exit 1; }
        sleep 0.05
    done
    [[ -n "$url" ]] || { echo "$name did not report its address" >&2; cat "$WORK/$name.err" >&2; exit 1; }
    START_URL="$url"
}

HDRS=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
      -H 'MCP-Protocol-Version: 2025-11-25')

# The Authorization header for URL: the gateway's when it wants one, none for the direct server.
auth_for() { [[ "$1" == "${GW_URL:-}" && -n "$GW_AUTHORIZATION" ]] && printf '%s\n' -H "Authorization: $GW_AUTHORIZATION"; true; }

# Open a session on URL; echo its mcp-session-id.
open_session() {
    local url="$1" session auth
    mapfile -t auth < <(auth_for "$url")
    session="$(curl -sS -D - -o /dev/null "${HDRS[@]}" "${auth[@]}" -X POST "$url" --data \
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sy-bench","version":"0"}}}' \
        | tr -d '\r' | awk -F': *' 'tolower($1)=="mcp-session-id" {print $2}')"
    [[ -n "$session" ]] || { echo "initialize on $url returned no mcp-session-id" >&2; return 1; }
    curl -sS -o /dev/null "${HDRS[@]}" "${auth[@]}" -H "Mcp-Session-Id: $session" -X POST "$url" \
        --data '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    echo "$session"
}

# open_sessions URL TOOL COUNT → a comma-separated list of sessions, each probed with one call
open_sessions() {
    local url="$1" tool="$2" count="$3" list="" session i try
    for i in $(seq 1 "$count"); do
        session=""
        for try in $(seq 1 100); do
            session="$(open_session "$url" 2>/dev/null || true)"
            if [[ -n "$session" ]] && probe "$url" "$session" "$tool"; then break; fi
            session=""; sleep 0.1
        done
        [[ -n "$session" ]] || { echo "no working session on $url" >&2; exit 1; }
        list="${list:+$list,}$session"
    done
    echo "$list"
}

# One tools/call with curl; succeeds when the answer is a result echoing the text.
probe() {
    local url="$1" session="$2" tool="$3" auth
    mapfile -t auth < <(auth_for "$url")
    curl -sS "${HDRS[@]}" "${auth[@]}" -H "Mcp-Session-Id: $session" -X POST "$url" \
        --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":{\"text\":\"hello\"}}}" \
        2>/dev/null | grep -q '"result".*hello'
}

# The gateway's configuration for SERVER, BACKEND, LEDGER and AUTH; sets GW_AUTHORIZATION for AUTH=apikey|jwt
# and PG_SCHEMA for LEDGER=postgres.
write_gateway_config() {
    printf '[server]\ndata_dir = "%s"\n%s\n' "$WORK/data" "${GATEWAY_SERVER_TOML:-}"
    case "$LEDGER" in
        memory|sqlite) printf '[ledger]\nurl = "%s"\n' "$LEDGER" ;;
        postgres)
            PG_SCHEMA="sy_bench_$$_$RANDOM"
            local separator='?'
            [[ "$PG_URL" == *\?* ]] && separator='&'
            printf '[ledger]\nurl = "%s%sschema=%s"\n' "$PG_URL" "$separator" "$PG_SCHEMA" ;;
        *) echo "LEDGER must be memory, sqlite or postgres" >&2; exit 2 ;;
    esac
    printf '[[backends]]\nname = "%s"\n' "$SERVER"
    case "$BACKEND" in
        http) printf 'url = "%s"\n' "$DIRECT_URL" ;;
        stdio) printf 'transport = "stdio"\ncommand = "%s"\nargs = [%s]\n' "${STDIO_COMMAND[0]}" "${STDIO_COMMAND[1]}" ;;
        *) echo "BACKEND must be http or stdio" >&2; exit 2 ;;
    esac
    case "$AUTH" in
        none) ;;
        apikey)
            local key="sy_bench_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
            GW_AUTHORIZATION="Bearer $key"
            printf '[auth]\n[[auth.api_keys]]\nprincipal = "bench"\nsha256 = "%s"\n' \
                "$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)" ;;
        jwt)
            local python="${SWITCHYARD_INTEROP_PYTHON:-$ROOT/target/interop-venv/bin/python}"
            GW_AUTHORIZATION="Bearer $("$python" "$HERE/mint_jwt.py" "$ROOT/tests/fixtures/auth-rsa-1.der" "$WORK/jwks.json")"
            printf '[auth.jwt]\nissuer = "https://issuer.bench.invalid"\naudiences = ["switchyard-bench"]\njwks_file = "%s"\n' \
                "$WORK/jwks.json" ;;
        *) echo "AUTH must be none, apikey or jwt" >&2; exit 2 ;;
    esac
}

start_targets() {
    local server
    case "$SERVER" in
        demo) server=("$BIN" demo-server); STDIO_COMMAND=("$BIN" '"demo-server", "--stdio"') ;;
        fast) server=("$BENCH_BACKEND"); STDIO_COMMAND=("$BENCH_BACKEND" '"--stdio"') ;;
        *) echo "SERVER must be demo or fast" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086 # DEMO_ENV / GATEWAY_ENV are lists of NAME=VALUE words
    start direct "${PRIO[@]}" env ${DEMO_ENV:-} "${server[@]}" --listen 127.0.0.1:0
    DIRECT_URL="$START_URL" DIRECT_PID="$LAST_PID"
    write_gateway_config >"$WORK/gateway.toml"
    # shellcheck disable=SC2086
    start gateway "${PRIO[@]}" env ${GATEWAY_ENV:-} "$BIN" serve --config "$WORK/gateway.toml" --listen 127.0.0.1:0
    GW_URL="$START_URL" GW_PID="$LAST_PID" GW_TOOL="${SERVER}__echo"
    echo "direct:  $DIRECT_URL (pid $DIRECT_PID, $SERVER server)" >&2
    echo "gateway: $GW_URL (pid $GW_PID; backend over $BACKEND, $LEDGER ledger, auth $AUTH)" >&2

    DIRECT_SESSION="$(open_session "$DIRECT_URL")"
    probe "$DIRECT_URL" "$DIRECT_SESSION" echo || { echo "direct echo probe failed" >&2; exit 1; }
    # The gateway discovers its backend in the background: retry the session + probe until the tool is routed.
    GW_SESSION=""
    for i in $(seq 1 100); do
        GW_SESSION="$(open_session "$GW_URL" 2>/dev/null || true)"
        if [[ -n "$GW_SESSION" ]] && probe "$GW_URL" "$GW_SESSION" "$GW_TOOL"; then break; fi
        GW_SESSION=""
        sleep 0.1
    done
    [[ -n "$GW_SESSION" ]] || { echo "gateway $GW_TOOL probe failed; gateway log:" >&2; cat "$WORK/gateway.err" >&2; exit 1; }
}

# run_wrk LABEL URL SESSION TOOL THREADS CONNS DURATION → prints the SYBENCH line, aborts on any failed request.
run_wrk() {
    local label="$1" url="$2" session="$3" tool="$4" threads="$5" conns="$6" duration="$7" out line
    out="$WORK/wrk-$label.txt"
    local gw0 backend0 gw1 backend1 sys0 sys1 TIMEFORMAT='%U %S'
    gw0=$(cpu_ticks "$GW_PID"); backend0=$(backend_ticks); sys0="$(head -1 /proc/stat)"
    local authorization=""
    [[ "$url" == "$GW_URL" ]] && authorization="$GW_AUTHORIZATION"
    { time SY_SESSION="$session" SY_TOOL="$tool" SY_AUTHORIZATION="$authorization" "${PRIO[@]}" wrk -t"$threads" -c"$conns" -d"$duration" --latency -s "$LUA" "$url" \
        >"$out" 2>"$WORK/wrk-$label.err"; } 2>"$WORK/wrk-$label.time"
    gw1=$(cpu_ticks "$GW_PID"); backend1=$(backend_ticks); sys1="$(head -1 /proc/stat)"
    line="$(grep '^SYBENCH ' "$out" || true)"
    [[ -n "$line" ]] || { echo "wrk $label printed no SYBENCH line:" >&2; cat "$out" "$WORK/wrk-$label.err" >&2; exit 1; }
    local v
    for v in non200 noresult sock_connect sock_read sock_write sock_timeout; do
        if [[ "$(field "$line" "$v")" != 0 ]]; then
            echo "wrk $label: $v=$(field "$line" "$v") — failed requests, the benchmark is void:" >&2
            echo "$line" >&2; cat "$WORK/wrk-$label.err" >&2; exit 1
        fi
    done
    if [[ "$(field "$line" ok)" != "$(field "$line" requests)" || "$(field "$line" ok)" == 0 ]]; then
        echo "wrk $label: ok=$(field "$line" ok) of requests=$(field "$line" requests)" >&2; exit 1
    fi
    # CPU accounting of the measurement, in clock ticks: ours (gateway, backend, wrk) and the whole machine's,
    # so that load from other processes during the run can be reported (it skews everything on 2 cores).
    local wrk_ticks machine
    wrk_ticks="$(awk -v hz="$CLK_TCK" '{printf "%d", ($1 + $2) * hz}' "$WORK/wrk-$label.time")"
    machine="$(awk -v a="$sys0" -v b="$sys1" 'BEGIN {
        split(a, x, " "); split(b, y, " "); total = 0
        for (i = 2; i <= 9; i++) total += y[i] - x[i]
        idle = (y[5] + y[6]) - (x[5] + x[6]); steal = y[9] - x[9]
        printf "machine_busy_ticks=%d machine_total_ticks=%d steal_ticks=%d", total - idle - steal, total, steal }')"
    echo "$line gw_cpu_ticks=$((gw1 - gw0)) backend_cpu_ticks=$((backend1 - backend0)) wrk_cpu_ticks=$wrk_ticks $machine"
}
# utime + stime of a process, in clock ticks (user + kernel CPU time it used); 0 for one that is gone
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# The backends' ticks: the direct server's plus the gateway's children (its stdio backend processes).
backend_ticks() {
    local total pid
    total=$(cpu_ticks "$DIRECT_PID")
    for pid in $(cat /proc/"$GW_PID"/task/*/children 2>/dev/null); do total=$((total + $(cpu_ticks "$pid"))); done
    echo "$total"
}
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
CLK_TCK="$(getconf CLK_TCK)"
field() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<" $1"; }

