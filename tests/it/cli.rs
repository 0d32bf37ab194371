//! The `switchyard` binary: `check`, `tools`, configuration errors, and the first run of `serve` with no
//! configuration (embedded demo backend).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::gateway::{Agent, ChildGateway, TestGateway};

/// The binary, with no configuration file named by the test's own environment.
pub(crate) fn switchyard() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.env_remove("SWITCHYARD_CONFIG");
    command
}

pub(crate) fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("switchyard.toml");
    std::fs::write(&path, format!("[server]\ndata_dir = {:?}\n{text}", dir.join("data").display().to_string()))
        .unwrap();
    path
}

pub(crate) async fn run(command: &mut Command) -> Output {
    let mut command = tokio::process::Command::from(std::mem::replace(command, switchyard()));
    command.output().await.expect("run switchyard")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn demo_url() -> (String, tokio::task::JoinHandle<()>) {
    let (address, task) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    (format!("http://{address}/mcp"), task)
}

#[tokio::test]
async fn check_prints_the_routing_table() {
    let (url, _demo) = demo_url().await;
    let dir = scratch_dir("check");
    let config = write_config(&dir, &format!("[[backends]]\nname = \"demo\"\nurl = \"{url}\"\nprefix = \"d_\"\n"));
    let output = run(switchyard().arg("check").arg("--config").arg(&config)).await;
    let text = stdout(&output);
    assert!(output.status.success(), "{text}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.lines().next().unwrap().starts_with("EXPOSED NAME"), "{text}");
    let echo = text.lines().find(|line| line.starts_with("d_echo")).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(echo.split_whitespace().collect::<Vec<_>>(), ["d_echo", "demo", "echo"]);
}

#[tokio::test]
async fn check_fails_on_collisions_and_dead_backends_naming_them() {
    let (url, _demo) = demo_url().await;
    let dir = scratch_dir("collide");
    let backends = format!(
        "[[backends]]\nname = \"one\"\nurl = \"{url}\"\nprefix = \"\"\n[[backends]]\nname = \"two\"\nurl = \"{url}\"\nprefix = \"\"\n[[backends]]\nname = \"gone\"\nurl = \"http://127.0.0.1:9/mcp\"\ntimeout = \"2s\"\n"
    );
    let output = run(switchyard().arg("check").arg("--config").arg(write_config(&dir, &backends))).await;
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("withheld: tool `echo` of backend `two`") && text.contains("backend `one`"), "{text}");
    let gone = "discovery failed: backend `gone` (http://127.0.0.1:9/mcp): connection refused at 127.0.0.1:9; check";
    assert!(text.contains(gone), "{text}");
}

#[tokio::test]
async fn check_reports_a_stdio_backend_whose_process_does_not_start_and_lists_a_working_one() {
    let dir = scratch_dir("stdio");
    let python = crate::stdio::python().display().to_string();
    let script = crate::stdio::FAULT_SCRIPT;
    let backends = format!(
        "[[backends]]\nname = \"local\"\ntransport = \"stdio\"\ncommand = {python:?}\nargs = [{script:?}, \"normal\"]\n\
         [[backends]]\nname = \"broken\"\ntransport = \"stdio\"\ncommand = {python:?}\nargs = [{script:?}, \"early\"]\n"
    );
    let output = run(switchyard().arg("check").arg("--config").arg(write_config(&dir, &backends))).await;
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|line| line.starts_with("local__echo")), "{text}");
    let broken = format!(
        "discovery failed: backend `broken` (command `{python} {script} early`): the process exited with status 1"
    );
    assert!(text.contains(&broken), "{text}");
    assert_eq!(text.matches("exited with status 1").count(), 1, "the failure is said once: {text}");
}

#[tokio::test]
async fn configuration_errors_name_the_file_and_key() {
    let dir = scratch_dir("bad");
    let config = write_config(&dir, "[[backends]]\nname = \"Bad Name\"\nurl = \"http://127.0.0.1:1/mcp\"\n");
    let output = run(switchyard().arg("check").arg("--config").arg(&config)).await;
    assert_eq!(output.status.code(), Some(1));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("switchyard.toml") && error.contains("backends[0].name"), "{error}");
}

#[tokio::test]
async fn check_refuses_an_unusable_private_key_naming_its_key_and_source() {
    let dir = scratch_dir("private-key");
    let key = format!("{}/tests/fixtures/client-ec-p256-sec1.pem", env!("CARGO_MANIFEST_DIR"));
    let backend = format!(
        "[[backends]]\nname = \"docs\"\nurl = \"http://127.0.0.1:9/mcp\"\n[backends.oauth]\n\
         grant = \"client_credentials\"\nclient_id = \"gw\"\nprivate_key = {{ file = {key:?} }}\n"
    );
    let output = run(switchyard().arg("check").arg("--config").arg(write_config(&dir, &backend))).await;
    assert_eq!(output.status.code(), Some(1));
    let error = String::from_utf8_lossy(&output.stderr);
    let named = format!("backends[0].oauth.private_key.file: private key of backend `docs` (from file {key})");
    assert!(error.contains(&named), "{error}");
    assert!(error.contains("\"EC PRIVATE KEY\"") && error.contains("openssl pkcs8 -topk8 -nocrypt"), "{error}");
    let pem = std::fs::read_to_string(&key).unwrap();
    assert!(!error.contains(pem.lines().nth(1).unwrap()), "the key is never printed: {error}");
}

#[tokio::test]
async fn tools_prints_the_catalog() {
    let (url, _demo) = demo_url().await;
    let dir = scratch_dir("tools");
    let config = write_config(&dir, &format!("[[backends]]\nname = \"demo\"\nurl = \"{url}\"\n"));
    let output = run(switchyard().arg("tools").arg("--config").arg(&config)).await;
    let text = stdout(&output);
    assert!(output.status.success());
    for tool in ["demo__echo", "demo__add", "demo__counter"] {
        assert!(text.lines().any(|line| line.starts_with(tool)), "{tool} missing from\n{text}");
    }
}

#[tokio::test]
async fn serve_without_configuration_serves_the_demo_backend() {
    let dir = scratch_dir("first-run");
    let gateway = ChildGateway::spawn_in(None, &dir, &dir.join("gateway.log")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let names = agent.tool_names().await;
    assert!(names.contains(&"demo__echo".to_owned()), "{names:?}");
    let echoed = agent.call_tool("demo__echo", json!({"text": "first run"})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "first run");
    assert!(dir.join("switchyard-data/session.key").exists(), "the session key is created in the data dir");
    gateway.kill().await;
}

#[tokio::test]
async fn resolve_names_both_flags_when_it_has_neither_and_refuses_both() {
    let neither = run(switchyard().args(["calls", "resolve", "some-key"])).await;
    assert!(!neither.status.success());
    let said = String::from_utf8_lossy(&neither.stderr);
    assert!(said.contains("--completed") && said.contains("--failed"), "{said}");
    let both = run(switchyard().args(["calls", "resolve", "some-key", "--completed", "--failed"])).await;
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"), "{both:?}");
}

#[tokio::test]
async fn calls_lists_shows_and_resolves_the_ledger() {
    use crate::support::fault_backend::{FaultBackend, Script};
    let fault = FaultBackend::start(Script { drop_after_call: true, ..Script::default() }).await;
    let dir = scratch_dir("calls");
    let config = write_config(&dir, &format!("[[backends]]\nname = \"fault\"\nurl = \"{}\"\n", fault.url()));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let key_meta = json!({"switchyard/idempotency-key": "order-42"});
    let call = json!({"name": "fault__echo", "arguments": {"text": "x"}, "_meta": key_meta});
    let lost = agent.request("tools/call", call.clone()).await;
    assert_eq!(lost["result"]["_meta"]["switchyard/outcome"], "unknown");
    let key = lost["result"]["_meta"]["switchyard/claim"].as_str().unwrap().to_owned();

    let listed = run(switchyard().args(["calls", "--state", "unknown", "--config"]).arg(&config)).await;
    let text = stdout(&listed);
    assert!(listed.status.success(), "{text}{}", String::from_utf8_lossy(&listed.stderr));
    let line = text.lines().find(|line| line.contains(&key)).unwrap_or_else(|| panic!("{key} not in\n{text}"));
    assert!(line.contains("unknown") && line.contains("anonymous") && line.contains("fault") && line.contains("echo"));
    let none = run(switchyard().args(["calls", "--state", "completed", "--config"]).arg(&config)).await;
    assert!(!stdout(&none).contains(&key), "the state filter applies");

    let shown = run(switchyard().args(["calls", "show", &key, "--config"]).arg(&config)).await;
    assert!(stdout(&shown).contains("state: unknown"), "{}", stdout(&shown));
    // --config is global: it may come before or after the subcommands.
    for shown in [
        run(switchyard().args(["calls", "--config"]).arg(&config).args(["show", &key])).await,
        run(switchyard().arg("--config").arg(&config).args(["calls", "show", &key])).await,
    ] {
        assert!(stdout(&shown).contains("state: unknown"), "{}", String::from_utf8_lossy(&shown.stderr));
    }
    let mixed = run(switchyard().args(["calls", "--state", "unknown", "show", &key, "--config"]).arg(&config)).await;
    assert_eq!(mixed.status.code(), Some(1), "a list filter with `show` is refused");
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("filter the list of calls"));

    let retry = agent.request("tools/call", call.clone()).await;
    assert_eq!(retry["result"]["_meta"]["switchyard/outcome"], "unknown", "not repeated");
    assert_eq!(fault.executions("echo"), 1);

    let resolve = ["calls", "resolve", &key, "--failed", "--note", "the backend's log shows no run", "--config"];
    let resolved = run(switchyard().env("USER", "ann").args(resolve).arg(&config)).await;
    assert!(resolved.status.success(), "{}", String::from_utf8_lossy(&resolved.stderr));
    let kept = stdout(&run(switchyard().args(["calls", "show", &key, "--config"]).arg(&config)).await);
    assert!(kept.contains("state: resolved_failed") && kept.contains("principal: anonymous"), "{kept}");
    let history =
        kept.lines().find(|line| line.contains("history:")).unwrap_or_else(|| panic!("no history in\n{kept}"));
    assert!(
        history.contains("resolved_failed") && history.contains("by ann: the backend's log shows no run"),
        "{history}"
    );
    fault.update(|script| script.drop_after_call = false);
    let ran = agent.request("tools/call", call).await;
    assert_eq!(ran["result"]["content"][0]["text"], "x", "after --failed the retry runs");
    assert_eq!(fault.executions("echo"), 2);
    let rerun = stdout(&run(switchyard().args(["calls", "show", &key, "--config"]).arg(&config)).await);
    assert!(rerun.contains("state: completed") && rerun.contains("by ann"), "the history outlives the retry: {rerun}");

    let bad = run(switchyard().args(["calls", "--state", "lost", "--config"]).arg(&config)).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expected in_flight, completed, unknown or awaiting_approval")
    );
    gateway.kill().await;
}

#[tokio::test]
async fn calls_lists_the_calls_of_one_principal() {
    use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
    use crate::support::fault_backend::{FaultBackend, Script};
    let fault = FaultBackend::start(Script::default()).await;
    let dir = scratch_dir("calls-principal");
    let config =
        write_config(&dir, &format!("{}[[backends]]\nname = \"fault\"\nurl = \"{}\"\n", api_keys(), fault.url()));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    alice.call_tool("fault__echo", json!({"text": "a"})).await;
    bob.call_tool("fault__echo", json!({"text": "b1"})).await;
    bob.call_tool("fault__echo", json!({"text": "b2"})).await;

    let listed = run(switchyard().args(["calls", "--principal", "bob", "--config"]).arg(&config)).await;
    let text = stdout(&listed);
    assert!(listed.status.success(), "{text}{}", String::from_utf8_lossy(&listed.stderr));
    let rows: Vec<&str> = text.lines().filter(|line| line.contains("echo")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|row| row.contains("bob") && !row.contains("alice")), "{text}");
    gateway.kill().await;
}

#[tokio::test]
async fn a_graceful_shutdown_drains_running_calls_then_marks_the_rest_unknown() {
    use crate::support::fault_backend::{FaultBackend, Script};
    let slow = Script { call_delay: Some(std::time::Duration::from_millis(400)), ..Script::default() };
    let fault = FaultBackend::start(slow).await;
    let dir = scratch_dir("drain");
    let backend = format!("[[backends]]\nname = \"fault\"\nurl = \"{}\"\n", fault.url());
    let config = write_config(&dir, &format!("shutdown_drain = \"3s\"\n{backend}"));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let call = tokio::spawn(async move { agent.call_tool("fault__echo", json!({"text": "drained"})).await });
    while fault.executions("echo") == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let status = gateway.terminate().await;
    assert!(status.success(), "a graceful shutdown exits cleanly: {status}");
    let answered = call.await.unwrap();
    assert_eq!(answered["result"]["content"][0]["text"], "drained", "the running call finished within the drain");

    fault.update(|script| script.stall = true);
    let config = write_config(&dir, &format!("shutdown_drain = \"200ms\"\n{backend}"));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let keyed =
        json!({"name": "fault__echo", "arguments": {"text": "stuck"}, "_meta": {"switchyard/idempotency-key": "k-1"}});
    let stuck = {
        let agent = Agent::connected(gateway.mcp()).await;
        let keyed = keyed.clone();
        tokio::spawn(async move {
            agent.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": keyed})).await
        })
    };
    while fault.executions("echo") < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let started = std::time::Instant::now();
    assert!(gateway.terminate().await.success());
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "the drain is bounded");
    drop(stuck);

    let restarted = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let mut agent = Agent::connected(restarted.mcp()).await;
    let retry = agent.request("tools/call", keyed).await;
    assert_eq!(retry["result"]["_meta"]["switchyard/outcome"], "unknown", "{retry}");
    assert_eq!(fault.executions("echo"), 2, "the stuck call was not run again");
    restarted.kill().await;
}

#[tokio::test]
async fn a_call_still_running_when_the_drain_runs_out_is_answered_with_an_unknown_outcome() {
    let (url, _demo) = demo_url().await;
    let dir = scratch_dir("drain-cut");
    let config =
        write_config(&dir, &format!("shutdown_drain = \"200ms\"\n[[backends]]\nname = \"demo\"\nurl = \"{url}\"\n"));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let call = tokio::spawn(async move { agent.call_tool("demo__sleep", json!({"ms": 10_000})).await });
    let sessionless = crate::modern_front::ModernAgent::new(gateway.mcp());
    let sleep = json!({"name": "demo__sleep", "arguments": {"ms": 10_000}});
    let modern_call = tokio::spawn(async move { sessionless.send_with(json!(9), "tools/call", sleep, |_| {}).await });
    let running = format!("{}/admin/api/calls?outcome=in_flight", gateway.base);
    crate::support::assert::eventually("both sleep calls are claimed", || async {
        let listed = reqwest::get(&running).await.unwrap().text().await.unwrap();
        serde_json::from_str::<Value>(&listed).unwrap()["calls"].as_array().is_some_and(|calls| calls.len() == 2)
    })
    .await;
    assert!(gateway.terminate().await.success());
    let answered = call.await.expect("an answer, not a dropped connection");
    let result = &answered["result"];
    assert_eq!(result["isError"], true, "{answered}");
    assert_eq!(result["_meta"]["switchyard/outcome"], "unknown", "{answered}");
    assert!(crate::support::assert::text(&answered).contains("shutting down"), "{answered}");
    let modern = modern_call.await.expect("an answer in the 2026-07-28 era too");
    assert_eq!(modern.status, reqwest::StatusCode::OK, "{}", modern.raw);
    let modern = modern.body.expect("a JSON-RPC answer");
    assert_eq!(modern["id"], 9, "{modern}");
    assert_eq!(modern["result"]["resultType"], "complete", "the era's shape: {modern}");
    assert_eq!(modern["result"]["_meta"]["switchyard/outcome"], "unknown", "{modern}");
}

#[tokio::test]
async fn a_streamed_call_cut_by_the_drain_ends_its_stream_with_an_unknown_outcome() {
    use crate::support::fault_backend::{Answer, FaultBackend, Script};
    let asking = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
        "params": {"message": "Which colour?", "requestedSchema": {"type": "object", "properties": {}}}});
    let script = Script { answer: Answer::Sse, before_result: vec![asking], await_answers: true, ..Script::default() };
    let fault = FaultBackend::start(script).await;
    let dir = scratch_dir("drain-cut-sse");
    let backend = format!("[[backends]]\nname = \"fault\"\nurl = \"{}\"\n", fault.url());
    let config = write_config(&dir, &format!("shutdown_drain = \"200ms\"\n{backend}"));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let agent = Agent::connected_with(gateway.mcp(), json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "unanswered"}}});
    let mut stream = agent.post_streaming(&call).await;
    let wait = std::time::Duration::from_secs(60);
    crate::gateway::read_until(&mut stream, "elicitation/create", wait).await.expect("the call streams");
    assert!(gateway.terminate().await.success());
    let rest = crate::gateway::read_until(&mut stream, "switchyard/outcome", wait).await;
    let rest = rest.expect("the stream ends with an answer, not a dropped connection");
    let answer: Value = rest
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .find(|message: &Value| message["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call in {rest}"));
    assert_eq!(answer["result"]["_meta"]["switchyard/outcome"], "unknown", "{answer}");
}

#[tokio::test]
async fn keys_new_prints_a_key_and_the_digest_of_that_key() {
    let output =
        run(switchyard().args(["keys", "new", "--principal", "ci-bot", "--group", "ops", "--group", "on call"])).await;
    let text = stdout(&output);
    assert!(output.status.success(), "{text}\n{}", String::from_utf8_lossy(&output.stderr));
    let key = text.lines().map(str::trim).find(|line| line.starts_with("sy_")).unwrap_or_else(|| panic!("{text}"));
    assert!(key.len() >= 3 + 43, "at least 32 bytes of entropy: {key}");
    let toml_text = &text[text.find("[[auth.api_keys]]").unwrap_or_else(|| panic!("{text}"))..];
    let config = switchyard::config::Config::from_toml_str(toml_text, "pasted", Vec::<(String, String)>::new())
        .expect("the printed lines are a valid configuration");
    let entry = &config.auth.api_keys[0];
    assert_eq!(entry.principal, "ci-bot");
    assert_eq!(entry.groups, ["ops", "on call"]);
    assert_eq!(entry.sha256, switchyard::auth::api_key_digest(key), "the digest is the printed key's");

    let again = stdout(&run(switchyard().args(["keys", "new", "--principal", "ci-bot"])).await);
    assert!(!again.contains(key), "every key is fresh");
    let refused = run(switchyard().args(["keys", "new", "--principal", ""])).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("auth.api_keys[0].principal"));
}

#[tokio::test]
async fn serve_refuses_a_non_loopback_listen_without_authentication() {
    let dir = scratch_dir("exposed");
    let config = write_config(&dir, "");
    let output = run(switchyard().arg("serve").arg("--config").arg(&config).args(["--listen", "0.0.0.0:0"])).await;
    assert_eq!(output.status.code(), Some(1));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("refusing to serve on 0.0.0.0:0") && error.contains("anonymous = true"), "{error}");
    assert!(!dir.join("data").exists(), "refused before the gateway touched its data directory");
}

#[tokio::test]
async fn auth_lists_and_revokes_stored_backend_tokens_without_printing_secrets() {
    use switchyard::ledger::{BackendTokenRow, LedgerStore};
    let dir = scratch_dir("auth-tokens");
    let config = write_config(&dir, "");
    let ledger = LedgerStore::open("sqlite", &dir.join("data")).await.expect("ledger");
    let pin = switchyard::backend::oauth::ISSUER_PIN_PRINCIPAL;
    let rows = [("alice", "docs", "repo:read"), ("bob", "docs", "repo:read"), ("", "github", "repo:read")];
    for (principal, backend, scopes) in rows.into_iter().chain([(pin, "docs", "https://login.example.com/t1")]) {
        let row = BackendTokenRow {
            principal: principal.to_owned(),
            backend: backend.to_owned(),
            sealed: b"SEALED-SECRET-BYTES".to_vec(),
            scopes: scopes.to_owned(),
            expires_at: Some(1_795_969_230),
            updated_at: 951_782_400,
        };
        ledger.put_backend_token(&row).await.expect("put");
    }
    drop(ledger);
    let listed = run(switchyard().args(["auth", "list", "--config"]).arg(&config)).await;
    let text = stdout(&listed);
    assert!(listed.status.success(), "{text}{}", String::from_utf8_lossy(&listed.stderr));
    assert!(!text.contains("SEALED"), "{text}");
    let alice = text.lines().find(|line| line.contains("alice")).unwrap_or_else(|| panic!("alice not in\n{text}"));
    assert!(alice.contains("docs") && alice.contains("repo:read") && alice.contains("2026-11-29 16:20:30"), "{alice}");
    assert!(text.lines().any(|line| line.contains("github") && line.contains("(gateway)")), "{text}");
    let pinned = text.lines().find(|line| line.contains("(issuer pin)")).unwrap_or_else(|| panic!("no pin in\n{text}"));
    assert!(pinned.contains("docs") && pinned.contains("https://login.example.com/t1"), "{pinned}");

    let unscoped = run(switchyard().args(["auth", "revoke", "--config"]).arg(&config)).await;
    assert!(!unscoped.status.success(), "revoke needs a selection");
    let revoked = run(switchyard()
        .args(["auth", "revoke", "--principal", "alice", "--backend", "docs", "--config"])
        .arg(&config))
    .await;
    assert!(stdout(&revoked).contains("deleted 1 stored token set"), "{}", stdout(&revoked));
    let after = stdout(&run(switchyard().args(["auth", "list", "--backend", "docs", "--config"]).arg(&config)).await);
    assert!(!after.contains("alice") && after.contains("bob") && !after.contains("github"), "{after}");
    assert!(after.contains("(issuer pin)"), "a principal's revoke keeps the backend's pin: {after}");
    let backend = run(switchyard().args(["auth", "revoke", "--backend", "docs", "--config"]).arg(&config)).await;
    assert!(stdout(&backend).contains("deleted 2 stored token sets"), "bob's and the pin: {}", stdout(&backend));
    let cleared = stdout(&run(switchyard().args(["auth", "list", "--backend", "docs", "--config"]).arg(&config)).await);
    assert!(!cleared.contains("(issuer pin)") && !cleared.contains("bob"), "{cleared}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Whether `text` holds a character a terminal would act on: C0 but the newline, DEL, C1, bidi overrides.
fn has_terminal_controls(text: &str) -> bool {
    text.chars().any(|c| {
        (c.is_control() && c != '\n')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    })
}

/// What bash makes of `word` pasted as an argument.
fn pasted(word: &str) -> String {
    let script = format!("printf '%s' {word}");
    let output = Command::new("bash").args(["-c", &script]).env("LC_ALL", "C.UTF-8").output().expect("run bash");
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// Runs `tools/call` of `fault__echo` with `text`, as message `id` with `meta`.
async fn echo(agent: &Agent, id: &Value, text: &str, meta: Value) {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": text}, "_meta": meta}});
    let done = agent.send(&call).await.body.expect("a JSON answer");
    assert_eq!(done["result"]["content"][0]["text"], text, "{done}");
}

/// The shell word in `line` that starts at `quote` (the key, printed last on its line).
fn word_at<'a>(line: &'a str, quote: &str) -> &'a str {
    &line[line.find(quote).unwrap_or_else(|| panic!("a key quoted with {quote}: {line}"))..]
}

#[tokio::test]
async fn calls_prints_agent_and_backend_text_inert_for_the_terminal_and_the_shell() {
    use crate::support::fault_backend::{FaultBackend, Script};
    let fault = FaultBackend::start(Script::default()).await;
    let dir = scratch_dir("calls-inert");
    let config = write_config(&dir, &format!("[[backends]]\nname = \"fault\"\nurl = \"{}\"\n", fault.url()));
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let marker = dir.join("pasted");
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{202e}txt.exe";
    // An idempotency key is printable ASCII, shell syntax included; a key without one holds the request id's JSON.
    let idempotency_key = format!("$(touch {})'; touch {} #", marker.display(), marker.display());
    echo(&agent, &json!(1), hostile, json!({"switchyard/idempotency-key": idempotency_key})).await;
    let id = json!(format!("\u{9b}2J`touch {}`\u{202e}", marker.display()));
    echo(&agent, &id, "b", json!({})).await;

    let listed = run(switchyard().args(["calls", "--config"]).arg(&config)).await;
    let text = stdout(&listed);
    assert!(listed.status.success(), "{text}{}", String::from_utf8_lossy(&listed.stderr));
    assert!(!has_terminal_controls(&text), "{text:?}");
    let rows: Vec<&str> = text.lines().filter(|line| line.contains("fault")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    let (ansi_c, single): (Vec<&str>, Vec<&str>) = rows.iter().partition(|row| row.contains("$'"));
    let escaped = pasted(word_at(ansi_c[0], "$'"));
    assert!(escaped.starts_with("req:") && escaped.ends_with(&id.to_string()), "a pasted key is the key: {escaped:?}");
    let quoted = pasted(word_at(single[0], "'"));
    assert!(quoted.starts_with("idem:") && quoted.ends_with(&idempotency_key), "a pasted key is the key: {quoted:?}");

    for key in [&quoted, &escaped] {
        let shown = run(switchyard().args(["calls", "show", key, "--config"]).arg(&config)).await;
        let text = stdout(&shown);
        assert!(shown.status.success(), "{text}{}", String::from_utf8_lossy(&shown.stderr));
        assert!(!has_terminal_controls(&text), "{text:?}");
        let key_line = text.lines().find(|line| line.trim_start().starts_with("key: ")).expect("the key line");
        assert_eq!(pasted(key_line.trim_start().trim_start_matches("key: ")), *key);
    }
    let shown = run(switchyard().args(["calls", "show", &quoted, "--config"]).arg(&config)).await;
    assert!(stdout(&shown).contains(r"\u009b31m\u202etxt.exe"), "the result's text, escaped: {}", stdout(&shown));
    assert!(!marker.exists(), "pasting a key ran a command");
    gateway.kill().await;
}

/// `calls` and `auth list` read only `[server]` and `[ledger]`: a backend whose credential variable is not set in
/// the operator's shell does not stop them, and a ledger that does not exist is an error naming where it was
/// looked for, with nothing created there.
#[tokio::test]
async fn read_only_commands_need_no_backend_secret_and_never_create_a_ledger() {
    let dir = scratch_dir("readonly");
    let secret_backend = "[[backends]]\nname = \"gh\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
                          [backends.credential]\nenv = \"SWITCHYARD_TEST_UNSET_TOKEN\"\n";
    let config = write_config(&dir, secret_backend);
    let ledger = dir.join("data").join("ledger.db");
    for command in [&["calls"][..], &["calls", "show", "some-key"], &["auth", "list"]] {
        let output = run(switchyard().args(command).arg("--config").arg(&config)).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{command:?}: {stderr}");
        assert!(stderr.contains(&format!("no ledger at {}", ledger.display())), "{command:?}: {stderr}");
        assert!(!stderr.contains("SWITCHYARD_TEST_UNSET_TOKEN"), "no secret was looked for: {stderr}");
        assert!(!ledger.exists() && !dir.join("data").exists(), "{command:?} created nothing");
    }
    std::fs::create_dir_all(dir.join("data")).unwrap();
    drop(switchyard::ledger::LedgerStore::open_url(&Default::default(), &dir.join("data")).await.unwrap());
    let listed = run(switchyard().arg("calls").arg("--config").arg(&config)).await;
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let memory = write_config(&dir, "[ledger]\nurl = \"memory\"\n");
    let refused = run(switchyard().arg("calls").arg("--config").arg(&memory)).await;
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ledger is `memory`"), "{refused:?}");
}

#[tokio::test]
async fn healthcheck_passes_on_a_serving_gateway_and_says_why_it_fails_otherwise() {
    let gateway = TestGateway::start("", "").await;
    let healthy = run(switchyard().args(["healthcheck", "--url", &format!("{}/healthz", gateway.base)])).await;
    assert!(healthy.status.success(), "{}", String::from_utf8_lossy(&healthy.stderr));

    let missing = format!("{}/no-such-page", gateway.base);
    let refused = run(switchyard().args(["healthcheck", "--url", &missing])).await;
    assert_eq!(refused.status.code(), Some(1));
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("answered 404 Not Found, not 200 OK"), "{error}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let silent = run(switchyard().args(["healthcheck", "--url", &format!("http://{closed}/healthz")])).await;
    assert_eq!(silent.status.code(), Some(1));
    let error = String::from_utf8_lossy(&silent.stderr);
    assert!(error.contains(&format!("no answer from http://{closed}/healthz")), "{error}");
}
