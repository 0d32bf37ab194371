//! The backend client's calls as the tests make them: one slot on one target, each call's context starting when
//! it is made, on behalf of no principal — so a test line names only what differs between tests.

use serde_json::Value;
use switchyard::backend::mcp_client::{
    BackendSession, BackendTarget, CallContext, McpBackendClient, McpError, SlotKey,
};
use switchyard::mcp::Relay;

/// `client`'s calls for `slot` on `target`.
pub fn on<'a>(client: &'a McpBackendClient, slot: &'a SlotKey, target: &'a BackendTarget) -> Calls<'a> {
    Calls { client, slot, target }
}

pub struct Calls<'a> {
    client: &'a McpBackendClient,
    slot: &'a SlotKey,
    target: &'a BackendTarget,
}

impl Calls<'_> {
    fn context(&self) -> CallContext<'_> {
        CallContext::starting_now(self.target)
    }

    pub async fn session(&self) -> Result<BackendSession, McpError> {
        self.client.session(self.slot, self.target, &self.context()).await
    }

    pub async fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        self.client.list_tools(self.slot, self.target, &self.context()).await
    }

    pub async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        self.client.request(self.slot, self.target, &self.context(), method, params).await
    }

    pub async fn request_relayed(&self, method: &str, params: Value, relay: &Relay) -> Result<Value, McpError> {
        self.client.request_relayed(self.slot, self.target, &self.context(), method, params, relay).await
    }
}
