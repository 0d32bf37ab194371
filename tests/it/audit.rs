//! The audit trail through the running gateway: a scripted session (tool calls, a policy denial, a limit
//! refusal, an authentication failure, a reload) lands in the audit file as chained events that `switchyard audit
//! verify` accepts, and that it refuses at the exact line after one byte is changed or one line removed; the
//! three argument modes; rotation keeps the chain across files; an OTLP logs receiver gets the same lines.
//! Operators' decisions taken outside the gateway and tasks' calls: [`decisions`].

mod decisions;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::auth::{api_key_digest, hex};
use switchyard::telemetry::audit::chain;

use crate::support::assert::eventually;
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway, backend_toml};
use crate::support::otlp_collector::Collector;

const KEY: &str = "sy_audit-alice";

async fn demo_backend() -> (String, tokio::task::JoinHandle<()>) {
    let (address, task) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("demo");
    (backend_toml("demo", &format!("http://{address}/mcp"), ""), task)
}

/// The audit file's events, parsed.
fn events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).expect("an event is JSON")).collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|event| event["event"] == kind).collect()
}

async fn switchyard(args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("SWITCHYARD_") {
            command.env_remove(name);
        }
    }
    command.output().await.expect("run switchyard")
}

async fn verify(files: &[&Path]) -> (bool, String) {
    let mut args = vec!["audit", "verify"];
    let names: Vec<String> = files.iter().map(|file| file.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let output = switchyard(&args).await;
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

fn session_config(dir: &Path, audit: &Path, backend: &str, extra_limit: &str) -> String {
    format!(
        "[server]\ndata_dir = {data:?}\n[[auth.api_keys]]\nprincipal = \"alice\"\nsha256 = \"{digest}\"\n\
         [[policies]]\nprincipals = [\"alice\"]\nallow = [\"demo__echo\", \"demo__add\"]\n\
         [[limits]]\nname = \"adds\"\nprincipals = [\"*\"]\ntools = [\"demo__add\"]\nrate = \"1/m\"\nburst = 1\n\
         {extra_limit}\n[audit]\nfile = {audit:?}\narguments = \"redacted\"\n{backend}",
        data = dir.join("data").display().to_string(),
        digest = hex(&api_key_digest(KEY)),
        audit = audit.display().to_string(),
    )
}

#[tokio::test]
async fn a_scripted_session_is_audited_and_its_file_verifies() {
    let dir = ScratchDir::new("audit-session");
    let (backend, _demo) = demo_backend().await;
    let (config, audit) = (dir.path().join("switchyard.toml"), dir.path().join("audit.jsonl"));
    std::fs::write(&config, session_config(dir.path(), &audit, &backend, "")).unwrap();
    let gateway = ChildGateway::spawn(&config, &dir.path().join("gateway.log")).await;

    let mut agent = Agent::connected_as(gateway.mcp(), KEY).await;
    agent.call_tool("demo__echo", json!({"text": "hi", "password": "hunter2"})).await;
    agent.call_tool("demo__add", json!({"a": 1, "b": 2})).await;
    agent.call_tool("demo__add", json!({"a": 3, "b": 4})).await;
    agent.call_tool("demo__counter", json!({})).await;
    let stranger =
        Agent::with_token(gateway.mcp(), "sy_wrong").send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    assert_eq!(stranger.status, StatusCode::UNAUTHORIZED);
    std::fs::write(&config, session_config(dir.path(), &audit, &backend, "# changed\n")).unwrap();
    let reloaded = switchyard(&["reload", "--config", &config.display().to_string()]).await;
    assert!(reloaded.status.success(), "{}", String::from_utf8_lossy(&reloaded.stderr));

    eventually("every act is in the audit file", || async { !of_kind(&events(&audit), "reload").is_empty() }).await;
    let all = events(&audit);
    let calls = of_kind(&all, "tool_call");
    assert_eq!(calls.len(), 2, "{all:#?}");
    let echo = calls[0];
    assert_eq!((echo["principal"].as_str(), echo["backend"].as_str()), (Some("alice"), Some("demo")));
    assert_eq!(echo["tool"], "demo__echo");
    assert!(echo["session"].as_str().is_some_and(|session| !session.is_empty()), "{echo}");
    assert_eq!(echo["arguments"], json!({"text": "hi", "password": switchyard::telemetry::audit::REDACTED}));
    assert_eq!((calls[1]["tool"].as_str(), calls[1]["outcome"].as_str()), (Some("demo__add"), Some("completed")));
    assert_eq!(calls[1]["arguments"], json!({"a": 1, "b": 2}));
    assert!(echo["duration_ms"].as_f64().is_some(), "{echo}");
    let limited = of_kind(&all, "limit_refusal");
    assert_eq!((limited.len(), limited[0]["limit"].as_str()), (1, Some("adds")), "{all:#?}");
    let denied = of_kind(&all, "policy_denial");
    assert_eq!((denied.len(), denied[0]["tool"].as_str()), (1, Some("demo__counter")), "{all:#?}");
    let refused = of_kind(&all, "auth_failure");
    assert_eq!(refused.len(), 1, "{all:#?}");
    assert_eq!(of_kind(&all, "reload")[0]["outcome"], "applied");
    let seqs: Vec<u64> = all.iter().map(|event| event["seq"].as_u64().expect("seq")).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all[0]["prev"], chain::GENESIS);

    let (intact, said) = verify(&[&audit]).await;
    assert!(intact && said.contains(&format!("intact: {} events", all.len())), "{said}");
    check_tampering(dir.path(), &audit).await;
}

/// One byte changed in line 2 breaks the link of line 3; a removed line 3 shows as missing events.
async fn check_tampering(dir: &Path, audit: &Path) {
    let text = std::fs::read_to_string(audit).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let changed = dir.join("changed.jsonl");
    let mut altered = lines.clone();
    altered[1] = altered[1].replacen("\"alice\"", "\"alicf\"", 1);
    assert_ne!(altered[1], lines[1], "line 2 names alice");
    std::fs::write(&changed, altered.join("\n") + "\n").unwrap();
    let (intact, said) = verify(&[&changed]).await;
    assert!(!intact, "{said}");
    assert!(said.contains("line 3: its prev is not the SHA-256 of") && said.contains("line 2"), "{said}");

    let removed = dir.join("removed.jsonl");
    lines.remove(2);
    std::fs::write(&removed, lines.join("\n") + "\n").unwrap();
    let (intact, said) = verify(&[&removed]).await;
    assert!(!intact, "{said}");
    assert!(said.contains("line 3: events are missing before this line (seq 4 follows seq 2)"), "{said}");
}

#[tokio::test]
async fn rotation_keeps_the_chain_and_full_arguments_are_kept_whole() {
    let dir = ScratchDir::new("audit-rotation");
    let audit = dir.path().join("audit.jsonl");
    let (backend, _demo) = demo_backend().await;
    let sections = format!(
        "[audit]\nfile = {:?}\nmax_size = \"4KiB\"\nkeep = 2\narguments = \"full\"\n",
        audit.display().to_string()
    );
    let gateway = TestGateway::start_with("", &sections, &backend).await;
    gateway.wait_for_tool("demo__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let text = "x".repeat(900);
    for _ in 0..12 {
        agent.call_tool("demo__echo", json!({"text": text})).await;
    }
    let files: Vec<PathBuf> = vec![rotated(&audit, 2), rotated(&audit, 1), audit.clone()];
    eventually("twelve calls are written", || async {
        events(&audit).last().is_some_and(|last| last["seq"].as_u64() == Some(12))
    })
    .await;
    assert!(!rotated(&audit, 3).exists(), "only `keep` rotated files are kept");
    for file in &files {
        let size = std::fs::metadata(file).expect("a rotated file").len();
        assert!(size <= 4096, "{} is {size} bytes", file.display());
    }
    let texts: Vec<(String, String)> =
        files.iter().map(|file| (file.display().to_string(), std::fs::read_to_string(file).unwrap())).collect();
    let verified = chain::verify(texts.iter().map(|(name, text)| (name.as_str(), text.as_str()))).expect("intact");
    assert_eq!(verified.last_seq, 12);
    assert_ne!(verified.first_prev.as_deref(), Some(chain::GENESIS), "the oldest files were rotated away");
    let (intact, said) = verify(&[&files[1], &files[2]]).await;
    assert!(intact, "a rotated file chains to the next one: {said}");
    assert_eq!(events(&audit).last().unwrap()["arguments"], json!({"text": text}));
}

fn rotated(path: &Path, index: usize) -> PathBuf {
    PathBuf::from(format!("{}.{index}", path.display()))
}

#[tokio::test]
async fn an_otlp_logs_receiver_gets_the_events_with_digested_arguments() {
    let collector = Collector::start().await;
    let (backend, _demo) = demo_backend().await;
    let sections = format!("[telemetry]\notlp_endpoint = {:?}\n[audit]\notlp = true\n", collector.base);
    let gateway = TestGateway::start_with("", &sections, &backend).await;
    gateway.wait_for_tool("demo__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    agent.call_tool("demo__echo", json!({"text": "to the SIEM"})).await;
    let records = || {
        collector
            .exports()
            .into_iter()
            .filter(|export| export.path == "/v1/logs")
            .flat_map(|export| {
                let scopes = export.body["resourceLogs"][0]["scopeLogs"].as_array().cloned().unwrap_or_default();
                scopes.into_iter().flat_map(|scope| scope["logRecords"].as_array().cloned().unwrap_or_default())
            })
            .collect::<Vec<Value>>()
    };
    eventually("the collector gets the tool call", || async { !records().is_empty() }).await;
    let record = &records()[0];
    assert_eq!(record["eventName"], "switchyard.audit.tool_call");
    let line = record["body"]["stringValue"].as_str().expect("the line");
    let event: Value = serde_json::from_str(line).expect("the body is the event's line");
    assert_eq!((event["seq"].as_u64(), event["prev"].as_str()), (Some(1), Some(chain::GENESIS)));
    let digest = switchyard::ledger::canonical_digest(&json!({"text": "to the SIEM"}));
    assert_eq!(event["arguments"], json!(digest), "digest is the default mode, the ledger's digest");
    assert!(chain::verify([("otlp", line)]).is_ok());
}
