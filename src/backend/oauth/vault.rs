//! Tokens at rest: a [`TokenSet`] is sealed with XChaCha20-Poly1305 under the gateway's token key before it
//! reaches the store, and opened only here.
//!
//! Rules:
//! - The key is 32 random bytes in `<data_dir>/oauth-tokens.key` ([`crate::keyfile`]: created 0600 when missing);
//!   every replica sharing a store needs the same file, as with the session key.
//! - Sealing is [`crate::sealed_box`]'s (fresh random nonce per seal, `version || nonce || ciphertext+tag`); the
//!   ledger seals results with the same key ([`TOKEN_KEY_FILE_NAME`] is the one file).
//! - The associated data binds the row to its (principal, backend): a row copied to another principal or backend
//!   does not open, so a token is only ever sent to the backend it was issued for, on behalf of its principal.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::OAuthError;
use crate::keyfile::{self, KeyFileError};
use crate::sealed_box::{SealError, SealedBox};

/// The token key file's name in the data directory.
pub const TOKEN_KEY_FILE_NAME: &str = "oauth-tokens.key";
const DOMAIN: &[u8] = b"switchyard oauth token v1\0";

/// What is stored for one (principal, backend): everything secret, sealed together.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Unix seconds; `None` when the server did not say.
    pub expires_at: Option<u64>,
    /// The scopes granted (as the server said, else as requested).
    pub scopes: Vec<String>,
    /// The client the tokens were issued to (refreshing needs it).
    pub client_id: String,
    /// How many step-up authorizations led to these tokens (bounded, see `MAX_STEP_UPS`).
    pub step_ups: u8,
    /// The authorization server that issued them (`None`: sealed before issuers were recorded): their refresh
    /// token goes nowhere else (SEP-2352).
    #[serde(default)]
    pub issuer: Option<String>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"<redacted>")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "<redacted>"))
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("client_id", &self.client_id)
            .field("step_ups", &self.step_ups)
            .field("issuer", &self.issuer)
            .finish()
    }
}

/// The key tokens are sealed with.
pub struct Vault {
    sealed_box: SealedBox,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Vault(<redacted>)")
    }
}

impl Vault {
    /// The vault of the key in `path`, created if missing. Blocking; meant for startup.
    pub fn load_or_create(path: &Path) -> Result<Vault, KeyFileError> {
        keyfile::load_or_create::<32>(path).map(|key| Vault::from_key(&key))
    }

    pub fn from_key(key: &[u8; 32]) -> Vault {
        Vault { sealed_box: SealedBox::from_key(key) }
    }

    pub fn seal(&self, principal: &str, backend: &str, tokens: &TokenSet) -> Result<Vec<u8>, OAuthError> {
        self.seal_value(principal, backend, tokens)
    }

    pub fn open(&self, principal: &str, backend: &str, sealed: &[u8]) -> Result<TokenSet, OAuthError> {
        self.open_value(principal, backend, sealed)
    }

    /// Seals any value of a row the same way (the issuer pin of `pin.rs` too): the row's (principal, backend)
    /// is the associated data.
    pub fn seal_value<T: Serialize>(&self, principal: &str, backend: &str, value: &T) -> Result<Vec<u8>, OAuthError> {
        let plaintext = serde_json::to_vec(value).map_err(|error| OAuthError::Store(error.to_string()))?;
        self.sealed_box.seal(&associated_data(principal, backend), &plaintext).map_err(|error| match error {
            SealError::Random => OAuthError::Random,
            SealError::Unopenable => OAuthError::Store("sealing failed".to_owned()),
        })
    }

    pub fn open_value<T: DeserializeOwned>(
        &self,
        principal: &str,
        backend: &str,
        sealed: &[u8],
    ) -> Result<T, OAuthError> {
        let undecryptable = || OAuthError::Undecryptable { backend: backend.to_owned() };
        let plaintext =
            self.sealed_box.open(&associated_data(principal, backend), sealed).map_err(|_| undecryptable())?;
        serde_json::from_slice(&plaintext).map_err(|_| undecryptable())
    }
}

/// Length-prefixed, so no (principal, backend) pair spells another's.
fn associated_data(principal: &str, backend: &str) -> Vec<u8> {
    let mut aad = DOMAIN.to_vec();
    for part in [principal, backend] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> TokenSet {
        TokenSet {
            access_token: "at-secret-123".into(),
            refresh_token: Some("rt-secret-456".into()),
            expires_at: Some(1_900_000_000),
            scopes: vec!["a".into()],
            client_id: "client".into(),
            step_ups: 0,
            issuer: Some("https://as.example.com".into()),
        }
    }

    #[test]
    fn sealed_tokens_open_only_for_their_principal_and_backend() {
        let vault = Vault::from_key(&[7; 32]);
        let sealed = vault.seal("alice", "docs", &tokens()).expect("sealed");
        let text = String::from_utf8_lossy(&sealed);
        assert!(!text.contains("at-secret") && !text.contains("rt-secret"), "no token bytes at rest");
        assert_eq!(vault.open("alice", "docs", &sealed).expect("opens"), tokens());
        for (principal, backend) in [("bob", "docs"), ("alice", "github"), ("alic", "edocs")] {
            let error = vault.open(principal, backend, &sealed).expect_err("bound to its row");
            assert!(matches!(error, OAuthError::Undecryptable { .. }), "{error}");
        }
        assert!(Vault::from_key(&[8; 32]).open("alice", "docs", &sealed).is_err(), "another key");
        let mut tampered = sealed.clone();
        *tampered.last_mut().expect("bytes") ^= 1;
        assert!(vault.open("alice", "docs", &tampered).is_err(), "tampering is detected");
        for garbage in [&[][..], &[1][..], &[2; 64][..]] {
            assert!(vault.open("alice", "docs", garbage).is_err());
        }
        assert_ne!(vault.seal("alice", "docs", &tokens()).expect("again"), sealed, "fresh nonce per seal");
    }

    #[test]
    fn debug_never_shows_tokens() {
        let shown = format!("{:?} {:?}", tokens(), Vault::from_key(&[1; 32]));
        assert!(!shown.contains("secret"), "{shown}");
    }
}
