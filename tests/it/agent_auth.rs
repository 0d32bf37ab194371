//! Agent authentication through the running gateway: API keys and JWTs from the test
//! authorization server, every bad credential answered with its status and `WWW-Authenticate` challenge before
//! anything runs (the fault backend's executions do not move), the Protected Resource Metadata documents, and an
//! issuer whose keys cannot be loaded failing closed with `/readyz` saying so.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::auth::{api_key_digest, hex};

use crate::support::auth_server::{AuthServer, JwksMode, mint_with, now};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, Reply, TestGateway, backend_toml};

pub const ALICE_KEY: &str = "sy_alice-test-key";
pub const BOB_KEY: &str = "sy_bob-test-key";

/// `[[auth.api_keys]]` for alice (group `ops`) and bob (group `readers`).
pub fn api_keys() -> String {
    format!(
        "[[auth.api_keys]]\nprincipal = \"alice\"\nsha256 = \"{}\"\ngroups = [\"ops\"]\n\
         [[auth.api_keys]]\nprincipal = \"bob\"\nsha256 = \"{}\"\ngroups = [\"readers\"]\n",
        hex(&api_key_digest(ALICE_KEY)),
        hex(&api_key_digest(BOB_KEY)),
    )
}

fn echo(id: u64) -> Vec<u8> {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "hi"}}});
    serde_json::to_vec(&call).expect("json")
}

fn challenge(reply: &Reply) -> String {
    let value = reply.headers.get("www-authenticate").unwrap_or_else(|| panic!("no challenge: {}", reply.raw));
    value.to_str().expect("ascii").to_owned()
}

/// Sends `tools/call` in `agent`'s session with exactly `authorization` (none for `[]`) and checks the refusal.
async fn refused(agent: &Agent, authorization: &[&str], status: StatusCode, code: Option<&str>) -> Reply {
    let http = reqwest::Client::new();
    let mut request = http
        .post(&agent.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", agent.session.as_deref().expect("a session"))
        .body(echo(9));
    for value in authorization {
        request = request.header("authorization", *value);
    }
    let response = request.send().await.expect("gateway reachable");
    let (reply_status, headers) = (response.status(), response.headers().clone());
    let raw = response.text().await.unwrap_or_default();
    let reply = Reply { status: reply_status, headers, body: serde_json::from_str(&raw).ok(), raw };
    assert_eq!(reply.status, status, "{authorization:?}: {}", reply.raw);
    let challenge = challenge(&reply);
    match code {
        Some(code) => assert!(challenge.contains(&format!("error=\"{code}\"")), "{authorization:?}: {challenge}"),
        None => assert!(!challenge.contains("error="), "{authorization:?}: {challenge}"),
    }
    let body = reply.body.as_ref().unwrap_or_else(|| panic!("a JSON-RPC error body: {}", reply.raw));
    assert!(body["error"]["message"].is_string() && body["id"].is_null(), "{body}");
    reply
}

#[tokio::test]
async fn api_keys_admit_their_principals_and_every_bad_credential_is_refused_before_anything_runs() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    assert!(alice.call_tool("fault__echo", json!({"text": "hi"})).await["result"].is_object());
    assert_eq!(fault.executions("echo"), 1);

    let missing = refused(&alice, &[], StatusCode::UNAUTHORIZED, None).await;
    assert_eq!(challenge(&missing), "Bearer", "API keys only: no OAuth metadata to point to");
    refused(&alice, &["Basic YWxpY2U6cHc="], StatusCode::BAD_REQUEST, Some("invalid_request")).await;
    let twice = [format!("Bearer {ALICE_KEY}"), format!("Bearer {ALICE_KEY}")];
    refused(&alice, &[&twice[0], &twice[1]], StatusCode::BAD_REQUEST, Some("invalid_request")).await;
    refused(&alice, &["Bearer "], StatusCode::BAD_REQUEST, Some("invalid_request")).await;
    let huge = format!("Bearer {}", "k".repeat(16 * 1024 + 1));
    refused(&alice, &[&huge], StatusCode::UNAUTHORIZED, Some("invalid_token")).await;
    let unknown = refused(&alice, &["Bearer sy_nobody"], StatusCode::UNAUTHORIZED, Some("invalid_token")).await;
    assert!(unknown.raw.contains("not known"), "{}", unknown.raw);
    assert_eq!(fault.executions("echo"), 1, "no refused request ran the tool");

    let mut stranger = Agent::new(gateway.mcp());
    let reply = stranger.initialize("2025-11-25").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "no session without credentials");
    assert!(stranger.session.is_none());
    let http = reqwest::Client::new();
    assert_eq!(http.get(format!("{}/healthz", gateway.base)).send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(http.get(format!("{}/readyz", gateway.base)).send().await.unwrap().status(), StatusCode::OK);
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", gateway.base);
    assert_eq!(http.get(metadata).send().await.unwrap().status(), StatusCode::NOT_FOUND, "no OAuth with keys only");
}

#[tokio::test]
async fn a_session_id_is_useless_with_another_principals_credentials() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), "")).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut thief = Agent::with_token(gateway.mcp(), BOB_KEY);
    thief.session = alice.session.clone();
    let stolen = thief.post_raw(echo(3), &[]).await;
    assert_eq!(stolen.status, StatusCode::NOT_FOUND, "{}", stolen.raw);
    assert!(stolen.raw.contains("another principal"), "{}", stolen.raw);
    assert_eq!(fault.executions("echo"), 0);
    assert!(alice.call_tool("fault__echo", json!({"text": "mine"})).await["result"].is_object());
    assert_eq!(fault.executions("echo"), 1, "the owner still uses it");
}

/// A gateway accepting JWTs from `issuer` (groups from `groups`, scope `mcp:tools` required) in front of `fault`.
async fn jwt_gateway(issuer: &AuthServer, fault: &FaultBackend, ready: bool) -> TestGateway {
    let sections = format!(
        "[auth.jwt]\nissuer = \"{}\"\njwks_url = \"{}\"\ngroups_claim = \"groups\"\nrequired_scopes = [\"mcp:tools\"]\n",
        issuer.issuer,
        issuer.jwks_url()
    );
    let backends = backend_toml("fault", &fault.url(), "");
    if ready {
        TestGateway::start_with("", &sections, &backends).await
    } else {
        TestGateway::launch("", &sections, &backends).await
    }
}

fn unsigned(claims: &Value) -> String {
    let part = |value: &Value| URL_SAFE_NO_PAD.encode(value.to_string());
    format!("{}.{}.", part(&json!({"alg": "none", "typ": "JWT", "kid": "k1"})), part(claims))
}

fn hmac_with_the_public_key(claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".to_owned());
    let secret = EncodingKey::from_secret(include_bytes!("../fixtures/auth-rsa-1.pub.pem")).expect("key");
    jsonwebtoken::encode(&header, claims, &secret).expect("signed")
}

#[tokio::test]
async fn jwts_are_checked_and_every_bad_token_is_refused_with_its_challenge() {
    let issuer = AuthServer::start("unused").await;
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = jwt_gateway(&issuer, &fault, true).await;
    let resource = gateway.mcp();
    let good = issuer.mint(&issuer.claims(&resource));
    let mut alice = Agent::connected_as(resource.clone(), &good).await;
    assert!(alice.call_tool("fault__echo", json!({"text": "hi"})).await["result"].is_object());

    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", gateway.base);
    let missing = refused(&alice, &[], StatusCode::UNAUTHORIZED, None).await;
    assert_eq!(challenge(&missing), format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"mcp:tools\""));
    let claims = |change: &dyn Fn(&mut Value)| {
        let mut claims = issuer.claims(&resource);
        change(&mut claims);
        claims
    };
    let bad_tokens = [
        ("expired", issuer.mint(&claims(&|c| c["exp"] = json!(now() - 3600)))),
        ("not yet valid", issuer.mint(&claims(&|c| c["nbf"] = json!(now() + 3600)))),
        ("wrong issuer", issuer.mint(&claims(&|c| c["iss"] = json!("https://evil.example.com")))),
        ("wrong audience", issuer.mint(&claims(&|c| c["aud"] = json!("https://elsewhere.example.com/mcp")))),
        ("unknown kid", mint_with(1, "k9", &claims(&|_| {}))),
        ("alg none", unsigned(&claims(&|_| {}))),
        ("HS256 with the public key", hmac_with_the_public_key(&claims(&|_| {}))),
        ("signed by a key the issuer does not publish", mint_with(2, "k1", &claims(&|_| {}))),
    ];
    for (what, token) in &bad_tokens {
        let header = format!("Bearer {token}");
        let reply = refused(&alice, &[&header], StatusCode::UNAUTHORIZED, Some("invalid_token")).await;
        assert!(challenge(&reply).starts_with(&format!("Bearer resource_metadata=\"{metadata_url}\"")), "{what}");
    }
    let scopeless = format!("Bearer {}", issuer.mint(&claims(&|c| c["scope"] = json!("profile"))));
    let reply = refused(&alice, &[&scopeless], StatusCode::FORBIDDEN, Some("insufficient_scope")).await;
    assert!(challenge(&reply).contains("scope=\"mcp:tools\""), "{}", challenge(&reply));
    assert_eq!(fault.executions("echo"), 1, "no refused token ran the tool");

    let backend_url = format!("{}/mcp/fault", gateway.base);
    let mut on_backend = Agent::new(backend_url.clone());
    let reply = on_backend.initialize("2025-11-25").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(challenge(&reply).contains("/.well-known/oauth-protected-resource/mcp/fault\""), "{}", challenge(&reply));
    let for_backend = issuer.mint(&issuer.claims(&backend_url));
    let mut scoped = Agent::connected_as(backend_url, &for_backend).await;
    assert!(scoped.call_tool("echo", json!({"text": "hi"})).await["result"].is_object(), "per-backend audience");
}

#[tokio::test]
async fn protected_resource_metadata_names_each_resource_exactly() {
    let issuer = AuthServer::start("unused").await;
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = jwt_gateway(&issuer, &fault, true).await;
    let http = reqwest::Client::new();
    let well_known = format!("{}/.well-known/oauth-protected-resource", gateway.base);
    let document = |path: &str| {
        let url = format!("{well_known}{path}");
        let http = http.clone();
        async move {
            let response = http.get(url).send().await.expect("reachable");
            let status = response.status();
            (status, serde_json::from_str(&response.text().await.unwrap_or_default()).unwrap_or(Value::Null))
        }
    };
    let (status, mcp) = document("/mcp").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        mcp,
        json!({"resource": gateway.mcp(), "authorization_servers": [issuer.issuer],
               "bearer_methods_supported": ["header"], "scopes_supported": ["mcp:tools"]})
    );
    assert_eq!(document("/mcp/fault").await.1["resource"], format!("{}/mcp/fault", gateway.base));
    assert_eq!(document("").await.1["resource"], gateway.base);
    assert_eq!(document("/mcp/nope").await.0, StatusCode::NOT_FOUND, "only configured backends");
    assert_eq!(document("/elsewhere").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_issuer_whose_keys_cannot_be_loaded_fails_closed_and_readyz_says_so() {
    for mode in [JwksMode::Down, JwksMode::Garbage] {
        let issuer = AuthServer::start("unused").await;
        issuer.set_jwks_mode(mode);
        let fault = FaultBackend::start(Script::default()).await;
        let gateway = jwt_gateway(&issuer, &fault, false).await;
        let http = reqwest::Client::new();
        let mut readiness = Value::Null;
        for _ in 0..200 {
            let response = http.get(format!("{}/readyz", gateway.base)).send().await.expect("reachable");
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{mode:?}");
            readiness = serde_json::from_str(&response.text().await.expect("body")).expect("JSON");
            if readiness["backends"]["fault"]["status"] == "discovered" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        assert_eq!(readiness["auth"]["status"], "unavailable", "{readiness}");
        // Why is the console's to tell (its readers are administrators, and no token can be checked now).
        assert!(readiness["auth"].get("error").is_none(), "no error text without credentials: {readiness}");
        assert!(!readiness.to_string().contains(&issuer.jwks_url()), "{readiness}");
        let token = issuer.mint(&issuer.claims(&gateway.mcp()));
        let mut agent = Agent::with_token(gateway.mcp(), &token);
        let reply = agent.initialize("2025-11-25").await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{mode:?}: {}", reply.raw);
        assert!(challenge(&reply).contains("error=\"invalid_token\""), "{}", challenge(&reply));
        assert_eq!(fault.rpc_count("tools/call"), 0);
    }
}
