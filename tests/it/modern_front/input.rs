//! Multi round-trip results through the gateway (2026-07-28 agents in front of a 2026-07-28
//! backend): a backend that asks for input twice, then runs. The agent sees the backend's `inputRequests` and a
//! state of the gateway's; the backend sees its own state back; a state that is tampered with, expired, another
//! principal's or another call's is refused with `-32602` and never reaches the backend; the call is one claim,
//! settled once, and a replayed final retry is answered from the ledger.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::ledger::{ClaimKey, ClaimState, ListFilter, NewClaim};
use switchyard::router::request_state::{StateKey, StateSealer};

use super::{ModernAgent, refusal};
use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::support::fault_backend::{Eras, FaultBackend, STATE_PREFIX, Script};
use crate::support::gateway::{Reply, TestGateway, backend_toml};
use crate::telemetry::{sample, scrape};

fn elicit(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object", "properties": {"value": {"type": "string"}}}}})
}

fn accepted(value: &str) -> Value {
    json!({"action": "accept", "content": {"value": value}})
}

fn rounds() -> Vec<Value> {
    vec![json!({"name": elicit("your name?"), "color": elicit("your colour?")}), json!({"confirm": elicit("sure?")})]
}

async fn asking_backend() -> (FaultBackend, TestGateway) {
    let other = json!({"name": "other", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}});
    let mut script = Script { eras: Eras::Modern, input_rounds: rounds(), ..Script::default() };
    script.tools.push(other);
    let fault = FaultBackend::start(script).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    (fault, gateway)
}

fn call(tool: &str, text: &str) -> Value {
    json!({"name": tool, "arguments": {"text": text}})
}

/// `params` of a retry: the call's, plus the answers and the state.
fn retry(mut params: Value, responses: Value, state: &str) -> Value {
    params["inputResponses"] = responses;
    params["requestState"] = json!(state);
    params
}

fn result_of(reply: &Reply) -> Value {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.raw);
    let body = reply.body.as_ref().unwrap_or_else(|| panic!("an answer: {}", reply.raw));
    body.get("result").unwrap_or_else(|| panic!("a result: {body}")).clone()
}

fn invalid_params(reply: &Reply) -> String {
    let body = reply.body.as_ref().unwrap_or_else(|| panic!("an answer: {}", reply.raw));
    assert_eq!(body["error"]["code"], -32602, "{body}");
    body["error"]["message"].as_str().unwrap_or_default().to_owned()
}

/// The last `tools/call` the backend received.
fn last_call(fault: &FaultBackend) -> Value {
    last_of(fault, "tools/call")
}

#[tokio::test]
async fn a_call_that_asks_for_input_twice_is_one_claim_run_once_and_replayed_from_the_ledger() {
    let (fault, gateway) = asking_backend().await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let params = call("fault__echo", "hi");

    let first = result_of(&alice.send(json!(1), "tools/call", params.clone()).await);
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert_eq!(first["inputRequests"], rounds()[0], "the backend's input requests, unchanged");
    assert!(first.get("ttlMs").is_none() && first.get("cacheScope").is_none(), "no cache hints: {first}");
    let state = first["requestState"].as_str().expect("a state").to_owned();
    assert!(!state.contains(STATE_PREFIX), "the gateway's state, not the backend's: {state}");
    assert_eq!(last_call(&fault).get("requestState"), None, "the first request carries no state");
    let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].state, ClaimState::InFlight, "input_required does not settle the claim");

    let answers = json!({"name": accepted("ada"), "color": accepted("blue")});
    let second = result_of(&alice.send(json!(2), "tools/call", retry(params.clone(), answers.clone(), &state)).await);
    let sent = last_call(&fault);
    assert_eq!(sent["requestState"], format!("{STATE_PREFIX}1"), "the backend gets its own state back");
    assert_eq!(sent["inputResponses"], answers, "the answers go as the agent sent them");
    assert_eq!(sent["name"], "echo");
    assert_eq!(second["resultType"], "input_required");
    assert_eq!(second["inputRequests"], rounds()[1]);
    let latest = second["requestState"].as_str().unwrap().to_owned();
    assert_ne!(latest, state);

    let backend_calls = fault.rpc_count("tools/call");
    let stale = alice.send(json!(3), "tools/call", retry(params.clone(), answers, &state)).await;
    assert!(invalid_params(&stale).contains("earlier input round"), "{}", stale.raw);
    assert_eq!(fault.rpc_count("tools/call"), backend_calls, "a superseded state reaches nothing");

    let confirmed = json!({"confirm": accepted("yes")});
    let last = retry(params.clone(), confirmed, &latest);
    let done = result_of(&alice.send(json!(4), "tools/call", last.clone()).await);
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["content"][0]["text"], "hi");
    assert_eq!(last_call(&fault)["requestState"], format!("{STATE_PREFIX}2"));
    assert_eq!(fault.executions("echo"), 1, "the tool ran its final round once");
    let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(claims.len(), 1, "one logical call, one claim: {claims:?}");
    assert_eq!(claims[0].state, ClaimState::Completed);
    assert_eq!((claims[0].principal.as_str(), claims[0].tool.as_str()), ("alice", "echo"));

    let backend_calls = fault.rpc_count("tools/call");
    let replayed = result_of(&alice.send(json!(5), "tools/call", last).await);
    assert_eq!(replayed["_meta"]["switchyard/replayed"], true, "{replayed}");
    assert_eq!(replayed["content"], done["content"]);
    assert_eq!(fault.rpc_count("tools/call"), backend_calls, "answered from the ledger");
    assert_eq!(fault.executions("echo"), 1);

    let metrics = scrape(&gateway.base).await;
    let counted = |outcome: &str| {
        sample(
            &metrics,
            &format!("switchyard_tool_calls_total{{backend=\"fault\",tool=\"fault__echo\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(counted("input_required"), Some(2.0), "each round that asked is counted as such:\n{metrics}");
    assert_eq!(counted("completed"), Some(1.0), "the call completed once:\n{metrics}");
    assert_eq!(counted("replayed"), Some(1.0), "{metrics}");
}

#[tokio::test]
async fn tampered_foreign_and_expired_states_are_refused_before_the_backend() {
    let (fault, gateway) = asking_backend().await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let bob = ModernAgent::as_principal(gateway.mcp(), BOB_KEY);
    let params = call("fault__echo", "hi");
    let first = result_of(&alice.send(json!(1), "tools/call", params.clone()).await);
    let state = first["requestState"].as_str().unwrap().to_owned();
    let answers = json!({"name": accepted("ada"), "color": accepted("blue")});
    let backend_calls = fault.rpc_count("tools/call");

    let mut tampered = state.clone().into_bytes();
    let middle = tampered.len() / 3;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let refused = alice.send(json!(2), "tools/call", retry(params.clone(), answers.clone(), &tampered)).await;
    assert_eq!(refusal(&refused).1, -32602);
    assert!(invalid_params(&refused).contains("nothing was sent to the backend"), "{}", refused.raw);

    let foreign = bob.send(json!(3), "tools/call", retry(params.clone(), answers.clone(), &state)).await;
    assert!(invalid_params(&foreign).contains("another principal"), "{}", foreign.raw);
    let other_tool = retry(call("fault__other", "hi"), answers.clone(), &state);
    let refused = alice.send(json!(4), "tools/call", other_tool).await;
    assert!(invalid_params(&refused).contains("another call (tools/call of `fault__echo`)"), "{}", refused.raw);
    let other_arguments = retry(call("fault__echo", "bye"), answers.clone(), &state);
    assert!(invalid_params(&alice.send(json!(5), "tools/call", other_arguments).await).contains("another call"));
    let as_prompt = retry(json!({"name": "fault__echo"}), answers.clone(), &state);
    assert_eq!(refusal(&alice.send(json!(6), "prompts/get", as_prompt).await).1, -32602);

    // A state the gateway sealed (with the key derived from its session secret) that has expired.
    let secret = std::fs::read(gateway.data_dir.join("session.key")).expect("the session secret");
    let secret: [u8; 32] = secret.try_into().expect("32 bytes");
    let sealer = StateSealer::new(&StateKey::derived_from(&secret));
    let mut expired = sealer.open(&state, SystemTime::now()).expect("sealed with the session secret's key");
    expired.expires_ms =
        u64::try_from((SystemTime::now() - Duration::from_secs(1)).duration_since(UNIX_EPOCH).unwrap().as_millis())
            .unwrap();
    let refused =
        alice.send(json!(7), "tools/call", retry(params.clone(), answers.clone(), &sealer.seal(&expired))).await;
    assert!(invalid_params(&refused).contains("expired"), "{}", refused.raw);
    let mut unknown_call = sealer.open(&state, SystemTime::now()).unwrap();
    unknown_call.claim = Some("idem:5:alice:never-made".into());
    let refused =
        alice.send(json!(10), "tools/call", retry(params.clone(), answers.clone(), &sealer.seal(&unknown_call))).await;
    assert!(invalid_params(&refused).contains("the ledger has no such call"), "{}", refused.raw);
    let elsewhere = ClaimKey::idempotency("alice", "held-elsewhere");
    let held = NewClaim {
        key: elsewhere.clone(),
        principal: "alice".into(),
        session: "s".into(),
        backend: "fault".into(),
        tool: "echo".into(),
        args_digest: "d".into(),
        owner: "another-instance".into(),
        lease: Duration::from_secs(60),
    };
    gateway.router.ledger().store.claim(held).await.unwrap();
    unknown_call.claim = Some(elsewhere.to_string());
    let refused =
        alice.send(json!(11), "tools/call", retry(params.clone(), answers.clone(), &sealer.seal(&unknown_call))).await;
    assert!(invalid_params(&refused).contains("another gateway instance holds it"), "{}", refused.raw);
    let not_a_string = alice.send(json!(8), "tools/call", retry(params.clone(), answers.clone(), "x")).await;
    assert_eq!(refusal(&not_a_string).1, -32602);
    assert_eq!(fault.rpc_count("tools/call"), backend_calls, "no refused retry reached the backend");
    assert_eq!(fault.executions("echo"), 0);

    // The state is still good for the call it belongs to.
    let second = result_of(&alice.send(json!(9), "tools/call", retry(params, answers, &state)).await);
    assert_eq!(second["inputRequests"], rounds()[1]);
}

#[tokio::test]
async fn the_idempotency_key_names_the_whole_call_and_one_retry_is_answered_at_a_time() {
    let other = Script { eras: Eras::Modern, input_rounds: vec![rounds()[1].clone()], ..Script::default() };
    let fault = FaultBackend::start(Script { call_delay: Some(Duration::from_millis(800)), ..other }).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let keyed = |key: &str| {
        let mut params = call("fault__echo", "pay");
        params["_meta"] = json!({"switchyard/idempotency-key": key});
        params
    };
    let first = result_of(&alice.send(json!(1), "tools/call", keyed("k-1")).await);
    let state = first["requestState"].as_str().unwrap().to_owned();
    let confirmed = json!({"confirm": accepted("yes")});

    let wrong_key = alice.send(json!(2), "tools/call", retry(keyed("k-2"), confirmed.clone(), &state)).await;
    assert!(invalid_params(&wrong_key).contains("idempotency key `k-2` is not the key"), "{}", wrong_key.raw);

    // Two retries of the same round at once: one is answered, the other refused without reaching the backend.
    let last = retry(keyed("k-1"), confirmed, &state);
    let (one, two) = tokio::join!(
        alice.send(json!(3), "tools/call", last.clone()),
        alice.send(json!(4), "tools/call", last.clone())
    );
    let (done, busy) =
        if one.body.as_ref().is_some_and(|body| body.get("result").is_some()) { (one, two) } else { (two, one) };
    assert_eq!(result_of(&done)["content"][0]["text"], "pay");
    assert!(invalid_params(&busy).contains("another retry of this call"), "{}", busy.raw);
    assert_eq!(fault.executions("echo"), 1);
    assert_eq!(fault.rpc_count("tools/call"), 2, "the first request and one retry");

    // The original request again, with the key: the same call, answered from the ledger.
    let again = result_of(&alice.send(json!(5), "tools/call", keyed("k-1")).await);
    assert_eq!(again["_meta"]["switchyard/replayed"], true, "{again}");
    let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].key.as_str(), "idem:5:alice:k-1");
    assert_eq!(claims[0].state, ClaimState::Completed);
}

/// The last request of `method` the backend received: its params.
fn last_of(fault: &FaultBackend, method: &str) -> Value {
    let mut sent = fault.requests().into_iter().filter(|r| r.rpc_method.as_deref() == Some(method));
    sent.next_back().and_then(|request| request.body).expect("a request reached the backend")["params"].clone()
}

#[tokio::test]
async fn prompts_and_resources_continue_with_their_own_states() {
    let script = Script {
        eras: Eras::Modern,
        input_rounds: vec![rounds()[1].clone()],
        prompts: vec![json!({"name": "greet", "arguments": [{"name": "who"}]})],
        capabilities: json!({"tools": {}, "prompts": {}, "resources": {}}),
        ..Script::default()
    };
    let fault = FaultBackend::start(script).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let confirmed = json!({"confirm": accepted("yes")});

    let prompt = json!({"name": "fault__greet", "arguments": {"who": "ada"}});
    let asked = result_of(&alice.send(json!(1), "prompts/get", prompt.clone()).await);
    assert_eq!(
        (asked["resultType"].clone(), asked["inputRequests"].clone()),
        (json!("input_required"), rounds()[1].clone())
    );
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert!(!state.contains(STATE_PREFIX), "{state}");
    let uri = "fault://docs/a";
    let read = json!({"uri": uri});
    let crossed = alice.send(json!(2), "resources/read", retry(read.clone(), confirmed.clone(), &state)).await;
    assert!(invalid_params(&crossed).contains("another call (prompts/get of `fault__greet`)"), "{}", crossed.raw);
    let got = result_of(&alice.send(json!(3), "prompts/get", retry(prompt, confirmed.clone(), &state)).await);
    assert!(got["messages"][0]["content"]["text"].as_str().unwrap().starts_with("prompt greet"), "{got}");
    assert_eq!(last_of(&fault, "prompts/get")["requestState"], format!("{STATE_PREFIX}1"));

    let asked = result_of(&alice.send(json!(4), "resources/read", read.clone()).await);
    assert!(asked.get("ttlMs").is_none() && asked.get("cacheScope").is_none(), "no cache hints: {asked}");
    let state = asked["requestState"].as_str().unwrap().to_owned();
    let other_uri = alice
        .send(json!(5), "resources/read", retry(json!({"uri": "fault://docs/b"}), confirmed.clone(), &state))
        .await;
    assert!(invalid_params(&other_uri).contains("another call"), "{}", other_uri.raw);
    let done = result_of(&alice.send(json!(6), "resources/read", retry(read, confirmed, &state)).await);
    assert_eq!(done["contents"][0]["uri"], uri, "{done}");
    assert_eq!(done["cacheScope"], "private", "the complete answer is cacheable again");
    assert_eq!(last_of(&fault, "resources/read")["requestState"], format!("{STATE_PREFIX}1"));
    let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
    assert!(claims.is_empty(), "prompts and resources are not claimed: {claims:?}");
}

#[tokio::test]
async fn a_retry_the_backend_refused_unprocessed_leaves_the_round_open() {
    let script = Script {
        eras: Eras::Modern,
        input_rounds: vec![rounds()[1].clone()],
        call_status: Some(429),
        ..Script::default()
    };
    let fault = FaultBackend::start(script).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let params = call("fault__echo", "hi");
    let asked = result_of(&alice.send(json!(1), "tools/call", params.clone()).await);
    let last = retry(params, json!({"confirm": accepted("yes")}), asked["requestState"].as_str().unwrap());
    for id in [2, 3] {
        let refused = result_of(&alice.send(json!(id), "tools/call", last.clone()).await);
        assert_eq!(refused["_meta"]["switchyard/outcome"], "not_delivered", "{refused}");
        let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].state, ClaimState::InFlight, "not released: the first round reached the backend");
    }
    assert_eq!(fault.rpc_count("tools/call"), 3, "the same state was accepted again after the refusal");
    assert_eq!(fault.executions("echo"), 0);
}
