//! The composition root: builds the gateway's parts from a validated [`Config`] and wires them in the one
//! direction data flows — front → auth → router → (ledger, catalog, backend client) — with `mcp` the vocabulary
//! all of them share and the configuration lowered here into each part's plain types.
//!
//! Owns: the translation of configuration into each part's own inputs (catalog specs, each backend's endpoint
//! template, the client's session-table bounds, the front's admission rules, authenticator and session sealer, the
//! router's policies), starting the background tasks (discovery, delivering backends' session messages, ledger
//! upkeep), and the embedded demo backend of a first run. No behaviour of its own beyond wiring; nothing else reads the configuration types of
//! other parts.

mod access;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::auth::{AuthSetupError, Authenticator};
use crate::backend::legacy_sse::LegacySseBackend;
use crate::backend::mcp_client::{
    BackendEndpoint, BackendTarget, ClientBuildError, ClientConfig, Era, McpBackendClient, OAuthBinding,
};
use crate::backend::oauth::OAuthClient;
use crate::backend::stdio::{Launcher, Sharing, StdioBackend, StdioCommand, StdioOptions};
use crate::catalog::{BackendSpec, Catalog};
use crate::config::{
    BACKEND_SESSION_TABLE_SIZE, BackendConfig, Config, ConfigError, Endpoint, ProtocolEra, StdioConfig, StdioSessions,
    Transport,
};
use crate::front::guard::Admission;
use crate::front::listener::{self, ConnectionLimits};
use crate::front::revocations::{LogError, Revocations};
use crate::front::session::{Sealer, SessionError, SessionSecret};
use crate::front::{self, Front};
use crate::ledger::{LedgerError, LedgerStore, Maintenance, instance_id};
use crate::router::{CallLedger, CallRouter, discovery};
pub use access::{auth_settings, policies};

mod oauth;
mod revocation_log;
pub mod token_store;

/// How often a discovered backend's tool list is refreshed.
pub const CATALOG_TTL: Duration = Duration::from_secs(300);
/// The name of the embedded demo backend of a first run.
pub const DEMO_BACKEND: &str = "demo";

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("session key: {0}")]
    SessionKey(#[from] SessionError),
    #[error("cannot start the embedded demo backend: {0}")]
    Demo(std::io::Error),
    #[error(transparent)]
    BackendClient(#[from] ClientBuildError),
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
    #[error("cannot load the deleted sessions from the ledger: {0}")]
    Revocations(LogError),
    #[error(
        "backend `{backend}`: transport = \"{transport}\" is not served yet; only \"mcp\" (Streamable HTTP) backends \
         can be used for now"
    )]
    TransportNotServed { backend: String, transport: &'static str },
    #[error("cannot read the listening socket's address: {0}")]
    Listener(std::io::Error),
    #[error("agent authentication: {0}")]
    Auth(#[from] AuthSetupError),
    #[error("backend OAuth token key: {0}")]
    TokenKey(crate::keyfile::KeyFileError),
    #[error("backend OAuth client: {0}")]
    OAuth(String),
}

/// The parts of a running gateway.
pub struct Gateway {
    pub config: Config,
    pub router: Arc<CallRouter>,
    /// The OAuth client of the backends with `[backends.oauth]`.
    oauth: Option<Arc<OAuthClient>>,
    /// Background tasks (discovery, the embedded demo backend); aborted when the gateway is dropped.
    tasks: Vec<JoinHandle<()>>,
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
        let data_dir = &config.server.data_dir;
        let store = LedgerStore::open_url(&config.ledger.url, data_dir).await?;
        let owner = instance_id(data_dir)?;
        let orphaned = store.orphan(&owner).await?;
        if orphaned > 0 {
            tracing::warn!(orphaned, "calls that were running when this instance last stopped are now `unknown`");
        }
        let ledger = CallLedger { store, owner, lease: config.ledger.lease, max_result: config.ledger.max_result };
        Gateway::assemble(config, ledger)
    }

    /// A gateway that only discovers (for `check` and `tools`): its ledger is in memory and never written.
    pub fn for_discovery(config: Config) -> Result<Gateway, GatewayError> {
        let ledger = CallLedger {
            store: LedgerStore::memory(),
            owner: "discovery".into(),
            lease: config.ledger.lease,
            max_result: config.ledger.max_result,
        };
        Gateway::assemble(config, ledger)
    }

    fn assemble(config: Config, ledger: CallLedger) -> Result<Gateway, GatewayError> {
        let per_owner = config.server.max_backend_sessions_per_principal;
        let client_config = ClientConfig {
            max_sessions: BACKEND_SESSION_TABLE_SIZE,
            max_sessions_per_owner: per_owner,
            max_stdio_processes: config.server.max_stdio_processes,
            ..ClientConfig::default()
        };
        let client = Arc::new(McpBackendClient::new(client_config)?);
        let catalog = Arc::new(Catalog::new(config.backends.iter().map(catalog_spec).collect()));
        let oauth = oauth::client(&config, &ledger.store)?;
        let targets: HashMap<Arc<str>, BackendTarget> = config
            .backends
            .iter()
            .map(|backend| (Arc::from(backend.name.as_str()), target(backend, oauth.as_ref())))
            .collect();
        let router = Arc::new(CallRouter::new(catalog, client, targets, ledger).with_policies(policies(&config)));
        Ok(Gateway { config, router, oauth, tasks: Vec::new() })
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

    /// Keeps a background task (such as the embedded demo backend) alive as long as the gateway.
    pub fn adopt(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Discovers every backend once, concurrently (for `check` and `tools`).
    pub async fn discover_once(&self) {
        let mut runs = JoinSet::new();
        for name in self.router.catalog().backend_names().map(str::to_owned) {
            let router = Arc::clone(&self.router);
            runs.spawn(async move { (router.discover(&name).await, name) });
        }
        while let Some(Ok((result, name))) = runs.join_next().await {
            if let Err(error) = result {
                tracing::warn!(backend = %name, %error, "tool discovery failed");
            }
        }
    }

    /// Serves agents on `listener` until `shutdown` completes; discovery runs in the background meanwhile.
    pub async fn serve(
        mut self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        // The address actually bound (port 0 picks one) is the default `public_url`.
        self.config.server.listen = listener.local_addr().map_err(GatewayError::Listener)?;
        if let Some(oauth) = &self.oauth {
            oauth.set_redirect_uri(oauth::redirect_uri(&self.config.server.public_url())?);
        }
        let authorization = self.oauth.as_ref().map(|oauth| {
            let callback = oauth::Callback { oauth: Arc::clone(oauth), router: Arc::clone(&self.router) };
            Arc::new(callback) as Arc<dyn front::callback::AuthorizationCallback>
        });
        let auth = Arc::new(authenticator(&self.config).await?);
        let secret = SessionSecret::load_or_create(&self.config.server.session_secret_path())?;
        let log = Arc::new(revocation_log::LedgerLog(self.router.ledger().store.clone()));
        let revocations = Arc::new(Revocations::shared(self.config.server.max_revocations, log));
        self.tasks.push(revocations.start().await.map_err(GatewayError::Revocations)?);
        let front = Arc::new(Front {
            admission: Admission {
                allowed_origins: self.config.server.allowed_origins.clone(),
                allowed_hosts: self.config.server.allowed_hosts.clone(),
                binds_loopback: self.config.server.binds_loopback(),
            },
            auth,
            sealer: Sealer::new(secret, self.config.server.session_ttl),
            revocations,
            router: Arc::clone(&self.router),
            max_body: self.config.server.max_body,
            body_timeout: self.config.server.body_timeout,
            streams: Arc::default(),
            pending: Arc::default(),
            cancels: Arc::default(),
            replays: Arc::default(),
            authorization,
        });
        self.tasks.extend(discovery::spawn_all(&self.router, CATALOG_TTL));
        self.tasks.push(tokio::spawn(Arc::clone(&front).deliver_session_messages(self.router.session_messages())));
        let ledger = self.router.ledger().clone();
        let upkeep =
            Maintenance { owner: ledger.owner.clone(), lease: ledger.lease, retention: self.config.ledger.retention };
        self.tasks.push(tokio::spawn(crate::ledger::maintain(ledger.store.clone(), upkeep)));
        let app = front::app(front);
        let (stopping, stop) = tokio::sync::oneshot::channel::<()>();
        let server = &self.config.server;
        let limits = ConnectionLimits {
            header_timeout: server.header_timeout,
            idle_timeout: server.idle_timeout,
            max_connections: server.max_connections,
        };
        let serving = listener::serve(listener, app, limits, async move {
            shutdown.await;
            let _ = stopping.send(());
        });
        tokio::select! {
            () = serving => {}
            () = drain_deadline(stop, server.shutdown_drain) => {}
        }
        // Calls still running now will not be settled by this process: their outcome is unknown.
        match ledger.store.orphan(&ledger.owner).await {
            Ok(0) => {}
            Ok(left) => tracing::warn!(left, "calls still running at shutdown are marked `unknown`"),
            Err(error) => tracing::error!(%error, "ledger: cannot mark the calls still running at shutdown"),
        }
        Ok(())
    }
}

/// The agents' authenticator: everyone is `anonymous` without `[auth]` credentials.
async fn authenticator(config: &Config) -> Result<Authenticator, GatewayError> {
    if !config.auth.has_credentials() {
        return Ok(Authenticator::anonymous_only());
    }
    Ok(Authenticator::new(auth_settings(config)).await?)
}

/// Completes `drain` after the shutdown signal (never, if there is none).
async fn drain_deadline(stop: tokio::sync::oneshot::Receiver<()>, drain: Duration) {
    if stop.await.is_ok() {
        tokio::time::sleep(drain).await;
    } else {
        std::future::pending::<()>().await;
    }
}

fn catalog_spec(backend: &BackendConfig) -> BackendSpec {
    let filter = backend.tools.clone();
    BackendSpec {
        name: backend.name.as_str().into(),
        prefix: backend.prefix.clone(),
        exposes: Box::new(move |tool| filter.exposes(tool)),
        resource_prefix: backend.resource_prefix.clone(),
    }
}

/// How a backend is reached, by its transport: the endpoint template of an HTTP backend (URL, timeout, credential,
/// configured headers), the launcher of a stdio backend's processes, or a legacy SSE backend's stream.
fn target(backend: &BackendConfig, oauth: Option<&Arc<OAuthClient>>) -> BackendTarget {
    match (&backend.endpoint, backend.transport) {
        (Endpoint::Process(stdio), _) => {
            let launcher = Launcher::new(lower_stdio(backend, stdio), StdioOptions::default());
            BackendTarget::stdio(Arc::new(launcher), backend.timeout)
        }
        (Endpoint::Url(url), Transport::Sse) => {
            BackendTarget::legacy_sse(lower_legacy_sse(backend, url), backend.timeout)
        }
        (Endpoint::Url(url), _) => {
            let mut endpoint = BackendEndpoint::new(url.clone(), backend.timeout).with_era(era(backend.era));
            if let Some(credential) = &backend.credential {
                endpoint = endpoint.with_credential(credential.header.clone(), credential.value.header_value().clone());
            }
            for (name, value) in &backend.headers {
                endpoint = endpoint.with_header(name.clone(), value.clone());
            }
            if let (Some(oauth), Some(_)) = (oauth, &backend.oauth) {
                endpoint = endpoint.with_oauth(OAuthBinding::new(Arc::clone(oauth), &backend.name));
            }
            BackendTarget::Http(endpoint)
        }
    }
}

/// The stdio module's own description of a stdio backend (`None` for other transports).
pub fn stdio_backend(backend: &BackendConfig) -> Option<StdioBackend> {
    let Endpoint::Process(stdio) = &backend.endpoint else { return None };
    Some(lower_stdio(backend, stdio))
}

fn lower_stdio(backend: &BackendConfig, stdio: &StdioConfig) -> StdioBackend {
    let command = StdioCommand {
        program: stdio.command.clone(),
        args: stdio.args.clone(),
        env: stdio.env.iter().map(|(name, value)| (name.clone(), value.value().to_owned())).collect(),
        cwd: stdio.cwd.clone(),
    };
    let sharing = match stdio.sessions {
        StdioSessions::PerAgent => Sharing::PerAgent,
        StdioSessions::Shared => Sharing::Shared,
    };
    StdioBackend {
        name: backend.name.as_str().into(),
        command,
        sharing,
        idle_timeout: stdio.idle_timeout,
        max_processes: stdio.max_processes,
        era: era(backend.era),
    }
}

fn era(era: ProtocolEra) -> Era {
    match era {
        ProtocolEra::Auto => Era::Auto,
        ProtocolEra::Modern => Era::Modern,
        ProtocolEra::Legacy => Era::Legacy,
    }
}

/// The legacy SSE module's own description of an sse backend (`None` for other transports).
pub fn legacy_sse_backend(backend: &BackendConfig) -> Option<LegacySseBackend> {
    let (Transport::Sse, Endpoint::Url(url)) = (backend.transport, &backend.endpoint) else { return None };
    Some(lower_legacy_sse(backend, url))
}

fn lower_legacy_sse(backend: &BackendConfig, url: &reqwest::Url) -> LegacySseBackend {
    LegacySseBackend {
        name: backend.name.as_str().into(),
        url: url.clone(),
        credential: backend
            .credential
            .as_ref()
            .map(|credential| (credential.header.clone(), credential.value.header_value().clone())),
        headers: backend.headers.iter().map(|(name, value)| (name.clone(), value.clone())).collect(),
        sharing: Sharing::PerAgent,
    }
}
