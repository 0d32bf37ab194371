//! API keys: long random strings an agent sends as `Authorization: Bearer <key>`, known to the gateway only by
//! their SHA-256 digest.
//!
//! Rules: a presented key is hashed and compared with every configured digest in constant time (no early exit,
//! no short-circuit on the first differing byte), so response timing says nothing about how close a guess
//! was; keys are generated from the operating system's random source (32 bytes), base64url-encoded behind the
//! `sy_` prefix (so a leaked key is recognisable, and never shaped like a JWT). A key with an expiry
//! (`[[auth.api_keys]] expires`) is refused from that second on, with its own reason (`expired_key`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::{AuthError, Principal};

/// Bytes of entropy in a generated key.
pub const API_KEY_BYTES: usize = 32;
/// The prefix of generated keys.
pub const API_KEY_PREFIX: &str = "sy_";

/// One configured key: who presents it, by its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub principal: String,
    pub digest: [u8; 32],
    pub groups: Vec<String>,
    /// The Unix second from which the key is refused, if it expires.
    pub expires: Option<u64>,
}

/// The configured keys.
#[derive(Debug, Default)]
pub(super) struct ApiKeys(Vec<ApiKey>);

impl ApiKeys {
    pub(super) fn new(keys: Vec<ApiKey>) -> Self {
        Self(keys)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The principal presenting `key` at `now_unix`: refused when the key is not configured or has expired.
    pub(super) fn principal(&self, key: &str, now_unix: u64) -> Result<Principal, AuthError> {
        let digest = api_key_digest(key);
        let mut found = None;
        for candidate in &self.0 {
            if digests_equal(&candidate.digest, &digest) {
                found = Some(candidate);
            }
        }
        let key = found.ok_or(AuthError::UnknownKey)?;
        if key.expires.is_some_and(|expires| now_unix >= expires) {
            return Err(AuthError::ExpiredKey);
        }
        Ok(Principal { name: key.principal.clone(), groups: key.groups.clone() })
    }
}

/// Compares all 32 bytes whatever they contain.
fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// The SHA-256 digest of a key as the agent sends it.
pub fn api_key_digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// A fresh random key.
pub fn generate_api_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; API_KEY_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{API_KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// Lowercase hex, as `sha256` is written in the configuration.
pub fn hex(digest: &[u8; 32]) -> String {
    crate::hex::encode(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn keys() -> ApiKeys {
        let key = |principal: &str, groups: &[&str], expires| ApiKey {
            principal: principal.into(),
            digest: api_key_digest(&format!("sy_{principal}")),
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
            expires,
        };
        ApiKeys::new(vec![key("alice", &["ops"], None), key("bob", &[], None), key("carol", &[], Some(NOW))])
    }

    #[test]
    fn a_configured_key_names_its_principal_and_groups() {
        let alice = keys().principal("sy_alice", NOW).expect("known key");
        assert_eq!((alice.name.as_str(), alice.groups.as_slice()), ("alice", ["ops".to_owned()].as_slice()));
        assert_eq!(keys().principal("sy_bob", NOW).map(|p| p.name), Ok("bob".to_owned()));
    }

    #[test]
    fn unknown_keys_name_nobody() {
        assert_eq!(keys().principal("sy_alicf", NOW), Err(AuthError::UnknownKey));
        assert_eq!(keys().principal("", NOW), Err(AuthError::UnknownKey));
        let digest = hex(&api_key_digest("sy_alice"));
        assert_eq!(keys().principal(&digest, NOW), Err(AuthError::UnknownKey), "the digest is not the key");
    }

    #[test]
    fn an_expired_key_is_refused_from_its_expiry_on() {
        assert_eq!(keys().principal("sy_carol", NOW - 1).map(|p| p.name), Ok("carol".to_owned()));
        assert_eq!(keys().principal("sy_carol", NOW), Err(AuthError::ExpiredKey));
        assert_eq!(AuthError::ExpiredKey.reason(), "expired_key");
    }

    #[test]
    fn generated_keys_are_fresh_and_long() {
        let (a, b) = (generate_api_key().expect("random"), generate_api_key().expect("random"));
        assert_ne!(a, b);
        assert!(a.starts_with(API_KEY_PREFIX) && a.len() == API_KEY_PREFIX.len() + 43, "{a}");
        assert!(!a.contains('.'), "never shaped like a JWT");
    }

    #[test]
    fn digests_print_as_configured() {
        // SHA-256 of the empty string.
        assert_eq!(hex(&api_key_digest("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
