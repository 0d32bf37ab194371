#!/usr/bin/env bash
# Runs the official MCP conformance SERVER suite (@modelcontextprotocol/conformance
# 0.1.16, or the newest suite with CONFORMANCE_PACKAGE=conformance-next) against a
# running MCP endpoint, prints the per-scenario summary, and judges it against a
# baseline of expected failures.
#
#   tests/conformance/run-server-suite.sh URL [expected-failures-file]
#
#   URL                     e.g. http://127.0.0.1:3200/mcp (Switchyard) or the
#                           fixture's http://127.0.0.1:3101/mcp. Loopback only.
#   expected-failures-file  one scenario name per line; '#' starts a comment.
#                           Default: none (every scenario must pass). The
#                           project's baseline is tests/conformance/baseline-server.txt.
#
# Exit status: 0 when every scenario passed or is listed in the baseline; 1 when
# any scenario failed that the baseline does not list (or the runner could not
# run); 2 on bad usage. A listed scenario that passes is reported as
# "unexpectedly passing" (shrink the baseline) but does not fail the run;
# CONFORMANCE_STRICT_BASELINE=1 makes it fail.
#
# Environment:
#   CONFORMANCE_SUITE   --suite for the runner (default: all = active + the two
#                       pending scenarios json-schema-2020-12, server-sse-polling)
#   CONFORMANCE_PACKAGE the suite's package under node_modules (default:
#                       @modelcontextprotocol/conformance; conformance-next is the
#                       0.2.0 alpha)
#   CONFORMANCE_REQUIREMENTS  a spec revision (e.g. 2026-07-28): run exactly the
#                       server scenarios it requires (`--requirements`, newest
#                       suite only) instead of CONFORMANCE_SUITE, at its wire;
#                       the scenarios the runner adds that the revision does
#                       not score are reported but never counted, except
#   CONFORMANCE_ALSO_SCORED  extension scenarios (space-separated names) the
#                       runner adds with --requirements that are judged like
#                       the scored ones (e.g. the tasks extension's, for a
#                       server that offers it)
#   CONFORMANCE_OUT     where the runner writes checks.json files (default: a new
#                       directory under target/conformance/)
#   SWITCHYARD_INTEROP_NODE_MODULES  the node_modules holding the conformance
#                       package (default: tests/interop/node_modules)
#   NODE                the node binary (default: node)
#   CONFORMANCE_LABEL   the word that starts the summary line (default:
#                       conformance-server; run-all.sh's stdio run says
#                       conformance-server-stdio)
#
# A scenario passes when it has no FAILURE check (as the runner's own exit status
# has it); WARNINGs, and scenarios that passed without any SUCCESS check (the
# runner found nothing to test), are listed but do not fail the run. The last
# line is "conformance-server: P passed, F failed, X skipped" over scenarios,
# where F counts only unexpected failures and X the baselined ones, followed by
# ", U unexpectedly passing" when baselined scenarios passed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

usage() {
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
URL="$1"
BASELINE="${2:-}"
case "$URL" in
http://127.* | http://localhost[:/]* | http://\[::1\]*) ;;
*)
    echo "run-server-suite: refusing $URL: only loopback URLs are tested" >&2
    exit 2
    ;;
esac
if [[ -n "$BASELINE" && ! -f "$BASELINE" ]]; then
    echo "run-server-suite: no such baseline file: $BASELINE" >&2
    exit 2
fi

ME=run-server-suite
# shellcheck source=runner.sh
source "$HERE/runner.sh"

SUITE="${CONFORMANCE_SUITE:-all}"
OUT="${CONFORMANCE_OUT:-}"
if [[ -z "$OUT" ]]; then
    mkdir -p "$ROOT/target/conformance"
    OUT="$(mktemp -d "$ROOT/target/conformance/server-XXXXXX")"
fi
mkdir -p "$OUT"
LOG="$OUT/runner.log"

conformance() { "$NODE" --import "$HOOK" "$CLI" "$@"; }

REQUIREMENTS="${CONFORMANCE_REQUIREMENTS:-}"
if [[ -n "$REQUIREMENTS" ]]; then
    SELECTION=(--requirements "$REQUIREMENTS")
else
    SELECTION=(--suite "$SUITE")
fi
echo "==> conformance server --url $URL ${SELECTION[*]} (results in $OUT)" >&2
conformance server --url "$URL" "${SELECTION[@]}" -o "$OUT" >"$LOG" 2>&1
runner_status=$?

# The runner's own summary block.
if grep -q '=== SUMMARY ===' "$LOG"; then
    sed -n '/=== SUMMARY ===/,$p' "$LOG"
else
    echo "run-server-suite: the runner printed no summary (exit $runner_status); its output:" >&2
    tail -n 40 "$LOG" >&2
fi

# Scenarios the runner should have produced results for (the whole list only
# for --suite all and --requirements; other suites are checked against what they
# produced).
EXPECTED_LIST="$OUT/expected-scenarios.txt"
: >"$EXPECTED_LIST"
if [[ -n "$REQUIREMENTS" ]]; then
    conformance list --requirements "$REQUIREMENTS" 2>/dev/null |
        sed -n '/^Server scenarios/,/^$/s/^  - \([^ ]*\).*/\1/p' >"$EXPECTED_LIST"
    for name in ${CONFORMANCE_ALSO_SCORED:-}; do echo "$name" >>"$EXPECTED_LIST"; done
elif [[ "$SUITE" == "all" ]]; then
    conformance list --server 2>/dev/null | sed -n 's/^  - \([^ ]*\) .*/\1/p' >"$EXPECTED_LIST"
fi

# Judge every scenario from its checks.json.
"$NODE" - "$OUT" "$EXPECTED_LIST" "${BASELINE:-}" "${CONFORMANCE_STRICT_BASELINE:-0}" "${CONFORMANCE_LABEL:-conformance-server}" \
    "${REQUIREMENTS:+scored-only}" <<'EOF'
const fs = require("fs");
const path = require("path");
const [outDir, expectedFile, baselineFile, strict, label, scoredOnly] = process.argv.slice(2);

const baseline = new Set(
  (baselineFile ? fs.readFileSync(baselineFile, "utf8") : "")
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter(Boolean),
);

// server-<scenario>-<ISO timestamp with ':' and '.' as '-'>
const results = new Map();
for (const dir of fs.readdirSync(outDir)) {
  const m = /^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/.exec(dir);
  const file = path.join(outDir, dir, "checks.json");
  if (!m || !fs.existsSync(file)) continue;
  let checks;
  try {
    checks = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    checks = [{ status: "FAILURE", name: "checks.json", errorMessage: `unreadable: ${e.message}` }];
  }
  results.set(m[1], checks);
}

const expected = fs.readFileSync(expectedFile, "utf8").split("\n").filter(Boolean);
for (const name of expected) {
  if (!results.has(name)) {
    results.set(name, [{ status: "FAILURE", name: "no-result", errorMessage: "the runner wrote no result for it" }]);
  }
}
// With --requirements the runner also runs scenarios the revision does not score (extensions, pending ones):
// they are reported, never counted.
const notScored = [];
if (scoredOnly) {
  const scored = new Set(expected);
  for (const [name, checks] of [...results]) {
    if (scored.has(name)) continue;
    const failures = checks.filter((c) => c.status === "FAILURE").length;
    notScored.push(`${name}: ${failures === 0 ? "passed" : `failed (${failures} failing checks)`}`);
    results.delete(name);
  }
}
if (results.size === 0) {
  console.log("run-server-suite: no scenario results were written");
  console.log(`${label}: 0 passed, 1 failed`);
  process.exit(1);
}

let passed = 0, failed = 0, skipped = 0;
const unexpected = [], expectedFailures = [], stale = [], warnings = [], unchecked = [];
for (const [name, checks] of [...results].sort()) {
  const failures = checks.filter((c) => c.status === "FAILURE");
  for (const c of checks.filter((c) => c.status === "WARNING")) {
    warnings.push(`${name}: ${c.name} (${c.id}): ${c.errorMessage ?? c.description}`);
  }
  const listed = baseline.has(name);
  if (failures.length === 0) {
    passed += 1;
    if (!checks.some((c) => c.status === "SUCCESS")) {
      const info = checks.filter((c) => c.status === "INFO" && c.details?.message).map((c) => c.details.message);
      unchecked.push(`${name}${info.length ? `: ${info[info.length - 1]}` : ""}`);
    }
    if (listed) stale.push(name);
    continue;
  }
  const detail = failures.map((c) => `${c.name}${c.errorMessage ? `: ${c.errorMessage}` : ""}`).join("; ");
  if (listed) {
    skipped += 1;
    expectedFailures.push(`${name}: ${detail}`);
  } else {
    failed += 1;
    unexpected.push(`${name}: ${detail}`);
  }
}
for (const name of baseline) {
  if (!results.has(name)) console.log(`note: baseline lists ${name}, which did not run`);
}

const section = (title, lines) => {
  if (lines.length === 0) return;
  console.log(`\n${title}:`);
  for (const line of lines) console.log(`  - ${line}`);
};
section("NOT SCORED by the requirement set (reported only)", notScored.sort());
section("WARNINGS (do not fail the run)", warnings);
section("PASSED WITHOUT A SINGLE SUCCESS CHECK (not exercised; tier scoring would not count them)", unchecked);
section("EXPECTED FAILURES (in the baseline)", expectedFailures);
section("UNEXPECTEDLY PASSING (in the baseline; remove them from it)", stale);
section("UNEXPECTED FAILURES", unexpected);
console.log("");
console.log(
  `${label}: ${passed} passed, ${failed} failed, ${skipped} skipped` +
    (stale.length ? `, ${stale.length} unexpectedly passing` : ""),
);
process.exit(failed > 0 || (strict === "1" && stale.length > 0) ? 1 : 0);
EOF
