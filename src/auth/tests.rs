//! Tests of `auth`.

use serde_json::json;

use super::bearer::MAX_TOKEN;
use super::test_tokens::{AUDIENCE, ISSUER, claims, jwks, mint};
use super::*;

fn key(principal: &str, key: &str) -> ApiKey {
    ApiKey {
        principal: principal.to_owned(),
        digest: api_key_digest(key),
        groups: vec!["ops".to_owned()],
        expires: None,
    }
}

fn keys_only(anonymous: bool) -> AuthSettings {
    AuthSettings {
        anonymous,
        api_keys: vec![key("alice", "sy_alice")],
        jwt: None,
        public_url: "http://127.0.0.1:8808".to_owned(),
    }
}

async fn with_jwt() -> Authenticator {
    let dir = std::env::temp_dir().join(format!("switchyard-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let file = dir.join("jwks.json");
    std::fs::write(&file, jwks(&[(1, "k1")]).to_string()).expect("write JWKS");
    let jwt = JwtSettings {
        issuer: ISSUER.to_owned(),
        audiences: Audiences::PerEndpoint { public_url: "http://127.0.0.1:8808".to_owned() },
        jwks: JwksSource::File(file),
        principal_claim: "sub".to_owned(),
        principal_prefix: format!("{ISSUER}#"),
        groups_claim: None,
        scopes_supported: vec![],
        required_scopes: vec![],
        authorization_servers: vec![ISSUER.to_owned()],
        leeway: std::time::Duration::from_secs(60),
        refetch_interval: JWKS_REFETCH_INTERVAL,
        verified_for: crate::auth::JWT_VERIFIED_FOR,
        verified_capacity: crate::auth::JWT_VERIFIED_CAPACITY,
    };
    Authenticator::new(AuthSettings { jwt: Some(jwt), ..keys_only(false) }).await.expect("starts")
}

async fn authenticate(auth: &Authenticator, header: Option<&str>) -> Result<Principal, AuthError> {
    auth.authenticate(Endpoint::Mcp, header.map(str::as_bytes)).await.map(|authenticated| authenticated.principal)
}

#[tokio::test]
async fn without_credentials_configured_everyone_is_anonymous() {
    let open = Authenticator::anonymous_only();
    assert_eq!(authenticate(&open, None).await, Ok(Principal::anonymous()));
    assert_eq!(authenticate(&open, Some("Bearer whatever")).await, Ok(Principal::anonymous()));
    assert_eq!(authenticate(&open, Some("garbage")).await, Ok(Principal::anonymous()));
    assert!(open.readiness().is_ok() && open.metadata().is_none());
}

#[tokio::test]
async fn api_keys_authenticate_and_refuse() {
    let auth = Authenticator::new(keys_only(false)).await.expect("starts");
    let alice = authenticate(&auth, Some("Bearer sy_alice")).await.expect("known key");
    assert_eq!((alice.name.as_str(), alice.groups.len()), ("alice", 1));
    assert_eq!(authenticate(&auth, None).await, Err(AuthError::Missing));
    assert_eq!(authenticate(&auth, Some("Bearer sy_mallory")).await, Err(AuthError::UnknownKey));
    assert!(matches!(authenticate(&auth, Some("Basic YTpi")).await, Err(AuthError::Malformed(_))));
    let huge = format!("Bearer {}", "k".repeat(MAX_TOKEN + 1));
    assert_eq!(authenticate(&auth, Some(&huge)).await, Err(AuthError::TooLarge));
    let jwt_shaped = mint(1, "k1", &claims());
    assert_eq!(authenticate(&auth, Some(&format!("Bearer {jwt_shaped}"))).await, Err(AuthError::UnknownKey));
    assert_eq!(auth.challenge(Endpoint::Mcp, &AuthError::Missing), "Bearer", "no OAuth metadata to point to");
}

#[tokio::test]
async fn anonymous_agents_may_be_allowed_beside_credentials() {
    let auth = Authenticator::new(keys_only(true)).await.expect("starts");
    assert_eq!(authenticate(&auth, None).await, Ok(Principal::anonymous()));
    assert_eq!(authenticate(&auth, Some("Bearer sy_alice")).await.map(|p| p.name), Ok("alice".to_owned()));
    assert_eq!(authenticate(&auth, Some("Bearer sy_wrong")).await, Err(AuthError::UnknownKey), "never a fallback");
}

#[tokio::test]
async fn jwts_and_api_keys_work_side_by_side() {
    let auth = with_jwt().await;
    let token = mint(1, "k1", &claims());
    let by_token = authenticate(&auth, Some(&format!("Bearer {token}"))).await.map(|p| p.name);
    assert_eq!(by_token, Ok("https://issuer.test#alice".into()), "`sub = alice` is not API-key alice");
    let by_key = authenticate(&auth, Some("bearer sy_alice")).await.expect("known key");
    assert_eq!((by_key.name.as_str(), by_key.groups), ("alice", vec!["ops".into()]));
    let at_backend = auth.authenticate(Endpoint::Backend("docs"), Some(format!("Bearer {token}").as_bytes())).await;
    assert_eq!(at_backend, Err(AuthError::WrongAudience), "a token for /mcp is no token for /mcp/docs");
    // A verified JWT comes back beside its principal (for token exchange), redacted in Debug; an API key never.
    let header = format!("Bearer {token}");
    let with_jwt = auth.authenticate(Endpoint::Mcp, Some(header.as_bytes())).await.expect("valid");
    assert_eq!(with_jwt.subject_token.as_ref().map(|subject| &**subject.expose()), Some(token.as_str()));
    assert!(!format!("{with_jwt:?}").contains(&token), "{with_jwt:?}");
    let with_key = auth.authenticate(Endpoint::Mcp, Some(b"Bearer sy_alice".as_slice())).await.expect("known key");
    assert!(with_key.subject_token.is_none());
    let mut stale = claims();
    stale["exp"] = json!(1);
    let expired = mint(1, "k1", &stale);
    assert_eq!(authenticate(&auth, Some(&format!("Bearer {expired}"))).await, Err(AuthError::Expired));
    assert!(auth.readiness().is_ok());
    let challenge = auth.challenge(Endpoint::Mcp, &AuthError::Missing);
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"http://127.0.0.1:8808/.well-known/oauth-protected-resource/mcp\""
    );
    let document = auth.metadata().expect("metadata").document(Endpoint::Mcp);
    assert_eq!(document["resource"], AUDIENCE);
    assert_eq!(document["authorization_servers"], json!([ISSUER]));
}
