//! The `[auth]` section (who the agents are) and `[server] public_url` (the URL agents use, which is
//! the resource identifier of the gateway as an OAuth 2.1 resource server, MCP 2025-11-25 authorization).
//!
//! Rules:
//! - No `[auth]` section: every agent is `anonymous`. An `[auth]` section must say how agents authenticate
//!   (`api_keys`, `jwt`) or explicitly allow anonymous agents (`anonymous = true`); an empty one is a mistake.
//! - API keys are stored as SHA-256 digests (64 hex digits); the keys themselves never appear in the file. Two
//!   entries with the same digest are refused (one key would have two identities).
//! - `[auth.jwt]`: `issuer` is compared with the `iss` claim exactly as written, so it is kept verbatim; exactly
//!   one of `jwks_url` and `jwks_file`; a JWKS URL must be https unless its host is loopback (keys fetched in
//!   the clear could be replaced on the way); `audiences` left out means "at each endpoint, its own
//!   resource identifier", worked out from `public_url` when the gateway is assembled (it may still change
//!   through `SWITCHYARD_PUBLIC_URL`); configured audiences are accepted at every endpoint;
//!   `authorization_servers` defaults to `[issuer]`.
//! - `admin_principals` (who may read the operator's console) lists names and `group:NAME` entries; `*` and
//!   `anonymous` are refused, as the console must never be open to callers without credentials. With an `[auth]`
//!   section the console asks every caller for an administrator's credential, callers on this machine included,
//!   unless `console_loopback = true` (default false) exempts those that send no credential.
//! - One principal namespace: a JWT's principal is `principal_prefix` followed by its
//!   principal claim, the prefix defaulting to the issuer and `#` (`https://login.example.com/realms/a#alice`;
//!   an issuer has no fragment, so `#` cannot be part of it). An API key's principal may not be `anonymous` (the
//!   agents without credentials) nor start with the JWT prefix, and `principal_prefix = ""` (bare claims) is
//!   refused beside API keys, so no token can take a key's sessions, idempotent calls or OAuth tokens. A prefix
//!   may not start with `group:`, which policies read as a group.
//! - The rules that join `[auth]` with the backends, the policies and the final listen address are
//!   `principals.rs`'s.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;

use super::fields::{Fault, KeyPath, list, optional, quoted, required};
use super::policy::{PolicySubject, parse_subject};
use super::values::{
    DURATION_EXPECTED, Expected, MAX_PRINCIPAL_NAME, PRINCIPAL_EXPECTED, duration_text, parse_duration, parse_http_url,
    parse_principal,
};

/// The default allowance for clock skew when checking `exp` and `nbf`.
pub const DEFAULT_JWT_LEEWAY: Duration = Duration::from_secs(60);
/// The largest accepted leeway: more would keep expired tokens alive for long.
pub const MAX_JWT_LEEWAY: Duration = Duration::from_secs(600);
/// The principal of agents without credentials (the configuration names it, but may not import the MCP
/// vocabulary where the gateway defines it; a test there keeps both equal).
pub const ANONYMOUS: &str = "anonymous";

/// The validated `[auth]` section; the default (no section) serves anonymous agents on loopback only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    pub anonymous: AnonymousAgents,
    /// Who may read the operator's console (members of the group `admin` always may).
    pub admin_principals: Vec<PolicySubject>,
    /// `[auth] console_loopback`: callers on this machine that send no credential may read the console too.
    pub console_loopback: bool,
    pub api_keys: Vec<ApiKeyConfig>,
    pub jwt: Option<JwtConfig>,
}

/// Whether agents without credentials are served, as the principal `anonymous`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AnonymousAgents {
    /// No `[auth]` section: served, but `serve` refuses a listen address other machines can reach.
    #[default]
    LoopbackOnly,
    /// `[auth] anonymous = true`: served on any address, on purpose.
    Allowed,
    /// Every agent must present a valid credential.
    Refused,
}

impl AuthConfig {
    /// Whether some agent credential is configured (API keys or JWTs).
    pub fn has_credentials(&self) -> bool {
        !self.api_keys.is_empty() || self.jwt.is_some()
    }

    /// Whether an agent without credentials is let in as `anonymous`.
    pub fn serves_anonymous(&self) -> bool {
        self.anonymous != AnonymousAgents::Refused
    }

    /// Whether `anonymous` is one user (no `[auth]`: loopback only) rather than every agent without credentials,
    /// and so may authorize `authorization_code` backends for itself.
    pub fn anonymous_is_one_user(&self) -> bool {
        self.anonymous == AnonymousAgents::LoopbackOnly
    }

    /// Whether some agent could present itself as `name`.
    pub(super) fn names_principal(&self, name: &str) -> bool {
        let anonymous = name == ANONYMOUS && self.serves_anonymous();
        let keyed = self.api_keys.iter().any(|key| key.principal == name);
        anonymous || keyed || self.jwt.as_ref().is_some_and(|jwt| jwt.names_principal(name))
    }
}

/// One `[[auth.api_keys]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyConfig {
    pub principal: String,
    /// SHA-256 of the key as the agent sends it after `Bearer `.
    pub sha256: [u8; 32],
    pub groups: Vec<String>,
    /// `expires`: the Unix second from which the key is refused.
    pub expires: Option<u64>,
}

/// The validated `[auth.jwt]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// Exactly as written: compared with `iss` byte for byte.
    pub issuer: String,
    /// Accepted `aud` values at every endpoint; empty means the default (each endpoint's own resource).
    pub audiences: Vec<String>,
    pub jwks: JwksLocation,
    pub principal_claim: String,
    /// What precedes the principal claim in the principal's name: `principal_prefix`, by default the issuer
    /// and `#`.
    pub principal_prefix: String,
    pub groups_claim: Option<String>,
    pub scopes_supported: Vec<String>,
    pub required_scopes: Vec<String>,
    pub authorization_servers: Vec<String>,
    pub leeway: Duration,
}

impl JwtConfig {
    /// Whether `name` has the form of this issuer's principals (`principal_prefix` and something more).
    pub fn names_principal(&self, name: &str) -> bool {
        name.strip_prefix(&self.principal_prefix).is_some_and(|claim| !claim.is_empty())
    }
}

/// Where the signing keys of the issuer are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksLocation {
    Url(Url),
    File(PathBuf),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAuth {
    anonymous: bool,
    admin_principals: Vec<String>,
    console_loopback: bool,
    api_keys: Vec<RawApiKey>,
    jwt: Option<RawJwt>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawApiKey {
    principal: Option<String>,
    sha256: Option<String>,
    groups: Vec<String>,
    expires: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawJwt {
    issuer: Option<String>,
    audiences: Option<Vec<String>>,
    jwks_url: Option<String>,
    jwks_file: Option<String>,
    principal_claim: Option<String>,
    principal_prefix: Option<String>,
    groups_claim: Option<String>,
    scopes_supported: Vec<String>,
    required_scopes: Vec<String>,
    authorization_servers: Option<Vec<String>>,
    #[serde(deserialize_with = "duration_text")]
    leeway: Option<String>,
}

/// Validates the `[auth]` section (`None` when the file has none).
pub(super) fn build(raw: Option<&RawAuth>) -> Result<AuthConfig, Fault> {
    let Some(raw) = raw else {
        return Ok(AuthConfig::default());
    };
    let section = KeyPath::root().key("auth");
    let keys = section.key("api_keys");
    let api_keys = raw
        .api_keys
        .iter()
        .enumerate()
        .map(|(index, key)| build_api_key(&keys.index(index), key))
        .collect::<Result<Vec<_>, _>>()?;
    check_unique_digests(&keys, &api_keys)?;
    let jwt = raw.jwt.as_ref().map(|jwt| build_jwt(&section.key("jwt"), jwt)).transpose()?;
    check_namespace(&section, &api_keys, jwt.as_ref())?;
    let anonymous = if raw.anonymous { AnonymousAgents::Allowed } else { AnonymousAgents::Refused };
    let admin_principals = list(&section.key("admin_principals"), &raw.admin_principals, parse_admin)?;
    let auth = AuthConfig { anonymous, admin_principals, console_loopback: raw.console_loopback, api_keys, jwt };
    if !raw.anonymous && !auth.has_credentials() {
        return Err(Fault::invalid(
            &section,
            None,
            "at least one of `[[auth.api_keys]]`, `[auth.jwt]` or `anonymous = true`".into(),
        ));
    }
    Ok(auth)
}

fn build_api_key(entry: &KeyPath, raw: &RawApiKey) -> Result<ApiKeyConfig, Fault> {
    Ok(ApiKeyConfig {
        principal: required(&entry.key("principal"), raw.principal.as_deref(), parse_principal, PRINCIPAL_EXPECTED)?,
        sha256: required(&entry.key("sha256"), raw.sha256.as_deref(), parse_sha256, SHA256_EXPECTED)?,
        groups: list(&entry.key("groups"), &raw.groups, parse_principal)?,
        expires: raw
            .expires
            .as_deref()
            .map(|text| {
                let key = entry.key("expires");
                parse_timestamp(text).ok_or_else(|| Fault::invalid(&key, Some(quoted(text)), TIMESTAMP_EXPECTED.into()))
            })
            .transpose()?,
    })
}

const TIMESTAMP_EXPECTED: &str = "an RFC 3339 time such as \"2027-03-01T00:00:00Z\" (UTC `Z` or an offset `+01:00`)";

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` as a Unix second (a fraction is dropped).
fn parse_timestamp(text: &str) -> Option<u64> {
    let number = |range: std::ops::Range<usize>| -> Option<u64> {
        let digits = text.get(range)?;
        digits.bytes().all(|byte| byte.is_ascii_digit()).then(|| digits.parse().ok())?
    };
    let bytes = text.as_bytes();
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if bytes.len() < 20 || !separators.iter().all(|(at, byte)| bytes[*at] == *byte) || !matches!(bytes[10], b'T' | b't')
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        rest = &fraction[digits..];
        if digits == 0 {
            return None;
        }
    }
    let offset: i64 = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let minutes = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            let all_digits = [h1, h2, m1, m2].iter().all(|byte| byte.is_ascii_digit());
            if !all_digits || hours > 23 || minutes > 59 {
                return None;
            }
            if *sign == b'+' { -(hours * 3600 + minutes * 60) } else { hours * 3600 + minutes * 60 }
        }
        _ => return None,
    };
    let days = crate::civil_date::days_from_civil(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?)?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let local = i64::try_from(days * 86_400 + hour * 3600 + minute * 60 + second).ok()?;
    u64::try_from(local + offset).ok()
}

fn check_unique_digests(keys: &KeyPath, api_keys: &[ApiKeyConfig]) -> Result<(), Fault> {
    for (index, key) in api_keys.iter().enumerate() {
        if let Some(first) = api_keys[..index].iter().position(|earlier| earlier.sha256 == key.sha256) {
            return Err(Fault::invalid(
                &keys.index(index).key("sha256"),
                None,
                format!("the digest of a key no other entry has (auth.api_keys[{first}] has the same one)").into(),
            ));
        }
    }
    Ok(())
}

/// API-key principals never share a name with agents without credentials nor with any JWT principal.
fn check_namespace(section: &KeyPath, api_keys: &[ApiKeyConfig], jwt: Option<&JwtConfig>) -> Result<(), Fault> {
    let keys = section.key("api_keys");
    for (index, key) in api_keys.iter().enumerate() {
        let entry = keys.index(index).key("principal");
        if key.principal == ANONYMOUS {
            return Err(Fault::invalid(&entry, Some(quoted(&key.principal)), ANONYMOUS_KEY_EXPECTED.into()));
        }
        match jwt {
            Some(jwt) if jwt.principal_prefix.is_empty() => {
                return Err(Fault::invalid(
                    &section.key("jwt").key("principal_prefix"),
                    Some(quoted("")),
                    BARE_PREFIX_EXPECTED.into(),
                ));
            }
            Some(jwt) if key.principal.starts_with(&jwt.principal_prefix) => {
                let expected = format!(
                    "a name that does not start with {:?}, the prefix of JWT principals (`auth.jwt.principal_prefix`)",
                    jwt.principal_prefix
                );
                return Err(Fault::invalid(&entry, Some(quoted(&key.principal)), expected.into()));
            }
            _ => {}
        }
    }
    Ok(())
}

fn build_jwt(section: &KeyPath, raw: &RawJwt) -> Result<JwtConfig, Fault> {
    let issuer = required(&section.key("issuer"), raw.issuer.as_deref(), parse_issuer, ISSUER_EXPECTED)?;
    let audiences_key = section.key("audiences");
    let audiences = match &raw.audiences {
        Some(audiences) if audiences.is_empty() => {
            return Err(Fault::invalid(&audiences_key, Some("[]".into()), AUDIENCES_EXPECTED.into()));
        }
        Some(audiences) => list(&audiences_key, audiences, parse_audience)?,
        None => Vec::new(),
    };
    let authorization_servers = match &raw.authorization_servers {
        Some(servers) if servers.is_empty() => {
            let expected = "at least one authorization server URL (leave the key out for [issuer])";
            return Err(Fault::invalid(&section.key("authorization_servers"), Some("[]".into()), expected.into()));
        }
        Some(servers) => list(&section.key("authorization_servers"), servers, parse_issuer)?,
        None => vec![issuer.clone()],
    };
    let principal_prefix = optional(&section.key("principal_prefix"), raw.principal_prefix.as_deref(), parse_prefix)?
        .unwrap_or_else(|| format!("{issuer}#"));
    Ok(JwtConfig {
        issuer,
        audiences,
        jwks: build_jwks_location(section, raw)?,
        principal_claim: optional(&section.key("principal_claim"), raw.principal_claim.as_deref(), parse_claim_name)?
            .unwrap_or_else(|| "sub".to_owned()),
        principal_prefix,
        groups_claim: optional(&section.key("groups_claim"), raw.groups_claim.as_deref(), parse_claim_name)?,
        scopes_supported: list(&section.key("scopes_supported"), &raw.scopes_supported, parse_scope)?,
        required_scopes: list(&section.key("required_scopes"), &raw.required_scopes, parse_scope)?,
        authorization_servers,
        leeway: optional(&section.key("leeway"), raw.leeway.as_deref(), parse_leeway)?.unwrap_or(DEFAULT_JWT_LEEWAY),
    })
}

fn build_jwks_location(section: &KeyPath, raw: &RawJwt) -> Result<JwksLocation, Fault> {
    let url_key = section.key("jwks_url");
    let file_key = section.key("jwks_file");
    match (raw.jwks_url.as_deref(), raw.jwks_file.as_deref()) {
        (Some(_), Some(file)) => {
            Err(Fault::invalid(&file_key, Some(quoted(file)), "either `jwks_url` or `jwks_file`, not both".into()))
        }
        (Some(url), None) => parse_jwks_url(url)
            .map(JwksLocation::Url)
            .map_err(|expected| Fault::invalid(&url_key, Some(quoted(url)), expected)),
        (None, Some(file)) => parse_path(file)
            .map(JwksLocation::File)
            .map_err(|expected| Fault::invalid(&file_key, Some(quoted(file)), expected)),
        (None, None) => Err(Fault::invalid(
            &url_key,
            None,
            "the issuer's JWKS URL (or `jwks_file` with a local copy); one of them is required".into(),
        )),
    }
}

const PREFIX_EXPECTED: &str = "at most 256 characters without control characters, not starting with \"group:\" \
                               (such as \"sso:\"; \"\" keeps the bare claim)";
const ANONYMOUS_KEY_EXPECTED: &str =
    "a name other than \"anonymous\", the principal of every agent that sends no credential";
const BARE_PREFIX_EXPECTED: &str = "a non-empty prefix such as \"sso:\" while `[[auth.api_keys]]` are configured (a \
                                    bare JWT claim could take an API key's name, and with it its sessions and calls)";
const SHA256_EXPECTED: &str =
    "the SHA-256 digest of the key as 64 hex digits (`switchyard keys new` prints the line to paste)";
const ISSUER_EXPECTED: &str = "an http or https URL such as \"https://login.example.com/realms/agents\"";
const AUDIENCES_EXPECTED: &str =
    "at least one audience (leave the key out to accept the gateway's own URLs, from `server.public_url`)";

const ADMIN_EXPECTED: &str = "a principal name or \"group:NAME\" (not \"*\" nor \"anonymous\": the console is \
                              never open to agents without credentials)";

/// An `admin_principals` entry: a principal or a group, never everyone or the credential-less `anonymous`.
fn parse_admin(text: &str) -> Result<PolicySubject, Expected> {
    match parse_subject(text) {
        Ok(PolicySubject::Anyone) => Err(ADMIN_EXPECTED.into()),
        Ok(PolicySubject::Principal(name)) if name == ANONYMOUS => Err(ADMIN_EXPECTED.into()),
        Ok(subject) => Ok(subject),
        Err(_) => Err(ADMIN_EXPECTED.into()),
    }
}

/// `principal_prefix`: may be empty, and never makes JWT principals read as groups in policies.
fn parse_prefix(text: &str) -> Result<String, Expected> {
    let valid = text.chars().count() <= MAX_PRINCIPAL_NAME
        && !text.chars().any(char::is_control)
        && !text.starts_with("group:");
    valid.then(|| text.to_owned()).ok_or_else(|| PREFIX_EXPECTED.into())
}

fn parse_sha256(text: &str) -> Result<[u8; 32], Expected> {
    let mut digest = [0u8; 32];
    if text.len() != 64 {
        return Err(SHA256_EXPECTED.into());
    }
    for (byte, pair) in digest.iter_mut().zip(text.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| Expected::from(SHA256_EXPECTED))?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| Expected::from(SHA256_EXPECTED))?;
    }
    Ok(digest)
}

/// Issuers and authorization servers are compared as written, so only their syntax is checked.
fn parse_issuer(text: &str) -> Result<String, Expected> {
    parse_http_url(text, "https://login.example.com/realms/agents").map(|_| text.to_owned())
}

fn parse_jwks_url(text: &str) -> Result<Url, Expected> {
    let url = parse_http_url(text, "https://login.example.com/.well-known/jwks.json")?;
    let loopback = url.host_str().is_some_and(|host| {
        host == "localhost" || host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    });
    if url.scheme() != "https" && !loopback {
        return Err("an https URL (signing keys fetched over plain http could be replaced on the way; plain http \
                    is accepted only for loopback hosts)"
            .into());
    }
    Ok(url)
}

fn parse_path(text: &str) -> Result<PathBuf, Expected> {
    if text.trim().is_empty() {
        return Err("a non-empty path".into());
    }
    Ok(PathBuf::from(text))
}

fn parse_audience(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && !text.chars().any(char::is_control);
    valid.then(|| text.to_owned()).ok_or_else(|| "a non-empty audience such as \"https://gw.example.com/mcp\"".into())
}

fn parse_claim_name(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && !text.chars().any(|c| c.is_control() || c.is_whitespace());
    valid.then(|| text.to_owned()).ok_or_else(|| {
        "a claim name such as \"groups\" (a dotted path such as \"realm_access.roles\" reaches into objects)".into()
    })
}

/// An OAuth scope token (RFC 6749 §3.3: visible ASCII except `"` and `\`).
fn parse_scope(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && text.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e));
    valid.then(|| text.to_owned()).ok_or_else(|| "a scope such as \"mcp:tools\" (visible ASCII, no blanks)".into())
}

fn parse_leeway(text: &str) -> Result<Duration, Expected> {
    parse_duration(text)
        .ok()
        .filter(|leeway| *leeway <= MAX_JWT_LEEWAY)
        .ok_or_else(|| Expected(format!("{DURATION_EXPECTED}, at most 10m")))
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
