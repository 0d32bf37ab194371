//! `initialize`: the start of an agent session (MCP 2025-11-25 lifecycle §"Initialization", transports
//! §"Session Management").
//!
//! Rules: the protocol version is the agent's when supported, else the latest; the session binds the admitted
//! principal and the capabilities the agent declared, sealed into the `MCP-Session-Id` of the answer; a full
//! revocation list refuses new sessions (503, [`super::revocations`]), so deletions stay enforceable, and so does
//! a full share of it, but only the sessions of the owner (principal, or anonymous client address) that holds it. The
//! capabilities offered are the gateway's own, whatever the backends offer.

use std::net::IpAddr;

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::admit::Admitted;
use super::error::FrontError;
use super::session::{AgentSession, SessionRef};
use super::{Front, http, now_unix};
use crate::mcp::{LATEST_PROTOCOL_VERSION, SESSION_ID_HEADER, SUPPORTED_PROTOCOL_VERSIONS};
use crate::mcp::{jsonrpc, method};
use crate::telemetry::trace::ServerRequest;

impl Front {
    /// The answer to `initialize` request `id` (with `params`), carrying the new session's id; with tracing on, one SERVER span.
    pub(super) fn initialize(
        &self,
        admitted: &Admitted,
        peer: Option<IpAddr>,
        id: &Value,
        params: &Value,
    ) -> Result<Response, FrontError> {
        let span = self.tracer.as_ref().map(|tracer| {
            tracer.server_span(&ServerRequest { method: method::INITIALIZE, id, params, session: None, peer })
        });
        let opened = self.open_session(admitted, id, params);
        if let Some(mut span) = span {
            match &opened {
                Ok((session, _, reply)) => {
                    span.opened_session(&session.id.to_string(), session.version);
                    span.end(reply);
                }
                // Every refusal of `initialize` is the error table's -32603.
                Err(_) => span.end(&jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, "no session was opened")),
            }
        }
        let (session, token, reply) = opened?;
        let mut response = http::json(StatusCode::OK, &reply);
        // A sealed token is base64url and '.', always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&token) {
            response.headers_mut().insert(SESSION_ID_HEADER, value);
        }
        admitted.record.session(&session.id);
        self.metrics.agent_session_opened();
        Ok(response)
    }

    /// A new session for `initialize` request `id`: the session, its sealed id and the JSON-RPC answer.
    fn open_session(
        &self,
        admitted: &Admitted,
        id: &Value,
        params: &Value,
    ) -> Result<(AgentSession, String, Value), FrontError> {
        let room = self.revocations.room(&admitted.owner(), now_unix());
        room.map_err(|cause| FrontError::NoRoomForSession { id: id.clone(), cause })?;
        let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let version =
            SUPPORTED_PROTOCOL_VERSIONS.into_iter().find(|v| *v == requested).unwrap_or(LATEST_PROTOCOL_VERSION);
        let session_ref = SessionRef::random().map_err(|_| FrontError::NoRandom { id: id.clone() })?;
        let session = AgentSession {
            id: session_ref,
            principal: admitted.principal.name.clone(),
            version,
            issued_at: now_unix(),
            capabilities: params.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        };
        let token = self.sealer.seal(&session).map_err(|cause| FrontError::NotSealed { id: id.clone(), cause })?;
        let reply = jsonrpc::result(id, self.server_result(version));
        Ok((session, token, reply))
    }

    /// The `InitializeResult`: what the gateway offers at `version`.
    fn server_result(&self, version: &str) -> Value {
        let mut capabilities = capabilities();
        if self.router.offers_tasks() {
            capabilities["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
        }
        json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": server_info(),
            "instructions": self.router.instructions(),
        })
    }
}

/// The gateway's own server capabilities, whatever the backends offer (tasks, when some backend's tools run as
/// tasks, are added per era), in either era (2026-07-28's
/// `server/discover` declares the same ones: list changes and resource updates then arrive on
/// `subscriptions/listen`, and logging through the request's `logLevel`).
pub(super) fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": false},
        "resources": {"subscribe": true, "listChanged": false},
        "completions": {},
        "logging": {},
    })
}

/// The gateway's `Implementation`.
pub(super) fn server_info() -> Value {
    json!({"name": "switchyard", "title": "Switchyard MCP gateway", "version": env!("CARGO_PKG_VERSION")})
}
