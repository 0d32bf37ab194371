//! The auth module against a real issuer over HTTP (the test authorization server): tokens from its OAuth flow
//! (authorization code + PKCE) are accepted, its key rotation is followed with a rate-limited refetch, and a
//! JWKS endpoint that is down or answers garbage fails closed with a readiness reason.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use switchyard::auth::{
    Audiences, AuthError, AuthSettings, Authenticator, Endpoint, JWT_VERIFIED_CAPACITY, JWT_VERIFIED_FOR, JwksSource,
    JwtSettings, Principal,
};

use crate::support::assert::eventually;
use crate::support::auth_server::{AuthServer, JwksMode, mint_with, pkce_challenge};

const RESOURCE: &str = "http://127.0.0.1:8808/mcp";

fn settings(server: &AuthServer, refetch_interval: Duration) -> AuthSettings {
    AuthSettings {
        anonymous: false,
        api_keys: Vec::new(),
        jwt: Some(JwtSettings {
            issuer: server.issuer.clone(),
            audiences: Audiences::PerEndpoint { public_url: "http://127.0.0.1:8808".to_owned() },
            jwks: JwksSource::Url(reqwest::Url::parse(&server.jwks_url()).expect("url")),
            principal_claim: "sub".to_owned(),
            principal_prefix: "idp:".to_owned(),
            groups_claim: Some("groups".to_owned()),
            scopes_supported: vec![],
            required_scopes: vec!["mcp:tools".to_owned()],
            authorization_servers: vec![server.issuer.clone()],
            leeway: Duration::from_secs(60),
            refetch_interval,
            verified_for: JWT_VERIFIED_FOR,
            verified_capacity: JWT_VERIFIED_CAPACITY,
        }),
        public_url: "http://127.0.0.1:8808".to_owned(),
    }
}

async fn authenticate(auth: &Authenticator, token: &str) -> Result<Principal, AuthError> {
    auth.authenticate(Endpoint::Mcp, [format!("Bearer {token}").as_bytes()])
        .await
        .map(|authenticated| authenticated.principal)
}

const REDIRECT_URI: &str = "http://127.0.0.1:1/callback";

async fn json(response: reqwest::Response) -> Value {
    serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON")
}

/// Runs `/authorize` (consent is automatic) and returns the code it redirected with, after checking `state`.
async fn authorization_code(http: &reqwest::Client, metadata: &Value, verifier: &str) -> String {
    let authorize = reqwest::Url::parse_with_params(
        metadata["authorization_endpoint"].as_str().expect("endpoint"),
        [
            ("response_type", "code"),
            ("client_id", "test"),
            ("redirect_uri", REDIRECT_URI),
            ("state", "xyz"),
            ("code_challenge", &pkce_challenge(verifier)),
            ("code_challenge_method", "S256"),
            ("resource", RESOURCE),
        ],
    )
    .expect("url");
    let consent = http.get(authorize).send().await.expect("authorize");
    assert_eq!(consent.status(), StatusCode::FOUND);
    let location = reqwest::Url::parse(consent.headers()["location"].to_str().expect("ascii")).expect("url");
    assert!(location.as_str().starts_with(REDIRECT_URI), "{location}");
    let pairs: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
    assert_eq!(pairs["state"], "xyz");
    pairs["code"].clone()
}

async fn token_request(http: &reqwest::Client, metadata: &Value, form: &[(&str, &str)]) -> reqwest::Response {
    let body = reqwest::Url::parse_with_params("http://form/", form).expect("form").query().unwrap_or("").to_owned();
    http.post(metadata["token_endpoint"].as_str().expect("endpoint")).body(body).send().await.expect("token")
}

async fn redeem(http: &reqwest::Client, metadata: &Value, code: &str, verifier: &str) -> reqwest::Response {
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("code_verifier", verifier),
        ("redirect_uri", REDIRECT_URI),
        ("client_id", "test"),
    ];
    token_request(http, metadata, &form).await
}

#[tokio::test]
async fn a_token_from_the_authorization_code_flow_is_accepted() {
    let server = AuthServer::start(RESOURCE).await;
    server.set_claims(|claims| claims.groups = vec!["ops".to_owned()]);
    let auth = Authenticator::new(settings(&server, Duration::from_secs(30))).await.expect("starts");
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let metadata_url = format!("{}/.well-known/oauth-authorization-server", server.issuer);
    let metadata = json(http.get(metadata_url).send().await.expect("metadata")).await;
    assert_eq!(metadata["code_challenge_methods_supported"][0], "S256");
    let verifier = "a-verifier-of-enough-length-0123456789-abcdefghijklmnop";

    let code = authorization_code(&http, &metadata, verifier).await;
    let wrong = redeem(&http, &metadata, &code, "the-wrong-verifier").await;
    assert_eq!(wrong.status(), StatusCode::BAD_REQUEST, "PKCE is verified");
    let code = authorization_code(&http, &metadata, verifier).await;
    let tokens = json(redeem(&http, &metadata, &code, verifier).await).await;
    let again = redeem(&http, &metadata, &code, verifier).await;
    assert_eq!(again.status(), StatusCode::BAD_REQUEST, "a code is single-use");
    let access_token = tokens["access_token"].as_str().expect("access token");
    let principal = authenticate(&auth, access_token).await.expect("accepted");
    assert_eq!(principal, Principal { name: "idp:alice".into(), groups: vec!["ops".into()] });

    let refresh_token = tokens["refresh_token"].as_str().expect("refresh token");
    let form = [("grant_type", "refresh_token"), ("refresh_token", refresh_token)];
    let refreshed = json(token_request(&http, &metadata, &form).await).await;
    assert!(authenticate(&auth, refreshed["access_token"].as_str().expect("access token")).await.is_ok());
    let reused = token_request(&http, &metadata, &form).await;
    assert_eq!(reused.status(), StatusCode::BAD_REQUEST, "refresh tokens rotate");
}

#[tokio::test]
async fn key_rotation_is_followed_with_a_rate_limited_refetch() {
    let interval = Duration::from_secs(3);
    let server = AuthServer::start(RESOURCE).await;
    let auth = Authenticator::new(settings(&server, interval)).await.expect("starts");
    assert_eq!(server.jwks_fetches(), 1, "fetched at start");
    assert!(authenticate(&auth, &server.mint(&server.claims(RESOURCE))).await.is_ok());
    assert_eq!(server.jwks_fetches(), 1, "served from the cache");

    tokio::time::sleep(interval + Duration::from_millis(100)).await;
    server.rotate_to(2, "k2");
    assert!(authenticate(&auth, &server.mint(&server.claims(RESOURCE))).await.is_ok(), "the new kid is fetched");
    assert_eq!(server.jwks_fetches(), 2);
    let unknown = mint_with(2, "k9", &server.claims(RESOURCE));
    for _ in 0..5 {
        assert_eq!(authenticate(&auth, &unknown).await, Err(AuthError::UnknownKid));
    }
    assert_eq!(server.jwks_fetches(), 2, "random kids cannot make the gateway hammer the issuer");
}

#[tokio::test]
async fn a_jwks_endpoint_that_is_down_or_answers_garbage_fails_closed() {
    for (mode, reason) in [(JwksMode::Down, "503"), (JwksMode::Garbage, "not a JWKS")] {
        let server = AuthServer::start(RESOURCE).await;
        server.set_jwks_mode(mode);
        let auth = Authenticator::new(settings(&server, Duration::from_millis(200))).await.expect("still starts");
        let readiness = auth.readiness().expect_err("not ready");
        assert!(readiness.contains(&server.jwks_url()) && readiness.contains(reason), "{readiness}");
        let token = server.mint(&server.claims(RESOURCE));
        assert_eq!(authenticate(&auth, &token).await, Err(AuthError::JwksUnavailable), "{mode:?}");
        assert_eq!(AuthError::JwksUnavailable.status(), 401);

        server.set_jwks_mode(JwksMode::Keys);
        // Each attempt may reload the keys only once the refetch interval has passed since the last one.
        let recovered = || async { authenticate(&auth, &token).await.is_ok() };
        eventually(&format!("it recovers once the issuer is back ({mode:?})"), recovered).await;
        assert!(auth.readiness().is_ok());
    }
}

#[tokio::test]
async fn tokens_for_another_audience_or_without_scope_are_refused_over_http_too() {
    let server = AuthServer::start("https://another-resource.example/mcp").await;
    let auth = Authenticator::new(settings(&server, Duration::from_secs(30))).await.expect("starts");
    let foreign = server.mint(&server.claims("https://another-resource.example/mcp"));
    assert_eq!(authenticate(&auth, &foreign).await, Err(AuthError::WrongAudience));
    server.set_claims(|claims| claims.scope = "profile".to_owned());
    let scopeless = server.mint(&server.claims(RESOURCE));
    let refused = authenticate(&auth, &scopeless).await.expect_err("insufficient");
    assert_eq!((refused.status(), refused.error_code()), (403, Some("insufficient_scope")));
}
