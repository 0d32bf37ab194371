//! Transport-level admission checks of the agent-facing endpoint (MCP 2025-11-25 transports §"Security
//! Warning", §"Protocol Version Header"; design §3).
//!
//! Rules: an `Origin` that is present and not allowed → 403; when the gateway listens on loopback, a `Host` that
//! is not a loopback name or a configured host → 403 (DNS-rebinding protection); an `MCP-Protocol-Version` that
//! is present and unsupported → 400. Which origins and hosts are allowed is `config::ServerConfig`'s rule. These
//! checks look only at headers; they know nothing of sessions or methods.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};

use crate::config::ServerConfig;
use crate::mcp::{PROTOCOL_VERSION_HEADER, is_supported_version};

/// The admission checks, over the `[server]` settings that say which origins and hosts are allowed.
#[derive(Debug, Clone, Default)]
pub struct Admission {
    pub server: ServerConfig,
}

/// Why a request was refused before it was read.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Origin(String),
    Host(String),
    ProtocolVersion(String),
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Origin(_) | Refusal::Host(_) => StatusCode::FORBIDDEN,
            Refusal::ProtocolVersion(_) => StatusCode::BAD_REQUEST,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::Origin(origin) => format!("Origin `{origin}` is not allowed"),
            Refusal::Host(host) => format!("Host `{host}` is not allowed"),
            Refusal::ProtocolVersion(version) => format!("unsupported MCP-Protocol-Version `{version}`"),
        }
    }
}

impl Admission {
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let text = |name| headers.get(name).map(|value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()));
        if let Some(origin) = text(header::ORIGIN)
            && !self.server.origin_allowed(&origin)
        {
            return Err(Refusal::Origin(origin.into_owned()));
        }
        let host = text(header::HOST).unwrap_or_default();
        if !self.server.host_allowed(&host) {
            return Err(Refusal::Host(host.into_owned()));
        }
        if let Some(version) = text(HeaderName::from_static(PROTOCOL_VERSION_HEADER))
            && !is_supported_version(&version)
        {
            return Err(Refusal::ProtocolVersion(version.into_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn loopback() -> Admission {
        Admission::default()
    }

    fn with(edit: impl FnOnce(&mut ServerConfig)) -> Admission {
        let mut admission = loopback();
        edit(&mut admission.server);
        admission
    }

    #[test]
    fn foreign_origin_is_forbidden_and_loopback_origins_pass() {
        let admission = loopback();
        let evil = admission.check(&headers(&[("host", "127.0.0.1:8808"), ("origin", "http://evil.example")]));
        assert_eq!(evil.unwrap_err().status(), StatusCode::FORBIDDEN);
        for origin in ["http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:80"] {
            let mut map = headers(&[("host", "localhost:8808")]);
            map.insert("origin", HeaderValue::from_str(origin).unwrap());
            assert_eq!(admission.check(&map), Ok(()), "{origin}");
        }
        let configured = with(|server| server.allowed_origins = vec!["https://app.example".into()]);
        assert_eq!(configured.check(&headers(&[("host", "localhost"), ("origin", "https://app.example")])), Ok(()));
    }

    #[test]
    fn spoofed_host_is_refused_on_loopback_only() {
        let spoofed = headers(&[("host", "evil.example:8808")]);
        assert_eq!(loopback().check(&spoofed), Err(Refusal::Host("evil.example:8808".into())));
        let public = with(|server| server.listen = "0.0.0.0:8808".parse().unwrap());
        assert_eq!(public.check(&spoofed), Ok(()), "not on loopback: Host is not checked");
        let allowed = with(|server| server.allowed_hosts = vec!["gw.internal:8808".into()]);
        assert_eq!(allowed.check(&headers(&[("host", "gw.internal:8808")])), Ok(()));
        assert!(loopback().check(&headers(&[("host", "localhost.evil.example")])).is_err());
    }

    #[test]
    fn unsupported_protocol_version_is_a_bad_request() {
        let map = headers(&[("host", "localhost"), ("mcp-protocol-version", "1999-01-01")]);
        assert_eq!(loopback().check(&map).unwrap_err().status(), StatusCode::BAD_REQUEST);
        let older = headers(&[("host", "localhost"), ("mcp-protocol-version", "2025-03-26")]);
        assert_eq!(loopback().check(&older), Ok(()), "any supported version is accepted");
    }
}
