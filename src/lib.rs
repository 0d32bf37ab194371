//! Switchyard: an MCP gateway. Agents speak Streamable HTTP MCP to one endpoint; the gateway aggregates the tools
//! of many backend MCP servers and forwards calls to them. Data flows one way, each layer knowing only the next:
//!
//! ```text
//! agent ──HTTP──▶ front ──▶ auth ──▶ router ──▶ (ledger, catalog, backend) ──▶ backend MCP server
//! mcp     the shared vocabulary (versions, headers, method names, message types): used by all, knows none
//! config  parsed and validated once; the composition root (`gateway`) lowers it into each part's plain types
//! ```
//!
//! See `ARCHITECTURE.md` for the code map and the invariants.

pub mod auth;
pub mod backend;
pub mod catalog;
pub mod civil_date;
pub mod config;
pub mod demo;
pub mod front;
pub mod gateway;
pub mod glob;
pub mod keyfile;
pub mod ledger;
pub mod ledger_url;
pub mod mcp;
pub mod private_files;
pub mod raw_json;
pub mod router;
pub mod seal;
pub mod secret;
pub mod swap;
mod sys;
pub mod telemetry;
