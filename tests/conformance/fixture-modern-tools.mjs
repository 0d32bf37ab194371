// The part of the conformance fixture's test surface that only its
// 2026-07-28 side serves: the tools and the prompt the newest suite's
// multi round-trip scenarios call (input-required-result-*, SEP-2322) and
// the diagnostic tools of its server-stateless scenario. The legacy side
// never lists them, so the 2025-11-25 runs see the surface they always saw.
//
// Written from the scenario descriptions of @modelcontextprotocol/conformance
// 0.2.0-alpha.12; it is not the upstream example server.
//
// A handler gets `env` from fixture-modern.mjs: `responses` (the request's
// inputResponses, already checked to be a map of objects), `state` (the
// payload of a requestState the fixture sealed and has verified, or
// undefined), `capabilities()` (the caller's _meta clientCapabilities),
// `sendLog(extra, level, data)` and `toolsChanged()`. A handler asks the
// client by throwing InputRequired(inputRequests, state): `state` is sealed
// into requestState (null: the round needs none); a capability it cannot
// work without is a MissingCapability error (-32021).
import { InputRequired, MissingCapability } from "./fixture-modern.mjs";

const NO_ARGS = { type: "object", properties: {} };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// How long the tasks scenarios' tools work before they ask or answer: longer than a gateway waits before it
// answers a call with a task rather than its result.
const TASK_WORK_MS = 1500;
const text = (t) => ({ type: "text", text: t });

const elicit = (message, property, type) => ({
  method: "elicitation/create",
  params: {
    message,
    requestedSchema: { type: "object", properties: { [property]: { type } }, required: [property] },
  },
});
const sample = (prompt, maxTokens) => ({
  method: "sampling/createMessage",
  params: { messages: [{ role: "user", content: text(prompt) }], maxTokens },
});
const LIST_ROOTS = { method: "roots/list", params: {} };

const USER_NAME = elicit("What is your name?", "name", "string");
const CAPITAL = sample("What is the capital of France?", 100);
const CONFIRM = elicit("Please confirm", "ok", "boolean");
const STEP1 = elicit("Step 1: What is your name?", "name", "string");
const STEP2 = elicit("Step 2: What is your favorite color?", "color", "string");
const CONTEXT = elicit("What context should the prompt use?", "context", "string");
const CONFIRM_DELETE = elicit("Delete the file?", "confirm", "boolean");
const FIRST_NAME = elicit("First: what name?", "name", "string");
const SECOND_CONFIRM = elicit("Second: confirm?", "confirm", "boolean");

// An accepted elicitation's field, or undefined (declined, cancelled, or not the shape asked for).
function accepted(response, field) {
  return response?.action === "accept" ? response.content?.[field] : undefined;
}

// The text of a sampling result's content (a block or an array of blocks).
function sampledText(response) {
  const blocks = Array.isArray(response?.content) ? response.content : [response?.content];
  return blocks.map((block) => (block?.type === "text" ? block.text : "")).join("");
}

function rootsOf(response) {
  return Array.isArray(response?.roots) ? response.roots.map((root) => root?.uri).filter(Boolean) : [];
}

function needCapability(capabilities, name) {
  if (!capabilities()?.[name]) {
    throw new MissingCapability(name);
  }
}

// The inputRequests of a map that are still unanswered.
function unanswered(requests, responses) {
  return Object.fromEntries(Object.entries(requests).filter(([key]) => responses[key] === undefined));
}

const MODERN_TOOLS = [
  ["test_input_required_result_elicitation", "Asks the client's name by an elicitation input request"],
  ["test_input_required_result_sampling", "Asks the client's model a question by a sampling input request"],
  ["test_input_required_result_list_roots", "Asks the client's roots by a roots/list input request"],
  ["test_input_required_result_request_state", "Asks a confirmation; the retry must echo the sealed requestState"],
  ["test_input_required_result_multiple_inputs", "Asks an elicitation, a sampling and a roots/list at once"],
  ["test_input_required_result_multi_round", "Asks two questions in two rounds, the state evolving between them"],
  ["test_input_required_result_tampered_state", "Asks a confirmation under a sealed requestState"],
  ["test_input_required_result_capabilities", "Asks only what the client's declared capabilities allow"],
  ["test_missing_capability", "Needs the client's sampling capability (-32021 without it)"],
  ["test_streaming_elicitation", "Needs elicitation; asks by an input_required result, never a request"],
  ["test_logging_tool", "Logs at info level (only when the request's _meta logLevel allows it)"],
  ["test_trigger_tool_change", "Adds or removes test_toggled_tool and announces the change on listen streams"],
  ["multi_input", "Works a while, then asks two elicitations at once; answers once both are answered"],
].map(([name, description]) => ({ name, description, inputSchema: NO_ARGS }));

// The tasks extension's input scenarios (tasks-mrtr-*): plain multi round-trip tools, which a gateway runs as its
// own tasks. `test_tool_with_task` asks at once and works a while once answered; it says it requires tasks.
MODERN_TOOLS.push({
  name: "test_tool_with_task",
  description: "Asks the client's name, then works a while and greets it",
  inputSchema: NO_ARGS,
  execution: { taskSupport: "required" },
});

// The tool test_trigger_tool_change adds and removes, so that the change it announces is real.
const TOGGLED = { name: "test_toggled_tool", description: "Present every other test_trigger_tool_change", inputSchema: NO_ARGS };
let toggledPresent = false;

/** The tools only the 2026-07-28 side lists, as they are now. */
export function modernTools() {
  return toggledPresent ? [...MODERN_TOOLS, TOGGLED] : MODERN_TOOLS;
}

export const MODERN_PROMPTS = [
  { name: "test_input_required_result_prompt", description: "A prompt that asks the client for its context first" },
];

export function modernToolHandlers(env) {
  const { responses, state, capabilities, sendLog, toolsChanged } = env;
  return {
    test_input_required_result_elicitation: async () => {
      const name = accepted(responses.user_name, "name");
      if (typeof name !== "string") {
        throw new InputRequired({ user_name: USER_NAME }, null);
      }
      return { content: [text(`Hello, ${name}!`)] };
    },

    test_input_required_result_sampling: async () => {
      if (responses.capital_question === undefined) {
        throw new InputRequired({ capital_question: CAPITAL }, null);
      }
      return { content: [text(`The model answered: ${sampledText(responses.capital_question)}`)] };
    },

    test_input_required_result_list_roots: async () => {
      if (responses.client_roots === undefined) {
        throw new InputRequired({ client_roots: LIST_ROOTS }, null);
      }
      const roots = rootsOf(responses.client_roots);
      return { content: [text(`The client has ${roots.length} root(s): ${roots.join(", ")}`)] };
    },

    // Overrides the surface's confirm_delete for this era: it works a while, then asks before it deletes.
    confirm_delete: async (args) => {
      const confirmed = accepted(responses.confirm_delete, "confirm");
      if (confirmed === undefined) {
        await sleep(TASK_WORK_MS);
        throw new InputRequired({ confirm_delete: CONFIRM_DELETE }, null);
      }
      return { content: [text(confirmed ? `deleted ${args.filename ?? "nothing"}` : "kept the file")] };
    },

    multi_input: async () => {
      const requests = { first: FIRST_NAME, second: SECOND_CONFIRM };
      const open = unanswered(requests, responses);
      if (Object.keys(open).length > 0) {
        await sleep(TASK_WORK_MS);
        throw new InputRequired(open, null);
      }
      return { content: [text(`got ${accepted(responses.first, "name")} and ${accepted(responses.second, "confirm")}`)] };
    },

    test_tool_with_task: async () => {
      const name = accepted(responses.user_name, "name");
      if (typeof name !== "string") {
        throw new InputRequired({ user_name: USER_NAME }, null);
      }
      await sleep(TASK_WORK_MS);
      return { content: [text(`Hello, ${name}! (the work took a while)`)] };
    },

    test_input_required_result_request_state: async () => confirmUnderState(state, responses),
    test_input_required_result_tampered_state: async () => confirmUnderState(state, responses),

    test_input_required_result_multiple_inputs: async () => {
      const requests = { user_name: USER_NAME, greeting: sample("Generate a greeting", 50), client_roots: LIST_ROOTS };
      if (state?.asked !== "all" || Object.keys(unanswered(requests, responses)).length > 0) {
        throw new InputRequired(state?.asked === "all" ? unanswered(requests, responses) : requests, {
          asked: "all",
        });
      }
      const name = accepted(responses.user_name, "name");
      const roots = rootsOf(responses.client_roots);
      return {
        content: [text(`${sampledText(responses.greeting)} (to ${name}; ${roots.length} root(s): ${roots.join(", ")})`)],
      };
    },

    test_input_required_result_multi_round: async () => {
      const name = accepted(responses.step1, "name");
      if (state?.step === 1 && typeof name === "string") {
        throw new InputRequired({ step2: STEP2 }, { step: 2, name });
      }
      const color = accepted(responses.step2, "color");
      if (state?.step === 2 && typeof color === "string") {
        return { content: [text(`${state.name}'s favorite color is ${color}`)] };
      }
      if (state?.step === 2) {
        throw new InputRequired({ step2: STEP2 }, state);
      }
      throw new InputRequired({ step1: STEP1 }, { step: 1 });
    },

    test_input_required_result_capabilities: async () => {
      const declared = capabilities() ?? {};
      const requests = {
        ...(declared.sampling ? { capital_question: CAPITAL } : {}),
        ...(declared.elicitation ? { user_name: USER_NAME } : {}),
        ...(declared.roots ? { client_roots: LIST_ROOTS } : {}),
      };
      const missing = unanswered(requests, responses);
      if (Object.keys(missing).length > 0) {
        throw new InputRequired(missing, null);
      }
      const asked = Object.keys(requests);
      return { content: [text(`Asked for ${asked.length ? asked.join(", ") : "nothing (no capability declared)"}`)] };
    },

    test_missing_capability: async () => {
      needCapability(capabilities, "sampling");
      if (responses.capital_question === undefined) {
        throw new InputRequired({ capital_question: CAPITAL }, null);
      }
      return { content: [text(`The model answered: ${sampledText(responses.capital_question)}`)] };
    },

    test_streaming_elicitation: async () => {
      needCapability(capabilities, "elicitation");
      const name = accepted(responses.user_name, "name");
      if (typeof name !== "string") {
        throw new InputRequired({ user_name: USER_NAME }, null);
      }
      return { content: [text(`Hello, ${name}!`)] };
    },

    test_logging_tool: async (_args, extra) => {
      for (const step of ["started", "working", "finished"]) {
        await sendLog(extra, "info", `test_logging_tool ${step}`);
      }
      return { content: [text("test_logging_tool logged three info messages")] };
    },

    test_trigger_tool_change: async () => {
      toggledPresent = !toggledPresent;
      const streams = toolsChanged();
      const change = toggledPresent ? "added" : "removed";
      return { content: [text(`test_toggled_tool ${change}; announced on ${streams} subscription stream(s)`)] };
    },

    ...(toggledPresent ? { test_toggled_tool: async () => ({ content: [text("test_toggled_tool is here")] }) } : {}),
  };
}

// The confirmation both request-state tools ask for: answered only under the state they sealed.
function confirmUnderState(state, responses) {
  const ok = accepted(responses.confirm, "ok");
  if (state?.asked !== "confirm" || typeof ok !== "boolean") {
    throw new InputRequired({ confirm: CONFIRM }, { asked: "confirm" });
  }
  return { content: [text(`state-ok: the sealed requestState verified; confirmed ${ok}`)] };
}

export function modernPromptHandlers(env) {
  const { responses } = env;
  return {
    test_input_required_result_prompt: async () => {
      const context = accepted(responses.user_context, "context");
      if (typeof context !== "string") {
        throw new InputRequired({ user_context: CONTEXT }, null);
      }
      return {
        description: "A prompt built from the context the client gave",
        messages: [{ role: "user", content: text(`Answer with this context in mind: ${context}`) }],
      };
    },
  };
}
