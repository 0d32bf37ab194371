//! What a configuration reload changes: the running configuration compared with the file read again, key by
//! key.
//!
//! Rules:
//! - A backend is added, removed, *replaced* (anything about how it is reached changed: URL, transport, command,
//!   environment, headers, credential, OAuth, timeout, process settings — new sessions, rediscovered) or
//!   *re-exposed* (only `prefix`, `resource_prefix`, `tools` or `catalog_mode` changed — sessions and listing kept).
//! - Keys the running gateway cannot change are *restart-only*: `server.listen` (the bound socket), whether
//!   `server.tls_cert` / `tls_key` are set (TLS on or off; other paths to the files apply, and the files are read
//!   again on every reload),
//!   `server.data_dir` and `server.session_secret_file` (the files it opened), `server.session_ttl` and
//!   `server.max_revocations` (a deleted session's revocation lasts its session's lifetime: a longer lifetime
//!   would let a deleted session come back) and `server.max_revocations_per_owner` (the list's bounds are set
//!   once, when it is built), the whole `[ledger]` (its store, leases and upkeep are opened
//!   once) and the whole `[telemetry]` (the metrics listener is bound, the log writer and the trace exporter installed once). A reload reports them and keeps their running values ([`applicable`]); it never ignores them
//!   silently.
//! - Every field of `Config` and `ServerConfig` is named here (destructured without `..`), so a new key does not
//!   compile until it is classified.

use crate::config::{BackendConfig, Config, LedgerConfig, ServerConfig, TelemetryConfig};

/// How the file differs from the running configuration.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ConfigDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Backends reached differently: new sessions and a new discovery.
    pub replaced: Vec<String>,
    /// Backends whose tools are exposed differently (prefix, resource prefix, tool filters) only.
    pub re_exposed: Vec<String>,
    /// Whether the order of the backends (which one keeps a colliding name) changed.
    pub reordered: bool,
    pub policies: bool,
    /// Whether `[[limits]]` changed (the counters of each unchanged limit are kept).
    pub limits: bool,
    /// Whether `[auth]` changed (API keys, JWT settings, anonymous agents).
    pub auth: bool,
    /// Whether `[catalog]` changed (how tools are offered: every definition or search).
    pub catalog: bool,
    /// Reloadable `[server]` keys that changed, dotted.
    pub server: Vec<&'static str>,
    /// Keys that changed but need a restart, dotted.
    pub restart_only: Vec<&'static str>,
}

impl ConfigDiff {
    pub fn between(running: &Config, file: &Config) -> ConfigDiff {
        let Config { server, ledger, backends, catalog, auth, policies, approvals, limits, telemetry, audit } = file;
        let mut diff = ConfigDiff {
            auth: running.auth != *auth,
            catalog: running.catalog != *catalog,
            policies: running.policies != *policies,
            limits: running.limits != *limits,
            ..Default::default()
        };
        if running.approvals != *approvals {
            diff.restart_only.push("approvals");
        }
        if running.audit != *audit {
            diff.restart_only.push("audit");
        }
        diff.compare_server(&running.server, server);
        diff.compare_ledger(&running.ledger, ledger);
        diff.compare_telemetry(&running.telemetry, telemetry);
        diff.compare_backends(&running.backends, backends);
        diff
    }

    /// Whether nothing the reload would apply changed (restart-only keys aside).
    pub fn is_empty(&self) -> bool {
        let ConfigDiff {
            added,
            removed,
            replaced,
            re_exposed,
            reordered,
            policies,
            limits,
            auth,
            catalog,
            server,
            restart_only: _,
        } = self;
        [added, removed, replaced, re_exposed].iter().all(|names| names.is_empty())
            && !reordered
            && !policies
            && !limits
            && !auth
            && !catalog
            && server.is_empty()
    }

    /// One line per kind of change, for the operator.
    pub fn summary(&self) -> Vec<String> {
        let named = |what: &str, names: &[String]| (!names.is_empty()).then(|| format!("{what}: {}", names.join(", ")));
        let flag = |what: &str, set: bool| set.then(|| what.to_owned());
        [
            named("backends added", &self.added),
            named("backends removed (their running calls finish first)", &self.removed),
            named("backends replaced (new sessions, rediscovered)", &self.replaced),
            named("backends exposed differently (prefix or tool filters)", &self.re_exposed),
            flag("backend order changed", self.reordered),
            flag("policies changed", self.policies),
            flag("limits changed", self.limits),
            flag("agent authentication changed", self.auth),
            flag("catalog mode changed", self.catalog),
            (!self.server.is_empty()).then(|| format!("changed: {}", self.server.join(", "))),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    fn compare_server(&mut self, running: &ServerConfig, file: &ServerConfig) {
        let ServerConfig {
            listen,
            data_dir,
            session_secret_file,
            allowed_origins,
            allowed_hosts,
            cors_credentials,
            max_body,
            session_ttl,
            max_revocations,
            max_revocations_per_owner,
            stream_replay,
            shutdown_drain,
            shutdown_grace,
            discovery_wait,
            max_backend_sessions,
            max_backend_sessions_per_principal,
            header_timeout,
            body_timeout,
            idle_timeout,
            max_connections,
            max_connections_per_principal,
            max_streams_per_session,
            max_stdio_processes,
            public_url,
            tls,
        } = file;
        let restart_only = [
            ("server.listen", running.listen != *listen),
            ("server.data_dir", running.data_dir != *data_dir),
            ("server.session_secret_file", running.session_secret_file != *session_secret_file),
            ("server.session_ttl", running.session_ttl != *session_ttl),
            ("server.max_revocations", running.max_revocations != *max_revocations),
            ("server.max_revocations_per_owner", running.max_revocations_per_owner != *max_revocations_per_owner),
            ("server.max_backend_sessions", running.max_backend_sessions != *max_backend_sessions),
            ("server.tls_cert and tls_key (TLS on or off)", running.tls.is_some() != tls.is_some()),
            ("server.stream_replay", running.stream_replay != *stream_replay),
        ];
        let reloadable = [
            ("server.allowed_origins", running.allowed_origins != *allowed_origins),
            ("server.allowed_hosts", running.allowed_hosts != *allowed_hosts),
            ("server.cors_credentials", running.cors_credentials != *cors_credentials),
            ("server.max_body", running.max_body != *max_body),
            ("server.shutdown_drain", running.shutdown_drain != *shutdown_drain),
            ("server.shutdown_grace", running.shutdown_grace != *shutdown_grace),
            ("server.tls_cert or tls_key", running.tls.is_some() && tls.is_some() && running.tls != *tls),
            ("server.discovery_wait", running.discovery_wait != *discovery_wait),
            (
                "server.max_backend_sessions_per_principal",
                running.max_backend_sessions_per_principal != *max_backend_sessions_per_principal,
            ),
            ("server.header_timeout", running.header_timeout != *header_timeout),
            ("server.body_timeout", running.body_timeout != *body_timeout),
            ("server.idle_timeout", running.idle_timeout != *idle_timeout),
            ("server.max_connections", running.max_connections != *max_connections),
            (
                "server.max_connections_per_principal",
                running.max_connections_per_principal != *max_connections_per_principal,
            ),
            ("server.max_streams_per_session", running.max_streams_per_session != *max_streams_per_session),
            ("server.max_stdio_processes", running.max_stdio_processes != *max_stdio_processes),
            ("server.public_url", running.public_url != *public_url),
        ];
        self.restart_only.extend(restart_only.iter().filter(|(_, changed)| *changed).map(|(key, _)| *key));
        self.server.extend(reloadable.iter().filter(|(_, changed)| *changed).map(|(key, _)| *key));
    }

    fn compare_ledger(&mut self, running: &LedgerConfig, file: &LedgerConfig) {
        let LedgerConfig { url, retention, max_result, lease, encrypt_results } = file;
        let keys = [
            ("ledger.encrypt_results", running.encrypt_results != *encrypt_results),
            ("ledger.url", running.url != *url),
            ("ledger.retention", running.retention != *retention),
            ("ledger.max_result", running.max_result != *max_result),
            ("ledger.lease", running.lease != *lease),
        ];
        self.restart_only.extend(keys.iter().filter(|(_, changed)| *changed).map(|(key, _)| *key));
    }

    fn compare_telemetry(&mut self, running: &TelemetryConfig, file: &TelemetryConfig) {
        let TelemetryConfig { metrics_listen, metrics_tls, log_format, traces } = file;
        let keys = [
            ("telemetry.metrics_listen", running.metrics_listen != *metrics_listen),
            ("telemetry.metrics_tls", running.metrics_tls != *metrics_tls),
            ("telemetry.log_format", running.log_format != *log_format),
            ("telemetry traces (otlp_endpoint, service_name, traces_sampler, OTEL_*)", running.traces != *traces),
        ];
        self.restart_only.extend(keys.iter().filter(|(_, changed)| *changed).map(|(key, _)| *key));
    }

    fn compare_backends(&mut self, running: &[BackendConfig], file: &[BackendConfig]) {
        for backend in file {
            let name = backend.name.clone();
            match running.iter().find(|old| old.name == backend.name) {
                None => self.added.push(name),
                Some(old) if old == backend => {}
                Some(old) if reached_alike(old, backend) => self.re_exposed.push(name),
                Some(_) => self.replaced.push(name),
            }
        }
        let kept = |backend: &&BackendConfig| file.iter().any(|new| new.name == backend.name);
        self.removed = running.iter().filter(|backend| !kept(backend)).map(|backend| backend.name.clone()).collect();
        let order = |backends: &[BackendConfig]| -> Vec<String> {
            let both = |name: &String| running.iter().any(|b| &b.name == name) && file.iter().any(|b| &b.name == name);
            backends.iter().map(|backend| backend.name.clone()).filter(both).collect()
        };
        self.reordered = order(running) != order(file);
    }
}

/// Whether two entries of one backend differ at most in how its tools are exposed (no new session needed).
fn reached_alike(old: &BackendConfig, new: &BackendConfig) -> bool {
    let exposed_alike = BackendConfig {
        prefix: new.prefix.clone(),
        resource_prefix: new.resource_prefix.clone(),
        tools: new.tools.clone(),
        catalog_mode: new.catalog_mode,
        tasks: new.tasks,
        ..old.clone()
    };
    exposed_alike == *new
}

/// What a reload applies: the file, with the running value of every restart-only key (listed in
/// [`ConfigDiff::between`]).
pub fn applicable(running: &Config, file: Config) -> Config {
    let server = ServerConfig {
        listen: running.server.listen,
        data_dir: running.server.data_dir.clone(),
        session_secret_file: running.server.session_secret_file.clone(),
        session_ttl: running.server.session_ttl,
        max_revocations: running.server.max_revocations,
        max_revocations_per_owner: running.server.max_revocations_per_owner,
        max_backend_sessions: running.server.max_backend_sessions,
        tls: match (&running.server.tls, file.server.tls) {
            // Whether the listener speaks TLS is set when it starts; which files it reads is not.
            (Some(_), Some(files)) => Some(files),
            (running, _) => running.clone(),
        },
        ..file.server
    };
    let (ledger, approvals, telemetry) = (running.ledger.clone(), running.approvals.clone(), running.telemetry.clone());
    Config { server, ledger, approvals, telemetry, audit: running.audit.clone(), ..file }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
