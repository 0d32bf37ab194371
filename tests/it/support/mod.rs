//! Support code shared by the integration tests: scripted backends the gateway talks to, and helpers to drive
//! them. Each submodule owns one kind of peer.

pub mod assert;
pub mod auth_server;
pub mod backend_calls;
pub mod balancer;
pub mod browser;
pub mod chromium;
pub mod client_assertion;
pub mod console;
pub mod fault_backend;
pub mod fault_legacy_sse;
pub mod gateway;
pub mod hook;
pub mod interop;
pub mod otlp_collector;
pub mod pg_proxy;
pub mod postgres;
pub mod round_robin;
pub mod stdio_gate;
