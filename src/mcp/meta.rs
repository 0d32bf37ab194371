//! The `_meta` keys of MCP 2026-07-28 (basic §"`_meta`", `RequestMetaObject`; server/discover; basic/patterns
//! §"Subscriptions"): what a sessionless request carries about its client, and what results and listen-stream
//! messages carry about the server. Names only; which are required, and what a bad value gets, is the front's rule.

/// The request's protocol version (required on every 2026-07-28 request).
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The client capabilities of this one request (required; `{}` declares none).
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The client's self-reported `Implementation` (optional; never used for security decisions).
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The lowest log level the client wants `notifications/message` for (optional; absent: no log messages).
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// The server's `Implementation`, on results.
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The JSON-RPC id of the `subscriptions/listen` request a listen-stream message belongs to.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The log levels of `notifications/message`, least severe first (RFC 5424 severities, MCP utilities/logging).
pub const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// The rank of a log level in [`LOG_LEVELS`] (higher is more severe), `None` for an unknown level.
pub fn log_level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|known| *known == level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_rank_by_severity() {
        assert_eq!(log_level_rank("debug"), Some(0));
        assert!(log_level_rank("error") > log_level_rank("warning"));
        assert_eq!(log_level_rank("Error"), None, "levels are lowercase");
        assert_eq!(log_level_rank("verbose"), None);
    }
}
