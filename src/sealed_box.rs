//! [`SealedBox`]: the one authenticated encryption of what the gateway keeps at rest (XChaCha20-Poly1305 under the
//! 32-byte key of `<data_dir>/oauth-tokens.key`): the backend OAuth tokens (`backend/oauth/vault.rs`) and the
//! ledger's results and held arguments (`ledger/at_rest.rs`).
//!
//! Rules: each seal draws a fresh 24-byte nonce from the operating system (XChaCha's nonce is long enough for
//! random nonces); the sealed form is `version (1) || nonce (24) || ciphertext+tag`; the associated data is the
//! caller's, which binds a sealed value to where it belongs (a row, a claim) and to its purpose. Opening fails,
//! without saying why, on a wrong key, other associated data, tampering or a foreign version. A neutral leaf: it
//! imports no crate module.

use std::fmt;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};

const VERSION: u8 = 1;
const NONCE_LEN: usize = 24;

/// Why sealing or opening failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SealError {
    #[error("the operating system's secure random source failed")]
    Random,
    /// Wrong key, other associated data, tampered with, or not sealed here.
    #[error("the sealed value does not open with this key")]
    Unopenable,
}

/// A key values are sealed with.
pub(crate) struct SealedBox {
    cipher: XChaCha20Poly1305,
}

impl fmt::Debug for SealedBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealedBox(<redacted>)")
    }
}

impl SealedBox {
    pub(crate) fn from_key(key: &[u8; 32]) -> SealedBox {
        SealedBox { cipher: XChaCha20Poly1305::new(Key::from_slice(key)) }
    }

    /// `plaintext` sealed under a fresh nonce, bound to `aad`.
    pub(crate) fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError::Random)?;
        let ciphertext = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plaintext, aad })
            .map_err(|_| SealError::Unopenable)?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        Ok(sealed)
    }

    /// The plaintext of `sealed`, when it was sealed with this key and `aad`.
    pub(crate) fn open(&self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let (&version, rest) = sealed.split_first().ok_or(SealError::Unopenable)?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return Err(SealError::Unopenable);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad })
            .map_err(|_| SealError::Unopenable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_associated_data() {
        let sealed_box = SealedBox::from_key(&[3; 32]);
        let sealed = sealed_box.seal(b"row-1", b"secret text").expect("sealed");
        assert!(!String::from_utf8_lossy(&sealed).contains("secret"), "no plaintext at rest");
        assert_eq!(sealed_box.open(b"row-1", &sealed).expect("opens"), b"secret text");
        assert_eq!(sealed_box.open(b"row-2", &sealed), Err(SealError::Unopenable), "bound to its row");
        assert_eq!(SealedBox::from_key(&[4; 32]).open(b"row-1", &sealed), Err(SealError::Unopenable), "another key");
        let mut tampered = sealed.clone();
        *tampered.last_mut().expect("bytes") ^= 1;
        assert_eq!(sealed_box.open(b"row-1", &tampered), Err(SealError::Unopenable));
        for garbage in [&[][..], &[1][..], &[2; 64][..]] {
            assert_eq!(sealed_box.open(b"row-1", garbage), Err(SealError::Unopenable));
        }
        assert_ne!(sealed_box.seal(b"row-1", b"secret text").expect("again"), sealed, "a fresh nonce per seal");
        assert_eq!(format!("{sealed_box:?}"), "SealedBox(<redacted>)");
    }
}
