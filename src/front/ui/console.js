// The operator's console: reads the console API (../admin/api/…) and shows it; its one write is an approver's
// decision on a call awaiting approval, sent with the form token the list of approvals gave. No library, no build
// step. Everything the API returns is put into the page as text (textContent), never as HTML, so a tool name or
// an error message cannot inject markup. The body's data-state says where the page is: loading, ready,
// needs-credential or error (the browser test waits for "ready").
"use strict";

(() => {
  const REFRESH_MS = 5000;
  const TOKEN_KEY = "switchyard-console-token";
  const $ = (id) => document.getElementById(id);

  let token = sessionStorage.getItem(TOKEN_KEY);
  let timer = null;
  let running = false;
  let again = false;

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** GETs one API resource; a refusal becomes an ApiError carrying the API's own message. */
  function get(path) {
    return request(path, {});
  }

  /** Sends one API request (`init` as fetch's, plus the credential); a refusal becomes an ApiError. */
  async function request(path, init) {
    const headers = { Accept: "application/json", ...(init.headers || {}) };
    if (token) headers.Authorization = `Bearer ${token}`;
    const url = new URL(`../admin/api/${path}`, document.baseURI);
    const response = await fetch(url, { ...init, headers, cache: "no-store" });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const message = body && body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
      throw new ApiError(response.status, message);
    }
    return body;
  }

  /** An element with attributes and children (strings become text nodes). */
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== undefined && value !== null) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function fill(tbody, rows, columns, emptyText) {
    tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colspan: columns }, emptyText))]));
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "—";
    return ms >= 1000 ? `${(ms / 1000).toFixed(ms >= 10000 ? 1 : 2)} s` : `${ms} ms`;
  }

  function when(ms) {
    return new Date(ms).toLocaleString();
  }

  function badge(text, kind) {
    return el("span", { class: `badge ${kind || text}` }, text);
  }

  // --- backends -------------------------------------------------------------------------------------------------

  // Before any exchange has ended, discovery's state says what there is to say.
  const DISCOVERY = { discovered: "up", failed: "down", pending: "pending" };

  function renderBackends(backends) {
    const rows = backends.map((backend) => {
      const known = backend.health && backend.health.state !== "unknown";
      const label = known ? backend.health.state : DISCOVERY[backend.status] || backend.status;
      const health = el("td", {}, badge(label));
      const why = known ? backend.health.error : backend.error;
      if (why) health.append(el("span", { class: "detail" }, why));
      if (known && backend.health.down_since_ms) {
        health.append(el("span", { class: "detail" }, `down since ${when(backend.health.down_since_ms)}`));
      }
      if (backend.process_start) {
        const start = backend.process_start;
        health.append(el("span", { class: "detail" }, `process start failed ${start.failures}×: ${start.error}`));
      }
      const latency = backend.latency;
      return el(
        "tr",
        { "data-backend": backend.name },
        el("td", {}, backend.name),
        el("td", {}, backend.transport),
        health,
        el("td", { class: "number" }, backend.tools),
        el("td", { class: "number" }, backend.sessions),
        el("td", { class: "number" }, backend.processes),
        el("td", { class: "number" }, duration(latency.p50_ms)),
        el("td", { class: "number" }, duration(latency.p90_ms)),
        el("td", { class: "number" }, duration(latency.p99_ms)),
      );
    });
    fill($("backends").tBodies[0], rows, 9, "no backends are configured");
    renderCharts(backends);
    renderBackendChoices(backends);
  }

  function renderBackendChoices(backends) {
    const select = $("filter-backend");
    const chosen = select.value;
    const options = [el("option", { value: "" }, "any")];
    for (const backend of backends) options.push(el("option", { value: backend.name }, backend.name));
    select.replaceChildren(...options);
    select.value = backends.some((backend) => backend.name === chosen) ? chosen : "";
  }

  function renderCharts(backends) {
    const charts = backends.map((backend) => {
      const canvas = el("canvas", {
        "data-samples": backend.latency.samples,
        role: "img",
        "aria-label": `latency of ${backend.name}: ${backend.latency.samples} calls`,
      });
      const legend = el(
        "div",
        { class: "legend" },
        el("span", {}, `${backend.latency.samples} calls`),
        el("span", { class: "p50" }, `p50 ${duration(backend.latency.p50_ms)}`),
        el("span", { class: "p90" }, `p90 ${duration(backend.latency.p90_ms)}`),
        el("span", { class: "p99" }, `p99 ${duration(backend.latency.p99_ms)}`),
      );
      return { backend, node: el("div", { class: "chart" }, el("h3", {}, backend.name), canvas, legend), canvas };
    });
    $("charts").replaceChildren(...charts.map((chart) => chart.node));
    for (const chart of charts) drawChart(chart.canvas, chart.backend.latency);
  }

  /** Draws one backend's samples over its window: a dot per call, dashed lines at p50, p90 and p99. */
  function drawChart(canvas, latency) {
    const style = getComputedStyle(document.documentElement);
    const color = (name) => style.getPropertyValue(name).trim() || "#333";
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 340;
    const height = canvas.clientHeight || 160;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const context = canvas.getContext("2d");
    context.scale(ratio, ratio);
    const pad = { left: 52, right: 10, top: 8, bottom: 20 };
    const plotWidth = width - pad.left - pad.right;
    const plotHeight = height - pad.top - pad.bottom;
    const now = Date.now();
    const start = now - latency.window_seconds * 1000;
    const highest = Math.max(latency.p99_ms || 0, ...latency.points.map((point) => point.duration_ms));
    const top = latency.points.length ? niceCeiling(Math.max(4, highest * 1.1)) : 100;
    const x = (ms) => pad.left + ((ms - start) / (now - start)) * plotWidth;
    const y = (value) => pad.top + plotHeight - (value / top) * plotHeight;

    context.font = "11px system-ui, sans-serif";
    context.textBaseline = "middle";
    context.strokeStyle = color("--line");
    context.fillStyle = color("--muted");
    context.lineWidth = 1;
    for (let step = 0; step <= 4; step += 1) {
      const value = (top * step) / 4;
      context.beginPath();
      context.moveTo(pad.left, Math.round(y(value)) + 0.5);
      context.lineTo(pad.left + plotWidth, Math.round(y(value)) + 0.5);
      context.stroke();
      context.textAlign = "right";
      context.fillText(axisLabel(value), pad.left - 6, y(value));
    }
    context.textAlign = "left";
    context.fillText(`−${Math.round(latency.window_seconds / 60)} min`, pad.left, height - 8);
    context.textAlign = "right";
    context.fillText("now", pad.left + plotWidth, height - 8);

    if (!latency.points.length) {
      context.textAlign = "center";
      context.fillText("no completed calls in this window", pad.left + plotWidth / 2, pad.top + plotHeight / 2);
      return;
    }
    context.fillStyle = color("--accent");
    for (const point of latency.points) {
      context.beginPath();
      context.arc(x(Math.max(point.at_ms, start)), y(point.duration_ms), 2.5, 0, 2 * Math.PI);
      context.fill();
    }
    context.setLineDash([5, 4]);
    for (const [name, value] of [["--p50", latency.p50_ms], ["--p90", latency.p90_ms], ["--p99", latency.p99_ms]]) {
      if (value === null || value === undefined) continue;
      context.strokeStyle = color(name);
      context.beginPath();
      context.moveTo(pad.left, y(value));
      context.lineTo(pad.left + plotWidth, y(value));
      context.stroke();
    }
    context.setLineDash([]);
  }

  /** An axis value: whole milliseconds, a tenth below 10 ms, seconds from 1 s on. */
  function axisLabel(ms) {
    if (ms >= 1000) return duration(Math.round(ms));
    return ms >= 10 || Number.isInteger(ms) ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`;
  }

  /** 1, 2 or 5 times a power of ten, at least `value`: round numbers for the axis. */
  function niceCeiling(value) {
    const power = 10 ** Math.floor(Math.log10(value));
    for (const factor of [1, 2, 5, 10]) if (factor * power >= value) return factor * power;
    return 10 * power;
  }

  // --- calls ----------------------------------------------------------------------------------------------------

  function callQuery() {
    const query = new URLSearchParams();
    const set = (name, id) => {
      const value = $(id).value.trim();
      if (value) query.set(name, value);
    };
    set("backend", "filter-backend");
    set("tool", "filter-tool");
    set("outcome", "filter-outcome");
    set("principal", "filter-principal");
    set("limit", "filter-limit");
    const text = query.toString();
    return text ? `calls?${text}` : "calls";
  }

  function outcomeCell(call) {
    const cell = el("td", {}, badge(call.outcome));
    if (call.tool_error) cell.append(" ", badge("tool error", "tool-error"));
    return cell;
  }

  function renderCalls(calls) {
    const rows = calls.map((call) =>
      el(
        "tr",
        { "data-key": call.key, title: call.key },
        el("td", {}, when(call.started_ms)),
        el("td", {}, call.principal),
        el("td", {}, call.backend),
        el("td", {}, call.tool),
        outcomeCell(call),
        el("td", { class: "number" }, duration(call.duration_ms)),
        el("td", {}, call.error || ""),
      ),
    );
    fill($("calls").tBodies[0], rows, 7, "no calls match");
  }

  function renderUnknown(calls) {
    if (!calls.length) {
      $("unknown").replaceChildren(el("p", { class: "muted" }, "None: every call's outcome is known."));
      return;
    }
    const cards = calls.map((call) =>
      el(
        "div",
        { class: "unknown-call", "data-key": call.key },
        el("p", {}, el("strong", {}, call.tool), ` on ${call.backend} by ${call.principal}, started ${when(call.started_ms)}`),
        call.error ? el("p", { class: "muted" }, call.error) : null,
        el("p", {}, "Key: ", el("code", {}, call.key)),
        el(
          "ul",
          {},
          ...call.resolve.map((option) =>
            el("li", {}, el("code", {}, option.command), ` ${option.effect}`),
          ),
        ),
      ),
    );
    $("unknown").replaceChildren(...cards);
  }

  // --- approvals ----------------------------------------------------------------------------------------------

  let formToken = null;
  /** The key of the request an announcement's link opened the page on, once the link is read. */
  let linkedKey = null;

  function renderApprovals(answer) {
    formToken = answer.form_token || null;
    const decides = Boolean(formToken);
    if (!answer.approvals.length) {
      $("approvals").replaceChildren(el("p", { class: "muted" }, "None: no call waits for a decision."));
      return;
    }
    const cards = answer.approvals.map((approval) => approvalCard(approval, decides));
    $("approvals").replaceChildren(...cards);
    const linked = cards.find((card) => card.dataset.key === linkedKey);
    if (linked) linked.classList.add("linked");
  }

  function approvalCard(approval, decides) {
    const card = el(
      "div",
      { class: "unknown-call approval", "data-key": approval.key },
      el("p", {}, el("strong", {}, approval.tool), ` on ${approval.backend} by ${approval.principal}`),
      el("p", { class: "muted" }, `asked ${when(approval.requested_ms)}, expires ${when(approval.expires_ms)}`),
      el("p", {}, "Key: ", el("code", {}, approval.key)),
      "arguments" in approval
        ? el("pre", { class: "arguments" }, JSON.stringify(approval.arguments, null, 2))
        : el("p", { class: "muted" }, `Arguments: SHA-256 ${approval.arguments_sha256}`),
    );
    if (!decides) {
      card.append(el("ul", {}, el("li", {}, el("code", {}, approval.approve_command)), el("li", {}, el("code", {}, approval.deny_command))));
      return card;
    }
    const note = el("input", { class: "note", placeholder: "note (optional)", maxlength: "4096" });
    const button = (decision, label) => {
      const node = el("button", { type: "button", class: `decide ${decision}` }, label);
      node.addEventListener("click", () => decide(card, approval.key, decision, note.value));
      return node;
    };
    card.append(el("p", { class: "decision" }, note, button("approve", "Approve"), button("deny", "Deny")));
    return card;
  }

  /** Sends an approver's decision; the list is read again whatever the answer. */
  async function decide(card, key, decision, note) {
    card.querySelectorAll("button").forEach((node) => (node.disabled = true));
    try {
      const body = JSON.stringify({ key, decision, note: note || null });
      const headers = { "Content-Type": "application/json", "x-csrf-token": formToken || "" };
      const decided = await request("approvals/decisions", { method: "POST", headers, body });
      $("decided").prepend(el("li", {}, `${decided.key}: ${decided.state} by ${decided.decided_by}`));
    } catch (error) {
      $("decided").prepend(el("li", { class: "refused" }, `${key}: not recorded: ${error.message}`));
    }
    refresh();
  }

  /** Reads the request the page's link names (`#approval=TICKET`), which needs no credential. */
  async function readLink() {
    const ticket = new URLSearchParams(location.hash.slice(1)).get("approval");
    if (!ticket) return;
    const panel = $("link");
    panel.hidden = false;
    try {
      const { approval } = await get(`approvals/link?ticket=${encodeURIComponent(ticket)}`);
      linkedKey = approval.key;
      panel.replaceChildren(
        el("p", {}, "This link asks for a decision on ", el("strong", {}, approval.tool), ` of ${approval.backend}, called by ${approval.principal}; it is marked below.`),
      );
    } catch (error) {
      panel.replaceChildren(el("p", {}, error.message));
    }
  }

  // --- quarantined tools -------------------------------------------------------------------------------------

  function renderQuarantined(pins) {
    const held = pins.filter((pin) => pin.state === "quarantined");
    if (!held.length) {
      $("quarantined").replaceChildren(el("p", { class: "muted" }, "None: every pinned tool is served."));
      return;
    }
    const json = (value) => el("pre", {}, value === null ? "(nothing pinned: new)" : JSON.stringify(value, null, 2));
    const cards = held.map((pin) =>
      el(
        "div",
        { class: "unknown-call quarantined", "data-name": `${pin.backend}/${pin.name}` },
        el("p", {}, el("strong", {}, pin.name), ` (${pin.kind}) of ${pin.backend}`),
        pin.offered
          ? el(
              "div",
              { class: "diff" },
              el("div", {}, el("p", { class: "muted" }, "pinned"), json(pin.offered.pinned)),
              el("div", {}, el("p", { class: "muted" }, "offered"), json(pin.offered.offered)),
            )
          : null,
        pin.offered
          ? el("ul", {}, el("li", {}, el("code", {}, pin.offered.approve)), el("li", {}, el("code", {}, pin.offered.reject)))
          : null,
      ),
    );
    $("quarantined").replaceChildren(...cards);
  }

  // --- catalog --------------------------------------------------------------------------------------------------

  function renderCatalog(catalog) {
    const rows = catalog.tools.map((tool) =>
      el(
        "tr",
        {},
        el("td", {}, el("code", {}, tool.exposed)),
        el("td", {}, tool.backend),
        el("td", {}, tool.name),
        el("td", {}, tool.description || ""),
      ),
    );
    fill($("catalog").tBodies[0], rows, 4, "no tools discovered yet");
    const withheld = catalog.withheld.map((item) =>
      el("li", {}, `${item.kind} ${item.name} of ${item.backend}: ${item.reason}`),
    );
    $("withheld").replaceChildren(...(withheld.length ? [el("h3", {}, "Withheld"), el("ul", {}, ...withheld)] : []));
  }

  // --- limits ---------------------------------------------------------------------------------------------------

  /** `used/of`, or a dash when the limit has no such part. */
  function share(used, of) {
    return of === undefined ? "—" : `${used}/${of}`;
  }

  function renderTasks(tasks) {
    const rows = tasks.map((task) =>
      el(
        "tr",
        {},
        el("td", {}, when(task.created_ms)),
        el("td", {}, task.principal),
        el("td", {}, task.tool),
        el("td", {}, badge(task.status, "pending")),
        el("td", { class: "number" }, duration(Date.now() - task.created_ms)),
        el("td", {}, el("code", {}, task.task_id)),
      ),
    );
    fill($("tasks").tBodies[0], rows, 6, "no task is running");
  }

  function renderLimits(limits) {
    const rows = limits.map((use) =>
      el(
        "tr",
        {},
        el("td", {}, use.limit),
        el("td", {}, use.principal),
        el("td", { class: "number" }, share(use.tokens, use.burst)),
        el("td", { class: "number" }, share(use.used, use.quota)),
        el("td", { class: "number" }, share(use.in_flight, use.concurrency)),
      ),
    );
    fill($("limits").tBodies[0], rows, 5, "no limit is in use");
  }

  // --- refresh --------------------------------------------------------------------------------------------------

  function showProblem(text) {
    const problem = $("problem");
    problem.textContent = text;
    problem.hidden = !text;
  }

  async function refresh() {
    if (running) {
      again = true; // a filter changed meanwhile: refresh once more when this one ends
      return;
    }
    running = true;
    try {
      renderApprovals(await get("approvals"));
      await refreshAdministrators();
      $("credential").hidden = true;
      $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      document.body.dataset.state = "ready";
    } catch (error) {
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
        $("credential").hidden = false;
        document.body.dataset.state = "needs-credential";
      } else {
        document.body.dataset.state = "error";
      }
      showProblem(error.message);
    } finally {
      running = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  /** The administrators' sections; an approver who is not one reads the approvals only. */
  async function refreshAdministrators() {
    let answers;
    try {
      answers = await Promise.all([
        get("backends"),
        get("calls/unknown"),
        get(callQuery()),
        get("catalog"),
        get("limits"),
        get("pins"),
        get("tasks"),
      ]);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 403)) throw error;
      showProblem("You read the calls awaiting approval only: the other sections are for administrators.");
      return;
    }
    const [backends, unknown, calls, catalog, limits, pins, tasks] = answers;
    renderTasks(tasks.tasks);
    renderQuarantined(pins.pins);
    renderBackends(backends.backends);
    renderUnknown(unknown.calls);
    renderCalls(calls.calls);
    renderCatalog(catalog);
    renderLimits(limits.limits);
    showProblem("");
  }

  function schedule() {
    clearInterval(timer);
    timer = $("auto").checked ? setInterval(refresh, REFRESH_MS) : null;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("refresh").addEventListener("click", refresh);
    $("auto").addEventListener("change", schedule);
    $("filters").addEventListener("submit", (event) => {
      event.preventDefault();
      refresh();
    });
    $("credential").addEventListener("submit", (event) => {
      event.preventDefault();
      token = $("token").value.trim();
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
      refresh();
    });
    readLink().finally(refresh);
    schedule();
  });
})();
