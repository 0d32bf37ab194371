//! Where the notifications a backend sends about one exchange go: progress and log messages to the caller's
//! relay (the progress token of ours put back to the caller's), list changes to the client's subscriber.
//!
//! Rules: the gateway's own subscription acknowledgement goes nowhere; tools and prompts list changes are the
//! catalog's alone, a resources list change reaches the caller too; progress for a token the request did not
//! carry is dropped.

use serde_json::Value;

use crate::mcp::{Relay, method};

/// What the exchange does with notifications: progress and log messages go to the caller's relay (a progress
/// token of ours translated back to the caller's), `list_changed` notifications to the client's subscriber (and
/// the resources one to the caller too).
#[derive(Clone, Copy, Default)]
pub(crate) struct NotificationRoute<'a> {
    pub(crate) relay: Option<&'a Relay>,
    /// (our token, the caller's token) when the request carried a progress token.
    pub(crate) progress: Option<(&'a Value, &'a Value)>,
    pub(crate) list_changed: Option<&'a (dyn Fn(&str) + Sync)>,
}

impl NotificationRoute<'_> {
    pub(crate) fn hear(&self, mut message: Value, method: &str) {
        if method == method::SUBSCRIPTIONS_ACKNOWLEDGED {
            return; // the gateway's own subscription, not the agent's
        }
        if method.ends_with("/list_changed") {
            if let Some(list_changed) = self.list_changed {
                list_changed(method);
            }
            // Tools and prompts are the catalog's (it tells agents itself); resources are listed live, so the
            // agent hears the backend's own news.
            if method != method::RESOURCES_LIST_CHANGED {
                return;
            }
        }
        let Some(relay) = self.relay else { return };
        if method == method::PROGRESS {
            let token = message.pointer_mut("/params/progressToken");
            match (token, self.progress) {
                (Some(token), Some((ours, theirs))) if token == ours => *token = theirs.clone(),
                _ => return, // progress for another request (or a token we never issued) is not this caller's
            }
        }
        relay.forward(message);
    }
}
