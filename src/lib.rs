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
pub(crate) mod counted_ids;
pub mod demo;
pub(crate) mod front;
pub mod gateway;
pub(crate) mod glob;
pub(crate) mod hex;
pub(crate) mod inline_wake;
pub(crate) mod keyfile;
pub mod ledger;
pub(crate) mod ledger_url;
pub mod mcp;
pub(crate) mod private_files;
pub mod raw_json;
pub mod router;
pub(crate) mod seal;
pub(crate) mod sealed_box;
pub mod secret;
pub(crate) mod swap;
mod sys;
pub mod telemetry;
pub(crate) mod token_row;
