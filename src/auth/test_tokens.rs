//! Test-only signing: the committed RSA test keys (`tests/fixtures/`), their JWKS, and tokens minted with them.

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

pub(super) const ISSUER: &str = "https://issuer.test";
pub(super) const AUDIENCE: &str = "http://127.0.0.1:8808/mcp";

/// Test key 1 or 2.
pub(super) fn signing_key(number: u8) -> EncodingKey {
    EncodingKey::from_rsa_der(match number {
        1 => include_bytes!("../../tests/fixtures/auth-rsa-1.der").as_slice(),
        _ => include_bytes!("../../tests/fixtures/auth-rsa-2.der").as_slice(),
    })
}

/// The public key of test key 1 in PEM, as an attacker would use it for an HMAC secret.
pub(super) const PUBLIC_PEM_1: &[u8] = include_bytes!("../../tests/fixtures/auth-rsa-1.pub.pem");

/// A JWKS publishing the given test keys under the given `kid`s (no `alg`, as many issuers publish them).
pub(super) fn jwks(keys: &[(u8, &str)]) -> Value {
    let keys = keys
        .iter()
        .map(|(number, kid)| {
            let mut jwk = Jwk::from_encoding_key(&signing_key(*number), Algorithm::RS256).expect("public part");
            jwk.common.key_id = Some((*kid).to_owned());
            jwk.common.key_algorithm = None;
            jwk
        })
        .collect();
    serde_json::to_value(JwkSet { keys }).expect("serializable")
}

pub(super) fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("time fits")
}

/// Claims a valid token carries; tests change or remove members.
pub(super) fn claims() -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now() + 300, "iat": now(), "scope": "mcp:tools"})
}

/// A token signed by test key `number`, its header naming `kid`.
pub(super) fn mint(number: u8, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &signing_key(number)).expect("signed")
}

/// A token with an arbitrary header and signature, for the attacks no library would sign.
pub(super) fn forge(header: &Value, claims: &Value, signature: &[u8]) -> String {
    use base64::Engine;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    format!("{}.{}.{}", encode(header.to_string().as_bytes()), encode(claims.to_string().as_bytes()), encode(signature))
}
