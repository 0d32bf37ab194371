#!/usr/bin/env bash
# The official conformance runs against Switchyard:
#
# 1. server role: `conformance server --suite all` against Switchyard's /mcp in front of the project's fixture
#    in its 2025 era (bare names, prefix "") and @modelcontextprotocol/server-everything (a second, prefixed
#    backend) over Streamable HTTP;
# 2. server role again, with server-everything as a stdio backend (`transport = "stdio"`, a process per agent
#    session) instead, judged against baseline-server-stdio.txt;
# 3. client role: the core client scenarios (the four non-auth ones and the 14 auth ones) and the client-credentials
#    extension ones with Switchyard as the client (run-client-suite.sh);
# 4. server role with the newest suite (package.json's `conformance-next`, 0.2.0-alpha.12): the scenarios the
#    2026-07-28 revision requires (`--requirements 2026-07-28`, the modern wire), first against a second fixture
#    serving both eras (FIXTURE_ERA=dual) alone, with no baseline (the fixture must pass every scored scenario),
#    then through a gateway in front of that fixture (the gateway speaks 2026-07-28 to it) and
#    server-everything, judged against baseline-server-2026.txt, the tasks extension's scenarios included (the
#    gateway runs the fixture's synchronous tools as its own tasks);
# 5. the same requirement set through a gateway in front of server-everything alone (a 2025-era server behind
#    the 2026-07-28 front), judged against baseline-server-everything-2026.txt; and through a gateway with
#    `tasks = "passthrough"` in front of a third fixture that implements the tasks extension itself
#    (FIXTURE_ERA=dual FIXTURE_TASKS=1), the tasks scenarios judged again (now the fixture's own tasks, under the
#    gateway's sealed ids), against baseline-server-2026-passthrough.txt;
# 6. client role with the newest suite: the client scenarios 2026-07-28 requires, each at that wire
#    (`--spec-version 2026-07-28`), judged against baseline-client-2026.txt;
# 7. for information only (never failing the run): the newest suite's 2025-11-25 server requirement set, through
#    the gateway of run 1.
#
#   tests/conformance/run-all.sh        (after `cargo build --bin switchyard`, or with SWITCHYARD_BIN)
#   CONFORMANCE_RUNS="server-2026" tests/conformance/run-all.sh    (only some runs: server, server-stdio, client,
#                         fixture-2026, server-2026, server-everything-2026, server-2026-passthrough, client-2026,
#                         server-next-2025)
#
# Everything listens on 127.0.0.1 only and is stopped on exit. Exit status 0 only when every run passes against
# its baseline; each run ends with its summary line (`conformance-server: …`, `conformance-server-stdio: …`,
# `conformance-client: …`, `conformance-fixture-2026: …`, `conformance-server-2026: …`, `conformance-server-everything-2026: …`,
# `conformance-server-2026-passthrough: …`, `conformance-client-2026: …`, `conformance-server-next-2025: …`): "P passed, F failed, X skipped" over
# scenarios, F the unexpected failures, X the baselined ones, and ", U unexpectedly passing" when baselined
# scenarios passed (shrink that baseline).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${SWITCHYARD_BIN:-$ROOT/target/debug/switchyard}"
NODE_MODULES="${SWITCHYARD_INTEROP_NODE_MODULES:-$ROOT/tests/interop/node_modules}"
NODE="${NODE:-node}"
[[ -x "$BIN" ]] || { echo "run-all.sh: $BIN is missing: cargo build --bin switchyard" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Waits until `curl URL` succeeds and its output satisfies the grep pattern.
wait_for() {
    local url="$1" pattern="$2" what="$3"
    for _ in $(seq 1 300); do
        if curl -s --max-time 1 "$url" 2>/dev/null | grep -q "$pattern"; then return 0; fi
        sleep 0.1
    done
    echo "run-all.sh: $what did not come up; logs:" >&2
    tail -n 20 "$work"/*.log >&2 || true
    exit 1
}

# The fixture in 2025's era for the 2025-11-25 runs (so they measure what they always did), and a second one
# serving both eras for the 2026-07-28 run (the gateway finds it modern and speaks 2026-07-28 to it).
start_fixture() {
    local name="$1" era="$2"
    fixture_port="$(free_port)"
    FIXTURE_ERA="$era" FIXTURE_TASKS="${3:-0}" PORT="$fixture_port" "$NODE" "$HERE/fixture.mjs" >"$work/$name.log" 2>&1 &
    pids+=($!)
}
start_fixture fixture legacy
legacy_fixture_port="$fixture_port"
start_fixture fixture-dual dual
dual_fixture_port="$fixture_port"
everything_port="$(free_port)"
(cd "$ROOT/tests/interop" && PORT="$everything_port" exec "$NODE" --require ./loopback-preload.cjs \
    "$NODE_MODULES/@modelcontextprotocol/server-everything/dist/index.js" streamableHttp) >"$work/everything.log" 2>&1 &
pids+=($!)

# Starts a gateway named $1 with the [[backends]] TOML in $2, waits until each backend named in $3 (space
# separated) is discovered, and sets gateway_port (no subshell, so the pid is kept for cleanup).
start_gateway() {
    local name="$1" backends="$2" backend
    cat >"$work/$name.toml" <<TOML
[server]
data_dir = "$work/data-$name"
[ledger]
url = "memory"
$backends
TOML
    gateway_port="$(free_port)"
    "$BIN" serve --config "$work/$name.toml" --listen "127.0.0.1:$gateway_port" >"$work/$name.log" 2>&1 &
    pids+=($!)
    # Ready once every backend is discovered (a backend still starting is retried by the gateway).
    for backend in $3; do
        wait_for "http://127.0.0.1:$gateway_port/readyz" "\"$backend\":{\"status\":\"discovered\"" \
            "$backend behind $name"
    done
}

# [[backends]] TOML: the fixture on port $1 (bare names) and server-everything (a second, prefixed backend)
# reached as the TOML lines in $2 say.
fixture_and_everything() {
    printf '[[backends]]\nname = "fixture"\nurl = "http://127.0.0.1:%s/mcp"\nprefix = ""\n' "$1"
    printf '[[backends]]\nname = "everything"\n%s\n' "$2"
}

everything_entry="$NODE_MODULES/@modelcontextprotocol/server-everything/dist/index.js"
everything_http="url = \"http://127.0.0.1:$everything_port/mcp\""
node_path="$(command -v "$NODE")"
start_gateway switchyard "$(fixture_and_everything "$legacy_fixture_port" "$everything_http")" "fixture everything"
http_port="$gateway_port"
start_gateway switchyard-stdio "$(fixture_and_everything "$legacy_fixture_port" "transport = \"stdio\"
command = \"$node_path\"
args = [\"$everything_entry\", \"stdio\"]
timeout = \"30s\"")" "fixture everything"
stdio_port="$gateway_port"
start_gateway switchyard-2026 "$(fixture_and_everything "$dual_fixture_port" "$everything_http")" "fixture everything"
modern_port="$gateway_port"
# server-everything alone, its names bare, for the 2026-07-28 suite (a 2025-era server behind a 2026 front).
start_gateway switchyard-everything "$(printf '[[backends]]\nname = "everything"\n%s\nprefix = ""\n' "$everything_http")" \
    everything
everything_gateway_port="$gateway_port"

# The tasks extension's scenarios, judged in the server-2026 run: the gateway runs the fixture's synchronous tools
# as its own tasks (the requirement set runs them, as extension scenarios, without scoring them).
TASKS_SCENARIOS="tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
    tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications
    tasks-required-task-error tasks-mrtr-composition"
ALL_RUNS="server server-stdio client fixture-2026 server-2026 server-everything-2026 server-2026-passthrough"
ALL_RUNS+=" client-2026 server-next-2025"
RUNS=" ${CONFORMANCE_RUNS:-$ALL_RUNS} "
runs() { [[ "$RUNS" == *" $1 "* ]]; }

status=0
if runs server; then
    echo "==> conformance, server role: Switchyard in front of the fixture and server-everything" >&2
    bash "$HERE/run-server-suite.sh" "http://127.0.0.1:$http_port/mcp" "$HERE/baseline-server.txt" || status=1
fi
if runs server-stdio; then
    echo "==> conformance, server role: Switchyard in front of the fixture and server-everything over stdio" >&2
    CONFORMANCE_LABEL=conformance-server-stdio \
        bash "$HERE/run-server-suite.sh" "http://127.0.0.1:$stdio_port/mcp" "$HERE/baseline-server-stdio.txt" || status=1
fi
if runs client; then
    echo "==> conformance, client role: Switchyard as the client of the suite's mock servers" >&2
    SWITCHYARD_BIN="$BIN" bash "$HERE/run-client-suite.sh" "$HERE/baseline-client.txt" || status=1
fi
if runs fixture-2026; then
    echo "==> conformance 0.2.0, server role, 2026-07-28 requirements: the dual-era fixture alone (no baseline)" >&2
    CONFORMANCE_PACKAGE=conformance-next CONFORMANCE_REQUIREMENTS=2026-07-28 CONFORMANCE_LABEL=conformance-fixture-2026 \
        bash "$HERE/run-server-suite.sh" "http://127.0.0.1:$dual_fixture_port/mcp" || status=1
fi
if runs server-2026; then
    echo "==> conformance 0.2.0, server role, 2026-07-28 requirements: Switchyard in front of the dual-era fixture" \
        "and server-everything" >&2
    CONFORMANCE_PACKAGE=conformance-next CONFORMANCE_REQUIREMENTS=2026-07-28 CONFORMANCE_LABEL=conformance-server-2026 \
        CONFORMANCE_ALSO_SCORED="$TASKS_SCENARIOS" \
        bash "$HERE/run-server-suite.sh" "http://127.0.0.1:$modern_port/mcp" "$HERE/baseline-server-2026.txt" || status=1
fi
if runs server-everything-2026; then
    echo "==> conformance 0.2.0, server role, 2026-07-28 requirements: Switchyard in front of server-everything alone" >&2
    CONFORMANCE_PACKAGE=conformance-next CONFORMANCE_REQUIREMENTS=2026-07-28 \
        CONFORMANCE_LABEL=conformance-server-everything-2026 bash "$HERE/run-server-suite.sh" \
        "http://127.0.0.1:$everything_gateway_port/mcp" "$HERE/baseline-server-everything-2026.txt" || status=1
fi
if runs server-2026-passthrough; then
    echo "==> conformance 0.2.0, server role, 2026-07-28 requirements: Switchyard passing through the tasks of a" \
        "fixture that runs them itself" >&2
    # Only this run needs the fixture in its tasks mode and its gateway: started here, not for every run.
    start_fixture fixture-tasks dual 1
    start_gateway switchyard-passthrough "$(printf '[[backends]]\nname = "fixture"\nurl = "http://127.0.0.1:%s/mcp"\nprefix = ""\ntasks = "passthrough"\n' "$fixture_port")" fixture
    CONFORMANCE_PACKAGE=conformance-next CONFORMANCE_REQUIREMENTS=2026-07-28 \
        CONFORMANCE_LABEL=conformance-server-2026-passthrough CONFORMANCE_ALSO_SCORED="$TASKS_SCENARIOS" \
        bash "$HERE/run-server-suite.sh" "http://127.0.0.1:$gateway_port/mcp" \
        "$HERE/baseline-server-2026-passthrough.txt" || status=1
fi
if runs client-2026; then
    echo "==> conformance 0.2.0, client role, 2026-07-28 requirements: Switchyard as the client of its mock servers" >&2
    client_2026="$("$NODE" --import "$HERE/node20-compat/register.mjs" \
        "$NODE_MODULES/conformance-next/dist/index.js" list --requirements 2026-07-28 |
        sed -n '/^Client scenarios/,/^$/s/^  - \([^ ]*\).*/\1/p')"
    CONFORMANCE_PACKAGE=conformance-next CONFORMANCE_SPEC_VERSION=2026-07-28 CONFORMANCE_LABEL=conformance-client-2026 \
        CONFORMANCE_CLIENT_SCENARIOS="$client_2026" SWITCHYARD_BIN="$BIN" \
        bash "$HERE/run-client-suite.sh" "$HERE/baseline-client-2026.txt" || status=1
fi
if runs server-next-2025; then
    echo "==> conformance 0.2.0, server role, 2025-11-25 requirements (for information; never fails the run)" >&2
    CONFORMANCE_PACKAGE=conformance-next CONFORMANCE_REQUIREMENTS=2025-11-25 \
        CONFORMANCE_LABEL=conformance-server-next-2025 \
        bash "$HERE/run-server-suite.sh" "http://127.0.0.1:$http_port/mcp" || true
fi
exit "$status"
