//! Transport-level admission checks of the agent-facing endpoint (MCP 2025-11-25 transports §"Security
//! Warning", §"Protocol Version Header").
//!
//! Rules: an `Origin` that is present and not allowed → 403; when the gateway listens on loopback, a `Host` that
//! is not a loopback name or an allowed host → 403 (DNS-rebinding protection); an `MCP-Protocol-Version` that
//! is present and unsupported → 400 (the answers are [`super::error`]'s). These checks look only at headers;
//! they know nothing of sessions or methods. They are the session era's: a 2026-07-28 request has its own version
//! rule, so the front asks for the version check ([`Admission::check_version`]) only once it knows a request is
//! not of that era (a `POST` once its body is read).
//! - Origins (DNS-rebinding and CSRF protection for browsers): an `Origin` is always accepted from a loopback
//!   page (`http(s)://localhost`, `127.0.0.1` or `[::1]`, any port), because such a page runs on the same
//!   machine as a loopback-bound gateway; any other origin must match an `allowed_origins` glob, so an empty
//!   list lets no remote web page call the gateway. `"*"` disables the check.
//! - `Host` is only checked on loopback: it must be a loopback name or match an `allowed_hosts` glob (with or
//!   without its port). On other addresses the agents' authentication protects the gateway.
//! - Comparisons are case-insensitive: the header is lowercased, the globs come lowercased.
//! - One host per request, on every route and whatever the listen address ([`check_target`], before anything
//!   else): more than one `Host` header → 400 (RFC 9112 §3.2: a server MUST answer 400); an absolute-form request
//!   target whose authority is not the `Host` header → 421 (RFC 9112 §3.2.2 makes the target's authority the
//!   host a server must serve, so the `Host` the other checks judged would not be the one asked for).

use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri, header};

use crate::glob::glob_match;
use crate::mcp::{PROTOCOL_VERSION_HEADER, is_supported_version};

/// The admission rules: which browser origins and `Host` names the endpoint trusts. Plain values; the
/// composition root fills them from `[server]`.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Lowercase globs of browser origins allowed besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// Lowercase globs of `Host` values (with or without `:port`) accepted while bound to loopback.
    pub allowed_hosts: Vec<String>,
    /// Whether the gateway listens on a loopback address; only then is `Host` checked.
    pub binds_loopback: bool,
    /// Whether answers to an admitted origin allow the browser to send its credentials ([`super::cors`]).
    pub cors_credentials: bool,
}

/// Why a request was refused before it was read.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Origin(String),
    Host(String),
    RepeatedHost,
    /// An absolute-form request target naming another host than `Host`.
    MisdirectedTarget(String),
    ProtocolVersion(String),
}

/// A header's value as text (lossy: the checks compare it with ASCII names).
fn text<'h>(headers: &'h HeaderMap, name: HeaderName) -> Option<std::borrow::Cow<'h, str>> {
    headers.get(name).map(|value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()))
}

impl Admission {
    /// Every check: origin, host, protocol version.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_origin_and_host(headers)?;
        Self::check_version(headers)
    }

    /// The browser checks, which come before anything else of any request.
    pub fn check_origin_and_host(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if let Some(origin) = headers.get(header::ORIGIN)
            && !self.admits_origin(origin)
        {
            return Err(Refusal::Origin(String::from_utf8_lossy(origin.as_bytes()).into_owned()));
        }
        let host = text(headers, header::HOST).unwrap_or_default();
        if !self.host_allowed(&host) {
            return Err(Refusal::Host(host.into_owned()));
        }
        Ok(())
    }

    /// An unsupported `MCP-Protocol-Version` is refused.
    pub fn check_version(headers: &HeaderMap) -> Result<(), Refusal> {
        match text(headers, HeaderName::from_static(PROTOCOL_VERSION_HEADER)) {
            Some(version) if !is_supported_version(&version) => Err(Refusal::ProtocolVersion(version.into_owned())),
            _ => Ok(()),
        }
    }

    /// Whether a request carrying this `Origin` header value may be served (see the module rules).
    pub fn admits_origin(&self, origin: &HeaderValue) -> bool {
        let origin = String::from_utf8_lossy(origin.as_bytes()).to_ascii_lowercase();
        is_loopback_origin(&origin) || self.allowed_origins.iter().any(|pattern| glob_match(pattern, &origin))
    }

    /// Whether a request carrying this `Host` header may be served (see the module rules).
    fn host_allowed(&self, host: &str) -> bool {
        if !self.binds_loopback {
            return true;
        }
        let host = host.to_ascii_lowercase();
        let Some((name, _port)) = split_host_port(&host) else {
            return false;
        };
        is_loopback_name(name)
            || self.allowed_hosts.iter().any(|pattern| glob_match(pattern, &host) || glob_match(pattern, name))
    }
}

/// The one-host rule of every request (see the module rules).
pub fn check_target(target: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(Refusal::RepeatedHost);
    }
    match target.authority() {
        Some(authority)
            if !host.is_some_and(|host| host.as_bytes().eq_ignore_ascii_case(authority.as_str().as_bytes())) =>
        {
            Err(Refusal::MisdirectedTarget(target.to_string()))
        }
        _ => Ok(()),
    }
}

fn is_loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    split_host_port(authority).is_some_and(|(name, _port)| is_loopback_name(name))
}

/// Whether a `Host` value (`name[:port]`) names this machine by a loopback name (`localhost`, `127.0.0.1`,
/// `[::1]`), as a page loaded from this machine sends it.
pub(super) fn is_loopback_host(host: &str) -> bool {
    split_host_port(&host.to_ascii_lowercase()).is_some_and(|(name, _port)| is_loopback_name(name))
}

fn is_loopback_name(name: &str) -> bool {
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// Splits `host[:port]` (IPv6 hosts in brackets); `None` when the port part is not a number.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    let host_end = if authority.starts_with('[') {
        authority.find(']')? + 1
    } else {
        authority.find(':').unwrap_or(authority.len())
    };
    let (name, rest) = authority.split_at(host_end);
    if rest.is_empty() {
        return Some((name, None));
    }
    let port = rest.strip_prefix(':')?;
    let numeric = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    numeric.then_some((name, Some(port)))
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
