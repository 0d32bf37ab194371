//! The sealed session id: `base64url(payload) "." base64url(HMAC-SHA256(key, domain || payload))` (sealed by
//! [`crate::seal`], with this token type's domain as the purpose), where the payload binds a random [`SessionRef`], the principal, the negotiated protocol version, the issue time and the
//! agent's declared capabilities (MCP 2025-11-25 §A1.6, §A4.7).
//!
//! Rules:
//! - The id holds only visible ASCII, 0x21–0x7E (§A1.6): unpadded base64url and one `.`.
//! - The MAC is verified in constant time, and before a single byte of the payload is parsed. The domain prefix
//!   names this token type and the supported-version list, so a token cannot be replayed as another signed object
//!   and a change to that list (the payload stores an index into it) invalidates old tokens instead of
//!   misreading them.
//! - The token is signed, not encrypted: its holder can read the principal and the capabilities. Nothing secret
//!   goes in it.
//! - Everything read is bounded: a token's length before it is decoded.

use std::fmt;
use std::time::Duration;

use super::{AgentSession, SessionRef, SessionSecret};
use crate::mcp::SUPPORTED_PROTOCOL_VERSIONS;
use crate::seal::{Seal, TAG_TEXT_LEN, Unsealed};

/// The longest session id [`Sealer::open`] decodes, and [`Sealer::seal`] produces.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Names what the MAC signs, so no other HMAC the gateway might compute with this key can pass for a session id.
const DOMAIN: &[u8] = b"switchyard/agent-session/v1\n";
/// The payload's layout version: the first payload byte.
const FORMAT: u8 = 1;
/// The fixed part of a payload: format, version index, session ref, issue time, principal length.
const HEADER_LEN: usize = 1 + 1 + 16 + 8 + 2;

/// Why a session could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("protocol version {version:?} is not supported")]
    UnsupportedVersion { version: &'static str },
    /// The principal or the declared capabilities are too large for a session id.
    #[error("the session id would be {len} bytes, more than the {max} allowed")]
    TooLarge { len: usize, max: usize },
}

/// Why a session id was refused. Callers answer 404 to every one of them (§A1.6); the variants are for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the session id is malformed")]
    Malformed,
    #[error("the session id's signature does not verify")]
    Forged,
    #[error("the session id has expired")]
    Expired,
}

/// Seals sessions into ids and opens ids back into sessions, with one key and one lifetime.
#[derive(Clone)]
pub struct Sealer {
    seal: Seal,
    ttl: Duration,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer").field("secret", &"<redacted>").field("ttl", &self.ttl).finish()
    }
}

impl Sealer {
    /// Session ids live `ttl` (whole seconds) after their issue time.
    pub fn new(secret: SessionSecret, ttl: Duration) -> Self {
        let mut purpose = DOMAIN.to_vec();
        for version in SUPPORTED_PROTOCOL_VERSIONS {
            purpose.extend_from_slice(version.as_bytes());
            purpose.push(b'\n');
        }
        Self { seal: Seal::new(secret.bytes(), &purpose), ttl }
    }

    /// The last unix second at which `session`'s id still opens (what a revocation lasts until).
    pub fn expires_at(&self, session: &AgentSession) -> u64 {
        session.issued_at.saturating_add(self.ttl.as_secs())
    }

    /// The session id for `session`: visible ASCII, at most [`MAX_TOKEN_LEN`] bytes.
    pub fn seal(&self, session: &AgentSession) -> Result<String, SealError> {
        let token = self.seal.seal(&encode(session)?);
        // `open` refuses longer ids, so handing one out would strand the agent.
        if token.len() > MAX_TOKEN_LEN {
            return Err(SealError::TooLarge { len: token.len(), max: MAX_TOKEN_LEN });
        }
        Ok(token)
    }

    /// The session sealed in `token`, if this key sealed it and it has not expired at `now_unix`. The caller must
    /// still check the principal ([`AgentSession::belongs_to`]) and the revocations.
    pub fn open(&self, token: &str, now_unix: u64) -> Result<AgentSession, OpenError> {
        check_shape(token)?;
        let payload = self.seal.open(token).map_err(|unsealed| match unsealed {
            Unsealed::Malformed => OpenError::Malformed,
            Unsealed::Forged => OpenError::Forged,
        })?;
        let session = decode(&payload)?;
        if now_unix > self.expires_at(&session) {
            return Err(OpenError::Expired);
        }
        Ok(session)
    }
}

/// Refuses a token by its length and the length of its tag before anything is decoded.
fn check_shape(token: &str) -> Result<(), OpenError> {
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        return Err(OpenError::Malformed);
    }
    match token.split_once('.') {
        Some((_, tag)) if tag.len() == TAG_TEXT_LEN => Ok(()),
        _ => Err(OpenError::Malformed),
    }
}

/// Payload layout (integers big-endian): format (1) | version index (1) | session ref (16) | issued_at (8) |
/// principal length (2) | principal (UTF-8) | capabilities (compact JSON, to the end).
fn encode(session: &AgentSession) -> Result<Vec<u8>, SealError> {
    let version = version_index(session.version).ok_or(SealError::UnsupportedVersion { version: session.version })?;
    let principal = session.principal.as_bytes();
    let too_large = SealError::TooLarge { len: principal.len(), max: MAX_TOKEN_LEN };
    let principal_len = u16::try_from(principal.len()).map_err(|_| too_large)?;
    let capabilities = session.capabilities.to_string();
    let mut payload = Vec::with_capacity(HEADER_LEN + principal.len() + capabilities.len());
    payload.push(FORMAT);
    payload.push(version);
    payload.extend_from_slice(session.id.as_bytes());
    payload.extend_from_slice(&session.issued_at.to_be_bytes());
    payload.extend_from_slice(&principal_len.to_be_bytes());
    payload.extend_from_slice(principal);
    payload.extend_from_slice(capabilities.as_bytes());
    Ok(payload)
}

fn version_index(version: &str) -> Option<u8> {
    let index = SUPPORTED_PROTOCOL_VERSIONS.iter().position(|supported| *supported == version)?;
    u8::try_from(index).ok()
}

/// Reads a payload whose MAC has verified; a failure here means a gateway bug or an incompatible format.
fn decode(payload: &[u8]) -> Result<AgentSession, OpenError> {
    let mut reader = Reader(payload);
    let [format] = reader.array()?;
    if format != FORMAT {
        return Err(OpenError::Malformed);
    }
    let [version] = reader.array()?;
    let version = SUPPORTED_PROTOCOL_VERSIONS.get(usize::from(version)).copied().ok_or(OpenError::Malformed)?;
    let id = SessionRef::from_bytes(reader.array()?);
    let issued_at = u64::from_be_bytes(reader.array()?);
    let principal_len = u16::from_be_bytes(reader.array()?);
    let principal = reader.bytes(usize::from(principal_len))?;
    let principal = std::str::from_utf8(principal).map_err(|_| OpenError::Malformed)?.to_owned();
    let capabilities = serde_json::from_slice(reader.0).map_err(|_| OpenError::Malformed)?;
    Ok(AgentSession { id, principal, version, issued_at, capabilities })
}

/// Takes fields off the front of a payload.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], OpenError> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or(OpenError::Malformed)?;
        self.0 = rest;
        Ok(*head)
    }

    fn bytes(&mut self, len: usize) -> Result<&'a [u8], OpenError> {
        let (head, rest) = self.0.split_at_checked(len).ok_or(OpenError::Malformed)?;
        self.0 = rest;
        Ok(head)
    }
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
