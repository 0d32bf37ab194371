//! Sealing: bytes the gateway hands out and must later trust again, as `base64url(payload) "." base64url(tag)`
//! with `tag = HMAC-SHA256(key, purpose ‖ payload)`. The agent session id (`front::session`) and the
//! `requestState` of 2026-07-28 agents (`router::request_state`) are both sealed here, each with its own purpose.
//!
//! Rules:
//! - A purpose is fed to the MAC before the payload, so nothing sealed for one purpose opens for another, even
//!   under the same key.
//! - [`Seal::open`] verifies the tag in constant time before it returns a byte of the payload; the caller bounds
//!   the text's length before calling it, and reads the payload only once it is returned.
//! - Base64url is unpadded and canonical (the engine refuses padding and stray trailing bits), so each payload has
//!   exactly one spelling.
//! - Signed, not encrypted: whoever holds a sealed text can read its payload.
//!
//! A leaf: it imports no module of the crate.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::digest::{Key, KeyInit};
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The length of a key, and of a tag.
pub const KEY_LEN: usize = 32;
/// The length of a tag in its base64url form.
pub const TAG_TEXT_LEN: usize = 43;

/// Why a sealed text did not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unsealed {
    /// Not two base64url parts joined by `.`.
    #[error("not a sealed text")]
    Malformed,
    /// The tag is not this key's for this purpose and payload.
    #[error("the seal does not verify")]
    Forged,
}

/// Seals and opens payloads with one key, for one purpose.
#[derive(Clone)]
pub struct Seal {
    /// The HMAC keyed and fed the purpose; cloned per payload, so the key schedule runs once.
    primed: HmacSha256,
}

impl fmt::Debug for Seal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Seal(<redacted>)")
    }
}

impl Seal {
    pub fn new(key: &[u8; KEY_LEN], purpose: &[u8]) -> Seal {
        let mut primed = keyed(key);
        primed.update(purpose);
        Seal { primed }
    }

    pub fn seal(&self, payload: &[u8]) -> String {
        let tag = self.tag_of(payload).finalize().into_bytes();
        format!("{}.{}", URL_SAFE_NO_PAD.encode(payload), URL_SAFE_NO_PAD.encode(tag))
    }

    /// The payload sealed in `text`, if this key sealed it for this purpose.
    pub fn open(&self, text: &str) -> Result<Vec<u8>, Unsealed> {
        let (payload, tag) = text.split_once('.').ok_or(Unsealed::Malformed)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| Unsealed::Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| Unsealed::Malformed)?;
        self.tag_of(&payload).verify_slice(&tag).map_err(|_| Unsealed::Forged)?;
        Ok(payload)
    }

    fn tag_of(&self, payload: &[u8]) -> HmacSha256 {
        let mut mac = self.primed.clone();
        mac.update(payload);
        mac
    }
}

/// A key of its own for `label`, derived from `secret` (HMAC-SHA256(secret, label)), so one secret keys several
/// purposes without one key serving two.
pub fn derive_key(secret: &[u8; KEY_LEN], label: &[u8]) -> [u8; KEY_LEN] {
    let mut mac = keyed(secret);
    mac.update(label);
    mac.finalize().into_bytes().into()
}

/// An HMAC-SHA256 keyed with 32 bytes. HMAC pads a key shorter than its block with zeros (RFC 2104 §2), so padding
/// it here gives the same MAC through the infallible fixed-size constructor.
fn keyed(key: &[u8; KEY_LEN]) -> HmacSha256 {
    let mut padded = Key::<HmacSha256>::default();
    padded[..KEY_LEN].copy_from_slice(key);
    <HmacSha256 as KeyInit>::new(&padded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_payload_opens_only_with_its_key_and_purpose() {
        let seal = Seal::new(&[7; KEY_LEN], b"a\n");
        let text = seal.seal(b"payload");
        assert_eq!(seal.open(&text).as_deref(), Ok(&b"payload"[..]));
        assert_eq!(text.split_once('.').map(|(_, tag)| tag.len()), Some(TAG_TEXT_LEN));
        assert_eq!(Seal::new(&[7; KEY_LEN], b"b\n").open(&text), Err(Unsealed::Forged));
        assert_eq!(Seal::new(&[8; KEY_LEN], b"a\n").open(&text), Err(Unsealed::Forged));
        for malformed in ["", "abc", "a.b=", "!!.??"] {
            assert_eq!(seal.open(malformed), Err(Unsealed::Malformed), "{malformed}");
        }
    }

    #[test]
    fn derived_keys_differ_by_label() {
        assert_ne!(derive_key(&[1; KEY_LEN], b"x"), derive_key(&[1; KEY_LEN], b"y"));
        assert_eq!(derive_key(&[1; KEY_LEN], b"x"), derive_key(&[1; KEY_LEN], b"x"));
    }
}
