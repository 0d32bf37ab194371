//! MCP 2026-07-28 agents on the same endpoint as 2025-11-25 ones, through a running
//! gateway: each rule of the sessionless era with the answer the gateway really gives — the `_meta` fields, the
//! headers against the body (`=?base64?…?=` included), sessions refused, versions, removed methods,
//! `server/discover`, `subscriptions/listen` — and what a session used to carry, now keyed on the principal:
//! backend sessions per (principal, backend), at most once without a session, idempotency keys scoped to the
//! principal. A session-era agent on the same endpoint is served exactly as before.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::fault_backend::{Answer, FaultBackend, Script};
use crate::support::gateway::{Agent, Reply, SESSION, TestGateway, backend_toml};

mod input;
mod listen;
mod principals;

const MODERN: &str = "2026-07-28";

/// A 2026-07-28 agent: no session, every request carrying its `_meta` and the headers mirroring its body.
pub(crate) struct ModernAgent {
    http: reqwest::Client,
    url: String,
    token: Option<&'static str>,
}

/// The `_meta` a conforming 2026-07-28 request carries.
fn client_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
    })
}

/// `params` with the client `_meta` added (keys already in `params._meta` win).
fn with_meta(mut params: Value) -> Value {
    let mut merged = client_meta();
    if let Some(own) = params.get("_meta").and_then(Value::as_object) {
        for (key, value) in own {
            merged[key] = value.clone();
        }
    }
    params["_meta"] = merged;
    params
}

impl ModernAgent {
    pub(crate) fn new(url: String) -> ModernAgent {
        ModernAgent { http: reqwest::Client::new(), url, token: None }
    }

    pub(crate) fn as_principal(url: String, token: &'static str) -> ModernAgent {
        ModernAgent { token: Some(token), ..ModernAgent::new(url) }
    }

    /// The headers a conforming agent sends for `method` with `params`.
    fn headers(method: &str, params: &Value) -> Vec<(String, String)> {
        let mut headers =
            vec![("mcp-protocol-version".to_owned(), MODERN.to_owned()), ("mcp-method".into(), method.into())];
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            "tasks/get" | "tasks/cancel" | "tasks/update" => params.get("taskId"),
            _ => None,
        };
        if let Some(name) = name.and_then(Value::as_str) {
            headers.push(("mcp-name".into(), name.into()));
        }
        headers
    }

    /// POSTs `message` with exactly `headers` (besides content type, accept and credentials).
    async fn post(&self, message: &Value, headers: &[(String, String)]) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(message.to_string());
        if let Some(token) = self.token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request.send().await.expect("gateway reachable")
    }

    /// Sends request `id` of `method` (params get the client `_meta`) with the conforming headers, edited by
    /// `edit`, and reads the whole answer.
    pub(crate) async fn send_with(
        &self,
        id: Value,
        method: &str,
        params: Value,
        edit: impl FnOnce(&mut Vec<(String, String)>),
    ) -> Reply {
        let params = with_meta(params);
        let mut headers = ModernAgent::headers(method, &params);
        edit(&mut headers);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        reply(self.post(&message, &headers).await).await
    }

    async fn send(&self, id: Value, method: &str, params: Value) -> Reply {
        self.send_with(id, method, params, |_| {}).await
    }

    /// A request that must succeed: its result.
    async fn result(&self, id: u64, method: &str, params: Value) -> Value {
        let reply = self.send(json!(id), method, params).await;
        assert_eq!(reply.status, StatusCode::OK, "{method}: {}", reply.raw);
        let body = reply.body.unwrap_or_else(|| panic!("{method}: no JSON-RPC answer in {}", reply.raw));
        assert_eq!(body["id"], id, "{body}");
        body["result"].clone()
    }

    /// Opens `subscriptions/listen` (request `id`) with these opt-ins; the stream unread.
    pub(crate) async fn listen(&self, id: &str, notifications: Value) -> reqwest::Response {
        let params = with_meta(json!({"notifications": notifications}));
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params});
        let response = self.post(&message, &ModernAgent::headers("subscriptions/listen", &params)).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        response
    }
}

/// The whole answer: JSON, or the response in an event stream.
async fn reply(response: reqwest::Response) -> Reply {
    let (status, headers) = (response.status(), response.headers().clone());
    let raw = response.text().await.unwrap_or_default();
    let body = if headers.get("content-type").is_some_and(|kind| kind == "text/event-stream") {
        messages(&raw).into_iter().rfind(|message| message.get("result").is_some() || message.get("error").is_some())
    } else {
        serde_json::from_str(&raw).ok()
    };
    Reply { status, headers, body, raw }
}

/// Every message of an event stream's text.
pub(crate) fn messages(raw: &str) -> Vec<Value> {
    raw.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect()
}

/// A refusal's status, JSON-RPC code and id.
fn refusal(reply: &Reply) -> (StatusCode, i64, Value) {
    let body = reply.body.as_ref().unwrap_or_else(|| panic!("a JSON-RPC error body: {}", reply.raw));
    let code = body["error"]["code"].as_i64().unwrap_or_else(|| panic!("an error: {body}"));
    (reply.status, code, body["id"].clone())
}

async fn gateway_with(script: Script) -> (FaultBackend, TestGateway) {
    let fault = FaultBackend::start(script).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    (fault, gateway)
}

#[tokio::test]
async fn headers_must_match_the_body_and_names_may_be_base64() {
    let (fault, gateway) = gateway_with(Script::default()).await;
    let agent = ModernAgent::new(gateway.mcp());
    let call = json!({"name": "fault__echo", "arguments": {"text": "hi"}});
    let set = |name: &'static str, value: String| {
        move |headers: &mut Vec<(String, String)>| {
            headers.retain(|(header, _)| header != name);
            headers.push((name.into(), value));
        }
    };

    let wrong_method =
        agent.send_with(json!(1), "tools/call", call.clone(), set("mcp-method", "tools/list".into())).await;
    assert_eq!(refusal(&wrong_method), (StatusCode::BAD_REQUEST, -32020, json!(1)), "{}", wrong_method.raw);
    let wrong_name =
        agent.send_with(json!(2), "tools/call", call.clone(), set("mcp-name", "fault__other".into())).await;
    assert_eq!(refusal(&wrong_name), (StatusCode::BAD_REQUEST, -32020, json!(2)));
    assert!(wrong_name.raw.contains("mcp-name"), "the refusal names the header: {}", wrong_name.raw);
    let no_name = agent.send_with(json!(3), "tools/call", call.clone(), |h| h.retain(|(n, _)| n != "mcp-name")).await;
    assert_eq!(refusal(&no_name).1, -32020);
    let wrong_version =
        agent.send_with(json!(4), "tools/call", call.clone(), set("mcp-protocol-version", "2025-11-25".into())).await;
    assert_eq!(refusal(&wrong_version), (StatusCode::BAD_REQUEST, -32020, json!(4)));
    assert_eq!(fault.executions("echo"), 0, "nothing refused reached the backend");

    let encoded = format!("=?base64?{}?=", STANDARD.encode("fault__echo"));
    let named = agent.send_with(json!(5), "tools/call", call.clone(), set("mcp-name", encoded)).await;
    assert_eq!(named.status, StatusCode::OK, "{}", named.raw);
    assert_eq!(named.body.unwrap()["result"]["content"][0]["text"], "hi");
    let encoded_other = format!("=?base64?{}?=", STANDARD.encode("fault__other"));
    let mismatched = agent.send_with(json!(6), "tools/call", call, set("mcp-name", encoded_other)).await;
    assert_eq!(refusal(&mismatched).1, -32020, "the decoded value is compared");
    assert_eq!(fault.executions("echo"), 1);
}

#[tokio::test]
async fn missing_client_fields_unsupported_versions_and_sessions_are_refused_with_the_eras_codes() {
    let (fault, gateway) = gateway_with(Script::default()).await;
    let agent = ModernAgent::new(gateway.mcp());
    let list = |id: u64, meta: Value, version: &'static str| {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": meta}});
        let headers =
            vec![("mcp-protocol-version".to_owned(), version.to_owned()), ("mcp-method".into(), "tools/list".into())];
        (message, headers)
    };

    let (message, headers) = list(1, json!({"io.modelcontextprotocol/protocolVersion": MODERN}), MODERN);
    let no_capabilities = reply(agent.post(&message, &headers).await).await;
    assert_eq!(refusal(&no_capabilities), (StatusCode::BAD_REQUEST, -32602, json!(1)), "{}", no_capabilities.raw);
    assert!(no_capabilities.raw.contains("clientCapabilities"), "{}", no_capabilities.raw);
    let no_meta = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let answered = reply(agent.post(&no_meta, &headers).await).await;
    assert_eq!(refusal(&answered), (StatusCode::BAD_REQUEST, -32602, json!(2)), "a 2026 header makes it this era's");

    let mut future = client_meta();
    future["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (message, headers) = list(3, future, "2099-01-01");
    let unsupported = reply(agent.post(&message, &headers).await).await;
    assert_eq!(refusal(&unsupported), (StatusCode::BAD_REQUEST, -32022, json!(3)), "{}", unsupported.raw);
    let data = &unsupported.body.as_ref().unwrap()["error"]["data"];
    assert_eq!(*data, json!({"supported": [MODERN], "requested": "2099-01-01"}));

    let with_session = |headers: &mut Vec<(String, String)>| headers.push((SESSION.into(), "not-a-session".into()));
    let refused = agent.send_with(json!(4), "tools/list", json!({}), with_session).await;
    assert_eq!(refusal(&refused), (StatusCode::BAD_REQUEST, -32020, json!(4)), "{}", refused.raw);
    assert!(refused.headers.get(SESSION).is_none(), "no session is ever minted for this era");
    drop(fault);
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404_and_there_is_no_get_or_delete() {
    let (_fault, gateway) = gateway_with(Script::default()).await;
    let agent = ModernAgent::new(gateway.mcp());
    for (id, method) in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "tasks/list", "no/such"]
        .into_iter()
        .enumerate()
    {
        let answered = agent.send(json!(id), method, json!({})).await;
        assert_eq!(refusal(&answered), (StatusCode::NOT_FOUND, -32601, json!(id)), "{method}: {}", answered.raw);
    }
    let headers = |method: &str| {
        vec![("mcp-protocol-version".to_owned(), MODERN.to_owned()), ("mcp-method".into(), method.into())]
    };
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let accepted = agent.post(&cancelled, &headers("notifications/cancelled")).await;
    assert_eq!(accepted.status(), StatusCode::ACCEPTED, "accepted, and meaningless: closing a stream cancels");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let unknown = reply(agent.post(&initialized, &headers("notifications/initialized")).await).await;
    assert_eq!(refusal(&unknown), (StatusCode::NOT_FOUND, -32601, Value::Null), "{}", unknown.raw);
    let response = json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}});
    let unasked = reply(agent.post(&response, &headers("")).await).await;
    assert_eq!(refusal(&unasked), (StatusCode::BAD_REQUEST, -32600, json!("srv-1")), "nothing was asked");
    for request in [agent.http.get(gateway.mcp()), agent.http.delete(gateway.mcp())] {
        let response = request.header("mcp-protocol-version", MODERN).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.headers()["allow"], "POST");
        let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert!(body["error"]["message"].as_str().unwrap().contains("subscriptions/listen"), "{body}");
    }
}

#[tokio::test]
async fn discover_names_the_gateways_versions_capabilities_and_identity() {
    let (_fault, gateway) = gateway_with(Script::default()).await;
    let discovered = ModernAgent::new(gateway.mcp()).result(1, "server/discover", json!({})).await;
    let versions = discovered["supportedVersions"].as_array().unwrap();
    assert_eq!(versions[0], MODERN);
    assert!(versions.contains(&json!("2025-11-25")), "the session era is served too: {discovered}");
    assert_eq!(discovered["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(discovered["capabilities"]["resources"]["subscribe"], true);
    assert_eq!(discovered["resultType"], "complete");
    assert_eq!((discovered["ttlMs"].clone(), discovered["cacheScope"].clone()), (json!(0), json!("private")));
    assert_eq!(discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "switchyard");
    assert!(discovered["instructions"].as_str().unwrap().contains("fault"));
    for legacy in ["protocolVersion", "serverInfo"] {
        assert!(discovered.get(legacy).is_none(), "no {legacy} in a 2026-07-28 result: {discovered}");
    }
}

#[tokio::test]
async fn results_carry_the_eras_fields_and_the_gateways_caching_hints() {
    let (_fault, gateway) = gateway_with(Script::default()).await;
    let agent = ModernAgent::new(gateway.mcp());
    let listed = agent.result(1, "tools/list", json!({})).await;
    assert_eq!(listed["tools"][0]["name"], "fault__echo");
    let one_backend = ModernAgent::new(format!("{}/mcp/fault", gateway.base));
    let bare = one_backend.result(9, "tools/list", json!({})).await;
    assert_eq!(bare["tools"][0]["name"], "echo", "/mcp/<backend> serves this era with bare names too");
    assert_eq!((listed["ttlMs"].clone(), listed["cacheScope"].clone()), (json!(0), json!("private")));
    assert_eq!(listed["resultType"], "complete");
    let called = agent.result(2, "tools/call", json!({"name": "fault__echo", "arguments": {"text": "x"}})).await;
    assert_eq!(called["resultType"], "complete");
    assert_eq!(called["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "switchyard");
    assert!(called.get("ttlMs").is_none(), "a tool result is not cacheable: {called}");

    // An unknown resource is 2026-07-28's -32602 with the URI, never the session era's -32002.
    let missing = agent.send(json!(3), "resources/read", json!({"uri": "file:///nowhere"})).await;
    assert_eq!(refusal(&missing), (StatusCode::OK, -32602, json!(3)), "{}", missing.raw);
    assert_eq!(missing.body.unwrap()["error"]["data"]["uri"], "file:///nowhere");
}

/// The text of a `notifications/message` at `level` a backend sends during a call.
fn log_message(level: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": format!("a {level} line")}})
}

#[tokio::test]
async fn log_messages_reach_only_agents_that_asked_for_their_level() {
    let script = Script {
        answer: Answer::Sse,
        before_result: vec![log_message("info"), log_message("error")],
        ..Script::default()
    };
    let (_fault, gateway) = gateway_with(script).await;
    let agent = ModernAgent::new(gateway.mcp());
    let call = |level: Option<&str>| {
        let mut params = json!({"name": "fault__echo", "arguments": {"text": "x"}});
        if let Some(level) = level {
            params["_meta"] = json!({"io.modelcontextprotocol/logLevel": level});
        }
        params
    };
    let quiet = agent.send(json!(1), "tools/call", call(None)).await;
    assert_eq!(quiet.headers["content-type"], "application/json", "nothing to stream: {}", quiet.raw);
    assert!(!quiet.raw.contains("notifications/message"));
    let warned = agent.send(json!(2), "tools/call", call(Some("warning"))).await;
    assert_eq!(warned.headers["content-type"], "text/event-stream");
    let logged: Vec<Value> =
        messages(&warned.raw).into_iter().filter(|m| m["method"] == "notifications/message").collect();
    assert_eq!(logged.len(), 1, "only the error line is at or above warning: {}", warned.raw);
    assert_eq!(logged[0]["params"]["level"], "error");
    assert!(!warned.raw.contains("id: "), "no event ids in this era: {}", warned.raw);
    assert_eq!(warned.body.unwrap()["result"]["content"][0]["text"], "x");
    let bad = agent.send(json!(3), "tools/call", call(Some("loud"))).await;
    assert_eq!(refusal(&bad), (StatusCode::BAD_REQUEST, -32602, json!(3)));
}

#[tokio::test]
async fn a_session_era_agent_on_the_same_endpoint_is_served_as_before() {
    let (fault, gateway) = gateway_with(Script::default()).await;
    let modern = ModernAgent::new(gateway.mcp());
    let mut legacy = Agent::connected(gateway.mcp()).await;
    assert!(legacy.session.is_some(), "initialize without 2026-07-28 marks starts a session");
    let called = legacy.call_tool("fault__echo", json!({"text": "old"})).await;
    assert_eq!(called["result"]["content"][0]["text"], "old");
    assert!(called["result"].get("resultType").is_none(), "session-era results are untouched: {called}");
    assert_eq!(
        modern.result(1, "tools/call", json!({"name": "fault__echo", "arguments": {"text": "new"}})).await["resultType"],
        "complete"
    );

    // A live session keeps a request in the session era even when it also carries 2026-07-28 marks, and that era
    // answers them as it always did.
    let marked = json!({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": client_meta()}});
    let pinged = legacy.post_raw(marked.to_string().into_bytes(), &[]).await;
    assert_eq!(pinged.status, StatusCode::OK, "{}", pinged.raw);
    assert_eq!(pinged.body.unwrap()["result"], json!({}));
    let versioned = legacy.post_raw(marked.to_string().into_bytes(), &[("mcp-protocol-version", MODERN)]).await;
    assert_eq!(versioned.status, StatusCode::BAD_REQUEST, "not a version of the session era: {}", versioned.raw);
    assert!(versioned.raw.contains("unsupported MCP-Protocol-Version"), "{}", versioned.raw);

    let unsessioned = Agent::new(gateway.mcp());
    let no_session = unsessioned.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    assert_eq!(no_session.status, StatusCode::BAD_REQUEST, "the session era still needs its session");
    let get = legacy.http.get(gateway.mcp()).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(get.status(), StatusCode::BAD_REQUEST, "a GET without session or 2026 version: as before");
    let odd = unsessioned.post_raw(b"{}".to_vec(), &[("mcp-protocol-version", "1999-01-01")]).await;
    assert_eq!(odd.status, StatusCode::BAD_REQUEST);
    assert!(odd.raw.contains("unsupported MCP-Protocol-Version"), "{}", odd.raw);
    assert_eq!(fault.executions("echo"), 2);
}
