#!/usr/bin/env bash
# Runs the official MCP conformance CLIENT scenarios that apply to Switchyard
# (the four non-auth core ones: initialize, tools_call, sse-retry,
# elicitation-sep1034-client-defaults; the 14 core auth/* ones of 2025-11-25;
# the client-credentials extension ones) with Switchyard as the client under
# test: for each scenario the runner starts a mock server and launches
# client-wrapper.sh, which puts Switchyard in front of the mock and drives it
# from the front with drive-client.mjs.
#
#   tests/conformance/run-client-suite.sh [expected-failures-file]
#
#   expected-failures-file  one scenario name per line; '#' starts a comment
#                           (e.g. tests/conformance/baseline-client.txt).
#                           Default: none (every scenario must pass).
#
# Needs `cargo build --bin switchyard` first (or SWITCHYARD_BIN). The runner's
# mock servers listen on every interface, so when this runs as root the whole
# run happens inside a private network namespace (`unshare -n`, loopback only);
# otherwise it runs as is, and the mocks are only ever contacted on loopback.
#
# Scenarios run one after another, each in its own runner process (a
# scenario's verdict is the runner's exit status: any FAILURE or WARNING, a
# timeout, or a non-zero wrapper exit fails it). Exit status: 0 when every
# scenario passed or is listed in the baseline; 1 otherwise; 2 on bad usage.
# Before it, one line per suite ("conformance-client core|auth|extensions: P of
# N passed"); the last line is "conformance-client: P passed, F failed,
# X skipped" over scenarios (F: unexpected failures, X: baselined ones).
#
# Environment:
#   CONFORMANCE_CLIENT_SCENARIOS  space-separated scenarios to run instead
#   CONFORMANCE_OUT     where results go (default: a new directory under
#                       target/conformance/); per scenario checks.json,
#                       stdout.txt and stderr.txt (the wrapper's and
#                       Switchyard's logs)
#   CONFORMANCE_TIMEOUT_MS  per-scenario client timeout (default 30000)
#   CONFORMANCE_NO_NETNS=1  do not use a network namespace
#   CONFORMANCE_PACKAGE the suite's package (default @modelcontextprotocol/conformance;
#                       conformance-next is the 0.2.0 alpha)
#   CONFORMANCE_SPEC_VERSION  run each scenario at this revision's wire
#                       (`--spec-version`, e.g. 2026-07-28 with conformance-next)
#   CONFORMANCE_LABEL   the word that starts the summary lines (default:
#                       conformance-client)
#   SWITCHYARD_BIN, SWITCHYARD_INTEROP_NODE_MODULES, NODE
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

if [[ $# -gt 1 || "${1:-}" == -* ]]; then
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
fi
BASELINE="${1:-}"
if [[ -n "$BASELINE" && ! -f "$BASELINE" ]]; then
    echo "run-client-suite: no such baseline file: $BASELINE" >&2
    exit 2
fi
[[ -z "$BASELINE" || "$BASELINE" == /* ]] || BASELINE="$PWD/$BASELINE"

ME=run-client-suite
# shellcheck source=runner.sh
source "$HERE/runner.sh"
BIN="${SWITCHYARD_BIN:-target/debug/switchyard}"
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
if [[ ! -x "$BIN" ]]; then
    echo "run-client-suite: $BIN is not built (cargo build --bin switchyard)" >&2
    exit 1
fi
export SWITCHYARD_BIN="$BIN" SWITCHYARD_INTEROP_NODE_MODULES="$NODE_MODULES" NODE

CORE_SCENARIOS="initialize tools_call sse-retry elicitation-sep1034-client-defaults"
# The 14 core authorization scenarios of the 2025-11-25 set (Switchyard's backend OAuth client).
AUTH_SCENARIOS="auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 auth/basic-cimd
  auth/scope-from-www-authenticate auth/scope-from-scopes-supported auth/scope-omitted-when-undefined
  auth/scope-step-up auth/scope-retry-limit auth/token-endpoint-auth-basic auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none auth/pre-registration"
EXTENSION_SCENARIOS="auth/client-credentials-basic auth/client-credentials-jwt"
SCENARIOS="${CONFORMANCE_CLIENT_SCENARIOS:-$CORE_SCENARIOS $AUTH_SCENARIOS $EXTENSION_SCENARIOS}"
# One line: the list is written into a generated script and echoed in the log.
SCENARIOS="$(echo $SCENARIOS)"
TIMEOUT_MS="${CONFORMANCE_TIMEOUT_MS:-30000}"
OUT="${CONFORMANCE_OUT:-}"
if [[ -z "$OUT" ]]; then
    mkdir -p "$ROOT/target/conformance"
    OUT="$(mktemp -d "$ROOT/target/conformance/client-XXXXXX")"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

SPEC_VERSION="${CONFORMANCE_SPEC_VERSION:+--spec-version $CONFORMANCE_SPEC_VERSION}"
LABEL="${CONFORMANCE_LABEL:-conformance-client}"

# One runner per scenario; all of them inside one network namespace when we
# can make one.
RUN_ALL="$OUT/run-scenarios.sh"
cat >"$RUN_ALL" <<EOF
#!/usr/bin/env bash
set -u
cd $(printf '%q' "$ROOT")
for scenario in $SCENARIOS; do
    flat="\${scenario//\//_}"
    log="$OUT/\$flat.runner.log"
    $(printf '%q' "$NODE") --import $(printf '%q' "$HOOK") $(printf '%q' "$CLI") client \\
        --command $(printf '%q' "$HERE/client-wrapper.sh") --scenario "\$scenario" \\
        --timeout $TIMEOUT_MS $SPEC_VERSION -o $(printf '%q' "$OUT") >"\$log" 2>&1
    echo "\$?" >"$OUT/\$flat.status"
done
EOF
chmod +x "$RUN_ALL"

netns=0
if [[ "${CONFORMANCE_NO_NETNS:-0}" != 1 && "$(id -u)" == 0 ]] && command -v unshare >/dev/null &&
    unshare -n true 2>/dev/null; then
    netns=1
fi
echo "==> conformance client scenarios through Switchyard: $SCENARIOS" >&2
echo "    (results in $OUT$([[ $netns == 1 ]] && echo ', inside a private network namespace'))" >&2
if [[ $netns == 1 ]]; then
    unshare -n bash -c "ip link set lo up && exec $(printf '%q' "$RUN_ALL")"
else
    "$RUN_ALL"
fi

"$NODE" - "$OUT" "${BASELINE:-}" "$LABEL" $SCENARIOS <<'EOF'
const fs = require("fs");
const path = require("path");
const [outDir, baselineFile, label, ...scenarios] = process.argv.slice(2);

const baseline = new Set(
  (baselineFile ? fs.readFileSync(baselineFile, "utf8") : "")
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter(Boolean),
);

// The runner writes <scenario>-<ISO timestamp>/checks.json ('/' in a name
// becomes nested directories).
function checksFor(scenario) {
  const dir = path.join(outDir, path.dirname(scenario));
  const base = path.basename(scenario);
  if (!fs.existsSync(dir)) return undefined;
  const runs = fs
    .readdirSync(dir)
    .filter((d) => d.startsWith(`${base}-`) && /-\d{4}-\d\d-\d\dT[\d-]+Z$/.test(d))
    .sort();
  if (runs.length === 0) return undefined;
  const file = path.join(dir, runs[runs.length - 1], "checks.json");
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
}

let passed = 0, failed = 0, skipped = 0;
const unexpected = [], expectedFailures = [], stale = [];
console.log("=== CLIENT SCENARIOS THROUGH SWITCHYARD ===");
for (const scenario of scenarios) {
  const flat = scenario.replace(/\//g, "_");
  const statusFile = path.join(outDir, `${flat}.status`);
  const status = Number(fs.existsSync(statusFile) ? fs.readFileSync(statusFile, "utf8").trim() : "1");
  const checks = checksFor(scenario) ?? [];
  const count = (s) => checks.filter((c) => c.status === s).length;
  const ok = status === 0;
  console.log(
    `${ok ? "✓" : "✗"} ${scenario}: ${count("SUCCESS")} passed, ${count("FAILURE")} failed, ${count("WARNING")} warnings` +
      (ok ? "" : ` (runner exit ${status})`),
  );
  const problems = checks
    .filter((c) => c.status === "FAILURE" || c.status === "WARNING")
    .map((c) => `${c.status} ${c.name} (${c.id})${c.errorMessage ? `: ${c.errorMessage}` : ""}`);
  if (!ok && problems.length === 0) {
    problems.push(`the client failed (non-zero exit or timeout): see ${outDir}/${flat}.runner.log and the scenario's stderr.txt`);
  }
  for (const p of problems) console.log(`    ${p}`);
  const listed = baseline.has(scenario);
  if (ok) {
    passed += 1;
    if (listed) stale.push(scenario);
  } else if (listed) {
    skipped += 1;
    expectedFailures.push(scenario);
  } else {
    failed += 1;
    unexpected.push(scenario);
  }
}
if (expectedFailures.length) console.log(`\nexpected failures (in the baseline): ${expectedFailures.join(", ")}`);
if (stale.length) console.log(`\nUNEXPECTEDLY PASSING (in the baseline; remove them): ${stale.join(", ")}`);
if (unexpected.length) console.log(`\nUNEXPECTED FAILURES: ${unexpected.join(", ")}`);
console.log("");
// Per suite: the core non-auth scenarios, the core auth ones, and the extensions (client credentials).
const suiteOf = (scenario) =>
  scenario.startsWith("auth/client-credentials-") ? "extensions" : scenario.startsWith("auth/") ? "auth" : "core";
for (const suite of ["core", "auth", "extensions"]) {
  const members = scenarios.filter((scenario) => suiteOf(scenario) === suite);
  if (members.length === 0) continue;
  const ok = members.filter((scenario) => !unexpected.includes(scenario) && !expectedFailures.includes(scenario));
  console.log(`${label} ${suite}: ${ok.length} of ${members.length} passed`);
}
console.log(`${label}: ${passed} passed, ${failed} failed, ${skipped} skipped${stale.length ? `, ${stale.length} unexpectedly passing` : ""}`);
process.exit(failed > 0 ? 1 : 0);
EOF
