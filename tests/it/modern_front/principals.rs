//! What a session carried, keyed on the principal for sessionless agents, through the running gateway: a call
//! reaches the backend and is settled once per request, idempotency keys are scoped to the principal, each
//! principal has backend sessions of its own, a backend's request is refused with a reason, and closing the
//! response cancels the request.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use switchyard::ledger::{ClaimState, ListFilter};

use super::{ModernAgent, gateway_with, with_meta};
use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::support::fault_backend::{Answer, FaultBackend, Script};
use crate::support::gateway::{TestGateway, backend_toml};

#[tokio::test]
async fn a_call_without_a_session_reaches_the_backend_and_is_settled_once_per_request() {
    let (fault, gateway) = gateway_with(Script::default()).await;
    let agent = ModernAgent::new(gateway.mcp());
    let call = json!({"name": "fault__echo", "arguments": {"text": "once"}});
    assert_eq!(agent.result(7, "tools/call", call.clone()).await["content"][0]["text"], "once");
    assert_eq!(fault.executions("echo"), 1);
    let sent = fault.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    let sent_meta = &sent.body.unwrap()["params"]["_meta"];
    assert!(
        sent_meta.get("io.modelcontextprotocol/clientInfo").is_none(),
        "the agent's hop stays at the front: {sent_meta}"
    );
    let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(claims.len(), 1, "one claim for one call");
    assert_eq!(claims[0].state, ClaimState::Completed);
    assert_eq!((claims[0].principal.as_str(), claims[0].tool.as_str()), ("anonymous", "echo"));

    // Ids are unique only among one sender's requests in flight: the same id later is a new request, not a
    // duplicate (it would otherwise be answered with another call's result).
    let again = agent.result(7, "tools/call", call).await;
    assert!(again["_meta"].get("switchyard/replayed").is_none(), "not a replay: {again}");
    assert_eq!(fault.executions("echo"), 2);
    let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(claims.len(), 2);
    assert!(claims.iter().all(|claim| claim.state == ClaimState::Completed));
}

#[tokio::test]
async fn an_idempotency_key_is_scoped_to_the_principal() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let bob = ModernAgent::as_principal(gateway.mcp(), BOB_KEY);
    let keyed = |text: &str| json!({"name": "fault__echo", "arguments": {"text": text}, "_meta": {"switchyard/idempotency-key": "k-1"}});
    let first = alice.result(1, "tools/call", keyed("pay")).await;
    let replayed = alice.result(2, "tools/call", keyed("pay")).await;
    assert_eq!(replayed["_meta"]["switchyard/replayed"], true, "{replayed}");
    assert_eq!(replayed["content"], first["content"]);
    assert_eq!(replayed["resultType"], "complete", "a replay is shaped for the era too");
    assert_eq!(fault.executions("echo"), 1, "the duplicate did not run");
    let header = |headers: &mut Vec<(String, String)>| headers.push(("idempotency-key".into(), "k-1".into()));
    let by_header = alice.send_with(json!(3), "tools/call", keyed("pay"), header).await;
    assert_eq!(
        by_header.body.unwrap()["result"]["_meta"]["switchyard/replayed"],
        true,
        "the header names the same key"
    );

    let bobs = bob.result(4, "tools/call", keyed("pay")).await;
    assert!(bobs["_meta"].get("switchyard/replayed").is_none(), "another principal's key is another key");
    assert_eq!(fault.executions("echo"), 2);
}

#[tokio::test]
async fn principals_get_backend_sessions_of_their_own() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let call = json!({"name": "fault__echo", "arguments": {"text": "x"}});
    for (id, token) in [(1, ALICE_KEY), (2, BOB_KEY), (3, ALICE_KEY), (4, BOB_KEY)] {
        ModernAgent::as_principal(gateway.mcp(), token).result(id, "tools/call", call.clone()).await;
    }
    let sessions: Vec<String> = fault
        .requests()
        .into_iter()
        .filter(|request| request.rpc_method.as_deref() == Some("tools/call"))
        .map(|request| request.header("mcp-session-id").expect("a backend session").to_owned())
        .collect();
    assert_eq!(sessions.len(), 4);
    assert_eq!(sessions[0], sessions[2], "alice's calls share her backend session (no session of her own needed)");
    assert_eq!(sessions[1], sessions[3], "so do bob's");
    assert_ne!(sessions[0], sessions[1], "alice and bob never share one");
    let handshakes = fault.rpc_count("initialize");
    assert_eq!(handshakes, 3, "discovery's, alice's and bob's: {handshakes}");
}

#[tokio::test]
async fn a_backends_request_to_a_sessionless_agent_is_refused_with_a_reason() {
    let script = Script {
        answer: Answer::Sse,
        before_result: vec![json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
            "params": {"message": "Which colour?", "requestedSchema": {"type": "object"}}})],
        await_answers: true,
        ..Script::default()
    };
    let (fault, gateway) = gateway_with(script).await;
    let agent = ModernAgent::new(gateway.mcp());
    let mut params = json!({"name": "fault__echo", "arguments": {"text": "x"}});
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let answered = agent.send(json!(1), "tools/call", params).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.raw);
    assert!(!answered.raw.contains("elicitation/create"), "no request ever reaches this era's agent: {}", answered.raw);
    let refusal = fault.client_answers().into_iter().find(|answer| answer["id"] == "srv-1").expect("an answer");
    assert_eq!(refusal["error"]["code"], -32601);
    let why = refusal["error"]["message"].as_str().unwrap();
    assert!(why.contains("2026-07-28") && why.contains("elicitation/create"), "{why}");
    let initialized = fault.requests().into_iter().filter(|r| r.rpc_method.as_deref() == Some("initialize"));
    for handshake in initialized {
        let offered = &handshake.body.as_ref().unwrap()["params"]["capabilities"];
        assert!(offered.get("elicitation").is_none(), "backend sessions declare no client capability: {offered}");
    }
}

#[tokio::test]
async fn closing_the_response_cancels_the_request() {
    let script = Script { call_delay: Some(Duration::from_secs(3)), ..Script::default() };
    let (fault, gateway) = gateway_with(script).await;
    let agent = ModernAgent {
        http: reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap(),
        ..ModernAgent::new(gateway.mcp())
    };
    let params = with_meta(json!({"name": "fault__echo", "arguments": {"text": "slow"}}));
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let headers = ModernAgent::headers("tools/call", &params);
    let request = agent.http.post(&agent.url).header("content-type", "application/json").body(message.to_string());
    let request = headers.iter().fold(request, |request, (name, value)| request.header(name.as_str(), value.as_str()));
    assert!(request.send().await.is_err(), "the agent gives up and closes the connection");
    let mut cancelled = 0;
    for _ in 0..100 {
        cancelled = fault.rpc_count("notifications/cancelled");
        if cancelled > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cancelled, 1, "the backend is told the request was cancelled");
    let mut state = None;
    for _ in 0..100 {
        let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
        state = claims.first().map(|claim| claim.state);
        if state == Some(ClaimState::Unknown) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        state,
        Some(ClaimState::Unknown),
        "a cancelled call may have run: its outcome is unknown, never retried"
    );
}
