#!/usr/bin/env node
// Switchyard's conformance backend fixture: an MCP server on the official
// TypeScript SDK that exposes the `test_*` surface the
// @modelcontextprotocol/conformance 0.1.16 server scenarios call (tools,
// resources, templates, subscriptions, prompts, completions, logging), so the
// suite can be run against Switchyard with this fixture as its backend — or
// directly against the fixture, as a baseline.
//
//   PORT=3101 node tests/conformance/fixture.mjs
//   FIXTURE_ERA=dual PORT=3101 node tests/conformance/fixture.mjs
//   FIXTURE_ERA=dual FIXTURE_TASKS=1 PORT=3101 node tests/conformance/fixture.mjs
//
// Streamable HTTP at http://127.0.0.1:$PORT/mcp (loopback only; PORT=0 picks a
// free port). Once listening it prints one line to stdout:
//   switchyard-conformance-fixture listening on http://127.0.0.1:<port>/mcp
//
// Written for this project from the scenario descriptions (shared reference
// conformance.md §7–§8); it is not the upstream example server.
//
// Wire behaviour:
// - stateful sessions (Mcp-Session-Id), one SDK `Server` per session; an
//   in-memory event store makes every SSE stream resumable (priming event with
//   `retry:` on each POST stream; GET with Last-Event-ID replays);
// - DNS-rebinding protection: a Host that is not localhost/127.0.0.1/[::1], or
//   an Origin that is not a loopback page, gets 403;
// - unknown or terminated session ids get 404 (POST, GET and DELETE);
// - server-to-client requests (sampling/createMessage, elicitation/create) are
//   sent on the session's standalone GET stream when one is open (as the
//   reference server does), otherwise on the POST stream of the tools/call that
//   caused them. FIXTURE_SERVER_REQUESTS=standalone|related forces one or the
//   other;
// - a POST whose MCP-Protocol-Version header names an older (still supported)
//   version than the session negotiated is handled as the negotiated version
//   (the server-sse-polling scenario sends raw 2025-03-26 POSTs on a 2025-11-25
//   session; without this the SDK would neither prime the stream nor let
//   test_reconnection close it).
//
// Protocol eras (FIXTURE_ERA):
// - legacy (default): the 2025-11-25 session-based wire below, as before;
// - dual: both eras on one endpoint — a POST whose params._meta (or, lacking
//   that, whose MCP-Protocol-Version header) names a 2026-07-28 version is
//   served statelessly (fixture-modern.mjs, with the extra tools and prompt of
//   fixture-modern-tools.mjs that only this era lists), `initialize` and live
//   session ids keep the legacy wire;
// - modern: 2026-07-28 only — GET and DELETE get 405, and every request
//   without the modern _meta (initialize included) gets 400 with a -32022
//   error naming the supported versions.
//
// Tasks (FIXTURE_TASKS): by default the tools the tasks scenarios name
// (greet, slow_compute, failing_job, protocol_error_job, confirm_delete,
// multi_input, test_tool_with_task) are plain synchronous tools, for a gateway
// to run as its own tasks; with FIXTURE_TASKS=1 (dual or modern era only) the
// 2026-07-28 side runs them as tasks itself (fixture-modern-tasks.mjs), for a
// gateway to pass through.
//
// Environment:
//   PORT                        listening port (default 3101; 0 = any free port)
//   FIXTURE_ERA                 legacy (default) | dual | modern
//   FIXTURE_RETRY_MS            the SSE `retry:` hint, in ms (default 500)
//   FIXTURE_SERVER_REQUESTS     auto (default) | standalone | related
//   FIXTURE_TASKS=1             the 2026-07-28 side implements the tasks extension
//   FIXTURE_QUIET=1             no per-request log lines on stderr
//   SWITCHYARD_EXIT_ON_STDIN_EOF=1  exit when stdin reaches end-of-file (lets a
//                               harness holding the pipe take the fixture down
//                               with it even if the harness dies)
import { randomUUID } from "node:crypto";
import { deflateSync } from "node:zlib";

import {
  InputRequired,
  MODERN_VERSIONS,
  MissingCapability,
  createModernHandler,
  modernVersionOf,
} from "./fixture-modern.mjs";
import { MODERN_PROMPTS, modernPromptHandlers, modernToolHandlers, modernTools } from "./fixture-modern-tools.mjs";
import { sdk } from "./sdk.mjs";

const { createMcpExpressApp } = await sdk("server/express.js");
const { Server } = await sdk("server/index.js");
const { StreamableHTTPServerTransport } = await sdk("server/streamableHttp.js");
const {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  isInitializeRequest,
  LATEST_PROTOCOL_VERSION,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnsubscribeRequestSchema,
} = await sdk("types.js");

const HOST = "127.0.0.1";
const PORT = Number(process.env.PORT ?? 3101);
const RETRY_MS = Number(process.env.FIXTURE_RETRY_MS ?? 500);
const SERVER_REQUESTS = process.env.FIXTURE_SERVER_REQUESTS ?? "auto";
const QUIET = process.env.FIXTURE_QUIET === "1";
const ERA = process.env.FIXTURE_ERA ?? "legacy";
const TASKS = process.env.FIXTURE_TASKS ?? "0";

if (!Number.isInteger(PORT) || PORT < 0 || PORT > 65535) {
  console.error(`fixture: bad PORT ${JSON.stringify(process.env.PORT)}`);
  process.exit(2);
}
if (!["legacy", "dual", "modern"].includes(ERA)) {
  console.error(`fixture: FIXTURE_ERA must be legacy, dual or modern`);
  process.exit(2);
}
if (!["0", "1"].includes(TASKS) || (TASKS === "1" && ERA === "legacy")) {
  console.error(`fixture: FIXTURE_TASKS must be 0 or 1, and 1 needs FIXTURE_ERA dual or modern`);
  process.exit(2);
}
if (!["auto", "standalone", "related"].includes(SERVER_REQUESTS)) {
  console.error(`fixture: FIXTURE_SERVER_REQUESTS must be auto, standalone or related`);
  process.exit(2);
}

function log(...args) {
  if (!QUIET) {
    console.error("fixture:", ...args);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Test media, made here rather than shipped: a 1x1 red PNG and a short WAV.

function crc32(buf) {
  let crc = ~0;
  for (const byte of buf) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) {
      crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
    }
  }
  return ~crc >>> 0;
}

function pngChunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

function redPixelPng() {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(1, 0); // width
  ihdr.writeUInt32BE(1, 4); // height
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: truecolour
  // compression, filter, interlace: 0
  const scanline = Buffer.from([0, 0xff, 0x00, 0x00]); // filter byte + RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk("IHDR", ihdr),
    pngChunk("IDAT", deflateSync(scanline)),
    pngChunk("IEND", Buffer.alloc(0)),
  ]);
}

function shortWav() {
  // 8 kHz, mono, 16-bit PCM, 0.01 s of a 440 Hz tone.
  const rate = 8000;
  const samples = 80;
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) {
    data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), i * 2);
  }
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "ascii");
  header.writeUInt32LE(36 + data.length, 4);
  header.write("WAVE", 8, "ascii");
  header.write("fmt ", 12, "ascii");
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // channels
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write("data", 36, "ascii");
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

const PNG_BASE64 = redPixelPng().toString("base64");
const WAV_BASE64 = shortWav().toString("base64");

// ---------------------------------------------------------------------------
// The test surface.

const NO_ARGS = { type: "object", properties: {} };

const TOOLS = [
  {
    name: "test_simple_text",
    description: "Returns a simple text content block",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_image_content",
    description: "Returns an image content block (a 1x1 red PNG)",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_audio_content",
    description: "Returns an audio content block (a short WAV)",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_embedded_resource",
    description: "Returns an embedded text resource",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_multiple_content_types",
    description: "Returns text, image and embedded resource content in one result",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_tool_with_logging",
    description: "Sends three info log notifications (about 50 ms apart) while it runs",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_tool_with_progress",
    description: "Reports progress 0, 50 and 100 of 100 (about 50 ms apart) when given a progress token",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_error_handling",
    description: "Always fails, with an isError tool result",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_sampling",
    description: "Asks the client for an LLM completion (sampling/createMessage) and returns it",
    inputSchema: {
      type: "object",
      properties: { prompt: { type: "string", description: "The prompt to send to the LLM" } },
      required: ["prompt"],
    },
  },
  {
    name: "test_elicitation",
    description: "Asks the client for a username and an email (elicitation/create) and returns the answer",
    inputSchema: {
      type: "object",
      properties: { message: { type: "string", description: "The message to show the user" } },
      required: ["message"],
    },
  },
  {
    name: "test_elicitation_sep1034_defaults",
    description: "Elicitation whose schema has a default for every primitive type (SEP-1034)",
    inputSchema: NO_ARGS,
  },
  {
    name: "test_elicitation_sep1330_enums",
    description: "Elicitation whose schema has all five enum variants (SEP-1330)",
    inputSchema: NO_ARGS,
  },
  {
    name: "json_schema_2020_12_tool",
    description: "Tool with JSON Schema 2020-12 features",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: {
          type: "object",
          properties: {
            street: { type: "string" },
            city: { type: "string" },
          },
        },
      },
      properties: {
        name: { type: "string" },
        address: { $ref: "#/$defs/address" },
      },
      additionalProperties: false,
    },
  },
  {
    name: "test_reconnection",
    description: "Closes the SSE stream of its own POST mid-call, then completes (SEP-1699 polling)",
    inputSchema: NO_ARGS,
  },
  // The tools the tasks extension's scenarios name, as plain synchronous tools: unless FIXTURE_TASKS=1, the
  // fixture implements no tasks, so a gateway in front of it must run them as its own tasks. `failing_job` says it
  // requires tasks (a gateway keeps that and refuses a call that cannot become a task).
  {
    name: "greet",
    description: "Returns Hello, {name}!",
    inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  },
  {
    name: "slow_compute",
    description: "Sleeps `seconds` seconds, then returns a result naming `label`",
    inputSchema: { type: "object", properties: { seconds: { type: "number" }, label: { type: "string" } } },
  },
  {
    name: "failing_job",
    description: "Returns a tool execution error after about a second",
    inputSchema: NO_ARGS,
    execution: { taskSupport: "required" },
  },
  {
    name: "protocol_error_job",
    description: "Fails after about a second with a JSON-RPC (protocol) error instead of a result",
    inputSchema: NO_ARGS,
  },
  {
    name: "confirm_delete",
    description: "Deletes `filename` (a stand-in: it deletes nothing) and says so",
    inputSchema: { type: "object", properties: { filename: { type: "string" } } },
  },
];

/** A tool failure that is a protocol error (a JSON-RPC error), not a tool result with isError. */
class ProtocolFault extends McpError {}

const SEP1034_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", description: "User name", default: "John Doe" },
    age: { type: "integer", description: "User age", default: 30 },
    score: { type: "number", description: "User score", default: 95.5 },
    status: {
      type: "string",
      description: "User status",
      enum: ["active", "inactive", "pending"],
      default: "active",
    },
    verified: { type: "boolean", description: "Verification status", default: true },
  },
};

const SEP1330_SCHEMA = {
  type: "object",
  properties: {
    untitledSingle: {
      type: "string",
      description: "Untitled single-select enum",
      enum: ["option1", "option2", "option3"],
    },
    titledSingle: {
      type: "string",
      description: "Titled single-select enum",
      oneOf: [
        { const: "value1", title: "First Option" },
        { const: "value2", title: "Second Option" },
        { const: "value3", title: "Third Option" },
      ],
    },
    legacyEnum: {
      type: "string",
      description: "Legacy titled enum (enumNames, deprecated)",
      enum: ["opt1", "opt2", "opt3"],
      enumNames: ["Option One", "Option Two", "Option Three"],
    },
    untitledMulti: {
      type: "array",
      description: "Untitled multi-select enum",
      items: { type: "string", enum: ["option1", "option2", "option3"] },
    },
    titledMulti: {
      type: "array",
      description: "Titled multi-select enum",
      items: {
        anyOf: [
          { const: "value1", title: "First Choice" },
          { const: "value2", title: "Second Choice" },
          { const: "value3", title: "Third Choice" },
        ],
      },
    },
  },
};

const RESOURCES = [
  {
    uri: "test://static-text",
    name: "static-text",
    title: "Static text resource",
    description: "A static text resource for testing",
    mimeType: "text/plain",
  },
  {
    uri: "test://static-binary",
    name: "static-binary",
    title: "Static binary resource",
    description: "A static binary resource (a 1x1 PNG) for testing",
    mimeType: "image/png",
  },
  {
    uri: "test://watched-resource",
    name: "watched-resource",
    title: "Watched resource",
    description: "A resource that can be subscribed to",
    mimeType: "text/plain",
  },
];

const RESOURCE_TEMPLATES = [
  {
    uriTemplate: "test://template/{id}/data",
    name: "template-data",
    title: "Templated data",
    description: "JSON data for the id in the URI",
    mimeType: "application/json",
  },
];

const TEMPLATE_RE = /^test:\/\/template\/([^/]+)\/data$/;

const PROMPTS = [
  {
    name: "test_simple_prompt",
    description: "A simple prompt without arguments",
  },
  {
    name: "test_prompt_with_arguments",
    description: "A prompt with two required arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
  },
  {
    name: "test_prompt_with_embedded_resource",
    description: "A prompt that embeds a resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
  },
  {
    name: "test_prompt_with_image",
    description: "A prompt with image content",
  },
];

const COMPLETIONS = {
  "ref/prompt test_prompt_with_arguments arg1": ["paris", "park", "party"],
  "ref/prompt test_prompt_with_arguments arg2": ["hello", "help", "world"],
  "ref/resource test://template/{id}/data id": ["1", "123", "456"],
};

const text = (t) => ({ type: "text", text: t });
const toolError = (message) => ({ isError: true, content: [text(message)] });

// The tools, for either era: `env` says what the caller declared (`capabilities()`), how the tool asks the
// client something (`serverRequest(extra, request, schema, key)`: a server-to-client request on a session, an
// input request of a multi round-trip result without one), how it logs (`sendLog`), and names the caller in
// the log (`label()`).
function toolHandlers(env) {
  const { capabilities, serverRequest, sendLog, label } = env;
  return {
    test_simple_text: async () => ({
      content: [text("This is a simple text response for testing.")],
    }),

    greet: async (args) => ({ content: [text(`Hello, ${args.name ?? "World"}!`)] }),

    slow_compute: async (args, extra) => {
      const seconds = Math.max(0, Number(args.seconds ?? 1));
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, seconds * 1000);
        extra?.signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
      return { content: [text(`computed ${args.label ?? "result"} after ${seconds}s`)] };
    },

    failing_job: async () => {
      await sleep(1000);
      return toolError("failing_job failed, as it always does");
    },

    protocol_error_job: async () => {
      await sleep(1000);
      throw new ProtocolFault(ErrorCode.InternalError, "protocol_error_job failed with a protocol error");
    },

    confirm_delete: async (args) => ({ content: [text(`deleted ${args.filename ?? "nothing"}`)] }),

    test_image_content: async () => ({
      content: [{ type: "image", data: PNG_BASE64, mimeType: "image/png" }],
    }),

    test_audio_content: async () => ({
      content: [{ type: "audio", data: WAV_BASE64, mimeType: "audio/wav" }],
    }),

    test_embedded_resource: async () => ({
      content: [
        {
          type: "resource",
          resource: {
            uri: "test://embedded-resource",
            mimeType: "text/plain",
            text: "This is an embedded resource content.",
          },
        },
      ],
    }),

    test_multiple_content_types: async () => ({
      content: [
        text("Multiple content types test:"),
        { type: "image", data: PNG_BASE64, mimeType: "image/png" },
        {
          type: "resource",
          resource: {
            uri: "test://mixed-content-resource",
            mimeType: "application/json",
            text: JSON.stringify({ test: "data", value: 123 }),
          },
        },
      ],
    }),

    test_tool_with_logging: async (_args, extra) => {
      await sendLog(extra, "info", "Tool execution started");
      await sleep(50);
      await sendLog(extra, "info", "Tool processing data");
      await sleep(50);
      await sendLog(extra, "info", "Tool execution completed");
      return { content: [text("Tool with logging executed successfully")] };
    },

    test_tool_with_progress: async (_args, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (const [i, progress] of [0, 50, 100].entries()) {
        if (i > 0) {
          await sleep(50);
        }
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress, total: 100, message: `Completed step ${i + 1} of 3` },
          });
        }
      }
      return {
        content: [
          text(
            progressToken !== undefined
              ? "Tool with progress executed successfully"
              : "Tool with progress executed (no progress token given)",
          ),
        ],
      };
    },

    test_error_handling: async () => toolError("This tool intentionally returns an error for testing"),

    test_sampling: async (args, extra) => {
      if (typeof args.prompt !== "string") {
        return toolError("test_sampling needs a string argument 'prompt'");
      }
      if (!capabilities()?.sampling) {
        return toolError("The client does not support sampling (no 'sampling' capability)");
      }
      const result = await serverRequest(
        extra,
        {
          method: "sampling/createMessage",
          params: {
            messages: [{ role: "user", content: { type: "text", text: args.prompt } }],
            maxTokens: 100,
          },
        },
        CreateMessageResultSchema,
        "sampling",
      );
      const reply = result.content?.type === "text" ? result.content.text : JSON.stringify(result.content);
      return { content: [text(`LLM response: ${reply}`)] };
    },

    test_elicitation: async (args, extra) => {
      if (typeof args.message !== "string") {
        return toolError("test_elicitation needs a string argument 'message'");
      }
      if (!capabilities()?.elicitation) {
        return toolError("The client does not support elicitation (no 'elicitation' capability)");
      }
      const result = await serverRequest(
        extra,
        {
          method: "elicitation/create",
          params: {
            message: args.message,
            requestedSchema: {
              type: "object",
              properties: {
                username: { type: "string", description: "User's response" },
                email: { type: "string", description: "User's email address" },
              },
              required: ["username", "email"],
            },
          },
        },
        ElicitResultSchema,
        "elicitation",
      );
      return {
        content: [text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)],
      };
    },

    test_elicitation_sep1034_defaults: async (_args, extra) => elicitWith(extra, SEP1034_SCHEMA, "defaults"),

    test_elicitation_sep1330_enums: async (_args, extra) => elicitWith(extra, SEP1330_SCHEMA, "enums"),

    json_schema_2020_12_tool: async (args) => ({
      content: [text(`json_schema_2020_12_tool called with ${JSON.stringify(args)}`)],
    }),

    test_reconnection: async (_args, extra) => {
      // Let the priming event (and anything before it) go out, then end this
      // POST's SSE stream without the result; the client resumes with GET and
      // Last-Event-ID after `retry`, and the result is replayed from the event
      // store. Without an event store or on an old protocol version the SDK
      // offers no closeSSEStream: then the call simply completes.
      await sleep(100);
      const closed = typeof extra.closeSSEStream === "function";
      if (closed) {
        log(`${label()}: test_reconnection closes the stream of request ${extra.requestId}`);
        extra.closeSSEStream();
      }
      await sleep(200);
      return {
        content: [
          text(
            closed
              ? "Reconnection test completed: the result was sent after the stream was closed"
              : "Reconnection test completed (the stream could not be closed)",
          ),
        ],
      };
    },
  };

  async function elicitWith(extra, requestedSchema, what) {
    if (!capabilities()?.elicitation) {
      return toolError("The client does not support elicitation (no 'elicitation' capability)");
    }
    const result = await serverRequest(
      extra,
      {
        method: "elicitation/create",
        params: { message: `Please review and update the form fields (${what} test)`, requestedSchema },
      },
      ElicitResultSchema,
      "elicitation",
    );
    return {
      content: [
        text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`),
      ],
    };
  }
}

// Runs a tool of `handlers`: an unknown one is -32602; a failure inside a tool is a tool result, not a protocol
// error — except a question for the client (a modern multi round-trip result).
async function runTool(handlers, name, args, extra) {
  const tool = handlers[name];
  if (!tool) {
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
  }
  try {
    return await tool(args, extra);
  } catch (error) {
    if (error instanceof InputRequired || error instanceof MissingCapability || error instanceof ProtocolFault) {
      throw error;
    }
    return toolError(`${name} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

// A resource's contents, or null when there is no such resource (each era has its own error for that).
function readResource(uri) {
  switch (uri) {
    case "test://static-text":
      return {
        contents: [{ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }],
      };
    case "test://static-binary":
      return { contents: [{ uri, mimeType: "image/png", blob: PNG_BASE64 }] };
    case "test://watched-resource":
      return {
        contents: [{ uri, mimeType: "text/plain", text: `Watched resource content at ${new Date().toISOString()}` }],
      };
  }
  const match = TEMPLATE_RE.exec(uri);
  if (match) {
    const id = decodeURIComponent(match[1]);
    return {
      contents: [
        {
          uri,
          mimeType: "application/json",
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    };
  }
  return null;
}

// A prompt's messages; throws McpError for an unknown prompt or a missing argument.
function getPrompt(name, args = {}) {
  switch (name) {
    case "test_simple_prompt":
      return {
        description: "A simple prompt without arguments",
        messages: [{ role: "user", content: text("This is a simple prompt for testing.") }],
      };
    case "test_prompt_with_arguments": {
      for (const key of ["arg1", "arg2"]) {
        if (typeof args[key] !== "string") {
          throw new McpError(ErrorCode.InvalidParams, `Missing required argument: ${key}`);
        }
      }
      return {
        description: "A prompt with two required arguments",
        messages: [
          { role: "user", content: text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`) },
        ],
      };
    }
    case "test_prompt_with_embedded_resource": {
      if (typeof args.resourceUri !== "string") {
        throw new McpError(ErrorCode.InvalidParams, "Missing required argument: resourceUri");
      }
      return {
        description: "A prompt that embeds a resource",
        messages: [
          {
            role: "user",
            content: {
              type: "resource",
              resource: {
                uri: args.resourceUri,
                mimeType: "text/plain",
                text: "Embedded resource content for testing.",
              },
            },
          },
          { role: "user", content: text("Please process the embedded resource above.") },
        ],
      };
    }
    case "test_prompt_with_image":
      return {
        description: "A prompt with image content",
        messages: [
          { role: "user", content: { type: "image", data: PNG_BASE64, mimeType: "image/png" } },
          { role: "user", content: text("Please analyze the image above.") },
        ],
      };
  }
  throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${name}`);
}

// The completion values for an argument of a prompt or resource template.
function complete(ref, argument) {
  const key = `${ref.type} ${ref.type === "ref/prompt" ? ref.name : ref.uri} ${argument.name}`;
  const candidates = COMPLETIONS[key] ?? [];
  const prefix = String(argument.value ?? "").toLowerCase();
  const values = candidates.filter((v) => v.toLowerCase().startsWith(prefix));
  return { completion: { values, total: values.length, hasMore: false } };
}

const SERVER_INFO = { name: "switchyard-conformance-fixture", version: "1.0.0" };
const CAPABILITIES = { tools: {}, resources: { subscribe: true }, prompts: {}, logging: {}, completions: {} };
const INSTRUCTIONS = "Switchyard's conformance fixture: the test_* surface of the MCP conformance suite.";

// ---------------------------------------------------------------------------
// One SDK Server per session.

/** Per-session state kept beside the SDK objects. */
class Session {
  constructor() {
    this.id = undefined;
    this.transport = undefined;
    this.server = undefined;
    this.protocolVersion = LATEST_PROTOCOL_VERSION;
    this.standaloneStreams = 0; // open GET streams (without Last-Event-ID)
    this.subscriptions = new Set();
  }
}

const sessions = new Map();

function createServer(session) {
  const server = new Server(
    SERVER_INFO,
    {
      capabilities: CAPABILITIES,
      instructions: INSTRUCTIONS,
    },
  );

  // A server-to-client request: on the standalone GET stream when the client
  // has one open (or always, in "standalone" mode), else related to the
  // originating tools/call so it travels on that POST stream.
  const serverRequest = (extra, request, resultSchema) => {
    const standalone =
      SERVER_REQUESTS === "standalone" || (SERVER_REQUESTS === "auto" && session.standaloneStreams > 0);
    log(`session ${session.id}: ${request.method} on the ${standalone ? "GET" : "POST"} stream`);
    if (standalone) {
      return server.request(request, resultSchema, { signal: extra.signal });
    }
    return extra.sendRequest(request, resultSchema);
  };

  const sendLog = async (extra, level, data) => {
    if (server.isMessageIgnored(level, session.id)) {
      return;
    }
    await extra.sendNotification({
      method: "notifications/message",
      params: { level, logger: "switchyard-conformance-fixture", data },
    });
  };

  const tools = toolHandlers({
    capabilities: () => server.getClientCapabilities(),
    serverRequest,
    sendLog,
    label: () => `session ${session.id}`,
  });

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    runTool(tools, request.params.name, request.params.arguments ?? {}, extra),
  );

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));

  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: RESOURCE_TEMPLATES,
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    const read = readResource(uri);
    if (read === null) {
      // -32002: resource not found (the 2025-11-25 code for it).
      throw new McpError(-32002, `Resource not found: ${uri}`, { uri });
    }
    return read;
  });

  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    const { uri } = request.params;
    session.subscriptions.add(uri);
    if (uri === "test://watched-resource") {
      // One update shortly after subscribing, so a relay of
      // notifications/resources/updated can be observed; not after an
      // unsubscribe.
      setTimeout(() => {
        if (session.subscriptions.has(uri)) {
          server.sendResourceUpdated({ uri }).catch(() => {});
        }
      }, 50).unref();
    }
    return {};
  });

  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    session.subscriptions.delete(request.params.uri);
    return {};
  });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));

  server.setRequestHandler(GetPromptRequestSchema, async (request) =>
    getPrompt(request.params.name, request.params.arguments),
  );

  server.setRequestHandler(CompleteRequestSchema, async (request) =>
    complete(request.params.ref, request.params.argument),
  );

  return server;
}

// ---------------------------------------------------------------------------
// HTTP: Express from the SDK (its Host-header check is the DNS-rebinding
// protection for a loopback bind), plus an Origin check.

function loopbackOrigin(origin) {
  try {
    const { protocol, hostname } = new URL(origin);
    return (
      (protocol === "http:" || protocol === "https:") &&
      ["localhost", "127.0.0.1", "[::1]"].includes(hostname)
    );
  } catch {
    return false;
  }
}

function jsonRpcError(res, status, code, message) {
  if (!res.headersSent) {
    res.status(status).json({ jsonrpc: "2.0", error: { code, message }, id: null });
  }
}

const app = createMcpExpressApp({ host: HOST });

app.use((req, res, next) => {
  const origin = req.headers.origin;
  if (origin !== undefined && !loopbackOrigin(origin)) {
    log(`403 for Origin ${origin}`);
    jsonRpcError(res, 403, -32000, `Forbidden: Origin ${origin} is not allowed`);
    return;
  }
  next();
});

const serveModern = createModernHandler({
  mode: ERA,
  tasks: TASKS === "1",
  legacyVersions: SUPPORTED_PROTOCOL_VERSIONS,
  // test_trigger_tool_change announces on listen streams: the modern side has a tool list that changes.
  capabilities: { ...CAPABILITIES, tools: { listChanged: true } },
  instructions: INSTRUCTIONS,
  serverInfo: SERVER_INFO,
  tools: TOOLS,
  toolHandlers,
  modernTools,
  modernToolHandlers,
  runTool,
  resources: RESOURCES,
  resourceTemplates: RESOURCE_TEMPLATES,
  prompts: PROMPTS,
  modernPrompts: MODERN_PROMPTS,
  modernPromptHandlers,
  readResource,
  getPrompt,
  complete,
  log,
});

app.all("/mcp", async (req, res) => {
  const sessionId = req.headers["mcp-session-id"];
  log(`${req.method} /mcp session=${sessionId ?? "-"} ${req.method === "POST" ? describeBody(req.body) : ""}`);
  if (ERA !== "legacy" && req.method === "POST" && isModernPost(req)) {
    // A live legacy session keeps its own wire on a dual-era endpoint.
    if (ERA === "modern" || !sessions.has(sessionId)) {
      await serveModern(req, res);
      return;
    }
  }
  if (ERA === "modern") {
    if (req.method !== "POST") {
      res.status(405).set("Allow", "POST").end();
      return;
    }
    const requested = req.body?.params?.protocolVersion ?? req.headers["mcp-protocol-version"] ?? null;
    res.status(400).json({
      jsonrpc: "2.0",
      id: req.body?.id ?? null,
      error: {
        code: -32022,
        message: `This server speaks only ${MODERN_VERSIONS.join(", ")}; send the protocol version in params._meta`,
        data: { supported: MODERN_VERSIONS, requested },
      },
    });
    return;
  }
  try {
    if (sessionId !== undefined) {
      const session = sessions.get(sessionId);
      if (!session) {
        jsonRpcError(res, 404, -32001, "Session not found");
        return;
      }
      if (req.method === "POST") {
        alignProtocolVersionHeader(req, session);
      } else if (req.method === "GET" && req.headers["last-event-id"] === undefined) {
        countStandaloneStream(session, res);
      }
      await session.transport.handleRequest(req, res, req.body);
      return;
    }

    if (req.method === "POST" && isInitializeRequest(req.body)) {
      const session = new Session();
      const requested = req.body.params.protocolVersion;
      session.protocolVersion = SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
      session.transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new MemoryEventStore(),
        retryInterval: RETRY_MS,
        onsessioninitialized: (id) => {
          session.id = id;
          sessions.set(id, session);
          log(`session ${id} opened (protocol ${session.protocolVersion})`);
        },
        onsessionclosed: (id) => {
          sessions.delete(id);
          log(`session ${id} closed`);
        },
      });
      session.transport.onclose = () => {
        if (session.id !== undefined) {
          sessions.delete(session.id);
        }
      };
      session.server = createServer(session);
      await session.server.connect(session.transport);
      await session.transport.handleRequest(req, res, req.body);
      return;
    }

    jsonRpcError(res, 400, -32000, "Bad Request: no valid session id, and not an initialize request");
  } catch (error) {
    console.error("fixture: request failed:", error);
    jsonRpcError(res, 500, -32603, "Internal server error");
  }
});

// A POST of the 2026-07-28 era: its _meta names a protocol version, or (a request lacking that _meta, which the
// modern side refuses with -32602) its MCP-Protocol-Version header names a modern one.
function isModernPost(req) {
  return modernVersionOf(req.body) !== undefined || MODERN_VERSIONS.includes(req.headers["mcp-protocol-version"]);
}

// Counts the session's standalone GET stream as open from the moment the SDK
// answers it with 200 (by then the transport has registered the stream, so a
// message sent to it is delivered, not dropped) until the connection closes.
function countStandaloneStream(session, res) {
  let counted = false;
  const writeHead = res.writeHead;
  res.writeHead = function countingWriteHead(status, ...rest) {
    if (status === 200 && !counted) {
      counted = true;
      session.standaloneStreams += 1;
    }
    return writeHead.call(this, status, ...rest);
  };
  res.on("close", () => {
    if (counted) {
      session.standaloneStreams -= 1;
    }
  });
}

function describeBody(body) {
  const messages = Array.isArray(body) ? body : [body];
  return messages
    .map((m) => (m && typeof m === "object" ? (m.method ?? (m.result !== undefined ? "result" : "error")) : "?"))
    .join(",");
}

// The SDK decides on priming events and on offering closeSSEStream from the
// request's MCP-Protocol-Version header. A client that sends an older (still
// supported) version than the session negotiated is treated as speaking the
// negotiated one.
function alignProtocolVersionHeader(req, session) {
  const header = req.headers["mcp-protocol-version"];
  if (
    typeof header === "string" &&
    SUPPORTED_PROTOCOL_VERSIONS.includes(header) &&
    header < session.protocolVersion
  ) {
    req.headers["mcp-protocol-version"] = session.protocolVersion;
    // The SDK's Node wrapper builds its web Request from rawHeaders.
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      if (req.rawHeaders[i].toLowerCase() === "mcp-protocol-version") {
        req.rawHeaders[i + 1] = session.protocolVersion;
      }
    }
  }
}

// An in-memory EventStore (the SDK's interface): every SSE event gets an id
// "<streamId>_<seq>", and a GET with Last-Event-ID replays the rest of that
// stream.
class MemoryEventStore {
  constructor() {
    this.events = new Map(); // eventId -> { streamId, message }
    this.seq = 0;
  }

  async storeEvent(streamId, message) {
    this.seq += 1;
    const eventId = `${streamId}_${String(this.seq).padStart(10, "0")}`;
    this.events.set(eventId, { streamId, message });
    return eventId;
  }

  async getStreamIdForEventId(eventId) {
    return this.events.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const last = this.events.get(lastEventId);
    if (!last) {
      return "";
    }
    let found = false;
    for (const [eventId, { streamId, message }] of this.events) {
      if (eventId === lastEventId) {
        found = true;
        continue;
      }
      // Priming events are stored as {} and are not replayed.
      if (found && streamId === last.streamId && message && Object.keys(message).length > 0) {
        await send(eventId, message);
      }
    }
    return last.streamId;
  }
}

// ---------------------------------------------------------------------------

const httpServer = app.listen(PORT, HOST, () => {
  const { port } = httpServer.address();
  console.log(`switchyard-conformance-fixture listening on http://${HOST}:${port}/mcp`);
});
httpServer.on("error", (error) => {
  console.error(`fixture: cannot listen on ${HOST}:${PORT}: ${error.message}`);
  process.exit(1);
});

async function shutdown() {
  for (const session of sessions.values()) {
    await session.transport.close().catch(() => {});
  }
  httpServer.close();
  process.exit(0);
}
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);

if (process.env.SWITCHYARD_EXIT_ON_STDIN_EOF === "1") {
  process.stdin.on("end", () => process.exit(0));
  process.stdin.on("error", () => process.exit(0));
  process.stdin.resume();
}
