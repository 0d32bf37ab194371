//! The `[server]` section: where the gateway listens, where it keeps its files, which browsers and `Host`
//! names it trusts, and how long and how many clients it serves; plus the `SWITCHYARD_<KEY>` environment
//! overrides of those keys (every key has one; a unit test holds the list to the parser's).
//!
//! Rules:
//! - One parser per key, shared by the file and the environment, so both accept exactly the same spellings.
//! - Timeouts are positive (a zero timeout would refuse every request); `max_connections` is 1 to 1 000 000.
//!   `max_connections_per_principal` left out follows `max_connections` (a quarter of it, after the overrides),
//!   so it is kept as configured and worked out by [`ServerConfig::connections_per_principal`];
//!   `max_revocations_per_owner` follows `max_revocations` the same way ([`ServerConfig::revocations_per_owner`]).
//! - An environment override replaces the file's value (lists are replaced, not merged); an empty variable is
//!   ignored, because shells and container runtimes often pass unset variables as empty ones.
//! - `allowed_origins` and `allowed_hosts` are validated globs, stored lowercased; how they admit a request (the
//!   loopback origins and names always, `Host` only on a loopback `listen`) is the front's admission rule.
//!   `cors_credentials` (default off) only adds `Access-Control-Allow-Credentials` to the answers those origins
//!   get; it admits no other origin.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;
use super::fields::{Count, EnvLookup, Fault, KeyPath, list, optional, optional_size};
use super::stdio::{DEFAULT_MAX_STDIO_PROCESSES, PROCESSES};
use super::values::{
    Expected, SIZE_EXPECTED, SizeInput, duration_text, listen_text, parse_bool, parse_byte_size, parse_duration,
    parse_listen, parse_positive_duration, parse_public_url,
};

/// The address served when nothing says otherwise: loopback only, so a first run exposes nothing.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8808);
pub const DEFAULT_DATA_DIR: &str = "./switchyard-data";
/// The default size of the backend session table (`max_backend_sessions`; the composition root hands it to the
/// backend client).
pub const BACKEND_SESSION_TABLE_SIZE: usize = 4096;
/// The largest accepted `max_backend_sessions` (and `max_backend_sessions_per_principal`): a slot costs a few
/// hundred bytes plus the backend's connection, so this bounds memory, not a structure.
pub const MAX_BACKEND_SESSIONS_LIMIT: usize = 1_000_000;
/// The default share of the default table one principal may hold: a quarter, so at least four owners always fit.
pub const DEFAULT_MAX_SESSIONS_PER_OWNER: usize = BACKEND_SESSION_TABLE_SIZE / 4;
/// The session key's file name inside the data directory when `session_secret_file` is not set.
pub const SESSION_SECRET_FILE_NAME: &str = "session.key";
pub const DEFAULT_MAX_BODY: usize = 4 << 20;
/// The largest accepted `max_body`: request bodies are buffered, so the limit must stay a sane bound.
pub const MAX_BODY_LIMIT: usize = 1 << 30;
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// How many deleted sessions are remembered (each until its own expiry) before new ones are refused.
pub const DEFAULT_MAX_REVOCATIONS: usize = 100_000;
/// The largest accepted `max_revocations` (about 1 GiB of memory for the list).
pub const MAX_REVOCATIONS_LIMIT: usize = 10_000_000;
/// How many events of each agent SSE stream a PostgreSQL fleet keeps for resumptions on any replica.
pub const DEFAULT_STREAM_REPLAY: usize = 256;
/// The largest accepted `stream_replay`.
pub const STREAM_REPLAY_LIMIT: usize = 100_000;
/// How long a PostgreSQL fleet keeps a stream's events.
pub const STREAM_REPLAY_KEPT: Duration = Duration::from_secs(5 * 60);
/// How long a graceful shutdown waits for running calls by default.
pub const DEFAULT_SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);
/// How long a stopping gateway keeps serving, not ready, before it drains: long enough for a load balancer that
/// polls `/readyz` every few seconds to stop sending it new connections.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long a tool call waits for its backend's first discovery.
pub const DEFAULT_DISCOVERY_WAIT: Duration = Duration::from_secs(5);
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Longer than the 60 s idle timeout of common load balancers, so the balancer, not the gateway, closes an idle
/// connection first and never sends a request on a connection the gateway is closing.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// The largest accepted `max_connections`: each connection needs a file descriptor, and far fewer are usual.
pub const MAX_CONNECTIONS_LIMIT: usize = 1_000_000;
/// The default number of standalone `GET` streams one agent session may hold open at once.
pub const DEFAULT_MAX_STREAMS_PER_SESSION: usize = 4;
/// The largest accepted `max_streams_per_session`: an agent needs one stream, a few during reconnections.
pub const MAX_STREAMS_PER_SESSION_LIMIT: usize = 1000;

/// The validated `[server]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// As configured; use [`ServerConfig::session_secret_path`] for the file to actually use.
    pub session_secret_file: Option<PathBuf>,
    /// Extra browser origins (lowercase globs such as `https://*.example.com`) besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// Extra `Host` values (lowercase globs, with or without `:port`) accepted while bound to loopback.
    pub allowed_hosts: Vec<String>,
    /// Whether answers to allowed browser origins say `Access-Control-Allow-Credentials: true`.
    pub cors_credentials: bool,
    /// Largest accepted request body, in bytes.
    pub max_body: usize,
    /// How long an agent session id stays valid after `initialize`.
    pub session_ttl: Duration,
    /// The bound on remembered deleted sessions; when reached, deletions and new sessions are refused.
    pub max_revocations: usize,
    /// As configured; use [`ServerConfig::revocations_per_owner`] for the share to apply.
    pub max_revocations_per_owner: Option<usize>,
    /// How many events of each agent SSE stream a PostgreSQL fleet keeps in the ledger for resumptions on any
    /// replica (0: none; resumption then works only on the replica that ran the call).
    pub stream_replay: usize,
    /// How long a graceful shutdown waits for running calls before marking them `unknown`.
    pub shutdown_drain: Duration,
    /// How long a stopping gateway keeps serving (and answering `/readyz` with 503) before the drain.
    pub shutdown_grace: Duration,
    /// How long a tool call of a backend whose first discovery has not ended waits for it.
    pub discovery_wait: Duration,
    /// The backend-session table's size: live (agent session or principal, backend) sessions of the gateway.
    pub max_backend_sessions: usize,
    /// How many of the backend-session table's slots one principal (for `anonymous`, one client address) may hold
    /// (a value above `max_backend_sessions` means the whole table).
    pub max_backend_sessions_per_principal: usize,
    /// How long a client may take to send a request's header, from its first byte.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body, from the end of its header.
    pub body_timeout: Duration,
    /// How long a connection may stay open with no request on it.
    pub idle_timeout: Duration,
    /// How many connections are served at once; further ones wait to be accepted.
    pub max_connections: usize,
    /// As configured; use [`ServerConfig::connections_per_principal`] for the cap to apply.
    pub max_connections_per_principal: Option<usize>,
    /// How many standalone `GET` streams one agent session may hold open at once.
    pub max_streams_per_session: usize,
    /// Live stdio backend processes of the whole gateway, over all backends.
    pub max_stdio_processes: usize,
    /// The URL agents use, as configured (no trailing slash); see [`ServerConfig::public_url`].
    pub public_url: Option<String>,
    /// The listener's certificate chain and private key (PEM files); `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
}

/// `tls_cert` and `tls_key`: set together or not at all. The files are read when the gateway starts, `check`
/// runs, or a reload asks (not here: the configuration only names them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawServer {
    #[serde(deserialize_with = "listen_text")]
    listen: Option<String>,
    data_dir: Option<String>,
    session_secret_file: Option<String>,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
    cors_credentials: Option<bool>,
    max_body: Option<SizeInput>,
    #[serde(deserialize_with = "duration_text")]
    session_ttl: Option<String>,
    max_revocations: Option<i64>,
    max_revocations_per_owner: Option<i64>,
    stream_replay: Option<i64>,
    #[serde(deserialize_with = "duration_text")]
    shutdown_drain: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    shutdown_grace: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    discovery_wait: Option<String>,
    max_backend_sessions: Option<i64>,
    max_backend_sessions_per_principal: Option<i64>,
    #[serde(deserialize_with = "duration_text")]
    header_timeout: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    body_timeout: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    idle_timeout: Option<String>,
    max_connections: Option<i64>,
    max_connections_per_principal: Option<i64>,
    max_streams_per_session: Option<i64>,
    max_stdio_processes: Option<i64>,
    public_url: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            session_secret_file: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            cors_credentials: false,
            max_body: DEFAULT_MAX_BODY,
            session_ttl: DEFAULT_SESSION_TTL,
            max_revocations: DEFAULT_MAX_REVOCATIONS,
            max_revocations_per_owner: None,
            stream_replay: DEFAULT_STREAM_REPLAY,
            shutdown_drain: DEFAULT_SHUTDOWN_DRAIN,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            discovery_wait: DEFAULT_DISCOVERY_WAIT,
            max_backend_sessions: BACKEND_SESSION_TABLE_SIZE,
            max_backend_sessions_per_principal: DEFAULT_MAX_SESSIONS_PER_OWNER,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_principal: None,
            max_streams_per_session: DEFAULT_MAX_STREAMS_PER_SESSION,
            max_stdio_processes: DEFAULT_MAX_STDIO_PROCESSES,
            public_url: None,
            tls: None,
        }
    }
}

impl ServerConfig {
    /// The session key file: the configured one, else `<data_dir>/session.key` (so moving the data directory,
    /// also through `SWITCHYARD_DATA_DIR`, moves the key with it).
    pub fn session_secret_path(&self) -> PathBuf {
        self.session_secret_file.clone().unwrap_or_else(|| self.data_dir.join(SESSION_SECRET_FILE_NAME))
    }

    /// The URL agents reach the gateway at (the resource identifier of its Protected Resource Metadata and the
    /// base of the default JWT audiences): `public_url` if configured, else `http://<listen>` (`https` with TLS).
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("{}://{}", self.scheme(), self.listen))
    }

    /// `https` when the listener speaks TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    pub fn binds_loopback(&self) -> bool {
        self.listen.ip().is_loopback()
    }

    /// How many requests and streams of the MCP endpoint one principal may have in flight at once: the configured
    /// `max_connections_per_principal`, else a quarter of `max_connections` (at least one), so at least four
    /// principals always find a connection.
    pub fn connections_per_principal(&self) -> usize {
        self.max_connections_per_principal.unwrap_or((self.max_connections / 4).max(1))
    }

    /// How many of the deleted-session list's entries one owner (a principal; for `anonymous`, one client address)
    /// may hold: the configured `max_revocations_per_owner`, else a quarter of `max_revocations` (at least one), so
    /// one client's deletions cannot fill the list and at least four owners always find room.
    pub fn revocations_per_owner(&self) -> usize {
        self.max_revocations_per_owner.unwrap_or((self.max_revocations / 4).max(1))
    }
}

/// Validates the `[server]` section read from the file.
pub(super) fn build(raw: &RawServer) -> Result<ServerConfig, Fault> {
    let section = KeyPath::root().key("server");
    let defaults = ServerConfig::default();
    Ok(ServerConfig {
        listen: optional(&section.key("listen"), raw.listen.as_deref(), parse_listen)?.unwrap_or(defaults.listen),
        data_dir: optional(&section.key("data_dir"), raw.data_dir.as_deref(), parse_path)?.unwrap_or(defaults.data_dir),
        session_secret_file: optional(
            &section.key("session_secret_file"),
            raw.session_secret_file.as_deref(),
            parse_path,
        )?,
        allowed_origins: list(&section.key("allowed_origins"), &raw.allowed_origins, parse_origin_pattern)?,
        allowed_hosts: list(&section.key("allowed_hosts"), &raw.allowed_hosts, parse_host_pattern)?,
        cors_credentials: raw.cors_credentials.unwrap_or(defaults.cors_credentials),
        max_body: build_max_body(&section.key("max_body"), raw.max_body.as_ref())?.unwrap_or(defaults.max_body),
        session_ttl: optional(&section.key("session_ttl"), raw.session_ttl.as_deref(), parse_ttl)?
            .unwrap_or(defaults.session_ttl),
        max_revocations: MAX_REVOCATIONS
            .build(&section.key("max_revocations"), raw.max_revocations)?
            .unwrap_or(defaults.max_revocations),
        max_revocations_per_owner: MAX_REVOCATIONS
            .build(&section.key("max_revocations_per_owner"), raw.max_revocations_per_owner)?,
        stream_replay: match raw.stream_replay {
            Some(0) => 0,
            count => STREAM_REPLAY.build(&section.key("stream_replay"), count)?.unwrap_or(defaults.stream_replay),
        },
        shutdown_drain: optional(&section.key("shutdown_drain"), raw.shutdown_drain.as_deref(), parse_duration)?
            .unwrap_or(defaults.shutdown_drain),
        shutdown_grace: optional(&section.key("shutdown_grace"), raw.shutdown_grace.as_deref(), parse_duration)?
            .unwrap_or(defaults.shutdown_grace),
        discovery_wait: optional(&section.key("discovery_wait"), raw.discovery_wait.as_deref(), parse_duration)?
            .unwrap_or(defaults.discovery_wait),
        max_backend_sessions: BACKEND_SESSIONS
            .build(&section.key("max_backend_sessions"), raw.max_backend_sessions)?
            .unwrap_or(defaults.max_backend_sessions),
        max_backend_sessions_per_principal: BACKEND_SESSIONS
            .build(&section.key("max_backend_sessions_per_principal"), raw.max_backend_sessions_per_principal)?
            .unwrap_or(defaults.max_backend_sessions_per_principal),
        header_timeout: optional(&section.key("header_timeout"), raw.header_timeout.as_deref(), parse_timeout)?
            .unwrap_or(defaults.header_timeout),
        body_timeout: optional(&section.key("body_timeout"), raw.body_timeout.as_deref(), parse_timeout)?
            .unwrap_or(defaults.body_timeout),
        idle_timeout: optional(&section.key("idle_timeout"), raw.idle_timeout.as_deref(), parse_timeout)?
            .unwrap_or(defaults.idle_timeout),
        max_connections: MAX_CONNECTIONS
            .build(&section.key("max_connections"), raw.max_connections)?
            .unwrap_or(defaults.max_connections),
        max_connections_per_principal: MAX_CONNECTIONS
            .build(&section.key("max_connections_per_principal"), raw.max_connections_per_principal)?,
        max_streams_per_session: STREAMS
            .build(&section.key("max_streams_per_session"), raw.max_streams_per_session)?
            .unwrap_or(defaults.max_streams_per_session),
        max_stdio_processes: PROCESSES
            .build(&section.key("max_stdio_processes"), raw.max_stdio_processes)?
            .unwrap_or(defaults.max_stdio_processes),
        public_url: optional(&section.key("public_url"), raw.public_url.as_deref(), parse_public_url)?,
        tls: build_tls(&section, raw.tls_cert.as_deref(), raw.tls_key.as_deref())?,
    })
}

fn missing_half(key: &KeyPath, what: &str) -> Fault {
    Fault::invalid(key, None, Expected(format!("{what}, a PEM file (set both keys, or neither for plain HTTP)")))
}

/// Both TLS files or neither: a certificate without its key (or the reverse) cannot be served.
fn build_tls(section: &KeyPath, cert: Option<&str>, key: Option<&str>) -> Result<Option<TlsFiles>, Fault> {
    let cert = optional(&section.key("tls_cert"), cert, parse_path)?;
    let key = optional(&section.key("tls_key"), key, parse_path)?;
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (Some(_), None) => Err(missing_half(&section.key("tls_key"), "the private key of `tls_cert`")),
        (None, Some(_)) => Err(missing_half(&section.key("tls_cert"), "the certificate chain of `tls_key`")),
    }
}

const MAX_REVOCATIONS: Count = Count { max: MAX_REVOCATIONS_LIMIT, unit: "sessions" };
const STREAM_REPLAY: Count = Count { max: STREAM_REPLAY_LIMIT, unit: "events (or 0: none)" };
const MAX_CONNECTIONS: Count = Count { max: MAX_CONNECTIONS_LIMIT, unit: "connections" };
const STREAMS: Count = Count { max: MAX_STREAMS_PER_SESSION_LIMIT, unit: "streams" };
/// Both the table's size and one principal's share of it.
const BACKEND_SESSIONS: Count = Count { max: MAX_BACKEND_SESSIONS_LIMIT, unit: "backend sessions" };

fn build_max_body(key: &KeyPath, raw: Option<&SizeInput>) -> Result<Option<usize>, Fault> {
    optional_size(key, raw, check_max_body)
}

/// Applies the `SWITCHYARD_*` overrides found in `env`.
pub(super) fn apply_env(server: &mut ServerConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let lookup = EnvLookup::new(env, "server");
    let s = &mut *server;
    lookup.set(&mut s.listen, "SWITCHYARD_LISTEN", "listen", parse_listen)?;
    lookup.set(&mut s.data_dir, "SWITCHYARD_DATA_DIR", "data_dir", parse_path)?;
    let secret_file = |text: &str| parse_path(text).map(Some);
    lookup.set(&mut s.session_secret_file, "SWITCHYARD_SESSION_SECRET_FILE", "session_secret_file", secret_file)?;
    let origins = |text: &str| parse_comma_list(text, parse_origin_pattern);
    lookup.set(&mut s.allowed_origins, "SWITCHYARD_ALLOWED_ORIGINS", "allowed_origins", origins)?;
    let hosts = |text: &str| parse_comma_list(text, parse_host_pattern);
    lookup.set(&mut s.allowed_hosts, "SWITCHYARD_ALLOWED_HOSTS", "allowed_hosts", hosts)?;
    lookup.set(&mut s.cors_credentials, "SWITCHYARD_CORS_CREDENTIALS", "cors_credentials", parse_bool)?;
    lookup.set(&mut s.max_body, "SWITCHYARD_MAX_BODY", "max_body", parse_max_body)?;
    lookup.set(&mut s.session_ttl, "SWITCHYARD_SESSION_TTL", "session_ttl", parse_ttl)?;
    let sessions = |text: &str| BACKEND_SESSIONS.parse(text);
    lookup.set(&mut s.max_backend_sessions, "SWITCHYARD_MAX_BACKEND_SESSIONS", "max_backend_sessions", sessions)?;
    let (var, key) = ("SWITCHYARD_MAX_BACKEND_SESSIONS_PER_PRINCIPAL", "max_backend_sessions_per_principal");
    lookup.set(&mut s.max_backend_sessions_per_principal, var, key, sessions)?;
    let revocations = |text: &str| MAX_REVOCATIONS.parse(text);
    lookup.set(&mut s.max_revocations, "SWITCHYARD_MAX_REVOCATIONS", "max_revocations", revocations)?;
    let share = |text: &str| MAX_REVOCATIONS.parse(text).map(Some);
    let (var, key) = ("SWITCHYARD_MAX_REVOCATIONS_PER_OWNER", "max_revocations_per_owner");
    lookup.set(&mut s.max_revocations_per_owner, var, key, share)?;
    let replay = |text: &str| if text.trim() == "0" { Ok(0) } else { STREAM_REPLAY.parse(text) };
    lookup.set(&mut s.stream_replay, "SWITCHYARD_STREAM_REPLAY", "stream_replay", replay)?;
    lookup.set(&mut s.shutdown_drain, "SWITCHYARD_SHUTDOWN_DRAIN", "shutdown_drain", parse_duration)?;
    lookup.set(&mut s.shutdown_grace, "SWITCHYARD_SHUTDOWN_GRACE", "shutdown_grace", parse_duration)?;
    lookup.set(&mut s.discovery_wait, "SWITCHYARD_DISCOVERY_WAIT", "discovery_wait", parse_duration)?;
    lookup.set(&mut s.header_timeout, "SWITCHYARD_HEADER_TIMEOUT", "header_timeout", parse_timeout)?;
    lookup.set(&mut s.body_timeout, "SWITCHYARD_BODY_TIMEOUT", "body_timeout", parse_timeout)?;
    lookup.set(&mut s.idle_timeout, "SWITCHYARD_IDLE_TIMEOUT", "idle_timeout", parse_timeout)?;
    let connections = |text: &str| MAX_CONNECTIONS.parse(text);
    lookup.set(&mut s.max_connections, "SWITCHYARD_MAX_CONNECTIONS", "max_connections", connections)?;
    let per_principal = |text: &str| MAX_CONNECTIONS.parse(text).map(Some);
    let (var, key) = ("SWITCHYARD_MAX_CONNECTIONS_PER_PRINCIPAL", "max_connections_per_principal");
    lookup.set(&mut s.max_connections_per_principal, var, key, per_principal)?;
    let streams = |text: &str| STREAMS.parse(text);
    let (var, key) = ("SWITCHYARD_MAX_STREAMS_PER_SESSION", "max_streams_per_session");
    lookup.set(&mut s.max_streams_per_session, var, key, streams)?;
    let processes = |text: &str| PROCESSES.parse(text);
    lookup.set(&mut s.max_stdio_processes, "SWITCHYARD_MAX_STDIO_PROCESSES", "max_stdio_processes", processes)?;
    let public_url = |text: &str| parse_public_url(text).map(Some);
    lookup.set(&mut s.public_url, "SWITCHYARD_PUBLIC_URL", "public_url", public_url)?;
    apply_tls_env(server, &lookup)
}

/// `SWITCHYARD_TLS_CERT` and `SWITCHYARD_TLS_KEY`: each replaces its file; without TLS in the file, both are needed.
fn apply_tls_env(server: &mut ServerConfig, lookup: &EnvLookup) -> Result<(), ConfigError> {
    let cert = lookup.get("SWITCHYARD_TLS_CERT", "tls_cert", parse_path)?;
    let key = lookup.get("SWITCHYARD_TLS_KEY", "tls_key", parse_path)?;
    server.tls = match (server.tls.take(), cert, key) {
        (Some(files), cert, key) => Some(TlsFiles { cert: cert.unwrap_or(files.cert), key: key.unwrap_or(files.key) }),
        (None, Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None, None) => None,
        (None, Some(cert), None) => {
            return Err(half_pair(("SWITCHYARD_TLS_CERT", "tls_cert"), &cert, "SWITCHYARD_TLS_KEY"));
        }
        (None, None, Some(key)) => {
            return Err(half_pair(("SWITCHYARD_TLS_KEY", "tls_key"), &key, "SWITCHYARD_TLS_CERT"));
        }
    };
    Ok(())
}

/// One TLS file from the environment while the file configures no TLS: the other one is missing.
fn half_pair((var, key): (&str, &str), value: &std::path::Path, other: &str) -> ConfigError {
    ConfigError::Env {
        var: var.to_owned(),
        key: format!("server.{key}"),
        value: value.display().to_string(),
        expected: format!("to be set with {other} (the file configures no TLS; set both, or neither for plain HTTP)"),
    }
}

fn parse_comma_list<T>(text: &str, parse_item: impl Fn(&str) -> Result<T, Expected>) -> Result<Vec<T>, Expected> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            parse_item(item).map_err(|expected| {
                Expected(format!("a comma-separated list of items, each {}; {item:?} is not", expected.0))
            })
        })
        .collect()
}

fn parse_path(text: &str) -> Result<PathBuf, Expected> {
    if text.trim().is_empty() {
        return Err("a non-empty path".into());
    }
    Ok(PathBuf::from(text))
}

fn parse_max_body(text: &str) -> Result<usize, Expected> {
    parse_byte_size(text).and_then(check_max_body)
}

fn check_max_body(bytes: u64) -> Result<usize, Expected> {
    usize::try_from(bytes)
        .ok()
        .filter(|bytes| (1..=MAX_BODY_LIMIT).contains(bytes))
        .ok_or_else(|| Expected(format!("{SIZE_EXPECTED}, between 1 byte and 1GiB")))
}

fn parse_ttl(text: &str) -> Result<Duration, Expected> {
    parse_positive_duration(text)
}

/// A zero timeout would refuse every request, so timeouts must be positive.
fn parse_timeout(text: &str) -> Result<Duration, Expected> {
    parse_positive_duration(text)
}

const ORIGIN_EXPECTED: &str = "an origin such as \"https://app.example.com\" or \"http://*.example.com:8080\" \
     (scheme http or https, host, optional port, no path or trailing slash), or \"*\" for any origin";

fn parse_origin_pattern(text: &str) -> Result<String, Expected> {
    if text == "*" {
        return Ok(text.to_owned());
    }
    let lower = text.to_ascii_lowercase();
    let authority = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://")).ok_or(ORIGIN_EXPECTED)?;
    if !is_authority_pattern(authority) {
        return Err(ORIGIN_EXPECTED.into());
    }
    Ok(lower)
}

fn parse_host_pattern(text: &str) -> Result<String, Expected> {
    if !is_authority_pattern(text) {
        return Err("a host name such as \"gateway.internal\" or \"gateway.internal:8808\" (no scheme or path)".into());
    }
    Ok(text.to_ascii_lowercase())
}

/// A host with an optional port, possibly with globs: no scheme, path, blank or credentials.
fn is_authority_pattern(text: &str) -> bool {
    !text.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '@' | '\\' | '#' | ','))
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
