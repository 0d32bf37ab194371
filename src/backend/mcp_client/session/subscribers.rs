//! Who hears what backends send outside calls: list changes (the catalog's discovery) and messages for an agent
//! session (the front).
//!
//! Rules: one subscriber of each kind; subscribing again replaces it. The subscriber is looked up when each
//! message arrives, so a session started before anyone subscribed (discovery's, at start-up) still reaches a
//! later subscriber; without one, a message is dropped.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::backend::mcp_client::ListChanged;
use crate::mcp::SessionMessage;

#[derive(Default)]
pub(crate) struct Subscribers {
    list_changed: Mutex<Option<mpsc::UnboundedSender<ListChanged>>>,
    session_messages: Mutex<Option<mpsc::UnboundedSender<SessionMessage>>>,
}

impl Subscribers {
    /// Tells the subscriber (the catalog's discovery) that a backend's list changed.
    pub(crate) fn announce(&self, backend: &Arc<str>, method: &str) {
        if let Some(subscriber) = self.list_changed.lock().as_ref() {
            let _ = subscriber.send(ListChanged { backend: Arc::clone(backend), method: method.to_owned() });
        }
    }

    /// Hands a message outside calls to the subscriber (the front), if any.
    pub(crate) fn deliver(&self, message: SessionMessage) {
        if let Some(subscriber) = self.session_messages.lock().as_ref() {
            let _ = subscriber.send(message);
        }
    }

    pub(crate) fn has_session_messages(&self) -> bool {
        self.session_messages.lock().is_some()
    }

    pub(crate) fn has_list_changed(&self) -> bool {
        self.list_changed.lock().is_some()
    }

    pub(crate) fn subscribe_session_messages(&self) -> mpsc::UnboundedReceiver<SessionMessage> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self.session_messages.lock() = Some(sender);
        receiver
    }

    pub(crate) fn subscribe_list_changed(&self) -> mpsc::UnboundedReceiver<ListChanged> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self.list_changed.lock() = Some(sender);
        receiver
    }
}
