//! What an agent asked of a 2026-07-28 backend that the backend keeps no record of (MCP 2026-07-28 removed
//! `logging/setLevel` and `resources/subscribe`): the log level of later requests and the resources subscribed to,
//! kept per slot by whichever transport serves it.
//!
//! Rule: state and its one update only; it imports nothing of the transports or the session layer.

use std::collections::BTreeSet;

use parking_lot::Mutex;
use serde_json::Value;

use crate::backend::mcp_client::error::McpError;
use crate::mcp::{jsonrpc, method};

/// What an agent asked of a 2026-07-28 backend that the backend keeps no record of: the log level of later
/// requests, and the resources it subscribed to.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    log_level: Mutex<Option<Value>>,
    subscriptions: Mutex<BTreeSet<String>>,
}

impl Asked {
    pub(crate) fn log_level(&self) -> Option<Value> {
        self.log_level.lock().clone()
    }

    /// Applies a method 2026-07-28 removed (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`)
    /// for a backend with these `capabilities`; `None` for any other method. `Some(Ok(Some(uris)))`: the
    /// subscriptions are now `uris`, and the listen stream must follow.
    pub(crate) fn apply(
        &self,
        method: &str,
        params: Option<&Value>,
        capabilities: &Value,
    ) -> Option<Result<Option<Vec<String>>, McpError>> {
        let param = |name: &str| params.and_then(|params| params.get(name));
        let subscribe = match method {
            method::LOGGING_SET_LEVEL => {
                let Some(level @ Value::String(_)) = param("level") else {
                    return Some(Err(invalid_params("logging/setLevel needs `params.level`, a string")));
                };
                *self.log_level.lock() = Some(level.clone());
                return Some(Ok(None));
            }
            method::RESOURCES_SUBSCRIBE => true,
            method::RESOURCES_UNSUBSCRIBE => false,
            _ => return None,
        };
        if subscribe && capabilities.pointer("/resources/subscribe") != Some(&Value::Bool(true)) {
            let message = "the backend offers no resource subscriptions".to_owned();
            return Some(Err(McpError::Rpc { code: jsonrpc::METHOD_NOT_FOUND, message, data: None }));
        }
        let Some(uri) = param("uri").and_then(Value::as_str) else {
            return Some(Err(invalid_params(&format!("{method} needs `params.uri`, a string"))));
        };
        let mut subscriptions = self.subscriptions.lock();
        if subscribe {
            subscriptions.insert(uri.to_owned());
        } else {
            subscriptions.remove(uri);
        }
        Some(Ok(Some(subscriptions.iter().cloned().collect())))
    }
}

fn invalid_params(message: &str) -> McpError {
    McpError::Rpc { code: jsonrpc::INVALID_PARAMS, message: message.to_owned(), data: None }
}
