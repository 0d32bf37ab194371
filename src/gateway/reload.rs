//! Live reload: `SIGHUP` or `switchyard reload` re-read the configuration file, and
//! what changed takes effect without dropping agent sessions or the calls running on unchanged backends.
//!
//! Rules:
//! - One reload at a time: requests queue on one worker, which owns everything a reload replaces ([`Live`]).
//! - The file is judged exactly as at start: loaded and validated by `config` (the error is the text
//!   `switchyard check` prints), then the serving rule (`Config::check_serving`, the text `serve` prints). A
//!   refused file changes nothing: the running configuration keeps serving.
//! - Everything that can fail is built before anything is swapped (a new authenticator, a new OAuth client);
//!   then each part's snapshot is replaced — the router's targets and policies with the catalog's specs, the
//!   front's settings, the client's and the listener's limits — and requests already running keep the snapshot
//!   they took.
//! - A removed or replaced backend's sessions are retired by the backend client (each ends once its running
//!   calls have); its discovery task is stopped; an added or replaced backend gets a new discovery task. Targets
//!   built by a reload carry its revision, so no session of an older revision serves a newer target.
//! - Restart-only keys ([`super::diff`]) are reported and keep their running values.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::diff::{ConfigDiff, applicable};
use super::front_settings::{agent_auth, authenticator, callback, connection_limits, front_settings};
use super::openapi::Apis;
use super::{backends, limits, oauth, policies};
use crate::auth::Authenticator;
use crate::backend::mcp_client::{McpBackendClient, error_chain};
use crate::backend::oauth::OAuthClient;
use crate::backend::stdio::StdioOptions;
use crate::config::{BackendConfig, Config, Endpoint, LogFormat, OAuthConfig, ServerConfig, TlsFiles};
use crate::front::Front;
use crate::front::listener::ConnectionLimits;
use crate::front::tls::{self, ServerTls};
use crate::router::{CallRouter, Routing, discovery};
use crate::swap::Swap;
use crate::telemetry::Metrics;
use crate::telemetry::audit::AuditEvent;

/// Where a reload reads the configuration: the file the gateway started from (`None`: it started without one)
/// and the command line's overrides of it.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    pub path: Option<PathBuf>,
    /// `serve --listen`, which replaces `[server] listen`.
    pub listen: Option<SocketAddr>,
    /// `serve --log-format`, which replaces `[telemetry] log_format`.
    pub log_format: Option<LogFormat>,
}

/// A reload that was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub file: PathBuf,
    /// One line per kind of change (none: the file changes nothing that can change while serving).
    pub changes: Vec<String>,
    /// Keys that changed in the file but keep their running values until a restart, dotted.
    pub needs_restart: Vec<&'static str>,
}

impl fmt::Display for Reloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        if self.changes.is_empty() {
            write!(f, "reloaded {file}: nothing to change")?;
        } else {
            write!(f, "reloaded {file}:")?;
            self.changes.iter().try_for_each(|change| write!(f, "\n  {change}"))?;
        }
        if !self.needs_restart.is_empty() {
            write!(f, "\nnot applied, these keys need a restart: {}", self.needs_restart.join(", "))?;
        }
        Ok(())
    }
}

/// Why a reload was refused: the text `switchyard check` (or `serve`) prints for the file. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

type Outcome = Result<Reloaded, Refused>;
type Reply = oneshot::Sender<Outcome>;
/// The requests a running gateway's reload worker takes.
pub type Requests = mpsc::Receiver<Reply>;

/// Asks a running gateway to reload its configuration (cheap to clone; `SIGHUP` and the control socket hold one).
#[derive(Debug, Clone)]
pub struct Reloader {
    requests: mpsc::Sender<Reply>,
}

impl Reloader {
    /// Reloads, once the reloads asked before have been done; what it did, or why it refused.
    pub async fn reload(&self) -> Outcome {
        let stopped = || Refused("the gateway is stopping; nothing was reloaded".into());
        let (reply, answer) = oneshot::channel();
        self.requests.send(reply).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// A reloader and the requests it sends.
pub(super) fn channel() -> (Reloader, Requests) {
    // Asking twice while one reload runs queues the second; more is pointless, so a short queue suffices.
    let (requests, received) = mpsc::channel(8);
    (Reloader { requests }, received)
}

/// The discovery task of each configured backend; dropping it ends them all.
pub(super) struct Discovery {
    router: Arc<CallRouter>,
    tasks: HashMap<String, JoinHandle<()>>,
}

impl Discovery {
    pub(super) fn new(router: &Arc<CallRouter>) -> Self {
        Self { router: Arc::clone(router), tasks: HashMap::new() }
    }

    /// Starts (or restarts) discovering `backend` and watching its health.
    pub(super) fn start(&mut self, backend: &BackendConfig) {
        self.stop(&backend.name);
        let task = discovery::spawn(&self.router, &backend.name, backend.pins.refresh, backend.health_interval);
        self.tasks.insert(backend.name.clone(), task);
    }

    pub(super) fn stop(&mut self, backend: &str) {
        if let Some(task) = self.tasks.remove(backend) {
            task.abort();
        }
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.tasks.values().for_each(JoinHandle::abort);
    }
}

/// Everything a reload replaces or starts, owned by the reload worker.
pub(super) struct Live {
    /// The configuration in force, `listen` being the bound address.
    pub(super) config: Config,
    /// `listen` as configured (port 0 included): what the file's `listen` is compared with.
    pub(super) configured_listen: SocketAddr,
    pub(super) front: Arc<Front>,
    pub(super) router: Arc<CallRouter>,
    pub(super) client: Arc<McpBackendClient>,
    pub(super) oauth: Option<Arc<OAuthClient>>,
    /// What new stdio backends' processes are started with.
    pub(super) stdio: StdioOptions,
    pub(super) discovery: Discovery,
    pub(super) limits: watch::Sender<ConnectionLimits>,
    /// `server.shutdown_drain`, read when the shutdown signal comes.
    pub(super) drain: Arc<Swap<Duration>>,
    /// `server.shutdown_grace`, read when the shutdown signal comes.
    pub(super) grace: Arc<Swap<Duration>>,
    /// The listeners' TLS (`None`: plain HTTP, which a reload cannot change): re-read from its files on every
    /// reload.
    pub(super) tls: Option<Arc<ServerTls>>,
    /// Counts applied reloads; the targets a reload builds carry it.
    pub(super) revision: u64,
}

/// Serves reload requests one at a time; once nobody can ask any more, keeps `live` (its discovery tasks) until
/// the gateway stops.
pub(super) async fn serve_requests(mut live: Live, source: ConfigSource, mut requests: Requests) {
    while let Some(reply) = requests.recv().await {
        let outcome = live.reload(&source).await;
        audit_reload(&live.front.metrics, &outcome);
        match &outcome {
            Ok(reloaded) => {
                tracing::info!(changes = %reloaded.changes.join("; "), "configuration reloaded from {}", reloaded.file.display());
                if !reloaded.needs_restart.is_empty() {
                    tracing::warn!(keys = %reloaded.needs_restart.join(", "), "changed keys keep their running values until a restart");
                }
            }
            Err(refused) => {
                tracing::error!(error = %refused, "configuration reload refused; the running configuration keeps serving");
            }
        }
        // The asker may have gone (a SIGHUP does not wait); the outcome is logged either way.
        let _ = reply.send(outcome);
    }
    std::future::pending::<()>().await;
}

/// The reload's audit event: the file, and what changed or why it was refused.
fn audit_reload(metrics: &Metrics, outcome: &Outcome) {
    let Some(audit) = metrics.audit() else { return };
    let event = match outcome {
        Ok(reloaded) => AuditEvent::new("reload")
            .field("file", reloaded.file.display().to_string())
            .field("outcome", "applied")
            .field("changes", reloaded.changes.clone())
            .field("needs_restart", reloaded.needs_restart.clone()),
        Err(refused) => AuditEvent::new("reload").field("outcome", "refused").field("error", refused.to_string()),
    };
    audit.record(event);
}

/// What a reload builds before anything is swapped (the steps that can fail).
struct Prepared {
    auth: Arc<Authenticator>,
    /// The documents of the openapi backends of the new configuration.
    apis: Apis,
    oauth: Option<Arc<OAuthClient>>,
    /// Whether `oauth` is a new client (every OAuth backend then needs a target bound to it).
    oauth_renewed: bool,
    redirect_uri: Option<reqwest::Url>,
}

fn refused(error: &dyn std::error::Error) -> Refused {
    Refused(error_chain(error))
}

impl Live {
    async fn reload(&mut self, source: &ConfigSource) -> Outcome {
        let Some(path) = &source.path else {
            return Err(Refused(
                "this gateway started without a configuration file (it serves the embedded demo backend), so there \
                 is nothing to re-read; restart it with `--config`"
                    .into(),
            ));
        };
        let mut file = Config::load(path).map_err(|error| refused(&error))?;
        if let Some(listen) = source.listen {
            file.server.listen = listen;
        }
        if let Some(format) = source.log_format {
            file.telemetry.log_format = format;
        }
        let running = Config { server: self.as_configured(), ..self.config.clone() };
        let mut diff = ConfigDiff::between(&running, &file);
        let mut next = applicable(&running, file);
        next.check_serving().map_err(|error| refused(&error))?;
        next.server.listen = self.config.server.listen;
        // Documents are read again on every reload: an edited one replaces its backend like an edited entry.
        let apis = Apis::load(&next).await.map_err(|error| refused(&error))?;
        for name in apis.changed(&self.router.routing().targets) {
            if !diff.added.contains(&name) && !diff.replaced.contains(&name) {
                diff.re_exposed.retain(|exposed| *exposed != name);
                diff.replaced.push(name);
            }
        }
        let tls = self.read_tls(&next)?;
        if !diff.is_empty() {
            let prepared = self.prepare(&next, apis).await?;
            let anonymous_changed = next.auth.anonymous_is_one_user() != self.config.auth.anonymous_is_one_user();
            if prepared.oauth_renewed || anonymous_changed {
                bind_to_new_oauth_client(&mut diff, &next);
            }
            self.commit(next, &diff, prepared);
        }
        let mut changes = diff.summary();
        if let (Some(running), Some((acceptor, files))) = (&self.tls, tls) {
            running.replace(acceptor);
            changes.push(format!("TLS certificate re-read from {} (new connections)", files.cert.display()));
        }
        Ok(Reloaded { file: path.clone(), changes, needs_restart: diff.restart_only })
    }

    /// The TLS files of `next`, read again (a certificate renewed in place is served from now on), when this
    /// gateway serves TLS; they are read before anything is swapped, so an unreadable or mismatched pair refuses
    /// the reload.
    fn read_tls(&self, next: &Config) -> Result<Option<(TlsAcceptor, TlsFiles)>, Refused> {
        let (Some(_), Some(files)) = (&self.tls, &next.server.tls) else { return Ok(None) };
        let acceptor = tls::acceptor(&files.cert, &files.key).map_err(|error| refused(&error))?;
        Ok(Some((acceptor, files.clone())))
    }

    /// The running `[server]` with `listen` as configured.
    fn as_configured(&self) -> ServerConfig {
        ServerConfig { listen: self.configured_listen, ..self.config.server.clone() }
    }

    /// Builds what may fail: the authenticator when agent authentication changed (a JWKS file may not load), the
    /// OAuth client when a backend's OAuth settings changed.
    async fn prepare(&self, next: &Config, apis: Apis) -> Result<Prepared, Refused> {
        let auth = if agent_auth(next) == agent_auth(&self.config) {
            Arc::clone(&self.front.settings.load().auth)
        } else {
            Arc::new(authenticator(next).await.map_err(|error| refused(&error))?)
        };
        let oauth_renewed = oauth_backends(next) != oauth_backends(&self.config);
        let oauth = if oauth_renewed {
            oauth::client(next, &self.router.ledger().store).map_err(|error| refused(&error))?
        } else {
            self.oauth.clone()
        };
        let redirect_uri = match &oauth {
            Some(_) => Some(oauth::redirect_uri(&next.server.public_url()).map_err(|error| refused(&error))?),
            None => None,
        };
        Ok(Prepared { auth, apis, oauth, oauth_renewed, redirect_uri })
    }

    /// Swaps every part's snapshot for `next` (nothing here can fail), then retires and rediscovers backends.
    fn commit(&mut self, next: Config, diff: &ConfigDiff, prepared: Prepared) {
        self.revision += 1;
        let renewed: Vec<&String> = diff.added.iter().chain(&diff.replaced).collect();
        let running = self.router.routing();
        let targets = next
            .backends
            .iter()
            .filter_map(|backend| {
                let name: Arc<str> = backend.name.as_str().into();
                let target = match running.targets.get(&name) {
                    Some(target) if !renewed.contains(&&backend.name) => target.clone(),
                    _ => backends::target(
                        backend,
                        prepared.oauth.as_ref(),
                        &self.stdio,
                        next.auth.anonymous_is_one_user(),
                        &prepared.apis,
                    )?
                    .with_revision(self.revision),
                };
                Some((name, target))
            })
            .collect();
        let specs = next.backends.iter().map(backends::catalog_spec).collect();
        self.router.reconfigure(
            Routing {
                targets,
                policies: policies(&next),
                discovery_wait: next.server.discovery_wait,
                limits: limits(&next),
                pins: backends::pin_rules(&next),
                catalog: backends::catalog_modes(&next),
                tasks: backends::task_backends(&next),
            },
            specs,
            diff.auth,
        );
        if let (Some(oauth), Some(uri)) = (&prepared.oauth, prepared.redirect_uri) {
            oauth.set_redirect_uri(uri);
        }
        let authorization = callback(prepared.oauth.as_ref(), &self.router);
        self.front.settings.store(front_settings(&next, prepared.auth, authorization));
        let server = &next.server;
        self.client.set_limits(server.max_backend_sessions_per_principal, server.max_stdio_processes);
        self.limits.send_replace(connection_limits(server));
        self.drain.store(server.shutdown_drain);
        self.grace.store(server.shutdown_grace);
        for gone in diff.removed.iter().chain(&diff.replaced) {
            self.client.retire_backend(gone);
            self.discovery.stop(gone);
        }
        for backend in next.backends.iter().filter(|backend| renewed.contains(&&backend.name)) {
            self.discovery.start(backend);
        }
        self.oauth = prepared.oauth;
        self.config = next;
    }
}

/// What the OAuth client is built from: each OAuth backend's name, endpoint and settings.
fn oauth_backends(config: &Config) -> Vec<(&str, &Endpoint, &OAuthConfig)> {
    config
        .backends
        .iter()
        .filter_map(|backend| Some((backend.name.as_str(), &backend.endpoint, backend.oauth.as_ref()?)))
        .collect()
}

/// A new OAuth client replaces every OAuth backend (its target must use the new client), changed or not; so does a
/// change of who `anonymous` is (its targets refuse it or not, `backends::target`).
fn bind_to_new_oauth_client(diff: &mut ConfigDiff, next: &Config) {
    let untouched: Vec<String> = next
        .backends
        .iter()
        .filter(|backend| backend.oauth.is_some())
        .map(|backend| backend.name.clone())
        .filter(|name| !diff.added.contains(name) && !diff.replaced.contains(name))
        .collect();
    diff.re_exposed.retain(|name| !untouched.contains(name));
    diff.replaced.extend(untouched);
}
