//! Tests of the issuer rules of `mod.rs` and `authorize.rs`: RFC 9207 `iss` in the authorization response
//! (SEP-2468) and registrations and tokens bound to the issuer that gave them (SEP-2352), against a small mock on
//! 127.0.0.1:0 that plays the backend's PRM and two authorization servers, `as1` and `as2`, and records every
//! registration and token request.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::authorize::check_iss;
use super::*;
use crate::secret::Secret;

/// What the mock serves and what it saw.
#[derive(Default)]
struct Mock {
    base: String,
    /// The authorization server the PRM names.
    current: Mutex<String>,
    iss_supported: bool,
    /// (server, request body) of every registration.
    registrations: Mutex<Vec<(String, Value)>>,
    /// (server, form body) of every token request.
    token_requests: Mutex<Vec<(String, String)>>,
    /// How many metadata documents (PRM and servers') were asked for.
    fetches: std::sync::atomic::AtomicUsize,
}

/// The PRM names `current`: a server name under the mock's base, or a whole URL.
async fn prm(State(mock): State<Arc<Mock>>) -> axum::Json<Value> {
    mock.fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let current = mock.current.lock().expect("lock").clone();
    let named = if current.starts_with("http") { current } else { format!("{}/{current}", mock.base) };
    axum::Json(json!({"resource": format!("{}/mcp", mock.base), "authorization_servers": [named]}))
}

/// Every server's metadata, under whatever host name the mock was reached by.
async fn metadata(
    State(mock): State<Arc<Mock>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
) -> axum::Json<Value> {
    mock.fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let host = headers.get("host").and_then(|host| host.to_str().ok()).unwrap_or_default();
    let issuer = format!("http://{host}/{name}");
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"],
        "authorization_response_iss_parameter_supported": mock.iss_supported,
    }))
}

async fn register(
    State(mock): State<Arc<Mock>>,
    Path(name): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> (axum::http::StatusCode, axum::Json<Value>) {
    mock.registrations.lock().expect("lock").push((name.clone(), body));
    let answer = json!({"client_id": format!("{name}-client"), "client_secret": format!("{name}-secret")});
    (axum::http::StatusCode::CREATED, axum::Json(answer))
}

async fn token(State(mock): State<Arc<Mock>>, Path(name): Path<String>, body: String) -> axum::Json<Value> {
    let mut requests = mock.token_requests.lock().expect("lock");
    requests.push((name.clone(), body));
    axum::Json(
        json!({"access_token": format!("{name}-token-{}", requests.len()), "token_type": "Bearer", "expires_in": 3600}),
    )
}

/// Starts the mock; the PRM names `as1` first.
async fn start(iss_supported: bool) -> (Arc<Mock>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let mock = Arc::new(Mock { base, current: Mutex::new("as1".to_owned()), iss_supported, ..Mock::default() });
    let app = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route("/.well-known/oauth-authorization-server/{name}", get(metadata))
        .route("/{name}/register", post(register))
        .route("/{name}/token", post(token))
        .with_state(Arc::clone(&mock));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (mock, task)
}

/// Tokens in memory.
#[derive(Default)]
struct Memory(Mutex<HashMap<(String, String), BackendTokenRow>>);

impl TokenStore for Memory {
    fn get<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, Option<BackendTokenRow>> {
        let row = self.0.lock().expect("lock").get(&(principal.to_owned(), backend.to_owned())).cloned();
        Box::pin(async move { Ok(row) })
    }

    fn put(&self, row: BackendTokenRow) -> StoreCall<'_, ()> {
        self.0.lock().expect("lock").insert((row.principal.clone(), row.backend.clone()), row);
        Box::pin(async { Ok(()) })
    }

    fn delete<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, bool> {
        let removed = self.0.lock().expect("lock").remove(&(principal.to_owned(), backend.to_owned())).is_some();
        Box::pin(async move { Ok(removed) })
    }

    fn any_principal<'a>(&'a self, backend: &'a str) -> StoreCall<'a, Option<String>> {
        let rows = self.0.lock().expect("lock");
        let found = rows.keys().find(|(_, b)| b == backend).map(|(principal, _)| principal.clone());
        Box::pin(async move { Ok(found) })
    }
}

fn client(mock: &Mock, grant: GrantKind) -> OAuthClient {
    client_as(mock, grant, ClientIdentity::Dynamic, Arc::new(Memory::default()))
}

fn client_as(mock: &Mock, grant: GrantKind, identity: ClientIdentity, store: Arc<Memory>) -> OAuthClient {
    let settings = BackendOAuth {
        backend: "docs".to_owned(),
        url: Url::parse(&format!("{}/mcp", mock.base)).expect("url"),
        grant,
        client: identity,
        scopes: Vec::new(),
        authorization_server: None,
        auth_method: None,
        allow_internal: false,
        exchange: Default::default(),
    };
    let options = OAuthOptions {
        redirect_uri: Url::parse("https://gateway.example.com/oauth/callback").expect("url"),
        client_name: "Switchyard test".to_owned(),
        limits: HttpLimits { timeout: Duration::from_secs(5), max_body: 64 * 1024 },
        pending_ttl: Duration::from_secs(60),
        max_pending: 8,
    };
    OAuthClient::new(vec![settings], options, Vault::from_key(&[7; 32]), store).expect("client")
}

/// The `state` of an authorization URL.
fn state_of(url: &str) -> String {
    let url = Url::parse(url).expect("url");
    url.query_pairs().find(|(key, _)| key == "state").map(|(_, value)| value.into_owned()).expect("state")
}

/// A start page URL opened and consented to by one browser: the authorization server URL and its cookies.
fn consented(oauth: &OAuthClient, start: &str) -> (String, Vec<String>) {
    let flow =
        Url::parse(start).expect("url").query_pairs().find(|(key, _)| key == "flow").expect("flow").1.into_owned();
    let consent = oauth.consent(&flow).expect("a live flow");
    let cookies = vec![consent.cookie];
    (oauth.proceed(&flow, &consent.consent, &cookies).expect("consented"), cookies)
}

/// The `state` of a new authorization, and the cookies of the browser that consented to it.
async fn authorization_state(oauth: &OAuthClient) -> (String, Vec<String>) {
    match oauth.token_for("docs", "alice", None).await {
        Err(OAuthNeed::AuthorizationRequired { url, .. }) => {
            let (url, cookies) = consented(oauth, &url);
            (state_of(&url), cookies)
        }
        other => panic!("expected an authorization URL, got {other:?}"),
    }
}

fn server(iss_supported: bool) -> ServerMetadata {
    ServerMetadata {
        issuer: "https://as.example.com/tenant".to_owned(),
        authorization_endpoint: None,
        token_endpoint: Url::parse("https://as.example.com/tenant/token").expect("url"),
        registration_endpoint: None,
        code_challenge_methods_supported: Vec::new(),
        token_endpoint_auth_methods_supported: None,
        token_endpoint_auth_signing_alg_values_supported: None,
        scopes_supported: None,
        client_id_metadata_document_supported: false,
        authorization_response_iss_parameter_supported: iss_supported,
    }
}

#[test]
fn iss_is_compared_as_a_plain_string() {
    let exact = "https://as.example.com/tenant";
    for advertised in [true, false] {
        let server = server(advertised);
        assert_eq!(check_iss(&server, Some(exact)), Ok(()));
        // A present iss is compared whether or not the server advertised it (RFC 9207 §2.4).
        for wrong in [
            "https://evil.example.com",
            "https://as.example.com/tenant/",
            "HTTPS://as.example.com/tenant",
            "https://AS.example.com/tenant",
            "https://as.example.com:443/tenant",
            "https://as.example.com/%74enant",
        ] {
            let refused = check_iss(&server, Some(wrong)).expect_err(wrong);
            assert_eq!(refused, OAuthError::IssMismatch { expected: exact.to_owned(), found: wrong.to_owned() });
            assert!(refused.to_string().contains("the code was not used"), "{refused}");
        }
    }
    assert_eq!(check_iss(&server(false), None), Ok(()), "not advertised: a response without iss is accepted");
    let missing = check_iss(&server(true), None).expect_err("advertised: iss is required");
    assert_eq!(missing, OAuthError::IssMissing { issuer: exact.to_owned() });
    assert!(missing.to_string().contains("authorization_response_iss_parameter_supported"), "{missing}");
}

#[tokio::test]
async fn a_wrong_or_missing_iss_is_refused_before_the_code_is_exchanged() {
    let (mock, task) = start(true).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let issuer = format!("{}/as1", mock.base);

    let (state, cookies) = authorization_state(&oauth).await;
    let wrong =
        oauth.complete(&state, "code", Some("https://evil.example.com"), &cookies).await.expect_err("wrong iss");
    assert!(matches!(wrong, OAuthError::IssMismatch { .. }), "{wrong}");
    assert_eq!(
        oauth.complete(&state, "code", Some(&issuer), &cookies).await,
        Err(OAuthError::UnknownState),
        "state spent"
    );

    let (state, cookies) = authorization_state(&oauth).await;
    let slash =
        oauth.complete(&state, "code", Some(&format!("{issuer}/")), &cookies).await.expect_err("normalized iss");
    assert!(matches!(slash, OAuthError::IssMismatch { .. }), "{slash}");

    let (state, cookies) = authorization_state(&oauth).await;
    assert_eq!(
        oauth.complete(&state, "code", None, &cookies).await,
        Err(OAuthError::IssMissing { issuer: issuer.clone() })
    );
    assert!(mock.token_requests.lock().expect("lock").is_empty(), "no code was exchanged");

    let (state, cookies) = authorization_state(&oauth).await;
    let completed = oauth.complete(&state, "code", Some(&issuer), &cookies).await.expect("the right iss");
    assert_eq!((completed.principal.as_str(), completed.backend.as_str()), ("alice", "docs"));
    assert_eq!(mock.token_requests.lock().expect("lock").len(), 1);
    task.abort();
}

#[tokio::test]
async fn an_unadvertised_iss_that_mismatches_is_refused() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let (state, cookies) = authorization_state(&oauth).await;
    let refused =
        oauth.complete(&state, "code", Some("https://evil.example.com"), &cookies).await.expect_err("mismatch");
    assert!(matches!(refused, OAuthError::IssMismatch { .. }), "{refused}");
    assert!(mock.token_requests.lock().expect("lock").is_empty());

    let (state, cookies) = authorization_state(&oauth).await;
    oauth.complete(&state, "code", None, &cookies).await.expect("no iss, none advertised");
    assert_eq!(mock.token_requests.lock().expect("lock").len(), 1);
    task.abort();
}

#[tokio::test]
async fn dynamic_registration_says_the_gateway_is_a_web_application() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    authorization_state(&oauth).await;
    let registrations = mock.registrations.lock().expect("lock").clone();
    assert_eq!(registrations.len(), 1);
    assert_eq!(registrations[0].1["application_type"], "web");
    assert_eq!(registrations[0].1["redirect_uris"], json!(["https://gateway.example.com/oauth/callback"]));
    task.abort();
}

#[tokio::test]
async fn a_new_authorization_server_gets_a_new_registration_once() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::ClientCredentials);
    let first = oauth.token_for("docs", "alice", None).await.expect("a token from as1");

    *mock.current.lock().expect("lock") = "as2".to_owned();
    let refused = Refusal::Unauthorized { challenge: None, sent: Some(&first) };
    let second = oauth.token_for("docs", "alice", Some(refused)).await.expect("a token from as2");
    let refused = Refusal::Unauthorized { challenge: None, sent: Some(&second) };
    oauth.token_for("docs", "alice", Some(refused)).await.expect("another token from as2");

    let registered: Vec<String> =
        mock.registrations.lock().expect("lock").iter().map(|(server, _)| server.clone()).collect();
    assert_eq!(registered, ["as1", "as2"], "one registration per issuer, none for the same issuer again");
    let requests = mock.token_requests.lock().expect("lock").clone();
    assert_eq!(requests.iter().map(|(server, _)| server.as_str()).collect::<Vec<_>>(), ["as1", "as2", "as2"]);
    for (_, body) in &requests[1..] {
        assert!(body.contains("client_id=as2-client") && !body.contains("as1"), "as1's client at as2: {body}");
    }
    task.abort();
}

#[tokio::test]
async fn a_refresh_token_is_never_sent_to_another_issuer() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let old = TokenSet {
        access_token: "old".to_owned(),
        refresh_token: Some("as0-refresh".to_owned()),
        expires_at: Some(1),
        scopes: Vec::new(),
        client_id: "as0-client".to_owned(),
        step_ups: 0,
        issuer: Some(format!("{}/as0", mock.base)),
    };
    oauth.save("alice", "docs", &old).await.expect("stored");
    match oauth.token_for("docs", "alice", None).await {
        Err(OAuthNeed::AuthorizationRequired { url, .. }) => {
            let (url, _) = consented(&oauth, &url);
            assert!(url.contains("/as1/authorize"), "{url}");
        }
        other => panic!("expected a new authorization at as1, got {other:?}"),
    }
    assert!(mock.token_requests.lock().expect("lock").is_empty(), "as0's refresh token went nowhere");
    assert_eq!(oauth.load("alice", "docs").await.expect("load"), None, "the old tokens are dropped");
    task.abort();
}

fn pre_registered() -> ClientIdentity {
    ClientIdentity::PreRegistered {
        client_id: "gw".to_owned(),
        client_secret: Some(Secret::new("pre-registered-secret".to_owned())),
        private_key: None,
    }
}

/// The servers that were sent a token request.
fn token_servers(mock: &Mock) -> Vec<String> {
    mock.token_requests.lock().expect("lock").iter().map(|(server, _)| server.clone()).collect()
}

/// The issuer pinned for `docs` in `store`, as operators see it.
fn pin_row(store: &Memory) -> Option<String> {
    let rows = store.0.lock().expect("lock");
    rows.get(&(ISSUER_PIN_PRINCIPAL.to_owned(), "docs".to_owned())).map(|row| row.scopes.clone())
}

#[tokio::test]
async fn a_client_secret_never_goes_to_a_server_on_another_host_the_backend_names() {
    let (mock, task) = start(false).await;
    // The backend (on 127.0.0.1) names a server of its own on another host name: the same listener as `localhost`.
    let port = Url::parse(&mock.base).expect("url").port().expect("port");
    let foreign = format!("http://localhost:{port}/evil");
    *mock.current.lock().expect("lock") = foreign.clone();
    let store = Arc::new(Memory::default());
    let oauth = client_as(&mock, GrantKind::ClientCredentials, pre_registered(), Arc::clone(&store));
    let refused = oauth.token_for("docs", "alice", None).await.expect_err("a foreign issuer");
    let OAuthNeed::Failed(error) = refused else { panic!("{refused:?}") };
    assert_eq!(
        error,
        OAuthError::ForeignIssuer { backend: "docs".to_owned(), named: foreign.clone(), host: "127.0.0.1".to_owned() }
    );
    let message = error.to_string();
    assert!(message.contains(&foreign) && message.contains("authorization_server"), "{message}");
    assert!(token_servers(&mock).is_empty(), "no credential was sent anywhere");
    assert_eq!(pin_row(&store), None, "nothing is pinned");

    // A configured authorization server is the operator's word: the same server is then used.
    let mut settings = oauth.backends["docs"].settings.clone();
    settings.authorization_server = Some(Url::parse(&foreign).expect("url"));
    let configured =
        OAuthClient::new(vec![settings], oauth.options.clone(), Vault::from_key(&[7; 32]), store).expect("client");
    configured.token_for("docs", "alice", None).await.expect("a token from the configured server");
    assert_eq!(token_servers(&mock), ["evil"]);
    task.abort();
}

#[tokio::test]
async fn the_first_issuer_is_pinned_and_a_change_is_refused_across_restarts_until_revoked() {
    let (mock, task) = start(false).await;
    let store = Arc::new(Memory::default());
    let oauth = client_as(&mock, GrantKind::ClientCredentials, pre_registered(), Arc::clone(&store));
    let first = oauth.token_for("docs", "alice", None).await.expect("a token from as1");
    let as1 = format!("{}/as1", mock.base);
    assert_eq!(pin_row(&store).as_deref(), Some(as1.as_str()), "pinned at the first discovery");

    // The backend now names as2 and refuses the token: the gateway keeps to as1.
    *mock.current.lock().expect("lock") = "as2".to_owned();
    let refused = Refusal::Unauthorized { challenge: None, sent: Some(&first) };
    oauth.token_for("docs", "alice", Some(refused)).await.expect("a new token, from as1 again");
    assert_eq!(token_servers(&mock), ["as1", "as1"], "nothing went to as2");

    // After a restart (or on another replica sharing the store) the pin still holds.
    store.delete(GATEWAY_PRINCIPAL, "docs").await.expect("delete");
    let restarted = client_as(&mock, GrantKind::ClientCredentials, pre_registered(), Arc::clone(&store));
    let as2 = format!("{}/as2", mock.base);
    let refused = restarted.token_for("docs", "alice", None).await.expect_err("as2 is not the pinned issuer");
    let expected = OAuthError::IssuerPinned { backend: "docs".to_owned(), pinned: as1.clone(), named: as2.clone() };
    assert_eq!(refused, OAuthNeed::Failed(expected.clone()));
    assert!(expected.to_string().contains("switchyard auth revoke --backend docs"), "{expected}");
    assert_eq!(token_servers(&mock), ["as1", "as1"], "nothing went to as2");

    // `switchyard auth revoke --backend docs` deletes the backend's rows, the pin with them.
    store.delete(ISSUER_PIN_PRINCIPAL, "docs").await.expect("delete");
    let accepted = client_as(&mock, GrantKind::ClientCredentials, pre_registered(), Arc::clone(&store));
    accepted.token_for("docs", "alice", None).await.expect("a token from as2");
    assert_eq!(token_servers(&mock), ["as1", "as1", "as2"]);
    assert_eq!(pin_row(&store).as_deref(), Some(as2.as_str()), "pinned anew");
    task.abort();
}

#[tokio::test]
async fn a_failed_discovery_is_not_repeated_for_every_principal() {
    let (mock, task) = start(false).await;
    *mock.current.lock().expect("lock") = format!("{}/missing/deeper", mock.base);
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let first = oauth.token_for("docs", "alice", None).await.expect_err("no such server");
    let OAuthNeed::Failed(first) = first else { panic!("{first:?}") };
    assert!(matches!(first, OAuthError::NotFound { .. }), "{first}");
    let fetched = mock.fetches.load(std::sync::atomic::Ordering::SeqCst);
    assert!(fetched >= 1, "the first discovery asked the mock");
    let second = oauth.token_for("docs", "bob", None).await.expect_err("held off");
    let OAuthNeed::Failed(OAuthError::Backoff { backend, error, retry_in_secs }) = second else { panic!("{second:?}") };
    assert_eq!((backend.as_str(), *error), ("docs", first));
    assert!((1..=30).contains(&retry_in_secs), "{retry_in_secs}");
    assert_eq!(mock.fetches.load(std::sync::atomic::Ordering::SeqCst), fetched, "nothing was fetched again");
    task.abort();
}

#[path = "flow_tests.rs"]
mod flow;
