//! The front's inputs lowered from the configuration: how agents are authenticated, the settings the front swaps
//! on a reload (admission, administrators, console access, approvers, shares, body limits, the OAuth callback)
//! and the listener's connection limits.
//!
//! Rules: start and reload lower the configuration through these same functions, so a reloaded gateway serves
//! exactly as one started with the new file would; nothing here keeps state.

use std::sync::Arc;

use super::oauth;
use super::{GatewayError, admins, approvals, auth_settings};
use crate::auth::{AuthSettings, Authenticator};
use crate::backend::oauth::OAuthClient;
use crate::config::{AnonymousAgents, Config, ServerConfig};
use crate::front::callback::AuthorizationCallback;
use crate::front::guard::Admission;
use crate::front::listener::ConnectionLimits;
use crate::front::shares::Shares;
use crate::front::{ConsoleAccess, Settings};
use crate::router::CallRouter;

/// How agents are authenticated (`None`: no credentials configured, everyone is `anonymous`).
pub(super) fn agent_auth(config: &Config) -> Option<AuthSettings> {
    config.auth.has_credentials().then(|| auth_settings(config))
}

/// The agents' authenticator: everyone is `anonymous` without `[auth]` credentials.
pub(super) async fn authenticator(config: &Config) -> Result<Authenticator, GatewayError> {
    match agent_auth(config) {
        None => Ok(Authenticator::anonymous_only()),
        Some(settings) => Ok(Authenticator::new(settings).await?),
    }
}

/// The front's `/oauth/callback` over the OAuth client (`None`: no backend uses OAuth).
pub(super) fn callback(
    oauth: Option<&Arc<OAuthClient>>,
    router: &Arc<CallRouter>,
) -> Option<Arc<dyn AuthorizationCallback>> {
    let callback = oauth::Callback { oauth: Arc::clone(oauth?), router: Arc::clone(router) };
    Some(Arc::new(callback))
}

/// What the front takes from the configuration (`listen` being the bound address).
pub(super) fn front_settings(
    config: &Config,
    auth: Arc<Authenticator>,
    authorization: Option<Arc<dyn AuthorizationCallback>>,
) -> Settings {
    Settings {
        admission: Admission {
            allowed_origins: config.server.allowed_origins.clone(),
            allowed_hosts: config.server.allowed_hosts.clone(),
            binds_loopback: config.server.binds_loopback(),
            cors_credentials: config.server.cors_credentials,
        },
        auth,
        admins: admins(config),
        console: console_access(config),
        approvers: approvals::approvers(config),
        shares: Shares {
            per_principal: config.server.connections_per_principal(),
            streams_per_session: config.server.max_streams_per_session,
        },
        max_body: config.server.max_body,
        body_timeout: config.server.body_timeout,
        authorization,
    }
}

/// Without `[auth]` every agent is `anonymous` on loopback, so the console is this machine's; with it, the
/// administrators'.
pub(super) fn console_access(config: &Config) -> ConsoleAccess {
    match config.auth.anonymous {
        AnonymousAgents::LoopbackOnly => ConsoleAccess::ThisMachine,
        AnonymousAgents::Allowed | AnonymousAgents::Refused => {
            ConsoleAccess::Administrators { loopback: config.auth.console_loopback }
        }
    }
}

pub(super) fn connection_limits(server: &ServerConfig) -> ConnectionLimits {
    ConnectionLimits {
        header_timeout: server.header_timeout,
        idle_timeout: server.idle_timeout,
        max_connections: server.max_connections,
    }
}
