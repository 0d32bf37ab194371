//! The built-in demo MCP server (`switchyard::demo`) driven over real HTTP: the Streamable HTTP rules it enforces
//! (MCP 2025-11-25 transports, reference §A1), its lifecycle (§A2) and each of its five tools (§A3).

use std::net::{Ipv4Addr, SocketAddr};

use crate::support::assert::{eventually, text};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const SESSION: &str = "mcp-session-id";
const BOTH: &str = "application/json, text/event-stream";

/// A demo server on a free loopback port, stopped when dropped.
struct Demo {
    url: String,
    client: reqwest::Client,
    task: JoinHandle<()>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One HTTP answer: status, session header and the body parsed as JSON (`Null` when empty).
struct Answer {
    status: StatusCode,
    session: Option<String>,
    content_type: Option<String>,
    body: Value,
}

impl Demo {
    async fn start() -> Demo {
        let (addr, task) = switchyard::demo::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await.expect("bind");
        Demo { url: format!("http://{addr}/mcp"), client: reqwest::Client::new(), task }
    }

    /// POSTs `body` with the given extra headers on top of a well-formed request's.
    async fn post_with(&self, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut request = self.client.post(&self.url).header("accept", BOTH).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        answer(request.body(body.to_owned()).send().await.expect("send")).await
    }

    async fn post(&self, session: Option<&str>, message: &Value) -> Answer {
        let headers: Vec<(&str, &str)> = session.map(|session| (SESSION, session)).into_iter().collect();
        self.post_with(&headers, &message.to_string()).await
    }

    /// Starts a session and returns its id.
    async fn initialize(&self) -> String {
        let answer = self.post(None, &initialize_request("2025-11-25")).await;
        assert_eq!(answer.status, StatusCode::OK);
        answer.session.expect("initialize assigns a session id")
    }

    /// Sends a request in `session` and returns the JSON-RPC answer.
    async fn request(&self, session: &str, method: &str, params: Value) -> Value {
        let message = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let answer = self.post(Some(session), &message).await;
        assert_eq!(answer.status, StatusCode::OK, "{method}: {}", answer.body);
        assert_eq!(answer.body["id"], 7);
        assert_eq!(answer.content_type.as_deref(), Some("application/json"));
        answer.body
    }

    /// Calls a tool and returns its `CallToolResult`.
    async fn call(&self, session: &str, tool: &str, arguments: Value) -> Value {
        let answer = self.request(session, "tools/call", json!({"name": tool, "arguments": arguments})).await;
        answer.get("result").cloned().unwrap_or_else(|| panic!("{tool}: no result in {answer}"))
    }

    async fn delete(&self, session: &str) -> StatusCode {
        self.client.delete(&self.url).header(SESSION, session).send().await.expect("send").status()
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let header = |name: &str| response.headers().get(name).map(|value| value.to_str().expect("ascii").to_owned());
    let (session, content_type) = (header(SESSION), header("content-type"));
    let text = response.text().await.expect("body");
    let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON body") };
    Answer { status, session, content_type, body }
}

fn initialize_request(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "switchyard-tests", "version": "0"},
    }})
}

#[tokio::test]
async fn initialize_negotiates_and_assigns_a_session() {
    let demo = Demo::start().await;
    let answer = demo.post(None, &initialize_request("2025-11-25")).await;
    assert_eq!(answer.status, StatusCode::OK);
    let session = answer.session.expect("session id");
    assert!(!session.is_empty() && session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let result = &answer.body["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["capabilities"], json!({"tools": {"listChanged": false}}));
    assert_eq!(result["serverInfo"]["name"], "switchyard-demo");
    assert!(result["serverInfo"]["version"].is_string() && result["instructions"].is_string());

    let older = demo.post(None, &initialize_request("2025-03-26")).await;
    assert_eq!(older.body["result"]["protocolVersion"], "2025-03-26");
    assert_ne!(older.session, Some(session), "each initialize starts its own session");
    let unknown = demo.post(None, &initialize_request("1999-01-01")).await;
    assert_eq!(unknown.body["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn requests_need_a_live_session() {
    let demo = Demo::start().await;
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    assert_eq!(demo.post(None, &ping).await.status, StatusCode::BAD_REQUEST);
    let unknown = demo.post(Some("0123456789abcdef0123456789abcdef"), &ping).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    let session = demo.initialize().await;
    assert_eq!(demo.request(&session, "ping", json!({})).await["result"], json!({}));
    assert_eq!(demo.delete(&session).await, StatusCode::OK);
    assert_eq!(demo.post(Some(&session), &ping).await.status, StatusCode::NOT_FOUND);
    assert_eq!(demo.delete(&session).await, StatusCode::NOT_FOUND);
    let anonymous = demo.client.delete(&demo.url).send().await.expect("send");
    assert_eq!(anonymous.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn aborting_the_task_stops_the_server_even_on_pooled_connections() {
    let demo = Demo::start().await;
    demo.initialize().await;
    demo.task.abort();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    eventually("the server stops answering after its task was aborted", || async {
        let request = demo.client.post(&demo.url).header("accept", BOTH).header("content-type", "application/json");
        request.body(ping.clone()).send().await.is_err()
    })
    .await;
}

#[tokio::test]
async fn notifications_and_responses_are_accepted_without_a_body() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = demo.post(Some(&session), &initialized).await;
    assert_eq!((answer.status, answer.body), (StatusCode::ACCEPTED, Value::Null));
    let response = json!({"jsonrpc": "2.0", "id": "s-1", "result": {}});
    assert_eq!(demo.post(Some(&session), &response).await.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn transport_headers_are_enforced() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string();

    let json_only = demo.client.post(&demo.url).header("accept", "application/json");
    let response = json_only.header("content-type", "application/json").header(SESSION, &session);
    assert_eq!(response.body(ping.clone()).send().await.expect("send").status(), StatusCode::NOT_ACCEPTABLE);
    let text_body = demo.client.post(&demo.url).header("accept", BOTH).header("content-type", "text/plain");
    let response = text_body.header(SESSION, &session).body(ping.clone()).send().await.expect("send");
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let bad_version = demo.post_with(&[(SESSION, &session), ("mcp-protocol-version", "2099-01-01")], &ping).await;
    assert_eq!(bad_version.status, StatusCode::BAD_REQUEST);
    for version in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let answer = demo.post_with(&[(SESSION, &session), ("mcp-protocol-version", version)], &ping).await;
        assert_eq!(answer.status, StatusCode::OK, "{version}");
    }

    let foreign = demo.post_with(&[(SESSION, &session), ("origin", "http://evil.example")], &ping).await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    let local = demo.post_with(&[(SESSION, &session), ("origin", "http://localhost:6274")], &ping).await;
    assert_eq!(local.status, StatusCode::OK);

    let get = demo.client.get(&demo.url).header("accept", "text/event-stream").header(SESSION, &session);
    assert_eq!(get.send().await.expect("send").status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn malformed_json_and_batches_are_refused() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;
    let malformed = demo.post_with(&[(SESSION, &session)], r#"{"jsonrpc": "2.0", "id": 1,"#).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    assert_eq!(malformed.body["error"]["code"], -32700);
    assert_eq!(malformed.body["id"], Value::Null);

    let batch = demo.post_with(&[(SESSION, &session)], r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#).await;
    assert_eq!((batch.status, &batch.body["error"]["code"]), (StatusCode::BAD_REQUEST, &json!(-32600)));
    let no_method = demo.post(Some(&session), &json!({"jsonrpc": "2.0", "id": 4})).await;
    assert_eq!((no_method.status, &no_method.body["id"]), (StatusCode::BAD_REQUEST, &json!(4)));
}

#[tokio::test]
async fn tools_list_shows_five_described_tools() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;
    let answer = demo.request(&session, "tools/list", json!({})).await;
    let tools = answer["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
    assert_eq!(names, ["echo", "add", "counter", "sleep", "fail"]);
    for tool in tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(tool["title"].is_string() && tool["description"].is_string(), "{tool}");
        assert!(tool["annotations"]["readOnlyHint"].is_boolean(), "{tool}");
    }
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["text"]));
    assert_eq!(tools[1]["outputSchema"]["properties"]["sum"]["type"], "number");
    assert_eq!(tools[3]["inputSchema"]["properties"]["ms"]["maximum"], 10_000);
    assert!(answer["result"].get("nextCursor").is_none());
}

#[tokio::test]
async fn each_tool_does_its_job() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;

    let echo = demo.call(&session, "echo", json!({"text": "hello, gateway"})).await;
    assert_eq!(text(&echo), "hello, gateway");
    assert_ne!(echo["isError"], true);

    let add = demo.call(&session, "add", json!({"a": 2, "b": 40})).await;
    assert_eq!(add["structuredContent"], json!({"sum": 42}));
    assert_eq!(serde_json::from_str::<Value>(text(&add)).expect("JSON text"), json!({"sum": 42}));

    let started = std::time::Instant::now();
    let sleep = demo.call(&session, "sleep", json!({"ms": 50})).await;
    assert_eq!(text(&sleep), "slept 50 ms");
    assert!(started.elapsed() >= std::time::Duration::from_millis(50));

    let fail = demo.call(&session, "fail", json!({"message": "as requested"})).await;
    assert_eq!((text(&fail), &fail["isError"]), ("as requested", &json!(true)));
}

#[tokio::test]
async fn the_counter_counts_per_session() {
    let demo = Demo::start().await;
    let (first, second) = (demo.initialize().await, demo.initialize().await);
    for expected in ["1", "2", "3"] {
        assert_eq!(text(&demo.call(&first, "counter", json!({})).await), expected);
    }
    assert_eq!(text(&demo.call(&second, "counter", json!({})).await), "1");
    assert_eq!(text(&demo.call(&first, "counter", json!({})).await), "4");
}

#[tokio::test]
async fn protocol_errors_for_unknown_tools_and_methods() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;
    let unknown_tool = demo.request(&session, "tools/call", json!({"name": "nope", "arguments": {}})).await;
    assert_eq!(unknown_tool["error"]["code"], -32602);
    assert!(unknown_tool["error"]["message"].as_str().is_some_and(|message| message.contains("nope")));
    let unknown_method = demo.request(&session, "resources/list", json!({})).await;
    assert_eq!(unknown_method["error"]["code"], -32601);
}

#[tokio::test]
async fn bad_arguments_are_tool_errors() {
    let demo = Demo::start().await;
    let session = demo.initialize().await;
    let cases = [
        ("add", json!({"a": "two", "b": 2}), "`a` must be a number"),
        ("echo", json!({}), "missing required argument `text`"),
        ("sleep", json!({"ms": 10_001}), "`ms` must be between 0 and 10000"),
        ("counter", json!({"by": 2}), "unknown argument `by`"),
    ];
    for (tool, arguments, expected) in cases {
        let result = demo.call(&session, tool, arguments).await;
        assert_eq!(result["isError"], true, "{tool}");
        assert!(text(&result).contains(expected), "{tool}: {}", text(&result));
    }
}
