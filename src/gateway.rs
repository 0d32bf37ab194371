//! The composition root: builds the gateway's parts from a validated [`Config`] and wires them in the one
//! direction data flows (front → router → backend client), with the catalog beside the router.
//!
//! Owns: the translation of configuration into each part's own inputs (catalog specs, backend targets, the
//! front's admission rules and session sealer), discovery tasks, and the embedded demo backend of a first run.
//! Nothing else reads the configuration types of other parts.

mod access;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::backend::mcp_client::{ClientConfig, McpBackendClient, RelayMessage};
use crate::catalog::{BackendSpec, Catalog};
use crate::config::{BackendConfig, Config, ConfigError};
use crate::front::guard::Admission;
use crate::front::session::{Revocations, Sealer, SessionError, SessionSecret};
use crate::front::{self, Front};
use crate::ledger::{LedgerError, LedgerStore, Maintenance, instance_id};
use crate::router::{BackendTarget, CallLedger, CallRouter, discovery};
pub use access::{auth_settings, policies};

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
    #[error("serving agents failed: {0}")]
    Serve(std::io::Error),
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
}

/// The parts of a running gateway.
pub struct Gateway {
    pub config: Config,
    pub router: Arc<CallRouter>,
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
        Ok(Gateway::assemble(config, ledger))
    }

    /// A gateway that only discovers (for `check` and `tools`): its ledger is in memory and never written.
    pub fn for_discovery(config: Config) -> Gateway {
        let ledger = CallLedger {
            store: LedgerStore::memory(),
            owner: "discovery".into(),
            lease: config.ledger.lease,
            max_result: config.ledger.max_result,
        };
        Gateway::assemble(config, ledger)
    }

    fn assemble(config: Config, ledger: CallLedger) -> Gateway {
        let client = Arc::new(McpBackendClient::new(ClientConfig::default()));
        let catalog = Arc::new(Catalog::new(config.backends.iter().map(catalog_spec).collect()));
        let targets: HashMap<Arc<str>, BackendTarget> =
            config.backends.iter().map(|backend| (Arc::from(backend.name.as_str()), target(backend))).collect();
        let router = Arc::new(CallRouter::new(catalog, client, targets, ledger));
        Gateway { config, router, tasks: Vec::new() }
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
        let secret = SessionSecret::load_or_create(&self.config.server.session_secret_path())?;
        let front = Arc::new(Front {
            admission: Admission { server: self.config.server.clone() },
            sealer: Sealer::new(secret, self.config.server.session_ttl),
            revocations: Revocations::default(),
            router: Arc::clone(&self.router),
            max_body: self.config.server.max_body,
            streams: Arc::default(),
            pending: Arc::default(),
            cancels: Arc::default(),
            replays: Arc::default(),
        });
        self.tasks.extend(discovery::spawn_all(&self.router, CATALOG_TTL));
        let mut session_messages = self.router.session_messages();
        let deliverer = Arc::clone(&front);
        self.tasks.push(tokio::spawn(async move {
            while let Some(mut message) = session_messages.recv().await {
                if let RelayMessage::Notification(note) = &mut message.message {
                    deliverer.router.expose_to_agent(&message.backend, note);
                }
                deliverer.deliver_session_message(message);
            }
        }));
        let ledger = self.router.ledger().clone();
        let upkeep =
            Maintenance { owner: ledger.owner.clone(), lease: ledger.lease, retention: self.config.ledger.retention };
        self.tasks.push(tokio::spawn(crate::ledger::maintain(ledger.store.clone(), upkeep)));
        let app = front::app(front);
        let (stopping, stop) = tokio::sync::oneshot::channel::<()>();
        let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
            shutdown.await;
            let _ = stopping.send(());
        });
        let drained = tokio::select! {
            served = serving => served.map_err(GatewayError::Serve),
            () = drain_deadline(stop, self.config.server.shutdown_drain) => Ok(()),
        };
        // Calls still running now will not be settled by this process: their outcome is unknown.
        match ledger.store.orphan(&ledger.owner).await {
            Ok(0) => {}
            Ok(left) => tracing::warn!(left, "calls still running at shutdown are marked `unknown`"),
            Err(error) => tracing::error!(%error, "ledger: cannot mark the calls still running at shutdown"),
        }
        drained
    }
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

fn target(backend: &BackendConfig) -> BackendTarget {
    BackendTarget {
        url: backend.url.clone(),
        timeout: backend.timeout,
        credential: backend
            .credential
            .as_ref()
            .map(|credential| (credential.header.clone(), credential.value.header_value().clone())),
        headers: backend.headers.iter().map(|(name, value)| (name.clone(), value.clone())).collect(),
    }
}
