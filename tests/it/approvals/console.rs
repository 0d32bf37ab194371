//! Deciding calls awaiting approval in the console: the approvals API (who reads, who decides, the form token,
//! the refusals), the `notify_url` announcement's page link, and the page's buttons in headless Chromium.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::ledger::ApprovalState;

use super::{approval_sections, assert_ran, bob_key, delete_call, fault_with_delete, outcome, started};
use crate::agent_auth::{ALICE_KEY, BOB_KEY};
use crate::support::chromium::{Browser, chromium};
use crate::support::console::{Answer, refused_api, send};
use crate::support::gateway::{Agent, TestGateway, backend_toml};
use crate::support::hook::hook;

/// Sends `method path` to the console API as the holder of `key`, with the form `token` and `body` if given.
async fn console(base: &str, path: &str, key: Option<&str>, token: Option<&str>, body: Option<Value>) -> Answer {
    let bearer = key.map(|key| format!("Bearer {key}"));
    let mut headers: Vec<(&str, &str)> = bearer.as_deref().map(|value| ("authorization", value)).into_iter().collect();
    headers.extend(token.map(|token| ("x-csrf-token", token)));
    send(base, &format!("/admin/api/{path}"), &headers, body.as_ref()).await
}

fn decision(key: &str, decision: &str, note: Option<&str>) -> Option<Value> {
    Some(json!({"key": key, "decision": decision, "note": note}))
}

/// An approver (alice, by group, not an administrator) reads the calls with their arguments and a form token and
/// decides one; bob (neither) reads nothing; a decision without the token, with a bad body, or twice is refused,
/// saying why; the decision is counted and the approved call runs once.
#[tokio::test]
async fn an_approver_decides_in_the_console_with_its_form_token() {
    let (fault, gateway) = started("wait = \"1s\"").await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    assert_eq!(outcome(&bob.request("tools/call", delete_call(Some("console-1"))).await), "awaiting_approval");
    let base = &gateway.base;

    let refused = console(base, "approvals", Some(BOB_KEY), None, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.message().contains("for approvers"), "{}", refused.body);
    let listed = console(base, "approvals", Some(ALICE_KEY), None, None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["decider"], "alice");
    assert_eq!(listed.body["approvals"][0]["arguments"], json!({"repo": "r1"}), "{}", listed.body);
    let token = listed.body["form_token"].as_str().expect("a form token").to_owned();
    let key = bob_key("console-1");
    let alice = Some(ALICE_KEY);

    let untokened = console(base, "approvals/decisions", alice, None, decision(key.as_str(), "approve", None)).await;
    assert_eq!(untokened.status, StatusCode::FORBIDDEN);
    assert!(untokened.message().contains("x-csrf-token"), "{}", untokened.body);
    let bobs =
        console(base, "approvals/decisions", Some(BOB_KEY), Some(&token), decision(key.as_str(), "approve", None));
    assert_eq!(bobs.await.status, StatusCode::FORBIDDEN, "alice's token is not bob's");
    let unclear =
        console(base, "approvals/decisions", alice, Some(&token), decision(key.as_str(), "maybe", None)).await;
    assert_eq!(unclear.status, StatusCode::BAD_REQUEST);
    assert!(unclear.message().contains("approve or deny, not `maybe`"), "{}", unclear.body);
    let nobody = decision("idem:3:bob:nothing", "approve", None);
    assert_eq!(console(base, "approvals/decisions", alice, Some(&token), nobody).await.status, StatusCode::NOT_FOUND);
    let store = gateway.router.ledger().store.clone();
    assert_eq!(store.approval(&key).await.expect("read").expect("a row").state, ApprovalState::AwaitingApproval);

    let approve = decision(key.as_str(), "approve", Some("looks fine"));
    let decided = console(base, "approvals/decisions", alice, Some(&token), approve.clone()).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    assert_eq!(
        decided.body,
        json!({"key": key.as_str(), "state": "approved", "decided_by": "alice", "note": "looks fine"})
    );
    let again = console(base, "approvals/decisions", alice, Some(&token), approve).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.message().contains("approved already"), "{}", again.body);
    let metrics = gateway.router.ledger().metrics.encode();
    assert!(metrics.contains("switchyard_approvals_total{decision=\"approved\"} 1"), "{metrics}");

    assert_ran(&bob.request("tools/call", delete_call(Some("console-1"))).await);
    assert_ran(&bob.request("tools/call", delete_call(Some("console-1"))).await);
    assert_eq!(fault.executions("delete_repo"), 1);
}

/// An approver never decides its own call in the console either.
#[tokio::test]
async fn the_console_refuses_an_approver_its_own_call() {
    let fault = fault_with_delete().await;
    let sections = approval_sections("wait = \"1s\"").replace("[\"group:ops\"]", "[\"group:ops\", \"bob\"]");
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    assert_eq!(outcome(&bob.request("tools/call", delete_call(Some("own"))).await), "awaiting_approval");
    let listed = console(&gateway.base, "approvals", Some(BOB_KEY), None, None).await;
    let token = listed.body["form_token"].as_str().expect("bob is an approver").to_owned();
    let own = decision(bob_key("own").as_str(), "approve", None);
    let refused = console(&gateway.base, "approvals/decisions", Some(BOB_KEY), Some(&token), own).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.message().contains("made this call"), "{}", refused.body);
    assert_eq!(fault.executions("delete_repo"), 0);
}

/// bob's call awaiting approval with the announcement's hook at hand: the gateway, bob, and the page URL.
async fn announced(hook_url: &str, hook: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> (Announced, String) {
    let fault = fault_with_delete().await;
    let sections = approval_sections(&format!("wait = \"1s\"\nnotify_url = {hook_url:?}"));
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    assert_eq!(outcome(&bob.request("tools/call", delete_call(Some("linked"))).await), "awaiting_approval");
    let announcement: Value = serde_json::from_str(&hook.recv().await.expect("announced")).expect("JSON");
    let page_url = announcement["page_url"].as_str().expect("a page link").to_owned();
    (Announced { fault, gateway, bob }, page_url)
}

struct Announced {
    fault: crate::support::fault_backend::FaultBackend,
    gateway: TestGateway,
    bob: Agent,
}

/// The announcement's link opens the page on its request: the ticket shows that request (never its arguments)
/// without a credential while it awaits a decision, then says who decided it; a forged ticket shows nothing.
#[tokio::test]
async fn the_announcement_links_to_its_request_until_it_is_decided() {
    let (hook_url, mut hook) = hook(0).await;
    let (started, page_url) = announced(&hook_url, &mut hook).await;
    let base = &started.gateway.base;
    let ticket = page_url.strip_prefix(&format!("{base}/ui/#approval=")).expect("the page's URL").to_owned();
    let link = format!("approvals/link?ticket={ticket}");
    let shown = console(base, &link, None, None, None).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    assert_eq!(shown.body["approval"]["key"], bob_key("linked").as_str());
    assert_eq!(shown.body["approval"]["tool"], "delete_repo");
    assert!(!shown.body.to_string().contains("r1"), "no arguments: {}", shown.body);
    let forged = format!("approvals/link?ticket={}x", &ticket[..ticket.len() - 1]);
    assert_eq!(console(base, &forged, None, None, None).await.status, StatusCode::NOT_FOUND);
    let store = started.gateway.router.ledger().store.clone();
    switchyard::router::decide(&store, None, &super::approvers(), &super::alice(), &bob_key("linked"), false, None)
        .await
        .expect("deny");
    let used = console(base, &link, None, None, None).await;
    assert_eq!(used.status, StatusCode::GONE);
    assert!(used.message().contains("denied by `alice`"), "{}", used.body);
    assert_eq!(started.fault.executions("delete_repo"), 0);
}

/// What the page shows of approvals, read from its DOM.
const APPROVALS: &str = r##"(() => !document.body || !document.getElementById("decided") ? { state: null } : ({
  state: document.body.dataset.state,
  problem: document.getElementById("problem").hidden ? null : document.getElementById("problem").textContent,
  link: document.getElementById("link").hidden ? null : document.getElementById("link").textContent,
  cards: [...document.querySelectorAll("#approvals .approval")].map((card) => ({
    key: card.dataset.key,
    linked: card.classList.contains("linked"),
    arguments: card.querySelector("pre.arguments") ? card.querySelector("pre.arguments").textContent : null,
    buttons: [...card.querySelectorAll("button")].map((button) => button.textContent),
  })),
  decided: [...document.querySelectorAll("#decided li")].map((item) => item.textContent),
}))()"##;

/// The announcement's link opened in headless Chromium: the page shows the linked request, asks for a
/// credential, shows the approver the arguments and the buttons, and Approve records alice's decision, after
/// which bob's retry runs the call once.
#[tokio::test]
async fn the_console_buttons_approve_a_call_in_headless_chromium() {
    let Some(binary) = chromium() else { return };
    let (hook_url, mut hook) = hook(0).await;
    let (mut started, page_url) = announced(&hook_url, &mut hook).await;
    let mut browser = Browser::launch(&binary).await;
    browser.navigate(&page_url).await;
    let patience = Duration::from_secs(30);
    let page = browser.wait_for(APPROVALS, patience, |page| page["state"] == "needs-credential").await;
    assert!(page["link"].as_str().is_some_and(|link| link.contains("delete_repo")), "{page}");
    let give_key = format!(
        r#"document.getElementById("token").value = "{ALICE_KEY}"; document.getElementById("credential").requestSubmit(); true"#
    );
    browser.evaluate(&give_key).await;
    let shown = |page: &Value| page["state"] == "ready" && page["cards"].as_array().is_some_and(|c| !c.is_empty());
    let page = browser.wait_for(APPROVALS, patience, shown).await;
    let card = &page["cards"][0];
    assert_eq!(card["key"], bob_key("linked").as_str(), "{page}");
    assert_eq!(card["linked"], true, "{page}");
    assert!(card["arguments"].as_str().is_some_and(|arguments| arguments.contains("\"r1\"")), "{page}");
    assert_eq!(card["buttons"], json!(["Approve", "Deny"]));
    assert!(page["problem"].as_str().is_some_and(|problem| problem.contains("approval only")), "{page}");

    browser.evaluate(r##"document.querySelector("#approvals .approval button.approve").click(); true"##).await;
    let decided = |page: &Value| page["decided"].as_array().is_some_and(|decided| !decided.is_empty());
    let page = browser.wait_for(APPROVALS, patience, decided).await;
    assert_eq!(page["decided"][0], format!("{}: approved by alice", bob_key("linked").as_str()), "{page}");
    let store = started.gateway.router.ledger().store.clone();
    let row = store.approval(&bob_key("linked")).await.expect("read").expect("a row");
    assert_eq!((row.state, row.decided_by.as_deref()), (ApprovalState::Approved, Some("alice")));
    assert_ran(&started.bob.request("tools/call", delete_call(Some("linked"))).await);
    assert_eq!(started.fault.executions("delete_repo"), 1);
    awaiting_none(&mut browser).await;
    browser.evaluate("true").await;
    let problems: Vec<&Value> =
        browser.problems().iter().filter(|problem| !refused_api(problem, &["401", "403"])).collect();
    assert!(problems.is_empty(), "the page logged problems: {problems:#?}");
}

/// The page's list of approvals empties once the call is decided.
async fn awaiting_none(browser: &mut Browser) {
    let empty = |page: &Value| page["cards"].as_array().is_some_and(Vec::is_empty);
    browser.wait_for(APPROVALS, Duration::from_secs(30), empty).await;
}
