//! The session key: the secret that signs agent session ids, and the file it lives in.
//!
//! Rules: the key is exactly [`SECRET_LEN`] raw bytes from the operating system's secure random source, kept
//! under the rules of every key file ([`crate::keyfile`]: created exclusively with mode 0600, refused when of
//! another length or not a regular file, warned about when others may read it — whoever reads it can mint
//! session ids for any principal). The key never appears in `Debug` output.

use std::fmt;
use std::path::Path;

use crate::keyfile::{self, KeyFileError};

/// The length of the session key, in bytes.
pub const SECRET_LEN: usize = 32;

/// Why the session key could not be loaded or created (the rules of every key file, [`crate::keyfile`]).
pub type SessionError = KeyFileError;

/// The key that signs session ids. Every replica that must accept a session id holds the same key.
pub struct SessionSecret([u8; SECRET_LEN]);

impl fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl SessionSecret {
    #[cfg(test)]
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(bytes)
    }

    /// Reads the key from `path` (exactly [`SECRET_LEN`] raw bytes), or creates the file with fresh random bytes
    /// and mode 0600 when it does not exist. Two processes starting at once agree on one key: the file is created
    /// exclusively, and the loser reads the winner's key. Blocking; meant for startup.
    pub fn load_or_create(path: &Path) -> Result<Self, SessionError> {
        keyfile::load_or_create::<SECRET_LEN>(path).map(Self)
    }

    /// The key the router seals request states with (multi round-trip results), derived from this one.
    pub fn request_state_key(&self) -> crate::router::request_state::StateKey {
        crate::router::request_state::StateKey::derived_from(&self.0)
    }

    /// The keys of the console's approval form tokens and link tickets, derived from this one.
    pub fn console_tickets(&self) -> crate::front::ConsoleTickets {
        crate::front::ConsoleTickets::new(&self.0)
    }

    /// The raw key, for the sealer's MAC.
    pub(super) fn bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
