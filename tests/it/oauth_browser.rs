//! The backend OAuth flow bound to the person, through a running gateway over plain-http loopback: agents (of
//! both protocol eras) get the gateway's `/oauth/start` page, which asks before it sends anyone to the
//! authorization server and sets a host-only cookie; the callback needs that cookie (another browser's callback
//! is a 400 page, exchanges nothing and leaves the authorization to its rightful browser); the pages forbid
//! scripts, framing, sniffing, caching and referrers and never repeat the server's text; and a principal the
//! policies grant nothing makes no authorization wait while another's is handed out again, unchanged.

use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, SET_COOKIE};
use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::backend_oauth::token_requests;
use crate::gateway_oauth::{OAUTH, bearer_subject, gateway, start_url_for_alice};
use crate::modern_front::ModernAgent;
use crate::support::assert::text;
use crate::support::auth_server::AuthServer;
use crate::support::browser::{Browser, hidden, location};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

fn authorizations(auth: &AuthServer) -> usize {
    auth.requests().iter().filter(|request| request["endpoint"] == "authorize").count()
}

fn assert_page_headers(headers: &reqwest::header::HeaderMap) {
    let header = |name| headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
    assert!(header(CONTENT_SECURITY_POLICY).starts_with("default-src 'none'"), "{headers:?}");
    assert_eq!(header(reqwest::header::X_FRAME_OPTIONS), "DENY");
    assert_eq!(header(reqwest::header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    assert_eq!(header(CACHE_CONTROL), "no-store");
    assert_eq!(header(REFERRER_POLICY), "no-referrer");
}

/// The subject of the token `whoami` was called with, once the agent's list shows it (the list discovers the
/// backend with the principal's new token).
async fn whoami(agent: &mut Agent) -> String {
    assert_eq!(agent.tool_names().await, ["whoami"]);
    let called = agent.call_tool("whoami", json!({})).await;
    bearer_subject(text(&called))
}

#[tokio::test]
async fn the_start_page_asks_first_and_binds_the_flow_to_this_browser() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let start = start_url_for_alice(&gateway).await;
    let base = gateway.mcp().trim_end_matches("/mcp").to_owned();
    assert!(start.starts_with(&format!("{base}/oauth/start?flow=")), "{start}");
    assert!(!start.contains("state=") && !start.contains("code_challenge"), "only the flow: {start}");

    let browser = Browser::new();
    let page = browser.get(&start).await;
    assert_eq!(page.status(), 200, "loading the page does not redirect");
    assert_page_headers(page.headers());
    let cookie = page.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("switchyard-oauth-"), "plain http: no __Host- prefix: {cookie}");
    for attribute in ["; Path=/", "; HttpOnly", "; SameSite=Lax", "; Max-Age="] {
        assert!(cookie.contains(attribute), "{attribute}: {cookie}");
    }
    assert!(!cookie.contains("Domain") && !cookie.contains("Secure"), "host-only, and http: {cookie}");
    let html = page.text().await.unwrap();
    assert!(html.contains("<b>alice</b>") && html.contains("<b>prot</b>"), "names principal and backend: {html}");
    assert!(!html.contains("<script"), "{html}");
    assert_eq!(authorizations(&auth), 0, "nobody was sent to the authorization server yet");

    // A consent form posted without the page's cookie (as a cross-site page's auto-submitted form would be:
    // a SameSite=Lax cookie does not go with it) is refused, and so is one from a page opened before another
    // browser opened it; the browser that opened it last is sent on.
    let earlier = Browser::new();
    let (_, earlier_page) = earlier.open(&start).await;
    let fields = |page: &str| ["flow", "consent"].map(|name| hidden(page, name).expect("a consent form"));
    let [flow, consent] = fields(&earlier_page);
    let action = format!("{base}/oauth/start");
    let form = [("flow", flow.as_str()), ("consent", consent.as_str())];
    let without_cookie = Browser::new().post_form(&action, &form).await;
    assert_eq!(without_cookie.status(), 400, "a form without the cookie");
    assert_page_headers(without_cookie.headers());
    assert!(without_cookie.text().await.unwrap().contains("did not start"));
    let sent_on = browser.consent(&start).await;
    assert_eq!(sent_on.status(), 303, "the browser that opened the page last is sent on");
    assert!(location(&sent_on).starts_with(&format!("{}/authorize?", auth.issuer)), "{}", location(&sent_on));
    assert_eq!(earlier.post_form(&action, &form).await.status(), 400, "a page opened before, by another browser");
    let unknown = Browser::new().get(&format!("{base}/oauth/start?flow=forged")).await;
    assert_eq!(unknown.status(), 400);
}

#[tokio::test]
async fn a_callback_without_the_consenting_browsers_cookie_exchanges_nothing_and_spends_nothing() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let alices = Browser::new();
    let callback = alices.callback_for(&start_url_for_alice(&gateway).await).await;

    // Someone else's browser at Alice's callback: no cookie at all, or the cookie of a flow of its own (Bob's).
    let stranger = Browser::new().get(&callback).await;
    assert_eq!(stranger.status(), 400);
    assert!(stranger.text().await.unwrap().contains("did not start"));
    let mut bob = Agent::with_token(gateway.mcp(), BOB_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let listed = bob.request("tools/list", json!({})).await;
    let bobs = Browser::new();
    bobs.consent(listed["error"]["data"]["elicitations"][0]["url"].as_str().unwrap()).await;
    assert!(bobs.cookie_header().starts_with("switchyard-oauth-"), "{}", bobs.cookie_header());
    assert_eq!(bobs.get(&callback).await.status(), 400, "another flow's cookie");
    assert!(token_requests(&auth).is_empty(), "no code reached the token endpoint");

    // Alice's own browser still completes: the strangers did not spend her state; the cookie is cleared.
    auth.set_claims(|claims| claims.subject = "alice".into());
    let page = alices.get(&callback).await;
    assert_eq!(page.status(), 200);
    assert_page_headers(page.headers());
    assert!(page.headers()[SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(alices.cookie_header(), "", "the one-time cookie is gone");
    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({})).await;
    assert_eq!(whoami(&mut alice).await, "alice");
}

#[tokio::test]
async fn the_callback_page_repeats_no_text_of_the_authorization_server() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let base = gateway.mcp().trim_end_matches("/mcp").to_owned();
    let lure = "Your+account+is+locked.+Call+555-0100";
    let callback = |error: &str| format!("{base}/oauth/callback?error={error}&error_description={lure}");
    let forged = Browser::new().get(&callback("account_locked")).await;
    assert_eq!(forged.status(), 400);
    assert_page_headers(forged.headers());
    let page = forged.text().await.unwrap();
    assert!(!page.contains("555") && !page.contains("account_locked"), "{page}");
    assert!(page.contains("did not authorize"), "{page}");
    let page = Browser::new().get(&callback("access_denied")).await.text().await.unwrap();
    assert!(page.contains("access_denied") && !page.contains("555"), "a registered code only: {page}");
}

#[tokio::test]
async fn a_principal_granted_nothing_makes_no_authorization_wait_and_a_waiting_one_is_handed_out_again() {
    let auth = AuthServer::start("unused").await;
    let backends = backend_toml("prot", &format!("{}/mcp", auth.issuer), &format!("prefix = \"\"\n{OAUTH}"));
    let policies = format!("{}[[policies]]\nprincipals = [\"alice\"]\nallow = [\"whoami\"]\n", api_keys());
    let gateway = TestGateway::start_with("", &policies, &backends).await;
    let probes = || auth.requests().iter().filter(|request| request["mcp"] == "tools/list").count();
    let before = probes();

    let mut bob = Agent::with_token(gateway.mcp(), BOB_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    for _ in 0..40 {
        let listed = bob.request("tools/list", json!({})).await;
        assert_eq!(listed["result"], json!({"tools": []}), "no URL for a backend bob may not use: {listed}");
    }
    assert_eq!(probes(), before, "bob's lists never asked the backend on his behalf");

    let mut alice = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {"url": {}}})).await;
    let mut urls = Vec::new();
    for _ in 0..3 {
        let listed = alice.request("tools/list", json!({})).await;
        urls.push(listed["error"]["data"]["elicitations"][0]["url"].as_str().unwrap_or_default().to_owned());
    }
    assert!(urls[0].contains("/oauth/start?flow="), "{urls:?}");
    assert!(urls.iter().all(|url| *url == urls[0]), "the waiting authorization, handed out again: {urls:?}");
    auth.set_claims(|claims| claims.subject = "alice".into());
    let (status, page) = Browser::new().authorize(&urls[0]).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(whoami(&mut alice).await, "alice");
}

#[tokio::test]
async fn a_2026_agent_gets_the_start_page_too() {
    let auth = AuthServer::start("unused").await;
    let gateway = gateway(&auth).await;
    let agent = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let listed = agent.send_with(json!(1), "tools/list", json!({}), |_| {}).await;
    let body = listed.body.unwrap_or_else(|| panic!("{}", listed.raw));
    let named: &Value = &body["result"]["_meta"]["switchyard/authorization"][0];
    let url = named["url"].as_str().unwrap_or_else(|| panic!("{body}"));
    assert!(url.starts_with(&gateway.mcp().replace("/mcp", "/oauth/start?flow=")), "{url}");
    auth.set_claims(|claims| claims.subject = "alice".into());
    assert_eq!(Browser::new().authorize(url).await.0, 200);
    let listed = agent.send_with(json!(2), "tools/list", json!({}), |_| {}).await;
    assert!(listed.raw.contains("whoami"), "{}", listed.raw);
    let called = agent.send_with(json!(3), "tools/call", json!({"name": "whoami", "arguments": {}}), |_| {}).await;
    let body = called.body.unwrap_or_else(|| panic!("{}", called.raw));
    assert_eq!(bearer_subject(text(&body)), "alice", "{body}");
}
