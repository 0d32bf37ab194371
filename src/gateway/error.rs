//! Why a gateway could not be built or could not serve: one variant per part that can fail at start (the
//! configuration, the data directory and its lock, the ledger, keys, listeners, agent authentication, the OAuth
//! client, approvals, traces, OpenAPI backends, audit, TLS).
//!
//! Rules: every message names the file, key or address at fault, so `serve` can print it as is and exit.

use std::net::SocketAddr;

use super::data_dir_lock::DataDirLockError;
use super::openapi;
use crate::auth::AuthSetupError;
use crate::backend::mcp_client::ClientBuildError;
use crate::config::ConfigError;
use crate::front::revocations::LogError;
use crate::front::session::SessionError;
use crate::front::tls::TlsError;
use crate::ledger::LedgerError;
use crate::telemetry::audit::AuditError;
use crate::telemetry::trace::ExportSetupError;

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
    #[error("cannot create the data directory {}: {source}", .path.display())]
    DataDir { path: std::path::PathBuf, source: std::io::Error },
    #[error(transparent)]
    DataDirLock(#[from] DataDirLockError),
    #[error("cannot record the stdio process groups in {}: {source}", .path.display())]
    ProcessGroups { path: std::path::PathBuf, source: std::io::Error },
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
    #[error("cannot load the deleted sessions from the ledger: {0}")]
    Revocations(LogError),
    #[error("cannot read the listening socket's address: {0}")]
    Listener(std::io::Error),
    #[error("cannot listen for /metrics on {address} (`[telemetry] metrics_listen`): {source}")]
    MetricsListener { address: SocketAddr, source: std::io::Error },
    #[error("agent authentication: {0}")]
    Auth(#[from] AuthSetupError),
    #[error("backend OAuth token key: {0}")]
    TokenKey(crate::keyfile::KeyFileError),
    #[error("backend OAuth client: {0}")]
    OAuth(String),
    #[error("approvals: {0}")]
    Approvals(String),
    #[error(transparent)]
    Traces(#[from] ExportSetupError),
    #[error(transparent)]
    OpenApi(#[from] openapi::ApiError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
}
