//! The rules that join `[auth]` with the rest of the file: which backends the configured principals can use,
//! which principal names in policies and `admin_principals` no agent can be, and whether serving on the final
//! listen address is safe.
//!
//! Rules:
//! - `authorization_code` backends give each principal its own authorization, so they are refused to the shared
//!   principal `anonymous` whenever an `[auth]` section exists (the gateway's rule at call time; here: `[auth]
//!   anonymous = true` without any credential, where nobody could use such a backend, is refused). Without
//!   `[auth]` the gateway is loopback-only and its one user is `anonymous`, so that user's authorization is used.
//!   `Config::principal_notes` says which rule applies, and which policy names can match no principal, for
//!   `check`.
//! - Whether serving is safe depends on the final listen address (`--listen`, `SWITCHYARD_LISTEN`), so that
//!   check is `Config::check_serving`, called by `serve` after every override, not part of loading.

use std::net::SocketAddr;

use super::auth::{AnonymousAgents, AuthConfig};
use super::backend::BackendConfig;
use super::error::ConfigError;
use super::fields::{Fault, KeyPath, quoted};
use super::oauth::OAuthGrant;
use super::policy::{PolicyConfig, PolicySubject};

/// Refuses `authorization_code` backends that no agent could use: with `[auth] anonymous = true` and no
/// credential every agent is `anonymous`, which such a backend refuses (see the module rules).
pub(super) fn check_per_principal_backends(auth: &AuthConfig, backends: &[BackendConfig]) -> Result<(), Fault> {
    if auth.has_credentials() || auth.anonymous != AnonymousAgents::Allowed {
        return Ok(());
    }
    match backends.iter().position(per_principal) {
        Some(index) => Err(Fault::invalid(
            &KeyPath::root().key("backends").index(index).key("oauth").key("grant"),
            Some(quoted("authorization_code")),
            PER_PRINCIPAL_EXPECTED.into(),
        )),
        None => Ok(()),
    }
}

/// Refuses `token_exchange` backends without `[auth.jwt]`: the exchange trades the agent's JWT, and no agent
/// would have one.
pub(super) fn check_exchange_backends(auth: &AuthConfig, backends: &[BackendConfig]) -> Result<(), Fault> {
    let exchanges =
        |backend: &BackendConfig| backend.oauth.as_ref().is_some_and(|o| o.grant == OAuthGrant::TokenExchange);
    match backends.iter().position(exchanges).filter(|_| auth.jwt.is_none()) {
        Some(index) => Err(Fault::invalid(
            &KeyPath::root().key("backends").index(index).key("oauth").key("grant"),
            Some(quoted("token_exchange")),
            "`[auth.jwt]` beside it: token exchange trades the JWT an agent authenticated with for the backend's \
             token, and without `[auth.jwt]` no agent presents one"
                .into(),
        )),
        None => Ok(()),
    }
}

const PER_PRINCIPAL_EXPECTED: &str = "\"client_credentials\", or credentials for the agents (`[[auth.api_keys]]` or \
     `[auth.jwt]`): with `[auth] anonymous = true` and none, every agent is `anonymous`, and `authorization_code` \
     backends are refused to `anonymous` (one authorization would serve every agent; only without `[auth]`, on \
     loopback, is `anonymous` one user)";

fn per_principal(backend: &BackendConfig) -> bool {
    backend.oauth.as_ref().is_some_and(|oauth| oauth.grant == OAuthGrant::AuthorizationCode)
}

/// What `check` tells the operator about principals: who may use each `authorization_code` backend, and every
/// policy or admin entry naming a principal no agent can be (a name written before JWT principals carried their
/// prefix, a typo).
pub(super) fn principal_notes(auth: &AuthConfig, backends: &[BackendConfig], policies: &[PolicyConfig]) -> Vec<String> {
    let backends = backends.iter().filter(|backend| per_principal(backend)).map(|backend| {
        let who = if auth.anonymous_is_one_user() {
            "without `[auth]` every agent is `anonymous` (loopback only): they share one authorization of it"
        } else {
            "it is refused to agents without credentials (`anonymous`); each other principal authorizes it"
        };
        format!("backend `{}` authorizes each principal (`authorization_code`): {who}", backend.name)
    });
    let policies = policies.iter().enumerate().flat_map(|(index, policy)| {
        let key = KeyPath::root().key("policies").index(index).key("principals");
        policy.principals.iter().map(move |subject| (key.to_string(), subject))
    });
    let admins = auth.admin_principals.iter().map(|subject| ("auth.admin_principals".to_owned(), subject));
    let unknown = policies.chain(admins).filter_map(|(key, subject)| match subject {
        PolicySubject::Principal(name) if !auth.names_principal(name) => Some(unknown_principal(auth, &key, name)),
        _ => None,
    });
    backends.chain(unknown).collect()
}

fn unknown_principal(auth: &AuthConfig, key: &str, name: &str) -> String {
    let jwt = match &auth.jwt {
        Some(jwt) => {
            format!(", and JWT principals are named {:?} + the `{}` claim", jwt.principal_prefix, jwt.principal_claim)
        }
        None => String::new(),
    };
    format!("{key}: {name:?} is no principal an agent can be: API-key principals are named by their `principal`{jwt}")
}

/// Whether a gateway with `auth` may serve on its (final) `listen` address: one reachable from other machines
/// must authenticate its agents unless `[auth] anonymous = true` says otherwise, and a JWT resource server
/// listening on a wildcard address needs `public_url` (its audience and metadata cannot be `http://0.0.0.0:…`).
pub(super) fn check_serving(auth: &AuthConfig, listen: SocketAddr, has_public_url: bool) -> Result<(), ConfigError> {
    if !listen.ip().is_loopback() && auth.anonymous == AnonymousAgents::LoopbackOnly {
        return Err(ConfigError::Unprotected { listen });
    }
    if auth.jwt.is_some() && !has_public_url && listen.ip().is_unspecified() {
        return Err(ConfigError::NoPublicUrl { listen });
    }
    Ok(())
}
