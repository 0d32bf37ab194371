//! `switchyard auth list|revoke`: the operator's view of the OAuth tokens the gateway holds for backends,
//! read from the ledger's store.
//!
//! Rules: nothing secret is ever printed (rows are listed from their plain columns; the sealed token set is never
//! opened here, so no key is needed); `revoke` needs `--principal` or `--backend` (or `--all`), so a typo cannot
//! delete every token; the gateway's own client-credentials tokens are shown as `(gateway)` and selected with
//! `--principal ''`; a backend's pinned authorization server is shown as `(issuer pin)` with the issuer under
//! SCOPES, and `revoke --backend B` clears it with B's tokens.

use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::bail;
use switchyard::backend::oauth::ISSUER_PIN_PRINCIPAL;
use switchyard::ledger::{BackendTokenRow, TokenFilter};

use super::open_ledger;
use super::table::print_table;
use crate::cli::calls::timestamp;

/// Which stored tokens a command touches.
#[derive(clap::Args)]
pub struct TokenSelection {
    /// Only this principal's tokens (`''`: the gateway's client-credentials tokens).
    #[arg(long)]
    principal: Option<String>,
    /// Only this backend's tokens.
    #[arg(long)]
    backend: Option<String>,
    /// With `revoke`: every token, when neither `--principal` nor `--backend` is given.
    #[arg(long)]
    all: bool,
}

impl TokenSelection {
    fn filter(self) -> TokenFilter {
        TokenFilter { principal: self.principal, backend: self.backend }
    }
}

pub async fn list(selection: TokenSelection, config: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let store = open_ledger(config).await?;
    let rows = store.backend_tokens(&selection.filter()).await?.iter().map(row).collect();
    print_table(["BACKEND", "PRINCIPAL", "SCOPES", "EXPIRES (UTC)", "UPDATED (UTC)"], rows);
    Ok(ExitCode::SUCCESS)
}

pub async fn revoke(selection: TokenSelection, config: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    if selection.principal.is_none() && selection.backend.is_none() && !selection.all {
        bail!("say whose tokens to delete: --principal P, --backend B (or both), or --all");
    }
    let store = open_ledger(config).await?;
    let deleted = store.delete_backend_tokens(&selection.filter()).await?;
    println!("deleted {deleted} stored token set{}", if deleted == 1 { "" } else { "s" });
    Ok(ExitCode::SUCCESS)
}

fn row(token: &BackendTokenRow) -> [String; 5] {
    let at = |seconds: u64| timestamp(UNIX_EPOCH + Duration::from_secs(seconds));
    [
        token.backend.clone(),
        match token.principal.as_str() {
            "" => "(gateway)".to_owned(),
            ISSUER_PIN_PRINCIPAL => "(issuer pin)".to_owned(),
            principal => principal.to_owned(),
        },
        token.scopes.clone(),
        token.expires_at.map_or_else(|| "-".to_owned(), at),
        at(token.updated_at),
    ]
}
