//! Sanity checks of the fault-injecting backend itself, driven with plain `reqwest` and raw sockets, so that a
//! failing client test can be blamed on the client rather than on its harness.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::fault_backend::{Answer, FaultBackend, Resume, Script, SessionIds};

fn initialize() -> Value {
    let params = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": { "name": "selftest", "version": "0" }
    });
    rpc(0, "initialize", params)
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

fn call_echo(id: u64, text: &str) -> Value {
    rpc(id, "tools/call", json!({ "name": "echo", "arguments": { "text": text } }))
}

async fn post(url: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.expect("the fault backend answers")
}

async fn json_body(response: reqwest::Response) -> Value {
    serde_json::from_slice(&response.bytes().await.expect("a body")).expect("a JSON body")
}

/// Starts a session the way a client does and returns its id.
async fn open_session(backend: &FaultBackend) -> String {
    let response = post(&backend.url(), None, &initialize()).await;
    let id = response.headers().get("mcp-session-id").expect("a session id").to_str().expect("ASCII").to_owned();
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(post(&backend.url(), Some(&id), &initialized).await.status(), 202);
    id
}

/// The whole response to `initialize` exactly as sent, bypassing any HTTP library's header handling.
async fn raw_initialize(backend: &FaultBackend) -> String {
    let address = backend.url().trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let mut socket = TcpStream::connect(&address).await.expect("connect");
    let body = initialize().to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(format!("{head}{body}").as_bytes()).await.expect("send");
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await.expect("read until close");
    String::from_utf8(response).expect("UTF-8 response")
}

fn session_lines(raw: &str) -> Vec<&str> {
    raw.split("\r\n").filter(|line| line.to_ascii_lowercase().starts_with("mcp-session-id:")).collect()
}

#[tokio::test]
async fn initialize_assigns_a_session_that_gates_later_requests() {
    let backend = FaultBackend::start(Script::default()).await;
    let url = backend.url();
    let first = post(&url, None, &initialize()).await;
    assert_eq!(first.headers().get("connection").unwrap(), "close");
    let session = first.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    assert_eq!(json_body(first).await["result"]["protocolVersion"], "2025-06-18");

    let list = rpc(1, "tools/list", json!({}));
    assert_eq!(post(&url, None, &list).await.status(), 400);
    assert_eq!(post(&url, Some("sess-unknown"), &list).await.status(), 400);
    let listed = json_body(post(&url, Some(&session), &list).await).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "echo");

    backend.end_all_sessions();
    assert_eq!(post(&url, Some(&session), &list).await.status(), 404);
    assert_eq!(backend.rpc_count("initialize"), 1);
    assert_eq!(backend.rpc_count("tools/list"), 4);
    let recorded = backend.requests();
    assert_eq!((recorded[0].http_method.as_str(), recorded[0].path.as_str()), ("POST", "/mcp"));
    assert_eq!(recorded[0].body.as_ref().unwrap()["method"], "initialize");
    assert_eq!(recorded[2].header("MCP-Session-Id"), Some("sess-unknown"));
}

#[tokio::test]
async fn delete_ends_the_session_it_names() {
    let backend = FaultBackend::start(Script::default()).await;
    let session = open_session(&backend).await;
    let client = reqwest::Client::new();
    let delete = client.delete(backend.url()).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(delete.status(), 200);
    assert_eq!(post(&backend.url(), Some(&session), &rpc(1, "ping", json!({}))).await.status(), 404);
}

#[tokio::test]
async fn tools_list_pages_follow_opaque_cursors() {
    let tools = (0..5).map(|i| json!({ "name": format!("t{i}"), "inputSchema": { "type": "object" } })).collect();
    let backend = FaultBackend::start(Script { tools, page_size: Some(2), ..Script::default() }).await;
    let session = open_session(&backend).await;
    let mut names = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..3 {
        let params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
        let page = json_body(post(&backend.url(), Some(&session), &rpc(1, "tools/list", params)).await).await;
        names.extend(page["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].clone()));
        cursor = page["result"].get("nextCursor").cloned();
    }
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"]);
    assert_eq!(cursor, None);

    let bogus = rpc(2, "tools/list", json!({ "cursor": "not-ours" }));
    assert_eq!(json_body(post(&backend.url(), Some(&session), &bogus).await).await["error"]["code"], -32602);

    backend.update(|script| script.endless_pages = true);
    let far = rpc(3, "tools/list", json!({ "cursor": page_cursor(&backend, &session, 40).await }));
    let page = json_body(post(&backend.url(), Some(&session), &far).await).await;
    assert!(page["result"]["nextCursor"].is_string(), "endless pages always continue");
}

/// Walks `pages` cursors forward and returns the last one.
async fn page_cursor(backend: &FaultBackend, session: &str, pages: usize) -> Value {
    let mut cursor = json!(null);
    for _ in 0..pages {
        let list = rpc(9, "tools/list", json!({ "cursor": cursor }));
        cursor = json_body(post(&backend.url(), Some(session), &list).await).await["result"]["nextCursor"].clone();
    }
    cursor
}

#[tokio::test]
async fn sse_answers_open_with_a_priming_event() {
    let backend = FaultBackend::start(Script { answer: Answer::Sse, ..Script::default() }).await;
    let session = open_session(&backend).await;
    let response = post(&backend.url(), Some(&session), &call_echo(7, "hello")).await;
    assert_eq!(response.headers().get("content-type").unwrap(), "text/event-stream");
    let body = response.text().await.unwrap();
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert!(events[0].starts_with("id: ") && events[0].ends_with("\ndata:"), "priming event: {:?}", events[0]);
    let result: Value = serde_json::from_str(events[1].split("data: ").nth(1).unwrap()).unwrap();
    assert_eq!(result["id"], 7);
    assert_eq!(result["result"]["content"][0]["text"], "hello");
    assert_eq!(backend.executions("echo"), 1);
}

#[tokio::test]
async fn session_header_faults_reach_the_wire_verbatim() {
    let duplicate = FaultBackend::start(Script { session: SessionIds::Duplicate, ..Script::default() }).await;
    let lines = session_lines(&raw_initialize(&duplicate).await).into_iter().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(lines.len(), 2);
    assert_ne!(lines[0], lines[1]);

    let invalid = Script { session: SessionIds::Invalid(b"a b".to_vec()), ..Script::default() };
    let invalid = FaultBackend::start(invalid).await;
    assert_eq!(session_lines(&raw_initialize(&invalid).await), ["Mcp-Session-Id: a b"]);

    let omitted = FaultBackend::start(Script { session: SessionIds::Omit, ..Script::default() }).await;
    assert!(session_lines(&raw_initialize(&omitted).await).is_empty());
}

#[tokio::test]
async fn broken_stream_resumes_with_last_event_id() {
    let resume = Resume { retry_ms: 5, breaks: 2, with_id: true };
    let backend = FaultBackend::start(Script { answer: Answer::Sse, resume: Some(resume), ..Script::default() }).await;
    let session = open_session(&backend).await;
    let first = post(&backend.url(), Some(&session), &call_echo(3, "again")).await.text().await.unwrap();
    assert!(first.contains("retry: 5\n") && !first.contains("again"), "only a priming event: {first:?}");

    let get = |last: Option<String>| {
        let mut request = reqwest::Client::new()
            .get(backend.url())
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session);
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        async move { request.send().await.unwrap() }
    };
    assert_eq!(get(None).await.status(), 405);
    let second = get(Some(event_id(&first))).await.text().await.unwrap();
    assert!(!second.contains("again"), "the second break still holds the result back: {second:?}");
    let third = get(Some(event_id(&second))).await.text().await.unwrap();
    assert!(third.contains(r#""text":"again""#), "the result arrives after the breaks: {third:?}");
    assert_eq!(backend.executions("echo"), 1);
    let at: Vec<_> = backend.requests().iter().map(|r| r.at).collect();
    assert!(at.is_sorted());
}

fn event_id(stream: &str) -> String {
    stream.lines().find_map(|line| line.strip_prefix("id: ")).expect("an event id").to_owned()
}

#[tokio::test]
async fn awaited_server_request_holds_the_result_until_answered() {
    let ping = json!({ "jsonrpc": "2.0", "id": "srv-1", "method": "ping" });
    let script = Script { answer: Answer::Sse, before_result: vec![ping], await_answers: true, ..Script::default() };
    let backend = FaultBackend::start(script).await;
    let session = open_session(&backend).await;
    let mut stream = post(&backend.url(), Some(&session), &call_echo(4, "after ping")).await;
    let mut seen = String::new();
    while !seen.contains("srv-1") {
        seen.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().expect("more events")));
    }
    let early = tokio::time::timeout(Duration::from_millis(100), stream.chunk()).await;
    assert!(early.is_err(), "no result before the ping is answered");

    let answer = json!({ "jsonrpc": "2.0", "id": "srv-1", "result": {} });
    assert_eq!(post(&backend.url(), Some(&session), &answer).await.status(), 202);
    let rest = stream.text().await.unwrap();
    assert!(rest.contains("after ping"), "the result follows the answer: {rest:?}");
    assert_eq!(backend.client_answers(), [answer]);
}

#[tokio::test]
async fn call_faults_happen_after_the_execution_is_counted() {
    let backend = FaultBackend::start(Script { drop_after_call: true, ..Script::default() }).await;
    let session = open_session(&backend).await;
    let request = reqwest::Client::new()
        .post(backend.url())
        .header("mcp-session-id", &session)
        .body(call_echo(5, "lost").to_string());
    assert!(request.send().await.is_err(), "the socket closes without a response");
    assert_eq!(backend.executions("echo"), 1);

    backend.update(|script| {
        script.drop_after_call = false;
        script.gzip = true;
    });
    let gzipped = post(&backend.url(), Some(&session), &call_echo(6, "zipped")).await;
    assert_eq!(gzipped.headers().get("content-encoding").unwrap(), "gzip");
    assert_eq!(gzipped.bytes().await.unwrap()[..2], [0x1f, 0x8b]);
    assert_eq!(backend.executions("echo"), 2);
}

#[tokio::test]
async fn oversize_results_are_well_framed_in_both_modes() {
    const SIZE: usize = 200_000;
    let backend = FaultBackend::start(Script { oversize: Some(SIZE), ..Script::default() }).await;
    let session = open_session(&backend).await;
    let json = json_body(post(&backend.url(), Some(&session), &call_echo(1, "big")).await).await;
    assert_eq!(json["result"]["content"][0]["text"].as_str().unwrap().len(), SIZE);

    backend.update(|script| script.answer = Answer::Sse);
    let sse = post(&backend.url(), Some(&session), &call_echo(2, "big")).await.text().await.unwrap();
    let data = sse.lines().rev().find_map(|line| line.strip_prefix("data: ")).expect("a result event");
    let result: Value = serde_json::from_str(data).unwrap();
    assert_eq!(result["result"]["content"][0]["text"].as_str().unwrap().len(), SIZE);
    assert_eq!(backend.executions("echo"), 2);
}
