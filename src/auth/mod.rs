//! Agent authentication and authorization (MCP 2025-11-25 authorization): turns a request's
//! `Authorization` header into a [`Principal`], and decides with [`Policies`] what that principal may use.
//!
//! Owns: reading bearer tokens, API keys (SHA-256 digests, constant-time comparison), JWT validation against
//! the issuer's JWKS (cached by `kid`), the `AuthError` refusals with their HTTP status and `error` code, the
//! Protected Resource Metadata documents and `WWW-Authenticate` challenges, the policy model, and who may read
//! the operator's console ([`Admins`]).
//!
//! Rules:
//! - Knows no HTTP framework, no sessions, no backends' wire formats: callers pass header values as bytes and
//!   get plain values back (a status number, a header value string, a JSON document).
//! - Authentication happens before any session or backend work, on every request (sessions never
//!   authenticate, MCP "Session Hijacking").
//! - With no credentials configured every agent is `anonymous` and any `Authorization` header is ignored (the
//!   loopback default); with credentials configured a request without one is `anonymous` only when anonymous
//!   agents are allowed, and a request with a bad one is always refused.
//! - A token shaped like a JWT (three dot-separated parts) is checked as a JWT when `[auth.jwt]` is
//!   configured, for the endpoint it is presented at; anything else is looked up as an API key (generated keys
//!   never contain a dot).
//! - One namespace of principals: `anonymous` is only ever the agent without credentials, a JWT's principal
//!   carries its prefix (see [`JwtSettings::principal_prefix`]) and the configuration keeps API keys' names out
//!   of both, so sessions, idempotent calls and OAuth tokens, all keyed by the name, are never shared across
//!   credential kinds.
//! - The agent's token is never handed on: nothing here returns or stores it.

mod admin;
mod api_key;
mod bearer;
mod error;
mod jwks;
mod jwt;
mod metadata;
mod policy;
#[cfg(test)]
mod test_tokens;

pub use admin::Admins;
pub use api_key::{ApiKey, api_key_digest, generate_api_key, hex};

pub use error::{AuthError, AuthSetupError};
pub use jwks::{JWKS_REFETCH_INTERVAL, JwksSource};
pub use jwt::{Audiences, JWT_VERIFIED_CAPACITY, JWT_VERIFIED_FOR, JwtSettings};
pub use metadata::{Endpoint, ResourceMetadata, WELL_KNOWN_PREFIX, plain_challenge};
pub use policy::{Grants, Policies, Policy, Subject};

use api_key::ApiKeys;
use jwt::JwtValidator;

/// Longest principal or group name taken from a token.
pub(crate) const MAX_NAME: usize = 256;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub groups: Vec<String>,
}

impl Principal {
    /// The name of every agent when no credentials are configured.
    pub const ANONYMOUS: &'static str = crate::mcp::ANONYMOUS;

    pub fn anonymous() -> Self {
        Self { name: Self::ANONYMOUS.to_owned(), groups: Vec::new() }
    }
}

/// How agents are authenticated, lowered from the configuration by the composition root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// Whether an agent without credentials is let in as `anonymous`.
    pub anonymous: bool,
    pub api_keys: Vec<ApiKey>,
    pub jwt: Option<JwtSettings>,
    /// The URL agents use (canonical, no trailing slash): the base of the resource identifiers.
    pub public_url: String,
}

/// Turns credentials into principals.
pub struct Authenticator {
    anonymous: bool,
    api_keys: ApiKeys,
    jwt: Option<JwtValidator>,
    metadata: Option<ResourceMetadata>,
}

impl Authenticator {
    /// Sets authentication up; with `[auth.jwt]`, loads the issuer's keys (see [`JwksSource`] for what stops
    /// startup and what does not).
    pub async fn new(settings: AuthSettings) -> Result<Self, AuthSetupError> {
        let metadata = settings.jwt.as_ref().map(|jwt| {
            ResourceMetadata::new(
                &settings.public_url,
                jwt.authorization_servers.clone(),
                jwt.scopes_supported.clone(),
                jwt.required_scopes.clone(),
            )
        });
        let jwt = match settings.jwt {
            Some(jwt) => Some(JwtValidator::new(jwt).await?),
            None => None,
        };
        Ok(Self { anonymous: settings.anonymous, api_keys: ApiKeys::new(settings.api_keys), jwt, metadata })
    }

    /// The authenticator of a gateway without `[auth]`: everyone is `anonymous`.
    pub fn anonymous_only() -> Self {
        Self { anonymous: true, api_keys: ApiKeys::default(), jwt: None, metadata: None }
    }

    /// The principal presenting `authorization` (the values of every `Authorization` header of the request) at
    /// `endpoint`, the resource a JWT must be meant for.
    pub async fn authenticate<'a>(
        &self,
        endpoint: Endpoint<'_>,
        authorization: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Principal, AuthError> {
        if !self.has_credentials() {
            return Ok(Principal::anonymous());
        }
        let Some(token) = bearer::bearer_token(authorization)? else {
            return if self.anonymous { Ok(Principal::anonymous()) } else { Err(AuthError::Missing) };
        };
        match &self.jwt {
            Some(jwt) if token.split('.').count() == 3 => jwt.principal(endpoint, token).await,
            _ => self.api_keys.principal(token, unix_now()),
        }
    }

    /// Whether agents can present credentials at all (API keys or JWTs are configured).
    pub fn has_credentials(&self) -> bool {
        !self.api_keys.is_empty() || self.jwt.is_some()
    }

    /// The Protected Resource Metadata, when agents may get tokens from an authorization server.
    pub fn metadata(&self) -> Option<&ResourceMetadata> {
        self.metadata.as_ref()
    }

    /// The `WWW-Authenticate` value of the answer refusing `error` on `endpoint`.
    pub fn challenge(&self, endpoint: Endpoint<'_>, error: &AuthError) -> String {
        match &self.metadata {
            Some(metadata) => metadata.challenge(endpoint, error),
            None => plain_challenge(error),
        }
    }

    /// `Err` with the reason while tokens cannot be checked (the issuer's keys are not loaded), for `/readyz`.
    pub fn readiness(&self) -> Result<(), String> {
        self.jwt.as_ref().map_or(Ok(()), JwtValidator::readiness)
    }
}

#[cfg(test)]
mod tests;

use crate::civil_date::unix_now;
