# Sourced by run-server-suite.sh and run-client-suite.sh: where the conformance runner is, and a check that it
# is installed. Expects HERE and ROOT; `ME` names the calling script in messages.
NODE="${NODE:-node}"
NODE_MODULES="${SWITCHYARD_INTEROP_NODE_MODULES:-$ROOT/tests/interop/node_modules}"
# CONFORMANCE_PACKAGE picks the installed suite: the pinned one, or `conformance-next` (package.json's alias of the
# newest suite, which runs the 2026-07-28 requirement set).
CONFORMANCE_PACKAGE="${CONFORMANCE_PACKAGE:-@modelcontextprotocol/conformance}"
CLI="$NODE_MODULES/$CONFORMANCE_PACKAGE/dist/index.js"
HOOK="$HERE/node20-compat/register.mjs"
if [[ ! -f "$CLI" ]]; then
    echo "$ME: $CLI not found: install the interop packages (scripts/test, or cd tests/interop && npm ci)" >&2
    exit 1
fi
