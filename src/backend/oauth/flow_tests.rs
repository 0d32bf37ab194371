//! Tests of the authorization flow's binding to one browser and of the fair shares of the pending table
//! (`pending.rs`), over the issuer tests' mock authorization servers.

use super::*;
use crate::backend::oauth::pending::{MAX_PENDING_PER_PRINCIPAL, Request};

async fn start_url(oauth: &OAuthClient, principal: &str) -> String {
    match oauth.token_for("docs", principal, None).await {
        Err(OAuthNeed::AuthorizationRequired { url, .. }) => url,
        other => panic!("expected an authorization URL, got {other:?}"),
    }
}

fn flow_of(start: &str) -> String {
    let url = Url::parse(start).expect("url");
    url.query_pairs().find(|(key, _)| key == "flow").expect("flow").1.into_owned()
}

fn exchanged(mock: &Mock) -> usize {
    mock.token_requests.lock().expect("lock").len()
}

#[tokio::test]
async fn agents_get_the_gateways_start_page_with_nothing_but_the_flow() {
    let (_mock, task) = start(false).await;
    let oauth = client(&_mock, GrantKind::AuthorizationCode);
    let url = Url::parse(&start_url(&oauth, "alice").await).expect("url");
    assert_eq!(url.as_str().split('?').next(), Some("https://gateway.example.com/oauth/start"));
    let keys: Vec<String> = url.query_pairs().map(|(key, _)| key.into_owned()).collect();
    assert_eq!(keys, ["flow"], "no state, no challenge, no client id: {url}");
    task.abort();
}

#[tokio::test]
async fn a_callback_from_another_browser_exchanges_nothing_and_spends_nothing() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let (state, cookies) = authorization_state(&oauth).await;
    for stranger in [Vec::new(), vec!["another-flows-cookie".to_owned()]] {
        let refused = oauth.complete(&state, "code", None, &stranger).await.expect_err("another browser");
        assert_eq!(refused, OAuthError::OtherBrowser);
    }
    assert_eq!(exchanged(&mock), 0, "no code reached the token endpoint");
    let completed = oauth.complete(&state, "code", None, &cookies).await.expect("the state was not spent");
    assert_eq!(completed.principal, "alice");
    assert_eq!(exchanged(&mock), 1);
    task.abort();
}

#[tokio::test]
async fn the_last_browser_to_open_the_start_page_is_the_only_one_that_may_continue() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let flow = flow_of(&start_url(&oauth, "alice").await);
    assert_eq!(oauth.proceed(&flow, "guess", &[]), Err(OAuthError::OtherBrowser), "nobody consented yet");
    let first = oauth.consent(&flow).expect("bound");
    assert_eq!((first.principal.as_str(), first.backend.as_str()), ("alice", "docs"));
    let second = oauth.consent(&flow).expect("bound again");
    let first_cookies = vec![first.cookie.clone()];
    assert_eq!(oauth.proceed(&flow, &first.consent, &first_cookies), Err(OAuthError::OtherBrowser));
    let second_cookies = vec![second.cookie.clone()];
    assert_eq!(oauth.proceed(&flow, &first.consent, &second_cookies), Err(OAuthError::OtherBrowser), "old token");
    assert_eq!(oauth.proceed(&flow, &second.consent, &first_cookies), Err(OAuthError::OtherBrowser), "old cookie");
    let url = oauth.proceed(&flow, &second.consent, &second_cookies).expect("the bound browser");
    assert!(url.contains("/as1/authorize?") && url.contains("state="), "{url}");
    assert_eq!(oauth.consent("forged").expect_err("unknown"), OAuthError::UnknownFlow);
    task.abort();
}

#[tokio::test]
async fn a_waiting_authorization_is_handed_out_again_until_it_completes() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let first = start_url(&oauth, "alice").await;
    assert_eq!(start_url(&oauth, "alice").await, first, "the same URL while it waits");
    assert_ne!(start_url(&oauth, "bob").await, first, "another principal has its own");
    let (url, cookies) = consented(&oauth, &first);
    oauth.complete(&state_of(&url), "code", None, &cookies).await.expect("completed");
    assert_eq!(oauth.consent(&flow_of(&first)).expect_err("completed"), OAuthError::UnknownFlow);
    task.abort();
}

fn request(discovered: &Arc<Discovered>, principal: &str, backend: &str) -> Request {
    Request {
        principal: principal.to_owned(),
        backend: backend.to_owned(),
        verifier: "v".to_owned(),
        scopes: None,
        step_ups: 0,
        discovered: Arc::clone(discovered),
    }
}

#[tokio::test]
async fn one_principal_cannot_fill_the_table_for_another() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let discovered = oauth.discover(&oauth.backends["docs"], None).await.expect("discovered");
    let table = PendingTable::new(Duration::from_secs(60), 1024);
    let url = |state: &str| format!("https://as.example.com/authorize?state={state}");
    for backend in 0..MAX_PENDING_PER_PRINCIPAL {
        table.admit(request(&discovered, "mallory", &format!("b{backend}")), url).expect("within the share");
    }
    let refused = table.admit(request(&discovered, "mallory", "one-more"), url).expect_err("over the share");
    assert_eq!(refused, OAuthError::TooManyPendingForPrincipal { max: MAX_PENDING_PER_PRINCIPAL });
    let again = table.admit(request(&discovered, "mallory", "b0"), url).expect("b0 still waits");
    assert!(!again.is_empty());
    table.admit(request(&discovered, "alice", "b0"), url).expect("alice is not affected");

    let mut step_up = request(&discovered, "alice", "b0");
    step_up.scopes = Some(vec!["more".to_owned()]);
    let (before, after) = (table.admit(request(&discovered, "alice", "b1"), url), table.admit(step_up, url));
    assert_ne!(before.expect("b1"), after.expect("the step-up replaces b0's"));
    task.abort();
}
