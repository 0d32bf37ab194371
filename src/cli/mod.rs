//! The binary's subcommands that need more than a few lines; `main.rs` parses the command line and calls them.

pub mod auth;
pub mod calls;
pub mod keys;
