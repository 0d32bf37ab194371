//! The backend OAuth client's [`TokenStore`] over the ledger's token table: the one place the two meet, so the
//! OAuth module never imports the ledger (the pattern of `revocation_log.rs`). Only types are translated here.

use crate::backend::oauth::{ISSUER_PIN_PRINCIPAL, StoreCall, StoredToken, TokenStore};
use crate::ledger::{BackendTokenRow, LedgerStore, TokenFilter};

/// The ledger's store as the OAuth client's token store.
#[derive(Debug, Clone)]
pub struct LedgerTokens(pub LedgerStore);

fn stored(row: BackendTokenRow) -> StoredToken {
    StoredToken {
        principal: row.principal,
        backend: row.backend,
        sealed: row.sealed,
        scopes: row.scopes,
        expires_at: row.expires_at,
        updated_at: row.updated_at,
    }
}

fn one(principal: &str, backend: &str) -> TokenFilter {
    TokenFilter { principal: Some(principal.to_owned()), backend: Some(backend.to_owned()) }
}

impl TokenStore for LedgerTokens {
    fn get<'a>(&'a self, principal: &'a str, backend: &'a str) -> StoreCall<'a, Option<StoredToken>> {
        Box::pin(async move {
            let row = self.0.backend_token(principal, backend).await.map_err(|error| error.to_string())?;
            Ok(row.map(stored))
        })
    }

    fn put(&self, token: StoredToken) -> StoreCall<'_, ()> {
        let row = BackendTokenRow {
            principal: token.principal,
            backend: token.backend,
            sealed: token.sealed,
            scopes: token.scopes,
            expires_at: token.expires_at,
            updated_at: token.updated_at,
        };
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
