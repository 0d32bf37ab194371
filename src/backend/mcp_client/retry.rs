//! What a failed request leads to: a retry — at most one, and only after the backend
//! proved it did not process the request — or the failure the caller gets.
//!
//! Rules: a session the backend ended (HTTP `404` on a session id) is replaced; on the 2026-07-28 wire, a version
//! the backend does not serve (`-32022`) or a refusal without a JSON-RPC body (`400`/`405`: the backend may have
//! become a 2025-era server) forgets the era verdict so that the new session probes again, and a `tools/call` whose
//! `Mcp-Param-*` headers the backend found wrong (`-32020`) lists the backend's tools again and is resent on the
//! same session. Every other failure, and a second one, goes to the caller.

use super::exchange::ExchangeError;
use super::{BackendSession, BackendTarget, McpBackendClient, McpError, NotDeliveredCause, SlotKey};
use crate::mcp::{jsonrpc, method};

/// What a failed request is retried with.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Retry {
    /// A new session (the old one ended, or the backend's era must be probed again).
    NewSession,
    /// The same session (what the request carries changed).
    SameSession,
}

impl McpBackendClient {
    /// Decides what a failed request leads to: a retry (at most one, only after the backend proved it did not
    /// process the request), or the failure the caller gets.
    pub(super) async fn recover(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        session: &BackendSession,
        method: &str,
        error: ExchangeError,
        retried: bool,
    ) -> Result<Retry, McpError> {
        let rejection = match error {
            ExchangeError::Failed(error) => return Err(error),
            ExchangeError::SessionGone if !retried => {
                tracing::info!(backend = %key.backend, "backend ended the session; re-initializing");
                return Ok(Retry::NewSession);
            }
            ExchangeError::SessionGone => {
                return Err(McpError::NotDelivered {
                    cause: NotDeliveredCause::SessionEnded,
                    reason: "the backend ended the freshly initialized session too (404 twice)".into(),
                });
            }
            ExchangeError::NotModern(error) => {
                tracing::info!(backend = %key.backend, %error, "a 2026-07-28 request was refused without a JSON-RPC error");
                self.forget_era(key, session);
                return if retried || !error.proves_not_delivered() { Err(error) } else { Ok(Retry::NewSession) };
            }
            ExchangeError::Rejected(rejection) => rejection,
        };
        match rejection.code {
            jsonrpc::UNSUPPORTED_PROTOCOL_VERSION if !retried => {
                tracing::info!(backend = %key.backend, message = %rejection.message, "the backend refused our protocol version");
                self.forget_era(key, session);
                Ok(Retry::NewSession)
            }
            jsonrpc::HEADER_MISMATCH if method == method::TOOLS_CALL && !retried => {
                tracing::info!(backend = %key.backend, message = %rejection.message, "header mismatch; fetching the tool list again");
                Box::pin(self.list_tools(key, target)).await?;
                Ok(Retry::SameSession)
            }
            _ => Err(rejection.into_error()),
        }
    }

    /// Forgets the era verdict a modern HTTP session was made from, so that the next session probes again.
    fn forget_era(&self, key: &SlotKey, session: &BackendSession) {
        if let Some(slot) = session.modern() {
            self.eras.forget(&key.backend, slot.epoch);
        }
    }
}
