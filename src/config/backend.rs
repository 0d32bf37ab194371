//! One `[[backends]]` entry: which MCP server to reach, how, under which exposed names, and with which headers
//! and credential.
//!
//! Rules:
//! - Backend names are 1–32 characters of `[a-z0-9-]` (they appear in URLs and in exposed names).
//! - URLs come only from here: http or https, never with `user:pass@` (secrets belong in `credential`, where
//!   they are kept out of logs).
//! - A prefix may only use the characters exposed names allow (`[A-Za-z0-9_-]`) and must leave room for a name
//!   within 64 characters; otherwise every tool of the backend would be withheld.
//! - `tools.allow` / `tools.deny` match the backend's own (bare) tool names, before the prefix is added, so
//!   renaming a prefix never changes what is exposed.
//! - `headers` may not set what the MCP client manages itself (framing, content negotiation, sessions), nor the
//!   credential's header.
//! - `transport` decides which keys apply: `url` (required), `headers`, `credential` and `oauth` for "mcp" and "sse";
//!   `command` (required) and the other keys of [`super::stdio`] for "stdio"; `spec` (required), `url` (optional),
//!   `headers`, `credential`, `oauth` and the other keys of [`super::openapi`] for "openapi". A key of another kind is
//!   refused.
//! - `era` ("auto", the default, "modern" or "legacy") says which MCP protocol era the gateway speaks to the
//!   backend; "sse" is the 2024-11-05 transport, so only "auto" and "legacy" make sense there.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use reqwest::Url;
use serde::Deserialize;

use super::catalog::CatalogMode;
use super::credential::{self, BackendCredential, CredentialTarget, RawCredential};
use super::fields::{Fault, KeyPath, list, optional, quoted, refuse_set, required};
use super::oauth::{self, OAuthConfig, RawOAuth};
use super::openapi::{self, OpenApiConfig, OpenApiKeys, RawOperations};
use super::pins::{self, PinConfig, PinKeys, PinMode, PinNew, ScreenMode};
use super::stdio::{self, RawEnvValue, StdioConfig, StdioKeys, StdioSessions};
use super::values::{Expected, SizeInput, duration_text, parse_header_name, parse_positive_duration};
use crate::glob::Glob;

pub const DEFAULT_BACKEND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a backend may go without an exchange before the gateway probes it.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(30);
/// Longest backend name.
pub const MAX_BACKEND_NAME: usize = 32;
/// Longest exposed tool or prompt name: LLM provider APIs reject longer ones.
pub const MAX_EXPOSED_NAME: usize = 64;

/// How the gateway talks to a backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Streamable HTTP MCP (protocol 2025-11-25).
    #[default]
    Mcp,
    /// A local process spoken to over stdin/stdout (newline-delimited JSON-RPC).
    Stdio,
    /// The 2024-11-05 HTTP+SSE transport.
    Sse,
    /// A REST API described by an OpenAPI document ([`super::openapi`]).
    Openapi,
}

/// Which MCP protocol era the gateway speaks to a backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolEra {
    /// Ask the backend with `server/discover` (2026-07-28); fall back to `initialize` (2025-11-25 and earlier).
    #[default]
    Auto,
    /// 2026-07-28 only.
    Modern,
    /// `initialize` only, never a probe.
    Legacy,
}

/// Who runs a backend's tool calls as tasks (MCP tasks; docs/tasks.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// The gateway: any tool may run as a task, whatever the backend implements.
    #[default]
    Gateway,
    /// The backend's own tasks, relayed with their ids sealed by the gateway.
    Passthrough,
    /// No tasks: the tools are offered without task support.
    Off,
}

/// Where a backend is reached: a URL (transports "mcp" and "sse") or a process started from a command ("stdio").
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    Url(Url),
    Process(StdioConfig),
    /// A REST API: its document, base URL and idempotency rules.
    OpenApi(Box<OpenApiConfig>),
}

/// A validated `[[backends]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendConfig {
    pub name: String,
    pub endpoint: Endpoint,
    pub transport: Transport,
    /// Which protocol era the gateway speaks to it.
    pub era: ProtocolEra,
    /// Prepended to the backend's tool and prompt names at `/mcp` (`""` exposes bare names).
    pub prefix: String,
    /// Prepended to the backend's resource URIs and URI templates at `/mcp` (for URIs two backends share).
    pub resource_prefix: Option<String>,
    /// Deadline of one exchange with the backend.
    pub timeout: Duration,
    /// How long the backend may go without an exchange before the gateway probes it (docs/operations.md,
    /// *Backend health*).
    pub health_interval: Duration,
    pub tools: ToolFilter,
    /// Extra headers sent on every request to the backend.
    pub headers: HeaderMap,
    pub credential: Option<BackendCredential>,
    /// `[backends.oauth]`: the gateway obtains the backend's tokens as an OAuth client.
    pub oauth: Option<OAuthConfig>,
    /// `pin`, `pin_new`, `screen`, `refresh`, `max_description`.
    pub pins: PinConfig,
    /// `catalog_mode`: how `/mcp/<backend>` offers its tools (`None`: as `[catalog] mode` says).
    pub catalog_mode: Option<CatalogMode>,
    /// `tasks`: who runs its tool calls as tasks.
    pub tasks: TaskMode,
}

impl BackendConfig {
    /// The URL of an HTTP backend (`None` for a stdio one).
    #[cfg(test)]
    pub fn url(&self) -> Option<&Url> {
        match &self.endpoint {
            Endpoint::Url(url) => Some(url),
            Endpoint::Process(_) | Endpoint::OpenApi(_) => None,
        }
    }
}

/// Which of a backend's tools are exposed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Empty means every tool.
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
}

impl ToolFilter {
    /// Whether the tool with this bare name is exposed: it matches `allow` (or `allow` is empty) and no `deny`.
    pub fn exposes(&self, bare: &str) -> bool {
        let allowed = self.allow.is_empty() || self.allow.iter().any(|glob| glob.matches(bare));
        allowed && !self.deny.iter().any(|glob| glob.matches(bare))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawBackend {
    name: Option<String>,
    url: Option<String>,
    transport: Transport,
    era: Option<ProtocolEra>,
    prefix: Option<String>,
    resource_prefix: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    timeout: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    health_interval: Option<String>,
    tools: RawTools,
    headers: BTreeMap<String, String>,
    credential: Option<RawCredential>,
    oauth: Option<RawOAuth>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, RawEnvValue>>,
    cwd: Option<String>,
    sessions: Option<StdioSessions>,
    #[serde(deserialize_with = "duration_text")]
    idle_timeout: Option<String>,
    max_processes: Option<i64>,
    pin: Option<PinMode>,
    pin_new: Option<PinNew>,
    screen: Option<ScreenMode>,
    #[serde(deserialize_with = "duration_text")]
    refresh: Option<String>,
    max_description: Option<SizeInput>,
    catalog_mode: Option<CatalogMode>,
    tasks: TaskMode,
    spec: Option<String>,
    operations: Option<RawOperations>,
    idempotency_header: Option<String>,
    idempotent_operations: Option<Vec<String>>,
    idempotent_retries: Option<i64>,
    retry_idempotent_methods: Option<bool>,
}

impl RawBackend {
    fn openapi_keys(&self) -> OpenApiKeys<'_> {
        OpenApiKeys {
            spec: self.spec.as_deref(),
            operations: self.operations.as_ref(),
            idempotency_header: self.idempotency_header.as_deref(),
            idempotent_operations: self.idempotent_operations.as_deref(),
            idempotent_retries: self.idempotent_retries,
            retry_idempotent_methods: self.retry_idempotent_methods,
        }
    }

    fn stdio_keys(&self) -> StdioKeys<'_> {
        StdioKeys {
            command: self.command.as_deref(),
            args: self.args.as_deref(),
            env: self.env.as_ref(),
            cwd: self.cwd.as_deref(),
            sessions: self.sessions,
            idle_timeout: self.idle_timeout.as_deref(),
            max_processes: self.max_processes,
        }
    }

    fn pin_keys(&self) -> PinKeys<'_> {
        PinKeys {
            pin: self.pin,
            pin_new: self.pin_new,
            screen: self.screen,
            refresh: self.refresh.as_deref(),
            max_description: self.max_description.as_ref(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawTools {
    allow: Vec<String>,
    deny: Vec<String>,
}

/// Validates `backends[index]`, resolving its credential from `env` or the file system.
pub(super) fn build(index: usize, raw: &RawBackend, env: &HashMap<String, String>) -> Result<BackendConfig, Fault> {
    let entry = KeyPath::root().key("backends").index(index);
    let name = required(&entry.key("name"), raw.name.as_deref(), parse_backend_name, NAME_EXPECTED)?;
    let endpoint = build_endpoint(&entry, &name, raw, env)?;
    let era = raw.era.unwrap_or_default();
    if raw.transport == Transport::Sse && era == ProtocolEra::Modern {
        return Err(Fault::invalid(
            &entry.key("era"),
            Some(quoted("modern")),
            "\"auto\" or \"legacy\": transport = \"sse\" is the 2024-11-05 transport, which 2026-07-28 servers do not \
             speak"
                .into(),
        ));
    }
    if raw.tasks == TaskMode::Passthrough && matches!(endpoint, Endpoint::OpenApi(_)) {
        return Err(Fault::invalid(
            &entry.key("tasks"),
            Some(quoted("passthrough")),
            "\"gateway\" or \"off\": a REST API described by OpenAPI has no tasks of its own to pass through".into(),
        ));
    }
    let prefix =
        optional(&entry.key("prefix"), raw.prefix.as_deref(), parse_prefix)?.unwrap_or_else(|| format!("{name}__"));
    let resource_prefix =
        optional(&entry.key("resource_prefix"), raw.resource_prefix.as_deref(), parse_resource_prefix)?;
    let timeout = optional(&entry.key("timeout"), raw.timeout.as_deref(), parse_positive_duration)?
        .unwrap_or(DEFAULT_BACKEND_TIMEOUT);
    let health_interval =
        optional(&entry.key("health_interval"), raw.health_interval.as_deref(), parse_positive_duration)?
            .unwrap_or(DEFAULT_HEALTH_INTERVAL);
    let tools = build_tools(&entry.key("tools"), &raw.tools)?;
    let headers = build_headers(&entry.key("headers"), &raw.headers)?;
    let credential = raw
        .credential
        .as_ref()
        .map(|credential| credential::resolve(&entry.key("credential"), &name, credential, env))
        .transpose()?;
    check_credential_target(&entry, raw.transport, credential.as_ref(), &headers)?;
    let oauth = raw.oauth.as_ref().map(|oauth| oauth::build(&entry.key("oauth"), &name, oauth, env)).transpose()?;
    if oauth.is_some() {
        oauth::check_authorization_header(&entry, credential.as_ref().and_then(BackendCredential::header), &headers)?;
    }
    let pins = pins::build(&entry, &raw.pin_keys())?;
    Ok(BackendConfig {
        name,
        endpoint,
        transport: raw.transport,
        era,
        prefix,
        resource_prefix,
        timeout,
        health_interval,
        tools,
        headers,
        credential,
        oauth,
        pins,
        catalog_mode: raw.catalog_mode,
        tasks: raw.tasks,
    })
}

fn build_endpoint(
    entry: &KeyPath,
    name: &str,
    raw: &RawBackend,
    env: &HashMap<String, String>,
) -> Result<Endpoint, Fault> {
    if raw.transport == Transport::Stdio {
        openapi::refuse_keys(entry, &raw.openapi_keys())?;
        let http_only = [
            ("url", raw.url.is_some()),
            ("headers", !raw.headers.is_empty()),
            ("credential", raw.credential.is_some()),
            ("oauth", raw.oauth.is_some()),
        ];
        let why = "no such key on this backend: transport = \"stdio\" starts a process from `command`";
        refuse_set(entry, &http_only, why)?;
        return stdio::build(entry, name, &raw.stdio_keys(), env).map(Endpoint::Process);
    }
    stdio::refuse_keys(entry, &raw.stdio_keys())?;
    if raw.transport == Transport::Openapi {
        let url = optional(&entry.key("url"), raw.url.as_deref(), parse_backend_url)?;
        return openapi::build(entry, &raw.openapi_keys(), url, raw.oauth.is_some())
            .map(|api| Endpoint::OpenApi(Box::new(api)));
    }
    openapi::refuse_keys(entry, &raw.openapi_keys())?;
    let url = required(
        &entry.key("url"),
        raw.url.as_deref(),
        parse_backend_url,
        "an http or https URL such as \"http://127.0.0.1:9000/mcp\"",
    )?;
    Ok(Endpoint::Url(url))
}

pub(super) const NAME_EXPECTED: &str = "1–32 characters of a-z, 0-9 and '-'";

fn parse_backend_name(text: &str) -> Result<String, Expected> {
    let valid = (1..=MAX_BACKEND_NAME).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    valid.then(|| text.to_owned()).ok_or_else(|| NAME_EXPECTED.into())
}

fn parse_backend_url(text: &str) -> Result<Url, Expected> {
    let url = Url::parse(text)
        .map_err(|error| Expected(format!("an http or https URL such as \"http://127.0.0.1:9000/mcp\" ({error})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("an http or https URL, not a {} URL", url.scheme()).into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a URL without credentials (`user:pass@`); put secrets in `credential` instead".into());
    }
    Ok(url)
}

/// A resource prefix is put in front of URIs, so it must keep them URIs: 1–64 visible ASCII characters, no
/// whitespace, e.g. `"gh+"` or `"github:"`.
fn parse_resource_prefix(text: &str) -> Result<String, Expected> {
    let valid = (1..=MAX_EXPOSED_NAME).contains(&text.len()) && text.bytes().all(|b| (0x21..=0x7e).contains(&b));
    valid.then(|| text.to_owned()).ok_or_else(|| "1–64 visible ASCII characters such as \"github+\"".into())
}

fn parse_prefix(text: &str) -> Result<String, Expected> {
    let valid =
        text.len() < MAX_EXPOSED_NAME && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then(|| text.to_owned()).ok_or_else(|| {
        "a prefix of at most 63 characters of A-Z, a-z, 0-9, '_' and '-' (the only characters exposed names may \
         use), or \"\" for bare names"
            .into()
    })
}

fn build_tools(key: &KeyPath, raw: &RawTools) -> Result<ToolFilter, Fault> {
    Ok(ToolFilter {
        allow: list(&key.key("allow"), &raw.allow, parse_glob)?,
        deny: list(&key.key("deny"), &raw.deny, parse_glob)?,
    })
}

fn parse_glob(text: &str) -> Result<Glob, Expected> {
    Glob::new(text).map_err(|_| {
        "a non-empty glob pattern over the backend's tool names (`*` matches any run of characters, `?` one)".into()
    })
}

fn build_headers(key: &KeyPath, raw: &BTreeMap<String, String>) -> Result<HeaderMap, Fault> {
    let mut headers = HeaderMap::with_capacity(raw.len());
    for (name, value) in raw {
        let key = key.key(name);
        let header = parse_header_name(name).map_err(|expected| Fault::invalid(&key, Some(quoted(name)), expected))?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            Fault::invalid(&key, Some(quoted(value)), "a header value of visible ASCII, spaces and tabs".into())
        })?;
        if headers.insert(header, value).is_some() {
            return Err(Fault::invalid(
                &key,
                Some(quoted(name)),
                "a header set only once (header names ignore case)".into(),
            ));
        }
    }
    Ok(headers)
}

/// A credential's header must not also be in `headers`; a `scheme` names a scheme of an OpenAPI document, so
/// only an openapi backend has one.
fn check_credential_target(
    entry: &KeyPath,
    transport: Transport,
    credential: Option<&BackendCredential>,
    headers: &HeaderMap,
) -> Result<(), Fault> {
    match credential.map(|credential| &credential.target) {
        Some(CredentialTarget::Header(header)) if headers.contains_key(header) => Err(Fault::invalid(
            &entry.key("credential").key("header"),
            Some(quoted(header.as_str())),
            "a header not also set in `headers` (the credential would be ambiguous)".into(),
        )),
        Some(CredentialTarget::Scheme(scheme)) if transport != Transport::Openapi => Err(Fault::invalid(
            &entry.key("credential").key("scheme"),
            Some(quoted(scheme)),
            "`header` on this backend: `scheme` names a security scheme of an OpenAPI document, so it is only for \
             transport = \"openapi\""
                .into(),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
        let globs = |patterns: &[&str]| patterns.iter().map(|pattern| Glob::new(pattern).expect("valid")).collect();
        ToolFilter { allow: globs(allow), deny: globs(deny) }
    }

    #[test]
    fn empty_allow_exposes_everything_not_denied() {
        let tools = filter(&[], &["delete_*"]);
        assert!(tools.exposes("get_issue"));
        assert!(!tools.exposes("delete_repo"));
        assert!(ToolFilter::default().exposes("anything"));
    }

    #[test]
    fn allow_restricts_and_deny_wins() {
        let tools = filter(&["get_*", "search"], &["get_secret*"]);
        assert!(tools.exposes("get_issue"));
        assert!(tools.exposes("search"));
        assert!(!tools.exposes("search_all"));
        assert!(!tools.exposes("get_secret_key"));
        assert!(!tools.exposes("create_issue"));
    }

    #[test]
    fn names_follow_the_rule() {
        assert!(parse_backend_name("github").is_ok());
        assert!(parse_backend_name("a-1").is_ok());
        assert!(parse_backend_name(&"a".repeat(32)).is_ok());
        for bad in ["", "GitHub", "git_hub", "git.hub", "gït", &"a".repeat(33)] {
            assert_eq!(parse_backend_name(bad), Err(NAME_EXPECTED.into()), "{bad:?}");
        }
    }

    #[test]
    fn urls_are_http_without_credentials() {
        assert!(parse_backend_url("http://127.0.0.1:9000/mcp").is_ok());
        assert!(parse_backend_url("https://api.example.com/mcp").is_ok());
        assert!(parse_backend_url("ftp://example.com/").is_err_and(|e| e.0.contains("not a ftp URL")));
        assert!(parse_backend_url("file:///etc/passwd").is_err());
        assert!(parse_backend_url("https://user:pw@example.com/").is_err_and(|e| e.0.contains("without credentials")));
        assert!(parse_backend_url("https://user@example.com/").is_err());
        assert!(parse_backend_url("not a url").is_err());
    }

    #[test]
    fn prefixes_keep_exposed_names_valid() {
        assert_eq!(parse_prefix(""), Ok(String::new()));
        assert!(parse_prefix("gh_").is_ok());
        assert!(parse_prefix(&"p".repeat(63)).is_ok());
        assert!(parse_prefix(&"p".repeat(64)).is_err());
        assert!(parse_prefix("gh.").is_err());
        assert!(parse_prefix("gh/").is_err());
    }

    #[test]
    fn reserved_and_invalid_header_names_are_refused() {
        assert!(parse_header_name("X-Team").is_ok());
        assert!(parse_header_name("Mcp-Session-Id").is_err());
        assert!(parse_header_name("Content-Type").is_err());
        assert!(parse_header_name("bad header").is_err());
    }
}
