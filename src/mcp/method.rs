//! MCP method names (MCP 2025-11-25, "Base protocol", "Server features", "Client features", "Utilities"; and the
//! methods 2026-07-28 added), so a method is spelled once for the front, the router, the backend client and the
//! demo server; and [`Method`], the methods an agent may send, read once from each message.

pub const INITIALIZE: &str = "initialize";
pub const PING: &str = "ping";
pub const TOOLS_LIST: &str = "tools/list";
pub const TOOLS_CALL: &str = "tools/call";
pub const PROMPTS_LIST: &str = "prompts/list";
pub const PROMPTS_GET: &str = "prompts/get";
pub const RESOURCES_LIST: &str = "resources/list";
pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
pub const RESOURCES_READ: &str = "resources/read";
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
pub const COMPLETION_COMPLETE: &str = "completion/complete";
pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
pub const ELICITATION_CREATE: &str = "elicitation/create";
pub const ROOTS_LIST: &str = "roots/list";
/// 2026-07-28: what a server offers, asked without a session (server/discover).
pub const SERVER_DISCOVER: &str = "server/discover";
/// 2026-07-28: the stream of list changes and resource updates that replaced the `GET` stream.
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// Tasks (2025-11-25's experimental utility; 2026-07-28's `io.modelcontextprotocol/tasks` extension keeps
/// `get`, `cancel` and adds `update`).
pub const TASKS_GET: &str = "tasks/get";
pub const TASKS_RESULT: &str = "tasks/result";
pub const TASKS_LIST: &str = "tasks/list";
pub const TASKS_CANCEL: &str = "tasks/cancel";
pub const TASKS_UPDATE: &str = "tasks/update";

pub const INITIALIZED: &str = "notifications/initialized";
pub const CANCELLED: &str = "notifications/cancelled";
pub const PROGRESS: &str = "notifications/progress";
pub const MESSAGE: &str = "notifications/message";
pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
/// 2026-07-28: the first message of a `subscriptions/listen` stream.
pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// A task's new status on a `subscriptions/listen` stream (the 2026-07-28 tasks extension).
pub const TASKS_NOTIFICATION: &str = "notifications/tasks";
/// A task's new status on a 2025-11-25 agent's stream.
pub const TASKS_STATUS: &str = "notifications/tasks/status";

/// Declares [`Method`] from one list of (variant, name), so each name is written once and both directions agree.
macro_rules! methods {
    ($($(#[$doc:meta])* $variant:ident = $name:ident,)*) => {
        /// A method an agent may send, read once from the message; [`Method::Other`] keeps any name the gateway
        /// does not serve (it is answered "method not found" by whoever is asked).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Method {
            $($(#[$doc])* $variant,)*
            Other(String),
        }

        impl Method {
            pub fn from_name(name: &str) -> Method {
                match name {
                    $($name => Method::$variant,)*
                    other => Method::Other(other.to_owned()),
                }
            }

            /// The method's name on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Method::$variant => $name,)*
                    Method::Other(name) => name,
                }
            }
        }
    };
}

methods! {
    Initialize = INITIALIZE,
    Ping = PING,
    ToolsList = TOOLS_LIST,
    ToolsCall = TOOLS_CALL,
    PromptsList = PROMPTS_LIST,
    PromptsGet = PROMPTS_GET,
    ResourcesList = RESOURCES_LIST,
    ResourcesTemplatesList = RESOURCES_TEMPLATES_LIST,
    ResourcesRead = RESOURCES_READ,
    ResourcesSubscribe = RESOURCES_SUBSCRIBE,
    ResourcesUnsubscribe = RESOURCES_UNSUBSCRIBE,
    CompletionComplete = COMPLETION_COMPLETE,
    LoggingSetLevel = LOGGING_SET_LEVEL,
    ServerDiscover = SERVER_DISCOVER,
    SubscriptionsListen = SUBSCRIPTIONS_LISTEN,
    TasksGet = TASKS_GET,
    TasksResult = TASKS_RESULT,
    TasksList = TASKS_LIST,
    TasksCancel = TASKS_CANCEL,
    TasksUpdate = TASKS_UPDATE,
    /// `notifications/initialized`.
    Initialized = INITIALIZED,
    /// `notifications/cancelled`.
    Cancelled = CANCELLED,
}

impl Method {
    /// The name, owned (for a message that names the method).
    pub fn into_name(self) -> String {
        match self {
            Method::Other(name) => name,
            known => known.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_as_they_were_sent() {
        for name in [TOOLS_CALL, SERVER_DISCOVER, CANCELLED, "tasks/get", "tasks/other", "Tools/Call", ""] {
            assert_eq!(Method::from_name(name).as_str(), name);
        }
        assert_eq!(Method::from_name(TOOLS_CALL), Method::ToolsCall);
        assert_eq!(Method::from_name("tools/call "), Method::Other("tools/call ".into()));
        assert_eq!(Method::from_name("x").into_name(), "x");
    }
}
