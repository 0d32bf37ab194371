//! Where tokens are kept: the [`TokenStore`] trait, on plain types. The composition root implements it over the
//! ledger's database (`gateway/token_store.rs`), so this module never imports the ledger and every replica sharing
//! the ledger shares the tokens.
//!
//! Rules: a row ([`BackendTokenRow`], the `token_row` leaf the ledger keeps too) is keyed by (principal, backend) and holds the sealed [`super::vault::TokenSet`] plus what an
//! operator may see without the key (scopes, expiry, last change); a put replaces the row. Failures are strings
//! the client turns into [`super::OAuthError::Store`].

use std::future::Future;
use std::pin::Pin;

pub use crate::token_row::BackendTokenRow;

/// The principal under which `client_credentials` tokens are stored: principals are never empty, so it cannot
/// be a real principal's row.
pub const GATEWAY_PRINCIPAL: &str = "";

/// A store operation in flight.
pub type StoreCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Durable (principal, backend) → tokens.
pub trait TokenStore: Send + Sync {
    fn get<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, Option<BackendTokenRow>>;
    fn put(&self, row: BackendTokenRow) -> StoreCall<'_, ()>;
    /// Whether a row was deleted.
    fn delete<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, bool>;
    /// A principal holding a row for `backend` (the most recently changed one), if any: whose token the
    /// gateway's own discovery of an `authorization_code` backend uses.
    fn any_principal<'a>(&'a self, backend: &'a str) -> StoreCall<'a, Option<String>>;
}
