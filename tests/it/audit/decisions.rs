//! What the audit trail learns from the ledger and from the gateway's own background work: approval decisions
//! and resolutions taken with the command line (which writes only the ledger) become `approval_decision` and
//! `resolution` events of the running gateway, once, and are counted; on a fleet one replica announces each; a
//! call run as a task is one `tool_call` event when it settles. Every file still verifies.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{events, of_kind, verify};
use crate::agent_auth::{ALICE_KEY, BOB_KEY};
use crate::approvals::{alice, approval_sections, approvers, bob_key, delete_call, fault_with_delete};
use crate::at_most_once::ledger_section;
use crate::cli::{run, switchyard};
use crate::support::assert::eventually;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway, backend_toml};
use crate::support::postgres::PgSchema;
use crate::telemetry::scrape;

/// Long enough for a gateway to read the ledger back twice more (it polls every 2 s).
const TWO_POLLS: Duration = Duration::from_secs(5);

fn audit_section(file: &Path, arguments: &str) -> String {
    format!("[audit]\nfile = {:?}\narguments = {arguments:?}\n", file.display().to_string())
}

async fn assert_verifies(file: &Path, events: usize) {
    let (intact, said) = verify(&[file]).await;
    assert!(intact && said.contains(&format!("intact: {events} events")), "{said}");
}

fn field<'a>(event: &'a Value, name: &str) -> Option<&'a str> {
    event[name].as_str()
}

#[tokio::test]
async fn decisions_taken_with_the_command_line_are_audited_once_and_counted() {
    let fault = fault_with_delete().await;
    let dir = ScratchDir::new("audit-cli-decisions");
    let (config, audit) = (dir.path().join("switchyard.toml"), dir.path().join("audit.jsonl"));
    let text = format!(
        "[server]\ndata_dir = {:?}\n{}{}{}",
        dir.path().join("data").display().to_string(),
        approval_sections("wait = \"1s\""),
        audit_section(&audit, "digest"),
        backend_toml("fault", &fault.url(), "")
    );
    std::fs::write(&config, text).expect("write the configuration");
    let gateway = ChildGateway::spawn(&config, &dir.path().join("gateway.log")).await;
    let calls = |args: &[&str]| {
        let mut command = switchyard();
        command.env("USER", "ann").arg("--config").arg(&config).arg("calls").args(args);
        command
    };

    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(Some("audit-1"))).await;
    assert_eq!(pending["result"]["_meta"]["switchyard/outcome"], "awaiting_approval", "{pending}");
    let key = bob_key("audit-1").to_string();
    let approved = run(&mut calls(&["approve", &key, "--as", "alice", "--note", "ticket 9"])).await;
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    eventually("the gateway audits the decision", || async {
        !of_kind(&events(&audit), "approval_decision").is_empty()
    })
    .await;

    fault.update(|script| script.drop_after_call = true);
    let mut alice_agent = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let meta = json!({"switchyard/idempotency-key": "lost-1"});
    let lost = alice_agent
        .request("tools/call", json!({"name": "fault__echo", "arguments": {"text": "x"}, "_meta": meta}))
        .await;
    assert_eq!(lost["result"]["_meta"]["switchyard/outcome"], "unknown", "{lost}");
    let lost_key = lost["result"]["_meta"]["switchyard/claim"].as_str().expect("the claim key").to_owned();
    let resolved = run(&mut calls(&["resolve", &lost_key, "--failed", "--note", "no run in its log"])).await;
    assert!(resolved.status.success(), "{}", String::from_utf8_lossy(&resolved.stderr));
    eventually("the gateway audits the resolution", || async { !of_kind(&events(&audit), "resolution").is_empty() })
        .await;
    tokio::time::sleep(TWO_POLLS).await;

    let all = events(&audit);
    let decisions = of_kind(&all, "approval_decision");
    assert_eq!(decisions.len(), 1, "one event per decision, whatever the polls: {all:#?}");
    let decision = decisions[0];
    assert_eq!((field(decision, "key"), field(decision, "principal")), (Some(key.as_str()), Some("bob")));
    assert_eq!((field(decision, "backend"), field(decision, "decision")), (Some("fault"), Some("approved")));
    assert_eq!((field(decision, "by"), field(decision, "note")), (Some("alice"), Some("ticket 9")));
    assert!(field(decision, "tool").is_some_and(|tool| tool.ends_with("delete_repo")), "{decision}");
    assert!(field(decision, "decided_at").is_some_and(|at| at.ends_with('Z')), "{decision}");
    let resolutions = of_kind(&all, "resolution");
    assert_eq!(resolutions.len(), 1, "{all:#?}");
    let resolution = resolutions[0];
    assert_eq!((field(resolution, "key"), field(resolution, "principal")), (Some(lost_key.as_str()), Some("alice")));
    assert_eq!((field(resolution, "resolution"), field(resolution, "by")), (Some("resolved_failed"), Some("ann")));
    assert_eq!(field(resolution, "note"), Some("no run in its log"));
    assert!(field(resolution, "resolved_at").is_some_and(|at| at.ends_with('Z')), "{resolution}");
    assert!(field(resolution, "error").is_some(), "why the outcome was unknown: {resolution}");
    let metrics = scrape(&gateway.base).await;
    let counted = "switchyard_approvals_total{decision=\"approved\"} 1";
    assert!(metrics.lines().any(|line| line == counted), "{counted} in {metrics}");
    assert_verifies(&audit, all.len()).await;
    gateway.kill().await;
}

/// Two replicas on one PostgreSQL ledger, each with its own audit file: a decision taken outside both (as the
/// command line takes it) is announced by exactly one of them, and counted once across the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_of_a_fleet_announces_each_decision() {
    let Some(schema) = PgSchema::create().await else { return };
    let fault = fault_with_delete().await;
    let dir = ScratchDir::new("audit-fleet");
    let files = [dir.path().join("a.jsonl"), dir.path().join("b.jsonl")];
    let backends = backend_toml("fault", &fault.url(), "");
    let mut replicas = Vec::new();
    for file in &files {
        let sections = format!(
            "{}{}{}",
            ledger_section(&schema.url()),
            approval_sections("wait = \"1s\""),
            audit_section(file, "digest")
        );
        replicas.push(TestGateway::start_with("", &sections, &backends).await);
    }
    let mut bob = Agent::connected_as(replicas[0].mcp(), BOB_KEY).await;
    let pending = bob.request("tools/call", delete_call(Some("fleet-1"))).await;
    assert_eq!(pending["result"]["_meta"]["switchyard/outcome"], "awaiting_approval", "{pending}");
    let store = &replicas[1].router.ledger().store;
    let note = Some("not today".to_owned());
    switchyard::router::decide(store, None, &approvers(), &alice(), &bob_key("fleet-1"), false, note)
        .await
        .expect("deny, as the command line does");

    let announced = || files.iter().map(|file| of_kind(&events(file), "approval_decision").len()).sum::<usize>();
    eventually("a replica announces the decision", || async { announced() > 0 }).await;
    tokio::time::sleep(TWO_POLLS).await;
    assert_eq!(announced(), 1, "one replica announces it");
    let counted = "switchyard_approvals_total{decision=\"denied\"} 1";
    let mut counts = 0;
    for replica in &replicas {
        counts += scrape(&replica.base).await.lines().filter(|line| *line == counted).count();
    }
    assert_eq!(counts, 1, "counted once across the fleet");
    for file in files.iter().filter(|file| !events(file).is_empty()) {
        assert_verifies(file, events(file).len()).await;
    }
}

#[tokio::test]
async fn a_call_run_as_a_task_is_audited_once_when_it_settles() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(1)), ..Script::default() }).await;
    let dir = ScratchDir::new("audit-task");
    let audit = dir.path().join("audit.jsonl");
    let backends = backend_toml("fault", &backend.url(), "");
    let gateway = TestGateway::start_with("", &audit_section(&audit, "full"), &backends).await;
    gateway.wait_for_tool("fault__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let params = json!({"name": "fault__echo", "arguments": {"text": "later"}, "task": {"ttl": 60_000}});
    let created = agent.request("tools/call", params).await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert!(of_kind(&events(&audit), "tool_call").is_empty(), "no event before the call settles");

    let result = agent.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result["result"]["content"][0]["text"], "later", "{result}");
    eventually("the task's call is audited", || async { !of_kind(&events(&audit), "tool_call").is_empty() }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let all = events(&audit);
    let calls = of_kind(&all, "tool_call");
    assert_eq!(calls.len(), 1, "{all:#?}");
    let call = calls[0];
    assert_eq!((field(call, "tool"), field(call, "backend")), (Some("fault__echo"), Some("fault")));
    assert_eq!((field(call, "outcome"), field(call, "principal")), (Some("completed"), Some("anonymous")));
    assert_eq!(call["arguments"], json!({"text": "later"}));
    assert!(field(call, "session").is_some_and(|session| !session.is_empty()), "{call}");
    assert!(call["duration_ms"].as_f64().is_some_and(|ms| ms >= 1000.0), "the call's own duration: {call}");
    assert_verifies(&audit, all.len()).await;
}
