#!/usr/bin/env node
// The agent in front of Switchyard for the conformance CLIENT scenarios: an MCP
// client on the official TypeScript SDK that connects to Switchyard's /mcp,
// initializes, lists the tools and calls them, so that Switchyard's backend
// client does what the scenario's mock server checks. Started by
// client-wrapper.sh; usable on its own against any MCP endpoint:
//
//   node tests/conformance/drive-client.mjs http://127.0.0.1:PORT/mcp
//
// What it does, by MCP_CONFORMANCE_SCENARIO (set by the conformance runner):
//   initialize, json-schema-ref-no-deref
//                initialize + tools/list only (the first mock answers any
//                other method with {}, which is no tool result; the second
//                checks only that listing never fetches a $ref's URL, and
//                implements no tools/call)
//   anything else (tools_call, sse-retry, elicitation-sep1034-client-defaults,
//                or unset): initialize, tools/list, then call every listed tool
//                with arguments made up from its inputSchema (numbers 1,
//                strings "x", booleans true, arrays [], objects {}); a tool
//                named in DRIVE_TOOLS (comma-separated) restricts the calls.
//                When the runner hands the scenario's context over
//                (MCP_CONFORMANCE_CONTEXT, JSON) with `toolCalls`
//                ([{name, arguments}], e.g. http-custom-headers), exactly those
//                calls are made, with those arguments.
//
// Client capabilities: sampling (answers with a canned message) and
// elicitation in form mode with applyDefaults, which the SEP-1034 client
// scenario needs: the elicitation handler accepts with empty content and the
// SDK fills every field from the schema's defaults.
//
// Exit status 0 when every request succeeded and no tool result had isError;
// 1 otherwise; 2 on bad usage. Progress goes to stderr.
//
// Environment: DRIVE_CALL_TIMEOUT_MS (default 20000) bounds each request;
// DRIVE_CAPABILITIES (JSON) replaces the client capabilities above, e.g. '{}'
// to see how Switchyard behaves for an agent that declares none.
import { sdk } from "./sdk.mjs";

const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { CreateMessageRequestSchema, ElicitRequestSchema, LoggingMessageNotificationSchema } =
  await sdk("types.js");

const url = process.argv[2];
if (!url) {
  console.error("usage: drive-client.mjs <MCP endpoint URL>");
  process.exit(2);
}
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const timeout = Number(process.env.DRIVE_CALL_TIMEOUT_MS ?? 20000);
const onlyTools = (process.env.DRIVE_TOOLS ?? "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);

const say = (...args) => console.error("drive-client:", ...args);
const LIST_ONLY = new Set(["initialize", "json-schema-ref-no-deref"]);

// The calls the scenario asks for in its context, if it names any.
function contextCalls() {
  const raw = process.env.MCP_CONFORMANCE_CONTEXT;
  if (!raw) {
    return undefined;
  }
  let context;
  try {
    context = JSON.parse(raw);
  } catch (error) {
    throw new Error(`MCP_CONFORMANCE_CONTEXT is not JSON: ${error.message}`);
  }
  return Array.isArray(context?.toolCalls) ? context.toolCalls : undefined;
}

function exampleValue(schema) {
  if (!schema || typeof schema !== "object") {
    return "x";
  }
  if ("default" in schema) {
    return schema.default;
  }
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    return schema.enum[0];
  }
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "number":
    case "integer":
      return 1;
    case "boolean":
      return true;
    case "array":
      return [];
    case "object":
      return {};
    case "null":
      return null;
    default:
      return "x";
  }
}

function exampleArguments(inputSchema) {
  const args = {};
  for (const [name, schema] of Object.entries(inputSchema?.properties ?? {})) {
    args[name] = exampleValue(schema);
  }
  return args;
}

const capabilities = process.env.DRIVE_CAPABILITIES
  ? JSON.parse(process.env.DRIVE_CAPABILITIES)
  : { sampling: {}, elicitation: { form: { applyDefaults: true }, url: {} } };

// URL-mode elicitation (MCP 2025-11-25): Switchyard answers a request that needs
// the user's authorization at a backend with error -32042 naming the URL of its
// own start page (/oauth/start). Acting as the user's browser, the driver opens
// it (keeping the cookie it sets), submits its consent form, follows the
// redirects (the mock authorization server approves at once and redirects to
// Switchyard's /oauth/callback, which needs that cookie) and then retries the
// request, at most AUTHORIZE_ROUNDS times.
const URL_ELICITATION_REQUIRED = -32042;
const AUTHORIZE_ROUNDS = 3;
const MAX_REDIRECTS = 10;

// A browser of one origin's cookies (the gateway's): sent back to that origin only.
function browser(origin) {
  const cookies = new Map();
  return async (url, init = {}) => {
    const target = new URL(url);
    const headers = { ...(init.headers ?? {}) };
    if (target.origin === origin && cookies.size > 0) {
      headers.cookie = [...cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    }
    const response = await fetch(target, { ...init, headers, redirect: "manual" });
    if (target.origin === origin) {
      for (const cookie of response.headers.getSetCookie()) {
        const [pair, ...attributes] = cookie.split(";");
        const at = pair.indexOf("=");
        const name = pair.slice(0, at).trim();
        if (attributes.some((attribute) => attribute.trim() === "Max-Age=0")) cookies.delete(name);
        else cookies.set(name, pair.slice(at + 1));
      }
    }
    return response;
  };
}

function hiddenField(page, name) {
  const found = page.match(new RegExp(`name="${name}" value="([^"]*)"`));
  if (!found) throw new Error(`the start page has no \`${name}\` field`);
  return found[1];
}

async function authorizeOne(url) {
  const open = browser(new URL(url).origin);
  say(`authorizing: GET ${url}`);
  const start = await open(url);
  const consentPage = await start.text();
  if (start.status !== 200) throw new Error(`the start page answered HTTP ${start.status}`);
  const form = new URLSearchParams({ flow: hiddenField(consentPage, "flow"), consent: hiddenField(consentPage, "consent") });
  let response = await open(new URL("start", url), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form.toString(),
  });
  for (let hop = 0; response.status >= 300 && response.status < 400 && hop < MAX_REDIRECTS; hop += 1) {
    response = await open(new URL(response.headers.get("location"), response.url || url));
  }
  const page = (await response.text()).replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim();
  say(`authorization page ${response.status}: ${page.slice(0, 200)}`);
  if (!response.ok) {
    throw new Error(`authorization failed with HTTP ${response.status}`);
  }
}

async function authorize(error) {
  const elicitations = error?.data?.elicitations ?? [];
  for (const elicitation of elicitations) {
    await authorizeOne(elicitation.url);
  }
  return elicitations.length > 0;
}

async function withAuthorization(request) {
  for (let round = 0; ; round += 1) {
    try {
      return await request();
    } catch (error) {
      if (error?.code !== URL_ELICITATION_REQUIRED || round >= AUTHORIZE_ROUNDS || !(await authorize(error))) {
        throw error;
      }
    }
  }
}
const client = new Client({ name: "switchyard-conformance-driver", version: "1.0.0" }, { capabilities });

if (capabilities.elicitation) client.setRequestHandler(ElicitRequestSchema, async (request) => {
  say(`elicitation/create: ${JSON.stringify(request.params.message)}; accepting with the schema's defaults`);
  return { action: "accept", content: {} };
});

if (capabilities.sampling) client.setRequestHandler(CreateMessageRequestSchema, async () => {
  say("sampling/createMessage: answering with a canned message");
  return {
    role: "assistant",
    content: { type: "text", text: "A canned response from the conformance driver" },
    model: "switchyard-conformance-driver",
    stopReason: "endTurn",
  };
});

client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
  say(`log ${notification.params.level}: ${JSON.stringify(notification.params.data)}`);
});

let failures = 0;
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport, { timeout });
  const server = client.getServerVersion();
  say(`initialized with ${server?.name} ${server?.version}, protocol ${transport.protocolVersion ?? "?"}`);

  const tools = [];
  let cursor;
  do {
    const page = await withAuthorization(() => client.listTools(cursor ? { cursor } : {}, { timeout }));
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  say(`tools/list: ${tools.map((t) => t.name).join(", ") || "(none)"}`);

  if (!LIST_ONLY.has(scenario)) {
    const asked = contextCalls();
    const wanted = asked ? asked.map((call) => call.name) : onlyTools;
    const listed = wanted.length > 0 ? tools.filter((t) => wanted.includes(t.name)) : tools;
    for (const name of wanted.filter((n) => !tools.some((t) => t.name === n))) {
      say(`FAILED: tool ${name} is not listed`);
      failures += 1;
    }
    const toCall = asked
      ? asked.filter((call) => listed.some((t) => t.name === call.name))
      : listed.map((tool) => ({ name: tool.name, arguments: exampleArguments(tool.inputSchema) }));
    for (const { name, arguments: args } of toCall) {
      say(`tools/call ${name} ${JSON.stringify(args)}`);
      const started = Date.now();
      try {
        const result = await withAuthorization(() =>
          client.callTool({ name, arguments: args }, undefined, { timeout, resetTimeoutOnProgress: true }),
        );
        const elapsed = Date.now() - started;
        const summary = JSON.stringify(result.content ?? result).slice(0, 300);
        if (result.isError) {
          failures += 1;
          say(`FAILED: ${name} returned isError after ${elapsed} ms: ${summary}`);
        } else {
          say(`${name} returned after ${elapsed} ms: ${summary}`);
        }
      } catch (error) {
        failures += 1;
        say(`FAILED: ${name} after ${Date.now() - started} ms: ${error?.message ?? error}`);
      }
    }
  }
} catch (error) {
  failures += 1;
  say(`FAILED: ${error?.message ?? error}`);
} finally {
  try {
    await transport.terminateSession();
  } catch {
    // A server without sessions or DELETE is fine.
  }
  await client.close().catch(() => {});
}

say(failures === 0 ? "done" : `${failures} failure(s)`);
process.exit(failures === 0 ? 0 : 1);
