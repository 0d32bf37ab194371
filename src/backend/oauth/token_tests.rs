//! Unit tests of the token endpoint: answers read, garbage refused without echoing tokens, methods chosen, errors bounded.

use serde_json::json;

use super::*;

fn parsed(value: Value) -> Result<Issued, String> {
    parse_issued(value.as_object().expect("object"))
}

#[test]
fn token_answers_are_read() {
    let issued = parsed(json!({
        "access_token": "abc.def", "token_type": "bearer", "expires_in": 60,
        "refresh_token": "r1", "scope": "a b",
    }))
    .expect("valid");
    assert_eq!(issued.access_token, "abc.def");
    assert_eq!(issued.refresh_token.as_deref(), Some("r1"));
    assert_eq!(issued.scopes, Some(vec!["a".to_owned(), "b".to_owned()]));
    let expires = issued.expires_at.expect("expiry");
    assert!(expires >= unix_now() + 59 && expires <= unix_now() + 61);
    let minimal = parsed(json!({"access_token": "x", "expires_in": "30"})).expect("valid");
    assert!(minimal.refresh_token.is_none() && minimal.scopes.is_none() && minimal.expires_at.is_some());
}

#[test]
fn garbage_is_refused_without_echoing_tokens() {
    for (answer, expected) in [
        (json!({}), "no usable `access_token`"),
        (json!({"access_token": ""}), "no usable"),
        (json!({"access_token": "has space"}), "no usable"),
        (json!({"access_token": 5}), "no usable"),
        (json!({"access_token": "t", "token_type": "DPoP"}), "is not Bearer"),
        (json!({"access_token": "t", "expires_in": "soon"}), "`expires_in`"),
        (json!({"access_token": "t", "expires_in": -1}), "`expires_in`"),
        (json!({"access_token": "t", "refresh_token": 1}), "`refresh_token`"),
        (json!({"access_token": "secret-value", "scope": ["a"]}), "`scope`"),
    ] {
        let error = parsed(answer).err().expect(expected);
        assert!(error.contains(expected), "{error}");
        assert!(!error.contains("secret-value"), "{error}");
    }
}

#[test]
fn methods_follow_the_server() {
    let list = |methods: &[&str]| methods.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>();
    assert_eq!(AuthMethod::choose(None, true, false), AuthMethod::ClientSecretBasic, "RFC 8414 default");
    assert_eq!(AuthMethod::choose(Some(&list(&["client_secret_post"])), true, false), AuthMethod::ClientSecretPost);
    assert_eq!(
        AuthMethod::choose(Some(&list(&["none", "client_secret_basic"])), true, false),
        AuthMethod::ClientSecretBasic
    );
    assert_eq!(AuthMethod::choose(Some(&list(&["private_key_jwt"])), true, false), AuthMethod::None);
    assert_eq!(AuthMethod::choose(Some(&list(&["client_secret_basic"])), false, false), AuthMethod::None);
    // A key is used only where the server says it takes one; otherwise the secret's methods apply.
    let both = list(&["client_secret_basic", "private_key_jwt"]);
    assert_eq!(AuthMethod::choose(Some(&both), true, true), AuthMethod::PrivateKeyJwt);
    assert_eq!(AuthMethod::choose(Some(&both), false, true), AuthMethod::PrivateKeyJwt);
    assert_eq!(AuthMethod::choose(None, true, true), AuthMethod::ClientSecretBasic, "absent: basic only");
    assert_eq!(AuthMethod::choose(None, false, true), AuthMethod::None);
    assert_eq!(AuthMethod::choose(Some(&list(&["client_secret_post"])), true, true), AuthMethod::ClientSecretPost);
    assert_eq!(AuthMethod::parse("client_secret_post"), Some(AuthMethod::ClientSecretPost));
    assert_eq!(AuthMethod::parse("private_key_jwt"), None, "a registered client holds no key");
    assert_eq!(AuthMethod::parse("tls_client_auth"), None);
}

#[test]
fn oauth_errors_are_repeated_only_as_bounded_printable_text() {
    let answer =
        |body: Value| Answer { status: reqwest::StatusCode::BAD_REQUEST, json: body.as_object().cloned(), body_len: 1 };
    let endpoint = Url::parse("https://as.example.com/token").expect("url");
    let refused = read_answer(&answer(json!({"error": "invalid_client", "error_description": "no \"x\""})), &endpoint);
    let expected = OAuthError::TokenRefused { error: "invalid_client".into(), description: Some("no \"x\"".into()) };
    assert_eq!(refused.err(), Some(expected));
    let hostile = json!({"error": "invalid_client", "error_description": "line\n\u{1b}[31mforged log line"});
    let refused = read_answer(&answer(hostile), &endpoint).err().expect("refused");
    assert_eq!(refused, OAuthError::TokenRefused { error: "invalid_client".into(), description: None });
    let long = json!({"error": "x".repeat(65)});
    let garbage = read_answer(&answer(long), &endpoint).err().expect("garbage");
    assert!(matches!(&garbage, OAuthError::BadTokenResponse { reason, .. } if !reason.contains("xxx")), "{garbage}");
    let html = Answer { status: reqwest::StatusCode::BAD_GATEWAY, json: None, body_len: 27 };
    let described = read_answer(&html, &endpoint).err().expect("garbage").to_string();
    assert!(described.ends_with("HTTP 502 Bad Gateway with a 27-byte body that is not a JSON object"), "{described}");
}

#[test]
fn basic_credentials_are_form_encoded() {
    assert_eq!(form_encode("a:b c/é"), "a%3Ab+c%2F%C3%A9");
}
