//! Every way a JWT can be wrong, checked against a JWKS file made from the committed test keys.

use std::path::PathBuf;

use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;
use crate::auth::test_tokens::{AUDIENCE, ISSUER, PUBLIC_PEM_1, claims, forge, jwks, mint, now};

const PUBLIC_URL: &str = "http://127.0.0.1:8808";

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
        audiences: Audiences::PerEndpoint { public_url: PUBLIC_URL.to_owned() },
        jwks: JwksSource::File(jwks_file),
        principal_claim: "sub".to_owned(),
        principal_prefix: "idp:".to_owned(),
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
    let principal = validator.principal(Endpoint::Mcp, &token).await.expect("valid");
    assert_eq!(principal, Principal { name: "idp:alice".into(), groups: vec!["ops".into(), "dev".into()] });
    let other_audience = mint(1, "k1", &with(&[("aud", json!(["someone-else", AUDIENCE]))]));
    assert!(validator.principal(Endpoint::Mcp, &other_audience).await.is_ok(), "one matching audience is enough");
    let numeric = mint(1, "k1", &with(&[("sub", json!(42)), ("realm_access", Value::Null)]));
    let expected = Principal { name: "idp:42".into(), groups: vec![] };
    assert_eq!(validator.principal(Endpoint::Mcp, &numeric).await.expect("valid"), expected);
}

#[tokio::test]
async fn the_principal_carries_the_prefix_and_is_never_anonymous() {
    let file = scratch_file("prefix", &jwks(&[(1, "k1")]));
    let issuer_form = JwtSettings { principal_prefix: format!("{ISSUER}#"), ..settings(file.clone()) };
    let validator = JwtValidator::new(issuer_form).await.expect("loads");
    let name = validator.principal(Endpoint::Mcp, &mint(1, "k1", &claims())).await.map(|p| p.name);
    assert_eq!(name, Ok("https://issuer.test#alice".to_owned()));
    let bare =
        JwtValidator::new(JwtSettings { principal_prefix: String::new(), ..settings(file) }).await.expect("loads");
    let name = bare.principal(Endpoint::Mcp, &mint(1, "k1", &claims())).await.map(|p| p.name);
    assert_eq!(name, Ok("alice".to_owned()), "an empty prefix keeps the bare claim");
    let anonymous = mint(1, "k1", &with(&[("sub", json!("anonymous"))]));
    let refused = bare.principal(Endpoint::Mcp, &anonymous).await;
    assert!(matches!(&refused, Err(AuthError::InvalidToken(why)) if why.contains("`anonymous`")), "{refused:?}");
}

#[tokio::test]
async fn each_endpoint_accepts_only_tokens_for_its_own_resource() {
    let validator = validator("endpoints").await;
    let for_audience = |audience: &str| mint(1, "k1", &with(&[("aud", json!(audience))]));
    let (mcp, docs, root) =
        (for_audience(AUDIENCE), for_audience(&format!("{AUDIENCE}/docs")), for_audience(PUBLIC_URL));
    let at = |endpoint: Endpoint<'static>, token: String| {
        let validator = &validator;
        async move { validator.principal(endpoint, &token).await.map(|p| p.name) }
    };
    let docs_endpoint = Endpoint::Backend("docs");
    assert_eq!(at(Endpoint::Mcp, mcp.clone()).await, Ok("idp:alice".to_owned()));
    assert_eq!(at(docs_endpoint, mcp.clone()).await, Err(AuthError::WrongAudience), "the aggregate's token");
    assert_eq!(at(Endpoint::Root, mcp).await, Err(AuthError::WrongAudience));
    assert_eq!(at(docs_endpoint, docs.clone()).await, Ok("idp:alice".to_owned()));
    assert_eq!(at(Endpoint::Mcp, docs.clone()).await, Err(AuthError::WrongAudience), "remembered, still refused");
    assert_eq!(at(Endpoint::Backend("other"), docs).await, Err(AuthError::WrongAudience));
    assert_eq!(at(Endpoint::Root, root.clone()).await, Ok("idp:alice".to_owned()));
    assert_eq!(at(Endpoint::Mcp, root).await, Err(AuthError::WrongAudience), "the console's token");
    let prefixed = for_audience(&format!("{AUDIENCE}/docs/more"));
    assert_eq!(at(docs_endpoint, prefixed).await, Err(AuthError::WrongAudience), "compared whole");
    let listed = mint(1, "k1", &with(&[("aud", json!([PUBLIC_URL, format!("{AUDIENCE}/docs")]))]));
    assert!(at(docs_endpoint, listed.clone()).await.is_ok() && at(Endpoint::Mcp, listed).await.is_err());
}

#[tokio::test]
async fn configured_audiences_are_accepted_at_every_endpoint() {
    let file = scratch_file("configured-audiences", &jwks(&[(1, "k1")]));
    let everywhere = Audiences::Everywhere(vec!["api://gw".into()]);
    let validator = JwtValidator::new(JwtSettings { audiences: everywhere, ..settings(file) }).await.expect("loads");
    let token = mint(1, "k1", &with(&[("aud", json!("api://gw"))]));
    for endpoint in [Endpoint::Mcp, Endpoint::Backend("docs"), Endpoint::Root] {
        assert!(validator.principal(endpoint, &token).await.is_ok(), "{endpoint:?}");
    }
    let resource = mint(1, "k1", &claims());
    assert_eq!(validator.principal(Endpoint::Mcp, &resource).await, Err(AuthError::WrongAudience), "only the list");
}

#[tokio::test]
async fn lifetime_is_checked_with_leeway() {
    let validator = validator("lifetime").await;
    let expired = mint(1, "k1", &with(&[("exp", json!(now() - 3600))]));
    assert_eq!(validator.principal(Endpoint::Mcp, &expired).await, Err(AuthError::Expired));
    let just_expired = mint(1, "k1", &with(&[("exp", json!(now() - 30))]));
    assert!(validator.principal(Endpoint::Mcp, &just_expired).await.is_ok(), "within the 60 s leeway");
    let future = mint(1, "k1", &with(&[("nbf", json!(now() + 3600))]));
    assert_eq!(validator.principal(Endpoint::Mcp, &future).await, Err(AuthError::NotYetValid));
    let no_exp = mint(1, "k1", &with(&[("exp", Value::Null)]));
    assert_eq!(
        validator.principal(Endpoint::Mcp, &no_exp).await,
        Err(AuthError::InvalidToken("no `exp` claim".into()))
    );
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
        assert_eq!(validator.principal(Endpoint::Mcp, &token).await, Err(expected), "{claim} = {value}");
    }
}

#[tokio::test]
async fn signatures_and_algorithms_are_checked() {
    let validator = validator("signatures").await;
    let wrong_key = mint(2, "k1", &claims());
    assert_eq!(validator.principal(Endpoint::Mcp, &wrong_key).await, Err(AuthError::BadSignature));
    let mut tampered = mint(1, "k1", &claims());
    tampered.replace_range(tampered.len() - 4.., "AAAA");
    assert_eq!(validator.principal(Endpoint::Mcp, &tampered).await, Err(AuthError::BadSignature));

    let none = forge(&json!({"alg": "none", "kid": "k1"}), &claims(), b"");
    assert_eq!(validator.principal(Endpoint::Mcp, &none).await, Err(AuthError::DisallowedAlg("none".into())));
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(PUBLIC_PEM_1).expect("secret"))
        .expect("signed");
    assert_eq!(validator.principal(Endpoint::Mcp, &confused).await, Err(AuthError::DisallowedAlg("HS256".into())));
    let odd = forge(&json!({"alg": "<script>", "kid": "k1"}), &claims(), b"x");
    assert_eq!(validator.principal(Endpoint::Mcp, &odd).await, Err(AuthError::DisallowedAlg("(unprintable)".into())));
    let critical = forge(&json!({"alg": "RS256", "kid": "k1", "crit": ["exp"]}), &claims(), b"x");
    assert!(matches!(validator.principal(Endpoint::Mcp, &critical).await, Err(AuthError::InvalidToken(_))));
}

#[tokio::test]
async fn malformed_tokens_are_invalid() {
    let validator = validator("malformed").await;
    for token in ["a.b.c", "e30.e30.e30", "!!.e30.x"] {
        assert!(matches!(validator.principal(Endpoint::Mcp, token).await, Err(AuthError::InvalidToken(_))), "{token}");
    }
    let payload_garbage = format!("{}.bm90IGpzb24.x", mint(1, "k1", &claims()).split('.').next().expect("header"));
    assert!(matches!(
        validator.principal(Endpoint::Mcp, &payload_garbage).await,
        Err(AuthError::InvalidToken(_) | AuthError::BadSignature)
    ));
    let no_subject = mint(1, "k1", &with(&[("sub", Value::Null)]));
    assert_eq!(
        validator.principal(Endpoint::Mcp, &no_subject).await,
        Err(AuthError::InvalidToken("no `sub` claim names the principal".into()))
    );
    let empty_subject = mint(1, "k1", &with(&[("sub", json!(""))]));
    assert!(matches!(validator.principal(Endpoint::Mcp, &empty_subject).await, Err(AuthError::InvalidToken(_))));
}

#[tokio::test]
async fn required_scopes_give_a_distinct_error() {
    let validator = validator("scopes").await;
    let missing = mint(1, "k1", &with(&[("scope", json!("mcp:read profile"))]));
    assert_eq!(
        validator.principal(Endpoint::Mcp, &missing).await,
        Err(AuthError::InsufficientScope(vec!["mcp:tools".into()]))
    );
    let none = mint(1, "k1", &with(&[("scope", Value::Null)]));
    assert!(matches!(validator.principal(Endpoint::Mcp, &none).await, Err(AuthError::InsufficientScope(_))));
    let scp = mint(1, "k1", &with(&[("scope", Value::Null), ("scp", json!(["profile", "mcp:tools"]))]));
    assert!(validator.principal(Endpoint::Mcp, &scp).await.is_ok(), "`scp` lists count too");
    let expired_and_scopeless = mint(1, "k1", &with(&[("scope", Value::Null), ("exp", json!(now() - 3600))]));
    assert_eq!(
        validator.principal(Endpoint::Mcp, &expired_and_scopeless).await,
        Err(AuthError::Expired),
        "validity comes first"
    );
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
    assert_eq!(validator.principal(Endpoint::Mcp, &rotated).await, Err(AuthError::UnknownKid));
    tokio::time::sleep(interval + Duration::from_millis(100)).await;
    assert!(
        validator.principal(Endpoint::Mcp, &rotated).await.is_ok(),
        "the unknown kid reloads once the interval has passed"
    );
    std::fs::write(&file, jwks(&[(1, "k3")]).to_string()).expect("rotate again");
    assert_eq!(
        validator.principal(Endpoint::Mcp, &rotated_again).await,
        Err(AuthError::UnknownKid),
        "reloaded just now"
    );
    assert!(
        validator.principal(Endpoint::Mcp, &mint(1, "k1", &claims())).await.is_ok(),
        "keys loaded stay until a reload"
    );
}

#[tokio::test]
async fn a_kidless_token_uses_the_only_key() {
    let validator = validator("kidless").await;
    let token =
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims(), &crate::auth::test_tokens::signing_key(1))
            .expect("signed");
    assert!(validator.principal(Endpoint::Mcp, &token).await.is_ok());
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
    assert_eq!(validator.principal(Endpoint::Mcp, &mint(1, "k1", &claims())).await, Err(AuthError::JwksUnavailable));
}

#[tokio::test]
async fn a_remembered_token_is_still_refused_once_it_expires() {
    let file = scratch_file("verified-exp", &jwks(&[(1, "k1")]));
    let validator = JwtValidator::new(JwtSettings { leeway: Duration::ZERO, ..settings(file) }).await.expect("loads");
    let token = mint(1, "k1", &with(&[("exp", json!(now() + 1))]));
    assert!(validator.principal(Endpoint::Mcp, &token).await.is_ok());
    assert!(validator.principal(Endpoint::Mcp, &token).await.is_ok(), "the second use is answered from the cache");
    assert_eq!(validator.verified.len(), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(validator.principal(Endpoint::Mcp, &token).await, Err(AuthError::Expired));
}

#[tokio::test]
async fn the_same_claims_under_another_signature_are_verified_in_full() {
    let validator = validator("verified-signature").await;
    let claims = claims();
    let good = mint(1, "k1", &claims);
    assert!(validator.principal(Endpoint::Mcp, &good).await.is_ok());
    let other_key = mint(2, "k1", &claims);
    assert_eq!(other_key.rsplit_once('.').map(|(signed, _)| signed), good.rsplit_once('.').map(|(signed, _)| signed));
    assert_eq!(validator.principal(Endpoint::Mcp, &other_key).await, Err(AuthError::BadSignature));
    let (signed, _) = good.rsplit_once('.').expect("three parts");
    assert_eq!(validator.principal(Endpoint::Mcp, &format!("{signed}.AAAA")).await, Err(AuthError::BadSignature));
    assert_eq!(validator.principal(Endpoint::Mcp, &format!("{signed}.")).await, Err(AuthError::BadSignature));
    assert!(validator.principal(Endpoint::Mcp, &good).await.is_ok());
}

#[tokio::test]
async fn the_number_of_remembered_tokens_is_bounded() {
    let file = scratch_file("verified-bound", &jwks(&[(1, "k1")]));
    let validator = JwtValidator::new(JwtSettings { verified_capacity: 3, ..settings(file) }).await.expect("loads");
    for subject in 0..8 {
        let token = mint(1, "k1", &with(&[("sub", json!(format!("agent-{subject}")))]));
        assert_eq!(
            validator.principal(Endpoint::Mcp, &token).await.expect("valid").name,
            format!("idp:agent-{subject}")
        );
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
    // Signed before the bound starts: signing is slow in a debug build on a loaded machine.
    let (token, unknown, bobs) =
        (mint(1, "k1", &claims()), mint(1, "k9", &claims()), mint(1, "k1", &with(&[("sub", json!("bob"))])));
    assert!(validator.principal(Endpoint::Mcp, &token).await.is_ok());
    // The issuer drops key 1; an unknown kid makes the gateway reload the key set at once.
    std::fs::write(&file, jwks(&[(2, "k2")]).to_string()).expect("remove k1");
    assert_eq!(validator.principal(Endpoint::Mcp, &unknown).await, Err(AuthError::UnknownKid));
    assert!(validator.principal(Endpoint::Mcp, &bobs).await.is_err(), "k1 is gone");
    assert!(
        validator.principal(Endpoint::Mcp, &token).await.is_ok(),
        "a token verified before the removal, within the bound"
    );
    tokio::time::sleep(bound + Duration::from_millis(100)).await;
    assert_eq!(
        validator.principal(Endpoint::Mcp, &token).await,
        Err(AuthError::UnknownKid),
        "past the bound it is checked again"
    );
}
