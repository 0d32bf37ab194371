//! The backend client's calls as the tests make them: one slot on one target, each call's context starting when
//! it is made, on behalf of no principal — so a test line names only what differs between tests.

use serde_json::Value;
use switchyard::backend::mcp_client::{
    BackendSession, BackendTarget, CallContext, Destination, McpBackendClient, McpError, SlotKey,
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
        let context = self.context();
        self.client.session(Destination { slot: self.slot, target: self.target, context: &context }).await
    }

    pub async fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        let context = self.context();
        self.client.list_tools(Destination { slot: self.slot, target: self.target, context: &context }).await
    }

    pub async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        self.request_relayed(method, params, &Relay::default()).await
    }

    pub async fn request_relayed(&self, method: &str, params: Value, relay: &Relay) -> Result<Value, McpError> {
        let context = self.context();
        let to = Destination { slot: self.slot, target: self.target, context: &context };
        self.client.request_relayed(to, method, params, relay).await
    }
}
