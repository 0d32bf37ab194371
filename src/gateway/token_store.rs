//! The backend OAuth client's [`TokenStore`] over the ledger's token table: the one place the two meet, so the
//! OAuth module never imports the ledger (the pattern of `revocation_log.rs`). Both sides trade the one row type of the
//! `token_row` leaf, so nothing is translated but errors (to the strings the OAuth client expects).

use crate::backend::oauth::{ISSUER_PIN_PRINCIPAL, StoreCall, TokenStore};
use crate::ledger::{BackendTokenRow, LedgerStore, TokenFilter};

/// The ledger's store as the OAuth client's token store.
#[derive(Debug, Clone)]
pub struct LedgerTokens(pub LedgerStore);

fn one(principal: &str, backend: &str) -> TokenFilter {
    TokenFilter { principal: Some(principal.to_owned()), backend: Some(backend.to_owned()) }
}

impl TokenStore for LedgerTokens {
    fn get<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, Option<BackendTokenRow>> {
        Box::pin(async move { self.0.backend_token(principal, backend).await.map_err(|error| error.to_string()) })
    }

    fn put(&self, row: BackendTokenRow) -> StoreCall<'_, ()> {
        Box::pin(async move { self.0.put_backend_token(&row).await.map_err(|error| error.to_string()) })
    }

    fn delete<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, bool> {
        Box::pin(async move {
            let deleted = self.0.delete_backend_tokens(&one(principal, backend)).await.map_err(|e| e.to_string())?;
            Ok(deleted > 0)
        })
    }

    fn any_principal<'a>(&'a self, backend: &'a str) -> StoreCall<'a, Option<String>> {
        Box::pin(async move {
            let filter = TokenFilter { principal: None, backend: Some(backend.to_owned()) };
            let rows = self.0.backend_tokens(&filter).await.map_err(|error| error.to_string())?;
            let newest = rows
                .into_iter()
                .filter(|row| !row.principal.is_empty() && row.principal != ISSUER_PIN_PRINCIPAL)
                .max_by_key(|row| row.updated_at);
            Ok(newest.map(|row| row.principal))
        })
    }
}
