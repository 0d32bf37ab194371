//! Tests of loading a whole configuration: files, environment overrides, defaults and the messages of each error.

use std::path::PathBuf;
use std::time::Duration;

use super::locate::locate_in;
use super::server::{DEFAULT_LISTEN, DEFAULT_MAX_BODY, DEFAULT_SESSION_TTL};
use super::stdio::DEFAULT_MAX_STDIO_PROCESSES;
use super::*;
use crate::ledger_url::LedgerUrl;

const FILE: &str = "test.toml";

/// A fresh directory under the system temp dir, unique per test and process.
pub(in crate::config) fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-config-{}-{name}", std::process::id()));
    // Leftovers of an earlier run with the same pid would only confuse the test.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_with_env(text, &[])
}

fn parse_with_env(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, FILE, env.iter().copied())
}

/// The message of a failing load, after checking it names the file and `key`.
fn error_naming(text: &str, key: &str) -> String {
    let message = parse(text).expect_err("configuration should be refused").to_string();
    assert!(message.contains(FILE), "message does not name the file: {message}");
    assert!(message.contains(key), "message does not name {key}: {message}");
    message
}

const ONE_BACKEND: &str = "[[backends]]\nname = \"docs\"\nurl = \"http://127.0.0.1:9000/mcp\"\n";

#[test]
fn resource_prefixes_are_optional_visible_ascii() {
    let config = parse(&format!("{ONE_BACKEND}resource_prefix = \"docs+\"\n")).unwrap();
    assert_eq!(config.backends[0].resource_prefix.as_deref(), Some("docs+"));
    assert_eq!(parse(ONE_BACKEND).unwrap().backends[0].resource_prefix, None);
    let message = error_naming(&format!("{ONE_BACKEND}resource_prefix = \"a b\"\n"), "backends[0].resource_prefix");
    assert!(message.contains("visible ASCII"), "{message}");
    error_naming(&format!("{ONE_BACKEND}resource_prefix = \"\"\n"), "backends[0].resource_prefix");
}

/// `switchyard.example.toml` with what it needs to load: its secrets' variables and an `npx` on `PATH`.
pub(super) fn parse_example() -> Config {
    // One directory for every caller: tests run in parallel, and a second `scratch_dir` would empty it under the
    // first one's feet.
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let bin = BIN.get_or_init(|| {
        let bin = scratch_dir("example-path");
        std::fs::write(bin.join("npx"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(bin.join("npx"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        bin
    });
    let text = include_str!("../../switchyard.example.toml");
    let path = bin.display().to_string();
    let env = [("GITHUB_TOKEN", "ghp_example"), ("FILES_API_TOKEN", "t"), ("DOCS_CLIENT_SECRET", "s"), ("PATH", &path)];
    parse_with_env(text, &env).expect("the example is valid")
}

#[test]
fn the_example_file_parses() {
    let config = parse_example();
    assert_eq!(config.backends.len(), 4);
    assert_eq!(config.backend("files").expect("files backend").transport, Transport::Stdio);
    assert_eq!(config.backend("payments").expect("payments backend").transport, Transport::Openapi);
    assert_eq!(config.server.max_stdio_processes, DEFAULT_MAX_STDIO_PROCESSES);
    let github = config.backend("github").expect("github backend");
    assert_eq!(github.prefix, "github__");
    assert!(github.credential.is_some());
    assert!(!github.tools.exposes("delete_repository"));
    let docs = config.backend("docs").expect("docs backend");
    assert_eq!(docs.prefix, "");
    assert!(docs.tools.exposes("search_pages"));
    let oauth = docs.oauth.as_ref().expect("the docs backend uses OAuth");
    assert_eq!(
        (oauth.grant, oauth.scopes.as_slice()),
        (OAuthGrant::AuthorizationCode, ["docs:read".to_owned()].as_slice())
    );
    assert!(
        matches!(&oauth.client, OAuthClientIdentity::PreRegistered { client_id, client_secret: Some(_), .. } if client_id == "switchyard-docs")
    );
    assert!(!docs.tools.exposes("delete_page"));
    assert_eq!(config.telemetry, crate::config::TelemetryConfig::default(), "the example shows the defaults");
    let server = &config.server;
    assert_eq!(server.listen, DEFAULT_LISTEN);
    assert_eq!(server.session_secret_path(), PathBuf::from("./switchyard-data/session.key"));
    assert_eq!(server.allowed_origins, ["https://console.example.com"]);
    assert_eq!(server.max_body, DEFAULT_MAX_BODY);
    assert_eq!(server.session_ttl, DEFAULT_SESSION_TTL);
    let defaults = ServerConfig::default();
    let timeouts = (server.header_timeout, server.body_timeout, server.idle_timeout, server.max_connections);
    let expected = (defaults.header_timeout, defaults.body_timeout, defaults.idle_timeout, defaults.max_connections);
    assert_eq!(timeouts, expected, "the example spells out the connection limits' defaults");
    assert_eq!(config.ledger, LedgerConfig::default(), "the example spells out the ledger's defaults");
}

#[test]
fn an_empty_file_is_the_demo_configuration() {
    let config = parse("").expect("empty is valid");
    assert_eq!(config.server, Config::default_demo().server);
    assert!(config.backends.is_empty());
    let demo = Config::default_demo();
    assert_eq!(demo.server.listen.to_string(), "127.0.0.1:8808");
    assert_eq!(demo.server.data_dir, PathBuf::from("./switchyard-data"));
    assert_eq!(demo.server.session_secret_path(), PathBuf::from("./switchyard-data/session.key"));
    assert_eq!(demo.server.max_body, 4 * 1024 * 1024);
    assert_eq!(demo.server.session_ttl, Duration::from_secs(86_400));
    assert_eq!(demo.server.header_timeout, Duration::from_secs(10));
    assert_eq!(demo.server.body_timeout, Duration::from_secs(30));
    assert_eq!(demo.server.max_connections, 10_000);
    assert!(demo.server.allowed_origins.is_empty());
    assert_eq!(config.ledger, demo.ledger);
    assert_eq!(demo.ledger.url, LedgerUrl::SqliteInDataDir);
    assert_eq!(demo.ledger.url.sqlite_path(&demo.server.data_dir), Some(PathBuf::from("./switchyard-data/ledger.db")));
    assert_eq!(demo.ledger.retention, Duration::from_secs(86_400));
    assert_eq!(demo.ledger.max_result, 1 << 20);
    assert_eq!(demo.ledger.lease, Duration::from_secs(30));
}

#[test]
fn every_ledger_key_is_read() {
    let config = parse(
        "[ledger]\nurl = \"postgres://sy:pw@db.internal:5432/switchyard?schema=gw\"\nretention = \"7d\"\n\
         max_result = \"64KiB\"\nlease = \"1m\"\n",
    )
    .expect("valid");
    let ledger = &config.ledger;
    assert_eq!(ledger.url.to_string(), "postgres://sy:***@db.internal:5432/switchyard (schema gw)");
    assert_eq!(ledger.retention, Duration::from_secs(7 * 86_400));
    assert_eq!(ledger.max_result, 64 << 10);
    assert_eq!(ledger.lease, Duration::from_secs(60));
    assert_eq!(parse("ledger.url = \"memory\"\n").expect("memory").ledger.url, LedgerUrl::Memory);
    let file = parse("ledger.url = \"sqlite:///var/lib/sy/calls.db\"\n").expect("file").ledger.url;
    assert_eq!(file.sqlite_path(Path::new("/ignored")), Some(PathBuf::from("/var/lib/sy/calls.db")));
    assert_eq!(parse("ledger.max_result = 0\n").expect("digests only").ledger.max_result, 0);
}

#[test]
fn bad_ledger_values_are_named() {
    let cases = [
        ("url = \"mysql://db/x\"", "ledger.url = \"mysql://db/x\": expected \"memory\", \"sqlite\""),
        ("url = \"postgres://u:hunter2@db/x?schema=Bad\"", "ledger.url = \"postgres://u:***@db/x?schema=Bad\""),
        ("url = 5", "ledger.url: invalid type: integer `5`"),
        ("retention = \"1 week\"", "ledger.retention = \"1 week\": expected a duration"),
        ("retention = \"0s\"", "longer than zero"),
        ("retention = 86400", "ledger.retention: invalid type: integer `86400`, expected a duration"),
        ("max_result = \"lots\"", "ledger.max_result = \"lots\": expected a byte size"),
        ("max_result = -1", "ledger.max_result = -1"),
        ("max_result = \"2GiB\"", "at most 1GiB"),
        ("lease = \"500ms\"", "ledger.lease = \"500ms\": expected a duration"),
        ("lease = \"soon\"", "of at least 1s"),
        ("leese = \"30s\"", "unknown key ledger.leese"),
    ];
    for (line, expected) in cases {
        let message = error_naming(&format!("[ledger]\n{line}\n"), expected);
        assert!(!message.contains("hunter2"), "{message}");
    }
}

#[test]
fn ledger_environment_overrides() {
    let config = parse_with_env(
        "[ledger]\nurl = \"memory\"\nlease = \"10s\"\n",
        &[
            ("SWITCHYARD_LEDGER_URL", "postgres://gw@db/ledger"),
            ("SWITCHYARD_LEDGER_RETENTION", "12h"),
            ("SWITCHYARD_LEDGER_MAX_RESULT", "1KiB"),
            ("SWITCHYARD_LEDGER_LEASE", "45s"),
        ],
    )
    .expect("valid");
    assert_eq!(config.ledger.url.to_string(), "postgres://gw@db/ledger");
    assert_eq!(config.ledger.retention, Duration::from_secs(43_200));
    assert_eq!(config.ledger.max_result, 1024);
    assert_eq!(config.ledger.lease, Duration::from_secs(45));
    let demo = Config::default_demo().with_env_overrides([("SWITCHYARD_LEDGER_URL", "memory")]).expect("valid");
    assert_eq!(demo.ledger.url, LedgerUrl::Memory);

    let message = parse_with_env("", &[("SWITCHYARD_LEDGER_URL", "postgres://u:hunter2@db/x?schema=X")])
        .expect_err("bad schema")
        .to_string();
    assert!(message.starts_with("environment variable SWITCHYARD_LEDGER_URL = \"postgres://u:***@"), "{message}");
    assert!(message.contains("(overrides ledger.url)") && !message.contains("hunter2"), "{message}");
    for (var, value) in [("SWITCHYARD_LEDGER_LEASE", "1ms"), ("SWITCHYARD_LEDGER_MAX_RESULT", "much")] {
        let message = parse_with_env("", &[(var, value)]).expect_err(var).to_string();
        assert!(message.contains("(overrides ledger."), "{message}");
    }
}

#[test]
fn every_server_key_is_read() {
    let config = parse(
        "[server]\nlisten = \"0.0.0.0:9000\"\ndata_dir = \"/var/lib/sy\"\nsession_secret_file = \"/etc/sy.key\"\n\
         allowed_origins = [\"https://App.Example.com\"]\nallowed_hosts = [\"gw.internal\"]\n\
         max_body = \"1MiB\"\nsession_ttl = \"1h30m\"\n",
    )
    .expect("valid");
    let server = &config.server;
    assert_eq!(server.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(server.data_dir, PathBuf::from("/var/lib/sy"));
    assert_eq!(server.session_secret_path(), PathBuf::from("/etc/sy.key"));
    assert_eq!(server.allowed_origins, ["https://app.example.com"]);
    assert_eq!(server.allowed_hosts, ["gw.internal"]);
    assert_eq!(server.max_body, 1 << 20);
    assert_eq!(server.session_ttl, Duration::from_secs(5_400));
    assert_eq!(parse("server.max_body = 1000\n").expect("int").server.max_body, 1000);
}

#[test]
fn backend_defaults_apply() {
    let config = parse(ONE_BACKEND).expect("valid");
    let docs = &config.backends[0];
    assert_eq!(docs.url().map(reqwest::Url::as_str), Some("http://127.0.0.1:9000/mcp"));
    assert_eq!(docs.transport, Transport::Mcp);
    assert_eq!(docs.prefix, "docs__");
    assert_eq!(docs.timeout, Duration::from_secs(60));
    assert_eq!(docs.tools, ToolFilter::default());
    assert!(docs.headers.is_empty());
    assert!(docs.credential.is_none());
    assert_eq!(docs.era, ProtocolEra::Auto, "the era is probed by default");
}

#[test]
fn every_backend_key_is_read() {
    let text = format!(
        "{ONE_BACKEND}transport = \"mcp\"\nera = \"modern\"\nprefix = \"\"\ntimeout = \"500ms\"\n\
         tools = {{ allow = [\"search*\"], deny = [\"search_private\"] }}\n\
         headers = {{ X-Team = \"platform\" }}\n\
         credential = {{ header = \"X-Api-Key\", env = \"DOCS_KEY\" }}\n"
    );
    let config = parse_with_env(&text, &[("DOCS_KEY", "k")]).expect("valid");
    let docs = &config.backends[0];
    assert_eq!(docs.era, ProtocolEra::Modern);
    assert_eq!(docs.prefix, "");
    assert_eq!(docs.timeout, Duration::from_millis(500));
    assert!(docs.tools.exposes("search_public"));
    assert!(!docs.tools.exposes("search_private"));
    assert!(!docs.tools.exposes("fetch"));
    assert_eq!(docs.headers["x-team"], "platform");
    let credential = docs.credential.as_ref().expect("credential");
    assert_eq!(credential.header().map(|h| h.as_str()), Some("x-api-key"));
    assert_eq!(credential.value.expose(), "k");
}

#[test]
fn syntax_errors_keep_line_and_column() {
    let message = error_naming("[server]\nlisten = \n", "line 2, column");
    assert!(message.starts_with("test.toml: TOML syntax error at line 2, column"), "{message}");
    let duplicate = error_naming("[server]\nlisten = \"a\"\nlisten = \"b\"\n", "line 3");
    assert!(duplicate.contains("duplicate key"), "{duplicate}");
}

#[test]
fn unknown_keys_are_named() {
    let message = error_naming("[server]\nlisen = \"1\"\n", "server.lisen");
    assert!(message.starts_with("test.toml: unknown key server.lisen: expected one of"), "{message}");
    error_naming("bogus = 1\n", "unknown key bogus");
    error_naming(&format!("{ONE_BACKEND}[[backends]]\nnmae = \"x\"\n"), "unknown key backends[1].nmae");
    error_naming(&format!("{ONE_BACKEND}tools.alow = [\"x\"]\n"), "unknown key backends[0].tools.alow");
    error_naming(
        &format!("{ONE_BACKEND}credential = {{ header = \"A\", env = \"B\", kind = \"x\" }}\n"),
        "unknown key backends[0].credential.kind",
    );
}

#[test]
fn wrong_types_are_named() {
    let message = error_naming("[server]\nlisten = 8808\n", "server.listen");
    assert!(message.contains("invalid type: integer `8808`, expected an IP address and port"), "{message}");
    error_naming("server = 3\n", "test.toml: server: invalid type");
    error_naming("[server]\nmax_body = true\n", "server.max_body: invalid type: boolean");
    error_naming(&format!("{ONE_BACKEND}transport = \"grpc\"\n"), "backends[0].transport: unknown variant");
    error_naming(&format!("{ONE_BACKEND}tools.deny = [\"a\", 1]\n"), "backends[0].tools.deny[1]: invalid type");
    error_naming(&format!("{ONE_BACKEND}headers.X-A = 1\n"), "backends[0].headers.X-A: invalid type");
    error_naming("backends = 1\n", "test.toml: backends: invalid type");
    error_naming(
        &format!("{ONE_BACKEND}timeout = 60\n"),
        "backends[0].timeout: invalid type: integer `60`, expected a duration",
    );
    error_naming("server.session_ttl = 60\n", "server.session_ttl: invalid type: integer `60`, expected a duration");
}

#[test]
fn bad_server_values_are_named() {
    let cases = [
        ("listen = \"localhost\"", "server.listen = \"localhost\": expected an IP address and port"),
        ("data_dir = \"\"", "server.data_dir = \"\": expected a non-empty path"),
        ("session_secret_file = \" \"", "server.session_secret_file = \" \": expected a non-empty path"),
        ("allowed_origins = [\"https://a.example/\"]", "server.allowed_origins[0] = \"https://a.example/\""),
        ("allowed_origins = [\"a.example\"]", "server.allowed_origins[0] = \"a.example\": expected an origin"),
        ("allowed_hosts = [\"http://x\"]", "server.allowed_hosts[0] = \"http://x\": expected a host name"),
        ("allowed_hosts = [\"\"]", "server.allowed_hosts[0] = \"\""),
        ("max_body = \"4 parsecs\"", "server.max_body = \"4 parsecs\": expected a byte size"),
        ("max_body = 0", "server.max_body = 0: expected a byte size"),
        ("max_body = -5", "server.max_body = -5"),
        ("max_body = \"2GiB\"", "server.max_body = \"2GiB\": expected a byte size"),
        ("session_ttl = \"24\"", "server.session_ttl = \"24\": expected a duration"),
        ("session_ttl = \"0s\"", "longer than zero"),
        ("header_timeout = \"0s\"", "server.header_timeout = \"0s\": expected a duration"),
        ("body_timeout = \"soon\"", "server.body_timeout = \"soon\": expected a duration"),
        ("idle_timeout = \"0ms\"", "server.idle_timeout = \"0ms\": expected a duration"),
        ("max_connections = 0", "server.max_connections = 0: expected a whole number from 1 to 1000000 connections"),
        ("max_connections = 1000001", "server.max_connections = 1000001: expected a whole number"),
        ("max_connections = -1", "server.max_connections = -1"),
    ];
    for (line, expected) in cases {
        let message = error_naming(&format!("[server]\n{line}\n"), expected);
        assert!(message.starts_with("test.toml: server."), "{message}");
    }
}

#[test]
fn bad_backend_values_are_named() {
    let cases = [
        (
            "name = \"GitHub\"\nurl = \"http://x\"",
            "test.toml: backends[0].name = \"GitHub\": expected 1–32 characters of a-z, 0-9 and '-'",
        ),
        ("url = \"http://x\"", "backends[0].name: expected 1–32 characters"),
        ("name = \"a\"", "backends[0].url: expected an http or https URL"),
        ("name = \"a\"\nurl = \"ftp://x\"", "backends[0].url = \"ftp://x\": expected an http or https URL"),
        ("name = \"a\"\nurl = \"https://u:p@x\"", "backends[0].url = \"https://u:p@x\": expected a URL without"),
        ("name = \"a\"\nurl = \"http://x\"\nprefix = \"a.\"", "backends[0].prefix = \"a.\": expected a prefix"),
        ("name = \"a\"\nurl = \"http://x\"\ntimeout = \"soon\"", "backends[0].timeout = \"soon\""),
        ("name = \"a\"\nurl = \"http://x\"\ntimeout = \"0ms\"", "backends[0].timeout = \"0ms\""),
        ("name = \"a\"\nurl = \"http://x\"\ntools.allow = [\"\"]", "backends[0].tools.allow[0] = \"\""),
        ("name = \"a\"\nurl = \"http://x\"\ntools.deny = [\"x\", \"\"]", "backends[0].tools.deny[1] = \"\""),
        (
            "name = \"a\"\nurl = \"http://x\"\nheaders.\"Bad Name\" = \"v\"",
            "backends[0].headers.\"Bad Name\" = \"Bad Name\": expected a header name",
        ),
        (
            "name = \"a\"\nurl = \"http://x\"\nheaders.Accept = \"v\"",
            "backends[0].headers.Accept = \"Accept\": expected a header the gateway does not manage",
        ),
        (
            "name = \"a\"\nurl = \"http://x\"\nheaders.Mcp-Name = \"v\"",
            "backends[0].headers.Mcp-Name = \"Mcp-Name\": expected a header the gateway does not manage",
        ),
        (
            "name = \"a\"\nurl = \"http://x\"\nheaders.Mcp-Param-Region = \"v\"",
            "backends[0].headers.Mcp-Param-Region = \"Mcp-Param-Region\": expected a header the gateway does not",
        ),
        ("name = \"a\"\nurl = \"http://x\"\nera = \"newest\"", "backends[0].era: unknown variant `newest`"),
        (
            "name = \"a\"\nurl = \"http://x\"\ntransport = \"sse\"\nera = \"modern\"",
            "backends[0].era = \"modern\": expected \"auto\" or \"legacy\": transport = \"sse\" is the 2024-11-05",
        ),
        ("name = \"a\"\nurl = \"http://x\"\nheaders.X-A = \"v\\n\"", "backends[0].headers.X-A = \"v\\n\""),
        (
            "name = \"a\"\nurl = \"http://x\"\nheaders.X-A = \"1\"\nheaders.x-a = \"2\"",
            "expected a header set only once",
        ),
    ];
    for (body, expected) in cases {
        error_naming(&format!("[[backends]]\n{body}\n"), expected);
    }
}

#[test]
fn credential_problems_name_backend_and_key() {
    let message = error_naming(
        &format!("{ONE_BACKEND}credential = {{ header = \"Authorization\", env = \"DOCS_TOKEN\" }}\n"),
        "backends[0].credential.env",
    );
    assert!(message.contains("backend `docs`"), "{message}");
    assert!(message.contains("DOCS_TOKEN is not set"), "{message}");
    let message = error_naming(
        &format!("{ONE_BACKEND}credential = {{ header = \"Authorization\", file = \"/nonexistent/sy\" }}\n"),
        "backends[0].credential.file",
    );
    assert!(message.contains("cannot read file /nonexistent/sy"), "{message}");
    let clash = parse_with_env(
        &format!(
            "{ONE_BACKEND}headers.Authorization = \"x\"\n\
             credential = {{ header = \"authorization\", env = \"T\" }}\n"
        ),
        &[("T", "v")],
    )
    .expect_err("clash")
    .to_string();
    assert!(clash.starts_with("test.toml: backends[0].credential.header = \"authorization\""), "{clash}");
}

#[test]
fn oauth_backends_send_authorization_themselves() {
    let oauth = "oauth = { grant = \"authorization_code\" }\n";
    let clash = parse_with_env(
        &format!("{ONE_BACKEND}{oauth}credential = {{ header = \"Authorization\", env = \"T\" }}\n"),
        &[("T", "hunter2")],
    )
    .expect_err("two sources of Authorization")
    .to_string();
    let expected = "backends[0].credential.header = \"authorization\": expected another header than Authorization";
    assert!(clash.contains(expected) && !clash.contains("hunter2"), "{clash}");
    error_naming(&format!("{ONE_BACKEND}{oauth}headers.Authorization = \"x\"\n"), "backends[0].headers.Authorization");
    let stdio = "[[backends]]\nname = \"p\"\ntransport = \"stdio\"\ncommand = \"/bin/sh\"\n";
    error_naming(&format!("{stdio}{oauth}"), "backends[0].oauth: expected no such key");
    error_naming(
        &format!("{ONE_BACKEND}oauth = {{ grant = \"implicit\" }}\n"),
        "backends[0].oauth.grant: unknown variant",
    );
    error_naming(
        &format!("{ONE_BACKEND}oauth = {{ grant = \"client_credentials\", clientid = \"x\" }}\n"),
        "unknown key backends[0].oauth.clientid",
    );
    let other = parse_with_env(
        &format!("{ONE_BACKEND}{oauth}credential = {{ header = \"X-Api-Key\", env = \"T\" }}\n"),
        &[("T", "v")],
    );
    assert!(other.expect("another header is fine").backends[0].oauth.is_some());
}

#[test]
fn duplicate_backend_names_are_refused() {
    let message = error_naming(&format!("{ONE_BACKEND}{ONE_BACKEND}"), "backends[1].name = \"docs\"");
    assert!(message.contains("backends[0] is also named \"docs\""), "{message}");
}

#[test]
fn environment_overrides_the_file() {
    let config = parse_with_env(
        "[server]\nlisten = \"127.0.0.1:1\"\nallowed_hosts = [\"a\"]\n",
        &[
            ("SWITCHYARD_LISTEN", "127.0.0.1:2"),
            ("SWITCHYARD_DATA_DIR", "/data"),
            ("SWITCHYARD_ALLOWED_ORIGINS", "https://a.example, https://b.example"),
            ("SWITCHYARD_ALLOWED_HOSTS", "b,c"),
            ("SWITCHYARD_MAX_BODY", "64KiB"),
            ("SWITCHYARD_SESSION_TTL", "2h"),
            ("SWITCHYARD_SHUTDOWN_DRAIN", "0s"),
            ("SWITCHYARD_DISCOVERY_WAIT", "750ms"),
            ("SWITCHYARD_HEADER_TIMEOUT", "2s"),
            ("SWITCHYARD_BODY_TIMEOUT", "3s"),
            ("SWITCHYARD_IDLE_TIMEOUT", "4s"),
            ("SWITCHYARD_MAX_CONNECTIONS", "5"),
            ("UNRELATED", "x"),
        ],
    )
    .expect("valid");
    let server = &config.server;
    assert_eq!(server.listen.port(), 2);
    assert_eq!(server.session_secret_path(), PathBuf::from("/data/session.key"));
    assert_eq!(server.allowed_origins, ["https://a.example", "https://b.example"]);
    assert_eq!(server.allowed_hosts, ["b", "c"]);
    assert_eq!(server.max_body, 64 << 10);
    assert_eq!(server.session_ttl, Duration::from_secs(7_200));
    assert_eq!(server.shutdown_drain, Duration::ZERO);
    assert_eq!(server.discovery_wait, Duration::from_millis(750));
    assert_eq!(server.header_timeout, Duration::from_secs(2));
    assert_eq!(server.body_timeout, Duration::from_secs(3));
    assert_eq!(server.idle_timeout, Duration::from_secs(4));
    assert_eq!(server.max_connections, 5);
    let keyed = parse_with_env("", &[("SWITCHYARD_SESSION_SECRET_FILE", "/k")]).expect("valid");
    assert_eq!(keyed.server.session_secret_path(), PathBuf::from("/k"));
}

/// The README promises an override for every `[server]` key: the keys are taken from the parser's own list
/// (the hint of an unknown key), so a key added later without its variable fails here.
#[test]
fn every_server_key_has_an_environment_override_and_an_example() {
    let hint = error_naming("[server]\nno_such_key = 1\n", "expected one of");
    let keys: Vec<&str> = hint.split('`').skip(1).step_by(2).filter(|key| *key != "no_such_key").collect();
    assert!(keys.len() >= 12 && keys.contains(&"shutdown_drain"), "{hint}");
    let example = include_str!("../../switchyard.example.toml");
    for key in keys {
        let var = format!("SWITCHYARD_{}", key.to_ascii_uppercase());
        // A blank is no path, and a value with a blank inside is none of the other kinds of value.
        let refused = [" ", "a b"].map(|bad| parse_with_env("", &[(&var, bad)]).err().map(|e| e.to_string()));
        let overrides = format!("overrides server.{key}");
        assert!(refused.iter().flatten().any(|message| message.contains(&overrides)), "{var}: {refused:?}");
        assert!(example.contains(&format!("Env: {var}")), "the example does not document {var}");
        assert!(example.contains(&format!("\n{key} = ")) || example.contains(&format!("# {key} = ")), "{key}");
    }
}

#[test]
fn empty_environment_values_are_ignored() {
    let config = parse_with_env(
        "[server]\nlisten = \"127.0.0.1:1\"\n",
        &[("SWITCHYARD_LISTEN", ""), ("SWITCHYARD_ALLOWED_ORIGINS", "")],
    )
    .expect("valid");
    assert_eq!(config.server.listen.port(), 1);
}

#[test]
fn bad_environment_values_name_the_variable() {
    let cases = [
        ("SWITCHYARD_LISTEN", "nope", "overrides server.listen"),
        ("SWITCHYARD_DATA_DIR", " ", "overrides server.data_dir"),
        ("SWITCHYARD_SESSION_SECRET_FILE", " ", "overrides server.session_secret_file"),
        ("SWITCHYARD_ALLOWED_ORIGINS", "https://ok.example,bad", "\"bad\" is not"),
        ("SWITCHYARD_ALLOWED_HOSTS", "ok, a/b", "\"a/b\" is not"),
        ("SWITCHYARD_MAX_BODY", "lots", "overrides server.max_body"),
        ("SWITCHYARD_SESSION_TTL", "forever", "overrides server.session_ttl"),
        ("SWITCHYARD_SHUTDOWN_DRAIN", "soon", "overrides server.shutdown_drain"),
        ("SWITCHYARD_HEADER_TIMEOUT", "0s", "overrides server.header_timeout"),
        ("SWITCHYARD_BODY_TIMEOUT", "1", "overrides server.body_timeout"),
        ("SWITCHYARD_IDLE_TIMEOUT", "never", "overrides server.idle_timeout"),
        ("SWITCHYARD_MAX_CONNECTIONS", "many", "overrides server.max_connections"),
        ("SWITCHYARD_MAX_CONNECTIONS", "0", "expected a whole number from 1 to 1000000 connections"),
    ];
    for (var, value, expected) in cases {
        let message = parse_with_env("", &[(var, value)]).expect_err(var).to_string();
        assert!(message.starts_with(&format!("environment variable {var} = ")), "{message}");
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn max_revocations_is_read_checked_and_overridden() {
    assert_eq!(parse("").expect("valid").server.max_revocations, server::DEFAULT_MAX_REVOCATIONS);
    assert_eq!(parse("server.max_revocations = 3\n").expect("valid").server.max_revocations, 3);
    let overridden = parse_with_env("server.max_revocations = 3\n", &[("SWITCHYARD_MAX_REVOCATIONS", "50")]);
    assert_eq!(overridden.expect("valid").server.max_revocations, 50);
    for line in ["max_revocations = 0", "max_revocations = -1", "max_revocations = 10000001"] {
        let message = error_naming(&format!("[server]\n{line}\n"), "server.max_revocations = ");
        assert!(message.contains("a whole number from 1 to 10000000 sessions"), "{message}");
    }
    error_naming("server.max_revocations = \"many\"\n", "server.max_revocations: invalid type: string");
    for value in ["many", "0", "1.5"] {
        let message = parse_with_env("", &[("SWITCHYARD_MAX_REVOCATIONS", value)]).expect_err(value).to_string();
        assert!(message.contains("overrides server.max_revocations"), "{message}");
    }
}

#[test]
fn stream_replay_is_a_count_or_zero_for_none() {
    assert_eq!(parse("").expect("valid").server.stream_replay, server::DEFAULT_STREAM_REPLAY);
    assert_eq!(parse("server.stream_replay = 0\n").expect("valid").server.stream_replay, 0, "none kept");
    assert_eq!(parse("server.stream_replay = 9\n").expect("valid").server.stream_replay, 9);
    for line in ["stream_replay = -1", "stream_replay = 100001"] {
        let message = error_naming(&format!("[server]\n{line}\n"), "server.stream_replay = ");
        assert!(message.contains("a whole number from 1 to 100000 events (or 0: none)"), "{message}");
    }
}

#[test]
fn max_revocations_per_owner_follows_the_list_unless_set() {
    let share = |toml: &str, env: &[(&str, &str)]| parse_with_env(toml, env).map(|c| c.server.revocations_per_owner());
    assert_eq!(share("", &[]).expect("valid"), server::DEFAULT_MAX_REVOCATIONS / 4);
    assert_eq!(share("server.max_revocations = 3\n", &[]).expect("valid"), 1, "at least one");
    assert_eq!(share("server.max_revocations = 40\n", &[("SWITCHYARD_MAX_REVOCATIONS", "80")]).expect("valid"), 20);
    let set = "server.max_revocations = 40\nserver.max_revocations_per_owner = 40\n";
    assert_eq!(share(set, &[]).expect("valid"), 40);
    assert_eq!(share(set, &[("SWITCHYARD_MAX_REVOCATIONS_PER_OWNER", "7")]).expect("valid"), 7);
    for line in ["max_revocations_per_owner = 0", "max_revocations_per_owner = 10000001"] {
        let message = error_naming(&format!("[server]\n{line}\n"), "server.max_revocations_per_owner = ");
        assert!(message.contains("a whole number from 1 to 10000000 sessions"), "{message}");
    }
    let message = share("", &[("SWITCHYARD_MAX_REVOCATIONS_PER_OWNER", "0")]).expect_err("zero").to_string();
    assert!(message.contains("overrides server.max_revocations_per_owner"), "{message}");
}

#[test]
fn demo_configuration_takes_overrides() {
    let config = Config::default_demo().with_env_overrides([("SWITCHYARD_LISTEN", "127.0.0.1:9999")]).expect("valid");
    assert_eq!(config.server.listen.port(), 9999);
    assert!(Config::default_demo().with_env_overrides([("SWITCHYARD_LISTEN", "x")]).is_err());
}

#[test]
fn load_reads_files_and_names_them() {
    let dir = scratch_dir("load");
    let path = dir.join("switchyard.toml");
    std::fs::write(&path, ONE_BACKEND).expect("write");
    let config = Config::load(&path).expect("valid");
    assert_eq!(config.backends[0].name, "docs");

    std::fs::write(&path, "[server]\nlisten = 1\n").expect("write");
    let message = Config::load(&path).expect_err("invalid").to_string();
    assert!(message.starts_with(&format!("{}: server.listen", path.display())), "{message}");

    let missing = dir.join("missing.toml");
    let message = Config::load(&missing).expect_err("missing").to_string();
    assert!(message.starts_with(&format!("{}: cannot read", missing.display())), "{message}");
}

#[test]
fn locate_prefers_the_flag_then_the_variable_then_the_default_file() {
    let dir = scratch_dir("find");
    let default_file = dir.join("switchyard.toml");
    assert_eq!(locate_in(None, None, &default_file).expect("nothing to find"), None);
    std::fs::write(&default_file, ONE_BACKEND).expect("write");
    assert_eq!(locate_in(None, None, &default_file).expect("found"), Some(default_file.clone()));
    let empty = String::new();
    assert_eq!(locate_in(None, Some(&empty), &default_file).expect("empty is unset"), Some(default_file.clone()));

    let from_env = dir.join("env.toml");
    std::fs::write(&from_env, "").expect("write");
    let variable = from_env.display().to_string();
    assert_eq!(locate_in(None, Some(&variable), &default_file).expect("found"), Some(from_env.clone()));
    let explicit = dir.join("other.toml");
    std::fs::write(&explicit, "").expect("write");
    assert_eq!(locate_in(Some(&explicit), Some(&variable), &default_file).expect("found"), Some(explicit));

    let missing = dir.join("missing.toml");
    let by_flag = locate_in(Some(&missing), None, &default_file).expect_err("missing").to_string();
    assert_eq!(by_flag, format!("{}: no such configuration file (named by --config)", missing.display()));
    let gone = missing.display().to_string();
    let by_env = locate_in(None, Some(&gone), &default_file).expect_err("missing").to_string();
    assert_eq!(by_env, format!("{gone}: no such configuration file (named by SWITCHYARD_CONFIG)"));
}

#[test]
fn a_file_anchors_its_relative_paths_and_expands_its_variables() {
    let dir = scratch_dir("anchor");
    let path = dir.join("switchyard.toml");
    std::fs::write(&path, "[server]\ndata_dir = \"${STATE:-state}\"\n").expect("write");
    let config = Config::load(&path).expect("valid");
    assert_eq!(config.server.data_dir, dir.join("state"), "next to the file, not in the working directory");
    let text = "[server]\ndata_dir = \"state\"\n";
    let config = parse(text).expect("valid");
    assert_eq!(config.server.data_dir, PathBuf::from("state"), "text without a file stays relative");
}

#[test]
fn an_unreadable_file_says_why_once() {
    let dir = scratch_dir("unreadable");
    let message = Config::load(&dir).expect_err("a directory").to_string();
    assert_eq!(message.matches("Is a directory").count(), 1, "{message}");
}

#[test]
fn variables_expand_in_values_and_env_credentials_keep_naming_a_variable() {
    let text = "[[backends]]\nname = \"gh\"\nurl = \"https://${API_HOST}/mcp\"\n\
                headers = { X-Team = \"${TEAM:-platform}\" }\ncredential = { header = \"Authorization\", env = \"TOKEN\" }\n";
    let config = parse_with_env(text, &[("API_HOST", "api.example.com"), ("TOKEN", "t0k")]).expect("valid");
    let backend = config.backend("gh").expect("configured");
    assert_eq!(backend.url().map(|url| url.as_str()), Some("https://api.example.com/mcp"));
    assert_eq!(backend.headers["x-team"], "platform");
    let credential = backend.credential.as_ref().expect("credential");
    assert_eq!(credential.source, CredentialSource::Env("TOKEN".into()));
    assert_eq!(credential.value.expose(), "t0k");
    let message = error_naming(text, "backends[0].url");
    assert!(
        message.ends_with("backends[0].url: environment variable API_HOST is not set (or write ${API_HOST:-default})"),
        "{message}"
    );
}

#[test]
fn openapi_backends_take_their_own_keys_only() {
    let api = "[[backends]]\nname = \"shop\"\ntransport = \"openapi\"\nspec = \"shop.yaml\"\n";
    let config = parse(api).expect("a spec is enough");
    let Endpoint::OpenApi(settings) = &config.backends[0].endpoint else { panic!("an openapi endpoint") };
    assert_eq!((settings.url.as_ref(), settings.idempotency_header.as_ref()), (None, None));
    assert_eq!(settings.idempotent_retries, crate::config::DEFAULT_IDEMPOTENT_RETRIES);
    error_naming("[[backends]]\nname = \"shop\"\ntransport = \"openapi\"\n", "backends[0].spec");
    error_naming(&format!("{api}command = \"npx\"\n"), "backends[0].command");
    error_naming(&format!("{api}idempotent_operations = [\"pay\"]\n"), "backends[0].idempotent_operations");
    error_naming(&format!("{api}idempotent_retries = 11\n"), "backends[0].idempotent_retries");
    error_naming(&format!("{api}idempotency_header = \"Content-Type\"\n"), "backends[0].idempotency_header");
    error_naming(&format!("{api}spec = \"http://example.com/a.json\"\n").replace("spec = \"shop.yaml\"\n", ""), "spec");
    let oauth = format!(
        "{api}[backends.oauth]\ngrant = \"client_credentials\"\nclient_id = \"c\"\nclient_secret = {{ env = \"S\" }}\n"
    );
    error_naming(&oauth, "backends[0].url");
    let mcp = "[[backends]]\nname = \"gh\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
    error_naming(&format!("{mcp}spec = \"a.yaml\"\n"), "backends[0].spec");
    error_naming(&format!("{mcp}idempotency_header = \"Idempotency-Key\"\n"), "backends[0].idempotency_header");
    let stdio = "[[backends]]\nname = \"f\"\ntransport = \"stdio\"\ncommand = \"/bin/sh\"\n";
    error_naming(&format!("{stdio}operations = {{ deny = [\"x\"] }}\n"), "backends[0].operations");
}

#[test]
fn a_few_sections_are_read_without_the_backends_and_their_secrets() {
    let dir = scratch_dir("sections");
    let path = dir.join("switchyard.toml");
    let digest = "a".repeat(64);
    let text = format!(
        "[approvals]\napprovers = [\"group:ops\"]\n[[auth.api_keys]]\nprincipal = \"alice\"\nsha256 = \"{digest}\"\n\
         groups = [\"ops\"]\n[[backends]]\nname = \"gh\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
         headers = {{ Authorization = \"${{SWITCHYARD_TEST_NEVER_SET_SECRET}}\" }}\n"
    );
    std::fs::write(&path, text).expect("write");
    assert!(Config::find(Some(&path)).is_err(), "the whole file needs the backend's secret");
    let read = Config::find_sections(Some(&path), &["server", "ledger", "approvals", "auth"]).expect("read");
    assert_eq!((read.approvals.approvers.len(), read.auth.api_keys.len()), (1, 1));
    assert!(read.backends.is_empty(), "the backends are not read");
}

#[test]
fn tasks_take_gateway_passthrough_or_off_and_openapi_backends_pass_nothing_through() {
    let mcp = "[[backends]]\nname = \"gh\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
    for (value, mode) in
        [("gateway", TaskMode::Gateway), ("passthrough", TaskMode::Passthrough), ("off", TaskMode::Off)]
    {
        let config = parse(&format!("{mcp}tasks = \"{value}\"\n")).expect("a valid mode");
        assert_eq!(config.backends[0].tasks, mode, "{value}");
    }
    error_naming(&format!("{mcp}tasks = \"backend\"\n"), "backends[0].tasks");
    let api = "[[backends]]\nname = \"shop\"\ntransport = \"openapi\"\nspec = \"shop.yaml\"\n";
    error_naming(&format!("{api}tasks = \"passthrough\"\n"), "backends[0].tasks");
    assert!(parse(&format!("{api}tasks = \"off\"\n")).is_ok());
}

#[test]
fn a_credential_scheme_is_for_openapi_backends_only() {
    let api = "[[backends]]\nname = \"pets\"\ntransport = \"openapi\"\nspec = \"pets.yaml\"\n";
    let scheme = "credential = { scheme = \"api_key\", env = \"K\" }\n";
    let config = parse_with_env(&format!("{api}{scheme}"), &[("K", "k")]).expect("an openapi backend takes it");
    let credential = config.backends[0].credential.as_ref().expect("credential");
    assert_eq!(credential.target, CredentialTarget::Scheme("api_key".into()));
    let mcp = parse_with_env(&format!("{ONE_BACKEND}{scheme}"), &[("K", "k")]).expect_err("refused").to_string();
    let expected = "backends[0].credential.scheme = \"api_key\": expected `header` on this backend";
    assert!(mcp.contains(expected), "{mcp}");
}
