//! Hooks for the integration tests (`tests/it`) only: they drive one backend connection by hand or look inside
//! the client, which the gateway never does (it goes through [`McpBackendClient`]). Production code must not call
//! them; each is a trait a test imports by name, so a use outside the tests stands out, and `dead_code` still sees
//! whether the gateway itself needs what they wrap.

use std::future::Future;

use reqwest::Url;
use serde_json::Value;
use tokio::time::Instant;

use super::duplex::DuplexConnection;
use super::legacy_sse::LegacySseConnection;
use super::mcp_client::{McpBackendClient, McpError, Relay, SlotKey};
use super::stdio::StdioConnection;
use crate::mcp::SessionHolder;

/// One request on an established stdio or legacy SSE connection, its `result` parsed.
pub trait ConnectionRequest {
    /// Sends one request and returns its JSON-RPC `result`; `params` of `Value::Null` are omitted. The backend's
    /// messages about the request go to `relay`; the agent may cancel through it.
    fn request(
        &self,
        method: &str,
        params: Value,
        relay: &Relay,
        deadline: Instant,
    ) -> impl Future<Output = Result<Value, McpError>> + Send;
}

impl ConnectionRequest for DuplexConnection {
    async fn request(&self, method: &str, params: Value, relay: &Relay, deadline: Instant) -> Result<Value, McpError> {
        self.request_raw(method, params, relay, deadline).await.map(|result| result.to_value())
    }
}

/// Stopping a stdio process by hand.
pub trait StdioClose {
    /// Stops the process (stdin closed, SIGTERM, SIGKILL to its group) and waits until it is reaped.
    fn close(self) -> impl Future<Output = ()> + Send;
}

impl StdioClose for StdioConnection {
    fn close(self) -> impl Future<Output = ()> + Send {
        StdioConnection::close(self)
    }
}

/// Where a legacy SSE connection POSTs.
pub trait SseEndpoint {
    /// Where messages are POSTed (from the `endpoint` event).
    fn endpoint(&self) -> &Url;
}

impl SseEndpoint for LegacySseConnection {
    fn endpoint(&self) -> &Url {
        LegacySseConnection::endpoint(self)
    }
}

/// The size of the client's session table.
pub trait CachedSessions {
    /// How many (agent session, backend) slots the table holds.
    fn cached_sessions(&self) -> usize;
}

impl CachedSessions for McpBackendClient {
    fn cached_sessions(&self) -> usize {
        McpBackendClient::cached_sessions(self)
    }
}

/// The slot of an agent session, as the router would make it.
pub trait AgentSlot {
    /// The slot of agent session `agent_session` on `backend`.
    fn agent(agent_session: &str, backend: &str) -> Self;
}

impl AgentSlot for SlotKey {
    fn agent(agent_session: &str, backend: &str) -> Self {
        SlotKey::new(SessionHolder::agent(agent_session), backend)
    }
}
