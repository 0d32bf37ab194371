// ESM resolve hook registered by register.mjs: inside the
// @modelcontextprotocol/conformance package (installed under its own name or
// under the `conformance-next` alias), `fs` and `node:fs` resolve to
// fs-shim.mjs (the real fs plus a `globSync` export). Every other specifier, and
// every import from outside that package, goes through unchanged.
const SHIM_URL = new URL("./fs-shim.mjs", import.meta.url).href;
const PACKAGE_SEGMENTS = ["/node_modules/@modelcontextprotocol/conformance/", "/node_modules/conformance-next/"];

function insideConformance(parentURL) {
  if (typeof parentURL !== "string") {
    return false;
  }
  // Windows-style separators never occur in file: URLs, but a symlinked or
  // pnpm-style layout still contains this segment.
  const path = decodeURIComponent(parentURL);
  return PACKAGE_SEGMENTS.some((segment) => path.includes(segment));
}

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === "fs" || specifier === "node:fs") && insideConformance(context.parentURL)) {
    return { url: SHIM_URL, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
