//! OAuth 2.0 Token Exchange (RFC 8693) for `grant = token_exchange` backends: the agent's verified JWT (the
//! `subject_token`) is exchanged at the backend's authorization server for a token meant for the backend, so the
//! backend sees the user, not the gateway.
//!
//! Rules:
//! - Only a principal that presented a JWT has a subject token; any other (an API key, `anonymous`) is refused
//!   with [`OAuthError::NoSubjectToken`] before anything is sent.
//! - The request: `subject_token` of type `urn:ietf:params:oauth:token-type:access_token`, `audience` (the
//!   configured one, else the backend's canonical URL), `resource` (the backend's canonical URL, RFC 8707),
//!   `requested_token_type` access token, the gateway's client authentication as for every grant (`token.rs`).
//!   With `actor = true`, the gateway's own token (a `client_credentials` grant made just before, never stored)
//!   goes as `actor_token`, so the issued token can name the gateway in `act` (RFC 8693 §4.1).
//! - The issued token is kept per (principal, backend), sealed in the token store like every other token, until
//!   [`super::REFRESH_MARGIN`] before its expiry: `expires_in`, else the JWT's `exp`, else
//!   [`DEFAULT_LIFETIME`]. Its refresh token, if any, is dropped: a new exchange needs the user's current token.
//!   The subject token itself is never stored.
//! - A 401 for the token that is stored deletes it and exchanges again, once (the backend client sends the
//!   request once more); a 401 for an older token is answered with the stored one.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::token::{self, Grant};
use super::unix_now;
use super::{AccessToken, BackendState, GrantKind, OAuthClient, OAuthError, OAuthNeed, canonical_resource, fresh};
use crate::secret::SubjectToken;

/// How long an exchanged token that states no lifetime is kept.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

impl OAuthClient {
    /// The exchanged token to send to `backend` for `principal`, whose verified JWT is `subject` (`None`: it
    /// authenticated otherwise). `rejected` is the token the backend just refused with 401, if any.
    pub async fn exchanged_token(
        &self,
        backend: &str,
        principal: &str,
        subject: Option<&SubjectToken>,
        rejected: Option<&AccessToken>,
    ) -> Result<AccessToken, OAuthNeed> {
        let state = self.backends.get(backend).ok_or_else(|| OAuthError::UnknownBackend(backend.to_owned()))?;
        if state.settings.grant != GrantKind::TokenExchange {
            return Err(OAuthError::UnknownBackend(backend.to_owned()).into());
        }
        let usable = |tokens: &super::TokenSet| fresh(tokens) && !self.was_sent(backend, tokens, rejected);
        if let Some(tokens) = self.load(principal, backend).await?.filter(usable) {
            return Ok(self.access(backend, &tokens)?);
        }
        let subject = subject.ok_or_else(|| no_subject_token(backend, principal))?;
        let _renewing = state.renewal.lock().await;
        if let Some(tokens) = self.load(principal, backend).await?.filter(usable) {
            return Ok(self.access(backend, &tokens)?);
        }
        self.store.delete(principal, backend).await.map_err(OAuthError::Store)?;
        let tokens = self.exchange(state, subject).await?;
        self.save(principal, backend, &tokens).await?;
        Ok(self.access(backend, &tokens)?)
    }

    async fn exchange(&self, state: &BackendState, subject: &SubjectToken) -> Result<super::TokenSet, OAuthError> {
        let discovered = self.discover(state, None).await?;
        let endpoint = &discovered.server.token_endpoint;
        let actor = match state.settings.exchange.actor {
            true => {
                let grant = Grant::ClientCredentials;
                let issued =
                    token::request(&state.http, endpoint, &discovered.client, grant, &discovered.resource, None);
                Some(issued.await?.access_token)
            }
            false => None,
        };
        let audience =
            state.settings.exchange.audience.clone().unwrap_or_else(|| canonical_resource(&state.settings.url));
        let grant = Grant::TokenExchange {
            subject_token: subject.expose(),
            actor_token: actor.as_deref(),
            audience: &audience,
        };
        let scopes = Some(state.settings.scopes.as_slice());
        let mut issued =
            token::request(&state.http, endpoint, &discovered.client, grant, &discovered.resource, scopes).await?;
        issued.refresh_token = None;
        issued.expires_at = issued
            .expires_at
            .or_else(|| jwt_expiry(&issued.access_token))
            .or_else(|| Some(unix_now() + DEFAULT_LIFETIME.as_secs()));
        Ok(super::token_set(issued, state.settings.scopes.clone(), &discovered, None, 0))
    }
}

/// Why a principal without a subject token cannot use a token-exchange backend.
fn no_subject_token(backend: &str, principal: &str) -> OAuthError {
    let how = match principal == crate::mcp::ANONYMOUS {
        true => "this agent presented no credentials",
        false => "this agent authenticated with an API key",
    };
    OAuthError::NoSubjectToken { backend: backend.to_owned(), how }
}

/// The `exp` claim of a JWT-shaped token, read without verifying it (only to know how long to keep it; the
/// backend verifies the token).
fn jwt_expiry(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let claims: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    claims.get("exp")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lifetime_of_a_jwt_is_read_from_its_exp() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"exp":1900000000,"sub":"a"}"#);
        assert_eq!(jwt_expiry(&format!("h.{payload}.s")), Some(1_900_000_000));
        for opaque in ["opaque-token", "a.b.c", &format!("h.{}.s", URL_SAFE_NO_PAD.encode(br#"{"exp":"soon"}"#))] {
            assert_eq!(jwt_expiry(opaque), None, "{opaque}");
        }
    }

    #[test]
    fn a_refusal_names_how_the_agent_authenticated() {
        let anonymous = no_subject_token("docs", "anonymous").to_string();
        assert!(anonymous.contains("presented no credentials") && anonymous.contains("`docs`"), "{anonymous}");
        let keyed = no_subject_token("docs", "alice").to_string();
        assert!(keyed.contains("API key") && keyed.contains("RFC 8693"), "{keyed}");
    }
}
