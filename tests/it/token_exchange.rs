//! Token exchange (RFC 8693) through the running gateway: agents authenticate with JWTs of the test authorization
//! server, and the backend (the server's protected `/mcp`, whose `whoami` answers with the bearer token it got)
//! has `grant = "token_exchange"`. The backend receives a token for its audience carrying the user's `sub`, the
//! exchange is made once per (principal, backend) and reused, a backend's 401 exchanges again once, the server's
//! `invalid_target` is a clear `not_delivered` sentence, an API-key principal is refused before anything is sent,
//! and `actor = true` sends the gateway's own token as `actor_token`.

use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, api_keys};
use crate::backend_oauth::{jwt_claims, token_requests};
use crate::support::assert::text;
use crate::support::auth_server::AuthServer;
use crate::support::gateway::{Agent, ScratchDir, TestGateway, backend_toml};

const EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A gateway taking JWTs of `auth` (and the API keys of `agent_auth`) in front of `auth`'s protected `/mcp`, whose
/// tokens are exchanged by the pre-registered client `gw` (secret in a file under `scratch`); `extra` goes into
/// `[backends.oauth]`.
async fn gateway(auth: &AuthServer, scratch: &ScratchDir, extra: &str) -> TestGateway {
    let secret_file = scratch.path().join("secret");
    std::fs::write(&secret_file, "s3cret\n").expect("write the secret");
    auth.behave(|b| {
        b.auth_methods = vec!["client_secret_basic".to_owned()];
        b.client = Some(("gw".to_owned(), "s3cret".to_owned()));
    });
    let sections =
        format!("{}[auth.jwt]\nissuer = \"{}\"\njwks_url = \"{}\"\n", api_keys(), auth.issuer, auth.jwks_url());
    let oauth = format!(
        "prefix = \"\"\n[backends.oauth]\ngrant = \"token_exchange\"\nclient_id = \"gw\"\n\
         client_secret = {{ file = {:?} }}\nauthorization_server = \"{}\"\n{extra}",
        secret_file.display().to_string(),
        auth.issuer
    );
    TestGateway::start_with("", &sections, &backend_toml("prot", &format!("{}/mcp", auth.issuer), &oauth)).await
}

/// An agent of `subject` with a JWT of `auth` for the gateway's `/mcp`.
async fn user(auth: &AuthServer, gateway: &TestGateway, subject: &str) -> (Agent, String) {
    let mut claims = auth.claims(&gateway.mcp());
    claims["sub"] = json!(subject);
    let token = auth.mint(&claims);
    (Agent::connected_as(gateway.mcp(), &token).await, token)
}

fn exchanges(auth: &AuthServer) -> Vec<Value> {
    token_requests(auth).into_iter().filter(|request| request["form"]["grant_type"] == EXCHANGE_GRANT).collect()
}

fn outcome(called: &Value) -> &str {
    called["result"]["_meta"]["switchyard/outcome"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn the_backend_gets_a_token_for_its_audience_carrying_the_users_sub_and_the_exchange_is_reused() {
    let (auth, scratch) = (AuthServer::start("unused").await, ScratchDir::new("exchange"));
    let gateway = gateway(&auth, &scratch, "").await;
    let backend_url = format!("{}/mcp", auth.issuer);
    let (mut alice, alice_jwt) = user(&auth, &gateway, "alice").await;
    assert_eq!(alice.tool_names().await, ["whoami"], "the exchanged token lists the tools");
    for _ in 0..2 {
        let called = alice.call_tool("whoami", json!({})).await;
        let claims = jwt_claims(text(&called));
        assert_eq!((claims["sub"].as_str(), claims["aud"].as_str()), (Some("alice"), Some(backend_url.as_str())));
        assert!(claims.get("act").is_none(), "no actor without `actor = true`: {claims}");
    }
    let made = exchanges(&auth);
    assert_eq!(made.len(), 1, "one exchange, reused for the list and both calls: {made:?}");
    let form = &made[0]["form"];
    assert_eq!(form["subject_token"], alice_jwt.as_str(), "the agent's own JWT is the subject token");
    assert_eq!(form["subject_token_type"], ACCESS_TOKEN_TYPE);
    assert_eq!((form["audience"].as_str(), form["resource"].as_str()), (Some(&*backend_url), Some(&*backend_url)));
    assert_eq!(made[0]["auth_method"], "client_secret_basic", "the gateway authenticates as its client");
    assert!(form.get("actor_token").is_none());

    // Another user gets an exchange of their own; the agent's JWT never reached the backend.
    let (mut bob, bob_jwt) = user(&auth, &gateway, "bob").await;
    let called = bob.call_tool("whoami", json!({})).await;
    assert_eq!(jwt_claims(text(&called))["sub"], "bob");
    assert_eq!(exchanges(&auth).len(), 2);
    let sent: Vec<String> =
        auth.requests().iter().filter_map(|r| r["authorization"].as_str().map(str::to_owned)).collect();
    assert!(sent.iter().all(|header| !header.contains(&alice_jwt) && !header.contains(&bob_jwt)), "{sent:?}");
}

#[tokio::test]
async fn a_refused_exchange_or_principal_is_a_clear_not_delivered() {
    let (auth, scratch) = (AuthServer::start("unused").await, ScratchDir::new("exchange-refused"));
    let gateway = gateway(&auth, &scratch, "audience = \"urn:example:docs\"\n").await;
    let (mut alice, _) = user(&auth, &gateway, "alice").await;
    assert_eq!(alice.tool_names().await, ["whoami"], "alice's exchange brings the tools into the catalog");
    assert_eq!(exchanges(&auth)[0]["form"]["audience"], "urn:example:docs", "the configured audience");

    // Bob's exchange is refused by the server: the call is not sent, and the sentence says why.
    auth.behave(|b| b.refuse_target = true);
    let (mut bob, _) = user(&auth, &gateway, "bob").await;
    let called = bob.call_tool("whoami", json!({})).await;
    assert_eq!(outcome(&called), "not_delivered", "{called}");
    let sentence = text(&called);
    assert!(sentence.contains("invalid_target") && sentence.contains("`prot`"), "{sentence}");
    assert!(auth.requests().iter().all(|r| r["mcp"] != "tools/call"), "nothing reached the backend");

    // An API-key principal has no JWT to exchange: refused, naming why, before any request.
    let before = token_requests(&auth).len();
    let mut keyed = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let called = keyed.call_tool("whoami", json!({})).await;
    assert_eq!(outcome(&called), "not_delivered", "{called}");
    let sentence = text(&called);
    assert!(sentence.contains("API key") && sentence.contains("token exchange"), "{sentence}");
    assert_eq!(token_requests(&auth).len(), before, "nothing was sent to the token endpoint");
}

#[tokio::test]
async fn a_backend_401_exchanges_again_once_and_actor_sends_the_gateways_token() {
    let (auth, scratch) = (AuthServer::start("unused").await, ScratchDir::new("exchange-actor"));
    let gateway = gateway(&auth, &scratch, "actor = true\n").await;
    // The server's client-credentials tokens (the gateway's own) name `gateway-client`.
    auth.set_claims(|claims| claims.subject = "gateway-client".into());
    let (mut alice, _) = user(&auth, &gateway, "alice").await;
    assert_eq!(alice.tool_names().await, ["whoami"]);
    let called = alice.call_tool("whoami", json!({})).await;
    let claims = jwt_claims(text(&called));
    assert_eq!((claims["sub"].as_str(), claims["act"]["sub"].as_str()), (Some("alice"), Some("gateway-client")));
    let made = exchanges(&auth);
    assert_eq!(made.len(), 1);
    let form = &made[0]["form"];
    assert_eq!(form["actor_token_type"], ACCESS_TOKEN_TYPE, "{form}");
    let actor = jwt_claims(form["actor_token"].as_str().expect("an actor token"));
    assert_eq!(actor["aud"], format!("{}/mcp", auth.issuer), "the gateway's own client-credentials token");

    // The backend refuses the exchanged token: exchanged again, once, then not_delivered.
    auth.behave(|b| b.reject_tokens = true);
    let called = alice.call_tool("whoami", json!({})).await;
    assert_eq!(outcome(&called), "not_delivered", "{called}");
    assert_eq!(exchanges(&auth).len(), 2, "one new exchange after the 401");
}
