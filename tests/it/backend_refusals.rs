//! Backend refusals through the gateway: an HTTP status that proves the backend did not process a
//! call releases its ledger claim (`not_delivered`, safe to retry), any other error status leaves the call
//! `unknown`, and the demo backend accepts every body the gateway accepts.

use std::net::{Ipv4Addr, SocketAddr};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::ledger::{ClaimKey, ClaimRecord, ClaimState};
use switchyard::router::{CLAIM_META, IDEMPOTENCY_META, OUTCOME_META};

use crate::support::assert::text;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

const TOOL: &str = "fault__echo";
const RAN: &str = "echo";

fn call(id: u64, text: &str, key: &str) -> Value {
    let params = json!({"name": TOOL, "arguments": {"text": text}, "_meta": {IDEMPOTENCY_META: key}});
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

async fn post(agent: &Agent, message: &Value) -> Value {
    let reply = agent.send(message).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.raw);
    reply.body.unwrap_or_else(|| panic!("not JSON: {}", reply.raw))
}

/// The failure's outcome, its text, and the claim it names.
fn failure(body: &Value) -> (&str, &str, ClaimKey) {
    assert_eq!(body["result"]["isError"], json!(true), "{body}");
    let outcome = body["result"]["_meta"][OUTCOME_META].as_str().expect("an outcome");
    let text = text(body);
    let claim = body["result"]["_meta"][CLAIM_META].as_str().expect("the claim is named");
    (outcome, text, ClaimKey::parse(claim).expect("a claim key"))
}

async fn stored(gateway: &TestGateway, key: &ClaimKey) -> Option<ClaimRecord> {
    gateway.router.ledger().store.get(key).await.expect("the ledger answers")
}

async fn fault_gateway(backend: &FaultBackend) -> TestGateway {
    TestGateway::start("", &backend_toml("fault", &backend.url(), "")).await
}

/// Each refusal status: `not_delivered` naming the status, no claim left, nothing ran; once the backend accepts,
/// the same key runs exactly once.
#[tokio::test]
async fn a_refused_call_is_released_and_its_retry_runs_once() {
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = fault_gateway(&backend).await;
    let agent = Agent::connected(gateway.mcp()).await;
    for (id, status) in (1..).zip([400, 401, 403, 405, 413, 415, 429, 431]) {
        backend.update(|script| script.call_status = Some(status));
        let refused = post(&agent, &call(id, "deploy", "deploy-1")).await;
        let (outcome, text, claim) = failure(&refused);
        assert_eq!(outcome, "not_delivered", "{status}: {refused}");
        for phrase in ["did not run", "safe to retry", &format!("HTTP {status} ")] {
            assert!(text.contains(phrase), "{status}: {phrase:?} missing from {text:?}");
        }
        assert!(stored(&gateway, &claim).await.is_none(), "{status}: a refused call leaves no claim");
    }
    assert_eq!(backend.executions(RAN), 0);

    backend.update(|script| script.call_status = None);
    let ran = post(&agent, &call(100, "deploy", "deploy-1")).await;
    assert_eq!(ran["result"]["content"][0]["text"], "deploy", "{ran}");
    let again = post(&agent, &call(101, "deploy", "deploy-1")).await;
    assert_eq!(again["result"]["content"][0]["text"], "deploy", "{again}");
    assert_eq!(backend.executions(RAN), 1, "the released key ran once, then was replayed");
}

/// A 500 may come after the tool ran: `unknown`, the claim stays, a retry is not sent.
#[tokio::test]
async fn a_500_stays_unknown() {
    let backend = FaultBackend::start(Script { call_status: Some(500), ..Script::default() }).await;
    let gateway = fault_gateway(&backend).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let lost = post(&agent, &call(1, "pay", "pay-1")).await;
    let (outcome, text, claim) = failure(&lost);
    assert_eq!(outcome, "unknown", "{lost}");
    assert!(text.contains("may have run"), "{text}");
    let record = stored(&gateway, &claim).await.expect("the claim stays");
    assert_eq!(record.state, ClaimState::Unknown);

    backend.update(|script| script.call_status = None);
    let retry = post(&agent, &call(2, "pay", "pay-1")).await;
    assert_eq!(failure(&retry).0, "unknown", "{retry}");
    assert_eq!(backend.rpc_count("tools/call"), 1, "the retry never reached the backend");
}

/// An argument the gateway accepts (3 MiB, under its 4 MiB `max_body`) but the backend does not (2 MiB limit): the
/// backend's 413 makes the call `not_delivered`, and nothing ran.
#[tokio::test]
async fn a_big_argument_over_the_backends_limit_is_not_delivered() {
    let backend = FaultBackend::start(Script { body_limit: Some(2 << 20), ..Script::default() }).await;
    let gateway = fault_gateway(&backend).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let big = "x".repeat(3 << 20);
    let refused = post(&agent, &call(1, &big, "upload-1")).await;
    let (outcome, text, claim) = failure(&refused);
    assert_eq!(outcome, "not_delivered", "{text}");
    assert!(text.contains("HTTP 413 Content Too Large"), "{text}");
    assert!(stored(&gateway, &claim).await.is_none(), "a refused call leaves no claim");
    assert_eq!(backend.executions(RAN), 0);
}

/// The demo backend takes what the gateway takes: an argument of 3.5 MiB goes through and comes back.
#[tokio::test]
async fn the_demo_backend_accepts_what_the_gateway_accepts() {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await.expect("demo");
    let gateway = TestGateway::start("", &backend_toml("demo", &format!("http://{address}/mcp"), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let big = "y".repeat(7 << 19);
    let echoed = agent.call_tool("demo__echo", json!({"text": big})).await;
    assert_ne!(echoed["result"]["isError"], json!(true), "{}", &echoed.to_string()[..512]);
    assert_eq!(echoed["result"]["content"][0]["text"].as_str().map(str::len), Some(big.len()));
    demo.abort();
}
