//! Tests of the admission checks: origins, hosts and protocol versions.

use axum::http::StatusCode;
use axum::response::IntoResponse;

use super::*;
use crate::front::error::FrontError;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_static(value));
    }
    map
}

impl Admission {
    fn origin_allowed(&self, origin: &str) -> bool {
        self.admits_origin(&HeaderValue::from_str(origin).expect("a header value"))
    }
}

fn loopback() -> Admission {
    Admission { allowed_origins: Vec::new(), allowed_hosts: Vec::new(), binds_loopback: true, cors_credentials: false }
}

fn with(edit: impl FnOnce(&mut Admission)) -> Admission {
    let mut admission = loopback();
    edit(&mut admission);
    admission
}

/// The status the error table gives a refusal.
fn status(refusal: Refusal) -> StatusCode {
    FrontError::from(refusal).into_response().status()
}

/// Rules as `[server]` with this `listen` address, `allowed_origins` and `allowed_hosts` lower into.
fn server(listen: &str, origins: &[&str], hosts: &[&str]) -> Admission {
    Admission {
        binds_loopback: listen.parse::<std::net::SocketAddr>().expect("address").ip().is_loopback(),
        allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        cors_credentials: false,
    }
}

#[test]
fn foreign_origin_is_forbidden_and_loopback_origins_pass() {
    let admission = loopback();
    let evil = admission.check(&headers(&[("host", "127.0.0.1:8808"), ("origin", "http://evil.example")]));
    assert_eq!(status(evil.unwrap_err()), StatusCode::FORBIDDEN);
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
    let public = with(|server| server.binds_loopback = false);
    assert_eq!(public.check(&spoofed), Ok(()), "not on loopback: Host is not checked");
    let allowed = with(|server| server.allowed_hosts = vec!["gw.internal:8808".into()]);
    assert_eq!(allowed.check(&headers(&[("host", "gw.internal:8808")])), Ok(()));
    assert!(loopback().check(&headers(&[("host", "localhost.evil.example")])).is_err());
}

#[test]
fn unsupported_protocol_version_is_a_bad_request() {
    let map = headers(&[("host", "localhost"), ("mcp-protocol-version", "1999-01-01")]);
    assert_eq!(status(loopback().check(&map).unwrap_err()), StatusCode::BAD_REQUEST);
    let older = headers(&[("host", "localhost"), ("mcp-protocol-version", "2025-03-26")]);
    assert_eq!(loopback().check(&older), Ok(()), "any supported version is accepted");
    assert_eq!(loopback().check_origin_and_host(&map), Ok(()), "a POST's version waits for its body");
    assert!(Admission::check_version(&map).is_err());
}

#[test]
fn loopback_origins_are_always_allowed() {
    let config = server("127.0.0.1:8808", &[], &[]);
    for origin in
        ["http://localhost", "http://localhost:3000", "https://127.0.0.1:1", "http://[::1]:80", "HTTP://LOCALHOST"]
    {
        assert!(config.origin_allowed(origin), "{origin}");
    }
    for origin in [
        "https://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "null",
        "http://localhost:x",
    ] {
        assert!(!config.origin_allowed(origin), "{origin}");
    }
}

#[test]
fn configured_origins_are_globs() {
    let config = server("127.0.0.1:8808", &["https://*.example.com", "http://tool.internal:8080"], &[]);
    assert!(config.origin_allowed("https://app.example.com"));
    assert!(config.origin_allowed("https://App.Example.com"));
    assert!(config.origin_allowed("http://tool.internal:8080"));
    assert!(!config.origin_allowed("http://app.example.com"));
    assert!(!config.origin_allowed("http://tool.internal:8081"));
    assert!(server("0.0.0.0:1", &["*"], &[]).origin_allowed("https://anything"));
}

#[test]
fn hosts_are_checked_only_on_loopback() {
    let config = server("127.0.0.1:8808", &[], &["gw.localhost"]);
    for host in ["localhost", "localhost:8808", "127.0.0.1:8808", "[::1]:8808", "gw.localhost", "GW.localhost:8808"] {
        assert!(config.host_allowed(host), "{host}");
    }
    for host in ["evil.example", "evil.example:8808", "localhost:abc", "[::1", ""] {
        assert!(!config.host_allowed(host), "{host}");
    }
    assert!(server("0.0.0.0:8808", &[], &[]).host_allowed("evil.example"));
}

#[test]
fn one_host_per_request() {
    let origin_form: Uri = "/mcp".parse().unwrap();
    let single = headers(&[("host", "127.0.0.1:8808")]);
    assert_eq!(check_target(&origin_form, &single), Ok(()));
    assert_eq!(check_target(&origin_form, &HeaderMap::new()), Ok(()), "a missing Host is the Host check's");
    let mut repeated = single.clone();
    repeated.append(header::HOST, HeaderValue::from_static("evil.example"));
    assert_eq!(check_target(&origin_form, &repeated), Err(Refusal::RepeatedHost));
    assert_eq!(status(Refusal::RepeatedHost), StatusCode::BAD_REQUEST);

    let same: Uri = "http://127.0.0.1:8808/mcp".parse().unwrap();
    assert_eq!(check_target(&same, &single), Ok(()), "an absolute form naming the Host");
    let upper: Uri = "http://LOCALHOST:8808/mcp".parse().unwrap();
    assert_eq!(check_target(&upper, &headers(&[("host", "localhost:8808")])), Ok(()), "case-insensitive");
    let elsewhere: Uri = "http://evil.example/mcp".parse().unwrap();
    let misdirected = check_target(&elsewhere, &single);
    assert_eq!(misdirected, Err(Refusal::MisdirectedTarget("http://evil.example/mcp".into())));
    assert_eq!(check_target(&elsewhere, &HeaderMap::new()), Err(Refusal::MisdirectedTarget(elsewhere.to_string())));
    assert_eq!(status(Refusal::MisdirectedTarget(String::new())), StatusCode::MISDIRECTED_REQUEST);
}
