//! Tests of the issuer rules of `mod.rs`: RFC 9207 `iss` in the authorization response (SEP-2468) and
//! registrations and tokens bound to the issuer that gave them (SEP-2352), against a small mock on 127.0.0.1:0
//! that plays the backend's PRM and two authorization servers, `as1` and `as2`, and records every registration
//! and token request.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::*;

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
}

async fn prm(State(mock): State<Arc<Mock>>) -> axum::Json<Value> {
    let current = mock.current.lock().expect("lock").clone();
    axum::Json(
        json!({"resource": format!("{}/mcp", mock.base), "authorization_servers": [format!("{}/{current}", mock.base)]}),
    )
}

async fn metadata(State(mock): State<Arc<Mock>>, Path(name): Path<String>) -> axum::Json<Value> {
    let issuer = format!("{}/{name}", mock.base);
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
struct Memory(Mutex<HashMap<(String, String), StoredToken>>);

impl TokenStore for Memory {
    fn get<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, Option<StoredToken>> {
        let row = self.0.lock().expect("lock").get(&(principal.to_owned(), backend.to_owned())).cloned();
        Box::pin(async move { Ok(row) })
    }

    fn put(&self, row: StoredToken) -> StoreCall<'_, ()> {
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
    let settings = BackendOAuth {
        backend: "docs".to_owned(),
        url: Url::parse(&format!("{}/mcp", mock.base)).expect("url"),
        grant,
        client: ClientIdentity::Dynamic,
        scopes: Vec::new(),
        authorization_server: None,
        auth_method: None,
        allow_internal: false,
    };
    let options = OAuthOptions {
        redirect_uri: Url::parse("https://gateway.example.com/oauth/callback").expect("url"),
        client_name: "Switchyard test".to_owned(),
        limits: HttpLimits { timeout: Duration::from_secs(5), max_body: 64 * 1024 },
        pending_ttl: Duration::from_secs(60),
        max_pending: 8,
    };
    OAuthClient::new(vec![settings], options, Vault::from_key(&[7; 32]), Arc::new(Memory::default())).expect("client")
}

/// The `state` of an authorization URL.
fn state_of(url: &str) -> String {
    let url = Url::parse(url).expect("url");
    url.query_pairs().find(|(key, _)| key == "state").map(|(_, value)| value.into_owned()).expect("state")
}

async fn authorization_state(oauth: &OAuthClient) -> String {
    match oauth.token_for("docs", "alice", None).await {
        Err(OAuthNeed::AuthorizationRequired { url, .. }) => state_of(&url),
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

    let state = authorization_state(&oauth).await;
    let wrong = oauth.complete(&state, "code", Some("https://evil.example.com")).await.expect_err("wrong iss");
    assert!(matches!(wrong, OAuthError::IssMismatch { .. }), "{wrong}");
    assert_eq!(oauth.complete(&state, "code", Some(&issuer)).await, Err(OAuthError::UnknownState), "state spent");

    let state = authorization_state(&oauth).await;
    let slash = oauth.complete(&state, "code", Some(&format!("{issuer}/"))).await.expect_err("normalized iss");
    assert!(matches!(slash, OAuthError::IssMismatch { .. }), "{slash}");

    let state = authorization_state(&oauth).await;
    assert_eq!(oauth.complete(&state, "code", None).await, Err(OAuthError::IssMissing { issuer: issuer.clone() }));
    assert!(mock.token_requests.lock().expect("lock").is_empty(), "no code was exchanged");

    let state = authorization_state(&oauth).await;
    let completed = oauth.complete(&state, "code", Some(&issuer)).await.expect("the right iss");
    assert_eq!((completed.principal.as_str(), completed.backend.as_str()), ("alice", "docs"));
    assert_eq!(mock.token_requests.lock().expect("lock").len(), 1);
    task.abort();
}

#[tokio::test]
async fn an_unadvertised_iss_that_mismatches_is_refused() {
    let (mock, task) = start(false).await;
    let oauth = client(&mock, GrantKind::AuthorizationCode);
    let state = authorization_state(&oauth).await;
    let refused = oauth.complete(&state, "code", Some("https://evil.example.com")).await.expect_err("mismatch");
    assert!(matches!(refused, OAuthError::IssMismatch { .. }), "{refused}");
    assert!(mock.token_requests.lock().expect("lock").is_empty());

    let state = authorization_state(&oauth).await;
    oauth.complete(&state, "code", None).await.expect("no iss, none advertised");
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
        Err(OAuthNeed::AuthorizationRequired { url, .. }) => assert!(url.contains("/as1/authorize"), "{url}"),
        other => panic!("expected a new authorization at as1, got {other:?}"),
    }
    assert!(mock.token_requests.lock().expect("lock").is_empty(), "as0's refresh token went nowhere");
    assert_eq!(oauth.load("alice", "docs").await.expect("load"), None, "the old tokens are dropped");
    task.abort();
}
