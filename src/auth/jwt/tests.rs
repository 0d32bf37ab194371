//! Every way a JWT can be wrong, checked against a JWKS file made from the committed test keys.

use std::path::PathBuf;

use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;
use crate::auth::test_tokens::{AUDIENCE, ISSUER, PUBLIC_PEM_1, claims, forge, jwks, mint, now};

fn scratch_file(name: &str, contents: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-jwt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, contents.to_string()).expect("write JWKS");
    path
}

fn settings(jwks_file: PathBuf) -> JwtSettings {
    JwtSettings {
        issuer: ISSUER.to_owned(),
        audiences: vec![AUDIENCE.to_owned(), "http://127.0.0.1:8808/mcp/docs".to_owned()],
        jwks: JwksSource::File(jwks_file),
        principal_claim: "sub".to_owned(),
        groups_claim: Some("realm_access.roles".to_owned()),
        scopes_supported: vec![],
        required_scopes: vec!["mcp:tools".to_owned()],
        authorization_servers: vec![ISSUER.to_owned()],
        leeway: Duration::from_secs(60),
        refetch_interval: Duration::from_secs(30),
        verified_for: JWT_VERIFIED_FOR,
        verified_capacity: JWT_VERIFIED_CAPACITY,
    }
}

async fn validator(name: &str) -> JwtValidator {
    let file = scratch_file(name, &jwks(&[(1, "k1")]));
    JwtValidator::new(settings(file)).await.expect("JWKS file loads")
}

fn with(changes: &[(&str, Value)]) -> Value {
    let mut claims = claims();
    for (name, value) in changes {
        if value.is_null() {
            claims.as_object_mut().expect("object").remove(*name);
        } else {
            claims[*name] = value.clone();
        }
    }
    claims
}

#[tokio::test]
async fn a_valid_token_names_its_principal_and_groups() {
    let validator = validator("valid").await;
    let token = mint(1, "k1", &with(&[("realm_access", json!({"roles": ["ops", "dev"]}))]));
    let principal = validator.principal(&token).await.expect("valid");
    assert_eq!(principal, Principal { name: "alice".into(), groups: vec!["ops".into(), "dev".into()] });
    let other_audience = mint(1, "k1", &with(&[("aud", json!(["someone-else", "http://127.0.0.1:8808/mcp/docs"]))]));
    assert!(validator.principal(&other_audience).await.is_ok(), "one of the accepted audiences is enough");
    let numeric = mint(1, "k1", &with(&[("sub", json!(42)), ("realm_access", Value::Null)]));
    assert_eq!(validator.principal(&numeric).await.expect("valid"), Principal { name: "42".into(), groups: vec![] });
}

#[tokio::test]
async fn lifetime_is_checked_with_leeway() {
    let validator = validator("lifetime").await;
    let expired = mint(1, "k1", &with(&[("exp", json!(now() - 3600))]));
    assert_eq!(validator.principal(&expired).await, Err(AuthError::Expired));
    let just_expired = mint(1, "k1", &with(&[("exp", json!(now() - 30))]));
    assert!(validator.principal(&just_expired).await.is_ok(), "within the 60 s leeway");
    let future = mint(1, "k1", &with(&[("nbf", json!(now() + 3600))]));
    assert_eq!(validator.principal(&future).await, Err(AuthError::NotYetValid));
    let no_exp = mint(1, "k1", &with(&[("exp", Value::Null)]));
    assert_eq!(validator.principal(&no_exp).await, Err(AuthError::InvalidToken("no `exp` claim".into())));
}

#[tokio::test]
async fn issuer_and_audience_must_match() {
    let validator = validator("iss-aud").await;
    for (claim, value, expected) in [
        ("iss", json!("https://evil.test"), AuthError::WrongIssuer),
        ("iss", json!("https://issuer.test/"), AuthError::WrongIssuer),
        ("iss", Value::Null, AuthError::WrongIssuer),
        ("aud", json!("http://127.0.0.1:9999/mcp"), AuthError::WrongAudience),
        ("aud", json!(["https://backend.example/mcp"]), AuthError::WrongAudience),
        ("aud", Value::Null, AuthError::WrongAudience),
    ] {
        let token = mint(1, "k1", &with(&[(claim, value.clone())]));
        assert_eq!(validator.principal(&token).await, Err(expected), "{claim} = {value}");
    }
}

#[tokio::test]
async fn signatures_and_algorithms_are_checked() {
    let validator = validator("signatures").await;
    let wrong_key = mint(2, "k1", &claims());
    assert_eq!(validator.principal(&wrong_key).await, Err(AuthError::BadSignature));
    let mut tampered = mint(1, "k1", &claims());
    tampered.replace_range(tampered.len() - 4.., "AAAA");
    assert_eq!(validator.principal(&tampered).await, Err(AuthError::BadSignature));

    let none = forge(&json!({"alg": "none", "kid": "k1"}), &claims(), b"");
    assert_eq!(validator.principal(&none).await, Err(AuthError::DisallowedAlg("none".into())));
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(PUBLIC_PEM_1).expect("secret"))
        .expect("signed");
    assert_eq!(validator.principal(&confused).await, Err(AuthError::DisallowedAlg("HS256".into())));
    let odd = forge(&json!({"alg": "<script>", "kid": "k1"}), &claims(), b"x");
    assert_eq!(validator.principal(&odd).await, Err(AuthError::DisallowedAlg("(unprintable)".into())));
    let critical = forge(&json!({"alg": "RS256", "kid": "k1", "crit": ["exp"]}), &claims(), b"x");
    assert!(matches!(validator.principal(&critical).await, Err(AuthError::InvalidToken(_))));
}

#[tokio::test]
async fn malformed_tokens_are_invalid() {
    let validator = validator("malformed").await;
    for token in ["a.b.c", "e30.e30.e30", "!!.e30.x"] {
        assert!(matches!(validator.principal(token).await, Err(AuthError::InvalidToken(_))), "{token}");
    }
    let payload_garbage = format!("{}.bm90IGpzb24.x", mint(1, "k1", &claims()).split('.').next().expect("header"));
    assert!(matches!(
        validator.principal(&payload_garbage).await,
        Err(AuthError::InvalidToken(_)) | Err(AuthError::BadSignature)
    ));
    let no_subject = mint(1, "k1", &with(&[("sub", Value::Null)]));
    assert_eq!(
        validator.principal(&no_subject).await,
        Err(AuthError::InvalidToken("no `sub` claim names the principal".into()))
    );
    let empty_subject = mint(1, "k1", &with(&[("sub", json!(""))]));
    assert!(matches!(validator.principal(&empty_subject).await, Err(AuthError::InvalidToken(_))));
}

#[tokio::test]
async fn required_scopes_give_a_distinct_error() {
    let validator = validator("scopes").await;
    let missing = mint(1, "k1", &with(&[("scope", json!("mcp:read profile"))]));
    assert_eq!(validator.principal(&missing).await, Err(AuthError::InsufficientScope(vec!["mcp:tools".into()])));
    let none = mint(1, "k1", &with(&[("scope", Value::Null)]));
    assert!(matches!(validator.principal(&none).await, Err(AuthError::InsufficientScope(_))));
    let scp = mint(1, "k1", &with(&[("scope", Value::Null), ("scp", json!(["profile", "mcp:tools"]))]));
    assert!(validator.principal(&scp).await.is_ok(), "`scp` lists count too");
    let expired_and_scopeless = mint(1, "k1", &with(&[("scope", Value::Null), ("exp", json!(now() - 3600))]));
    assert_eq!(validator.principal(&expired_and_scopeless).await, Err(AuthError::Expired), "validity comes first");
}

#[tokio::test]
async fn an_unknown_kid_reloads_the_keys_at_most_once_per_interval() {
    let interval = Duration::from_secs(3);
    let (rotated, rotated_again) = (mint(2, "k2", &claims()), mint(1, "k3", &claims()));
    let file = scratch_file("rotation", &jwks(&[(1, "k1")]));
    let validator =
        JwtValidator::new(JwtSettings { refetch_interval: interval, ..settings(file.clone()) }).await.expect("loads");
    // The issuer rotates to key 2 right after startup's load: within the interval, an unknown kid reloads nothing.
    std::fs::write(&file, jwks(&[(1, "k1"), (2, "k2")]).to_string()).expect("rotate");
    assert_eq!(validator.principal(&rotated).await, Err(AuthError::UnknownKid));
    tokio::time::sleep(interval + Duration::from_millis(100)).await;
    assert!(validator.principal(&rotated).await.is_ok(), "the unknown kid reloads once the interval has passed");
    std::fs::write(&file, jwks(&[(1, "k3")]).to_string()).expect("rotate again");
    assert_eq!(validator.principal(&rotated_again).await, Err(AuthError::UnknownKid), "reloaded just now");
    assert!(validator.principal(&mint(1, "k1", &claims())).await.is_ok(), "keys loaded stay until a reload");
}

#[tokio::test]
async fn a_kidless_token_uses_the_only_key() {
    let validator = validator("kidless").await;
    let token =
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims(), &crate::auth::test_tokens::signing_key(1))
            .expect("signed");
    assert!(validator.principal(&token).await.is_ok());
}

#[tokio::test]
async fn a_bad_jwks_file_stops_startup() {
    let garbage = scratch_file("garbage", &json!({"not": "a key set"}));
    let error = JwtValidator::new(settings(garbage)).await.err().expect("refused");
    assert!(error.to_string().contains("not a JWKS"), "{error}");
    let missing = JwtValidator::new(settings(PathBuf::from("/nonexistent/jwks.json"))).await.err().expect("refused");
    assert!(missing.to_string().contains("cannot read"), "{missing}");
}

#[tokio::test]
async fn an_unreachable_jwks_url_fails_closed() {
    let url = reqwest::Url::parse("http://127.0.0.1:1/jwks").expect("url");
    let validator = JwtValidator::new(JwtSettings { jwks: JwksSource::Url(url), ..settings(PathBuf::new()) })
        .await
        .expect("an unreachable issuer does not stop startup");
    let reason = validator.readiness().expect_err("not ready");
    assert!(reason.contains("http://127.0.0.1:1/jwks") && reason.contains("cannot fetch"), "{reason}");
    assert_eq!(validator.principal(&mint(1, "k1", &claims())).await, Err(AuthError::JwksUnavailable));
}

#[tokio::test]
async fn a_remembered_token_is_still_refused_once_it_expires() {
    let file = scratch_file("verified-exp", &jwks(&[(1, "k1")]));
    let validator = JwtValidator::new(JwtSettings { leeway: Duration::ZERO, ..settings(file) }).await.expect("loads");
    let token = mint(1, "k1", &with(&[("exp", json!(now() + 1))]));
    assert!(validator.principal(&token).await.is_ok());
    assert!(validator.principal(&token).await.is_ok(), "the second use is answered from the cache");
    assert_eq!(validator.verified.len(), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(validator.principal(&token).await, Err(AuthError::Expired));
}

#[tokio::test]
async fn the_same_claims_under_another_signature_are_verified_in_full() {
    let validator = validator("verified-signature").await;
    let claims = claims();
    let good = mint(1, "k1", &claims);
    assert!(validator.principal(&good).await.is_ok());
    let other_key = mint(2, "k1", &claims);
    assert_eq!(other_key.rsplit_once('.').map(|(signed, _)| signed), good.rsplit_once('.').map(|(signed, _)| signed));
    assert_eq!(validator.principal(&other_key).await, Err(AuthError::BadSignature));
    let (signed, _) = good.rsplit_once('.').expect("three parts");
    assert_eq!(validator.principal(&format!("{signed}.AAAA")).await, Err(AuthError::BadSignature));
    assert_eq!(validator.principal(&format!("{signed}.")).await, Err(AuthError::BadSignature));
    assert!(validator.principal(&good).await.is_ok());
}

#[tokio::test]
async fn the_number_of_remembered_tokens_is_bounded() {
    let file = scratch_file("verified-bound", &jwks(&[(1, "k1")]));
    let validator = JwtValidator::new(JwtSettings { verified_capacity: 3, ..settings(file) }).await.expect("loads");
    for subject in 0..8 {
        let token = mint(1, "k1", &with(&[("sub", json!(format!("agent-{subject}")))]));
        assert_eq!(validator.principal(&token).await.expect("valid").name, format!("agent-{subject}"));
        assert!(validator.verified.len() <= 3);
    }
    assert_eq!(validator.verified.len(), 3);
}

#[tokio::test]
async fn a_key_removed_from_the_jwks_stops_working_within_the_bound() {
    let bound = Duration::from_millis(400);
    let file = scratch_file("verified-removal", &jwks(&[(1, "k1"), (2, "k2")]));
    let quick = JwtSettings { verified_for: bound, refetch_interval: Duration::ZERO, ..settings(file.clone()) };
    let validator = JwtValidator::new(quick).await.expect("loads");
    let token = mint(1, "k1", &claims());
    assert!(validator.principal(&token).await.is_ok());
    // The issuer drops key 1; an unknown kid makes the gateway reload the key set at once.
    std::fs::write(&file, jwks(&[(2, "k2")]).to_string()).expect("remove k1");
    assert_eq!(validator.principal(&mint(1, "k9", &claims())).await, Err(AuthError::UnknownKid));
    assert!(validator.principal(&mint(1, "k1", &with(&[("sub", json!("bob"))]))).await.is_err(), "k1 is gone");
    assert!(validator.principal(&token).await.is_ok(), "a token verified before the removal, within the bound");
    tokio::time::sleep(bound + Duration::from_millis(100)).await;
    assert_eq!(validator.principal(&token).await, Err(AuthError::UnknownKid), "past the bound it is checked again");
}
