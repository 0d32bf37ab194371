//! One namespace of principals through the running gateway: a JWT whose `sub` is an API key's principal name is
//! another principal (its own sessions, its own idempotent calls), a token is accepted only at the endpoint whose
//! resource it names, and agents without credentials (`anonymous`, when `[auth]` lets them in) are refused an
//! `authorization_code` backend with a sentence naming it, while principals with credentials authorize it.

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::router::{IDEMPOTENCY_META, REPLAYED_META};

use crate::agent_auth::{ALICE_KEY, api_keys};
use crate::support::assert::text;
use crate::support::auth_server::AuthServer;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

/// API keys for alice and bob beside JWTs from `issuer` (whose tokens say `sub = "alice"`), before `fault`.
async fn mixed_gateway(issuer: &AuthServer, fault: &FaultBackend) -> TestGateway {
    let sections =
        format!("{}[auth.jwt]\nissuer = \"{}\"\njwks_url = \"{}\"\n", api_keys(), issuer.issuer, issuer.jwks_url());
    TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await
}

/// `tools/call` of `fault__echo` with an idempotency key.
fn keyed_echo(id: u64, key: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "fault__echo", "arguments": {"text": "pay 10"}, "_meta": {IDEMPOTENCY_META: key}}})
}

#[tokio::test]
async fn a_jwt_named_like_an_api_key_gets_neither_its_session_nor_its_idempotent_calls() {
    let issuer = AuthServer::start("unused").await;
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = mixed_gateway(&issuer, &fault).await;
    let by_key = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let first = by_key.send(&keyed_echo(2, "order-1")).await;
    assert!(first.body.as_ref().is_some_and(|body| body["result"].is_object()), "{}", first.raw);
    assert_eq!(fault.executions("echo"), 1);

    let token = issuer.mint(&issuer.claims(&gateway.mcp()));
    let mut thief = Agent::with_token(gateway.mcp(), &token);
    thief.session = by_key.session.clone();
    let stolen = thief.send(&keyed_echo(3, "order-1")).await;
    assert_eq!(stolen.status, StatusCode::NOT_FOUND, "API-key alice's session: {}", stolen.raw);
    assert!(stolen.raw.contains("another principal"), "{}", stolen.raw);

    let by_token = Agent::connected_as(gateway.mcp(), &token).await;
    let own = by_token.send(&keyed_echo(4, "order-1")).await;
    let result = &own.body.as_ref().expect("a JSON-RPC answer")["result"];
    assert_ne!(result["_meta"][REPLAYED_META], true, "not API-key alice's call: {result}");
    assert_eq!(fault.executions("echo"), 2, "the token's principal ran its own call");
    let again = by_key.send(&keyed_echo(5, "order-1")).await;
    assert_eq!(again.body.as_ref().expect("answer")["result"]["_meta"][REPLAYED_META], true, "{}", again.raw);
    assert_eq!(fault.executions("echo"), 2, "API-key alice's key still replays her own call");
}

#[tokio::test]
async fn a_token_for_one_endpoint_is_refused_at_the_others() {
    let issuer = AuthServer::start("unused").await;
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = mixed_gateway(&issuer, &fault).await;
    let backend = format!("{}/mcp/fault", gateway.base);
    let for_backend = issuer.mint(&issuer.claims(&backend));
    let for_aggregate = issuer.mint(&issuer.claims(&gateway.mcp()));
    for (url, token, what) in [
        (gateway.mcp(), &for_backend, "a token for /mcp/fault at /mcp"),
        (backend.clone(), &for_aggregate, "a token for /mcp at /mcp/fault"),
        (gateway.mcp(), &issuer.mint(&issuer.claims(&gateway.base)), "a token for the console at /mcp"),
    ] {
        let reply = Agent::with_token(url, token).initialize("2025-11-25").await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{what}: {}", reply.raw);
        let challenge = reply.headers["www-authenticate"].to_str().expect("ascii").to_owned();
        assert!(challenge.contains("error=\"invalid_token\"") && challenge.contains("audience"), "{what}: {challenge}");
    }
    let mut scoped = Agent::connected_as(backend, &for_backend).await;
    assert!(scoped.call_tool("echo", json!({"text": "hi"})).await["result"].is_object());
    let mut aggregate = Agent::connected_as(gateway.mcp(), &for_aggregate).await;
    assert!(aggregate.call_tool("fault__echo", json!({"text": "hi"})).await["result"].is_object());
    assert_eq!(fault.executions("echo"), 2, "only the two accepted tokens ran anything");
}

#[tokio::test]
async fn anonymous_agents_are_refused_an_authorization_code_backend_that_principals_authorize() {
    let auth = AuthServer::start("unused").await;
    let oauth = "prefix = \"\"\n[backends.oauth]\ngrant = \"authorization_code\"\n";
    let backends = backend_toml("prot", &format!("{}/mcp", auth.issuer), oauth);
    let gateway = TestGateway::start_with("", &format!("[auth]\nanonymous = true\n{}", api_keys()), &backends).await;

    let mut anonymous = Agent::new(gateway.mcp()).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = anonymous.request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "no authorization URL for anonymous: {listed}");
    assert!(listed["result"]["_meta"].is_null(), "{listed}");
    assert!(auth.requests().iter().all(|request| request["endpoint"] != "authorize"), "nothing was authorized");

    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = alice.request("tools/list", json!({})).await;
    let url = listed["error"]["data"]["elicitations"][0]["url"].as_str().expect("alice may authorize").to_owned();
    let (status, page) = crate::support::browser::Browser::new().authorize(&url).await;
    assert_eq!(status, 200, "alice authorized in her browser: {page}");
    assert_eq!(alice.tool_names().await, ["whoami"]);
    assert!(alice.call_tool("whoami", json!({})).await["result"]["content"][0]["text"].is_string());

    assert_eq!(anonymous.tool_names().await, ["whoami"], "listed, as for any principal");
    let refused = anonymous.call_tool("whoami", json!({})).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered");
    let sentence = text(&refused);
    assert!(sentence.contains("backend `prot`") && sentence.contains("`anonymous`"), "{sentence}");
    assert!(sentence.contains("needs a credential of its own"), "{sentence}");
    let calls = auth.requests().into_iter().filter(|request| request["mcp"] == "tools/call").count();
    assert_eq!(calls, 1, "only alice's call reached the backend, with her token");
}

#[tokio::test]
async fn check_prints_who_may_use_an_authorization_code_backend_and_refuses_one_nobody_can() {
    let (address, _demo) = switchyard::demo::spawn(([127, 0, 0, 1], 0).into()).await.expect("demo server");
    let dir = crate::support::gateway::ScratchDir::new("principals-check");
    let check = |auth: &str| {
        let backend = format!(
            "[[backends]]\nname = \"docs\"\nurl = \"http://{address}/mcp\"\noauth = {{ grant = \"authorization_code\" }}\n"
        );
        let data = dir.0.join("data").display().to_string();
        let path = dir.0.join("switchyard.toml");
        std::fs::write(&path, format!("[server]\ndata_dir = {data:?}\n{backend}{auth}")).expect("config written");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
        command.arg("check").arg("--config").arg(path);
        async move { command.output().await.expect("switchyard runs") }
    };
    // Discovery finds the backend unauthorized either way (exit status 1); the notes come before that.
    let text = String::from_utf8_lossy(&check("").await.stdout).into_owned();
    let note = "note: backend `docs` authorizes each principal (`authorization_code`): without `[auth]`";
    assert!(text.contains(note), "{text}");
    let shared = format!("[auth]\nanonymous = true\n{}", api_keys());
    let text = String::from_utf8_lossy(&check(&shared).await.stdout).into_owned();
    assert!(text.contains("it is refused to agents without credentials (`anonymous`)"), "{text}");
    let nobody = check("[auth]\nanonymous = true\n").await;
    let error = String::from_utf8_lossy(&nobody.stderr).into_owned();
    assert_eq!(nobody.status.code(), Some(1), "{error}");
    assert!(
        error.contains("backends[0].oauth.grant = \"authorization_code\": expected \"client_credentials\""),
        "{error}"
    );
}
