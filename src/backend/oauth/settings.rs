//! The OAuth settings of each backend (lowered from its `[backends.oauth]` by the composition root) and those
//! shared by all (the callback under `server.public_url`, limits): plain values, no configuration types.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use super::{AuthMethod, HttpLimits, SigningKey};
use crate::secret::Secret;

/// How tokens are obtained for a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    ClientCredentials,
    AuthorizationCode,
    /// The agent's JWT is exchanged for a token of the backend's (RFC 8693, `exchange.rs`).
    TokenExchange,
}

/// What a token exchange asks for besides the subject token (used by [`GrantKind::TokenExchange`] only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExchangeSettings {
    /// `audience`; `None`: the backend's canonical URL.
    pub audience: Option<String>,
    /// Whether the gateway's own token goes as `actor_token` (RFC 8693 delegation).
    pub actor: bool,
}

/// Who the gateway is at the backend's authorization server.
#[derive(Debug, Clone)]
pub enum ClientIdentity {
    /// Registered by the operator: authenticates with its secret, or with client assertions signed by its key.
    PreRegistered {
        client_id: String,
        client_secret: Option<Secret>,
        private_key: Option<Arc<SigningKey>>,
    },
    MetadataDocument(Url),
    Dynamic,
}

/// One backend's OAuth settings (lowered from `[backends.oauth]` by the composition root).
#[derive(Debug, Clone)]
pub struct BackendOAuth {
    pub backend: String,
    /// The backend's MCP endpoint.
    pub url: Url,
    pub grant: GrantKind,
    pub client: ClientIdentity,
    pub scopes: Vec<String>,
    /// Skips PRM discovery when set.
    pub authorization_server: Option<Url>,
    pub auth_method: Option<AuthMethod>,
    /// Loopback and private addresses are allowed for its OAuth exchanges even when the backend is not in them.
    pub allow_internal: bool,
    pub exchange: ExchangeSettings,
}

/// Settings shared by every backend.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// `<public_url>/oauth/callback`: where authorization servers send the user back.
    pub redirect_uri: Url,
    /// `client_name` in dynamic registrations.
    pub client_name: String,
    pub limits: HttpLimits,
    /// How long an authorization URL stays usable.
    pub pending_ttl: Duration,
    /// Authorizations waiting for their callback, at most.
    pub max_pending: usize,
}
