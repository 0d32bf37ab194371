//! [`LedgerError`]: everything a ledger operation can report instead of a result.
//!
//! Rules: the ledger fails closed, so every problem is an error the caller must handle (never a panic, never a
//! silent success). Store problems are split by what the caller can do about them: [`LedgerError::Unavailable`]
//! (connection, disk, read-only file, timeout: try later or refuse the call), [`LedgerError::Corrupt`] (the
//! stored data cannot be trusted: an operator must look). Rule violations (another instance's claim, a claim in
//! the wrong state) name the claim. No message contains a database password.

use super::approvals::ApprovalState;
use super::types::ClaimState;
use crate::ledger_url::InvalidLedgerUrl;

/// Why a ledger operation did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LedgerError {
    /// The store cannot be reached or written right now (connection lost, disk full, read-only file, timeout).
    #[error("the call ledger is unavailable: {cause}")]
    Unavailable { cause: String },

    /// The store answered with data that cannot be the ledger's (malformed file, unreadable row).
    #[error("the call ledger is corrupt: {cause}")]
    Corrupt { cause: String },

    /// The store was created by a newer Switchyard; this one must not write to it.
    #[error("the call ledger has schema version {found}; this Switchyard supports up to {supported}")]
    SchemaTooNew { found: i64, supported: i64 },

    /// The ledger URL cannot be used (the message shows it with any password removed).
    #[error("invalid ledger URL {url}: expected {expected}")]
    InvalidUrl { url: String, expected: String },

    /// A claim key given by an operator is not in the ledger's key format.
    #[error("invalid claim key {key:?}: expected a key such as \"idem:5:alice:order-42\" or \"req:…\"")]
    InvalidKey { key: String },

    /// A revoked session's identifier is not 1–[`super::MAX_SESSION_LEN`] visible ASCII characters.
    #[error(
        "invalid session {session:?} for the revocation log: expected 1–{max} visible ASCII characters",
        max = super::MAX_SESSION_LEN
    )]
    InvalidSession { session: String },

    /// A backend token row the token store refuses to write.
    #[error("invalid backend token row: {problem}")]
    InvalidBackendToken { problem: String },

    /// An operator's resolution the store refuses to record (a note that is too long).
    #[error("invalid resolution: {problem}")]
    InvalidResolution { problem: String },

    /// An approval request the store refuses to write (or a decision's note that is too long).
    #[error("invalid approval request: {problem}")]
    InvalidApproval { problem: String },

    /// The approval request was decided already, or expired; `by` is who decided (empty when it expired).
    #[error("the approval request {key} is {state} already; it cannot be decided again")]
    AlreadyDecided { key: String, state: ApprovalState, by: String },

    /// No claim has this key (it was never made, was released, or was purged).
    #[error("no claim with key {key}")]
    NotFound { key: String },

    /// The claim belongs to another gateway instance, which alone may settle it.
    #[error("claim {key} belongs to {owner}, not to {caller}")]
    NotOwner { key: String, owner: String, caller: String },

    /// The claim is in a state the operation cannot start from (for example completing a completed claim with a
    /// different result, or resolving a claim that is not unknown).
    #[error("claim {key} is {state}; {operation} is not possible")]
    WrongState { key: String, state: ClaimState, operation: &'static str },
}

impl LedgerError {
    pub(crate) fn unavailable(cause: impl std::fmt::Display) -> Self {
        Self::Unavailable { cause: cause.to_string() }
    }

    pub(crate) fn corrupt(cause: impl std::fmt::Display) -> Self {
        Self::Corrupt { cause: cause.to_string() }
    }
}

impl From<InvalidLedgerUrl> for LedgerError {
    fn from(InvalidLedgerUrl { url, expected }: InvalidLedgerUrl) -> Self {
        LedgerError::InvalidUrl { url, expected }
    }
}
