//! Backends that are local processes spoken to over stdin/stdout (`transport = "stdio"`; MCP
//! 2025-11-25 `basic/transports.mdx` §stdio).
//!
//! Owns: starting a backend's process with a clean environment in its own process group, and stopping the whole
//! group ([`process`]); bounded line framing ([`lines`]); stderr logged within a budget ([`stderr`]), its last
//! lines kept ([`tail`]) for the report of how the process ended ([`exit`]); one MCP session per process over stdin/stdout, what a
//! pipe proves about delivery, the JSON-RPC rules being the shared session core's ([`connection`],
//! [`crate::backend::duplex`]); and the per-backend start-up health with
//! exponential backoff and jitter ([`launcher`]); the groups a gateway runs, stopped at its shutdown and, after a
//! crash, at the next start ([`groups`], recognised through [`procfs`]).
//!
//! Must not know: agents, HTTP, the session table (the caller decides which agent session a process serves;
//! see [`Sharing`]). The plain types here are what the composition root lowers a stdio backend's configuration
//! into.

mod connection;
mod exit;
mod groups;
mod launcher;
mod lines;
mod process;
mod procfs;
mod stderr;
mod tail;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use crate::backend::duplex::{Opening, Sharing, Standing};
pub use connection::StdioConnection;
pub use groups::{GROUP_TOKEN_VAR, ProcessGroups, RECORD_PREFIX};
pub use launcher::{Launcher, SpawnStatus};
pub use process::ENV_ALLOWLIST;
pub use stderr::{STDERR_BURST, SUMMARY_EVERY};

use crate::backend::mcp_client::{Era, MAX_EXCHANGE_BYTES};

/// How long each step of stopping a process may take (stdin closed → SIGTERM → SIGKILL), by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// The program to start: an absolute path (never run through a shell), its arguments, the variables it gets
/// besides [`ENV_ALLOWLIST`], and its working directory.
#[derive(Clone)]
pub struct StdioCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// Shows the variables' names only: values may be secrets.
impl fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// A configured stdio backend, as the backend layer needs it.
#[derive(Debug, Clone)]
pub struct StdioBackend {
    pub name: Arc<str>,
    pub command: StdioCommand,
    pub sharing: Sharing,
    /// A process with no call for this long is stopped.
    pub idle_timeout: Duration,
    /// Live processes of this backend at most.
    pub max_processes: usize,
    /// Which protocol era to speak (each process is probed by default).
    pub era: Era,
}

/// How a connection treats its process.
#[derive(Clone)]
pub struct StdioOptions {
    /// Longest stdout line (one JSON-RPC message) accepted.
    pub max_line: usize,
    /// Each step of stopping the process waits this long.
    pub grace: Duration,
    /// Where the process's group is registered while it runs.
    pub groups: Arc<ProcessGroups>,
}

impl StdioOptions {
    /// The defaults, registering groups in `groups`.
    pub fn new(groups: Arc<ProcessGroups>) -> Self {
        Self { max_line: MAX_EXCHANGE_BYTES, grace: DEFAULT_GRACE, groups }
    }
}

impl Default for StdioOptions {
    /// The defaults, with groups kept in memory only.
    fn default() -> Self {
        Self::new(ProcessGroups::unrecorded())
    }
}

impl fmt::Debug for StdioOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioOptions").field("max_line", &self.max_line).field("grace", &self.grace).finish()
    }
}
