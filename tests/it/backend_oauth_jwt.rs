//! `private_key_jwt` client authentication (RFC 7523) of `backend::oauth::OAuthClient` against the test
//! authorization server, which checks each assertion as a real one would (`support/client_assertion.rs`:
//! signature with the registered public key, `iss`/`sub`, `aud`, `exp`, `jti` never reused): EC and RSA keys, the
//! server's refusal of a wrong key or client, and the choice of the method from the server's metadata.

use std::sync::Arc;

use jsonwebtoken::Algorithm;
use serde_json::Value;
use switchyard::backend::oauth::{
    AuthMethod, BackendOAuth, ClientIdentity, GrantKind, OAuthError, Refusal, SigningKey,
};
use switchyard::ledger::LedgerStore;
use switchyard::secret::Secret;

use crate::backend_oauth::{backend, claims, client, failure, machine, token_requests, token_rows};
use crate::support::auth_server::AuthServer;
use crate::support::client_assertion::ClientKey;

pub const CLIENT_KEY_1: &str = include_str!("../fixtures/client-ec-p256-1.pem");
const CLIENT_KEY_2: &str = include_str!("../fixtures/client-ec-p256-2.pem");
const CLIENT_RSA_KEY: &str = include_str!("../fixtures/client-rsa.pem");

/// A client-credentials backend whose pre-registered client `client_id` holds the private key `pem` (and `secret`).
fn keyed(server: &AuthServer, client_id: &str, pem: &str, secret: Option<&str>) -> BackendOAuth {
    let client = ClientIdentity::PreRegistered {
        client_id: client_id.to_owned(),
        client_secret: secret.map(|secret| Secret::new(secret.to_owned())),
        private_key: Some(Arc::new(SigningKey::from_pem(pem).expect("a usable key"))),
    };
    backend(server, GrantKind::ClientCredentials, client)
}

/// The server knows the client `gw` by the public half of `pem` and takes only `private_key_jwt`.
fn accept_key(server: &AuthServer, pem: &str, algorithm: Algorithm) {
    server.behave(|b| {
        b.auth_methods = vec!["private_key_jwt".to_owned()];
        b.client_key = Some(ClientKey::new("gw", pem, algorithm));
    });
}

#[tokio::test]
async fn private_key_jwt_client_credentials_with_ec_and_rsa_keys() {
    for (pem, algorithm) in [(CLIENT_KEY_1, Algorithm::ES256), (CLIENT_RSA_KEY, Algorithm::RS256)] {
        let server = AuthServer::start("unused").await;
        accept_key(&server, pem, algorithm);
        server.behave(|b| b.signing_algs = Some(vec![format!("{algorithm:?}")]));
        let ledger = LedgerStore::memory();
        let oauth = client(keyed(&server, "gw", pem, None), &ledger);
        let token = oauth.token_for("docs", "alice", None).await.expect("a token for a verified assertion");
        assert_eq!(claims(&token)["aud"], format!("{}/mcp", server.issuer), "RFC 8707 resource");
        let request = &token_requests(&server)[0];
        assert_eq!(request["auth_method"], "private_key_jwt", "{request}");
        assert_eq!(request["form"]["client_assertion_type"], "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        assert!(request["form"].get("client_secret").is_none(), "no secret travels: {request}");
        let asserted = &request["assertion"]["claims"];
        assert_eq!((asserted["iss"].as_str(), asserted["sub"].as_str()), (Some("gw"), Some("gw")), "{request}");
        assert_eq!(asserted["aud"], server.issuer.as_str(), "the issuer identifier");
        let lifetime = asserted["exp"].as_u64().expect("exp") - asserted["iat"].as_u64().expect("iat");
        assert!(lifetime <= 60, "short-lived: {lifetime} s");

        // A rejected token gets a new grant with a new assertion; the server refuses any assertion seen before.
        let refusal = Refusal::Unauthorized { challenge: None, sent: Some(&token) };
        oauth.token_for("docs", "alice", Some(refusal)).await.expect("a second grant");
        let requests = token_requests(&server);
        assert_eq!(requests.len(), 2);
        assert_ne!(requests[0]["assertion"]["claims"]["jti"], requests[1]["assertion"]["claims"]["jti"]);
        let replayed = reqwest::Client::new()
            .post(format!("{}/token", server.issuer))
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", requests[0]["form"]["client_assertion"].as_str().expect("assertion")),
            ])
            .send()
            .await
            .expect("the server answers");
        assert_eq!(replayed.status(), 401);
        let answer: Value = serde_json::from_str(&replayed.text().await.expect("body")).expect("json");
        assert!(answer["error_description"].as_str().is_some_and(|d| d.contains("already used")), "{answer}");
    }
}

#[tokio::test]
async fn a_wrong_key_or_client_is_refused_with_the_servers_reason() {
    for (client_id, pem, expected) in [
        ("gw", CLIENT_KEY_2, "assertion rejected: InvalidSignature"),
        ("intruder", CLIENT_KEY_1, "is not the registered client gw"),
    ] {
        let server = AuthServer::start("unused").await;
        accept_key(&server, CLIENT_KEY_1, Algorithm::ES256);
        let ledger = LedgerStore::memory();
        let error =
            failure(client(keyed(&server, client_id, pem, None), &ledger).token_for("docs", "alice", None).await);
        let OAuthError::TokenRefused { error: code, description } = &error else { panic!("{client_id}: {error}") };
        assert_eq!(code, "invalid_client");
        assert!(description.as_deref().is_some_and(|d| d.contains(expected)), "{client_id}: {error}");
        assert!(error.to_string().contains(expected), "the message says why: {error}");
        assert!(token_rows(&ledger).await.is_empty(), "{client_id}");
    }
}

#[tokio::test]
async fn private_key_jwt_is_used_only_where_the_server_takes_it() {
    let token_method = async |methods: &[&str], secret: Option<&str>| {
        let server = AuthServer::start("unused").await;
        accept_key(&server, CLIENT_KEY_1, Algorithm::ES256);
        server.behave(|b| {
            b.auth_methods = methods.iter().map(|method| (*method).to_owned()).collect();
            b.client = Some(("gw".to_owned(), "s3cret".to_owned()));
        });
        let outcome = client(keyed(&server, "gw", CLIENT_KEY_1, secret), &LedgerStore::memory())
            .token_for("docs", "alice", None)
            .await;
        (outcome, token_requests(&server))
    };
    let (outcome, requests) = token_method(&["client_secret_basic", "private_key_jwt"], Some("s3cret")).await;
    outcome.expect("token");
    assert_eq!(requests[0]["auth_method"], "private_key_jwt", "the key first when the server takes it");
    let (outcome, requests) = token_method(&["client_secret_basic"], Some("s3cret")).await;
    outcome.expect("token");
    assert_eq!(requests[0]["auth_method"], "client_secret_basic", "else the secret");
    let (outcome, requests) = token_method(&["client_secret_basic"], None).await;
    let error = failure(outcome);
    assert!(matches!(error, OAuthError::ClientAuthentication { .. }), "{error}");
    assert!(error.to_string().contains("does not list private_key_jwt"), "{error}");
    assert!(requests.is_empty(), "nothing is sent without credentials");
}

#[tokio::test]
async fn an_unusable_assertion_setup_is_refused_before_the_token_endpoint() {
    let server = AuthServer::start("unused").await;
    accept_key(&server, CLIENT_KEY_1, Algorithm::ES256);
    server.behave(|b| b.signing_algs = Some(vec!["RS256".to_owned()]));
    let error = failure(
        client(keyed(&server, "gw", CLIENT_KEY_1, None), &LedgerStore::memory()).token_for("docs", "a", None).await,
    );
    assert!(error.to_string().contains("signed with RS256") && error.to_string().contains("signs ES256"), "{error}");
    // Told to use private_key_jwt without a key (only possible when the settings are built by hand).
    let settings = BackendOAuth { auth_method: Some(AuthMethod::PrivateKeyJwt), ..machine(&server) };
    let error = failure(client(settings, &LedgerStore::memory()).token_for("docs", "a", None).await);
    assert!(
        matches!(&error, OAuthError::ClientAuthentication { reason, .. } if reason.contains("needs a private_key"))
    );
    assert!(token_requests(&server).is_empty());
}
