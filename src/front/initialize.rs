//! `initialize`: the start of an agent session (MCP 2025-11-25 lifecycle §"Initialization", transports
//! §"Session Management"; design §3).
//!
//! Rules: the protocol version is the agent's when supported, else the latest; the session binds the admitted
//! principal and the capabilities the agent declared, sealed into the `MCP-Session-Id` of the answer; a full
//! revocation list refuses new sessions (503, [`super::revocations`]), so deletions stay enforceable. The
//! capabilities offered are the gateway's own, whatever the backends offer.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::admit::Admitted;
use super::error::FrontError;
use super::session::{AgentSession, SessionRef};
use super::{Front, http, now_unix};
use crate::mcp::jsonrpc;
use crate::mcp::{LATEST_PROTOCOL_VERSION, SESSION_ID_HEADER, SUPPORTED_PROTOCOL_VERSIONS};

impl Front {
    /// The answer to `initialize` request `id`, carrying the new session's id.
    pub(super) fn initialize(&self, admitted: &Admitted, id: &Value, message: &Value) -> Result<Response, FrontError> {
        self.revocations.room(now_unix()).map_err(|cause| FrontError::NoRoomForSession { id: id.clone(), cause })?;
        let params = message.get("params");
        let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str).unwrap_or_default();
        let version =
            SUPPORTED_PROTOCOL_VERSIONS.into_iter().find(|v| *v == requested).unwrap_or(LATEST_PROTOCOL_VERSION);
        let session_ref = SessionRef::random().map_err(|_| FrontError::NoRandom { id: id.clone() })?;
        let session = AgentSession {
            id: session_ref,
            principal: admitted.principal.name.clone(),
            version,
            issued_at: now_unix(),
            capabilities: params.and_then(|p| p.get("capabilities")).cloned().unwrap_or_else(|| json!({})),
        };
        let token = self.sealer.seal(&session).map_err(|cause| FrontError::NotSealed { id: id.clone(), cause })?;
        let mut response = http::json(StatusCode::OK, &jsonrpc::result(id, self.server_result(version)));
        // A sealed token is base64url and '.', always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&token) {
            response.headers_mut().insert(SESSION_ID_HEADER, value);
        }
        admitted.record.session(&session_ref);
        self.metrics.agent_session_opened();
        Ok(response)
    }

    /// The `InitializeResult`: what the gateway offers at `version`.
    fn server_result(&self, version: &str) -> Value {
        json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "prompts": {"listChanged": false},
                "resources": {"subscribe": true, "listChanged": false},
                "completions": {},
                "logging": {},
            },
            "serverInfo": {"name": "switchyard", "title": "Switchyard MCP gateway", "version": env!("CARGO_PKG_VERSION")},
            "instructions": self.router.instructions(),
        })
    }
}
