//! The shared MCP vocabulary: protocol versions, header names, method names, the relay and session-message types
//! the front and the router share with the backend client, whom a backend session is held for
//! ([`SessionHolder`]), the `switchyard/outcome` values, the members of a result the gateway branches on
//! ([`ResultFlags`]), the `_meta` keys of the sessionless 2026-07-28 era ([`meta`]), the 2026-07-28 revision's
//! wire vocabulary ([`modern`]), JSON-RPC itself ([`jsonrpc`]), and an agent's message read once into a typed
//! request ([`message`]).
//!
//! Rules: every layer may use it and it uses none of them (no `crate::` import), so a name or a message type
//! changes in one place for every layer; it holds vocabulary, never behaviour of a layer.

mod holder;
pub(crate) mod jsonrpc;
pub(crate) mod message;
pub(crate) mod meta;
pub(crate) mod method;
pub(crate) mod modern;
mod outcome;
mod relay;
mod result_flags;

pub use holder::SessionHolder;
pub use outcome::{OUTCOME_META, Outcome};
pub use relay::{Relay, RelayMessage, SessionMessage};
pub use result_flags::ResultFlags;

/// Protocol versions the gateway accepts, newest first (MCP 2025-11-25 "Versioning").
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The version offered in `initialize` and answered to clients asking for an unsupported one.
pub const LATEST_PROTOCOL_VERSION: &str = SUPPORTED_PROTOCOL_VERSIONS[0];
/// Protocol versions of the sessionless era (MCP 2026-07-28 "Versioning": no `initialize`, every request carries its
/// version in `_meta`) the gateway serves to agents, newest first.
pub const MODERN_PROTOCOL_VERSIONS: [&str; 1] = ["2026-07-28"];
/// The Streamable HTTP session header (transports §Session Management).
pub const SESSION_ID_HEADER: &str = "mcp-session-id";
/// The Streamable HTTP protocol version header (transports §Protocol Version Header).
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// The 2026-07-28 request header mirroring the body's `method` (transports §"Standard MCP Request Headers").
pub const METHOD_HEADER: &str = "mcp-method";
/// The 2026-07-28 request header mirroring `params.name` (`tools/call`, `prompts/get`) or `params.uri`
/// (`resources/read`).
pub const NAME_HEADER: &str = "mcp-name";
/// The principal of an agent that presented no credential.
pub const ANONYMOUS: &str = "anonymous";

pub fn is_supported_version(version: &str) -> bool {
    SUPPORTED_PROTOCOL_VERSIONS.contains(&version)
}

/// Whether `version` is one of the sessionless era the gateway serves ([`MODERN_PROTOCOL_VERSIONS`]).
pub fn is_modern_version(version: &str) -> bool {
    MODERN_PROTOCOL_VERSIONS.contains(&version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_versions_are_newest_first() {
        assert_eq!(LATEST_PROTOCOL_VERSION, "2025-11-25");
        assert!(is_supported_version("2024-11-05"));
        assert!(!is_supported_version("2026-07-28"));
        assert!(is_modern_version("2026-07-28") && !is_modern_version("2025-11-25") && !is_modern_version(""));
    }
}
