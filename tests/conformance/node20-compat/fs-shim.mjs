// The `fs` module that the conformance bundle sees on Node 20 (hooks.mjs maps
// it here): everything `node:fs` exports, plus `globSync`, which the bundle
// imports statically but uses only in its `tier-check` subcommand.
import fs from "node:fs";

export * from "node:fs";
export default fs;

function globSyncUnavailable() {
  throw new Error(
    `fs.globSync needs Node >= 22 (this is Node ${process.versions.node}); ` +
      "only the conformance 'tier-check' subcommand uses it",
  );
}

export const globSync = typeof fs.globSync === "function" ? fs.globSync : globSyncUnavailable;
