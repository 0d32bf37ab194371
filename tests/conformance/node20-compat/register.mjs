// Node 20 compatibility for @modelcontextprotocol/conformance 0.1.14–0.1.16.
//
//   node --import ./tests/conformance/node20-compat/register.mjs \
//     tests/interop/node_modules/@modelcontextprotocol/conformance/dist/index.js list
//   NODE_OPTIONS="--import /abs/path/tests/conformance/node20-compat/register.mjs" npx conformance ...
//
// The conformance bundle statically imports `globSync` from `fs`, which Node
// only has from 22 on, so on Node 20 every subcommand dies at load time. This
// registers a resolve hook (hooks.mjs) that gives that package, and only that
// package, an `fs` with a `globSync` export (fs-shim.mjs). Everything else
// imports the real `fs` unchanged. See shared reference conformance.md §1.2.
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);
