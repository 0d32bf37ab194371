//! [`SealedBox`]: the one authenticated encryption of what the gateway keeps at rest (XChaCha20-Poly1305 under the
//! 32-byte key of `<data_dir>/oauth-tokens.key`): the backend OAuth tokens (`backend/oauth/vault.rs`) and the
//! ledger's results and held arguments (`ledger/at_rest.rs`).
//!
//! Rules: no two seals under one key share a nonce. Each seal's 24-byte nonce comes from the box's own
//! [`CountedIds`]: 16 random bytes drawn at the first seal, then the count of the box's seals, so nonces are unique
//! within the process and across the processes that share the key file (restarts, replicas) unless two of them drew
//! the same 128 random bits. (One system call per seal, as drawing a whole nonce each time took, was a measurable
//! part of a call.) The sealed form is `version (1) || nonce (24) || ciphertext+tag`; the associated data is the
//! caller's, which binds a sealed value to where it belongs (a row, a claim) and to its purpose. Opening fails,
//! without saying why, on a wrong key, other associated data, tampering or a foreign version. A neutral leaf: it
//! imports no crate module but the leaf `counted_ids`.

use std::fmt;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};

use crate::counted_ids::CountedIds;

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
    nonces: CountedIds<NONCE_LEN>,
}

impl fmt::Debug for SealedBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealedBox(<redacted>)")
    }
}

impl SealedBox {
    pub(crate) fn from_key(key: &[u8; 32]) -> SealedBox {
        SealedBox { cipher: XChaCha20Poly1305::new(Key::from_slice(key)), nonces: CountedIds::new() }
    }

    /// `plaintext` sealed under a fresh nonce, bound to `aad`.
    pub(crate) fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let nonce = self.nonces.next().map_err(|_| SealError::Random)?;
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

    fn nonce_of(sealed: &[u8]) -> &[u8] {
        &sealed[1..1 + NONCE_LEN]
    }

    #[test]
    fn nonces_never_repeat_within_a_box_nor_share_a_prefix_across_boxes() {
        let (first, second) = (SealedBox::from_key(&[3; 32]), SealedBox::from_key(&[3; 32]));
        let sealed: Vec<Vec<u8>> = (0..1000).map(|_| first.seal(b"row", b"same text").expect("sealed")).collect();
        let nonces: std::collections::HashSet<&[u8]> = sealed.iter().map(|one| nonce_of(one)).collect();
        assert_eq!(nonces.len(), sealed.len(), "every seal of one box has a nonce of its own");
        assert!(sealed.iter().all(|one| first.open(b"row", one).as_deref() == Ok(&b"same text"[..])));
        let (one, other) = (first.seal(b"row", b"x").expect("sealed"), second.seal(b"row", b"x").expect("sealed"));
        assert_ne!(nonce_of(&one)[..16], nonce_of(&other)[..16], "each box draws its own prefix");
        assert_eq!(
            second.open(b"row", &one).as_deref(),
            Ok(&b"x"[..]),
            "a box opens what another box of the key sealed"
        );
    }
}
