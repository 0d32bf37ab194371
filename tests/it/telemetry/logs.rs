//! The log of the real `switchyard serve` binary: run at the most verbose level (`trace`, every
//! crate) with an agent API key, a backend `credential` and bearer tokens in requests, no secret ever reaches
//! the log; no ANSI colour codes in a log file; with `--log-format json` every line is one JSON object, and each
//! agent request has one access line with its principal, session, method, tool, backend, outcome, status and
//! duration. A bad `--log-format` or `SWITCHYARD_LOG_FORMAT` stops `serve` with an error naming it.

use std::path::Path;

use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, api_keys};
use crate::support::assert::{PATIENCE, poll_until};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, backend_toml};

const BACKEND_SECRET: &str = "backend-credential-7f3a9c";
const WRONG_KEY: &str = "sy_intruder-key-51d2";
/// A JWT-shaped bearer token (three dotted parts): tried as an API key, refused, never printed.
const WRONG_JWT: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.c2lnbmF0dXJlLXNlY3JldA";
const ACCESS: &str = "switchyard::access";

/// Runs the gateway with `args`, makes calls with every kind of secret, and returns its whole log once the last
/// access line is in it.
async fn logged_run(scratch: &ScratchDir, backend: &FaultBackend, args: &[&str]) -> String {
    let config = scratch.path().join(format!("switchyard-{}.toml", args.len()));
    let credential =
        "[backends.credential]\nheader = \"Authorization\"\nenv = \"SY_TEST_BACKEND_SECRET\"\nprefix = \"Bearer \"\n";
    let text = format!(
        "[server]\ndata_dir = {:?}\n[auth]\n{}\n{}",
        scratch.path().join(format!("data-{}", args.len())).display().to_string(),
        api_keys(),
        backend_toml("fault", &backend.url(), credential)
    );
    std::fs::write(&config, text).unwrap();
    let log = scratch.path().join(format!("gateway-{}.log", args.len()));
    let env = [("SWITCHYARD_LOG", "trace"), ("SY_TEST_BACKEND_SECRET", BACKEND_SECRET)];
    let gateway = ChildGateway::spawn_with(&config, &log, args, &env).await;

    let mut agent = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    agent.tool_names().await;
    let echoed = agent.call_tool("fault__echo", json!({"text": "hello"})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "hello", "{echoed}");
    for token in [WRONG_KEY, WRONG_JWT] {
        let mut intruder = Agent::with_token(gateway.mcp(), token);
        let refused = intruder.initialize("2025-11-25").await;
        assert_eq!(refused.status, reqwest::StatusCode::UNAUTHORIZED);
    }
    let sent = backend.requests().into_iter().find(|request| request.rpc_method.as_deref() == Some("tools/call"));
    let sent = sent.expect("the call reached the backend");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {BACKEND_SECRET}").as_str()),
        "the credential is used"
    );
    let whole = wait_for(&log, "401").await;
    gateway.terminate().await;
    whole
}

/// The log once it has two access lines with `status` (the field, text or JSON: a bare number could be part of a
/// session id or a duration, and the wait would end before the lines it waits for are written).
async fn wait_for(log: &Path, status: &str) -> String {
    let read = || std::fs::read_to_string(log).unwrap_or_default();
    let (text, json) = (format!("status={status}"), format!("\"status\":{status}"));
    let has_status = |line: &str| line.contains(ACCESS) && (line.contains(&text) || line.contains(&json));
    let logged = || read().lines().filter(|line| has_status(line)).count() >= 2;
    let met = poll_until(PATIENCE, || async { logged() }).await;
    assert!(met, "timed out after {PATIENCE:?} waiting for two access lines with {status} in the log:\n{}", read());
    read()
}

fn assert_no_secret(log: &str) {
    let digest = switchyard::auth::hex(&switchyard::auth::api_key_digest(ALICE_KEY));
    assert!(log.contains("fault"), "the log has content");
    for secret in [ALICE_KEY, WRONG_KEY, WRONG_JWT, BACKEND_SECRET, "c2lnbmF0dXJlLXNlY3JldA", &digest] {
        assert!(!log.contains(secret), "`{secret}` is in the log:\n{log}");
    }
    assert!(!log.contains('\u{1b}'), "no colour codes in a log file");
}

#[tokio::test]
async fn no_secret_reaches_the_log_and_json_lines_carry_the_access_fields() {
    let scratch = ScratchDir::new("logs");
    let backend = FaultBackend::start(Script::default()).await;

    let text = logged_run(&scratch, &backend, &[]).await;
    assert_no_secret(&text);
    let access =
        text.lines().find(|line| line.contains(ACCESS) && line.contains("tools/call")).expect("an access line");
    for field in
        ["principal=\"alice\"", "tool=\"fault__echo\"", "backend=\"fault\"", "outcome=\"completed\"", "status=200"]
    {
        assert!(access.contains(field), "{field} in {access}");
    }

    let json = logged_run(&scratch, &backend, &["--log-format", "json"]).await;
    assert_no_secret(&json);
    let lines: Vec<Value> = json
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: not JSON: {line}")))
        .collect();
    let access: Vec<&Value> = lines.iter().filter(|line| line["target"] == ACCESS).collect();
    let call = access.iter().find(|line| line["method"] == "tools/call").expect("the call's access line");
    assert_eq!(call["principal"], "alice");
    assert_eq!(call["tool"], "fault__echo");
    assert_eq!(call["backend"], "fault");
    assert_eq!(call["outcome"], "completed");
    assert_eq!(call["status"], 200);
    assert_eq!(call["level"], "INFO");
    assert!(call["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{call}");
    let session = call["session"].as_str().unwrap_or_default();
    assert!(session.len() == 32 && session.bytes().all(|b| b.is_ascii_hexdigit()), "the session's id: {call}");
    let initialize = access.iter().find(|line| line["method"] == "initialize" && line["status"] == 200).unwrap();
    assert_eq!(initialize["session"], session, "the session its initialize opened");
    let refused: Vec<&&Value> = access.iter().filter(|line| line["status"] == 401).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|line| line["principal"] == "-" && line["method"] == "POST"), "{refused:?}");
    assert_eq!(access.iter().filter(|line| line["method"] == "tools/list").count(), 1, "one line per request");
}

#[tokio::test]
async fn a_bad_log_format_is_refused_naming_the_flag_or_the_variable() {
    let scratch = ScratchDir::new("log-format");
    let serve = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
        command.arg("serve").args(args).args(["--listen", "127.0.0.1:0"]).current_dir(scratch.path());
        command.env_remove("SWITCHYARD_LOG_FORMAT").envs(env.iter().copied()).kill_on_drop(true);
        command.output()
    };
    let flag = serve(&["--log-format", "xml"], &[]).await.expect("run switchyard");
    assert!(!flag.status.success());
    let said = String::from_utf8_lossy(&flag.stderr);
    assert!(said.contains("--log-format") && said.contains("expected \"text\" or \"json\""), "{said}");
    let variable = serve(&[], &[("SWITCHYARD_LOG_FORMAT", "yaml")]).await.expect("run switchyard");
    assert!(!variable.status.success());
    let said = String::from_utf8_lossy(&variable.stderr);
    assert!(said.contains("SWITCHYARD_LOG_FORMAT = \"yaml\" (overrides telemetry.log_format)"), "{said}");
}
