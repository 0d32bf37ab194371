//! `private_key_jwt` client authentication (RFC 7523 §2.2 and §3, RFC 7521 §4.2; MCP's client-credentials
//! extension, SEP-1046): the gateway proves who it is at the token endpoint with a short-lived JWT signed by the
//! operator's key instead of a shared secret.
//!
//! Rules:
//! - The key is an unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`); the algorithm follows from it: EC P-256
//!   → ES256, EC P-384 → ES384, RSA → RS256. Anything else (SEC1 or PKCS#1 PEMs, encrypted keys, public keys,
//!   other curves, Ed25519) is a [`KeyError`] saying what was found and how to convert it. A key signs once when it
//!   is read, so an unusable key fails startup (and `switchyard check`), not the first token request.
//! - Claims: `iss` = `sub` = the client id; `aud` = the authorization server's issuer identifier as one string
//!   (draft-ietf-oauth-rfc7523bis: the issuer rather than the token endpoint, so no other server can accept the
//!   assertion); a fresh random `jti` per assertion; `iat` now; `exp` [`ASSERTION_LIFETIME`] later.
//! - When the server lists `token_endpoint_auth_signing_alg_values_supported`, the key's algorithm must be in it.
//! - Neither the key nor an assertion is ever printed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pkcs8::der::pem;
use pkcs8::{ObjectIdentifier, PrivateKeyInfoRef, SecretDocument};
use serde_json::{Value, json};

use super::discovery::ServerMetadata;
use super::error::OAuthError;
use super::pkce::random_token;
use super::unix_now;

/// RFC 7523 §2.2: the `client_assertion_type` of a JWT client assertion.
pub(super) const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// How long an assertion is valid: it is used at once, so a minute covers clock skew and nothing more.
pub(super) const ASSERTION_LIFETIME: Duration = Duration::from_secs(60);

const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
/// Algorithms operators are likely to try, named in the refusal (any other is shown by its OID only).
const KNOWN: [(&str, &str); 3] = [("1.3.101.112", "Ed25519"), ("1.3.101.113", "Ed448"), ("1.3.132.0.10", "secp256k1")];

/// Why a `private_key` cannot sign client assertions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a PEM document ({0}); expected an unencrypted PKCS#8 private key (-----BEGIN PRIVATE KEY-----)")]
    NotPem(String),
    #[error(
        "found a PEM labelled {label:?}; expected an unencrypted PKCS#8 private key (-----BEGIN PRIVATE KEY-----){hint}"
    )]
    WrongLabel { label: String, hint: &'static str },
    #[error("the PEM does not hold a PKCS#8 private key ({0})")]
    NotPkcs8(String),
    #[error("unsupported key ({0}); expected an EC P-256 (ES256), EC P-384 (ES384) or RSA (RS256) private key")]
    Unsupported(String),
    #[error("the key cannot sign ({0})")]
    Unusable(String),
}

/// A private key client assertions are signed with.
#[derive(Clone)]
pub struct SigningKey {
    algorithm: Algorithm,
    key: EncodingKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({}, <redacted>)", self.algorithm_name())
    }
}

impl SigningKey {
    /// Reads an unencrypted PKCS#8 PEM and proves the key signs.
    pub fn from_pem(text: &str) -> Result<SigningKey, KeyError> {
        let label = pem::decode_label(text.as_bytes()).map_err(|error| KeyError::NotPem(error.to_string()))?;
        if label != "PRIVATE KEY" {
            return Err(KeyError::WrongLabel { label: label.to_owned(), hint: label_hint(label) });
        }
        let (_, document) = SecretDocument::from_pem(text).map_err(|error| KeyError::NotPem(error.to_string()))?;
        let info =
            PrivateKeyInfoRef::try_from(document.as_bytes()).map_err(|error| KeyError::NotPkcs8(error.to_string()))?;
        let (algorithm, key) = match info.algorithm.oid {
            EC_PUBLIC_KEY => match info.algorithm.parameters_oid() {
                Ok(P256) => (Algorithm::ES256, EncodingKey::from_ec_der(document.as_bytes())),
                Ok(P384) => (Algorithm::ES384, EncodingKey::from_ec_der(document.as_bytes())),
                Ok(curve) => return Err(KeyError::Unsupported(format!("an EC key on curve {}", named(curve)))),
                Err(_) => return Err(KeyError::Unsupported("an EC key without a named curve".to_owned())),
            },
            // The PKCS#8 `privateKey` of an RSA key is its PKCS#1 `RSAPrivateKey`, which jsonwebtoken takes.
            RSA_ENCRYPTION => (Algorithm::RS256, EncodingKey::from_rsa_der(info.private_key.as_bytes())),
            other => return Err(KeyError::Unsupported(format!("key algorithm {}", named(other)))),
        };
        let signing = SigningKey { algorithm, key };
        signing.sign(&json!({"probe": true})).map_err(|error| KeyError::Unusable(error.to_string()))?;
        Ok(signing)
    }

    /// The JWS `alg` this key signs with (`ES256`, `ES384` or `RS256`).
    pub fn algorithm_name(&self) -> &'static str {
        // `from_pem` makes no other algorithm than these three.
        match self.algorithm {
            Algorithm::ES384 => "ES384",
            Algorithm::RS256 => "RS256",
            _ => "ES256",
        }
    }

    fn sign(&self, claims: &Value) -> Result<String, jsonwebtoken::errors::Error> {
        jsonwebtoken::encode(&Header::new(self.algorithm), claims, &self.key)
    }
}

/// Signs the assertions of one client at one authorization server.
#[derive(Debug, Clone)]
pub(super) struct AssertionSigner {
    key: Arc<SigningKey>,
    /// The server's issuer identifier: the assertions' `aud`.
    audience: String,
}

impl AssertionSigner {
    /// A signer for `server`, refused when the server lists the algorithms it accepts and the key's is not one.
    pub(super) fn for_server(key: Arc<SigningKey>, server: &ServerMetadata) -> Result<AssertionSigner, OAuthError> {
        if let Some(accepted) = &server.token_endpoint_auth_signing_alg_values_supported
            && !accepted.iter().any(|alg| alg == key.algorithm_name())
        {
            return Err(OAuthError::ClientAuthentication {
                issuer: server.issuer.clone(),
                reason: format!(
                    "it accepts client assertions signed with {} (token_endpoint_auth_signing_alg_values_supported), \
                     and the configured private_key signs {}",
                    accepted.join(", "),
                    key.algorithm_name()
                ),
            });
        }
        Ok(AssertionSigner { key, audience: server.issuer.clone() })
    }

    /// A fresh assertion that `client_id` is the one presenting it.
    pub(super) fn assertion(&self, client_id: &str) -> Result<String, OAuthError> {
        let now = unix_now();
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": self.audience,
            "jti": random_token()?,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME.as_secs(),
        });
        self.key.sign(&claims).map_err(|error| OAuthError::ClientAuthentication {
            issuer: self.audience.clone(),
            reason: format!("signing the client assertion failed: {error}"),
        })
    }
}

fn label_hint(label: &str) -> &'static str {
    match label {
        "EC PRIVATE KEY" | "RSA PRIVATE KEY" => {
            "; convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY.pem -out KEY.pkcs8.pem`"
        }
        "ENCRYPTED PRIVATE KEY" => {
            "; the gateway takes no passphrase: decrypt it with `openssl pkcs8 -in KEY.pem -out KEY.plain.pem` and \
             protect the file instead"
        }
        "PUBLIC KEY" | "CERTIFICATE" => "; this is the public half, the private key is needed",
        _ => "",
    }
}

fn named(oid: ObjectIdentifier) -> String {
    let dotted = oid.to_string();
    match KNOWN.iter().find(|(known, _)| *known == dotted) {
        Some((_, name)) => format!("{name} ({dotted})"),
        None => dotted,
    }
}

#[cfg(test)]
#[path = "assertion_tests.rs"]
mod tests;
