//! The gateway end to end over HTTP: the front's rules, the catalog's names and the routing of
//! `tools/call` with failures reported as outcomes (§5), against the demo server and the fault backend.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::ledger::{ClaimState, ListFilter};

use crate::support::assert::{eventually, text};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, SESSION, TestGateway, backend_toml};

async fn demo() -> (String, tokio::task::JoinHandle<()>) {
    let (address, task) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    (format!("http://{address}/mcp"), task)
}

async fn gateway_with_demo() -> (TestGateway, tokio::task::JoinHandle<()>) {
    let (url, task) = demo().await;
    (TestGateway::start("", &backend_toml("demo", &url, "")).await, task)
}

async fn readyz(gateway: &TestGateway) -> Value {
    let body = reqwest::get(format!("{}/readyz", gateway.base)).await.unwrap().text().await.unwrap();
    serde_json::from_str(&body).unwrap()
}

fn error_code(body: &Value) -> i64 {
    body["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {body}"))
}

#[tokio::test]
async fn a_demo_tool_error_reads_right_under_its_exposed_name() {
    let (gateway, _demo) = gateway_with_demo().await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let failed = agent.call_tool("demo__fail", json!({})).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let message = crate::support::assert::text(&failed);
    assert_eq!(message, "invalid arguments: missing required argument `message`");
    let asked = agent.call_tool("demo__fail", json!({"message": "as asked"})).await;
    assert_eq!(crate::support::assert::text(&asked), "as asked");
}

#[tokio::test]
async fn initialize_negotiates_and_seals_a_session() {
    let (gateway, _demo) = gateway_with_demo().await;
    let mut agent = Agent::new(gateway.mcp());
    let reply = agent.initialize("2025-06-18").await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.body.unwrap();
    assert_eq!(body["result"]["protocolVersion"], "2025-06-18", "a supported client version is kept");
    assert!(body["result"]["capabilities"]["tools"].is_object());
    let id = agent.session.clone().expect("a session id");
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "visible ASCII");

    let mut newer = Agent::new(gateway.mcp());
    let body = newer.initialize("2099-01-01").await.body.unwrap();
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25", "an unknown version gets the latest");
}

#[tokio::test]
async fn lists_prefixed_tools_at_mcp_and_bare_ones_per_backend() {
    let (gateway, _demo) = gateway_with_demo().await;
    let mut all = Agent::connected(gateway.mcp()).await;
    let names = all.tool_names().await;
    assert!(names.contains(&"demo__echo".to_owned()), "{names:?}");
    assert!(names.iter().all(|name| name.starts_with("demo__")));
    let echoed = all.call_tool("demo__echo", json!({"text": "through the gateway"})).await;
    assert_eq!(text(&echoed), "through the gateway");

    let mut one = Agent::connected(format!("{}/demo", gateway.mcp())).await;
    assert!(one.tool_names().await.contains(&"echo".to_owned()));
    assert_eq!(text(&one.call_tool("echo", json!({"text": "bare"})).await), "bare");

    let unknown = Agent::new(format!("{}/nope", gateway.mcp())).initialize("2025-11-25").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn session_ids_are_required_and_checked() {
    let (gateway, _demo) = gateway_with_demo().await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});

    let mut anonymous = Agent::new(gateway.mcp());
    assert_eq!(anonymous.send(&list).await.status, StatusCode::BAD_REQUEST, "no id → 400");

    anonymous.session = Some("garbage".into());
    assert_eq!(anonymous.send(&list).await.status, StatusCode::NOT_FOUND, "unknown id → 404");

    let genuine = agent.session.clone().unwrap();
    let (payload, mac) = genuine.split_once('.').unwrap();
    let mut flipped = mac.as_bytes().to_vec();
    flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
    anonymous.session = Some(format!("{payload}.{}", String::from_utf8(flipped).unwrap()));
    assert_eq!(anonymous.send(&list).await.status, StatusCode::NOT_FOUND, "forged id → 404");

    let (other, _demo2) = gateway_with_demo().await;
    let mut foreign = Agent::new(other.mcp());
    foreign.session = Some(genuine.clone());
    assert_eq!(foreign.send(&list).await.status, StatusCode::NOT_FOUND, "another gateway's id (other key) → 404");

    assert_eq!(agent.send(&list).await.status, StatusCode::OK);
    let deleted = agent.http.delete(gateway.mcp()).header(SESSION, &genuine).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    assert_eq!(agent.send(&list).await.status, StatusCode::NOT_FOUND, "deleted id → 404");
    agent.session = None;
    assert_eq!(agent.initialize("2025-11-25").await.status, StatusCode::OK, "a new session can be started");
}

#[tokio::test]
async fn protocol_version_origin_and_host_are_checked() {
    let (gateway, _demo) = gateway_with_demo().await;
    let agent = Agent::connected(gateway.mcp()).await;
    let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"})).unwrap();
    let status = |headers: &'static [(&'static str, &'static str)]| {
        let ping = ping.clone();
        let agent = &agent;
        async move { agent.post_raw(ping, headers).await.status }
    };
    assert_eq!(status(&[]).await, StatusCode::OK);
    assert_eq!(status(&[("mcp-protocol-version", "2025-03-26")]).await, StatusCode::OK, "any supported version");
    assert_eq!(status(&[("mcp-protocol-version", "1.0")]).await, StatusCode::BAD_REQUEST);
    assert_eq!(status(&[("origin", "http://evil.example")]).await, StatusCode::FORBIDDEN);
    assert_eq!(status(&[("origin", "http://localhost:6274")]).await, StatusCode::OK);
    assert_eq!(status(&[("host", "evil.example")]).await, StatusCode::FORBIDDEN, "DNS rebinding");
}

#[tokio::test]
async fn notifications_and_responses_are_accepted_without_a_body() {
    let (gateway, _demo) = gateway_with_demo().await;
    let agent = Agent::connected(gateway.mcp()).await;
    for message in [
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
        json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}}),
    ] {
        let reply = agent.send(&message).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED);
        assert!(reply.raw.is_empty());
    }
}

#[tokio::test]
async fn bad_input_gets_a_clear_answer() {
    let (url, _demo) = demo().await;
    let gateway = TestGateway::start("max_body = \"2KiB\"", &backend_toml("demo", &url, "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;

    let malformed = agent.post_raw(b"{\"jsonrpc\": \"2.0\", ".to_vec(), &[]).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&malformed.body.unwrap()), -32700);

    let batch = agent.send(&json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])).await;
    assert_eq!(batch.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&batch.body.unwrap()), -32600);

    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"text": "x".repeat(4096)}}});
    assert_eq!(agent.send(&huge).await.status, StatusCode::PAYLOAD_TOO_LARGE);

    assert_eq!(error_code(&agent.request("no/such/method", json!({})).await), -32601);
    assert_eq!(error_code(&agent.request("tools/call", json!({"name": "demo__nope"})).await), -32602);
    assert_eq!(error_code(&agent.request("tools/call", json!({"arguments": {}})).await), -32602);
    assert_eq!(
        text(&agent.call_tool("demo__echo", json!({"text": "still fine"})).await),
        "still fine",
        "nothing was lost"
    );
}

#[tokio::test]
async fn each_agent_gets_its_own_backend_session() {
    let (gateway, _demo) = gateway_with_demo().await;
    let mut first = Agent::connected(gateway.mcp()).await;
    let mut second = Agent::connected(gateway.mcp()).await;
    for expected in ["1", "2", "3"] {
        assert_eq!(text(&first.call_tool("demo__counter", json!({})).await), expected);
    }
    assert_eq!(text(&second.call_tool("demo__counter", json!({})).await), "1", "the second agent's counter is its own");

    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let (mut a, mut b) = (Agent::connected(gateway.mcp()).await, Agent::connected(gateway.mcp()).await);
    a.call_tool("fault__echo", json!({"text": "a"})).await;
    b.call_tool("fault__echo", json!({"text": "b"})).await;
    a.call_tool("fault__echo", json!({"text": "a"})).await;
    let sessions: Vec<String> = fault
        .requests()
        .iter()
        .filter(|r| r.rpc_method.as_deref() == Some("tools/call"))
        .map(|r| r.header("mcp-session-id").unwrap().to_owned())
        .collect();
    assert_eq!(sessions.len(), 3);
    assert_ne!(sessions[0], sessions[1], "two agents, two backend sessions");
    assert_eq!(sessions[0], sessions[2], "one agent keeps its backend session");
    let ids: Vec<Value> = fault.requests().iter().filter_map(|r| r.body.as_ref()?.get("id").cloned()).collect();
    let unique: std::collections::HashSet<String> = ids.iter().map(Value::to_string).collect();
    assert_eq!(unique.len(), ids.len(), "the backend sees the gateway's own ids, never repeated: {ids:?}");
}

#[tokio::test]
async fn a_backend_that_ended_the_session_is_reinitialized_transparently() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(text(&agent.call_tool("fault__echo", json!({"text": "before"})).await), "before");
    fault.end_all_sessions();
    assert_eq!(text(&agent.call_tool("fault__echo", json!({"text": "after"})).await), "after");
    assert_eq!(fault.executions("echo"), 2);
}

#[tokio::test]
async fn failures_are_results_that_say_whether_the_call_ran() {
    let fault = FaultBackend::start(Script { tool_is_error: true, ..Script::default() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let own_error = agent.call_tool("fault__echo", json!({"text": "x"})).await;
    assert_eq!(own_error["result"]["isError"], true);
    assert!(own_error["result"]["_meta"].get("switchyard/outcome").is_none(), "the backend's own error passes through");

    fault.update(|script| {
        script.tool_is_error = false;
        script.drop_after_call = true;
    });
    let lost = agent.call_tool("fault__echo", json!({"text": "x"})).await;
    assert_eq!(lost["result"]["isError"], true);
    assert_eq!(lost["result"]["_meta"]["switchyard/outcome"], "unknown");
    assert!(text(&lost).contains("may have run"), "{}", text(&lost));

    drop(fault);
    let refused = agent.call_tool("fault__echo", json!({"text": "x"})).await;
    assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered");
    assert!(text(&refused).contains("did not run"), "{}", text(&refused));
}

#[tokio::test]
async fn a_dead_backend_does_not_break_the_others_and_appears_when_it_comes_up() {
    let (live, _demo) = demo().await;
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let late_address = reserved.local_addr().unwrap();
    drop(reserved);
    let backends = backend_toml("live", &live, "") + &backend_toml("late", &format!("http://{late_address}/mcp"), "");
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let names = agent.tool_names().await;
    assert!(names.contains(&"live__echo".to_owned()) && !names.iter().any(|n| n.starts_with("late__")), "{names:?}");
    let readyz = readyz(&gateway).await;
    assert_eq!(readyz["backends"]["late"]["status"], "failed");

    let (_, _late) = switchyard::demo::spawn(late_address).await.unwrap();
    let agent = &agent;
    eventually("the late backend's tools appear", || async {
        agent.same_session().tool_names().await.contains(&"late__echo".to_owned())
    })
    .await;
}

#[tokio::test]
async fn health_endpoints_and_get_without_session() {
    let (gateway, _demo) = gateway_with_demo().await;
    let health = reqwest::get(format!("{}/healthz", gateway.base)).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    let ready = readyz(&gateway).await;
    assert_eq!(ready["backends"]["demo"]["status"], "discovered");
    let get = reqwest::get(gateway.mcp()).await.unwrap();
    assert_eq!(get.status(), StatusCode::BAD_REQUEST, "a standalone stream needs a session");
}

/// The events of an SSE body, decoded with the gateway's own decoder.
pub(crate) fn events(raw: &str) -> Vec<switchyard::backend::event_stream::SseEvent> {
    let mut decoder = switchyard::backend::event_stream::SseDecoder::new(1 << 20);
    decoder.feed(raw.as_bytes()).unwrap();
    std::iter::from_fn(|| decoder.next_event()).collect()
}

fn chatty_backend() -> Script {
    Script {
        answer: crate::support::fault_backend::Answer::Sse,
        before_result: vec![
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": crate::support::fault_backend::PROGRESS_TOKEN, "progress": 1, "total": 2}}),
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "half way"}}),
        ],
        ..Script::default()
    }
}

#[tokio::test]
async fn notifications_during_a_call_stream_to_the_agent_before_the_result() {
    let fault = FaultBackend::start(chatty_backend()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let call = json!({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "done"}, "_meta": {"progressToken": "mine"}}});
    let reply = agent.send(&call).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    assert_eq!(reply.headers["cache-control"], "no-cache");
    assert_eq!(reply.headers["x-accel-buffering"], "no");
    let events = events(&reply.raw);
    assert!(events[0].data.is_empty() && !events[0].id.is_empty(), "a priming event first: {events:?}");
    let messages: Vec<Value> = events[1..].iter().map(|e| serde_json::from_str(&e.data).unwrap()).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "mine", "the agent's own token comes back");
    assert_eq!(messages[1]["method"], "notifications/message");
    assert_eq!(messages[2]["id"], "call-7");
    assert_eq!(messages[2]["result"]["content"][0]["text"], "done");
    let ids: std::collections::HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "event ids are unique");
}

#[tokio::test]
async fn a_backends_result_reaches_the_agent_as_the_backend_wrote_it() {
    let fault = FaultBackend::start(Script { pretty: true, ..chatty_backend() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let text = "\"result\": {\"id\": 1} \u{e9}\u{1f600}";
    let call = |id: &str| {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "fault__echo", "arguments": {"text": text}}});
        serde_json::to_vec(&call).unwrap()
    };
    // Streamed: the pretty-printed response comes back over several `data:` lines, read as the same value.
    let streamed = agent.post_raw(call("sse"), &[]).await;
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    let last = events(&streamed.raw).pop().expect("the result event");
    assert!(last.data.contains("\n"), "the backend's lines, kept: {:?}", last.data);
    let message: Value = serde_json::from_str(&last.data).expect("the result event is one JSON message");
    assert_eq!(message["id"], "sse");
    assert_eq!(message["result"]["content"][0]["text"], text);

    fault.update(|script| script.before_result.clear());
    fault.update(|script| script.answer = crate::support::fault_backend::Answer::Json);
    let plain = agent.post_raw(call("json"), &[]).await;
    assert_eq!(plain.headers["content-type"], "application/json");
    assert!(plain.raw.starts_with(r#"{"jsonrpc":"2.0","id":"json","result":{"#), "{}", plain.raw);
    assert!(plain.raw.contains("{\n    \"content\": ["), "the backend's own bytes: {}", plain.raw);
    assert_eq!(plain.body.unwrap()["result"]["content"][0]["text"], text);
}

#[tokio::test]
async fn quiet_calls_and_json_only_agents_get_json() {
    let fault = FaultBackend::start(chatty_backend()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let call = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "x"}}}))
    .unwrap();
    let json_only = agent.post_raw(call.clone(), &[("accept", "application/json")]).await;
    assert_eq!(json_only.headers["content-type"], "application/json");
    assert_eq!(json_only.body.unwrap()["result"]["content"][0]["text"], "x");

    fault.update(|script| script.before_result.clear());
    let with_id = |id: u64| {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "fault__echo", "arguments": {"text": "x"}}});
        serde_json::to_vec(&call).unwrap()
    };
    let streamed = agent.post_raw(with_id(2), &[]).await;
    assert_eq!(
        streamed.headers["content-type"], "text/event-stream",
        "a backend that streams: the agent gets a stream"
    );
    assert!(streamed.raw.starts_with("id: ") && streamed.raw.contains("retry: "), "a priming event: {}", streamed.raw);
    assert_eq!(streamed.body.unwrap()["result"]["content"][0]["text"], "x");

    fault.update(|script| script.answer = crate::support::fault_backend::Answer::Json);
    let quiet = agent.post_raw(with_id(3), &[]).await;
    assert_eq!(quiet.headers["content-type"], "application/json", "a JSON answer and no notification: plain JSON");
}

#[tokio::test]
async fn a_backends_tools_list_changed_refreshes_the_catalog() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(agent.tool_names().await, ["fault__echo"]);
    fault.update(|script| {
        script.answer = crate::support::fault_backend::Answer::Sse;
        script.tools.push(json!({"name": "added", "inputSchema": {"type": "object"}}));
        script.before_result = vec![json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})];
    });
    agent.call_tool("fault__echo", json!({"text": "x"})).await;
    let agent = &agent;
    eventually("the catalog is refreshed after list_changed", || async {
        agent.same_session().tool_names().await.contains(&"fault__added".to_owned())
    })
    .await;
}

/// Reads a streaming body until an event whose data contains `needle`, or gives up after `wait`.
pub(crate) async fn read_until(response: &mut reqwest::Response, needle: &str, wait: Duration) -> Option<String> {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if seen.contains(needle) {
            return Some(seen);
        }
    }
    None
}

#[tokio::test]
async fn the_standalone_stream_tells_one_stream_per_session_that_tools_changed() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let session = agent.session.clone().unwrap();
    let open = || agent.http.get(gateway.mcp()).header("accept", "text/event-stream").header(SESSION, &session).send();
    let mut first = open().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    let mut second = open().await.unwrap();
    assert!(read_until(&mut first, "data: \n", Duration::from_secs(5)).await.is_some(), "a priming event");

    let without = agent.http.get(gateway.mcp()).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(without.status(), StatusCode::BAD_REQUEST);

    fault.update(|script| {
        script.answer = crate::support::fault_backend::Answer::Sse;
        script.tools.push(json!({"name": "added", "inputSchema": {"type": "object"}}));
        script.before_result = vec![json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})];
    });
    agent.call_tool("fault__echo", json!({"text": "x"})).await;
    let told = read_until(&mut first, "notifications/tools/list_changed", Duration::from_secs(5)).await;
    assert!(told.is_some(), "the oldest stream is told");
    let also = read_until(&mut second, "notifications/tools/list_changed", Duration::from_millis(500)).await;
    assert!(also.is_none(), "a message goes to exactly one stream");
}

fn asking_backend() -> Script {
    Script {
        answer: crate::support::fault_backend::Answer::Sse,
        before_result: vec![json!({"jsonrpc": "2.0", "id": "srv-9", "method": "elicitation/create",
            "params": {"message": "Which colour?", "requestedSchema": {"type": "object",
                "properties": {"colour": {"type": "string"}}}}})],
        await_answers: true,
        ..Script::default()
    }
}

#[tokio::test]
async fn server_requests_reach_the_agent_and_its_answer_goes_back() {
    let fault = FaultBackend::start(asking_backend()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected_with(gateway.mcp(), json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "painted"}}});
    let mut stream = agent
        .http
        .post(gateway.mcp())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(SESSION, agent.session.as_deref().unwrap())
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let seen = read_until(&mut stream, "elicitation/create", Duration::from_secs(5)).await.expect("the request");
    let request: Value = events(&seen)
        .into_iter()
        .find(|e| e.data.contains("elicitation"))
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .unwrap();
    assert_eq!(request["params"]["requestedSchema"]["properties"]["colour"]["type"], "string", "schema verbatim");
    let gateway_id = request["id"].clone();
    assert_ne!(gateway_id, "srv-9", "the agent sees the gateway's id");

    let answer =
        json!({"jsonrpc": "2.0", "id": gateway_id, "result": {"action": "accept", "content": {"colour": "teal"}}});
    assert_eq!(agent.send(&answer).await.status, StatusCode::ACCEPTED);
    let rest = read_until(&mut stream, "painted", Duration::from_secs(5)).await.expect("the result follows");
    assert!(rest.contains("\"id\":1"), "{rest}");
    let answers = fault.client_answers();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["id"], "srv-9", "the backend gets its own id back");
    assert_eq!(answers[0]["result"]["content"]["colour"], "teal");
}

#[tokio::test]
async fn requests_the_agent_did_not_declare_are_refused_by_the_gateway() {
    let fault = FaultBackend::start(asking_backend()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let result = agent.call_tool("fault__echo", json!({"text": "plain"})).await;
    assert_eq!(text(&result), "plain");
    let answers = fault.client_answers();
    assert_eq!(answers[0]["id"], "srv-9");
    assert_eq!(answers[0]["error"]["code"], -32601);
    let initialize = fault.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("initialize")).unwrap();
    assert_eq!(initialize.body.unwrap()["params"]["capabilities"], json!({}), "the agent's own capabilities");
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_at_the_backend_by_its_own_id_and_never_repeated() {
    let fault = FaultBackend::start(Script { stall: true, ..Script::default() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = std::sync::Arc::new(Agent::connected(gateway.mcp()).await);
    let call = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "slow"}}});
    let running = {
        let (agent, call) = (std::sync::Arc::clone(&agent), call.clone());
        tokio::spawn(async move { agent.send(&call).await })
    };
    eventually("the call reaches the backend", || async { fault.executions("echo") == 1 }).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}});
    assert_eq!(agent.send(&cancel).await.status, StatusCode::ACCEPTED);
    let answered = tokio::time::timeout(Duration::from_secs(5), running).await.expect("the call ends").unwrap();
    let body = answered.body.unwrap();
    assert!(text(&body).contains("cancelled"), "{body}");

    let requests = fault.requests();
    let sent = requests.iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    let forwarded =
        requests.iter().find(|r| r.rpc_method.as_deref() == Some("notifications/cancelled")).expect("forwarded");
    assert_eq!(
        forwarded.body.as_ref().unwrap()["params"]["requestId"],
        sent.body.as_ref().unwrap()["id"],
        "the backend's id"
    );
    assert_ne!(sent.body.as_ref().unwrap()["id"], json!(11));

    let again = agent.send(&call).await.body.unwrap();
    assert_eq!(again["result"]["_meta"]["switchyard/outcome"], "unknown", "recorded, not retried: {again}");
    assert_eq!(fault.executions("echo"), 1);
}

#[tokio::test]
async fn a_broken_call_stream_is_resumed_with_last_event_id_and_delivers_the_result() {
    let fault = FaultBackend::start(asking_backend()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected_with(gateway.mcp(), json!({"elicitation": {}})).await;
    let session = agent.session.clone().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "resumed"}}});
    let mut stream = agent.post_streaming(&call).await;
    let seen = read_until(&mut stream, "elicitation/create", Duration::from_secs(5)).await.expect("the request");
    let received = events(&seen);
    assert!(seen.contains("retry: "), "the priming event tells how soon to reconnect: {seen}");
    let asking = received.iter().find(|e| e.data.contains("elicitation")).unwrap().clone();
    drop(stream); // the connection breaks; the call goes on

    let request: Value = serde_json::from_str(&asking.data).unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}});
    assert_eq!(agent.send(&answer).await.status, StatusCode::ACCEPTED);

    let resume = |last: &str| {
        agent
            .http
            .get(gateway.mcp())
            .header("accept", "text/event-stream")
            .header(SESSION, &session)
            .header("last-event-id", last)
            .send()
    };
    let mut resumed = resume(&asking.id).await.unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    let rest = read_until(&mut resumed, "resumed", Duration::from_secs(5)).await.expect("the result on the GET");
    assert!(!rest.contains("elicitation/create"), "only what followed the given id is replayed");
    assert!(rest.contains("\"id\":21"), "{rest}");

    let (stream_id, _) = asking.id.rsplit_once('-').unwrap();
    let unknown = resume(&format!("{stream_id}x-0")).await.unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let stranger = Agent::connected(gateway.mcp()).await;
    let foreign = agent
        .http
        .get(gateway.mcp())
        .header(SESSION, stranger.session.as_deref().unwrap())
        .header("last-event-id", &asking.id)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND, "another session cannot resume it");
    assert_eq!(fault.executions("echo"), 1);
}

#[tokio::test]
async fn what_a_backend_sends_on_its_own_stream_reaches_the_agents_stream() {
    let standalone = vec![
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://watched"}}),
        json!({"jsonrpc": "2.0", "id": "srv-roots", "method": "roots/list"}),
    ];
    let fault = FaultBackend::start(Script { standalone: Some(standalone), ..Script::default() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let mut agent = Agent::connected_with(gateway.mcp(), json!({"roots": {}})).await;
    let session = agent.session.clone().unwrap();
    let mut stream = agent
        .http
        .get(gateway.mcp())
        .header("accept", "text/event-stream")
        .header(SESSION, &session)
        .send()
        .await
        .unwrap();
    agent.call_tool("fault__echo", json!({"text": "x"})).await; // creates the backend session, which opens its stream
    let seen = read_until(&mut stream, "roots/list", Duration::from_secs(5)).await.expect("relayed to the agent");
    assert!(seen.contains("notifications/resources/updated"), "{seen}");
    let request: Value = events(&seen)
        .into_iter()
        .find(|e| e.data.contains("roots/list"))
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": [{"uri": "file:///work"}]}});
    assert_eq!(agent.send(&answer).await.status, StatusCode::ACCEPTED);
    for _ in 0..100 {
        if let Some(answer) = fault.client_answers().into_iter().find(|a| a["id"] == "srv-roots") {
            assert_eq!(answer["result"]["roots"][0]["uri"], "file:///work");
            let get = fault.requests().into_iter().find(|r| r.http_method == "GET").unwrap();
            assert!(get.header("mcp-session-id").is_some(), "the backend stream belongs to the session");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the agent's answer did not reach the backend");
}

#[tokio::test]
async fn an_agent_that_hangs_up_does_not_stop_its_call_or_leave_the_claim_open() {
    let fault = FaultBackend::start(Script { hold_calls: true, ..Script::default() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let call = json!({"jsonrpc": "2.0", "id": 31, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "finished anyway"}}});
    let hung_up = agent
        .http
        .post(gateway.mcp())
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header(SESSION, agent.session.as_deref().unwrap())
        .timeout(Duration::from_millis(100))
        .body(call.to_string())
        .send()
        .await;
    assert!(hung_up.is_err(), "the agent gave up before the answer");
    fault.release_calls();
    eventually("the call completes on the gateway", || async {
        let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.expect("the ledger answers");
        claims.iter().any(|claim| claim.state == ClaimState::Completed)
    })
    .await;
    let again = agent.post_raw(call.to_string().into_bytes(), &[("accept", "application/json")]).await;
    let body = again.body.unwrap();
    assert_eq!(body["result"]["content"][0]["text"], "finished anyway", "{body}");
    assert_eq!(body["result"]["_meta"]["switchyard/replayed"], true, "the call completed and was recorded");
    assert_eq!(fault.executions("echo"), 1);
}

#[tokio::test]
async fn a_resource_list_page_that_names_a_next_page_is_never_empty() {
    let offering = |resources: Vec<Value>| Script {
        capabilities: json!({"tools": {}, "resources": {}}),
        resources,
        ..Script::default()
    };
    let empty = FaultBackend::start(offering(Vec::new())).await;
    let also_empty = FaultBackend::start(offering(Vec::new())).await;
    let listing = FaultBackend::start(offering(vec![json!({"uri": "file:///notes.txt", "name": "notes"})])).await;
    let backends = backend_toml("empty", &empty.url(), "")
        + &backend_toml("also-empty", &also_empty.url(), "")
        + &backend_toml("listing", &listing.url(), "");
    let gateway = TestGateway::start("", &backends).await;
    gateway.wait_for_tool("listing__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let page = agent.request("resources/list", json!({})).await;
    assert_eq!(page["result"]["resources"][0]["uri"], "file:///notes.txt", "empty pages are read past: {page}");
    assert!(page["result"].get("nextCursor").is_none(), "the last backend's page is the last: {page}");
    let templates = agent.request("resources/templates/list", json!({})).await;
    assert_eq!(templates["result"], json!({"resourceTemplates": []}), "an empty page is the last one: {templates}");

    let gateway = TestGateway::start(
        "",
        &(backend_toml("listing", &listing.url(), "") + &backend_toml("empty", &empty.url(), "")),
    )
    .await;
    gateway.wait_for_tool("empty__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let first = agent.request("resources/list", json!({})).await;
    let cursor = first["result"]["nextCursor"].as_str().expect("a page that is not empty may name the next").to_owned();
    let last = agent.request("resources/list", json!({"cursor": cursor})).await;
    assert_eq!(last["result"], json!({"resources": []}), "{last}");
}

#[tokio::test]
async fn logging_set_level_reaches_every_backend_that_logs_on_the_agents_sessions() {
    let logging = json!({"tools": {}, "logging": {}});
    let first = FaultBackend::start(Script { capabilities: logging.clone(), ..Script::default() }).await;
    let second = FaultBackend::start(Script { capabilities: logging, ..Script::default() }).await;
    let silent = FaultBackend::start(Script::default()).await;
    let backends = backend_toml("one", &first.url(), "")
        + &backend_toml("two", &second.url(), "")
        + &backend_toml("quiet", &silent.url(), "");
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    agent.call_tool("one__echo", json!({"text": "x"})).await;
    let answer = agent.request("logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(answer["result"], json!({}));
    for backend in [&first, &second] {
        let set = backend.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("logging/setLevel"));
        let set = set.expect("the level reached the backend");
        assert_eq!(set.body.unwrap()["params"]["level"], "warning");
    }
    let call_session = first.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    let level_session =
        first.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("logging/setLevel")).unwrap();
    assert_eq!(
        call_session.header("mcp-session-id"),
        level_session.header("mcp-session-id"),
        "the agent's own session"
    );
    assert_eq!(silent.rpc_count("logging/setLevel"), 0, "a backend without logging is not asked");
}

#[tokio::test]
async fn a_result_too_large_to_keep_is_not_replayed_and_the_duplicate_is_told() {
    let fault = FaultBackend::start(Script::default()).await;
    let ledger = "[ledger]\nmax_result = 16\n";
    let gateway = TestGateway::start_with("", ledger, &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let call = json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "a result longer than sixteen bytes"}}});
    let first = agent.send(&call).await.body.unwrap();
    assert_eq!(text(&first), "a result longer than sixteen bytes", "the first caller gets the result");
    let duplicate = agent.send(&call).await.body.unwrap();
    assert_eq!(duplicate["result"]["isError"], true);
    assert!(text(&duplicate).contains("too large to keep"), "{duplicate}");
    assert_eq!(duplicate["result"]["_meta"]["switchyard/replayed"], true);
    assert_eq!(fault.executions("echo"), 1, "not run again");
}
