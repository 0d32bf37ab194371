//! Everything that speaks to backend MCP servers (and to REST APIs offered as MCP tools, [`openapi`]): the client
//! ([`mcp_client`]), its transports, the HTTP client it sends with, and the gateway's OAuth client ([`oauth`]).
//!
//! Rules: nothing in here knows about agents' HTTP requests, routing or storage; nothing above this module knows
//! about backend wire formats (MCP 2025-11-25 and 2026-07-28, Streamable HTTP, stdio, HTTP+SSE). Redirects are
//! never followed by the MCP client (backend URLs come only from configuration).

pub(crate) mod duplex;
pub mod event_stream;
pub mod http_client;
pub mod legacy_sse;
pub mod mcp_client;
pub mod oauth;
pub mod openapi;
pub mod stdio;
pub mod testing;
