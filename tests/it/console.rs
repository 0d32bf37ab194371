//! The operator's console: its JSON API under `/admin/api/` after real calls through a
//! running gateway — backends (health, transport, tools, live sessions and processes, latency), the catalog,
//! the ledger's calls and their filters, unknown calls with the `switchyard calls resolve` commands (run for
//! real) — who may read it (and `/readyz`'s error texts), and the page in headless Chromium ([`browser`]).
//!
//! Every test runs on loopback, so "another machine" is produced the way a reverse proxy on the gateway's own
//! machine produces it: a request carrying `X-Forwarded-For` is not a loopback caller. Without `[auth]` a
//! loopback caller needs no credential; with it, every caller must be an administrator unless
//! `console_loopback = true`.

mod browser;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::auth::{api_key_digest, hex};

use crate::support::console::{Answer, get, get_as};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ScratchDir, TestGateway, backend_toml};

const ALICE_KEY: &str = "sy_console_alice";
const BOB_KEY: &str = "sy_console_bob";
const CAROL_KEY: &str = "sy_console_carol";
const ANOTHER_MACHINE: (&str, &str) = ("x-forwarded-for", "203.0.113.9");

/// `path` from a loopback caller with an administrator's key (a gateway without `[auth]` reads none): must be
/// 200; its body.
async fn read(base: &str, path: &str) -> Value {
    let answer = get(base, path, &[("authorization", &format!("Bearer {ALICE_KEY}"))]).await;
    assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
    assert_api_headers(&answer);
    answer.body
}

/// Every console API answer, a refusal too, is kept by no cache and read as nothing but JSON.
fn assert_api_headers(answer: &Answer) {
    assert_eq!(answer.headers["cache-control"], "no-store", "{}", answer.body);
    assert_eq!(answer.headers["x-content-type-options"], "nosniff", "{}", answer.body);
    assert_eq!(answer.headers["content-type"], "application/json", "{}", answer.body);
}

/// The embedded demo MCP server on a loopback port (stopped when the task is dropped with the test).
async fn demo_backend() -> (String, tokio::task::JoinHandle<()>) {
    let (address, task) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("demo");
    (format!("http://{address}/mcp"), task)
}

fn stdio_demo_toml(name: &str) -> String {
    format!(
        "[[backends]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [\"demo-server\", \"--stdio\"]\n",
        env!("CARGO_BIN_EXE_switchyard")
    )
}

/// A backend nobody listens for (port 1 on loopback refuses connections).
fn down_toml(name: &str) -> String {
    backend_toml(name, "http://127.0.0.1:1/mcp", "")
}

fn auth_section() -> String {
    auth_section_with("")
}

/// The `[auth]` section of alice and carol (administrators) and bob, with `extra` keys of `[auth]`.
fn auth_section_with(extra: &str) -> String {
    let key = |principal: &str, key: &str, groups: &str| {
        format!(
            "[[auth.api_keys]]\nprincipal = \"{principal}\"\nsha256 = \"{}\"\ngroups = {groups}\n",
            hex(&api_key_digest(key))
        )
    };
    format!(
        "[auth]\nadmin_principals = [\"alice\"]\n{extra}\n{}{}{}",
        key("alice", ALICE_KEY, "[]"),
        key("bob", BOB_KEY, "[\"ops\"]"),
        key("carol", CAROL_KEY, "[\"admin\"]")
    )
}

fn backend<'a>(backends: &'a Value, name: &str) -> &'a Value {
    let list = backends["backends"].as_array().expect("a list of backends");
    list.iter().find(|backend| backend["name"] == name).unwrap_or_else(|| panic!("no backend {name}: {backends}"))
}

fn ms(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("a number of milliseconds: {value}"))
}

#[tokio::test]
async fn backends_show_health_transport_tools_live_sessions_processes_and_latency() {
    let (demo_url, _demo) = demo_backend().await;
    let backends = backend_toml("demo", &demo_url, "") + &stdio_demo_toml("local") + &down_toml("down");
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    for sleep in [0, 40, 80] {
        let slept = agent.call_tool("demo__sleep", json!({"ms": sleep})).await;
        assert_eq!(slept["result"]["isError"], json!(null), "{slept}");
    }
    agent.call_tool("local__echo", json!({"text": "over stdio"})).await;
    let demo_tools = agent.tool_names().await.iter().filter(|name| name.starts_with("demo__")).count();
    assert!(demo_tools >= 5, "the demo's tools are listed");

    let listed = read(&gateway.base, "/admin/api/backends").await;
    let names: Vec<&str> = listed["backends"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["demo", "local", "down"], "configuration order");

    let demo = backend(&listed, "demo");
    assert_eq!((demo["transport"].as_str(), demo["status"].as_str()), (Some("mcp"), Some("discovered")));
    assert_eq!(demo["error"], Value::Null);
    assert_eq!(demo["tools"], json!(demo_tools), "the tools agents see");
    assert_eq!(
        (demo["sessions"].as_u64(), demo["processes"].as_u64()),
        (Some(2), Some(0)),
        "discovery's + the agent's"
    );
    let latency = &demo["latency"];
    assert_eq!((latency["samples"].as_u64(), latency["window_seconds"].as_u64()), (Some(3), Some(3600)));
    let points = latency["points"].as_array().expect("points");
    let slept: Vec<u64> = points.iter().map(|point| ms(&point["duration_ms"])).collect();
    let started: Vec<u64> = points.iter().map(|point| ms(&point["at_ms"])).collect();
    assert!(started.windows(2).all(|pair| pair[0] <= pair[1]), "oldest first: {started:?}");
    assert!(slept[1] >= 40 && slept[2] >= 80, "a sample covers the backend's work: {slept:?}");
    let (p50, p90, p99) = (ms(&latency["p50_ms"]), ms(&latency["p90_ms"]), ms(&latency["p99_ms"]));
    let mut sorted = slept.clone();
    sorted.sort_unstable();
    assert_eq!((p50, p90, p99), (sorted[1], sorted[2], sorted[2]), "nearest rank over {slept:?}");

    let local = backend(&listed, "local");
    assert_eq!((local["transport"].as_str(), local["status"].as_str()), (Some("stdio"), Some("discovered")));
    assert_eq!((local["sessions"].as_u64(), local["processes"].as_u64()), (Some(2), Some(2)), "per-agent processes");
    assert_eq!(local["latency"]["samples"], 1);
    assert_eq!(local["process_start"], Value::Null);

    let down = backend(&listed, "down");
    assert_eq!(down["status"], "failed");
    assert!(!down["error"].as_str().expect("why it failed").is_empty(), "{down}");
    assert_eq!((down["tools"].as_u64(), down["sessions"].as_u64()), (Some(0), Some(0)));
    let empty = &down["latency"];
    assert_eq!((empty["samples"].as_u64(), &empty["p50_ms"], &empty["p99_ms"]), (Some(0), &Value::Null, &Value::Null));

    // Sessions and processes are live counts: the agent leaves, its backend sessions and process go.
    let session = agent.session.clone().expect("a session");
    let deleted = agent.http.delete(gateway.mcp()).header("mcp-session-id", session).send().await.expect("DELETE");
    assert_eq!(deleted.status(), StatusCode::OK);
    let mut counts = (0, 0, 0);
    for _ in 0..200 {
        let listed = read(&gateway.base, "/admin/api/backends").await;
        let (demo, local) = (backend(&listed, "demo"), backend(&listed, "local"));
        counts = (ms(&demo["sessions"]), ms(&local["sessions"]), ms(&local["processes"]));
        if counts == (1, 1, 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(counts, (1, 1, 1), "only discovery's sessions and process are left");
}

#[tokio::test]
async fn the_catalog_shows_exposed_tools_and_what_was_withheld() {
    let (demo_url, _demo) = demo_backend().await;
    let fault = FaultBackend::start(Script::default()).await;
    // Both offer `echo` without a prefix: the later backend's is withheld.
    let backends =
        backend_toml("demo", &demo_url, "prefix = \"\"") + &backend_toml("fault", &fault.url(), "prefix = \"\"");
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let mut exposed = agent.tool_names().await;

    let catalog = read(&gateway.base, "/admin/api/catalog").await;
    let tools = catalog["tools"].as_array().expect("tools");
    let mut shown: Vec<String> = tools.iter().map(|tool| tool["exposed"].as_str().unwrap().to_owned()).collect();
    exposed.sort();
    shown.sort();
    assert_eq!(shown, exposed, "the catalog is what agents see");
    let echo = tools.iter().find(|tool| tool["exposed"] == "echo").expect("echo");
    assert_eq!((echo["backend"].as_str(), echo["name"].as_str()), (Some("demo"), Some("echo")));
    assert!(echo["description"].as_str().is_some_and(|text| !text.is_empty()), "{echo}");
    let withheld = catalog["withheld"].as_array().expect("withheld");
    assert_eq!(withheld.len(), 1, "{catalog}");
    assert_eq!((withheld[0]["backend"].as_str(), withheld[0]["name"].as_str()), (Some("fault"), Some("echo")));
    assert_eq!(withheld[0]["kind"], "tool");
    assert!(withheld[0]["reason"].as_str().is_some_and(|reason| reason.contains("demo")), "{withheld:?}");
}

#[tokio::test]
async fn recent_calls_are_listed_newest_first_and_filtered() {
    let (demo_url, _demo) = demo_backend().await;
    let fault = FaultBackend::start(Script::default()).await;
    let backends = backend_toml("demo", &demo_url, "") + &backend_toml("other", &fault.url(), "");
    let gateway = TestGateway::start_with("", &auth_section(), &backends).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    // Made one after the other, so "newest first" is this order reversed.
    alice.call_tool("demo__echo", json!({"text": "one"})).await;
    alice.call_tool("demo__fail", json!({"message": "no"})).await;
    bob.call_tool("demo__add", json!({"a": 1, "b": 2})).await;
    bob.call_tool("other__echo", json!({"text": "elsewhere"})).await;
    alice.call_tool("demo__echo", json!({"text": "two"})).await;

    let all = read(&gateway.base, "/admin/api/calls").await;
    assert_eq!(all["limit"], 100);
    let calls = all["calls"].as_array().expect("calls");
    let seen: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|call| {
            (call["principal"].as_str().unwrap(), call["backend"].as_str().unwrap(), call["tool"].as_str().unwrap())
        })
        .collect();
    let made = [
        ("alice", "demo", "echo"),
        ("bob", "other", "echo"),
        ("bob", "demo", "add"),
        ("alice", "demo", "fail"),
        ("alice", "demo", "echo"),
    ];
    assert_eq!(seen, made);
    for call in calls {
        assert_eq!(call["outcome"], "completed", "{call}");
        assert!(call["duration_ms"].is_u64() && call["started_ms"].is_u64(), "{call}");
        assert!(call["key"].as_str().is_some_and(|key| key.starts_with("req:")), "{call}");
    }
    let tool_errors: Vec<&Value> = calls.iter().map(|call| &call["tool_error"]).collect();
    assert_eq!(tool_errors, [&json!(false), &json!(false), &json!(false), &json!(true), &json!(false)]);

    let picked = |query: &'static str| {
        let base = gateway.base.clone();
        async move {
            let body = read(&base, &format!("/admin/api/calls?{query}")).await;
            let calls = body["calls"].as_array().expect("calls").clone();
            calls
                .iter()
                .map(|call| format!("{}:{}", call["backend"].as_str().unwrap(), call["tool"].as_str().unwrap()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(picked("principal=bob").await, ["other:echo", "demo:add"]);
    assert_eq!(picked("backend=other").await, ["other:echo"]);
    assert_eq!(picked("tool=echo").await, ["demo:echo", "other:echo", "demo:echo"]);
    assert_eq!(picked("tool=echo&backend=demo&principal=alice").await, ["demo:echo", "demo:echo"]);
    assert_eq!(picked("outcome=completed&limit=2").await, ["demo:echo", "other:echo"]);
    assert!(picked("outcome=unknown").await.is_empty());
    assert!(picked("outcome=in_flight").await.is_empty());
    assert_eq!(picked("backend=&tool=&outcome=&principal=").await.len(), 5, "empty fields mean any");

    let refused = [
        ("outcome=bogus", "`outcome`: expected in_flight, completed or unknown, not `bogus`"),
        ("limit=0", "`limit`: expected a whole number from 1 to 1000"),
        ("limit=5000", "`limit`: expected a whole number from 1 to 1000"),
        ("principle=bob", "`principle`: expected one of backend, tool, outcome, principal, limit"),
        ("tool=a&tool=b", "`tool`: expected given once"),
    ];
    for (query, message) in refused {
        let alice = format!("Bearer {ALICE_KEY}");
        let answer = get(&gateway.base, &format!("/admin/api/calls?{query}"), &[("authorization", &alice)]).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}");
        assert!(answer.message().contains(message), "{query}: {}", answer.body);
    }
}

/// A config file for `switchyard calls` that opens the same ledger as `gateway` (its data directory's SQLite).
fn cli_config(gateway: &TestGateway, dir: &ScratchDir) -> std::path::PathBuf {
    let path = dir.path().join("switchyard.toml");
    std::fs::write(&path, format!("[server]\ndata_dir = {:?}\n", gateway.data_dir.display().to_string())).unwrap();
    path
}

/// Runs the console's command line through a shell (as an operator pastes it), with `--config`.
async fn run_command(command: &str, config: &Path) -> String {
    assert!(command.starts_with("switchyard calls resolve "), "{command}");
    let line = command.replacen("switchyard", &shell_word(env!("CARGO_BIN_EXE_switchyard")), 1);
    let output = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{line} --config {}", shell_word(&config.display().to_string())))
        .output()
        .await
        .expect("run sh");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{line}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

fn shell_word(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

async fn lost_call(agent: &Agent, id: u64, key: &str) {
    let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "fault__echo", "arguments": {"text": key}, "_meta": {"switchyard/idempotency-key": key}}});
    let reply = agent.send(&message).await;
    let body = reply.body.expect("an answer");
    assert_eq!(body["result"]["_meta"]["switchyard/outcome"], "unknown", "{body}");
}

#[tokio::test]
async fn unknown_calls_carry_the_resolve_commands_that_settle_them() {
    let fault = FaultBackend::start(Script { drop_after_call: true, ..Script::default() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    // Keys an operator must be able to paste: a quote and a blank inside.
    lost_call(&agent, 1, "it's lost").await;
    lost_call(&agent, 2, "ran, answer lost").await;

    let unknown = read(&gateway.base, "/admin/api/calls/unknown").await;
    let calls = unknown["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 2, "{unknown}");
    let newest = &calls[0];
    assert_eq!(newest["key"], "idem:9:anonymous:ran, answer lost");
    assert_eq!((newest["backend"].as_str(), newest["tool"].as_str()), (Some("fault"), Some("echo")));
    assert_eq!((newest["outcome"].as_str(), newest["principal"].as_str()), (Some("unknown"), Some("anonymous")));
    assert!(
        newest["error"].as_str().is_some_and(|why| why.contains("the connection failed after the request was sent")),
        "{newest}"
    );
    let options = newest["resolve"].as_array().expect("resolve options");
    let resolutions: Vec<&str> = options.iter().map(|option| option["resolution"].as_str().unwrap()).collect();
    assert_eq!(resolutions, ["completed", "failed"]);
    assert_eq!(options[0]["command"], "switchyard calls resolve 'idem:9:anonymous:ran, answer lost' --completed");
    assert!(options[0]["effect"].as_str().unwrap().contains("not run again"), "{options:?}");
    assert!(options[1]["effect"].as_str().unwrap().contains("runs the tool again"), "{options:?}");
    assert_eq!(read(&gateway.base, "/admin/api/calls/unknown?limit=1").await["calls"].as_array().unwrap().len(), 1);

    // The commands work as shown: one call ran (completed, settled by an operator), the other did not (deleted).
    let dir = ScratchDir::new("console-cli");
    let config = cli_config(&gateway, &dir);
    let failed = calls[1]["resolve"][1]["command"].as_str().expect("command");
    assert_eq!(failed, r"switchyard calls resolve 'idem:9:anonymous:it'\''s lost' --failed");
    let said = run_command(failed, &config).await;
    assert!(said.contains("runs the tool again"), "the CLI says what the console said: {said}");
    run_command(options[0]["command"].as_str().unwrap(), &config).await;

    assert!(read(&gateway.base, "/admin/api/calls/unknown").await["calls"].as_array().unwrap().is_empty());
    let left = read(&gateway.base, "/admin/api/calls").await;
    let left = left["calls"].as_array().expect("calls");
    assert_eq!(left.len(), 1, "the failed one's claim is gone: {left:?}");
    assert_eq!(
        (left[0]["key"].as_str(), left[0]["outcome"].as_str()),
        (Some("idem:9:anonymous:ran, answer lost"), Some("completed"))
    );
    assert_eq!(left[0]["duration_ms"], Value::Null, "an operator's settlement is not a duration");
    assert!(left[0]["error"].as_str().is_some_and(|note| note.contains("operator")), "{left:?}");
    let samples = read(&gateway.base, "/admin/api/backends").await;
    assert_eq!(backend(&samples, "fault")["latency"]["samples"], 0, "nor a latency sample");
}

/// With `[auth]` the console is the administrators', from every address: a non-administrator's key from this
/// machine (or any process on it, with no key) reads nothing.
#[tokio::test]
async fn with_auth_the_console_needs_an_administrator_from_every_address() {
    let (demo_url, _demo) = demo_backend().await;
    let gateway = TestGateway::start_with("", &auth_section(), &backend_toml("demo", &demo_url, "")).await;
    let base = gateway.base.as_str();
    let endpoints = ["/admin/api/backends", "/admin/api/catalog", "/admin/api/calls", "/admin/api/calls/unknown"];
    for path in endpoints {
        for (place, from) in [("this machine", None), ("another machine", Some(ANOTHER_MACHINE))] {
            let anonymous = get_as(base, path, from, None).await;
            assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path} from {place}");
            assert!(anonymous.headers["www-authenticate"].to_str().unwrap().starts_with("Bearer"), "{path}");
            assert!(anonymous.message().contains("requires credentials"), "{}", anonymous.body);
            assert_api_headers(&anonymous);

            let bob = get_as(base, path, from, Some(BOB_KEY)).await;
            assert_eq!(bob.status, StatusCode::FORBIDDEN, "{path} from {place}: bob is no administrator");
            assert!(bob.message().contains("admin_principals"), "{}", bob.body);
            assert!(bob.body.get("backends").is_none() && bob.body.get("calls").is_none(), "nothing leaks");
            assert_api_headers(&bob);

            for admin in [ALICE_KEY, CAROL_KEY] {
                let admitted = get_as(base, path, from, Some(admin)).await;
                assert_eq!(admitted.status, StatusCode::OK, "{path} from {place}: listed, or in group admin");
                assert_api_headers(&admitted);
            }
            let forged = get_as(base, path, from, Some("sy_not_a_key")).await;
            assert_eq!(forged.status, StatusCode::UNAUTHORIZED, "{path} from {place}");
            assert!(forged.headers["www-authenticate"].to_str().unwrap().contains("invalid_token"));
        }
    }
    let alice = format!("Bearer {ALICE_KEY}");
    let rebound = get(base, "/admin/api/calls", &[("host", "evil.example:8808"), ("authorization", &alice)]).await;
    assert_eq!(rebound.status, StatusCode::FORBIDDEN, "a DNS-rebound page");
    let foreign = get(base, "/admin/api/calls", &[("origin", "https://evil.example"), ("authorization", &alice)]).await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN, "another origin's page");

    let missing = get(base, "/admin/api/nothing", &[("authorization", &alice)]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.message().contains("/admin/api/backends"), "{}", missing.body);
    assert_api_headers(&missing);
    for index in ["/admin/api", "/admin/api/"] {
        assert_eq!(get(base, index, &[("authorization", &alice)]).await.status, StatusCode::NOT_FOUND, "{index}");
    }
    assert_eq!(get(base, "/admin/api/nothing", &[]).await.status, StatusCode::UNAUTHORIZED);
    let written = reqwest::Client::new().post(format!("{base}/admin/api/calls")).send().await.expect("POST");
    assert_eq!(written.status(), StatusCode::METHOD_NOT_ALLOWED, "read-only");
}

/// `[auth] console_loopback = true`: this machine reads the console without a credential — never with a
/// non-administrator's, and never through a proxy.
#[tokio::test]
async fn console_loopback_admits_this_machine_without_a_credential_only() {
    let (demo_url, _demo) = demo_backend().await;
    let sections = auth_section_with("console_loopback = true");
    let gateway = TestGateway::start_with("", &sections, &backend_toml("demo", &demo_url, "")).await;
    let base = gateway.base.as_str();
    let bob = format!("Bearer {BOB_KEY}");
    let alice = format!("Bearer {ALICE_KEY}");
    for path in ["/admin/api/backends", "/admin/api/calls"] {
        assert_eq!(get(base, path, &[]).await.status, StatusCode::OK, "{path}: this machine, no credential");
        let local_bob = get(base, path, &[("authorization", &bob)]).await;
        assert_eq!(local_bob.status, StatusCode::FORBIDDEN, "{path}: a non-administrator's key, even from here");
        let far = get(base, path, &[ANOTHER_MACHINE]).await;
        assert_eq!(far.status, StatusCode::UNAUTHORIZED, "{path}: another machine needs a credential");
        assert_eq!(get(base, path, &[ANOTHER_MACHINE, ("authorization", &alice)]).await.status, StatusCode::OK);
    }
    for proxy in ["forwarded", "x-forwarded-for", "x-real-ip"] {
        let proxied = get(base, "/admin/api/backends", &[(proxy, "for=203.0.113.9")]).await;
        assert_eq!(proxied.status, StatusCode::UNAUTHORIZED, "{proxy}: a proxy's request is not this machine's");
    }
}

/// `/readyz` needs no credential and says every state, but the error texts (backends' and issuers' own words)
/// only to those who may read the console.
#[tokio::test]
async fn readyz_shows_error_texts_only_to_console_readers() {
    let gateway = TestGateway::start_with("", &auth_section(), &down_toml("down")).await;
    let readyz = |headers: &'static [(&'static str, &'static str)]| {
        let base = gateway.base.clone();
        async move {
            let mut request = reqwest::Client::new().get(format!("{base}/readyz"));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let response = request.send().await.expect("readyz answers");
            assert_eq!(response.status(), StatusCode::OK);
            serde_json::from_str::<Value>(&response.text().await.unwrap()).expect("JSON")
        }
    };
    const ALICE: &[(&str, &str)] = &[("authorization", "Bearer sy_console_alice")];
    const BOB: &[(&str, &str)] = &[("authorization", "Bearer sy_console_bob")];
    let admin = readyz(ALICE).await;
    assert_eq!(admin["backends"]["down"]["status"], "failed", "{admin}");
    assert!(admin["backends"]["down"]["error"].as_str().is_some_and(|text| !text.is_empty()), "{admin}");
    for (who, headers) in [("no credential", &[][..]), ("bob", BOB), ("another machine", &[ANOTHER_MACHINE][..])] {
        let report = readyz(headers).await;
        assert_eq!(report["backends"]["down"]["status"], "failed", "{who}: the state is told: {report}");
        assert_eq!(report["ledger"]["status"], "ok", "{who}: {report}");
        assert!(!report.to_string().contains("\"error\""), "{who}: no error text: {report}");
    }
    let open = TestGateway::start("", &down_toml("down")).await;
    let local = reqwest::get(format!("{}/readyz", open.base)).await.unwrap().text().await.unwrap();
    assert!(local.contains("\"error\""), "without [auth] this machine reads the console, and the texts: {local}");
}

#[tokio::test]
async fn without_credentials_configured_only_this_machine_reads_the_console() {
    let gateway = TestGateway::start("", &down_toml("down")).await;
    assert_eq!(get(&gateway.base, "/admin/api/backends", &[]).await.status, StatusCode::OK);
    let elsewhere = get(&gateway.base, "/admin/api/backends", &[ANOTHER_MACHINE]).await;
    assert_eq!(elsewhere.status, StatusCode::FORBIDDEN, "no credential could make `anonymous` an administrator");
}

#[tokio::test]
async fn the_page_is_static_self_contained_and_locked_down() {
    let gateway = TestGateway::start("", &down_toml("down")).await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let redirect = http.get(format!("{}/ui", gateway.base)).send().await.expect("GET /ui");
    assert_eq!(redirect.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(redirect.headers()["location"], "/ui/");

    let page =
        http.get(format!("{}/ui/", gateway.base)).header(ANOTHER_MACHINE.0, ANOTHER_MACHINE.1).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK, "the page holds no data: anyone may load it");
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let policy = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    for directive in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(policy.contains(directive), "{policy}");
    }
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    // Every file the page loads is one of its own, by a relative URL: nothing from another host.
    let references: Vec<&str> =
        html.split(['"', '\'']).filter(|part| part.ends_with(".js") || part.ends_with(".css")).collect();
    assert_eq!(references, ["console.css", "console.js"]);
    assert!(
        !html.contains("http://") && !html.contains("https://") && !html.contains("<script>"),
        "no CDN, no inline script"
    );
    for (file, kind) in [("console.css", "text/css; charset=utf-8"), ("console.js", "text/javascript; charset=utf-8")] {
        let asset = http.get(format!("{}/ui/{file}", gateway.base)).send().await.unwrap();
        assert_eq!((asset.status(), asset.headers()["content-type"].to_str().unwrap()), (StatusCode::OK, kind));
        let text = asset.text().await.unwrap();
        assert!(!text.contains("http://") && !text.contains("https://"), "{file} reaches no other host");
    }
    let script = http.get(format!("{}/ui/console.js", gateway.base)).send().await.unwrap().text().await.unwrap();
    assert!(script.contains("../admin/api/") && !script.contains("innerHTML"), "relative API, text only");
    assert_eq!(
        http.get(format!("{}/ui/secrets.txt", gateway.base)).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}
