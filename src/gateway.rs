//! The composition root: builds the gateway's parts from a validated [`Config`] and wires them in the one
//! direction data flows (front → router → backend client), with the catalog beside the router.
//!
//! Owns: the translation of configuration into each part's own inputs (catalog specs, backend targets, the
//! front's admission rules and session sealer), discovery tasks, and the embedded demo backend of a first run.
//! Nothing else reads the configuration types of other parts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::backend::mcp_client::{ClientConfig, McpBackendClient};
use crate::catalog::{BackendSpec, Catalog};
use crate::config::{BackendConfig, Config, ConfigError};
use crate::front::guard::Admission;
use crate::front::session::{Revocations, Sealer, SessionError, SessionSecret};
use crate::front::{self, Front};
use crate::router::{BackendTarget, CallRouter, discovery};

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
    /// Builds the router and catalog for `config`, without starting discovery.
    pub fn new(config: Config) -> Gateway {
        let client = Arc::new(McpBackendClient::new(ClientConfig::default()));
        let catalog = Arc::new(Catalog::new(config.backends.iter().map(catalog_spec).collect()));
        let targets: HashMap<Arc<str>, BackendTarget> =
            config.backends.iter().map(|backend| (Arc::from(backend.name.as_str()), target(backend))).collect();
        let router = Arc::new(CallRouter::new(catalog, client, targets));
        Gateway { config, router, tasks: Vec::new() }
    }

    /// The configuration of a first run: the server defaults (with environment overrides) and the embedded demo
    /// backend, served in-process on a loopback port and reached through the real backend client.
    pub async fn with_demo_backend() -> Result<Gateway, GatewayError> {
        let (address, demo) =
            crate::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.map_err(GatewayError::Demo)?;
        let text = format!("[[backends]]\nname = \"{DEMO_BACKEND}\"\nurl = \"http://{address}/mcp\"\n");
        let config = Config::from_toml_str(&text, "<embedded demo configuration>", std::env::vars())?;
        let mut gateway = Gateway::new(config);
        gateway.tasks.push(demo);
        Ok(gateway)
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
        });
        self.tasks.extend(discovery::spawn_all(&self.router, CATALOG_TTL));
        let app = front::app(front);
        axum::serve(listener, app).with_graceful_shutdown(shutdown).await.map_err(GatewayError::Serve)
    }
}

fn catalog_spec(backend: &BackendConfig) -> BackendSpec {
    let filter = backend.tools.clone();
    BackendSpec {
        name: backend.name.as_str().into(),
        prefix: backend.prefix.clone(),
        exposes: Box::new(move |tool| filter.exposes(tool)),
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
