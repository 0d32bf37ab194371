//! The gateway as an OAuth 2.1 client of protected backends (MCP 2025-11-25 authorization):
//! discovery, registration, PKCE, the `resource` parameter, scope selection and step-up, refresh, and tokens kept
//! per (principal, backend), sealed, in a [`TokenStore`].
//!
//! The backend client asks [`OAuthClient::token_for`] what to send: before a request (`None`) and after a 401 or
//! 403 answer ([`Refusal`]). The answer is a token, or [`OAuthNeed::AuthorizationRequired`] with the URL the
//! principal must open (the request is then not sent), or a typed [`OAuthError`]. That URL is the gateway's own
//! start page, `<public_url>/oauth/start?flow=…`: the front shows it ([`OAuthClient::consent`] binds the flow to
//! that browser), sends the consenting browser on to the authorization server ([`OAuthClient::proceed`]), and its
//! callback hands the `state`, the `code` and the browser's cookies to [`OAuthClient::complete`].
//! Where the authorization server and the client there are found, once per backend, is `locate.rs`.
//!
//! Rules:
//! - Scope selection: the challenge's `scope`, else the configured `scopes`, else the PRM's `scopes_supported`,
//!   else no `scope` parameter. A step-up (403 `insufficient_scope`) asks for the granted scopes plus the
//!   challenged ones; it is refused when the token already holds every challenged scope (re-authorizing cannot
//!   help) or after [`MAX_STEP_UPS`] step-ups.
//! - `authorization_code` requires PKCE S256 from the server (refused otherwise) and an `authorization_endpoint`.
//! - An authorization is bound to the browser that consented at the start page, and each (principal, backend)
//!   has at most one waiting, handed out again while it lives (`pending.rs`; RFC 9700 §4.7.1).
//! - A token is renewed [`REFRESH_MARGIN`] before it expires: by its refresh token, else (client credentials) by
//!   a new grant. A refresh that fails deletes the stored tokens and falls back to authorization.
//! - A 401 for the token that is stored deletes it (after one refresh attempt); a 401 for an older token is
//!   answered with the stored one (another request renewed it meanwhile).
//! - `client_credentials` tokens are one per backend, stored under [`store::GATEWAY_PRINCIPAL`].
//! - `token_exchange` tokens are the agent's JWT exchanged per (principal, backend) (RFC 8693, `exchange.rs`).
//! - Client authentication at the token endpoint: a secret (basic or post), `private_key_jwt` assertions signed
//!   with the operator's key (`assertion.rs`), or none, chosen in `registration.rs`.
//! - Registrations and tokens belong to the issuer they came from (SEP-2352). When the backend refuses a stored
//!   token with 401, its PRM is read again; if it now names another authorization server, the old registration
//!   is dropped and the gateway registers at the new one (once: the next refusal finds the same issuer), and a
//!   refresh token is never sent to an issuer other than the one that granted it.
//! - The authorization code flow (start page, consent, callback) and its `iss` check (RFC 9207, SEP-2468) are
//!   `authorize.rs`; the settings it is given, `settings.rs`.
//! - Outbound trust (`address.rs`, `pin.rs`, `backoff.rs`): every URL is filtered by scheme and by the address
//!   actually connected to; a pre-registered client's credentials go only to its backend's pinned authorization
//!   server; a failed discovery is held off per backend; a whole discovery has one deadline
//!   ([`HttpLimits::timeout`]).
//! - Must not know: HTTP frameworks, the front, the router, the ledger, the configuration types.

mod address;
mod assertion;
mod authorize;
mod backoff;
mod challenge;
mod discovery;
mod error;
mod exchange;
mod http;
mod locate;
mod pending;
mod pin;
mod pkce;
mod registration;
mod settings;
mod store;
mod token;
mod vault;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderValue;

pub use address::{AddressClass, AddressPolicy};
pub use assertion::{KeyError, SigningKey};

pub use challenge::BearerChallenge;
pub use discovery::{ResourceMetadata, ServerMetadata};
pub use error::OAuthError;
pub use exchange::DEFAULT_LIFETIME as DEFAULT_EXCHANGED_LIFETIME;
pub use http::HttpLimits;
pub use pin::ISSUER_PIN_PRINCIPAL;
pub use settings::{BackendOAuth, ClientIdentity, ExchangeSettings, GrantKind, OAuthOptions};
pub use store::{BackendTokenRow, GATEWAY_PRINCIPAL, StoreCall, TokenStore};
pub use token::AuthMethod;
pub use vault::{TOKEN_KEY_FILE_NAME, TokenSet, Vault};

use crate::civil_date::unix_now;
pub use pending::Consent;
use pending::PendingTable;
use token::{ClientAuth, Grant, Issued};

/// Step-up authorizations allowed on top of the first one (the conformance suite allows three attempts in all).
pub const MAX_STEP_UPS: u8 = 2;
/// The start page, relative to the callback URL (`<public_url>/oauth/start`), and its one query parameter.
pub const START_PAGE: &str = "start";
pub const START_FLOW_PARAM: &str = "flow";
/// A token this close to its expiry is renewed before it is used.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// A token to send to one backend.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    backend: String,
    authorization: HeaderValue,
}

impl AccessToken {
    /// The backend the token was issued for: it must never be sent elsewhere.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// `Bearer <token>`, marked sensitive.
    pub fn authorization(&self) -> &HeaderValue {
        &self.authorization
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AccessToken({}, <redacted>)", self.backend)
    }
}

/// A backend's refusal of a request, as the backend client saw it.
#[derive(Debug, Clone, Copy)]
pub enum Refusal<'a> {
    /// HTTP 401: no token, or the token sent was not accepted.
    Unauthorized { challenge: Option<&'a BearerChallenge>, sent: Option<&'a AccessToken> },
    /// HTTP 403 with `error="insufficient_scope"`.
    InsufficientScope { challenge: &'a BearerChallenge, sent: Option<&'a AccessToken> },
}

/// Why no token can be sent now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthNeed {
    /// The principal must open `url` and authorize; the request was not sent.
    #[error("authorization required for backend `{backend}`: open {url}")]
    AuthorizationRequired { backend: String, url: String },
    #[error(transparent)]
    Failed(#[from] OAuthError),
}

/// Whose authorization a callback completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub principal: String,
    pub backend: String,
    /// The flow the browser's cookie was set for (the page clears it).
    pub flow: String,
}

/// What discovery and registration found for a backend.
#[derive(Debug)]
struct Discovered {
    /// The authorization server as the PRM's `authorization_servers` names it (`None`: configured), to notice a
    /// change.
    named: Option<String>,
    resource: String,
    prm_scopes: Option<Vec<String>>,
    server: ServerMetadata,
    client: ClientAuth,
}

struct BackendState {
    settings: BackendOAuth,
    http: http::Http,
    backoff: backoff::Backoff,
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
    /// Serializes renewals of this backend's tokens, so a rotated refresh token is used once.
    renewal: tokio::sync::Mutex<()>,
}

/// The OAuth client of every protected backend.
pub struct OAuthClient {
    backends: HashMap<String, BackendState>,
    vault: Vault,
    store: Arc<dyn TokenStore>,
    pending: PendingTable,
    options: OAuthOptions,
    /// The callback URL: known only once the gateway has bound its address (see [`OAuthClient::set_redirect_uri`]).
    redirect_uri: parking_lot::RwLock<Url>,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient").field("backends", &self.backends.keys().collect::<Vec<_>>()).finish()
    }
}

impl OAuthClient {
    pub fn new(
        backends: Vec<BackendOAuth>,
        options: OAuthOptions,
        vault: Vault,
        store: Arc<dyn TokenStore>,
    ) -> Result<OAuthClient, reqwest::Error> {
        let backends = backends
            .into_iter()
            .map(|settings| {
                let policy = AddressPolicy::new(&settings.url, settings.allow_internal);
                let http = http::Http::new(options.limits, policy)?;
                let state = BackendState {
                    settings,
                    http,
                    backoff: Default::default(),
                    discovered: Default::default(),
                    renewal: Default::default(),
                };
                Ok((state.settings.backend.clone(), state))
            })
            .collect::<Result<_, reqwest::Error>>()?;
        Ok(OAuthClient {
            backends,
            vault,
            store,
            pending: PendingTable::new(options.pending_ttl, options.max_pending),
            redirect_uri: parking_lot::RwLock::new(options.redirect_uri.clone()),
            options,
        })
    }

    /// Sets the callback URL (`<public_url>/oauth/callback`) once the gateway knows its public URL.
    pub fn set_redirect_uri(&self, url: Url) {
        *self.redirect_uri.write() = url;
    }

    fn redirect_uri(&self) -> String {
        self.callback_url().to_string()
    }

    fn callback_url(&self) -> Url {
        self.redirect_uri.read().clone()
    }

    /// The gateway's start page: the callback's sibling `start` (both live under `<public_url>/oauth/`).
    fn start_uri(&self) -> Url {
        let callback = self.callback_url();
        callback.join(START_PAGE).unwrap_or(callback)
    }

    /// Whether the gateway's public URL is `https` (so its cookies may be `Secure` and `__Host-` prefixed).
    pub fn serves_https(&self) -> bool {
        self.callback_url().scheme() == "https"
    }

    /// How `backend` obtains tokens (`None`: not an OAuth backend here).
    pub fn grant(&self, backend: &str) -> Option<GrantKind> {
        self.backends.get(backend).map(|state| state.settings.grant)
    }

    /// The token to send before a request when one is stored (renewed if it is about to expire), else `None`:
    /// the request then goes without one, so that the backend's 401 challenge (its `resource_metadata` and
    /// `scope`) drives discovery.
    pub async fn stored_token(&self, backend: &str, principal: &str) -> Result<Option<AccessToken>, OAuthNeed> {
        let state = self.backends.get(backend).ok_or_else(|| OAuthError::UnknownBackend(backend.to_owned()))?;
        let owner = match state.settings.grant {
            GrantKind::ClientCredentials => GATEWAY_PRINCIPAL,
            GrantKind::AuthorizationCode | GrantKind::TokenExchange => principal,
        };
        if self.load(owner, backend).await?.is_none() {
            return Ok(None);
        }
        self.token_for(backend, principal, None).await.map(Some)
    }

    /// Whose tokens the gateway's own discovery of `backend` uses: the gateway's (client credentials), else a
    /// principal that authorized it (`None`: nobody has yet).
    pub async fn discovery_principal(&self, backend: &str) -> Result<Option<String>, OAuthError> {
        match self.grant(backend) {
            None => Err(OAuthError::UnknownBackend(backend.to_owned())),
            Some(GrantKind::ClientCredentials) => Ok(Some(GATEWAY_PRINCIPAL.to_owned())),
            Some(GrantKind::AuthorizationCode | GrantKind::TokenExchange) => {
                self.store.any_principal(backend).await.map_err(OAuthError::Store)
            }
        }
    }

    /// What to send to `backend` on behalf of `principal`: before a request (`refusal` = `None`), or after the
    /// backend refused one.
    pub async fn token_for(
        &self,
        backend: &str,
        principal: &str,
        refusal: Option<Refusal<'_>>,
    ) -> Result<AccessToken, OAuthNeed> {
        let state = self.backends.get(backend).ok_or_else(|| OAuthError::UnknownBackend(backend.to_owned()))?;
        let owner = match state.settings.grant {
            GrantKind::ClientCredentials => GATEWAY_PRINCIPAL,
            GrantKind::AuthorizationCode | GrantKind::TokenExchange => principal,
        };
        if refusal.is_none()
            && let Some(tokens) = self.load(owner, backend).await?.filter(fresh)
        {
            return Ok(self.access(backend, &tokens)?);
        }
        let _renewing = state.renewal.lock().await;
        let stored = self.load(owner, backend).await?;
        match refusal {
            None => self.renew_or_obtain(state, owner, stored, None, false).await,
            Some(Refusal::Unauthorized { challenge, sent }) => {
                if let Some(tokens) =
                    stored.as_ref().filter(|tokens| fresh(tokens) && !self.was_sent(backend, tokens, sent))
                {
                    return Ok(self.access(backend, tokens)?);
                }
                self.renew_or_obtain(state, owner, stored, challenge, true).await
            }
            Some(Refusal::InsufficientScope { challenge, sent }) => {
                if let Some(tokens) =
                    stored.as_ref().filter(|tokens| fresh(tokens) && !self.was_sent(backend, tokens, sent))
                {
                    return Ok(self.access(backend, tokens)?);
                }
                self.step_up(state, owner, stored, challenge).await
            }
        }
    }

    async fn renew_or_obtain(
        &self,
        state: &BackendState,
        owner: &str,
        stored: Option<TokenSet>,
        challenge: Option<&BearerChallenge>,
        rejected: bool,
    ) -> Result<AccessToken, OAuthNeed> {
        let backend = state.settings.backend.as_str();
        if let Some(tokens) = stored {
            if !rejected && fresh(&tokens) {
                return Ok(self.access(backend, &tokens)?);
            }
            if rejected && let Err(error) = self.rediscover(state, challenge).await {
                // The registration at hand may still be right; the refresh or the new authorization will tell.
                tracing::warn!(backend, %error, "oauth: could not read the protected resource metadata again");
            }
            if let Some(refresh_token) = &tokens.refresh_token {
                match self.refresh(state, refresh_token, &tokens).await {
                    Ok(renewed) => {
                        self.save(owner, backend, &renewed).await?;
                        return Ok(self.access(backend, &renewed)?);
                    }
                    Err(error) => tracing::info!(backend, %error, "oauth: refresh failed; authorizing again"),
                }
            }
            self.store.delete(owner, backend).await.map_err(OAuthError::Store)?;
        }
        let scopes = self.select_scopes(state, challenge).await?;
        self.obtain(state, owner, challenge, scopes, 0).await
    }

    async fn step_up(
        &self,
        state: &BackendState,
        owner: &str,
        stored: Option<TokenSet>,
        challenge: &BearerChallenge,
    ) -> Result<AccessToken, OAuthNeed> {
        let backend = state.settings.backend.as_str();
        let required = challenge.scope.clone().unwrap_or_default();
        let (mut scopes, step_ups) = stored.map(|tokens| (tokens.scopes, tokens.step_ups)).unwrap_or_default();
        let adds_scope = required.iter().any(|scope| !scopes.contains(scope));
        if !adds_scope || step_ups >= MAX_STEP_UPS {
            return Err(OAuthError::ScopeNotGranted { backend: backend.to_owned(), scope: required.join(" ") }.into());
        }
        scopes.extend(required.into_iter().filter(|scope| !scopes.contains(scope)).collect::<Vec<_>>());
        self.store.delete(owner, backend).await.map_err(OAuthError::Store)?;
        self.obtain(state, owner, Some(challenge), Some(scopes), step_ups + 1).await
    }

    /// A new token: granted at once (client credentials), or an authorization URL for the principal.
    async fn obtain(
        &self,
        state: &BackendState,
        owner: &str,
        challenge: Option<&BearerChallenge>,
        scopes: Option<Vec<String>>,
        step_ups: u8,
    ) -> Result<AccessToken, OAuthNeed> {
        let backend = state.settings.backend.as_str();
        let discovered = self.discover(state, challenge).await?;
        match state.settings.grant {
            GrantKind::ClientCredentials => {
                let issued = token::request(
                    &state.http,
                    &discovered.server.token_endpoint,
                    &discovered.client,
                    Grant::ClientCredentials,
                    &discovered.resource,
                    scopes.as_deref(),
                )
                .await?;
                let tokens = token_set(issued, scopes.unwrap_or_default(), &discovered, None, step_ups);
                self.save(owner, backend, &tokens).await?;
                Ok(self.access(backend, &tokens)?)
            }
            GrantKind::AuthorizationCode => {
                let url = self.authorization_url(owner, backend, discovered, scopes, step_ups)?;
                Err(OAuthNeed::AuthorizationRequired { backend: backend.to_owned(), url })
            }
            // Exchanged tokens come only from `exchanged_token`, which has the subject token.
            GrantKind::TokenExchange => Err(OAuthError::NoSubjectToken {
                backend: backend.to_owned(),
                how: "the request carried no agent token",
            }
            .into()),
        }
    }

    async fn refresh(&self, state: &BackendState, refresh_token: &str, old: &TokenSet) -> Result<TokenSet, OAuthError> {
        let discovered = self.discover(state, None).await?;
        if let Some(granted_by) = old.issuer.as_ref().filter(|issuer| **issuer != discovered.server.issuer) {
            let current = discovered.server.issuer.clone();
            return Err(OAuthError::IssuerChanged { granted_by: granted_by.clone(), current });
        }
        let issued = token::request(
            &state.http,
            &discovered.server.token_endpoint,
            &discovered.client,
            Grant::Refresh { refresh_token },
            &discovered.resource,
            None,
        )
        .await?;
        Ok(token_set(issued, old.scopes.clone(), &discovered, old.refresh_token.clone(), old.step_ups))
    }

    /// The challenge's scopes, else the configured ones, else the PRM's `scopes_supported`, else none.
    async fn select_scopes(
        &self,
        state: &BackendState,
        challenge: Option<&BearerChallenge>,
    ) -> Result<Option<Vec<String>>, OAuthError> {
        if let Some(scopes) = challenge.and_then(|challenge| challenge.scope.clone()) {
            return Ok(Some(scopes));
        }
        if !state.settings.scopes.is_empty() {
            return Ok(Some(state.settings.scopes.clone()));
        }
        Ok(self.discover(state, challenge).await?.prm_scopes.clone())
    }

    async fn load(&self, owner: &str, backend: &str) -> Result<Option<TokenSet>, OAuthError> {
        let Some(row) = self.store.get(owner, backend).await.map_err(OAuthError::Store)? else { return Ok(None) };
        match self.vault.open(owner, backend, &row.sealed) {
            Ok(tokens) => Ok(Some(tokens)),
            Err(error) => {
                // A row this key cannot open is useless; the principal authorizes again.
                tracing::warn!(backend, %error, "oauth: dropping a stored token that does not open");
                self.store.delete(owner, backend).await.map_err(OAuthError::Store)?;
                Ok(None)
            }
        }
    }

    async fn save(&self, owner: &str, backend: &str, tokens: &TokenSet) -> Result<(), OAuthError> {
        let row = BackendTokenRow {
            principal: owner.to_owned(),
            backend: backend.to_owned(),
            sealed: self.vault.seal(owner, backend, tokens)?,
            scopes: tokens.scopes.join(" "),
            expires_at: tokens.expires_at,
            updated_at: unix_now(),
        };
        self.store.put(row).await.map_err(OAuthError::Store)
    }

    fn access(&self, backend: &str, tokens: &TokenSet) -> Result<AccessToken, OAuthError> {
        let mut authorization = HeaderValue::from_str(&format!("Bearer {}", tokens.access_token))
            .map_err(|_| OAuthError::Undecryptable { backend: backend.to_owned() })?;
        authorization.set_sensitive(true);
        Ok(AccessToken { backend: backend.to_owned(), authorization })
    }

    fn was_sent(&self, backend: &str, tokens: &TokenSet, sent: Option<&AccessToken>) -> bool {
        sent.is_some_and(|sent| self.access(backend, tokens).is_ok_and(|stored| &stored == sent))
    }
}

fn fresh(tokens: &TokenSet) -> bool {
    tokens.expires_at.is_none_or(|expires_at| unix_now() + REFRESH_MARGIN.as_secs() < expires_at)
}

fn token_set(
    issued: Issued,
    requested: Vec<String>,
    discovered: &Discovered,
    old_refresh: Option<String>,
    step_ups: u8,
) -> TokenSet {
    TokenSet {
        access_token: issued.access_token,
        refresh_token: issued.refresh_token.or(old_refresh),
        expires_at: issued.expires_at,
        scopes: issued.scopes.unwrap_or(requested),
        client_id: discovered.client.client_id.clone(),
        step_ups,
        issuer: Some(discovered.server.issuer.clone()),
    }
}

/// RFC 8707 / MCP "Canonical Server URI": the backend URL without fragment or trailing slash.
fn canonical_resource(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.as_str().trim_end_matches('/').to_owned()
}

#[cfg(test)]
#[path = "issuer_tests.rs"]
mod tests;
