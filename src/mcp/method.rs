//! MCP method names (MCP 2025-11-25, "Base protocol", "Server features", "Client features", "Utilities"), so a
//! method is spelled once for the front, the router, the backend client and the demo server.

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
/// 2026-07-28: what a server supports (its versions and capabilities), asked without a handshake.
pub const SERVER_DISCOVER: &str = "server/discover";
/// 2026-07-28: the stream of list changes and resource updates that replaces the `GET` stream.
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";

pub const INITIALIZED: &str = "notifications/initialized";
pub const CANCELLED: &str = "notifications/cancelled";
pub const PROGRESS: &str = "notifications/progress";
pub const MESSAGE: &str = "notifications/message";
pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
/// 2026-07-28: the first message of a `subscriptions/listen` stream, naming what the server honours.
pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
