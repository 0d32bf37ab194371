//! The gateway as an OAuth 2.1 client of a protected backend: `backend::oauth::OAuthClient`
//! against the test authorization server (`support/auth_server.rs`), with tokens in the ledger's store through the
//! composition root's adapter. The test itself is the user's browser: bound to the flow of the start URL and
//! consenting there (as the front's start page would let it), it opens the authorization URL (the server
//! consents at once) and hands the redirect's `code` and `state`, with its cookie, to `complete`. `private_key_jwt` is in
//! `backend_oauth_jwt.rs`, with these helpers.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use serde_json::Value;
use switchyard::backend::oauth::{
    AccessToken, BackendOAuth, BearerChallenge, ClientIdentity, GrantKind, HttpLimits, ISSUER_PIN_PRINCIPAL,
    OAuthClient, OAuthError, OAuthNeed, OAuthOptions, Refusal, Vault,
};
use switchyard::gateway::token_store::LedgerTokens;
use switchyard::ledger::{BackendTokenRow, LedgerStore, TokenFilter};
use switchyard::secret::Secret;

use crate::support::auth_server::AuthServer;

const REDIRECT: &str = "http://127.0.0.1:8808/oauth/callback";

pub(crate) fn backend(server: &AuthServer, grant: GrantKind, client: ClientIdentity) -> BackendOAuth {
    BackendOAuth {
        backend: "docs".to_owned(),
        url: Url::parse(&format!("{}/mcp", server.issuer)).expect("url"),
        grant,
        client,
        scopes: Vec::new(),
        authorization_server: None,
        auth_method: None,
        allow_internal: false,
        exchange: Default::default(),
    }
}

fn options(pending_ttl: Duration) -> OAuthOptions {
    OAuthOptions {
        redirect_uri: Url::parse(REDIRECT).expect("url"),
        client_name: "Switchyard test".to_owned(),
        limits: HttpLimits { timeout: Duration::from_secs(5), max_body: 64 * 1024 },
        pending_ttl,
        max_pending: 16,
    }
}

fn client_on(settings: BackendOAuth, ledger: &LedgerStore, ttl: Duration) -> OAuthClient {
    let store = Arc::new(LedgerTokens(ledger.clone()));
    OAuthClient::new(vec![settings], options(ttl), Vault::from_key(&[9; 32]), store).expect("client")
}

pub(crate) fn client(settings: BackendOAuth, ledger: &LedgerStore) -> OAuthClient {
    client_on(settings, ledger, Duration::from_secs(60))
}

/// The stored token rows, without issuer pins.
pub(crate) async fn token_rows(ledger: &LedgerStore) -> Vec<BackendTokenRow> {
    let rows = ledger.backend_tokens(&TokenFilter::default()).await.expect("rows");
    rows.into_iter().filter(|row| row.principal != ISSUER_PIN_PRINCIPAL).collect()
}

/// The issuer pinned for `docs`, as the pin row shows it to operators.
pub(crate) async fn pinned_issuer(ledger: &LedgerStore) -> Option<String> {
    let filter = TokenFilter { principal: Some(ISSUER_PIN_PRINCIPAL.to_owned()), backend: Some("docs".to_owned()) };
    ledger.backend_tokens(&filter).await.expect("rows").pop().map(|row| row.scopes)
}

pub(crate) fn machine(server: &AuthServer) -> BackendOAuth {
    let client = ClientIdentity::PreRegistered {
        client_id: "gw".to_owned(),
        client_secret: Some(Secret::new("s3cret:/x".to_owned())),
        private_key: None,
    };
    backend(server, GrantKind::ClientCredentials, client)
}

/// The server knows the gateway's pre-registered client and takes `client_secret_basic`.
fn accept_machine(server: &AuthServer) {
    server.behave(|b| {
        b.client = Some(("gw".to_owned(), "s3cret:/x".to_owned()));
        b.auth_methods = vec!["client_secret_basic".to_owned()];
    });
}

pub(crate) fn token_requests(server: &AuthServer) -> Vec<Value> {
    server.requests().into_iter().filter(|request| request["endpoint"] == "token").collect()
}

fn authorizations(server: &AuthServer) -> Vec<Value> {
    server.requests().into_iter().filter(|request| request["endpoint"] == "authorize").collect()
}

/// The bearer token inside an [`AccessToken`].
pub(crate) fn bearer(token: &AccessToken) -> String {
    token.authorization().to_str().expect("ascii").strip_prefix("Bearer ").expect("bearer").to_owned()
}

/// The JWT claims of a token the test server issued.
pub(crate) fn claims(token: &AccessToken) -> Value {
    jwt_claims(&bearer(token))
}

/// The claims of a JWT, unverified.
pub(crate) fn jwt_claims(jwt: &str) -> Value {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("b64"))
        .expect("json")
}

/// What `token_for` must answer for a principal without tokens: the authorization URL.
fn authorization_url(need: Result<AccessToken, OAuthNeed>) -> String {
    match need {
        Err(OAuthNeed::AuthorizationRequired { backend, url }) => {
            assert_eq!(backend, "docs");
            url
        }
        other => panic!("expected an authorization URL, got {other:?}"),
    }
}

/// The user's browser at the gateway's start page `start` (served by the front, played here): it is bound to
/// the flow and consents. The authorization server URL it is sent to, and its cookies.
pub(crate) fn consent(client: &OAuthClient, start: &str) -> (String, Vec<String>) {
    let start = Url::parse(start).expect("start URL");
    let flow = start.query_pairs().find(|(key, _)| key == "flow").expect("flow").1.into_owned();
    let bound = client.consent(&flow).expect("a live flow");
    let cookies = vec![bound.cookie];
    (client.proceed(&flow, &bound.consent, &cookies).expect("consented"), cookies)
}

/// The user opens the start page `start` and consents; the server consents too and redirects to the callback:
/// its `(state, code)`, and the browser's cookies.
async fn follow(client: &OAuthClient, start: &str) -> (String, String, Vec<String>) {
    let (url, cookies) = consent(client, start);
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("http");
    let answer = http.get(url).send().await.expect("authorize");
    assert_eq!(answer.status(), 302);
    let location = Url::parse(answer.headers()["location"].to_str().expect("ascii")).expect("location");
    assert!(location.as_str().starts_with(REDIRECT), "{location}");
    let param = |name: &str| location.query_pairs().find(|(key, _)| key == name).map(|(_, v)| v.into_owned());
    (param("state").expect("state"), param("code").expect("code"), cookies)
}

async fn authorize(client: &OAuthClient, principal: &str) -> AccessToken {
    let url = authorization_url(client.token_for("docs", principal, None).await);
    let (state, code, cookies) = follow(client, &url).await;
    let completed = client.complete(&state, &code, None, &cookies).await.expect("completed");
    assert_eq!((completed.principal.as_str(), completed.backend.as_str()), (principal, "docs"));
    client.token_for("docs", principal, None).await.expect("a token after authorizing")
}

pub(crate) fn failure(need: Result<AccessToken, OAuthNeed>) -> OAuthError {
    match need {
        Err(OAuthNeed::Failed(error)) => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn client_credentials_end_to_end_with_basic_and_post() {
    for method in ["client_secret_basic", "client_secret_post"] {
        let server = AuthServer::start("unused").await;
        server.behave(|b| {
            b.auth_methods = vec![method.to_owned()];
            b.client = Some(("gw".to_owned(), "s3cret:/x".to_owned()));
            b.prm_scopes = Some(vec!["mcp:tools".to_owned()]);
        });
        let ledger = LedgerStore::memory();
        let oauth = client(machine(&server), &ledger);
        let token = oauth.token_for("docs", "alice", None).await.expect("token");
        assert_eq!(token.backend(), "docs");
        assert!(token.authorization().is_sensitive());
        assert_eq!(claims(&token)["aud"], format!("{}/mcp", server.issuer), "RFC 8707 resource");
        let requests = token_requests(&server);
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0]["auth_method"], method);
        assert_eq!(requests[0]["form"]["grant_type"], "client_credentials");
        assert_eq!(requests[0]["form"]["scope"], "mcp:tools", "scopes_supported when no challenge names one");
        // One machine token for every principal, reused while fresh.
        let again = oauth.token_for("docs", "bob", None).await.expect("token");
        assert_eq!(again, token);
        assert_eq!(token_requests(&server).len(), 1);
        // At rest: one row, under the gateway's own principal, without the token's bytes.
        let rows = token_rows(&ledger).await;
        assert_eq!(rows.len(), 1);
        assert_eq!(pinned_issuer(&ledger).await.as_deref(), Some(server.issuer.as_str()), "the issuer is pinned");
        assert_eq!((rows[0].principal.as_str(), rows[0].scopes.as_str()), ("", "mcp:tools"));
        let at_rest = String::from_utf8_lossy(&rows[0].sealed).into_owned();
        assert!(!at_rest.contains(&bearer(&token)[..20]), "the stored row holds no token bytes");
    }
}

#[tokio::test]
async fn wrong_client_credentials_are_a_typed_refusal() {
    let server = AuthServer::start("unused").await;
    server.behave(|b| b.client = Some(("gw".to_owned(), "other".to_owned())));
    let oauth = client(machine(&server), &LedgerStore::memory());
    let error = failure(oauth.token_for("docs", "alice", None).await);
    assert!(matches!(&error, OAuthError::TokenRefused { error, .. } if error == "invalid_client"), "{error}");
}

#[tokio::test]
async fn authorization_code_with_dynamic_registration_per_principal() {
    let server = AuthServer::start("unused").await;
    let ledger = LedgerStore::memory();
    let oauth = client(backend(&server, GrantKind::AuthorizationCode, ClientIdentity::Dynamic), &ledger);
    let alice = authorize(&oauth, "alice").await;
    let registered: Vec<Value> = server.requests().into_iter().filter(|r| r["endpoint"] == "register").collect();
    assert_eq!(registered.len(), 1);
    assert_eq!(registered[0]["metadata"]["redirect_uris"][0], REDIRECT);
    let query = &authorizations(&server)[0]["query"];
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["resource"], format!("{}/mcp", server.issuer));
    assert!(query["client_id"].as_str().expect("id").starts_with("client-"), "the registered id: {query}");
    assert!(query.get("scope").is_none(), "no challenge, no configured scopes, no scopes_supported: {query}");
    let exchange = &token_requests(&server)[0]["form"];
    assert_eq!(exchange["resource"], format!("{}/mcp", server.issuer));
    assert!(exchange["code_verifier"].as_str().is_some_and(|v| v.len() == 43));
    // Bob has no token of his own, and Alice's is never his (the server mints tokens naming their user).
    server.set_claims(|claims| claims.subject = "bob".to_owned());
    let bob_url = authorization_url(oauth.token_for("docs", "bob", None).await);
    let (state, code, cookies) = follow(&oauth, &bob_url).await;
    oauth.complete(&state, &code, None, &cookies).await.expect("bob completes");
    let bob = oauth.token_for("docs", "bob", None).await.expect("bob's token");
    assert_eq!(oauth.token_for("docs", "alice", None).await.expect("alice's"), alice);
    assert_eq!(ledger.backend_tokens(&TokenFilter::default()).await.expect("rows").len(), 2);
    assert_eq!((claims(&alice)["sub"].clone(), claims(&bob)["sub"].clone()), ("alice".into(), "bob".into()));
    // The state was used: a replay is refused, and so is a forged one.
    for (state, code) in [(state.as_str(), code.as_str()), ("forged-state", "code-1")] {
        let error = oauth.complete(state, code, None, &cookies).await.expect_err("refused");
        assert_eq!(error, OAuthError::UnknownState);
    }
}

#[tokio::test]
async fn expired_states_are_refused() {
    let server = AuthServer::start("unused").await;
    let settings = backend(&server, GrantKind::AuthorizationCode, ClientIdentity::Dynamic);
    let oauth = client_on(settings, &LedgerStore::memory(), Duration::from_millis(50));
    let url = authorization_url(oauth.token_for("docs", "alice", None).await);
    let (state, code, cookies) = follow(&oauth, &url).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(oauth.complete(&state, &code, None, &cookies).await.expect_err("expired"), OAuthError::ExpiredState);
    assert!(token_requests(&server).is_empty(), "an expired state never reaches the token endpoint");
}

#[tokio::test]
async fn tokens_are_refreshed_before_expiry_and_a_failed_refresh_falls_back() {
    let server = AuthServer::start("unused").await;
    // Shorter than the refresh margin: every use renews.
    server.set_claims(|claims| claims.lifetime_secs = 30);
    let ledger = LedgerStore::memory();
    let oauth = client(backend(&server, GrantKind::AuthorizationCode, ClientIdentity::Dynamic), &ledger);
    let url = authorization_url(oauth.token_for("docs", "alice", None).await);
    let (state, code, cookies) = follow(&oauth, &url).await;
    oauth.complete(&state, &code, None, &cookies).await.expect("completed");
    oauth.token_for("docs", "alice", None).await.expect("refreshed");
    let grants: Vec<Value> = token_requests(&server).iter().map(|r| r["form"]["grant_type"].clone()).collect();
    assert_eq!(grants, ["authorization_code", "refresh_token"]);
    assert_eq!(token_requests(&server)[1]["form"]["resource"], format!("{}/mcp", server.issuer));
    server.forget_refresh_tokens();
    authorization_url(oauth.token_for("docs", "alice", None).await);
    assert!(ledger.backend_token("alice", "docs").await.expect("get").is_none(), "the dead tokens are gone");
}

#[tokio::test]
async fn a_401_for_the_stored_token_gets_a_new_one() {
    let server = AuthServer::start("unused").await;
    accept_machine(&server);
    let oauth = client(machine(&server), &LedgerStore::memory());
    let first = oauth.token_for("docs", "alice", None).await.expect("token");
    let challenge = BearerChallenge { error: Some("invalid_token".to_owned()), ..Default::default() };
    let refusal = Refusal::Unauthorized { challenge: Some(&challenge), sent: Some(&first) };
    oauth.token_for("docs", "alice", Some(refusal)).await.expect("renewed");
    assert_eq!(token_requests(&server).len(), 2, "a rejected token is replaced, not sent again");
}

#[tokio::test]
async fn client_id_metadata_documents_are_the_client_id() {
    let server = AuthServer::start("unused").await;
    server.behave(|b| b.cimd = true);
    let document = Url::parse("https://gw.example.com/oauth/client.json").expect("url");
    let oauth = client(
        backend(&server, GrantKind::AuthorizationCode, ClientIdentity::MetadataDocument(document.clone())),
        &LedgerStore::memory(),
    );
    authorize(&oauth, "alice").await;
    assert_eq!(authorizations(&server)[0]["query"]["client_id"], document.as_str());
    assert_eq!(token_requests(&server)[0]["form"]["client_id"], document.as_str());
    assert!(server.requests().iter().all(|r| r["endpoint"] != "register"), "no dynamic registration");
}

#[tokio::test]
async fn step_up_asks_for_more_scope_a_bounded_number_of_times() {
    let server = AuthServer::start("unused").await;
    let oauth = client(backend(&server, GrantKind::AuthorizationCode, ClientIdentity::Dynamic), &LedgerStore::memory());
    let first = BearerChallenge { scope: Some(vec!["mcp:basic".to_owned()]), ..Default::default() };
    let url = authorization_url(
        oauth.token_for("docs", "alice", Some(Refusal::Unauthorized { challenge: Some(&first), sent: None })).await,
    );
    assert!(consent(&oauth, &url).0.contains("scope=mcp%3Abasic"), "the challenge's scope: {url}");
    let (state, code, cookies) = follow(&oauth, &url).await;
    oauth.complete(&state, &code, None, &cookies).await.expect("completed");
    let basic = oauth.token_for("docs", "alice", None).await.expect("token");
    let mut more = BearerChallenge {
        error: Some("insufficient_scope".to_owned()),
        scope: Some(vec!["mcp:basic".to_owned(), "mcp:write".to_owned()]),
        ..Default::default()
    };
    let url = authorization_url(
        oauth
            .token_for("docs", "alice", Some(Refusal::InsufficientScope { challenge: &more, sent: Some(&basic) }))
            .await,
    );
    let (sent_to, _) = consent(&oauth, &url);
    assert!(sent_to.contains("scope=mcp%3Abasic+mcp%3Awrite"), "granted plus challenged: {sent_to}");
    let (state, code, cookies) = follow(&oauth, &url).await;
    oauth.complete(&state, &code, None, &cookies).await.expect("completed");
    let write = oauth.token_for("docs", "alice", None).await.expect("token");
    assert_eq!(claims(&write)["scope"], "mcp:basic mcp:write");
    // The token holds every scope asked for, yet the backend refuses: re-authorizing cannot help.
    let error = failure(
        oauth
            .token_for("docs", "alice", Some(Refusal::InsufficientScope { challenge: &more, sent: Some(&write) }))
            .await,
    );
    assert!(matches!(error, OAuthError::ScopeNotGranted { .. }), "{error}");
    // A backend that keeps asking for new scopes gets MAX_STEP_UPS step-ups, then a refusal.
    more.scope = Some(vec!["mcp:admin".to_owned()]);
    let url = authorization_url(
        oauth
            .token_for("docs", "alice", Some(Refusal::InsufficientScope { challenge: &more, sent: Some(&write) }))
            .await,
    );
    let (state, code, cookies) = follow(&oauth, &url).await;
    oauth.complete(&state, &code, None, &cookies).await.expect("completed");
    let admin = oauth.token_for("docs", "alice", None).await.expect("token");
    more.scope = Some(vec!["mcp:root".to_owned()]);
    let error = failure(
        oauth
            .token_for("docs", "alice", Some(Refusal::InsufficientScope { challenge: &more, sent: Some(&admin) }))
            .await,
    );
    assert!(matches!(error, OAuthError::ScopeNotGranted { .. }), "{error}");
    assert_eq!(authorizations(&server).len(), 3, "one authorization and two step-ups in all");
}

type Misbehave = fn(&mut crate::support::auth_server::Behaviour);

#[tokio::test]
async fn lying_or_broken_authorization_servers_get_typed_errors() {
    let cases: [(&str, Misbehave); 3] = [
        ("issuer mismatch", |b| b.claimed_issuer = Some("https://evil.example".to_owned())),
        ("no S256", |b| b.s256 = false),
        ("garbage tokens", |b| b.token_garbage = Some(("text/html", "<html>502 Bad Gateway</html>"))),
    ];
    for (case, behave) in cases {
        let server = AuthServer::start("unused").await;
        server.behave(behave);
        let grant = if case == "garbage tokens" { GrantKind::ClientCredentials } else { GrantKind::AuthorizationCode };
        let settings = BackendOAuth { grant, ..machine(&server) };
        let ledger = LedgerStore::memory();
        let error = failure(client(settings, &ledger).token_for("docs", "alice", None).await);
        let expected = match case {
            "issuer mismatch" => matches!(error, OAuthError::IssuerMismatch { .. }),
            "no S256" => matches!(error, OAuthError::NoPkce { .. }),
            _ => matches!(error, OAuthError::BadTokenResponse { .. }),
        };
        assert!(expected, "{case}: {error}");
        assert!(authorizations(&server).is_empty(), "{case}: nothing was authorized");
        assert!(token_rows(&ledger).await.is_empty(), "{case}");
    }
}

#[tokio::test]
async fn an_authorization_server_that_is_down_is_unreachable() {
    let server = AuthServer::start("unused").await;
    let settings = BackendOAuth {
        authorization_server: Some(Url::parse("http://127.0.0.1:9/").expect("url")),
        ..machine(&server)
    };
    let error = failure(client(settings, &LedgerStore::memory()).token_for("docs", "alice", None).await);
    assert!(matches!(&error, OAuthError::Unreachable { url, .. } if url.starts_with("http://127.0.0.1:9/")), "{error}");
}

#[tokio::test]
async fn tokens_survive_a_restart_on_sqlite_and_not_under_another_key() {
    let server = AuthServer::start("unused").await;
    accept_machine(&server);
    let dir = std::env::temp_dir().join(format!("switchyard-oauth-sqlite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let token = {
        let ledger = LedgerStore::open("sqlite", &dir).await.expect("sqlite");
        client(machine(&server), &ledger).token_for("docs", "alice", None).await.expect("token")
    };
    let reopened = LedgerStore::open("sqlite", &dir).await.expect("sqlite again");
    assert_eq!(client(machine(&server), &reopened).token_for("docs", "alice", None).await.expect("stored"), token);
    assert_eq!(token_requests(&server).len(), 1, "the stored token was used");
    let store = Arc::new(LedgerTokens(reopened.clone()));
    let other_key =
        OAuthClient::new(vec![machine(&server)], options(Duration::from_secs(60)), Vault::from_key(&[1; 32]), store)
            .expect("client");
    other_key.token_for("docs", "alice", None).await.expect("a new token");
    assert_eq!(token_requests(&server).len(), 2, "a row another key sealed is dropped and replaced");
    let _ = std::fs::remove_dir_all(dir);
}
