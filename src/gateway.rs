//! The composition root: builds the gateway's parts from a validated [`Config`] and wires them in the one
//! direction data flows — front → auth → router → (ledger, catalog, backend client) — with `mcp` the vocabulary
//! all of them share and the configuration lowered here into each part's plain types.
//!
//! Owns: the translation of configuration into each part's own inputs (catalog specs, each backend's endpoint
//! template, the client's session-table bounds, the front's admission rules, authenticator and session sealer, the
//! router's policies, the tracer of `[telemetry]` given to the front and the backend client), starting the
//! background tasks (discovery, delivering backends' session messages, ledger upkeep, span export), and the
//! embedded demo backend of a first run. No behaviour of its own beyond wiring; nothing else reads the configuration types of
//! other parts. A configuration reload ([`reload`]) lowers the new configuration the same way ([`backends`],
//! [`front_settings`](mod@front_settings)) and swaps each part's snapshot; [`diff`] decides what changed, [`control`] is the socket
//! `switchyard reload` reaches the running gateway by.

mod access;
mod approval_hook;
pub mod approvals;
mod backends;
pub mod control;
pub mod data_dir_lock;
pub(crate) mod diff;
mod error;
mod fleet;
mod front_settings;
mod ledger_wait;
mod limits;
pub mod reload;
mod shutdown;
pub mod testing;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::backend::mcp_client::{ClientConfig, McpBackendClient};
use crate::backend::oauth::OAuthClient;
use crate::backend::stdio::{ProcessGroups, StdioOptions};
use crate::catalog::Catalog;
use crate::config::{Config, LogFormat, STREAM_REPLAY_KEPT};
use crate::front::cutoff::Cutoff;
use crate::front::listener;
use crate::front::pending::PendingRequests;
use crate::front::replay::Replays;
use crate::front::revocations::{Bounds, Revocations};
use crate::front::session::{Sealer, SessionSecret};
use crate::front::tls::ServerTls;
use crate::front::{self, Front};
use crate::ledger::{LedgerError, LedgerStore, Maintenance, instance_id};
use crate::private_files;
use crate::router::{CallLedger, CallRouter, Routing, announcements, discovery, pins};
use crate::swap::Swap;
use crate::telemetry::trace::Tracer;
use crate::telemetry::{ClaimWrite, Metrics};
pub use access::{admins, auth_settings, policies};
use data_dir_lock::DataDirLock;
pub use error::GatewayError;
use front_settings::{authenticator, callback, connection_limits, console_access, front_settings};
pub use limits::limits;
use reload::{ConfigSource, Discovery, Live, Reloader};
use shutdown::{CUT_GRACE, drain_deadline, stop_after_grace};

mod oauth;
mod openapi;
use openapi::Apis;
mod revocation_log;
mod telemetry;
pub mod token_store;

/// The name of the embedded demo backend of a first run.
pub const DEMO_BACKEND: &str = "demo";

/// The parts of a running gateway.
pub struct Gateway {
    pub config: Config,
    pub router: Arc<CallRouter>,
    client: Arc<McpBackendClient>,
    /// The OAuth client of the backends with `[backends.oauth]`.
    oauth: Option<Arc<OAuthClient>>,
    /// What stdio backends' processes are started with, and the registry of their process groups.
    stdio: StdioOptions,
    /// Where reloads read the configuration, and the requests for them ([`Gateway::reloader`]).
    reloads: Option<(ConfigSource, Reloader, reload::Requests)>,
    /// Records and exports spans when traces are on.
    tracer: Option<Tracer>,
    /// Background tasks (discovery, the embedded demo backend); aborted when the gateway is dropped.
    tasks: Vec<JoinHandle<()>>,
    /// `/metrics`'s own listener, once bound (see [`Gateway::bind_metrics`]).
    metrics_listener: Option<TcpListener>,
    /// The listener's certificate and key when `[server] tls_cert` is set (replaced by a reload).
    tls: Option<Arc<ServerTls>>,
    /// The data directory, held while this gateway lives (`None` for `check` and `tools`).
    _data_dir: Option<DataDirLock>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl Gateway {
    /// Builds the gateway for `config`: opens (and migrates) its ledger, and marks the in-flight claims this
    /// instance left behind when it last stopped `unknown`. Discovery starts with [`Gateway::serve`].
    pub async fn build(config: Config) -> Result<Gateway, GatewayError> {
        let tls = Gateway::load_tls(&config)?;
        Gateway::build_waiting(config, tls, None, |_| {}).await
    }

    /// Reads `[server] tls_cert` and `tls_key` (`None` without TLS): what `serve` will serve with, and what
    /// `check` verifies.
    pub fn load_tls(config: &Config) -> Result<Option<Arc<ServerTls>>, GatewayError> {
        let Some(files) = &config.server.tls else { return Ok(None) };
        Ok(Some(Arc::new(ServerTls::load(&files.cert, &files.key)?)))
    }

    /// [`Gateway::build`] for `serve`: while a PostgreSQL ledger cannot be reached, `listener` (the one
    /// [`Gateway::serve`] will serve on) answers `/healthz`, `/readyz` with why, and everything else with 503, and
    /// the ledger is tried again with backoff (`gateway::ledger_wait`); `on_wait` runs when that wait starts.
    pub async fn build_serving(
        config: Config,
        listener: &TcpListener,
        on_wait: impl FnOnce(&LedgerError),
    ) -> Result<Gateway, GatewayError> {
        let limits = connection_limits(&config.server);
        let tls = Gateway::load_tls(&config)?;
        let console = console_access(&config);
        let waiting = ledger_wait::WaitingListener { listener, limits, console, tls: tls.clone() };
        Gateway::build_waiting(config, tls, Some(waiting), on_wait).await
    }

    async fn build_waiting(
        config: Config,
        tls: Option<Arc<ServerTls>>,
        waiting: Option<ledger_wait::WaitingListener<'_>>,
        on_wait: impl FnOnce(&LedgerError),
    ) -> Result<Gateway, GatewayError> {
        let data_dir = &config.server.data_dir;
        private_files::warn_if_exposed(data_dir);
        private_files::create_dir(data_dir)
            .map_err(|source| GatewayError::DataDir { path: data_dir.clone(), source })?;
        let held = data_dir_lock::lock(data_dir)?;
        let store = ledger_wait::open(&config.ledger.url, data_dir, waiting, on_wait).await?;
        seal_results(&store, data_dir, config.ledger.encrypt_results, true)?;
        let owner = instance_id(data_dir)?;
        let orphaned = store.orphan(&owner).await?;
        crate::router::fail_orphaned_tasks(&store, &owner).await;
        let metrics = Arc::new(Metrics::new());
        if orphaned > 0 {
            tracing::warn!(orphaned, "calls that were running when this instance last stopped are now `unknown`");
            metrics.count_claims(ClaimWrite::Unknown, orphaned);
        }
        let tracer = telemetry::tracer(&config.telemetry.traces, &owner, &metrics)?;
        if let Some(audit) = &config.audit {
            metrics.start_audit(telemetry::audit_settings(audit, &config.telemetry.traces, &owner))?;
        }
        let (lease, max_result) = (config.ledger.lease, config.ledger.max_result);
        let ledger = CallLedger { store, owner, lease, max_result, metrics };
        let grace = crate::backend::stdio::DEFAULT_GRACE;
        let groups = ProcessGroups::recorded(data_dir, grace)
            .await
            .map_err(|source| GatewayError::ProcessGroups { path: data_dir.clone(), source })?;
        let apis = Apis::load(&config).await?;
        let mut gateway = Gateway::assemble(config, ledger, tracer, StdioOptions::new(groups), &apis)?;
        gateway._data_dir = Some(held);
        gateway.tls = tls;
        Ok(gateway)
    }

    /// A gateway that only discovers (for `check` and `tools`): its ledger is in memory and never written.
    pub async fn for_discovery(config: Config) -> Result<Gateway, GatewayError> {
        let ledger = CallLedger {
            store: LedgerStore::memory(),
            owner: "discovery".into(),
            lease: config.ledger.lease,
            max_result: config.ledger.max_result,
            metrics: Arc::default(),
        };
        let apis = Apis::load(&config).await?;
        Gateway::assemble(config, ledger, None, StdioOptions::default(), &apis)
    }

    fn assemble(
        config: Config,
        ledger: CallLedger,
        tracer: Option<Tracer>,
        stdio: StdioOptions,
        apis: &Apis,
    ) -> Result<Gateway, GatewayError> {
        let client_config = ClientConfig {
            max_sessions: config.server.max_backend_sessions,
            max_sessions_per_owner: config.server.max_backend_sessions_per_principal,
            max_stdio_processes: config.server.max_stdio_processes,
            metrics: Arc::clone(&ledger.metrics),
            tracer: tracer.clone(),
            ..ClientConfig::default()
        };
        ledger.metrics.register_backends(config.backends.iter().map(|backend| backend.name.as_str()));
        let client = Arc::new(McpBackendClient::new(client_config)?);
        let catalog = Arc::new(Catalog::new(config.backends.iter().map(backends::catalog_spec).collect()));
        let oauth = oauth::client(&config, &ledger.store)?;
        let targets = config
            .backends
            .iter()
            .filter_map(|backend| {
                let target =
                    backends::target(backend, oauth.as_ref(), &stdio, config.auth.anonymous_is_one_user(), apis)?;
                Some((Arc::from(backend.name.as_str()), target))
            })
            .collect();
        let (policies, limits) = (policies(&config), limits(&config));
        let (discovery_wait, pins) = (config.server.discovery_wait, backends::pin_rules(&config));
        let catalog_modes = backends::catalog_modes(&config);
        let tasks = backends::task_backends(&config);
        let routing = Routing { targets, policies, discovery_wait, limits, pins, catalog: catalog_modes, tasks };
        let router = Arc::new(CallRouter::new(catalog, Arc::clone(&client), routing, ledger));
        router.limit_task_ttl(config.ledger.retention);
        let (reloads, tasks, metrics_listener) = (None, Vec::new(), None);
        let gateway = Gateway {
            config,
            router,
            client,
            oauth,
            stdio,
            tracer,
            reloads,
            tasks,
            metrics_listener,
            tls: None,
            _data_dir: None,
        };
        Ok(gateway)
    }

    /// The configuration of a first run: the server defaults (with environment overrides) and the embedded demo
    /// backend, served in-process on a loopback port and reached through the real backend client.
    pub async fn demo_config() -> Result<(Config, JoinHandle<()>), GatewayError> {
        let (address, demo) =
            crate::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.map_err(GatewayError::Demo)?;
        let text = format!("[[backends]]\nname = \"{DEMO_BACKEND}\"\nurl = \"http://{address}/mcp\"\n");
        let config = Config::from_toml_str(&text, "<embedded demo configuration>", std::env::vars())?;
        Ok((config, demo))
    }

    /// The gateway's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.router.ledger().metrics
    }

    /// Binds `[telemetry] metrics_listen`, if set, and returns the address bound (port 0 picks one); `serve`
    /// binds it otherwise.
    pub async fn bind_metrics(&mut self) -> Result<Option<SocketAddr>, GatewayError> {
        let Some(address) = self.config.telemetry.metrics_listen else { return Ok(None) };
        if self.metrics_listener.is_none() {
            let bound = TcpListener::bind(address).await;
            self.metrics_listener = Some(bound.map_err(|source| GatewayError::MetricsListener { address, source })?);
        }
        let bound = self.metrics_listener.as_ref().map(TcpListener::local_addr).transpose();
        bound.map_err(|source| GatewayError::MetricsListener { address, source })
    }

    /// Keeps a background task (such as the embedded demo backend) alive as long as the gateway.
    pub fn adopt(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Lets the served gateway reload its configuration from `source` (the file it started from, and the
    /// command line's overrides) when the returned [`Reloader`] asks, and through its control socket
    /// ([`control`]) once it serves.
    pub fn reloader(&mut self, source: ConfigSource) -> Reloader {
        let (reloader, requests) = reload::channel();
        self.reloads = Some((source, reloader.clone(), requests));
        reloader
    }

    /// Discovers every backend once, concurrently (for `check` and `tools`).
    pub async fn discover_once(&self) {
        let mut runs = JoinSet::new();
        for name in self.router.catalog().backend_names() {
            let router = Arc::clone(&self.router);
            runs.spawn(async move { (router.discover(&name).await, name) });
        }
        while let Some(Ok((result, name))) = runs.join_next().await {
            if let Err(error) = result {
                tracing::warn!(backend = %name, %error, "tool discovery failed");
            }
        }
    }

    /// Serves agents on `listener` until `shutdown` completes, then, not ready, for `shutdown_grace` more, then
    /// drains; discovery runs in the background meanwhile, and reloads are applied when asked (see
    /// [`Gateway::reloader`]).
    pub async fn serve(
        mut self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let configured_listen = self.config.server.listen;
        // The address actually bound (port 0 picks one) is the default `public_url`.
        self.config.server.listen = listener.local_addr().map_err(GatewayError::Listener)?;
        let front = self.front().await?;
        let discovery = self.start_background(&front);
        let app = front::app(Arc::clone(&front));
        let (limits, watched_limits) = watch::channel(connection_limits(&self.config.server));
        if self.bind_metrics().await?.is_some()
            && let Some(metrics_listener) = self.metrics_listener.take()
        {
            let app = front::metrics::app(Arc::clone(self.metrics()));
            let tls = self.tls.clone().filter(|_| self.config.telemetry.metrics_tls);
            let serving = listener::serve(metrics_listener, app, watched_limits.clone(), tls, std::future::pending());
            self.tasks.push(tokio::spawn(serving));
        }
        let drain = Arc::new(Swap::new(self.config.server.shutdown_drain));
        let grace = Arc::new(Swap::new(self.config.server.shutdown_grace));
        let cut_front = Arc::clone(&front);
        let live = Live {
            config: self.config.clone(),
            configured_listen,
            front,
            router: Arc::clone(&self.router),
            client: Arc::clone(&self.client),
            oauth: self.oauth.clone(),
            stdio: self.stdio.clone(),
            discovery,
            limits,
            drain: Arc::clone(&drain),
            grace: Arc::clone(&grace),
            tls: self.tls.clone(),
            revision: 0,
        };
        let _control = self.start_reloads(live);
        let (stopping, stop) = tokio::sync::oneshot::channel::<()>();
        let stopping_front = Arc::clone(&cut_front);
        let mut serving =
            std::pin::pin!(listener::serve(listener, app, watched_limits, self.tls.clone(), async move {
                shutdown.await;
                stop_after_grace(&stopping_front, &grace).await;
                let _ = stopping.send(());
            }));
        tokio::select! {
            () = &mut serving => {}
            () = drain_deadline(stop, &drain) => {
                // The requests still running are answered now, and their connections close once the answers are
                // written; a connection that is not done by then (a standalone stream) is dropped.
                cut_front.cutoff.cut();
                let _ = tokio::time::timeout(CUT_GRACE, serving).await;
            }
        }
        self.stop_processes().await;
        self.settle_leftovers().await;
        Ok(())
    }

    /// The front, with its authenticator, session sealer and revocation list (whose follower task starts).
    async fn front(&mut self) -> Result<Arc<Front>, GatewayError> {
        if let Some(oauth) = &self.oauth {
            oauth.set_redirect_uri(oauth::redirect_uri(&self.config.server.public_url())?);
        }
        let auth = Arc::new(authenticator(&self.config).await?);
        let authorization = callback(self.oauth.as_ref(), &self.router);
        let secret = SessionSecret::load_or_create(&self.config.server.session_secret_path())?;
        self.router.use_state_key(&secret.request_state_key());
        let tickets = secret.console_tickets();
        self.router.use_approvals(approvals::gate(&self.config, self.metrics(), tickets.clone())?);
        let log = Arc::new(revocation_log::LedgerLog(self.router.ledger().store.clone()));
        let server = &self.config.server;
        let bounds = Bounds { total: server.max_revocations, per_owner: server.revocations_per_owner() };
        let revocations = Arc::new(Revocations::shared(bounds, log));
        self.tasks.push(revocations.start().await.map_err(GatewayError::Revocations)?);
        let ledger = self.router.ledger();
        let joined = fleet::join(&ledger.store, &ledger.owner, server.stream_replay, STREAM_REPLAY_KEPT);
        let (fleet, hearing, events) = match joined {
            Some(joined) => (Some(joined.fleet), Some(joined.hearing), joined.events),
            None => (None, None, None),
        };
        let front = Arc::new(Front {
            settings: Swap::new(front_settings(&self.config, auth, authorization)),
            tickets,
            sealer: Sealer::new(secret, self.config.server.session_ttl),
            revocations,
            router: Arc::clone(&self.router),
            streams: Arc::default(),
            in_flight: Arc::default(),
            pending: Arc::new(PendingRequests::new(Arc::clone(self.metrics()))),
            cancels: Arc::default(),
            replays: Arc::new(events.map_or_else(Replays::default, Replays::shared)),
            serve_metrics: self.config.telemetry.metrics_listen.is_none(),
            metrics: Arc::clone(self.metrics()),
            tracer: self.tracer.clone(),
            listens: Arc::default(),
            cutoff: Cutoff::default(),
            stopping: Default::default(),
            fleet,
        });
        if let Some(hearing) = hearing {
            self.tasks.push(tokio::spawn(hearing.serve(Arc::clone(&front))));
        }
        Ok(front)
    }

    /// Starts discovery (one task per backend, returned so reloads can stop and start them), the delivery of
    /// backends' messages to agents' streams, and ledger upkeep.
    fn start_background(&mut self, front: &Arc<Front>) -> Discovery {
        let mut discovery = Discovery::new(&self.router);
        self.config.backends.iter().for_each(|backend| discovery.start(backend));
        self.tasks.push(discovery::follow(&self.router));
        self.tasks.push(pins::watch(&self.router));
        self.tasks.push(announcements::watch(&self.router));
        self.tasks.push(crate::router::limits::renew(&self.router));
        self.tasks.push(tokio::spawn(Arc::clone(front).deliver_session_messages(self.router.session_messages())));
        self.tasks.push(tokio::spawn(Arc::clone(front).deliver_task_changes(self.router.task_changes())));
        self.tasks.push(tokio::spawn(Arc::clone(front).tell_list_announcements(self.router.list_announcements())));
        let ledger = self.router.ledger();
        let upkeep =
            Maintenance { owner: ledger.owner.clone(), lease: ledger.lease, retention: self.config.ledger.retention };
        self.tasks.push(tokio::spawn(crate::ledger::maintain(ledger.store.clone(), upkeep)));
        discovery
    }

    /// Starts the reload worker over `live`, and the control socket when [`Gateway::reloader`] was asked for (the
    /// socket file is removed when the returned guard drops).
    fn start_reloads(&mut self, live: Live) -> Option<control::SocketFile> {
        let (source, requests, control) = match self.reloads.take() {
            Some((source, reloader, requests)) => {
                let identity = control::Identity::of_this_process(source.path.as_deref());
                (source, requests, self.open_control_socket(reloader, identity))
            }
            // Nobody can ask for a reload; the worker still keeps the discovery tasks.
            None => (ConfigSource::default(), reload::channel().1, None),
        };
        self.tasks.push(tokio::spawn(reload::serve_requests(live, source, requests)));
        control
    }

    /// Opens the control socket in the data directory, its task kept with the gateway's. Serving goes on without
    /// it.
    fn open_control_socket(&mut self, reloader: Reloader, identity: control::Identity) -> Option<control::SocketFile> {
        let path = control::socket_path(&self.config.server.data_dir);
        match control::bind(&path) {
            Ok((listener, file)) => {
                self.tasks.push(tokio::spawn(control::serve(listener, reloader, identity)));
                Some(file)
            }
            Err(error) => {
                tracing::warn!(socket = %path.display(), %error, "`switchyard reload` cannot reach this gateway; SIGHUP still reloads");
                None
            }
        }
    }
}

/// How the log is written, as configured (`serve --log-format` has already overridden the file).
pub fn log_format(config: &Config) -> crate::telemetry::logs::LogFormat {
    match config.telemetry.log_format {
        LogFormat::Text => crate::telemetry::logs::LogFormat::Text,
        LogFormat::Json => crate::telemetry::logs::LogFormat::Json,
    }
}

/// Gives a SQL ledger the vault key (`<data_dir>/oauth-tokens.key`, the OAuth tokens' key) to open sealed results
/// with and, when `seal_new` (`[ledger] encrypt_results`), to seal new ones. The key file is created when
/// `create` (a gateway starting), else read only if it exists (a command reading the ledger; without the file,
/// no result was sealed here). The memory ledger never persists and takes no key.
pub fn seal_results(store: &LedgerStore, data_dir: &Path, seal_new: bool, create: bool) -> Result<(), GatewayError> {
    let path = data_dir.join(crate::backend::oauth::TOKEN_KEY_FILE_NAME);
    if store.kind() == "memory" || !(create || path.is_file()) {
        return Ok(());
    }
    let key = crate::keyfile::load_or_create::<32>(&path).map_err(GatewayError::TokenKey)?;
    store.seal_results(&key, seal_new);
    Ok(())
}
