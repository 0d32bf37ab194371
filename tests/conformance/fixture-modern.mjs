// The 2026-07-28 ("modern", sessionless) era of Switchyard's conformance
// fixture, hand-written from the specification (MCP 2026-07-28,
// its transport, lifecycle and versioning clauses) because the TypeScript SDK the fixture is built
// on predates that revision. fixture.mjs owns the test surface (tools,
// resources, prompts, completions) and hands it to createModernHandler.
//
// Wire behaviour of a modern POST (one whose params._meta names a protocol
// version), in the order the spec checks:
// - batches: 400 + -32600;
// - the mirrored headers against the body: MCP-Protocol-Version = _meta
//   version, Mcp-Method = method, Mcp-Name = params.name (tools/call,
//   prompts/get) or params.uri (resources/read), Mcp-Param-{Name} = the
//   argument under an `x-mcp-header` property; values decoded from the
//   =?base64?…?= sentinel first: 400 + -32020;
// - the version: 400 + -32022 with data {supported, requested};
// - _meta.clientCapabilities present: else 400 + -32602; a bad logLevel:
//   -32602;
// - notifications: 202; removed or unknown methods: 404 + -32601;
// - results carry resultType "complete" and _meta serverInfo; discover,
//   lists and resources/read carry ttlMs/cacheScope; a missing resource is
//   -32602 (not -32002);
// - a request is answered with JSON, or with an SSE stream once the tool
//   sends a notification first (progress; log messages only when _meta
//   logLevel allows them); the stream carries only that request's messages
//   and ends with its response; the client closing it cancels the request
//   (its AbortSignal fires);
// - sampling and elicitation become multi round-trip results (tools/call
//   and prompts/get only): the question comes back as resultType
//   "input_required" with inputRequests and, when the next round needs
//   state, an HMAC-sealed requestState bound to the tool or prompt and its
//   arguments; the retry carries inputResponses (a map of objects, else
//   -32602) and that state (a tampered or foreign state is -32602);
// - a tool needing a capability the request's _meta does not declare:
//   400 + -32021 with data.requiredCapabilities;
// - a request without _meta's protocol version: 400 + -32602 (before the
//   header checks);
// - subscriptions/listen: an SSE stream starting with
//   notifications/subscriptions/acknowledged (the honoured subset), then
//   notifications/resources/updated for test://watched-resource shortly after
//   and notifications/tools/list_changed when test_trigger_tool_change runs,
//   every message tagged with _meta subscriptionId; open until the client
//   closes it;
// - Mcp-Session-Id on a modern request is ignored (never minted or echoed);
// - with `surface.tasks` (FIXTURE_TASKS=1), the tasks extension as
//   fixture-modern-tasks.mjs implements it: its methods, task-augmented
//   calls of its task tools, Mcp-Name = params.taskId on its methods, and
//   notifications/tasks on listen streams that name the task in taskIds.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

import { TASK_METHODS, TASKS_EXTENSION, createTasks } from "./fixture-modern-tasks.mjs";

export const MODERN_VERSIONS = ["2026-07-28"];

const META_VERSION = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL = "io.modelcontextprotocol/logLevel";
const META_SERVER_INFO = "io.modelcontextprotocol/serverInfo";
const META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId";
const LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
const MODERN_METHODS = new Set([
  "server/discover",
  "tools/list",
  "tools/call",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "prompts/list",
  "prompts/get",
  "completion/complete",
  "subscriptions/listen",
]);
const LIST_TTL_MS = 60_000;

/**
 * Thrown by a tool or prompt that needs input from the client (a multi round-trip result): `state` is what the
 * next round needs back, sealed into requestState (null: that round needs none, so none is sent).
 */
export class InputRequired extends Error {
  constructor(inputRequests, state = {}) {
    super("input required");
    this.inputRequests = inputRequests;
    this.state = state;
  }
}

/** Thrown by a tool that cannot work without a client capability the request's _meta does not declare. */
export class MissingCapability extends Error {
  constructor(capability) {
    super(`The client did not declare the ${capability} capability this tool needs`);
    this.capability = capability;
  }
}

/** The modern protocol version a POST body names in params._meta, if any. */
export function modernVersionOf(body) {
  const version = body?.params?._meta?.[META_VERSION];
  return typeof version === "string" ? version : undefined;
}

class Refusal extends Error {
  constructor(status, code, message, data) {
    super(message);
    Object.assign(this, { status, code, data });
  }
}

// -32021 (HTTP 400), naming the capability as a ClientCapabilities object.
function missingCapability(error) {
  return new Refusal(400, -32021, error.message, { requiredCapabilities: { [error.capability]: {} } });
}

/** A header value as sent: plain, or the base64 sentinel. */
function decodeHeader(value) {
  const match = typeof value === "string" ? /^=\?base64\?(.*)\?=$/.exec(value) : null;
  return match ? Buffer.from(match[1], "base64").toString("utf8") : value;
}

/** A value as a mirrored header carries it. */
function headerForm(value) {
  return typeof value === "string" ? value : String(value);
}

// requestState: base64url(JSON) "." base64url(HMAC-SHA256), bound to the tool and its arguments.
const STATE_KEY = randomBytes(32);

function seal(payload) {
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${body}.${createHmac("sha256", STATE_KEY).update(body).digest("base64url")}`;
}

function digest(value) {
  return createHash("sha256").update(JSON.stringify(value)).digest("base64url");
}

function unseal(state) {
  const [body, mac] = String(state).split(".");
  const expected = createHmac("sha256", STATE_KEY).update(body ?? "").digest();
  const given = Buffer.from(mac ?? "", "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return null;
  }
  return JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
}

/**
 * The handler of modern POSTs. `surface`: { mode ("dual" | "modern"),
 * legacyVersions, capabilities, instructions, serverInfo, tools (the
 * definitions), toolHandlers(env), runTool(handlers, name, args, extra),
 * resources, resourceTemplates, prompts, readResource(uri) (null: none),
 * getPrompt(name, args), complete(ref, argument), log(...), and the surface
 * only this era serves (fixture-modern-tools.mjs): modernTools() (the current list),
 * modernToolHandlers(env), modernPrompts, modernPromptHandlers(env) }.
 */
export function createModernHandler(surface) {
  const supported = () => [...MODERN_VERSIONS, ...(surface.mode === "dual" ? surface.legacyVersions : [])];
  // -32021 is refused with HTTP 400, like every missing capability; the other task errors are JSON-RPC errors.
  const tasks = surface.tasks
    ? createTasks({
        refuse: (code, message, data) => new Refusal(code === -32021 ? 400 : 200, code, message, data),
        announce: (task) => announceTask(task),
        log: surface.log,
      })
    : null;
  const capabilities = tasks
    ? { ...surface.capabilities, extensions: { ...surface.capabilities.extensions, [TASKS_EXTENSION]: {} } }
    : surface.capabilities;
  const withMeta = (result, cache) => ({
    ...result,
    resultType: result.resultType ?? "complete",
    ...(cache === undefined ? {} : { ttlMs: cache, cacheScope: "public" }),
    _meta: { ...(result._meta ?? {}), [META_SERVER_INFO]: surface.serverInfo },
  });

  function check(req, message) {
    const version = modernVersionOf(message);
    // The required _meta fields come first: without them the headers have nothing to be checked against.
    if (version === undefined) {
      throw new Refusal(400, -32602, `params._meta lacks ${META_VERSION}`);
    }
    const header = (name) => decodeHeader(req.headers[name]);
    const mismatch = (why) => new Refusal(400, -32020, `Header mismatch: ${why}`);
    if (header("mcp-protocol-version") !== version) {
      throw mismatch("MCP-Protocol-Version does not match params._meta");
    }
    if (header("mcp-method") !== message.method) {
      throw mismatch("Mcp-Method does not match the method");
    }
    const named = tasks && TASK_METHODS.includes(message.method)
      ? "taskId"
      : { "tools/call": "name", "prompts/get": "name", "resources/read": "uri" }[message.method];
    if (named && header("mcp-name") !== message.params?.[named]) {
      throw mismatch(`Mcp-Name does not match params.${named}`);
    }
    if (message.method === "tools/call") {
      checkParamHeaders(header, message.params);
    }
    if (!MODERN_VERSIONS.includes(version)) {
      throw new Refusal(400, -32022, `Unsupported protocol version ${version}`, {
        supported: supported(),
        requested: version,
      });
    }
    const meta = message.params._meta;
    if (typeof meta[META_CAPABILITIES] !== "object" || meta[META_CAPABILITIES] === null) {
      throw new Refusal(400, -32602, `params._meta lacks ${META_CAPABILITIES}`);
    }
    const level = meta[META_LOG_LEVEL];
    if (level !== undefined && !LOG_LEVELS.includes(level)) {
      throw new Refusal(200, -32602, `Invalid log level ${JSON.stringify(level)}`);
    }
  }

  function checkParamHeaders(header, params) {
    const tool = surface.tools.find((candidate) => candidate.name === params?.name);
    for (const [property, schema] of Object.entries(tool?.inputSchema?.properties ?? {})) {
      const name = schema?.["x-mcp-header"];
      const value = params.arguments?.[property];
      if (typeof name !== "string" || value === undefined || value === null) {
        continue;
      }
      if (header(`mcp-param-${name.toLowerCase()}`) !== headerForm(value)) {
        throw new Refusal(400, -32020, `Header mismatch: Mcp-Param-${name} does not match the argument`);
      }
    }
  }

  // A reply that stays JSON unless something is sent before the response.
  function replier(res, id) {
    let streaming = false;
    const send = (message) => res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    const startStream = () => {
      if (!streaming) {
        streaming = true;
        res.writeHead(200, {
          "Content-Type": "text/event-stream",
          "Cache-Control": "no-cache",
          "X-Accel-Buffering": "no",
        });
      }
    };
    return {
      notify(message) {
        if (!res.writableEnded) {
          startStream();
          send(message);
        }
      },
      finish(body) {
        const message = { jsonrpc: "2.0", id, ...body };
        if (res.writableEnded) {
          return;
        }
        if (streaming) {
          send(message);
          res.end();
        } else {
          res.status(200).json(message);
        }
      },
    };
  }

  // The continuation a retry carries: its inputResponses (a map of objects) and the payload of its requestState,
  // which must be one the fixture sealed for this very call (`bound`). Anything else is -32602.
  function continuation(params, bound) {
    const responses = params.inputResponses;
    if (responses !== undefined && (typeof responses !== "object" || responses === null || Array.isArray(responses))) {
      throw new Refusal(200, -32602, "Invalid inputResponses: expected a map of responses");
    }
    for (const [key, response] of Object.entries(responses ?? {})) {
      if (typeof response !== "object" || response === null || Array.isArray(response)) {
        throw new Refusal(200, -32602, `Invalid inputResponses: ${key} is not a response object`);
      }
    }
    if (params.requestState === undefined) {
      return { responses: responses ?? {}, state: undefined };
    }
    const sealed = unseal(params.requestState);
    if (sealed === null) {
      throw new Refusal(200, -32602, "Invalid requestState: it failed its integrity check");
    }
    if (sealed.kind !== bound.kind || sealed.name !== bound.name || sealed.arguments !== bound.arguments) {
      throw new Refusal(200, -32602, "Invalid requestState: it was not issued for this call");
    }
    return { responses: responses ?? {}, state: sealed.data };
  }

  // Runs one round of a tool or prompt: its result, or its question as an input_required result.
  async function round(params, kind, run) {
    const bound = { kind, name: params.name, arguments: digest(params.arguments ?? {}) };
    const { responses, state } = continuation(params, bound);
    try {
      return withMeta(await run(responses, state));
    } catch (error) {
      if (!(error instanceof InputRequired)) {
        throw error;
      }
      return withMeta({
        resultType: "input_required",
        inputRequests: error.inputRequests,
        ...(error.state === null ? {} : { requestState: seal({ ...bound, data: error.state }) }),
      });
    }
  }

  // What the tools get to ask, log and announce with (see fixture-modern-tools.mjs), for one round.
  function toolEnv(meta, responses, state) {
    const threshold = LOG_LEVELS.indexOf(meta[META_LOG_LEVEL]);
    return {
      responses,
      state,
      capabilities: () => meta[META_CAPABILITIES],
      // The shared tools ask through this; only a retry under the fixture's own state answers them.
      serverRequest: async (_extra, request, _schema, key) => {
        if (responses[key] !== undefined && state !== undefined) {
          return responses[key];
        }
        throw new InputRequired({ [key]: { method: request.method, params: request.params } });
      },
      sendLog: async (extra, level, data) => {
        if (threshold >= 0 && LOG_LEVELS.indexOf(level) >= threshold) {
          await extra.sendNotification({
            method: "notifications/message",
            params: { level, logger: "switchyard-conformance-fixture", data },
          });
        }
      },
      toolsChanged: () => announce("toolsListChanged", "notifications/tools/list_changed"),
      label: () => "modern request",
    };
  }

  // Runs the tool `params` names, with `responses` and `state`, its notifications sent by `notify`.
  function runToolRound(message, responses, state, signal, notify) {
    const params = message.params;
    const extra = {
      _meta: params._meta,
      signal,
      requestId: message.id,
      sendNotification: async (notification) => notify({ jsonrpc: "2.0", ...notification }),
    };
    const env = toolEnv(params._meta, responses, state);
    const handlers = { ...surface.toolHandlers(env), ...surface.modernToolHandlers(env) };
    return surface.runTool(handlers, params.name, params.arguments ?? {}, extra);
  }

  function callTool(message, reply, signal) {
    const params = message.params;
    const how = tasks?.dispatch(params.name, params._meta[META_CAPABILITIES], params.inputResponses !== undefined);
    if (how === "task") {
      return startTask(message);
    }
    return round(params, "tool", (responses, state) =>
      runToolRound(message, responses, state, signal, (note) => reply.notify(note)),
    );
  }

  // A task-augmented call: its continuation checked as any call's, then run in the background as a task whose
  // questions become its input_required status (a task's notifications have no stream to go to).
  async function startTask(message) {
    const params = message.params;
    const bound = { kind: "tool", name: params.name, arguments: digest(params.arguments ?? {}) };
    const { responses, state } = continuation(params, bound);
    const run = async (answers, data, signal) => {
      try {
        return { result: await runToolRound(message, answers, data, signal, () => {}) };
      } catch (error) {
        if (error instanceof InputRequired) {
          return { input: { inputRequests: error.inputRequests, state: error.state } };
        }
        throw error;
      }
    };
    return withMeta(tasks.create(params.name, run, responses, state));
  }

  // A task method, from a request that declared the extension.
  function taskMethod(message) {
    tasks.gate(message.method, message.params._meta[META_CAPABILITIES]);
    const answer = { "tasks/get": tasks.get, "tasks/update": tasks.update, "tasks/cancel": tasks.cancel };
    return withMeta(answer[message.method](message.params));
  }

  function getPrompt(params) {
    return round(params, "prompt", async (responses) => {
      const modern = surface.modernPromptHandlers({ responses })[params.name];
      return modern ? modern() : surface.getPrompt(params.name, params.arguments);
    });
  }

  // The open subscriptions/listen streams, each with what it asked for.
  const listeners = new Set();

  // Sends a task's status (a DetailedTask) to every listen stream whose taskIds name it.
  function announceTask(task) {
    for (const listener of listeners) {
      if (listener.honoured.taskIds?.includes(task.taskId)) {
        listener.send("notifications/tasks", task);
      }
    }
  }

  // Sends a list-changed notification to every listen stream that asked for `filter`; how many got it.
  function announce(filter, method) {
    let sent = 0;
    for (const listener of listeners) {
      if (listener.honoured[filter] === true) {
        listener.send(method, {});
        sent += 1;
      }
    }
    return sent;
  }

  function listen(req, res, message) {
    const asked = message.params.notifications ?? {};
    const subscriptions = Array.isArray(asked.resourceSubscriptions) ? asked.resourceSubscriptions : [];
    const honoured = {
      ...(subscriptions.length > 0 ? { resourceSubscriptions: subscriptions } : {}),
      ...(asked.toolsListChanged === true && surface.capabilities.tools?.listChanged ? { toolsListChanged: true } : {}),
      ...(tasks && Array.isArray(asked.taskIds) ? { taskIds: asked.taskIds.filter((id) => typeof id === "string") } : {}),
    };
    const tag = (method, params) => ({
      jsonrpc: "2.0",
      method,
      params: { ...params, _meta: { [META_SUBSCRIPTION]: message.id } },
    });
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
    const send = (note) => res.write(`event: message\ndata: ${JSON.stringify(note)}\n\n`);
    send(tag("notifications/subscriptions/acknowledged", { notifications: honoured }));
    const listener = { honoured, send: (method, params) => send(tag(method, params)) };
    listeners.add(listener);
    if (honoured.taskIds) {
      surface.log(`task listen ${honoured.taskIds.join(",")}`);
    }
    const timers = [
      setTimeout(() => {
        for (const uri of subscriptions.filter((uri) => uri === "test://watched-resource")) {
          send(tag("notifications/resources/updated", { uri }));
        }
      }, 50),
      setInterval(() => res.write(": keep-alive\n\n"), 15_000),
    ];
    res.on("close", () => {
      listeners.delete(listener);
      timers.forEach((timer) => clearTimeout(timer));
    });
  }

  function listedTools() {
    const tools = [...surface.tools, ...surface.modernTools()];
    return tasks ? tools.map((tool) => tasks.describe(tool)) : tools;
  }

  async function answer(message, reply, signal) {
    const params = message.params;
    switch (message.method) {
      case "server/discover":
        return withMeta(
          {
            supportedVersions: supported(),
            capabilities,
            instructions: surface.instructions,
          },
          LIST_TTL_MS,
        );
      case "tools/list":
        return withMeta({ tools: listedTools() }, LIST_TTL_MS);
      case "tools/call":
        return callTool(message, reply, signal);
      case "resources/list":
        return withMeta({ resources: surface.resources }, LIST_TTL_MS);
      case "resources/templates/list":
        return withMeta({ resourceTemplates: surface.resourceTemplates }, LIST_TTL_MS);
      case "resources/read": {
        const read = surface.readResource(params.uri);
        if (read === null) {
          // 2026-07-28 moved resource-not-found to -32602.
          throw new Refusal(200, -32602, `Resource not found: ${params.uri}`, { uri: params.uri });
        }
        return withMeta(read, 0);
      }
      case "prompts/list":
        return withMeta({ prompts: [...surface.prompts, ...surface.modernPrompts] }, LIST_TTL_MS);
      case "prompts/get":
        return getPrompt(params);
      case "completion/complete":
        return withMeta(surface.complete(params.ref, params.argument));
    }
    if (tasks && TASK_METHODS.includes(message.method)) {
      return taskMethod(message);
    }
    throw new Refusal(404, -32601, `Method not found: ${message.method}`);
  }

  return async function serveModern(req, res) {
    const message = req.body;
    const id = Array.isArray(message) ? null : (message.id ?? null);
    const reply = replier(res, id);
    const aborted = new AbortController();
    res.on("close", () => {
      if (!res.writableEnded) {
        surface.log(`modern ${message?.method}: the client closed the stream; cancelled`);
        aborted.abort();
      }
    });
    try {
      if (Array.isArray(message)) {
        throw new Refusal(400, -32600, "Batches are not accepted");
      }
      check(req, message);
      if (message.id === undefined) {
        res.status(202).end();
        return;
      }
      if (!MODERN_METHODS.has(message.method) && !(tasks && TASK_METHODS.includes(message.method))) {
        throw new Refusal(404, -32601, `Method not found: ${message.method}`);
      }
      if (message.method === "subscriptions/listen") {
        listen(req, res, message);
        return;
      }
      reply.finish({ result: await answer(message, reply, aborted.signal) });
    } catch (error) {
      const refusal = error instanceof MissingCapability ? missingCapability(error) : error;
      const status = refusal instanceof Refusal ? refusal.status : 200;
      const code = typeof refusal?.code === "number" ? refusal.code : -32603;
      const data = refusal?.data;
      const body = { error: { code, message: refusal?.message ?? String(refusal), ...(data ? { data } : {}) } };
      if (status !== 200 && !res.headersSent) {
        res.status(status).json({ jsonrpc: "2.0", id, ...body });
        return;
      }
      reply.finish(body);
    }
  };
}
