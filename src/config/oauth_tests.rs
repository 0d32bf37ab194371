//! Unit tests of `[backends.oauth]`: each grant and client identity, and the errors that name the key to fix.

use super::*;

fn raw(toml_text: &str) -> RawOAuth {
    toml::from_str(toml_text).expect("valid shape")
}

fn message(raw: &RawOAuth, env: &[(&str, &str)]) -> String {
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let key = KeyPath::root().key("backends").index(0).key("oauth");
    build(&key, "docs", raw, &env).expect_err("refused").in_file("f.toml").to_string()
}

fn built(text: &str, env: &[(&str, &str)]) -> OAuthConfig {
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let key = KeyPath::root().key("backends").index(0).key("oauth");
    build(&key, "docs", &raw(text), &env).expect("valid")
}

#[test]
fn every_key_is_read() {
    let config = built(
        "grant = \"client_credentials\"\nclient_id = \"gw\"\nclient_secret = { env = \"S\" }\n\
         private_key = { env = \"K\" }\n\
         scopes = [\"a\", \"b:c\"]\nauthorization_server = \"https://login.example.com/t1\"\n\
         token_endpoint_auth_method = \"client_secret_post\"\nallow_internal = true\n",
        &[("S", "hunter2\n"), ("K", "-----BEGIN PRIVATE KEY-----\nopaque\n-----END PRIVATE KEY-----\n")],
    );
    assert_eq!(config.grant, OAuthGrant::ClientCredentials);
    let OAuthClientIdentity::PreRegistered { client_id, client_secret, private_key } = &config.client else {
        panic!("pre-registered: {config:?}");
    };
    assert_eq!(client_id, "gw");
    assert_eq!(client_secret.as_ref().map(|secret| secret.expose().as_str()), Some("hunter2"));
    let private_key = private_key.as_ref().expect("the key's text");
    assert_eq!(private_key.pem.expose(), "-----BEGIN PRIVATE KEY-----\nopaque\n-----END PRIVATE KEY-----");
    assert_eq!(private_key.source, CredentialSource::Env("K".to_owned()));
    assert_eq!(private_key.key, "backends[0].oauth.private_key.env");
    let printed = format!("{config:?}");
    assert!(!printed.contains("hunter2") && !printed.contains("opaque"), "secrets are never printed");
    assert_eq!(config.scopes, ["a", "b:c"]);
    assert_eq!(config.authorization_server.map(String::from).as_deref(), Some("https://login.example.com/t1"));
    assert_eq!(config.token_endpoint_auth_method, Some(TokenEndpointAuthMethod::ClientSecretPost));
    assert!(config.allow_internal);
}

#[test]
fn the_identity_follows_the_keys_given() {
    let document =
        built("grant = \"authorization_code\"\nclient_metadata_url = \"https://gw.example.com/c.json\"\n", &[]);
    assert!(matches!(document.client, OAuthClientIdentity::MetadataDocument(ref url) if url.path() == "/c.json"));
    let dynamic = built("grant = \"authorization_code\"\n", &[]);
    assert!(matches!(dynamic.client, OAuthClientIdentity::Dynamic));
    assert!(dynamic.scopes.is_empty() && dynamic.authorization_server.is_none() && !dynamic.allow_internal);
}

#[test]
fn token_exchange_takes_an_audience_and_an_actor() {
    let exchange = built(
        "grant = \"token_exchange\"\nclient_id = \"gw\"\nauthorization_server = \"https://as.example\"\n\
         audience = \"urn:example:docs\"\nactor = true\n",
        &[],
    );
    assert_eq!(exchange.grant, OAuthGrant::TokenExchange);
    assert_eq!((exchange.audience.as_deref(), exchange.actor), (Some("urn:example:docs"), true));
    let plain =
        built("grant = \"token_exchange\"\nclient_id = \"gw\"\nauthorization_server = \"https://a.example\"\n", &[]);
    assert_eq!((plain.audience, plain.actor), (None, false));
}

#[test]
fn bad_values_name_their_key() {
    let cases = [
        ("client_id = \"x\"", "backends[0].oauth.grant: expected \"client_credentials\", \"authorization_code\" or"),
        (
            "grant = \"token_exchange\"\nauthorization_server = \"https://as.example\"",
            "backends[0].oauth.client_id: expected a pre-registered `client_id` with grant = \"token_exchange\"",
        ),
        (
            "grant = \"token_exchange\"\nclient_id = \"gw\"",
            "backends[0].oauth.authorization_server: expected the issuer URL of the authorization server",
        ),
        (
            "grant = \"client_credentials\"\nclient_id = \"gw\"\nactor = true",
            "backends[0].oauth.actor: expected no `actor` with grant = \"client_credentials\"",
        ),
        (
            "grant = \"authorization_code\"\naudience = \"x\"",
            "backends[0].oauth.audience: expected no `audience` with grant = \"authorization_code\"",
        ),
        (
            "grant = \"token_exchange\"\nclient_id = \"gw\"\nauthorization_server = \"https://as.example\"\n\
             audience = \"\"",
            "backends[0].oauth.audience = \"\": expected an audience",
        ),
        ("grant = \"client_credentials\"", "backends[0].oauth.client_id: expected a pre-registered `client_id`"),
        (
            "grant = \"authorization_code\"\nclient_id = \"a\"\nclient_metadata_url = \"https://x.example/c\"",
            "backends[0].oauth.client_metadata_url: expected either `client_id`",
        ),
        (
            "grant = \"authorization_code\"\nclient_secret = { env = \"S\" }",
            "backends[0].oauth.client_secret: expected a `client_id` beside",
        ),
        (
            "grant = \"client_credentials\"\nprivate_key = { env = \"S\" }",
            "backends[0].oauth.private_key: expected a `client_id` beside `private_key`",
        ),
        (
            "grant = \"client_credentials\"\nclient_id = \"a\"\nprivate_key = { file = \"/nonexistent/k.pem\" }",
            "backends[0].oauth.private_key.file: credential of backend `docs`: cannot read file /nonexistent/k.pem",
        ),
        (
            "grant = \"client_credentials\"\nclient_id = \"a\"\nclient_secret = { env = \"S\" }\n\
             token_endpoint_auth_method = \"private_key_jwt\"",
            "backends[0].oauth.private_key: expected a key to sign with",
        ),
        (
            "grant = \"authorization_code\"\nclient_id = \"a\"\nclient_secret = { env = \"MISSING\" }",
            "backends[0].oauth.client_secret.env: credential of backend `docs`: environment variable MISSING",
        ),
        (
            "grant = \"authorization_code\"\nclient_metadata_url = \"http://x.example/c\"",
            "backends[0].oauth.client_metadata_url = \"http://x.example/c\": expected an https URL",
        ),
        (
            "grant = \"authorization_code\"\nclient_metadata_url = \"https://x.example/\"",
            "backends[0].oauth.client_metadata_url = \"https://x.example/\"",
        ),
        (
            "grant = \"authorization_code\"\nscopes = [\"ok\", \"two words\"]",
            "backends[0].oauth.scopes[1] = \"two words\": expected a scope",
        ),
        (
            "grant = \"authorization_code\"\nauthorization_server = \"ftp://x\"",
            "backends[0].oauth.authorization_server = \"ftp://x\": expected an http or https issuer URL",
        ),
    ];
    for (text, expected) in cases {
        let message = message(&raw(text), &[("S", "s")]);
        assert!(message.starts_with("f.toml: ") && message.contains(expected), "{text}: {message}");
    }
}

#[test]
fn scopes_follow_rfc_6749() {
    assert!(parse_scope("repo:read").is_ok());
    assert!(parse_scope("a!#[]~").is_ok());
    for bad in ["", "a b", "a\"b", "a\\b", "é"] {
        assert!(parse_scope(bad).is_err(), "{bad:?}");
    }
}
