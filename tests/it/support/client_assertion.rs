//! The authorization server's side of `private_key_jwt` (RFC 7523 §3, RFC 7521 §4.2) for the test server in
//! `auth_server.rs`: a client registered with its public key ([`ClientKey`]), and the checks a real server makes
//! on a token request's assertion before it issues anything.
//!
//! Rules: the assertion type is the RFC 7523 URN; the signature verifies with the registered key and algorithm;
//! `iss` and `sub` are the registered client id (and so is `client_id` when the form carries one); `aud` is the
//! issuer, with or without a trailing slash; `exp` is in the future; `jti` is present and never seen before.
//! Each refusal says which check failed.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Validation};
use pkcs8::{PrivateKeyInfoRef, SecretDocument};
use serde_json::Value;

const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A client registered with the public half of its key.
#[derive(Debug, Clone)]
pub struct ClientKey {
    pub client_id: String,
    pub algorithm: Algorithm,
    pub jwk: Jwk,
}

impl ClientKey {
    /// Registers `client_id` with the public half of the PKCS#8 `pem` (EC keys for ES256/ES384, RSA for RS256).
    pub fn new(client_id: &str, pem: &str, algorithm: Algorithm) -> ClientKey {
        let (_, document) = SecretDocument::from_pem(pem).expect("a PKCS#8 PEM");
        let private = match algorithm {
            Algorithm::RS256 => {
                let info = PrivateKeyInfoRef::try_from(document.as_bytes()).expect("PKCS#8");
                EncodingKey::from_rsa_der(info.private_key.as_bytes())
            }
            _ => EncodingKey::from_ec_der(document.as_bytes()),
        };
        let jwk = Jwk::from_encoding_key(&private, algorithm).expect("the public half");
        ClientKey { client_id: client_id.to_owned(), algorithm, jwk }
    }
}

/// Checks the assertion of a token request's `form` for `client` at `issuer`, remembering its `jti` in `seen`:
/// its claims, or why it is refused.
pub fn verify(
    form: &HashMap<String, String>,
    client: &ClientKey,
    issuer: &str,
    seen: &Mutex<HashSet<String>>,
) -> Result<Value, String> {
    if form.get("client_assertion_type").map(String::as_str) != Some(JWT_BEARER) {
        return Err(format!("client_assertion_type is not {JWT_BEARER}"));
    }
    let assertion = form.get("client_assertion").ok_or("no client_assertion")?;
    let key = DecodingKey::from_jwk(&client.jwk).map_err(|error| format!("registered key: {error}"))?;
    let mut validation = Validation::new(client.algorithm);
    validation.set_audience(&[issuer.to_owned(), format!("{issuer}/")]);
    validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
    validation.leeway = 0;
    let claims = jsonwebtoken::decode::<Value>(assertion, &key, &validation)
        .map_err(|error| format!("assertion rejected: {error}"))?
        .claims;
    for claim in ["iss", "sub"] {
        if claims[claim] != client.client_id.as_str() {
            return Err(format!("{claim} {} is not the registered client {}", claims[claim], client.client_id));
        }
    }
    if form.get("client_id").is_some_and(|id| *id != client.client_id) {
        return Err("client_id does not match the assertion".to_owned());
    }
    let jti = claims["jti"].as_str().filter(|jti| !jti.is_empty()).ok_or("no jti")?;
    if !seen.lock().expect("jtis").insert(jti.to_owned()) {
        return Err(format!("jti {jti} was already used"));
    }
    Ok(claims)
}
