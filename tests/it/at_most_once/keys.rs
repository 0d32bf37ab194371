//! What a claim key names: one call — backend, tool and arguments — and what an
//! idempotency key may be — a string of 1–255 printable ASCII characters, in `_meta` or the `Idempotency-Key`
//! header. A key or request id reused for another call, and a malformed key, are refused before anything runs;
//! the fault backend's per-tool `executions` show that nothing did.

use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use super::{Ledger, RAN, Store, TOOL, assert_echo, call, post, replayed};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, SESSION};
use switchyard::router::IDEMPOTENCY_META;

/// A second tool of the fault backend, as exposed and as counted.
const OTHER_TOOL: &str = "fault__shout";
const OTHER_RAN: &str = "shout";

/// The fault backend with its `echo` and a second tool, `shout` (which answers its text, like `echo`).
async fn two_tool_backend() -> FaultBackend {
    let tool = |name: &str| {
        json!({
            "name": name,
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
        })
    };
    FaultBackend::start(Script { tools: vec![tool(RAN), tool(OTHER_RAN)], ..Script::default() }).await
}

/// A `tools/call` of `tool` with `arguments` and, when given, `_meta[IDEMPOTENCY_META] = meta_key` (any JSON).
fn call_of(id: u64, tool: &str, text: &str, meta_key: Option<Value>) -> Value {
    let mut message = call(id, text, None);
    message["params"]["name"] = json!(tool);
    if let Some(key) = meta_key {
        message["params"]["_meta"] = json!({ IDEMPOTENCY_META: key });
    }
    message
}

/// Asserts a JSON-RPC `-32602` whose message contains every phrase; returns the message.
fn assert_invalid_params<'a>(body: &'a Value, phrases: &[&str]) -> &'a str {
    assert_eq!(body["error"]["code"], json!(-32602), "{body}");
    assert!(body.get("result").is_none(), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    for phrase in phrases {
        assert!(message.contains(phrase), "{phrase:?} missing from {message:?}");
    }
    message
}

// ---------------------------------------------------------------------------------------------------------------
// D2: a claim is for one call (every store)

/// The same idempotency key for another tool (in `_meta` or the header) or other arguments is refused naming the
/// conflict, and nothing runs; the original call still replays.
pub(super) async fn one_key_for_another_tool_is_refused(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = two_tool_backend().await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    assert_echo(&post(&agent, &call_of(1, TOOL, "count", Some(json!("K"))), &[]).await, "count");
    let by_meta = post(&agent, &call_of(2, OTHER_TOOL, "count", Some(json!("K"))), &[]).await;
    assert!(!replayed(&by_meta), "another tool's result must not be replayed: {by_meta}");
    assert_invalid_params(&by_meta, &["idempotency key", "already used", "`echo`", "`shout`", "new key"]);
    let by_header = post(&agent, &call_of(3, OTHER_TOOL, "count", None), &[("Idempotency-Key", "K")]).await;
    assert_invalid_params(&by_header, &["idempotency key", "already used", "`echo`", "`shout`"]);
    let other_arguments = post(&agent, &call_of(4, TOOL, "count twice", Some(json!("K"))), &[]).await;
    assert_invalid_params(&other_arguments, &["idempotency key", "already used", "other arguments"]);
    assert_eq!(backend.executions(OTHER_RAN), 0, "the refused calls did not run");
    assert_eq!(backend.executions(RAN), 1);

    let again = post(&agent, &call_of(5, TOOL, "count", Some(json!("K"))), &[]).await;
    assert!(replayed(&again), "the original call still gets its result: {again}");
    assert_eq!(backend.executions(RAN), 1);
}

/// Without a key, a request id reused on the session for another tool or other arguments is refused naming
/// the conflict, and nothing runs; re-sending the original call still replays.
pub(super) async fn a_reused_request_id_for_another_call_is_refused(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = two_tool_backend().await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    assert_echo(&post(&agent, &call_of(7, TOOL, "count", None), &[]).await, "count");
    let other_tool = post(&agent, &call_of(7, OTHER_TOOL, "count", None), &[]).await;
    assert!(!replayed(&other_tool), "another tool's result must not be replayed: {other_tool}");
    assert_invalid_params(&other_tool, &["request id 7", "already used", "`echo`", "`shout`"]);
    let other_arguments = post(&agent, &call_of(7, TOOL, "count again", None), &[]).await;
    assert_invalid_params(&other_arguments, &["request id 7", "already used", "other arguments"]);
    assert_eq!(backend.executions(OTHER_RAN), 0, "the refused calls did not run");
    assert_eq!(backend.executions(RAN), 1);

    let resent = post(&agent, &call_of(7, TOOL, "count", None), &[]).await;
    assert!(replayed(&resent), "{resent}");
    assert_eq!(backend.executions(RAN), 1);
}

// ---------------------------------------------------------------------------------------------------------------
// D3: idempotency keys are strings of 1–255 printable ASCII characters (validation precedes any claim, so one
// store suffices)

/// POSTs `message` with one `Idempotency-Key` header per entry of `keys`, each exactly these bytes.
async fn post_with_key_headers(agent: &Agent, message: &Value, keys: &[&[u8]]) -> (StatusCode, Value) {
    let mut request = agent
        .http
        .post(&agent.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(SESSION, agent.session.as_deref().expect("a session"))
        .body(serde_json::to_vec(message).expect("JSON"));
    for key in keys {
        request = request.header("idempotency-key", HeaderValue::from_bytes(key).expect("a header value"));
    }
    let response = request.send().await.expect("gateway reachable");
    let status = response.status();
    let raw = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&raw).unwrap_or_else(|error| panic!("not JSON ({error}): {raw}")))
}

/// Each malformed `_meta` key is refused with `-32602` (HTTP 200) and a sentence saying why; nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_keys_in_meta_are_refused() {
    let Some(ledger) = Ledger::open(Store::Memory).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    let cases = [
        (json!(12345), "must be a string"),
        (json!({"key": "K"}), "must be a string"),
        (json!(null), "must be a string"),
        (json!(""), "empty"),
        (json!("k".repeat(256)), "256 characters long"),
        (json!("café"), "not printable ASCII"),
        (json!("order\u{7}42"), "not printable ASCII"),
        (json!("order\n42"), "not printable ASCII"),
    ];
    for (id, (key, why)) in (1..).zip(cases) {
        // Two sessions, so a key that was silently ignored would have run twice.
        for sender in [&agent, &Agent::connected(gateway.mcp()).await] {
            let refused = post(sender, &call_of(id, TOOL, "pay", Some(key.clone())), &[]).await;
            assert_invalid_params(&refused, &["idempotency key", why, "did not run"]);
        }
    }
    assert_eq!(backend.executions(RAN), 0, "no call with a malformed key ran");
}

/// Each malformed `Idempotency-Key` header is refused with HTTP 400 and a `-32602` body saying why, and so are
/// two headers; a header that differs from the key in `_meta` is `-32602` (HTTP 200); nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_key_headers_are_refused() {
    let Some(ledger) = Ledger::open(Store::Memory).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    let long = "k".repeat(256);
    let cases: [(&[&[u8]], &str); 5] = [
        (&[b""], "empty"),
        (&[long.as_bytes()], "256 characters long"),
        (&["café".as_bytes()], "not printable ASCII"),
        (&[b"order\t42"], "not printable ASCII"),
        (&[b"K1", b"K2"], "more than one"),
    ];
    for (id, (keys, why)) in (1..).zip(cases) {
        for sender in [&agent, &Agent::connected(gateway.mcp()).await] {
            let (status, refused) = post_with_key_headers(sender, &call_of(id, TOOL, "pay", None), keys).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
            assert_eq!(refused["id"], json!(id), "{refused}");
            assert_invalid_params(&refused, &["Idempotency-Key", why, "did not run"]);
        }
    }
    // The header is checked on every request of a session, whatever its method.
    let list = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"});
    let (status, refused) = post_with_key_headers(&agent, &list, &[b""]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_invalid_params(&refused, &["Idempotency-Key", "empty"]);

    let disagreeing = call_of(9, TOOL, "pay", Some(json!("K1")));
    let refused = post(&agent, &disagreeing, &[("Idempotency-Key", "K2")]).await;
    assert_invalid_params(&refused, &["Idempotency-Key", "_meta", "differ", "did not run"]);
    assert_eq!(backend.executions(RAN), 0, "no call with a malformed key ran");
}

/// The boundaries are keys: 1 and 255 characters (spaces and punctuation included), and the same key in `_meta`
/// and the header; each runs once and is replayed after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boundary_keys_run_once_and_replay() {
    let Some(ledger) = Ledger::open(Store::Memory).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    let longest: String = (0..255).map(|at| char::from(b' ' + (at % 95) as u8)).collect();
    let mut ran = 0;
    for (id, key) in [(1, "k".to_owned()), (3, longest), (5, "~ !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}".to_owned())] {
        let first = post(&agent, &call_of(id, TOOL, &format!("key {id}"), Some(json!(key))), &[]).await;
        assert_echo(&first, &format!("key {id}"));
        ran += 1;
        let second = post(&agent, &call_of(id + 1, TOOL, &format!("key {id}"), Some(json!(key))), &[]).await;
        assert!(replayed(&second), "{second}");
        assert_eq!(backend.executions(RAN), ran, "key {key:?}");
    }

    let both = call_of(7, TOOL, "both", Some(json!("same-key")));
    assert_echo(&post(&agent, &both, &[("Idempotency-Key", "same-key")]).await, "both");
    let by_header = post(&agent, &call_of(8, TOOL, "both", None), &[("Idempotency-Key", "same-key")]).await;
    assert!(replayed(&by_header), "{by_header}");
    let (status, longest_header) =
        post_with_key_headers(&agent, &call_of(9, TOOL, "header", None), &[&[b'h'; 255]]).await;
    assert_eq!(status, StatusCode::OK, "{longest_header}");
    assert_echo(&longest_header, "header");
    assert_eq!(backend.executions(RAN), ran + 2);
}
