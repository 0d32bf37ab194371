//! Backend OAuth through the running gateway: an `authorization_code` backend (the test
//! authorization server's protected `/mcp`) reached by two principals. The first use answers with the
//! authorization URL — `-32042` URL elicitation for an agent that declared `elicitation.url`, a sentence in a
//! `not_delivered` result otherwise — the test follows the URL as the user (the server approves and redirects to
//! `/oauth/callback`), and each principal's calls then carry its own token. Also: a forged or replayed `state` at
//! the callback is a 400 page, and a backend that refuses every token is asked once more, then not_delivered.
//! A `client_credentials` backend (the fault backend wanting a bearer token) is discovered and called with the
//! machine token (client secret or `private_key_jwt`), and a token endpoint answering garbage stops the call before
//! the backend: not_delivered, safe to retry.

use jsonwebtoken::Algorithm;
use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::backend_oauth::{jwt_claims, token_requests};
use crate::backend_oauth_jwt::CLIENT_KEY_1;
use crate::support::assert::text;
use crate::support::auth_server::AuthServer;
use crate::support::browser::Browser;
use crate::support::client_assertion::ClientKey;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ScratchDir, TestGateway, backend_toml};

pub(crate) const OAUTH: &str = "[backends.oauth]\ngrant = \"authorization_code\"\n";

pub(crate) async fn gateway(auth: &AuthServer) -> TestGateway {
    let backends = backend_toml("prot", &format!("{}/mcp", auth.issuer), &format!("prefix = \"\"\n{OAUTH}"));
    TestGateway::start_with("", &api_keys(), &backends).await
}

/// Opens an authorization URL (the gateway's start page) as the user's browser would, consents, and lets the
/// server approve and redirect to the callback: the callback page.
async fn follow(url: &str) -> (reqwest::StatusCode, String) {
    Browser::new().authorize(url).await
}

pub(crate) fn bearer_subject(token: &str) -> String {
    jwt_claims(token)["sub"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn each_principal_authorizes_once_and_its_calls_carry_its_own_token() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;

    // Alice declared URL-mode elicitation: tools/list names the URL with -32042, nothing reached the tool.
    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = alice.request("tools/list", json!({})).await;
    assert_eq!(listed["error"]["code"], -32042, "{listed}");
    let elicitation = &listed["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url");
    auth.set_claims(|claims| claims.subject = "alice".into());
    let (status, page) = follow(elicitation["url"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("return to your agent") && page.contains("prot"), "{page}");

    assert_eq!(alice.tool_names().await, ["whoami"]);
    let called = alice.call_tool("whoami", json!({})).await;
    let token = text(&called).to_owned();
    assert_eq!(bearer_subject(&token), "alice");

    // Bob declared nothing: the call is not sent, and the sentence carries the URL.
    let mut bob = Agent::with_token(gateway.mcp(), BOB_KEY).connect(json!({})).await;
    let refused = bob.call_tool("whoami", json!({})).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered");
    let sentence = text(&refused).to_owned();
    let url = sentence.split_whitespace().find(|word| word.starts_with("http")).expect("the URL in the sentence");
    auth.set_claims(|claims| claims.subject = "bob".into());
    let (status, _) = follow(url).await;
    assert_eq!(status, 200);
    let called = bob.call_tool("whoami", json!({})).await;
    let bobs = text(&called).to_owned();
    assert_eq!(bearer_subject(&bobs), "bob");

    // Alice still gets her own token.
    let called = alice.call_tool("whoami", json!({})).await;
    assert_eq!(bearer_subject(text(&called)), "alice");
    let calls: Vec<Value> = auth.requests().into_iter().filter(|request| request["mcp"] == "tools/call").collect();
    assert_eq!(calls.len(), 3, "the refused call never reached the tool: {calls:?}");
}

/// Alice's first authorization URL (the gateway's start page), from her agent.
pub(crate) async fn start_url_for_alice(gateway: &TestGateway) -> String {
    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = alice.request("tools/list", json!({})).await;
    listed["error"]["data"]["elicitations"][0]["url"].as_str().unwrap().to_owned()
}

/// Alice's first authorization URL followed by a browser that consents: the browser and the callback URL the
/// authorization server sent it to (not yet visited).
async fn callback_for_alice(gateway: &TestGateway) -> (Browser, String) {
    let browser = Browser::new();
    let callback = browser.callback_for(&start_url_for_alice(gateway).await).await;
    (browser, callback)
}

#[tokio::test]
async fn forged_or_replayed_state_is_a_400_page() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    // The user's browser is sent to the callback once; capture the redirect and present it twice.
    let (browser, callback) = callback_for_alice(&gateway).await;
    assert_eq!(browser.get(&callback).await.status(), 200);
    let replayed = browser.get(&callback).await;
    assert_eq!(replayed.status(), 400);
    assert!(replayed.text().await.unwrap().contains("already used"));

    let base = gateway.mcp().trim_end_matches("/mcp").to_owned();
    let forged = browser.get(&format!("{base}/oauth/callback?code=x&state=forged")).await;
    assert_eq!(forged.status(), 400);
    let denied = browser.get(&format!("{base}/oauth/callback?error=access_denied")).await;
    assert_eq!(denied.status(), 400);
    assert!(denied.text().await.unwrap().contains("access_denied"));
}

#[tokio::test]
async fn a_callback_naming_another_issuer_is_a_400_page_and_no_code_is_exchanged() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let (browser, callback) = callback_for_alice(&gateway).await;

    // RFC 9207 §2.4: an `iss` that is present is compared even though this server does not advertise it.
    let mixed_up = browser.get(&format!("{callback}&iss=https%3A%2F%2Fevil.example.com")).await;
    assert_eq!(mixed_up.status(), 400);
    let page = mixed_up.text().await.unwrap();
    assert!(page.contains("evil.example.com") && page.contains(&auth.issuer) && page.contains("RFC 9207"), "{page}");
    let exchanged = auth.requests().iter().filter(|request| request["endpoint"] == "token").count();
    assert_eq!(exchanged, 0, "the code was never sent to the token endpoint");
    let again = browser.get(&callback).await;
    assert_eq!(again.status(), 400, "the refused response spent its state");
}

#[tokio::test]
async fn a_backend_that_refuses_every_token_is_asked_once_more_then_not_delivered() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = alice.request("tools/list", json!({})).await;
    follow(listed["error"]["data"]["elicitations"][0]["url"].as_str().unwrap()).await;
    assert_eq!(alice.tool_names().await, ["whoami"]);

    auth.behave(|behaviour| behaviour.reject_tokens = true);
    let before = auth.requests().len();
    let refused = alice.call_tool("whoami", json!({})).await;
    assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered", "{refused}");
    let posts = auth.requests()[before..].iter().filter(|request| request["mcp"] == "tools/call").count();
    assert_eq!(posts, 2, "sent once, and once more with a fresh token; never a third time");
}

/// A `client_credentials` backend: the fault backend, which wants a bearer token, whose tokens come from `auth`
/// (named as `authorization_server`, so no resource metadata is needed) for the client `gw` with `credential`.
fn machine_backend(backend: &FaultBackend, auth: &AuthServer, credential: &str) -> String {
    let oauth = format!(
        "prefix = \"\"\n[backends.oauth]\ngrant = \"client_credentials\"\nclient_id = \"gw\"\n\
         authorization_server = \"{}\"\n{credential}",
        auth.issuer
    );
    backend_toml("fault", &backend.url(), &oauth)
}

#[tokio::test]
async fn a_client_credentials_backend_is_discovered_and_called_with_the_machine_token() {
    let scratch = ScratchDir::new("cc-secret");
    let secret_file = scratch.path().join("secret");
    std::fs::write(&secret_file, "s3cret\n").expect("write the secret");
    let key_file = format!("{}/tests/fixtures/client-ec-p256-1.pem", env!("CARGO_MANIFEST_DIR"));
    for method in ["client_secret_basic", "private_key_jwt"] {
        let auth = AuthServer::start("unused").await;
        let credential = if method == "private_key_jwt" {
            auth.behave(|b| {
                b.auth_methods = vec![method.to_owned()];
                b.client_key = Some(ClientKey::new("gw", CLIENT_KEY_1, Algorithm::ES256));
            });
            format!("private_key = {{ file = {key_file:?} }}\n")
        } else {
            auth.behave(|b| {
                b.auth_methods = vec![method.to_owned()];
                b.client = Some(("gw".to_owned(), "s3cret".to_owned()));
            });
            format!("client_secret = {{ file = {:?} }}\n", secret_file.display().to_string())
        };
        let backend = FaultBackend::start(Script { require_bearer: true, ..Script::default() }).await;
        let gateway = TestGateway::start_with("", &api_keys(), &machine_backend(&backend, &auth, &credential)).await;

        // The catalog was discovered with the machine token (after the backend's first 401).
        let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({})).await;
        assert_eq!(alice.tool_names().await, ["echo"], "{method}");
        let bearer = |rpc: &str| {
            let request = backend.requests().into_iter().rev().find(|r| r.rpc_method.as_deref() == Some(rpc));
            request.and_then(|r| r.header("authorization").map(str::to_owned)).unwrap_or_default()
        };
        let listed_with = bearer("tools/list");
        let token = listed_with.strip_prefix("Bearer ").unwrap_or_else(|| panic!("{method}: {listed_with:?}"));
        let claims = jwt_claims(token);
        assert_eq!(
            (claims["iss"].as_str(), claims["aud"].as_str()),
            (Some(auth.issuer.as_str()), Some(backend.url().as_str()))
        );

        // Alice's call reaches the backend carrying the same machine token.
        let called = alice.call_tool("echo", json!({"text": "hi"})).await;
        assert_eq!(called["result"]["content"][0]["text"], "hi", "{method}: {called}");
        assert_eq!(backend.executions("echo"), 1);
        assert_eq!(bearer("tools/call"), listed_with, "{method}");
        let requests = token_requests(&auth);
        assert_eq!(requests.len(), 1, "{method}: one grant, reused: {requests:?}");
        assert_eq!(
            (requests[0]["form"]["grant_type"].as_str(), requests[0]["auth_method"].as_str()),
            (Some("client_credentials"), Some(method))
        );
        assert!(auth.requests().iter().all(|r| r["endpoint"] != "authorize"), "{method}: no user was involved");
    }
}

#[tokio::test]
async fn a_token_endpoint_answering_garbage_stops_the_call_before_the_backend() {
    let scratch = ScratchDir::new("cc-garbage");
    let secret_file = scratch.path().join("secret");
    std::fs::write(&secret_file, "s3cret").expect("write the secret");
    let credential = format!("client_secret = {{ file = {:?} }}\n", secret_file.display().to_string());
    for (garbage, expected) in [
        (("text/html", "<html>502 Bad Gateway</html>"), "not a JSON object"),
        (("application/json", "{\"token_type\": \"Bearer\", \"expires_in\": 30}"), "no usable `access_token`"),
    ] {
        let auth = AuthServer::start("unused").await;
        // Shorter than the refresh margin: every use of the token asks the endpoint for a new one.
        auth.set_claims(|claims| claims.lifetime_secs = 30);
        auth.behave(|b| {
            b.auth_methods = vec!["client_secret_basic".to_owned()];
            b.client = Some(("gw".to_owned(), "s3cret".to_owned()));
        });
        let backend = FaultBackend::start(Script { require_bearer: true, ..Script::default() }).await;
        let gateway = TestGateway::start_with("", &api_keys(), &machine_backend(&backend, &auth, &credential)).await;
        let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({})).await;
        assert_eq!(alice.tool_names().await, ["echo"], "discovered while the endpoint still worked");

        auth.behave(|b| b.token_garbage = Some(garbage));
        let refused = alice.call_tool("echo", json!({"text": "hi"})).await;
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered", "{refused}");
        let text = text(&refused).to_owned();
        assert!(text.contains("token endpoint") && text.contains(expected), "{expected}: {text}");
        assert_eq!(backend.rpc_count("tools/call"), 0, "{expected}: the backend never saw the call");

        // Not delivered means safe to retry: once the endpoint recovers, the same call runs, once.
        auth.behave(|b| b.token_garbage = None);
        let retried = alice.call_tool("echo", json!({"text": "hi"})).await;
        assert_eq!(retried["result"]["content"][0]["text"], "hi", "{retried}");
        assert_eq!((backend.rpc_count("tools/call"), backend.executions("echo")), (1, 1));
    }
}

/// A listener that accepts connections, counts them, and never answers.
async fn hanging_listener() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/.well-known/oauth-protected-resource", listener.local_addr().expect("address"));
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&accepted);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    (url, accepted)
}

/// A protected backend whose every answer is a 401 pointing at `metadata_url`.
async fn challenging_backend(metadata_url: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let challenge = format!("Bearer resource_metadata=\"{metadata_url}\"");
    let app = axum::Router::new().fallback(move || {
        let challenge = challenge.clone();
        async move { (axum::http::StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)], "") }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

#[tokio::test]
async fn a_hanging_authorization_server_delays_no_tools_list_for_long_and_is_not_asked_again() {
    let auth = AuthServer::start("unused").await;
    let (hanging, accepted) = hanging_listener().await;
    let slow = challenging_backend(&hanging).await;
    let backends = format!(
        "{}{}",
        backend_toml("prot", &format!("{}/mcp", auth.issuer), &format!("prefix = \"p_\"\n{OAUTH}")),
        backend_toml("slow", &slow, &format!("prefix = \"s_\"\n{OAUTH}")),
    );
    let gateway = TestGateway::start_with("", &api_keys(), &backends).await;

    // The probes run in parallel under one deadline: prot's URL comes back although slow's discovery hangs.
    let started = std::time::Instant::now();
    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = alice.request("tools/list", json!({})).await;
    let waited = started.elapsed();
    assert_eq!(listed["error"]["code"], -32042, "{listed}");
    let elicitations = listed["error"]["data"]["elicitations"].as_array().expect("elicitations").clone();
    assert_eq!(elicitations.len(), 1, "{listed}");
    assert!(elicitations[0]["message"].as_str().unwrap().contains("`prot`"), "{listed}");
    assert!(waited < std::time::Duration::from_secs(9), "tools/list waited {waited:?} (the OAuth timeout is 15 s)");
    assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) >= 1, "slow's metadata URL was asked");

    // Once slow's discovery has failed (its deadline is the 15 s OAuth timeout), it is held off for everyone.
    tokio::time::sleep(std::time::Duration::from_secs(16).saturating_sub(started.elapsed())).await;
    let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
    let mut bob = Agent::with_token(gateway.mcp(), BOB_KEY).connect(json!({})).await;
    let started = std::time::Instant::now();
    let listed = bob.request("tools/list", json!({})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "held off: {:?}", started.elapsed());
    let urls = listed["result"]["_meta"]["switchyard/authorization"].as_array().expect("prot's URL").clone();
    assert_eq!(urls.len(), 1, "{listed}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), before, "the hanging server was not asked again");
}
