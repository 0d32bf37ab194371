//! Telemetry (design §8): what the gateway tells its operators about the work it does. Every layer reports to it;
//! it knows none of them (it may use the MCP vocabulary, `crate::mcp`).
//!
//! Owns: [`trace`], OpenTelemetry traces over OTLP/HTTP following the MCP semantic conventions.

pub mod trace;
