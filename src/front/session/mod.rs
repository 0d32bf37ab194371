//! Agent sessions: what the `MCP-Session-Id` the front hands an agent stands for (MCP 2025-11-25
//! §A1.6, §A4.7).
//!
//! Owns: the session ([`AgentSession`]) and its random identifier ([`SessionRef`]); the key that signs session
//! ids is [`key`]'s ([`SessionSecret`], its file), the id's sealed format [`token`]'s ([`Sealer`]); the sessions
//! ended early by `DELETE` are [`super::revocations`]'s. The gateway keeps no session table to serve a request:
//! the id is a token that any replica holding the key verifies.
//!
//! Rules:
//! - The random part of an id and the key come from the operating system's secure random source (§A4.7:
//!   secure, non-deterministic ids).
//! - A verified id is not enough. The caller must also check [`AgentSession::belongs_to`] against the principal
//!   authenticated on this very request (§A4.7), and the revocations
//!   ([`super::revocations::Revocations::is_revoked`]). Malformed, forged, expired, foreign and revoked ids are
//!   all answered 404 (§A1.6); [`OpenError`] only tells them apart in logs.
//!
//! Must not know: HTTP, authentication, the backend sessions an agent session owns.

mod key;
mod token;

use std::fmt;

use serde_json::Value;

pub use key::{SessionError, SessionSecret};
pub use token::{OpenError, SealError, Sealer};

/// The operating system's secure random source failed; no id or key can be made without it.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the operating system's secure random source failed: {0}")]
pub struct RandomUnavailable(getrandom::Error);

fn random_bytes<const N: usize>() -> Result<[u8; N], RandomUnavailable> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(RandomUnavailable)?;
    Ok(bytes)
}

/// The random identifier of one agent session. Its [`Display`](fmt::Display) form, 32 lowercase hex digits, is the
/// key other layers use for the agent session (the backend client's slot key, for one).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionRef([u8; 16]);

impl SessionRef {
    pub fn random() -> Result<Self, RandomUnavailable> {
        random_bytes().map(Self)
    }

    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The ref whose [`Display`](fmt::Display) form is `text` (32 lowercase hex digits), if any.
    pub fn from_hex(text: &str) -> Option<Self> {
        let digits = text.as_bytes();
        if digits.len() != 32 || !digits.iter().all(|digit| matches!(digit, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(Self(bytes))
    }
}

impl fmt::Display for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::hex::write(&self.0, f)
    }
}

impl fmt::Debug for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionRef({self})")
    }
}

/// What a session id carries.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSession {
    pub id: SessionRef,
    /// The authenticated principal that initialized the session.
    pub principal: String,
    /// The negotiated protocol version; one of the supported protocol versions.
    pub version: &'static str,
    /// Unix seconds.
    pub issued_at: u64,
    /// The client capabilities the agent declared in `initialize`.
    pub capabilities: Value,
}

impl AgentSession {
    /// Whether the session was issued to `principal`. A session id is usable only with the credentials of the
    /// principal it was issued to (§A4.7); a stolen id is useless to anyone else.
    pub fn belongs_to(&self, principal: &str) -> bool {
        self.principal == principal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ref_displays_as_lowercase_hex() {
        let id = SessionRef::from_bytes([0xab; 16]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        let random = SessionRef::random().unwrap().to_string();
        assert_eq!(random.len(), 32);
        assert!(random.bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)));
    }

    #[test]
    fn session_ref_reads_back_its_hex_form_only() {
        let id = SessionRef::random().unwrap();
        assert_eq!(SessionRef::from_hex(&id.to_string()), Some(id));
        let upper = SessionRef::from_bytes([0xab; 16]).to_string().to_uppercase();
        for bad in ["", "ab", &"g".repeat(32), &"a".repeat(33), &upper, &format!("+{}", "a".repeat(31))] {
            assert_eq!(SessionRef::from_hex(bad), None, "{bad:?}");
        }
    }
}
