//! Starting a backend session in the backend's era (MCP 2026-07-28 §8): the
//! remembered verdict ([`super::era::Eras`]) or a `server/discover` probe decides between a modern session, which
//! over HTTP needs no request at all, and the 2025-era handshake.
//!
//! Rules:
//! - `era = "legacy"` never probes; `"modern"` refuses a backend that answers the probe as a 2025-era server;
//!   `"auto"` falls back to `initialize`.
//! - A 2025-era verdict is remembered only once a handshake succeeded on it. A handshake that fails on a
//!   remembered 2025-era verdict (other than by not connecting) forgets it and probes again at once, once: the
//!   backend may have become modern-only (a modern-only server refuses `initialize`).
//! - Over stdio every process is probed (the spec caches the era per process) unless the backend is known to be
//!   of the 2025 era; the probe itself runs in the session core ([`crate::backend::duplex`]).

use std::sync::Arc;

use serde_json::Value;

use super::asked::Asked;
use super::era::{Era, Eras, Known, ModernServer, Verdict};
use super::http::handshake;
use super::modern::{ModernSlot, probe};
use super::shared::Shared;
use super::transport::{BackendSession, Carrier};
use crate::backend::duplex::Opening;
use crate::backend::mcp_client::context::CallContext;
use crate::backend::mcp_client::endpoint::{BackendEndpoint, SlotKey};
use crate::backend::mcp_client::error::{McpError, NotDeliveredCause};

/// How a new session of one backend is made in its era: the client's shared parts and what is known of eras.
pub(crate) struct Negotiation<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) eras: &'a Eras,
}

impl Negotiation<'_> {
    /// A new HTTP session for `key` in the backend's era, within the call `context`; `capabilities` are offered
    /// in a 2025-era handshake.
    pub(crate) async fn start_http(
        &self,
        key: &SlotKey,
        endpoint: &BackendEndpoint,
        context: &CallContext<'_>,
        capabilities: &Value,
    ) -> Result<BackendSession, McpError> {
        if endpoint.era() == Era::Legacy {
            return handshake(self.shared, endpoint, context, capabilities).await;
        }
        let backend = &key.backend;
        let mut reprobed = false;
        loop {
            // Held until a probed 2025-era verdict is confirmed by its handshake, so concurrent slots probe once.
            let mut probing = None;
            let (known, epoch) = match self.eras.get(backend) {
                Some(known) => known,
                None => {
                    let guard = self.eras.probing(backend).await;
                    let known = match self.eras.get(backend) {
                        Some(known) => known,
                        None => self.probe_verdict(backend, endpoint, context).await?,
                    };
                    probing = Some(guard);
                    known
                }
            };
            let error = match known {
                Known::Modern(server) => return Ok(self.modern_session(endpoint, context, server, epoch)),
                Known::Legacy => match handshake(self.shared, endpoint, context, capabilities).await {
                    Ok(session) => {
                        if epoch == UNCONFIRMED {
                            self.eras.remember(backend, Known::Legacy);
                        }
                        return Ok(session);
                    }
                    Err(error) => error,
                },
            };
            drop(probing);
            if epoch == UNCONFIRMED || reprobed || unreachable(&error) {
                return Err(error);
            }
            tracing::info!(%backend, %error, "the handshake failed on a remembered 2025-era verdict; probing");
            self.eras.forget(backend, epoch);
            reprobed = true;
        }
    }

    /// Probes and judges by the configured era: a modern verdict is remembered at once (with its epoch), a
    /// 2025-era one comes back [`UNCONFIRMED`].
    async fn probe_verdict(
        &self,
        backend: &Arc<str>,
        endpoint: &BackendEndpoint,
        context: &CallContext<'_>,
    ) -> Result<(Known, u64), McpError> {
        match probe(self.shared, endpoint, context).await? {
            Verdict::Modern(server) => {
                Ok((Known::Modern(server.clone()), self.eras.remember(backend, Known::Modern(server))))
            }
            Verdict::Legacy | Verdict::Retry(_) if endpoint.era() == Era::Modern => Err(not_modern()),
            Verdict::Legacy | Verdict::Retry(_) => Ok((Known::Legacy, UNCONFIRMED)),
            Verdict::Refused(why) => {
                Err(McpError::NotDelivered { cause: NotDeliveredCause::Handshake, reason: why.into() })
            }
        }
    }

    /// A session on a modern HTTP backend: there is nothing to ask it, so nothing can fail.
    fn modern_session(
        &self,
        endpoint: &BackendEndpoint,
        context: &CallContext<'_>,
        server: ModernServer,
        epoch: u64,
    ) -> BackendSession {
        BackendSession {
            id: None,
            version: server.version,
            capabilities: server.capabilities,
            generation: self.shared.next_generation(),
            revision: 0,
            carrier: Carrier::Modern {
                home: Arc::new(endpoint.home()),
                slot: Arc::new(ModernSlot { epoch, asked: Asked::default() }),
            },
            principal: context.principal().cloned(),
            live: None,
        }
    }

    /// How a new process (or stream) of `backend` starts, and the epoch of the 2025-era verdict it relies on.
    pub(crate) fn opening(&self, backend: &str, era: Era) -> (Opening, Option<u64>) {
        match (era, self.eras.get(backend)) {
            (Era::Legacy, _) => (Opening::Legacy, None),
            (Era::Auto, Some((Known::Legacy, epoch))) => (Opening::Legacy, Some(epoch)),
            (Era::Auto, _) => (Opening::Probe { fallback: true }, None),
            (Era::Modern, _) => (Opening::Probe { fallback: false }, None),
        }
    }

    /// Remembers what starting a duplex session showed: a probed 2025-era backend (`modern` false), or that a
    /// handshake relying on a remembered verdict failed (it is forgotten, so the next process is probed).
    pub(crate) fn learn_opening(&self, backend: &Arc<str>, relied_on: Option<u64>, outcome: Result<bool, &McpError>) {
        match (relied_on, outcome) {
            (None, Ok(false)) => {
                self.eras.remember(backend, Known::Legacy);
            }
            (Some(epoch), Err(error)) if !unreachable(error) => self.eras.forget(backend, epoch),
            _ => {}
        }
    }
}

/// The epoch of a 2025-era verdict no handshake confirmed yet (epochs start at 1).
const UNCONFIRMED: u64 = 0;

/// Failures that say nothing of the backend's era: it was not reached, or waits for an authorization.
fn unreachable(error: &McpError) -> bool {
    matches!(
        error,
        McpError::NotDelivered {
            cause: NotDeliveredCause::Connect | NotDeliveredCause::ProcessStart | NotDeliveredCause::NoRoom,
            ..
        } | McpError::AuthorizationRequired { .. }
    )
}

fn not_modern() -> McpError {
    McpError::NotDelivered {
        cause: NotDeliveredCause::Handshake,
        reason: "the backend is configured with era = \"modern\", but it answered server/discover as a 2025-era \
                 server"
            .into(),
    }
}
