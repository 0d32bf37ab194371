//! The tracer's rules on recorded spans: parents, sampling, the task's context, cancellation, a full queue.

use serde_json::json;
use tokio::sync::mpsc;

use super::span::AttrValue;
use super::*;

const AGENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn tracer(sampler: Sampler, max_queue: usize) -> (Tracer, mpsc::Receiver<SpanRecord>) {
    let (queue, exported) = export::Queue::detached(max_queue);
    (Tracer(Arc::new(Inner { sampler, queue })), exported)
}

fn request<'a>(params: &'a Value, id: &'a Value) -> ServerRequest<'a> {
    ServerRequest { method: "tools/call", id, params, session: Some(("0123", "2025-11-25")), peer: None }
}

fn attribute<'a>(record: &'a SpanRecord, key: &str) -> Option<&'a AttrValue> {
    record.attributes.iter().find(|attr| attr.key == key).map(|attr| &attr.value)
}

fn text(value: &str) -> Option<AttrValue> {
    Some(AttrValue::Text(value.to_owned()))
}

#[tokio::test]
async fn a_server_span_continues_the_agents_trace() {
    let (tracer, mut exported) = tracer(Sampler::default(), 16);
    let params = json!({"name": "echo", "_meta": {"traceparent": AGENT, "tracestate": "k=v"}});
    let span = tracer.server_span(&request(&params, &json!(3)));
    span.end(&json!({"jsonrpc": "2.0", "id": 3, "result": {"content": []}}));
    let record = exported.try_recv().expect("exported");
    assert_eq!(record.context.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(record.parent.map(|(id, remote)| (id.to_string(), remote)), Some(("00f067aa0ba902b7".into(), true)));
    assert_eq!(record.context.trace_state.as_deref(), Some("k=v"));
    assert_eq!((record.name.as_str(), record.kind), ("tools/call echo", Kind::Server));
    assert_eq!(attribute(&record, "mcp.session.id"), text("0123").as_ref());
    assert_eq!(attribute(&record, "mcp.protocol.version"), text("2025-11-25").as_ref());
    assert_eq!(attribute(&record, "jsonrpc.request.id"), text("3").as_ref());
    assert_eq!(record.failure, None);
    assert!(record.end >= record.start);
}

#[tokio::test]
async fn a_malformed_agent_context_starts_a_new_trace() {
    let (tracer, mut exported) = tracer(Sampler::default(), 16);
    let params = json!({"name": "echo", "_meta": {"traceparent": "00-zz-00f067aa0ba902b7-01"}});
    tracer.server_span(&request(&params, &json!(1))).end(&json!({"result": {}}));
    let record = exported.try_recv().expect("exported");
    assert_eq!(record.parent, None);
    assert_ne!(record.context.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
}

#[tokio::test]
async fn an_unsampled_agent_trace_is_propagated_but_not_recorded() {
    let (tracer, mut exported) = tracer(Sampler::default(), 16);
    let params = json!({"name": "echo", "_meta": {"traceparent": AGENT.replace("-01", "-00")}});
    let server = tracer.server_span(&request(&params, &json!(1)));
    let mut backend_params = json!({"name": "echo"});
    server
        .run(async {
            let client =
                tracer.client_span(&ClientRequest { method: "tools/call", params: &backend_params, peer: pipe() });
            client.inject(&mut backend_params);
            client.end(Ok(&json!({})));
        })
        .await;
    server.end(&json!({"result": {}}));
    assert!(exported.try_recv().is_err(), "nothing is recorded");
    let sent = backend_params["_meta"]["traceparent"].as_str().expect("propagated");
    assert!(sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && sent.ends_with("-00"), "{sent}");
    assert!(!sent.contains("00f067aa0ba902b7"), "our own span id, not the agent's: {sent}");
}

fn pipe() -> Peer {
    Peer { transport: "pipe", address: None, port: None }
}

#[tokio::test]
async fn client_spans_are_children_of_the_server_span_the_task_serves() {
    let (tracer, mut exported) = tracer(Sampler::default(), 16);
    let server = tracer.server_span(&request(&json!({"name": "echo"}), &json!(1)));
    let params = json!({"name": "echo"});
    let peer = Peer { transport: "tcp", address: Some("127.0.0.1".into()), port: Some(9) };
    let inside = server
        .run(async { tracer.client_span(&ClientRequest { method: "tools/call", params: &params, peer: peer.clone() }) })
        .await;
    let outside = tracer.client_span(&ClientRequest { method: "tools/list", params: &Value::Null, peer });
    inside.handshake(Ok("2025-06-18"));
    inside.session(Some("sess-1"), "2025-06-18");
    inside.retry("session_ended");
    inside.session(Some("sess-2"), "2025-06-18");
    inside.request_id(&json!(41));
    inside.end(Err(CallFailure::rpc(-32000, "boom")));
    outside.end(Ok(&json!({"tools": []})));
    server.end(&json!({"result": {}}));
    let child = exported.try_recv().expect("the child");
    let root = exported.try_recv().expect("the root");
    let parent = exported.try_recv().expect("the server span");
    assert_eq!(child.parent, Some((parent.context.span_id, false)));
    assert_eq!(child.context.trace_id, parent.context.trace_id);
    assert_eq!(root.parent, None);
    assert_ne!(root.context.trace_id, parent.context.trace_id);
    assert_eq!(attribute(&child, "mcp.session.id"), text("sess-2").as_ref(), "the session after the retry");
    assert_eq!(child.attributes.iter().filter(|attr| attr.key == "mcp.session.id").count(), 1);
    assert_eq!(attribute(&child, "jsonrpc.request.id"), text("41").as_ref());
    assert_eq!(attribute(&child, "server.port"), Some(&AttrValue::Int(9)));
    assert_eq!(attribute(&child, "rpc.response.status_code"), text("-32000").as_ref());
    assert_eq!(child.failure.as_ref().map(|f| f.error_type.as_str()), Some("-32000"));
    let events: Vec<&str> = child.events.iter().map(|event| event.name).collect();
    assert_eq!(events, [HANDSHAKE_EVENT, RETRY_EVENT]);
}

#[tokio::test]
async fn a_span_dropped_unended_is_exported_as_cancelled() {
    let (tracer, mut exported) = tracer(Sampler::default(), 16);
    drop(tracer.client_span(&ClientRequest { method: "tools/call", params: &json!({"name": "t"}), peer: pipe() }));
    let record = exported.try_recv().expect("exported");
    assert_eq!(record.failure.expect("failed").error_type, "cancelled");
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let (tracer, _exported) = tracer(Sampler::default(), 2);
    for _ in 0..5 {
        tracer.server_span(&request(&json!({}), &json!(1))).end(&json!({"result": {}}));
    }
    assert_eq!(tracer.counts().dropped.get(), 3);
}

#[tokio::test]
async fn always_off_records_nothing() {
    let (tracer, mut exported) = tracer(Sampler { root: RootSampler::AlwaysOff, parent_based: false }, 16);
    let params = json!({"_meta": {"traceparent": AGENT}});
    tracer.server_span(&request(&params, &json!(1))).end(&json!({"result": {}}));
    assert!(exported.try_recv().is_err());
}
