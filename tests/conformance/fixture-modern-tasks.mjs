// The tasks extension (`io.modelcontextprotocol/tasks`, MCP 2026-07-28) as the
// conformance fixture's 2026-07-28 side implements it itself when started with
// FIXTURE_TASKS=1: a backend that runs its own tasks, for a gateway to pass
// through. Without that mode nothing here is used and the fixture's tools stay
// plain synchronous tools.
//
// Written for this project from the extension's rules and the tasks scenario
// descriptions of @modelcontextprotocol/conformance 0.2.0-alpha.12; it is not
// an upstream example server.
//
// Rules:
// - server/discover declares capabilities.extensions["io.modelcontextprotocol/tasks"];
//   tools/list marks the task tools (TASK_TOOLS) with execution.taskSupport.
// - A request uses the extension only when its own _meta clientCapabilities
//   declare it. Without: tasks/get, tasks/update, tasks/cancel and a call of a
//   `required` tool are 400 + -32021 naming the extension; an `optional` tool
//   runs synchronously as before.
// - With it, a call of a task tool is answered at once with a flat
//   CreateTaskResult (resultType "task", taskId, status, createdAt,
//   lastUpdatedAt, ttlMs, pollIntervalMs; never requestState) and runs in the
//   background. A tool marked `asksFirst` gathers its input by multi
//   round-trip results first: only its retry carrying inputResponses becomes a
//   task (MRTR -> tasks composition).
// - tasks/get answers the DetailedTask: a completed task inlines the tool's
//   result (isError included: a tool's own error is `completed`), a failed one
//   the JSON-RPC error, one in input_required its unanswered inputRequests.
// - tasks/update takes inputResponses (a map of objects, else -32602) for a
//   task in input_required: answered keys leave inputRequests, others are
//   ignored; once none is left the tool runs again with every response. Acked
//   with an empty result.
// - tasks/cancel ends a running task `cancelled` (the tool's AbortSignal
//   fires) and is acked with an empty result, also for a terminal task. An
//   unknown task id is -32602 on every method.
// - Each status change is sent as notifications/tasks (the DetailedTask) on
//   the subscriptions/listen streams whose notifications.taskIds name the task.
// - Every request and status change is logged (`task <method> <id>`), so a
//   test can see what reached the fixture.
import { randomUUID } from "node:crypto";

export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
export const TASK_METHODS = ["tasks/get", "tasks/update", "tasks/cancel"];

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const TTL_MS = 300_000;
const POLL_INTERVAL_MS = 250;

// The tools that run as tasks, with the taskSupport tools/list shows.
const TASK_TOOLS = {
  slow_compute: { support: "optional" },
  failing_job: { support: "required" },
  protocol_error_job: { support: "optional" },
  confirm_delete: { support: "optional" },
  multi_input: { support: "optional" },
  test_tool_with_task: { support: "required", asksFirst: true },
};

/** Whether a request's client capabilities declare the tasks extension. */
export function declaresTasks(capabilities) {
  const extensions = capabilities?.extensions;
  return typeof extensions === "object" && extensions !== null && extensions[TASKS_EXTENSION] !== undefined;
}

/**
 * The fixture's task store. `refuse(code, message, data)` makes the error the
 * wire answers with; `announce(task)` gets each status change (a DetailedTask);
 * `log(...)` writes the log line.
 */
export function createTasks({ refuse, announce, log }) {
  const tasks = new Map();

  const envelope = (task) => ({
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage ? { statusMessage: task.statusMessage } : {}),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: TTL_MS,
    pollIntervalMs: POLL_INTERVAL_MS,
  });

  function detailed(task) {
    const shown = envelope(task);
    if (task.status === "completed") shown.result = task.result;
    if (task.status === "failed") shown.error = task.error;
    if (task.status === "input_required") shown.inputRequests = task.inputRequests;
    return shown;
  }

  // Moves a task that is not terminal to `status` (with what that status carries) and announces it.
  function step(task, status, fields = {}) {
    if (TERMINAL.has(task.status)) {
      return;
    }
    Object.assign(task, { status, ...fields, lastUpdatedAt: new Date().toISOString() });
    log(`task ${status} ${task.taskId}`);
    announce(detailed(task));
  }

  // Runs the task's tool (again) with every response so far: it ends the task or asks for input.
  async function drive(task) {
    try {
      const outcome = await task.run(task.responses, task.state, task.abort.signal);
      if (outcome.input) {
        const state = outcome.input.state ?? undefined;
        step(task, "input_required", { inputRequests: outcome.input.inputRequests, state });
      } else {
        step(task, "completed", { result: outcome.result });
      }
    } catch (error) {
      const code = typeof error?.code === "number" ? error.code : -32603;
      const message = error instanceof Error ? error.message : String(error);
      step(task, "failed", { error: { code, message }, statusMessage: message });
    }
  }

  function find(params) {
    const task = tasks.get(params?.taskId);
    if (!task) {
      throw refuse(-32602, `Unknown task: ${params?.taskId}`);
    }
    return task;
  }

  return {
    /** A tool definition as tools/list shows it in this mode. */
    describe(tool) {
      const support = TASK_TOOLS[tool.name]?.support;
      return support && !tool.execution ? { ...tool, execution: { taskSupport: support } } : tool;
    },

    /**
     * How a tools/call is served: "task" (create one), "sync" (as before), or a thrown -32021 for a required
     * tool the request cannot get a task for. `retry`: the call carries inputResponses.
     */
    dispatch(name, capabilities, retry) {
      const tool = TASK_TOOLS[name];
      if (!tool) return "sync";
      if (!declaresTasks(capabilities)) {
        if (tool.support === "required") {
          throw refuse(-32021, `Tool ${name} runs only as a task: declare the ${TASKS_EXTENSION} extension`, {
            requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
          });
        }
        return "sync";
      }
      return tool.asksFirst && !retry ? "sync" : "task";
    },

    /**
     * Creates a task whose tool is `run(responses, state, signal)` (resolving to {result} or {input:
     * {inputRequests, state}}), starting from `responses` and `state`; answers the CreateTaskResult.
     */
    create(name, run, responses, state) {
      const now = new Date().toISOString();
      const task = {
        taskId: randomUUID(),
        status: "working",
        createdAt: now,
        lastUpdatedAt: now,
        run,
        responses: { ...responses },
        state,
        abort: new AbortController(),
      };
      tasks.set(task.taskId, task);
      setTimeout(() => tasks.delete(task.taskId), TTL_MS).unref();
      log(`task created ${task.taskId} (${name})`);
      drive(task);
      return { ...envelope(task), resultType: "task" };
    },

    /** Refuses a task method from a request that did not declare the extension. */
    gate(method, capabilities) {
      if (!declaresTasks(capabilities)) {
        throw refuse(-32021, `${method} needs the ${TASKS_EXTENSION} extension`, {
          requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
        });
      }
    },

    get(params) {
      const task = find(params);
      log(`task get ${task.taskId}`);
      return detailed(task);
    },

    update(params) {
      const task = find(params);
      const responses = params.inputResponses;
      const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
      if (!isObject(responses) || !Object.values(responses).every(isObject)) {
        throw refuse(-32602, "Invalid inputResponses: expected a map of response objects");
      }
      if (task.status !== "input_required") {
        throw refuse(-32602, `Task ${task.taskId} is not waiting for input (it is ${task.status})`);
      }
      log(`task update ${task.taskId} ${Object.keys(responses).join(",")}`);
      const open = { ...task.inputRequests };
      for (const [key, response] of Object.entries(responses)) {
        if (open[key] !== undefined) {
          task.responses[key] = response;
          delete open[key];
        }
      }
      if (Object.keys(open).length > 0) {
        step(task, "input_required", { inputRequests: open });
      } else {
        step(task, "working", { inputRequests: undefined });
        drive(task);
      }
      return {};
    },

    cancel(params) {
      const task = find(params);
      log(`task cancel ${task.taskId}`);
      if (!TERMINAL.has(task.status)) {
        step(task, "cancelled", { statusMessage: "cancelled at the client's request" });
        task.abort.abort();
      }
      return {};
    },
  };
}
