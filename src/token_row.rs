//! One stored backend OAuth token, on plain types: the row the backend OAuth client seals and opens and the
//! ledger keeps, shared here so neither module knows the other (the composition root joins them,
//! `gateway/token_store.rs`).
//!
//! Rules: a row is keyed by (principal, backend); `sealed` is ciphertext only the OAuth client's vault opens, and
//! `Debug` prints its length, never its bytes; the scopes, expiry and last change are plain so an operator can list
//! rows without the key. Each side checks the row by its own rules (the ledger bounds the sizes).

use std::fmt;

/// One stored row.
#[derive(Clone, PartialEq, Eq)]
pub struct BackendTokenRow {
    /// Empty for the gateway's own client-credentials row.
    pub principal: String,
    pub backend: String,
    /// The sealed token set; opaque outside the vault.
    pub sealed: Vec<u8>,
    /// Granted scopes, space-separated (not secret).
    pub scopes: String,
    /// Unix seconds at which the access token expires, when known.
    pub expires_at: Option<u64>,
    /// Unix seconds of the last change.
    pub updated_at: u64,
}

impl fmt::Debug for BackendTokenRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendTokenRow")
            .field("principal", &self.principal)
            .field("backend", &self.backend)
            .field("sealed", &format_args!("<{} bytes>", self.sealed.len()))
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::BackendTokenRow;

    #[test]
    fn debug_prints_the_sealed_length_not_the_bytes() {
        let row = BackendTokenRow {
            principal: "alice".into(),
            backend: "github".into(),
            sealed: b"ciphertext".to_vec(),
            scopes: "repo".into(),
            expires_at: None,
            updated_at: 7,
        };
        let printed = format!("{row:?}");
        assert!(printed.contains("<10 bytes>"), "{printed}");
        assert!(!printed.contains("99, 105"), "{printed}");
    }
}
