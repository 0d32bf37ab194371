//! Traces end to end: a gateway exporting over OTLP/HTTP JSON to a fake collector on
//! loopback. One SERVER span per agent request continuing the agent's `traceparent`, one CLIENT span per backend
//! request whose context the backend receives in `params._meta`, the MCP semantic-convention names and
//! attributes, handshakes, retries and resumptions as events, `error.type` on failures, nothing exported when
//! traces are off, calls that stay correct whatever the collector does, and the exporter's exported, dropped
//! and failed counts on `/metrics`. A 2026-07-28 agent's requests are SERVER spans too, continuing its trace from
//! `params._meta` or its HTTP `traceparent` header.

use serde_json::{Value, json};

use crate::modern_front::ModernAgent;
use crate::support::fault_backend::{Answer, FaultBackend, Resume, Script};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway, backend_toml};
use crate::support::otlp_collector::{Collector, attribute, resource_attribute, spans_of};
use crate::telemetry::{sample, scrape};

const AGENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN: &str = "00f067aa0ba902b7";
const SERVER: u64 = 2;
const CLIENT: u64 = 3;

fn agent_traceparent(trace: &str, flags: &str) -> String {
    format!("00-{trace}-{AGENT_SPAN}-{flags}")
}

/// A gateway in front of `backend` (named `fault`) exporting to `endpoint` quickly, plus `env`.
async fn gateway(backend: &FaultBackend, endpoint: &str, env: &[(&str, &str)]) -> TestGateway {
    let mut all = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY", "20"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=test-key"),
        ("OTEL_SERVICE_NAME", "switchyard-it"),
    ];
    all.extend_from_slice(env);
    TestGateway::start_env("", &backend_toml("fault", &backend.url(), ""), &all).await
}

/// A collector, a fault backend running `script`, a gateway exporting to the collector, and an agent on it.
struct Traced {
    collector: Collector,
    backend: FaultBackend,
    agent: Agent,
    _gateway: TestGateway,
}

async fn traced(script: Script) -> Traced {
    let collector = Collector::start().await;
    let backend = FaultBackend::start(script).await;
    let gateway = gateway(&backend, &collector.base, &[]).await;
    let agent = Agent::connected(gateway.mcp()).await;
    Traced { collector, backend, agent, _gateway: gateway }
}

/// Calls `tool` with `text`, carrying `traceparent` (and a `tracestate`) in `_meta` when given.
async fn traced_call(agent: &mut Agent, tool: &str, traceparent: Option<&str>) -> Value {
    let mut params = json!({"name": tool, "arguments": {"text": "hi"}});
    if let Some(traceparent) = traceparent {
        params["_meta"] = json!({"traceparent": traceparent, "tracestate": "vendor=1"});
    }
    agent.request("tools/call", params).await
}

fn of_trace<'a>(spans: &'a [Value], trace: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["traceId"] == trace).collect()
}

fn one_of_kind<'a>(spans: &[&'a Value], kind: u64) -> &'a Value {
    let found: Vec<&Value> = spans.iter().copied().filter(|span| span["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one span of kind {kind} in {spans:#?}");
    found[0]
}

fn text(value: &str) -> Option<Value> {
    Some(Value::String(value.to_owned()))
}

fn event_names(span: &Value) -> Vec<String> {
    let events = span["events"].as_array().cloned().unwrap_or_default();
    events.iter().map(|event| event["name"].as_str().unwrap_or_default().to_owned()).collect()
}

fn port_of(url: &str) -> String {
    url.rsplit(':').next().and_then(|rest| rest.split('/').next()).expect("a port").to_owned()
}

#[tokio::test]
async fn a_tool_call_continues_the_agents_trace_through_the_gateway_to_the_backend() {
    let Traced { collector, backend, mut agent, _gateway } = traced(Script::default()).await;
    let reply = traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(AGENT_TRACE, "01"))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");

    let spans = collector.wait_for("the call's two spans", |spans| of_trace(spans, AGENT_TRACE).len() >= 2).await;
    let trace = of_trace(&spans, AGENT_TRACE);
    assert_eq!(trace.len(), 2, "one SERVER and one CLIENT span: {trace:#?}");
    let server = one_of_kind(&trace, SERVER);
    assert_eq!(server["name"], "tools/call fault__echo");
    assert_eq!(server["parentSpanId"], AGENT_SPAN, "our SERVER span is the agent's span's child");
    assert_eq!(server["traceState"], "vendor=1");
    assert_eq!(server["flags"].as_u64().map(|flags| flags & 0x301), Some(0x301), "sampled, remote parent");
    assert_eq!(attribute(server, "mcp.method.name"), text("tools/call"));
    assert_eq!(attribute(server, "gen_ai.tool.name"), text("fault__echo"));
    assert_eq!(attribute(server, "gen_ai.operation.name"), text("execute_tool"));
    assert_eq!(attribute(server, "jsonrpc.request.id"), Some(json!(reply["id"].to_string())));
    assert_eq!(attribute(server, "mcp.protocol.version"), text("2025-11-25"));
    assert_eq!(attribute(server, "network.transport"), text("tcp"));
    assert_eq!(attribute(server, "client.address"), text("127.0.0.1"));
    let session = attribute(server, "mcp.session.id").expect("the agent session");
    assert!(session.as_str().is_some_and(|id| id.len() == 32), "the session's key, not its sealed id: {session}");
    assert_eq!(attribute(server, "error.type"), None);
    assert_eq!(server["status"]["code"], 0);

    let client = one_of_kind(&trace, CLIENT);
    assert_eq!(client["name"], "tools/call echo", "the backend's own tool name");
    assert_eq!(client["parentSpanId"], server["spanId"], "the CLIENT span is the SERVER span's child");
    assert_eq!(attribute(client, "gen_ai.tool.name"), text("echo"));
    assert_eq!(attribute(client, "mcp.method.name"), text("tools/call"));
    assert_eq!(attribute(client, "network.transport"), text("tcp"));
    assert_eq!(attribute(client, "server.address"), text("127.0.0.1"));
    assert_eq!(attribute(client, "server.port"), text(&port_of(&backend.url())));
    assert!(attribute(client, "jsonrpc.request.id").is_some(), "the backend-side request id");
    assert!(
        attribute(client, "mcp.session.id").is_some_and(|id| id.as_str().is_some_and(|id| id.starts_with("sess-")))
    );
    assert!(event_names(client).contains(&"switchyard.backend.handshake".to_owned()), "{client:#}");
    assert!(server["startTimeUnixNano"].as_str().unwrap() <= client["startTimeUnixNano"].as_str().unwrap());

    let metas = backend.metas("tools/call");
    let sent = metas.last().expect("the backend got the call");
    let client_span = client["spanId"].as_str().unwrap();
    assert_eq!(
        sent["traceparent"],
        format!("00-{AGENT_TRACE}-{client_span}-01"),
        "the backend continues our CLIENT span"
    );
    assert_eq!(sent["tracestate"], "vendor=1");

    let export = collector.exports().into_iter().next().expect("an export");
    assert_eq!(export.path, "/v1/traces");
    assert_eq!(export.headers.get("x-api-key").map(|v| v.as_bytes()), Some(&b"test-key"[..]));
    assert_eq!(export.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
    assert_eq!(resource_attribute(&export.body, "service.name"), text("switchyard-it"));
    assert!(resource_attribute(&export.body, "service.instance.id").is_some());

    let spans =
        collector.wait_for("the initialize span", |spans| spans.iter().any(|s| s["name"] == "initialize")).await;
    let initialize = spans.iter().find(|span| span["name"] == "initialize").expect("found");
    assert_eq!(initialize["kind"], SERVER);
    assert_eq!(attribute(initialize, "mcp.session.id"), Some(session), "initialize names the session it opened");
}

#[tokio::test]
async fn failures_carry_error_type_and_an_error_status() {
    let Traced { collector, backend, mut agent, _gateway } =
        traced(Script { tool_is_error: true, ..Script::default() }).await;
    let tool_failed = "1bf92f3577b34da6a3ce929d0e0e4736";
    traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(tool_failed, "01"))).await;
    let unknown = "2bf92f3577b34da6a3ce929d0e0e4736";
    let reply = traced_call(&mut agent, "fault__nope", Some(&agent_traceparent(unknown, "01"))).await;
    assert_eq!(reply["error"]["code"], -32602);
    backend.update(|script| script.call_status = Some(503));
    let http_failed = "3bf92f3577b34da6a3ce929d0e0e4736";
    traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(http_failed, "01"))).await;

    let spans = collector
        .wait_for("the three calls", |spans| {
            of_trace(spans, tool_failed).len() == 2
                && of_trace(spans, unknown).len() == 1
                && of_trace(spans, http_failed).len() == 2
        })
        .await;
    for span in of_trace(&spans, tool_failed) {
        assert_eq!(attribute(span, "error.type"), text("tool_error"), "{span:#}");
        assert_eq!(span["status"]["code"], 2);
    }
    let refused = one_of_kind(&of_trace(&spans, unknown), SERVER);
    assert_eq!(attribute(refused, "error.type"), text("-32602"));
    assert_eq!(attribute(refused, "rpc.response.status_code"), text("-32602"));
    assert!(
        refused["status"]["message"].as_str().is_some_and(|message| message.contains("unknown tool")),
        "{refused:#}"
    );
    let failed = of_trace(&spans, http_failed);
    assert_eq!(attribute(one_of_kind(&failed, CLIENT), "error.type"), text("503"));
    assert_eq!(attribute(one_of_kind(&failed, SERVER), "error.type"), text("unknown"), "the call may have run");
}

#[tokio::test]
async fn a_malformed_agent_traceparent_is_ignored_and_a_new_trace_started() {
    let Traced { collector, backend, mut agent, _gateway } = traced(Script::default()).await;
    let malformed = format!("00-{}-{AGENT_SPAN}-01", AGENT_TRACE.to_uppercase());
    let reply = traced_call(&mut agent, "fault__echo", Some(&malformed)).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi");

    let is_call = |span: &Value| span["name"] == "tools/call fault__echo";
    let spans = collector.wait_for("the call's SERVER span", |spans| spans.iter().any(is_call)).await;
    let server = spans.iter().find(|span| is_call(span)).expect("found");
    assert!(server.get("parentSpanId").is_none(), "a new root: {server:#}");
    let trace = server["traceId"].as_str().expect("a trace id");
    assert_ne!(trace.to_lowercase(), AGENT_TRACE);
    let sent = backend.metas("tools/call").last().cloned().expect("the call");
    let traceparent = sent["traceparent"].as_str().expect("ours");
    assert!(traceparent.starts_with(&format!("00-{trace}-")), "{traceparent}");
    assert_ne!(traceparent, malformed);
}

#[tokio::test]
async fn an_unsampled_agent_trace_reaches_the_backend_but_is_not_exported() {
    let Traced { collector, backend, mut agent, _gateway } = traced(Script::default()).await;
    traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(AGENT_TRACE, "00"))).await;
    let sent = backend.metas("tools/call").last().cloned().expect("the call");
    let traceparent = sent["traceparent"].as_str().expect("propagated");
    assert!(traceparent.starts_with(&format!("00-{AGENT_TRACE}-")) && traceparent.ends_with("-00"), "{traceparent}");
    assert!(!traceparent.contains(AGENT_SPAN), "our span, not the agent's: {traceparent}");
    // A sampled call made after it: once its spans are in, the unsampled call's would have been too.
    let later = "5bf92f3577b34da6a3ce929d0e0e4736";
    traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(later, "01"))).await;
    let spans = collector.wait_for("the sampled call", |spans| of_trace(spans, later).len() == 2).await;
    assert!(of_trace(&spans, AGENT_TRACE).is_empty(), "nothing of the unsampled trace: {spans:#?}");
}

#[tokio::test]
async fn nothing_is_exported_and_the_agents_context_passes_untouched_when_traces_are_off() {
    let collector = Collector::start().await;
    let backend = FaultBackend::start(Script::default()).await;
    let disabled =
        gateway(&backend, &collector.base, &[("OTEL_SDK_DISABLED", "true"), ("OTEL_SERVICE_NAME", "off")]).await;
    let never_configured = TestGateway::start("", &backend_toml("fault", &backend.url(), "")).await;
    let traceparent = agent_traceparent(AGENT_TRACE, "01");
    for gateway in [&disabled, &never_configured] {
        let mut agent = Agent::connected(gateway.mcp()).await;
        let reply = traced_call(&mut agent, "fault__echo", Some(&traceparent)).await;
        assert_eq!(reply["result"]["content"][0]["text"], "hi");
        let sent = backend.metas("tools/call").last().cloned().expect("the call");
        assert_eq!(sent, json!({"traceparent": traceparent, "tracestate": "vendor=1"}), "passed through verbatim");
    }
    // A traced gateway exporting to the same collector afterwards: once its spans are in, the others' would be.
    let control = gateway(&backend, &collector.base, &[("OTEL_SERVICE_NAME", "control")]).await;
    let mut agent = Agent::connected(control.mcp()).await;
    let later = "6bf92f3577b34da6a3ce929d0e0e4736";
    traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(later, "01"))).await;
    collector.wait_for("the control call", |spans| of_trace(spans, later).len() == 2).await;
    for export in collector.exports() {
        assert_eq!(
            resource_attribute(&export.body, "service.name"),
            text("control"),
            "only the traced gateway exports"
        );
        assert!(of_trace(&spans_of(&export.body), AGENT_TRACE).is_empty());
    }
}

/// Calls the echo tool `count` times, each answered correctly, and checks the backend ran each once.
async fn calls_stay_correct(gateway: &TestGateway, backend: &FaultBackend, count: usize) {
    let mut agent = Agent::connected(gateway.mcp()).await;
    for n in 0..count {
        let text = format!("call {n}");
        let params = json!({"name": "fault__echo", "arguments": {"text": text}, "_meta": {"traceparent": agent_traceparent(AGENT_TRACE, "01")}});
        let reply = agent.request("tools/call", params).await;
        assert_eq!(reply["result"]["content"][0]["text"], text.as_str(), "{reply}");
    }
    assert_eq!(backend.executions("echo"), count);
}

/// Small batches and a short timeout, so the exporter is busy (or failing) all the time.
const BUSY_EXPORTER: [(&str, &str); 4] = [
    ("OTEL_BSP_SCHEDULE_DELAY", "1"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "4"),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
];

#[tokio::test]
async fn a_collector_that_is_down_does_not_fail_calls() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway(&backend, &endpoint, &BUSY_EXPORTER).await;
    calls_stay_correct(&gateway, &backend, 20).await;
    // Each failed export is counted, and so are the spans it carried; none reached a collector.
    let text =
        scrape_until(&gateway, |text| sample(text, EXPORT_FAILURES).is_some_and(|failures| failures > 0.0)).await;
    assert!(sample(&text, &dropped("export_failed")).is_some_and(|spans| spans >= 2.0), "{text}");
    assert_eq!(sample(&text, SPANS_EXPORTED), Some(0.0), "{text}");
}

const EXPORT_FAILURES: &str = "switchyard_trace_export_failures_total";
const SPANS_EXPORTED: &str = "switchyard_trace_spans_exported_total";

fn dropped(reason: &str) -> String {
    format!("switchyard_trace_spans_dropped_total{{reason=\"{reason}\"}}")
}

/// `/metrics` once `ready` holds (within 10 s).
async fn scrape_until(gateway: &TestGateway, ready: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = scrape(&gateway.base).await;
        if ready(&text) || tokio::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_full_export_queue_counts_its_drops_and_a_working_collector_its_exports() {
    // The collector holds the first batch for as long as the export may take: the queue of 4 fills behind it.
    let collector = Collector::stalled().await;
    let backend = FaultBackend::start(Script::default()).await;
    let stuck = [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10000"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "4"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2"),
    ];
    let gateway = gateway(&backend, &collector.base, &stuck).await;
    calls_stay_correct(&gateway, &backend, 10).await;
    let text = scrape(&gateway.base).await;
    let drops = sample(&text, &dropped("queue_full")).expect("the series is exposed");
    assert!(drops >= 10.0, "10 calls of 2 spans each, 4 queued and 2 in flight at most: {drops}\n{text}");
    assert_eq!(sample(&text, EXPORT_FAILURES), Some(0.0), "the stalled export has not timed out yet:\n{text}");

    let Traced { collector, agent: mut working, _gateway: ok_gateway, .. } = traced(Script::default()).await;
    traced_call(&mut working, "fault__echo", Some(&agent_traceparent(AGENT_TRACE, "01"))).await;
    collector.wait_for("the call's spans", |spans| of_trace(spans, AGENT_TRACE).len() >= 2).await;
    let text = scrape_until(&ok_gateway, |text| sample(text, SPANS_EXPORTED).is_some_and(|spans| spans >= 2.0)).await;
    assert!(sample(&text, SPANS_EXPORTED).is_some_and(|spans| spans >= 2.0), "{text}");
    assert_eq!(sample(&text, &dropped("queue_full")), Some(0.0), "{text}");
    assert_eq!(sample(&text, EXPORT_FAILURES), Some(0.0), "{text}");
}

#[tokio::test]
async fn a_collector_that_never_answers_does_not_hold_calls() {
    let collector = Collector::stalled().await;
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway(&backend, &collector.base, &BUSY_EXPORTER).await;
    calls_stay_correct(&gateway, &backend, 20).await;
    let export = collector.wait_for_export().await;
    assert_eq!(export.path, "/v1/traces", "the exporter was really sending to the stalled collector");
}

#[tokio::test]
async fn resumptions_retries_and_handshakes_are_events_of_the_client_span() {
    let resume = Resume { retry_ms: 10, breaks: 1, with_id: true };
    let script = Script { answer: Answer::Sse, resume: Some(resume), ..Script::default() };
    let Traced { collector, backend, mut agent, _gateway } = traced(script).await;
    let resumed = "7bf92f3577b34da6a3ce929d0e0e4736";
    let reply = traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(resumed, "01"))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    backend.update(|script| script.resume = None);
    backend.end_all_sessions();
    let retried = "8bf92f3577b34da6a3ce929d0e0e4736";
    let reply = traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(retried, "01"))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");

    let spans = collector
        .wait_for("both calls", |spans| of_trace(spans, resumed).len() == 2 && of_trace(spans, retried).len() == 2)
        .await;
    let first = one_of_kind(&of_trace(&spans, resumed), CLIENT);
    let events = first["events"].as_array().expect("events");
    let resumption = events.iter().find(|event| event["name"] == "switchyard.backend.resumption").expect("resumed");
    assert_eq!(attribute(resumption, "switchyard.resumption.attempt"), text("1"));
    let second = one_of_kind(&of_trace(&spans, retried), CLIENT);
    assert_eq!(event_names(second), ["switchyard.backend.retry", "switchyard.backend.handshake"], "{second:#}");
    let retry = &second["events"][0];
    assert_eq!(attribute(retry, "switchyard.retry.reason"), text("session_ended"));
    assert_ne!(attribute(first, "mcp.session.id"), attribute(second, "mcp.session.id"), "the new session is named");
}

#[tokio::test]
async fn a_stdio_backend_is_a_pipe() {
    let collector = Collector::start().await;
    let program = env!("CARGO_BIN_EXE_switchyard");
    let backends = format!(
        "[[backends]]\nname = \"demo\"\ntransport = \"stdio\"\ncommand = {program:?}\nargs = [\"demo-server\", \"--stdio\"]\n"
    );
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", collector.base.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "20")];
    let gateway = TestGateway::start_env("", &backends, &env).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let reply = traced_call(&mut agent, "demo__echo", Some(&agent_traceparent(AGENT_TRACE, "01"))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    let spans = collector.wait_for("the call", |spans| of_trace(spans, AGENT_TRACE).len() == 2).await;
    let trace = of_trace(&spans, AGENT_TRACE);
    let client = one_of_kind(&trace, CLIENT);
    assert_eq!(client["parentSpanId"], one_of_kind(&trace, SERVER)["spanId"]);
    assert_eq!(attribute(client, "network.transport"), text("pipe"));
    assert_eq!(attribute(client, "server.address"), None);
    // Discovery is the gateway's own work: root CLIENT spans of their own traces.
    let discovery =
        spans.iter().find(|span| span["name"] == "tools/list" && span["kind"] == CLIENT).expect("discovery");
    assert!(discovery.get("parentSpanId").is_none());
}

#[tokio::test]
async fn spans_still_queued_at_shutdown_reach_the_collector() {
    let collector = Collector::start().await;
    let backend = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("traces-shutdown");
    let data = dir.path().join("data").display().to_string();
    let text = format!(
        "[server]\ndata_dir = {data:?}\n[telemetry]\notlp_endpoint = {:?}\n{}",
        collector.base,
        backend_toml("fault", &backend.url(), "")
    );
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, text).expect("write the configuration");
    // An hour between batches: nothing leaves before the shutdown but what it flushes.
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "3600000")];
    let gateway = ChildGateway::spawn_env(&config, &dir.path().join("gateway.log"), &env).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let reply = traced_call(&mut agent, "fault__echo", Some(&agent_traceparent(AGENT_TRACE, "01"))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi");
    assert!(collector.exports().is_empty(), "the batch is still queued");
    assert!(gateway.terminate().await.success());
    let spans = collector.spans();
    assert_eq!(of_trace(&spans, AGENT_TRACE).len(), 2, "flushed at shutdown: {spans:#?}");
}

#[tokio::test]
async fn a_modern_agents_requests_are_server_spans_continuing_its_trace() {
    let collector = Collector::start().await;
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway(&backend, &collector.base, &[]).await;
    let agent = ModernAgent::new(gateway.mcp());
    let in_meta = json!({"name": "fault__echo", "arguments": {"text": "hi"},
        "_meta": {"traceparent": agent_traceparent(AGENT_TRACE, "01"), "tracestate": "vendor=1"}});
    let reply = agent.send_with(json!(7), "tools/call", in_meta, |_| {}).await;
    assert_eq!(
        reply.body.as_ref().map(|body| body["result"]["content"][0]["text"].clone()),
        text("hi"),
        "{}",
        reply.raw
    );
    let by_header = "5bf92f3577b34da6a3ce929d0e0e4736";
    let header = agent_traceparent(by_header, "01");
    let listed = agent
        .send_with(json!(8), "tools/list", json!({}), |headers| headers.push(("traceparent".into(), header.clone())))
        .await;
    assert!(listed.body.is_some_and(|body| body["result"]["tools"].is_array()), "{}", listed.raw);
    let both = "6bf92f3577b34da6a3ce929d0e0e4736";
    let discover_meta = json!({"_meta": {"traceparent": agent_traceparent(both, "01")}});
    agent
        .send_with(json!(9), "server/discover", discover_meta, |headers| {
            headers.push(("traceparent".into(), header.clone()));
        })
        .await;

    let spans = collector
        .wait_for("the modern agent's spans", |spans| {
            of_trace(spans, AGENT_TRACE).len() >= 2
                && !of_trace(spans, by_header).is_empty()
                && !of_trace(spans, both).is_empty()
        })
        .await;
    let trace = of_trace(&spans, AGENT_TRACE);
    let server = one_of_kind(&trace, SERVER);
    assert_eq!(server["name"], "tools/call fault__echo");
    assert_eq!(server["parentSpanId"], AGENT_SPAN, "the agent's `_meta.traceparent` is continued");
    assert_eq!(server["traceState"], "vendor=1");
    assert_eq!(attribute(server, "mcp.method.name"), text("tools/call"));
    assert_eq!(attribute(server, "gen_ai.tool.name"), text("fault__echo"));
    assert_eq!(attribute(server, "gen_ai.operation.name"), text("execute_tool"));
    assert_eq!(attribute(server, "jsonrpc.request.id"), text("7"));
    assert_eq!(attribute(server, "mcp.protocol.version"), text("2026-07-28"));
    assert_eq!(attribute(server, "mcp.session.id"), None, "this era has no session");
    assert_eq!(attribute(server, "client.address"), text("127.0.0.1"));
    assert_eq!(attribute(server, "network.transport"), text("tcp"));
    assert_eq!(server["status"]["code"], 0);
    let client = one_of_kind(&trace, CLIENT);
    assert_eq!(client["parentSpanId"], server["spanId"], "the backend request runs inside the SERVER span");
    let sent = backend.metas("tools/call").last().cloned().expect("the backend got the call");
    assert_eq!(sent["traceparent"], format!("00-{AGENT_TRACE}-{}-01", client["spanId"].as_str().unwrap()));

    let listed = one_of_kind(&of_trace(&spans, by_header), SERVER);
    assert_eq!(listed["name"], "tools/list");
    assert_eq!(listed["parentSpanId"], AGENT_SPAN, "the HTTP `traceparent` when `_meta` has none");
    let discovered = one_of_kind(&of_trace(&spans, both), SERVER);
    assert_eq!(discovered["name"], "server/discover", "`_meta` wins over the header");
    assert_eq!(attribute(discovered, "mcp.protocol.version"), text("2026-07-28"));
}
