//! Approvals through the running gateway: a call a policy's `approve` globs match waits for a person, runs once
//! when approved (within the agent's wait, or later and fetched by a retry with the key the gateway handed out),
//! and never when denied or expired; the caller never approves its own call.

mod console;

use serde_json::{Value, json};
use switchyard::auth::Principal;
use switchyard::ledger::{ApprovalState, ClaimKey, LedgerStore};
use switchyard::router::{Approvers, DecisionRefused, decide};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::at_most_once::ledger_section;
use crate::modern_front::ModernAgent;
use crate::real_clients::PythonAgent;
use crate::support::assert::eventually;
use crate::support::console::get_as;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, TestGateway, backend_toml};
use crate::support::hook::hook;
use crate::support::interop::python_interpreter;
use crate::support::postgres::PgSchema;

/// bob's calls of `fault__delete_*` need an approval; alice (group `ops`) approves.
pub fn approval_sections(approvals: &str) -> String {
    format!(
        "{}[[policies]]\nprincipals = [\"bob\"]\nallow = [\"*\"]\napprove = [\"fault__delete_*\"]\n\
         [[policies]]\nprincipals = [\"alice\"]\nallow = [\"*\"]\n\
         [approvals]\napprovers = [\"group:ops\"]\n{approvals}\n",
        api_keys()
    )
}

pub fn delete_repo() -> Value {
    json!({"name": "delete_repo", "inputSchema": {"type": "object"}})
}

pub async fn fault_with_delete() -> FaultBackend {
    FaultBackend::start(Script { tools: vec![Script::default().tools[0].clone(), delete_repo()], ..Script::default() })
        .await
}

pub fn alice() -> Principal {
    Principal { name: "alice".into(), groups: vec!["ops".into()] }
}

pub fn approvers() -> Approvers {
    Approvers::new(vec![switchyard::auth::Subject::Group("ops".into())])
}

/// A `tools/call` of `delete_repo` with `key` (if any) in `_meta`.
pub fn delete_call(key: Option<&str>) -> Value {
    let mut params = json!({"name": "fault__delete_repo", "arguments": {"repo": "r1"}});
    if let Some(key) = key {
        params["_meta"] = json!({"switchyard/idempotency-key": key});
    }
    params
}

/// A fault backend with `delete_repo` and a gateway in front of it with [`approval_sections`]`(approvals)`.
async fn started(approvals: &str) -> (FaultBackend, TestGateway) {
    let fault = fault_with_delete().await;
    let gateway =
        TestGateway::start_with("", &approval_sections(approvals), &backend_toml("fault", &fault.url(), "")).await;
    (fault, gateway)
}

/// Asserts that `reply` is the tool's own (successful) result.
fn assert_ran(reply: &Value) {
    assert!(reply["result"].is_object() && reply["result"]["isError"] != json!(true), "{reply}");
}

fn outcome(reply: &Value) -> &str {
    reply["result"]["_meta"]["switchyard/outcome"].as_str().unwrap_or_default()
}

/// Waits until bob's call under `key` awaits approval in `store`.
pub async fn awaiting(store: &LedgerStore, key: &ClaimKey) {
    eventually("the call awaits approval", || async {
        store.approval(key).await.ok().flatten().is_some_and(|row| row.state == ApprovalState::AwaitingApproval)
    })
    .await;
}

pub fn bob_key(key: &str) -> ClaimKey {
    ClaimKey::idempotency("bob", key)
}

#[tokio::test]
async fn a_call_approved_within_the_wait_runs_once_and_answers() {
    let (fault, gateway) = started("wait = \"60s\"").await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let held = tokio::spawn(async move { bob.request("tools/call", delete_call(Some("del-1"))).await });
    let store = gateway.router.ledger().store.clone();
    awaiting(&store, &bob_key("del-1")).await;
    assert_eq!(fault.executions("delete_repo"), 0, "nothing runs before the approval");
    let decided = decide(&store, None, &approvers(), &alice(), &bob_key("del-1"), true, Some("ok".into())).await;
    assert_eq!(decided.expect("alice approves").decided_by.as_deref(), Some("alice"));
    let reply = held.await.expect("the held call");
    assert_ran(&reply);
    assert_eq!(fault.executions("delete_repo"), 1);
    let mut retry = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let again = retry.request("tools/call", delete_call(Some("del-1"))).await;
    assert_eq!(again["result"]["_meta"]["switchyard/replayed"], true, "{again}");
    assert_eq!(fault.executions("delete_repo"), 1, "a retry is answered, not run");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    assert_eq!(store.purge_approvals(later).await.expect("purge"), 1);
    let after_purge = retry.request("tools/call", delete_call(Some("del-1"))).await;
    assert_eq!(after_purge["result"]["_meta"]["switchyard/replayed"], true, "the claim answers: {after_purge}");
    let mut alice_agent = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    assert!(alice_agent.request("tools/call", delete_call(None)).await["result"].is_object());
    assert_eq!(fault.executions("delete_repo"), 2, "alice's policy needs no approval");
}

#[tokio::test]
async fn a_pending_call_gets_a_key_and_its_retry_runs_once_approved() {
    let (fault, gateway) = started("wait = \"1s\"").await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(None)).await;
    assert_eq!(outcome(&pending), "awaiting_approval", "{pending}");
    assert_eq!(pending["result"]["isError"], true);
    let text = pending["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("needs an operator's approval") && text.contains("Retry the same call"), "{text}");
    let key = pending["result"]["_meta"]["switchyard/idempotency-key"].as_str().expect("a minted key").to_owned();
    assert!(key.starts_with("approval-"), "{key}");
    let store = gateway.router.ledger().store.clone();
    let again = bob.request("tools/call", delete_call(Some(&key))).await;
    assert_eq!(outcome(&again), "awaiting_approval", "a retry waits again: {again}");
    decide(&store, None, &approvers(), &alice(), &bob_key(&key), true, None).await.expect("approve");
    for _ in 0..3 {
        let answered = bob.request("tools/call", delete_call(Some(&key))).await;
        assert_ran(&answered);
    }
    assert_eq!(fault.executions("delete_repo"), 1);
    let other = bob
        .request(
            "tools/call",
            json!({"name": "fault__delete_repo", "arguments": {"repo": "r2"},
        "_meta": {"switchyard/idempotency-key": key}}),
        )
        .await;
    assert_eq!(other["error"]["code"], -32602, "a key names one call: {other}");
}

#[tokio::test]
async fn denied_and_expired_calls_never_run() {
    let (fault, gateway) = started("wait = \"1s\"\ntimeout = \"1s\"").await;
    let store = gateway.router.ledger().store.clone();
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;

    let first = bob.request("tools/call", delete_call(Some("deny-me"))).await;
    let early =
        decide(&store, None, &approvers(), &alice(), &bob_key("deny-me"), false, Some("not today".into())).await;
    match early {
        // Denied before the second expired: the retry reads the denial and its note.
        Ok(_) => {
            let denied = bob.request("tools/call", delete_call(Some("deny-me"))).await;
            assert_eq!(outcome(&denied), "denied", "{denied}");
            let text = denied["result"]["content"][0]["text"].as_str().unwrap_or_default();
            assert!(text.contains("denied by `alice`") && text.contains("not today"), "{text}");
        }
        Err(DecisionRefused::Ledger(switchyard::ledger::LedgerError::AlreadyDecided {
            state: ApprovalState::Expired,
            ..
        })) => {}
        Err(other) => panic!("{other}; first answer {first}"),
    }

    let _ = bob.request("tools/call", delete_call(Some("expire-me"))).await;
    eventually("the request expires and the retry says so", || {
        let mut retry = bob.same_session();
        async move { outcome(&retry.request("tools/call", delete_call(Some("expire-me"))).await) == "denied" }
    })
    .await;
    let late = decide(&store, None, &approvers(), &alice(), &bob_key("expire-me"), true, None).await;
    assert!(matches!(late, Err(DecisionRefused::Ledger(_))), "an expired request cannot be approved");
    assert_eq!(fault.executions("delete_repo"), 0);
}

#[tokio::test]
async fn the_caller_never_approves_its_own_call_nor_does_a_non_approver() {
    let (fault, gateway) = started("wait = \"1s\"").await;
    let store = gateway.router.ledger().store.clone();
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(Some("mine"))).await;
    assert_eq!(outcome(&pending), "awaiting_approval");
    let bob_in_ops = Principal { name: "bob".into(), groups: vec!["ops".into()] };
    let own = decide(&store, None, &approvers(), &bob_in_ops, &bob_key("mine"), true, None).await;
    let refused = own.expect_err("bob may not approve his own call").to_string();
    assert!(refused.contains("`bob` made this call") && refused.contains("another approver"), "{refused}");
    let stranger = Principal { name: "mallory".into(), groups: Vec::new() };
    let refused = decide(&store, None, &approvers(), &stranger, &bob_key("mine"), true, None).await;
    assert!(matches!(refused, Err(DecisionRefused::NotAnApprover(_))));
    let pending = bob.request("tools/call", delete_call(Some("mine"))).await;
    assert_eq!(outcome(&pending), "awaiting_approval", "still undecided");
    assert_eq!(fault.executions("delete_repo"), 0);
}

/// The whole operator's path on a durable ledger: a call awaits approval, its gateway is SIGKILLed, a new one
/// starts on the same data directory; the caller cannot approve from the command line, an approver can, `calls
/// show` tells who, when and why (with the arguments), and the agent's retry runs the call exactly once.
#[tokio::test]
async fn a_call_awaiting_approval_survives_a_sigkill_and_is_approved_from_the_command_line() {
    let fault = fault_with_delete().await;
    let dir = crate::cli::scratch_dir("approvals-sigkill");
    let config = dir.join("switchyard.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = {:?}\n{}{}",
        dir.join("data").display().to_string(),
        approval_sections("wait = \"1s\""),
        backend_toml("fault", &fault.url(), "")
    );
    std::fs::write(&config, text).expect("write the configuration");
    let first = ChildGateway::spawn(&config, &dir.join("first.log")).await;
    let mut bob = Agent::connected_as(first.mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(Some("kill-1"))).await;
    assert_eq!(outcome(&pending), "awaiting_approval", "{pending}");
    first.kill().await;

    let second = ChildGateway::spawn(&config, &dir.join("second.log")).await;
    let key = bob_key("kill-1").to_string();
    let cli = |args: &[&str]| {
        let mut command = crate::cli::switchyard();
        command.arg("--config").arg(&config).arg("calls").args(args);
        command
    };
    let waiting = crate::cli::stdout(&crate::cli::run(&mut cli(&["--state", "awaiting_approval"])).await);
    let line = waiting.lines().find(|line| line.ends_with(&key)).unwrap_or_else(|| panic!("{key} in {waiting}"));
    assert!(line.contains("bob") && line.contains("delete_repo"), "{line}");
    let own = crate::cli::run(&mut cli(&["approve", &key, "--as", "bob"])).await;
    assert!(!own.status.success(), "bob approved his own call");
    let said = String::from_utf8_lossy(&own.stderr).into_owned();
    assert!(said.contains("`bob` made this call"), "{said}");
    let nobody = crate::cli::run(&mut cli(&["approve", &key])).await;
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("--as NAME"), "approvers are configured");
    let approved = crate::cli::run(&mut cli(&["approve", &key, "--as", "alice", "--note", "ticket 7"])).await;
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let shown = crate::cli::stdout(&crate::cli::run(&mut cli(&["show", &key])).await);
    for expected in ["approval: approved", "decided by: alice", "note: ticket 7", "\"repo\":\"r1\""] {
        assert!(shown.contains(expected), "{expected} in {shown}");
    }
    let waiting = crate::cli::stdout(&crate::cli::run(&mut cli(&["--state", "awaiting_approval"])).await);
    assert!(!waiting.contains(&key), "a decided request is no longer listed: {waiting}");
    let again = crate::cli::run(&mut cli(&["deny", &key, "--as", "alice"])).await;
    assert!(String::from_utf8_lossy(&again.stderr).contains("approved already"), "decided once");

    let mut retry = Agent::connected_as(second.mcp(), BOB_KEY).await;
    for _ in 0..2 {
        let answered = retry.request("tools/call", delete_call(Some("kill-1"))).await;
        assert_ran(&answered);
    }
    assert_eq!(fault.executions("delete_repo"), 1);
    second.terminate().await;
}

/// Two replicas on one PostgreSQL ledger: a call approved on one is retried 20 times at once across both, and
/// runs exactly once; every retry gets its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_retries_across_two_replicas_run_an_approved_call_once() {
    let Some(schema) = PgSchema::create().await else { return };
    let fault = fault_with_delete().await;
    let sections = format!("{}{}", ledger_section(&schema.url()), approval_sections("wait = \"1s\""));
    let backends = backend_toml("fault", &fault.url(), "");
    let replicas = [
        TestGateway::start_with("", &sections, &backends).await,
        TestGateway::start_with("", &sections, &backends).await,
    ];
    let mut bob = Agent::connected_as(replicas[0].mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(Some("pg-1"))).await;
    assert_eq!(outcome(&pending), "awaiting_approval", "{pending}");
    let other_store = &replicas[1].router.ledger().store;
    decide(other_store, None, &approvers(), &alice(), &bob_key("pg-1"), true, None).await.expect("approve on B");

    let mut agents = Vec::new();
    for n in 0..20 {
        agents.push(Agent::connected_as(replicas[n % 2].mcp(), BOB_KEY).await);
    }
    let retries: Vec<_> = agents
        .into_iter()
        .map(|mut agent| tokio::spawn(async move { agent.request("tools/call", delete_call(Some("pg-1"))).await }))
        .collect();
    for retry in retries {
        let answered = retry.await.expect("a retry");
        assert_ran(&answered);
    }
    assert_eq!(fault.executions("delete_repo"), 1);
}

/// A 2026-07-28 agent (no session) gets the same behaviour: the pending answer is a complete result carrying the
/// gateway's key, and the retry carrying that key runs the approved call once.
#[tokio::test]
async fn a_sessionless_agent_retries_with_the_minted_key() {
    let (fault, gateway) = started("wait = \"1s\"").await;
    let bob = ModernAgent::as_principal(gateway.mcp(), BOB_KEY);
    let pending = bob.send_with(json!(1), "tools/call", delete_call(None), |_| {}).await.body.expect("an answer");
    assert_eq!(outcome(&pending), "awaiting_approval", "{pending}");
    let key = pending["result"]["_meta"]["switchyard/idempotency-key"].as_str().expect("a minted key").to_owned();
    let store = gateway.router.ledger().store.clone();
    decide(&store, None, &approvers(), &alice(), &bob_key(&key), true, None).await.expect("approve");
    for id in [1, 2] {
        let answered = bob.send_with(json!(id), "tools/call", delete_call(Some(&key)), |_| {}).await.body;
        let answered = answered.expect("an answer");
        assert_ran(&answered);
    }
    assert_eq!(fault.executions("delete_repo"), 1);
}

/// Each new request is POSTed to `notify_url` (tool, backend, principal, arguments digest, the commands that
/// decide it; never the arguments); a failing hook is retried and counted, and never holds the call up.
#[tokio::test]
async fn new_requests_are_announced_to_the_notify_url_and_failures_are_retried_and_counted() {
    let (hook_url, mut posted) = hook(1).await;
    let fault = fault_with_delete().await;
    let sections = approval_sections(&format!("wait = \"1s\"\nnotify_url = {hook_url:?}"));
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(Some("hooked"))).await;
    assert_eq!(outcome(&pending), "awaiting_approval", "{pending}");
    let announced: Value = serde_json::from_str(&posted.recv().await.expect("an announcement")).expect("JSON");
    assert_eq!(announced["key"], bob_key("hooked").as_str());
    assert_eq!(
        (announced["tool"].as_str(), announced["backend"].as_str()),
        (Some("fault__delete_repo"), Some("fault"))
    );
    assert_eq!(announced["principal"], "bob");
    assert_eq!(announced["arguments_sha256"].as_str().map(str::len), Some(64));
    assert!(announced["approve_command"].as_str().unwrap_or_default().starts_with("switchyard calls approve"));
    assert!(!announced.to_string().contains("r1"), "the arguments are not sent: {announced}");
    let metrics = gateway.router.ledger().metrics.encode();
    assert!(metrics.contains("switchyard_approval_notifications_failed_total 1"), "{metrics}");
    assert!(metrics.contains("switchyard_approvals_total{decision=\"requested\"} 1"), "{metrics}");
}

/// A real agent, the Python SDK's client, sending its calls with an `Idempotency-Key` header: its first call is
/// answered as awaiting approval (an ordinary tool result with `isError`), and its retry runs the approved call.
#[tokio::test]
async fn a_python_sdk_agent_waits_for_approval_and_its_retry_runs_once() {
    let Some(python) = python_interpreter() else { return };
    let (fault, gateway) = started("wait = \"1s\"").await;
    let headers = [format!("Authorization=Bearer {BOB_KEY}"), "Idempotency-Key=py-1".to_owned()];
    let options = ["--header", &headers[0], "--header", &headers[1]];
    let mut agent = PythonAgent::connect_with(&python, &gateway.mcp(), &options).await;
    let call = format!("call fault__delete_repo {}", json!({"repo": "r1"}));
    let pending = agent.command(&call).await;
    assert_eq!(pending["isError"], true, "{pending}");
    assert!(pending["texts"][0].as_str().unwrap_or_default().contains("awaiting approval"), "{pending}");
    let store = gateway.router.ledger().store.clone();
    decide(&store, None, &approvers(), &alice(), &bob_key("py-1"), true, None).await.expect("approve");
    let ran = agent.command(&call).await;
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(fault.executions("delete_repo"), 1);
    agent.quit().await;
}

/// An agent that sent a progress token hears that its call waits (on the request's event stream) before the
/// decision, then gets the result on the same stream.
#[tokio::test]
async fn a_held_call_streams_progress_until_it_is_approved() {
    let (fault, gateway) = started("wait = \"60s\"").await;
    let bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let mut params = delete_call(Some("progress-1"));
    params["_meta"]["progressToken"] = json!("p-1");
    let message = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params});
    let mut response = bob.post_streaming(&message).await;
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = response.chunk().await.expect("the stream").expect("progress before the end");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"progressToken\":\"p-1\"") && seen.contains("waiting for an operator"), "{seen}");
    let store = gateway.router.ledger().store.clone();
    decide(&store, None, &approvers(), &alice(), &bob_key("progress-1"), true, None).await.expect("approve");
    while let Some(chunk) = response.chunk().await.expect("the stream") {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"id\":9") && seen.contains("\"result\"") && !seen.contains("\"isError\":true"), "{seen}");
    assert_eq!(fault.executions("delete_repo"), 1);
}

/// The console lists the calls awaiting approval with the commands that decide them, and no longer once decided;
/// an administrator who is not an approver (bob) reads the digest, never the arguments, and gets no form token.
#[tokio::test]
async fn the_console_lists_the_calls_awaiting_approval() {
    let fault = fault_with_delete().await;
    let sections = format!("[auth]\nadmin_principals = [\"bob\"]\n{}", approval_sections("wait = \"1s\""));
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    assert_eq!(outcome(&bob.request("tools/call", delete_call(Some("listed"))).await), "awaiting_approval");
    let listed = console_approvals(&gateway.base).await;
    let approvals = listed["approvals"].as_array().expect("a list");
    assert_eq!(approvals.len(), 1, "{listed}");
    let pending = &approvals[0];
    assert_eq!((pending["key"].as_str(), pending["principal"].as_str()), (Some("idem:3:bob:listed"), Some("bob")));
    assert_eq!((pending["backend"].as_str(), pending["tool"].as_str()), (Some("fault"), Some("delete_repo")));
    assert!(pending["approve_command"].as_str().unwrap_or_default().starts_with("switchyard calls approve"));
    assert!(!listed.to_string().contains("r1"), "no arguments: {listed}");
    assert!(listed.get("form_token").is_none(), "bob does not decide: {listed}");
    let store = gateway.router.ledger().store.clone();
    decide(&store, None, &approvers(), &alice(), &bob_key("listed"), false, None).await.expect("deny");
    let after = console_approvals(&gateway.base).await;
    assert_eq!(after["approvals"], json!([]), "{after}");
}

/// `/admin/api/approvals` as bob (an administrator in that test) reads it.
async fn console_approvals(base: &str) -> Value {
    let answer = get_as(base, "/admin/api/approvals", None, Some(BOB_KEY)).await;
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.body);
    answer.body
}
