//! Everything that speaks to backend MCP servers (and to REST APIs offered as MCP tools, [`openapi`]). Nothing in here knows about agents' HTTP requests; nothing
//! above this module knows about backend wire formats (MCP 2025-11-25, Streamable HTTP).

pub(crate) mod duplex;
pub mod event_stream;
pub mod http_client;
pub mod legacy_sse;
pub mod mcp_client;
pub mod oauth;
pub mod openapi;
pub mod stdio;
pub mod testing;
