//! Backend OAuth through the running gateway (issue 12, phase B): an `authorization_code` backend (the test
//! authorization server's protected `/mcp`) reached by two principals. The first use answers with the
//! authorization URL — `-32042` URL elicitation for an agent that declared `elicitation.url`, a sentence in a
//! `not_delivered` result otherwise — the test follows the URL as the user (the server approves and redirects to
//! `/oauth/callback`), and each principal's calls then carry its own token. Also: a forged or replayed `state` at
//! the callback is a 400 page, and a backend that refuses every token is asked once more, then not_delivered.

use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::support::auth_server::AuthServer;
use crate::support::gateway::{Agent, TestGateway, backend_toml};

const OAUTH: &str = "[backends.oauth]\ngrant = \"authorization_code\"\n";

async fn gateway(auth: &AuthServer) -> TestGateway {
    let backends = backend_toml("prot", &format!("{}/mcp", auth.issuer), &format!("prefix = \"\"\n{OAUTH}"));
    TestGateway::start_with("", &api_keys(), &backends).await
}

/// Opens an authorization URL as the user's browser would: the server approves and redirects to the callback.
async fn follow(url: &str) -> (reqwest::StatusCode, String) {
    let response = reqwest::get(url).await.expect("the authorization URL answers");
    (response.status(), response.text().await.expect("a page"))
}

fn bearer_subject(token: &str) -> String {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["sub"].as_str().unwrap().to_owned()
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
    let token = called["result"]["content"][0]["text"].as_str().expect("the tool ran").to_owned();
    assert_eq!(bearer_subject(&token), "alice");

    // Bob declared nothing: the call is not sent, and the sentence carries the URL.
    let mut bob = Agent::with_token(gateway.mcp(), BOB_KEY).connect(json!({})).await;
    let refused = bob.call_tool("whoami", json!({})).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered");
    let sentence = refused["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    let url = sentence.split_whitespace().find(|word| word.starts_with("http")).expect("the URL in the sentence");
    auth.set_claims(|claims| claims.subject = "bob".into());
    let (status, _) = follow(url).await;
    assert_eq!(status, 200);
    let called = bob.call_tool("whoami", json!({})).await;
    let bobs = called["result"]["content"][0]["text"].as_str().expect("the tool ran").to_owned();
    assert_eq!(bearer_subject(&bobs), "bob");

    // Alice still gets her own token.
    let called = alice.call_tool("whoami", json!({})).await;
    assert_eq!(bearer_subject(called["result"]["content"][0]["text"].as_str().unwrap()), "alice");
    let calls: Vec<Value> = auth.requests().into_iter().filter(|request| request["mcp"] == "tools/call").collect();
    assert_eq!(calls.len(), 3, "the refused call never reached the tool: {calls:?}");
}

#[tokio::test]
async fn forged_or_replayed_state_is_a_400_page() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = alice.request("tools/list", json!({})).await;
    let url = listed["error"]["data"]["elicitations"][0]["url"].as_str().unwrap().to_owned();
    // The user's browser is sent to the callback once; capture the redirect and present it twice.
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let redirect = browser.get(&url).send().await.unwrap();
    let callback = redirect.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(browser.get(&callback).send().await.unwrap().status(), 200);
    let replayed = browser.get(&callback).send().await.unwrap();
    assert_eq!(replayed.status(), 400);
    assert!(replayed.text().await.unwrap().contains("already used"));

    let base = gateway.mcp().trim_end_matches("/mcp").to_owned();
    let forged = browser.get(format!("{base}/oauth/callback?code=x&state=forged")).send().await.unwrap();
    assert_eq!(forged.status(), 400);
    let denied = browser.get(format!("{base}/oauth/callback?error=access_denied")).send().await.unwrap();
    assert_eq!(denied.status(), 400);
    assert!(denied.text().await.unwrap().contains("access_denied"));
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
