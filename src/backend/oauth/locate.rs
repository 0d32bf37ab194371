//! Finding a backend's authorization server and the gateway's client there: the protected resource metadata (or
//! the configured server), the server's metadata, and a registration, once per backend and kept in its
//! [`BackendState`]; read again when the backend refuses a stored token.
//!
//! Rules: a whole discovery has one deadline ([`super::HttpLimits::timeout`]), however many locations it tries; a
//! failure is held off per backend (`backoff.rs`); a pre-registered client goes only to its pinned server
//! (`pin.rs`); a configured `authorization_server` never moves, a PRM-named one may (SEP-2352), and then the old
//! registration is forgotten.

use std::future::Future;
use std::sync::Arc;

use super::{
    BackendState, BearerChallenge, Discovered, GrantKind, OAuthClient, OAuthError, ResourceMetadata,
    canonical_resource, discovery, pin, registration,
};

impl OAuthClient {
    /// The backend's authorization server and the gateway's client there, found once and kept; a failure is
    /// held off (`backoff.rs`).
    pub(super) async fn discover(
        &self,
        state: &BackendState,
        challenge: Option<&BearerChallenge>,
    ) -> Result<Arc<Discovered>, OAuthError> {
        let mut cached = state.discovered.lock().await;
        if let Some(discovered) = cached.as_ref() {
            return Ok(Arc::clone(discovered));
        }
        state.backoff.check(&state.settings.backend)?;
        let found = self
            .within_deadline(state, async {
                let prm = match state.settings.authorization_server {
                    Some(_) => None,
                    None => Some(self.resource_metadata(state, challenge).await?),
                };
                self.find(state, prm).await
            })
            .await;
        state.backoff.record(&found);
        let discovered = Arc::new(found?);
        *cached = Some(Arc::clone(&discovered));
        Ok(discovered)
    }

    /// One deadline for a whole discovery, however many locations it tries.
    async fn within_deadline<T>(
        &self,
        state: &BackendState,
        work: impl Future<Output = Result<T, OAuthError>>,
    ) -> Result<T, OAuthError> {
        let timeout = self.options.limits.timeout;
        tokio::time::timeout(timeout, work).await.unwrap_or_else(|_| {
            Err(OAuthError::Unreachable {
                what: "the authorization server discovery",
                url: state.settings.url.to_string(),
                reason: format!("did not finish within {} s", timeout.as_secs()),
            })
        })
    }

    /// After the backend refused a token: reads the PRM again and, when it names another authorization server
    /// than the one registered at, forgets that registration and registers at the new one (SEP-2352). A
    /// configured `authorization_server` never moves.
    pub(super) async fn rediscover(
        &self,
        state: &BackendState,
        challenge: Option<&BearerChallenge>,
    ) -> Result<(), OAuthError> {
        let mut cached = state.discovered.lock().await;
        let Some(named) = cached.as_ref().and_then(|discovered| discovered.named.clone()) else { return Ok(()) };
        let discovered = self
            .within_deadline(state, async {
                let prm = self.resource_metadata(state, challenge).await?;
                if prm.authorization_servers.first() == Some(&named) {
                    return Ok(None);
                }
                self.find(state, Some(prm)).await.map(Some)
            })
            .await?;
        let Some(discovered) = discovered else { return Ok(()) };
        let backend = state.settings.backend.as_str();
        let to = discovered.server.issuer.as_str();
        tracing::info!(backend, from = %named, to, "oauth: the backend's authorization server changed; registered again");
        *cached = Some(Arc::new(discovered));
        Ok(())
    }

    async fn resource_metadata(
        &self,
        state: &BackendState,
        challenge: Option<&BearerChallenge>,
    ) -> Result<ResourceMetadata, OAuthError> {
        let from_challenge = challenge.and_then(|challenge| challenge.resource_metadata.as_deref());
        discovery::fetch_resource_metadata(&state.http, &state.settings.url, from_challenge).await
    }

    /// The authorization server the PRM names (or the configured one), its metadata, and a client there; a
    /// pre-registered client only at its pinned server (`pin.rs`).
    async fn find(&self, state: &BackendState, prm: Option<ResourceMetadata>) -> Result<Discovered, OAuthError> {
        let settings = &state.settings;
        let (named, resource, prm_scopes, issuer) = match (prm, &settings.authorization_server) {
            (Some(prm), _) => {
                let issuer = prm.authorization_servers.first().cloned().ok_or_else(|| OAuthError::BadDocument {
                    what: "protected resource metadata",
                    url: prm.resource.clone(),
                    reason: "`authorization_servers` is empty".to_owned(),
                })?;
                (Some(issuer.clone()), prm.resource, prm.scopes_supported, issuer)
            }
            (None, configured) => {
                let issuer = configured.as_ref().map_or("", |issuer| issuer.as_str().trim_end_matches('/'));
                (None, canonical_resource(&settings.url), None, issuer.to_owned())
            }
        };
        let admission = match named {
            Some(_) => pin::admit(self.store.as_ref(), &self.vault, settings, &issuer).await?,
            None => pin::Admission::Unpinned,
        };
        let server = discovery::fetch_server_metadata(&state.http, &issuer).await?;
        if settings.grant == GrantKind::AuthorizationCode && !server.supports_s256() {
            return Err(OAuthError::NoPkce { issuer: server.issuer });
        }
        let client = registration::register(
            &state.http,
            &settings.client,
            settings.auth_method,
            &server,
            &self.redirect_uri(),
            &self.options.client_name,
        )
        .await?;
        if admission == pin::Admission::First {
            pin::record(self.store.as_ref(), &self.vault, &settings.backend, &server.issuer).await?;
        }
        Ok(Discovered { named, resource, prm_scopes, server, client })
    }
}
