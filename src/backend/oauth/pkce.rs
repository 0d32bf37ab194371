//! PKCE (RFC 7636) with S256, and the random `state` values of authorization requests.
//!
//! Rules: every verifier and state is 32 bytes from the operating system's secure random source, written as
//! unpadded base64url (43 characters: within RFC 7636 §4.1's 43–128 `unreserved` characters); the challenge is
//! `BASE64URL(SHA256(verifier))` (§4.2). Nothing here is ever logged.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::error::OAuthError;

/// 32 random bytes as unpadded base64url: a PKCE verifier or an authorization `state`.
pub(super) fn random_token() -> Result<String, OAuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|_| OAuthError::Random)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The S256 challenge of `verifier`.
pub(super) fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7636_appendix_b() {
        assert_eq!(
            s256_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn tokens_are_fresh_and_unreserved() {
        let (a, b) = (random_token().expect("random"), random_token().expect("random"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{a}");
    }
}
