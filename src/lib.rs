//! Switchyard: an MCP gateway. Agents speak Streamable HTTP MCP to one endpoint (the `front`); the gateway
//! aggregates the tools of many backend MCP servers (the `catalog`) and forwards calls to them through the
//! `backend` client. Data flows one way: front → router → ledger → backend client.
//!
//! See `ARCHITECTURE.md` for the code map and the invariants.

pub mod auth;
pub mod backend;
pub mod catalog;
pub mod config;
pub mod demo;
pub mod front;
pub mod gateway;
pub mod glob;
pub mod jsonrpc;
pub mod keyfile;
pub mod ledger;
pub mod router;
