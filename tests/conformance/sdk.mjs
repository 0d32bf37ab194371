// Loads @modelcontextprotocol/sdk for the scripts in this directory.
//
// The npm packages are installed (by scripts/test) into tests/interop/node_modules,
// which Node's resolver does not search from tests/conformance/, so bare
// specifiers would not resolve here. `sdk("server/index.js")` imports the ESM
// build of that SDK module instead; SWITCHYARD_INTEROP_NODE_MODULES (exported
// by scripts/test) overrides where the packages are.
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

export const NODE_MODULES = resolve(
  process.env.SWITCHYARD_INTEROP_NODE_MODULES || join(here, "..", "interop", "node_modules"),
);

const SDK_ESM = join(NODE_MODULES, "@modelcontextprotocol", "sdk", "dist", "esm");

/** Imports the SDK module at `subpath` (e.g. "client/index.js"), ESM build. */
export async function sdk(subpath) {
  const file = join(SDK_ESM, subpath);
  if (!existsSync(file)) {
    throw new Error(
      `${file} not found: install the interop packages first (scripts/test does, or ` +
        "`cd tests/interop && npm ci`), or point SWITCHYARD_INTEROP_NODE_MODULES at them",
    );
  }
  return import(pathToFileURL(file).href);
}
