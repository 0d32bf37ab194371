//! Where a pre-registered client's credentials may go: the authorization server pinned for its backend.
//!
//! Rules:
//! - Applies to a backend with a `client_id` (a secret or a `private_key`) and no configured
//!   `authorization_server` (a configured one is the pin, and the PRM is not read at all).
//! - The first authorization server the backend's PRM names is accepted only when its issuer is on the backend's
//!   own host (any port): a pre-registered credential is never sent to a server of another host the backend
//!   merely names; such a server is accepted by configuring `authorization_server` ([`OAuthError::ForeignIssuer`]).
//! - The issuer accepted first is stored, sealed, in the token store as the row of ([`ISSUER_PIN_PRINCIPAL`],
//!   backend) before any credential is sent, so it outlives restarts and is shared by every replica sharing the
//!   store; a later PRM naming another issuer is refused ([`OAuthError::IssuerPinned`]), and nothing is sent to
//!   it. `switchyard auth revoke --backend B` deletes every row of B, the pin included.
//! - Issuers are compared as the metadata check compares them (RFC 8414 §3.3, trailing slash ignored).

use serde::{Deserialize, Serialize};

use super::error::OAuthError;
use super::store::{BackendTokenRow, TokenStore};
use super::unix_now;
use super::vault::Vault;
use super::{BackendOAuth, ClientIdentity};

/// The principal of pin rows: principals never hold control characters, so no real principal has this row.
pub const ISSUER_PIN_PRINCIPAL: &str = "\u{1}issuer-pin";

#[derive(Serialize, Deserialize)]
struct Pin {
    issuer: String,
}

/// Whether the issuer a backend's PRM names may get the backend's client credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Not a pre-registered client: there is nothing to pin.
    Unpinned,
    /// The issuer is the pinned one.
    Pinned,
    /// No pin yet, and the issuer is on the backend's host: pin it once its metadata is read.
    First,
}

/// Refuses `named` (an issuer the backend's PRM names) for a pre-registered client unless it is pinned, or may
/// be pinned now.
pub(super) async fn admit(
    store: &dyn TokenStore,
    vault: &Vault,
    settings: &BackendOAuth,
    named: &str,
) -> Result<Admission, OAuthError> {
    if !matches!(settings.client, ClientIdentity::PreRegistered { .. }) {
        return Ok(Admission::Unpinned);
    }
    let backend = settings.backend.as_str();
    if let Some(pinned) = pinned(store, vault, backend).await? {
        return match same_issuer(&pinned, named) {
            true => Ok(Admission::Pinned),
            false => Err(OAuthError::IssuerPinned { backend: backend.to_owned(), pinned, named: named.to_owned() }),
        };
    }
    let host = settings.url.host_str().unwrap_or_default();
    let named_host = reqwest::Url::parse(named).ok().and_then(|url| url.host_str().map(str::to_ascii_lowercase));
    match named_host.as_deref() == Some(&host.to_ascii_lowercase()) {
        true => Ok(Admission::First),
        false => Err(OAuthError::ForeignIssuer {
            backend: backend.to_owned(),
            named: named.to_owned(),
            host: host.to_owned(),
        }),
    }
}

/// Stores `issuer` as the backend's pin.
pub(super) async fn record(
    store: &dyn TokenStore,
    vault: &Vault,
    backend: &str,
    issuer: &str,
) -> Result<(), OAuthError> {
    let row = BackendTokenRow {
        principal: ISSUER_PIN_PRINCIPAL.to_owned(),
        backend: backend.to_owned(),
        sealed: vault.seal_value(ISSUER_PIN_PRINCIPAL, backend, &Pin { issuer: issuer.to_owned() })?,
        // Shown by `switchyard auth list`, which never opens a row.
        scopes: issuer.to_owned(),
        expires_at: None,
        updated_at: unix_now(),
    };
    store.put(row).await.map_err(OAuthError::Store)?;
    tracing::warn!(
        backend,
        issuer,
        "oauth: pinned the backend's authorization server; its client credentials go nowhere else until \
         `switchyard auth revoke --backend {backend}`"
    );
    Ok(())
}

/// The backend's pinned issuer. A pin row this key cannot open is dropped like a token row (the token key was
/// replaced): whoever can write the store can delete a pin anyway, so an unreadable one protects nothing.
async fn pinned(store: &dyn TokenStore, vault: &Vault, backend: &str) -> Result<Option<String>, OAuthError> {
    let Some(row) = store.get(ISSUER_PIN_PRINCIPAL, backend).await.map_err(OAuthError::Store)? else {
        return Ok(None);
    };
    match vault.open_value::<Pin>(ISSUER_PIN_PRINCIPAL, backend, &row.sealed) {
        Ok(pin) => Ok(Some(pin.issuer)),
        Err(error) => {
            tracing::warn!(backend, %error, "oauth: dropping an issuer pin that does not open; pinning again");
            store.delete(ISSUER_PIN_PRINCIPAL, backend).await.map_err(OAuthError::Store)?;
            Ok(None)
        }
    }
}

fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}
