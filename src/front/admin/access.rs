//! Who may use the operator's console API: administrators (`auth::Admins`: `[auth] admin_principals`, group
//! `admin`), and callers on this machine where [`ConsoleAccess`] says so. Everyone else is refused: 401 with a
//! challenge when credentials exist and none (or a bad one) was sent, 403 otherwise.
//!
//! Rules:
//! - The header checks of [`super::super::guard`] (`Origin`, `Host`) come first, as for `/mcp`: a page of another
//!   origin never reads the API.
//! - Without `[auth]` every agent is `anonymous` and the gateway listens on loopback only: callers on this
//!   machine read the console without a credential (there is none to give), callers from elsewhere never.
//! - With `[auth]` every caller must present an administrator's credential, callers on this machine included: a
//!   non-administrator's key, or any process on the machine (the stdio servers the gateway starts among them),
//!   must not read every principal's calls. `[auth] console_loopback = true` exempts callers on this machine
//!   that send no credential at all; one that sends a credential is judged by it, wherever it comes from.
//! - A caller is on this machine when its peer address is loopback, its `Host` is a loopback name (so a page of a
//!   DNS-rebound name never counts, whatever address the gateway binds) and the request carries no `Forwarded`,
//!   `X-Forwarded-For` or `X-Real-IP` header (a reverse proxy on this machine forwards other machines' requests
//!   from loopback). Without a known peer address (no `ConnectInfo`) a caller is not on this machine.
//! - The same rule decides who reads the error texts of `/readyz` ([`admits`]), which refuses nobody, and who
//!   reads a failing backend's sentence in full in an agent's answer ([`audience`]): anyone else reads it without
//!   the backend's address, command or stderr.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};

use super::super::error::FrontError;
use super::super::guard::is_loopback_host;
use super::super::{Front, Settings};
use crate::auth::{AuthError, Endpoint, Principal};
use crate::router::Audience;

/// Headers a reverse proxy adds; their presence means the peer address is the proxy's, not the caller's.
const FORWARDING_HEADERS: [&str; 3] = ["forwarded", "x-forwarded-for", "x-real-ip"];

/// Who may read the operator's console, lowered from `[auth]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleAccess {
    /// No `[auth]` section: callers on this machine, without credentials.
    ThisMachine,
    /// An `[auth]` section: administrators; `loopback` (`console_loopback`) also lets callers on this machine in
    /// when they send no credential.
    Administrators { loopback: bool },
}

/// A request the console API may answer.
pub(crate) struct AdminCaller;

impl FromRequestParts<Arc<Front>> for AdminCaller {
    type Rejection = FrontError;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, FrontError> {
        let settings = front.settings.load();
        settings.admission.check(&parts.headers)?;
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(address)| *address);
        admits(&settings, peer, &parts.headers).await.map(|()| AdminCaller)
    }
}

/// Whether a request whose header checks passed may read what the console shows; the refusal otherwise.
pub(crate) async fn admits(
    settings: &Settings,
    peer: Option<SocketAddr>,
    headers: &HeaderMap,
) -> Result<(), FrontError> {
    match identify(settings, peer, headers).await? {
        Identity::ThisMachine => Ok(()),
        Identity::Authenticated(principal) => {
            judge_or_refuse(settings, &principal, settings.admins.admits(&principal), FrontError::NotAdmin)
        }
    }
}

/// Who a console request comes from, by the console's rule (see the module rules).
pub(crate) enum Identity {
    /// A caller on this machine that the rule lets in without judging a credential.
    ThisMachine,
    /// The principal of the credential the request carried (`anonymous` when it carried none).
    Authenticated(Principal),
}

/// The caller of a request whose header checks passed; 401 when the credential it sent is refused.
pub(crate) async fn identify(
    settings: &Settings,
    peer: Option<SocketAddr>,
    headers: &HeaderMap,
) -> Result<Identity, FrontError> {
    if exempt(&settings.console, peer.map(|peer| peer.ip()), headers) {
        return Ok(Identity::ThisMachine);
    }
    let authorization = headers.get_all(header::AUTHORIZATION).iter().map(HeaderValue::as_bytes);
    let principal = settings.auth.authenticate(Endpoint::Root, authorization).await;
    principal
        .map(|authenticated| Identity::Authenticated(authenticated.principal))
        .map_err(|error| unauthenticated(settings, error))
}

/// Lets `principal` in when `admitted`; otherwise asks `anonymous` for a credential (401) when credentials exist,
/// and refuses everyone else with `refusal` (403).
pub(crate) fn judge_or_refuse(
    settings: &Settings,
    principal: &Principal,
    admitted: bool,
    refusal: FrontError,
) -> Result<(), FrontError> {
    match judge(principal, settings.auth.has_credentials(), admitted) {
        Verdict::Admitted => Ok(()),
        Verdict::NeedsCredential => Err(unauthenticated(settings, AuthError::Missing)),
        Verdict::Refused => {
            tracing::warn!(principal = %principal.name, "refused a console request");
            Err(refusal)
        }
    }
}

fn unauthenticated(settings: &Settings, error: AuthError) -> FrontError {
    let challenge = settings.auth.challenge(Endpoint::Root, &error);
    FrontError::Unauthenticated { error, challenge }
}

/// Who reads the error texts of a request whose `principal` is authenticated: an operator when [`admits`] would
/// let it read the console, else an agent.
pub(crate) fn audience(
    settings: &Settings,
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    principal: &Principal,
) -> Audience {
    match exempt(&settings.console, peer, headers) || settings.admins.admits(principal) {
        true => Audience::Operator,
        false => Audience::Agent,
    }
}

/// Whether the console's rule lets this request in without judging its credential (see the module rules); the
/// only way in while no credential can be judged yet (see `front::waiting`).
pub(crate) fn exempt(console: &ConsoleAccess, peer: Option<IpAddr>, headers: &HeaderMap) -> bool {
    let exempt = match *console {
        ConsoleAccess::ThisMachine => true,
        ConsoleAccess::Administrators { loopback } => loopback && !headers.contains_key(header::AUTHORIZATION),
    };
    exempt && on_this_machine(peer, headers)
}

/// Whether the request comes from this machine itself (see the module rules).
fn on_this_machine(peer: Option<IpAddr>, headers: &HeaderMap) -> bool {
    let loopback_peer = peer.is_some_and(|peer| peer.to_canonical().is_loopback());
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).unwrap_or_default();
    let forwarded = FORWARDING_HEADERS.iter().any(|name| headers.contains_key(*name));
    loopback_peer && is_loopback_host(host) && !forwarded
}

/// What the console says to an authenticated caller that is not exempt.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Admitted,
    /// `anonymous` while credentials exist: it should authenticate (401).
    NeedsCredential,
    /// Authenticated but not an administrator, or no way to authenticate at all (403).
    Refused,
}

fn judge(principal: &Principal, credentials_exist: bool, admitted: bool) -> Verdict {
    if admitted {
        Verdict::Admitted
    } else if principal.name == Principal::ANONYMOUS && credentials_exist {
        Verdict::NeedsCredential
    } else {
        Verdict::Refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Admins, Subject};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| (header::HeaderName::from_static(name), HeaderValue::from_static(value)))
            .collect()
    }

    fn peer(text: &str) -> Option<IpAddr> {
        Some(text.parse::<SocketAddr>().expect("address").ip())
    }

    #[test]
    fn this_machine_is_a_loopback_peer_naming_a_loopback_host_without_a_proxy() {
        let local = headers(&[("host", "127.0.0.1:8808")]);
        assert!(on_this_machine(peer("127.0.0.1:50000"), &local));
        assert!(on_this_machine(peer("[::1]:50000"), &headers(&[("host", "localhost:8808")])));
        assert!(on_this_machine(peer("[::ffff:127.0.0.1]:5"), &headers(&[("host", "[::1]")])));
        assert!(!on_this_machine(peer("10.0.0.7:50000"), &local), "another machine");
        assert!(!on_this_machine(None, &local), "an unknown peer is not trusted");
        let rebound = headers(&[("host", "evil.example:8808")]);
        assert!(!on_this_machine(peer("127.0.0.1:50000"), &rebound), "a DNS-rebound page");
        assert!(!on_this_machine(peer("127.0.0.1:50000"), &HeaderMap::new()), "no Host");
        for proxy in FORWARDING_HEADERS {
            let mut proxied = local.clone();
            proxied.insert(header::HeaderName::from_static(proxy), HeaderValue::from_static("203.0.113.9"));
            assert!(!on_this_machine(peer("127.0.0.1:50000"), &proxied), "{proxy}");
        }
    }

    #[test]
    fn only_administrators_are_admitted_from_elsewhere() {
        let admins = Admins::new(vec![Subject::Principal("alice".into())]);
        let named = |name: &str, groups: &[&str]| Principal {
            name: name.into(),
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        };
        let judged =
            |principal: &Principal, credentials_exist| judge(principal, credentials_exist, admins.admits(principal));
        assert_eq!(judged(&named("alice", &[]), true), Verdict::Admitted);
        assert_eq!(judged(&named("carol", &["admin"]), true), Verdict::Admitted);
        assert_eq!(judged(&named("bob", &["ops"]), true), Verdict::Refused);
        assert_eq!(judged(&Principal::anonymous(), true), Verdict::NeedsCredential);
        assert_eq!(judged(&Principal::anonymous(), false), Verdict::Refused, "no credential could help");
    }
}
