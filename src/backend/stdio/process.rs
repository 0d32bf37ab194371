//! Starting and stopping one stdio backend process (MCP 2025-11-25
//! `basic/transports.mdx` §stdio: the server may log to stderr, and shutdown is closing stdin, then SIGTERM, then
//! SIGKILL).
//!
//! Rules:
//! - argv only, never a shell; the environment is cleared, then given [`ENV_ALLOWLIST`] from the gateway's own
//!   environment and the backend's configured `env` (which wins), and last the group's token
//!   ([`super::GROUP_TOKEN_VAR`], see [`super::groups`]).
//! - Each child leads its own process group, so signals reach the grandchildren `npx` and `uvx` start. On Linux
//!   the child also gets `PR_SET_PDEATHSIG` = SIGKILL, so it dies with the gateway even when the gateway itself
//!   is killed (the signal fires when the spawning *thread* ends; spawns happen on the runtime's worker threads,
//!   which live as long as the gateway).
//! - Stopping: stdin is already closed by the caller; wait the grace period for the leader, SIGTERM the group,
//!   wait, SIGKILL the group; reap the leader; then make sure no member of the group survives (SIGTERM, grace,
//!   SIGKILL again), since a grandchild may outlive a leader that exited politely.
//! - stderr is drained into the log from the start, within a budget ([`super::stderr`]).
//! - The command and its arguments are logged at start; environment values never are (they may be secrets).

use std::io;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{Instant, sleep, timeout};

use super::StdioCommand;
use super::groups::GroupToken;
use super::stderr;
use super::tail::Tail;
use crate::backend::mcp_client::quoted;
use crate::sys;

/// The variables a child gets from the gateway's environment (when set there).
pub const ENV_ALLOWLIST: [&str; 6] = ["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR"];
/// How often a group that should be empty is checked while waiting for it.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// A started process with its pipes.
pub(super) struct Spawned {
    pub(super) child: Child,
    /// Also the process group id.
    pub(super) pid: u32,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: ChildStdout,
    /// The last lines of its stderr.
    pub(super) stderr: Tail,
}

/// Starts `command` for `backend` with the group's `token`, draining its stderr in the background.
pub(super) fn spawn(backend: &Arc<str>, command: &StdioCommand, token: &GroupToken) -> io::Result<Spawned> {
    let mut process = Command::new(&command.program);
    process.args(&command.args).env_clear();
    for name in ENV_ALLOWLIST {
        if let Some(value) = std::env::var_os(name) {
            process.env(name, value);
        }
    }
    process.envs(command.env.iter().map(|(name, value)| (name, value)));
    let (name, value) = token.env();
    process.env(name, value);
    if let Some(cwd) = &command.cwd {
        process.current_dir(cwd);
    }
    process.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    process.process_group(0);
    // A backstop only: the supervisor stops the whole group; this catches a supervisor that never ran.
    process.kill_on_drop(true);
    sys::die_with_parent(&mut process, std::process::id());
    let mut child = process.spawn()?;
    let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) =
        (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(io::Error::other("the process started without its pipes"));
    };
    tracing::info!(
        backend = %backend,
        pid,
        program = %command.program.display(),
        args = %quoted(&command.args),
        env = %command.env.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(" "),
        "started a stdio backend process"
    );
    let stderr = stderr::drain(Arc::clone(backend), pid, stderr);
    Ok(Spawned { child, pid, stdin, stdout, stderr })
}

/// Stops the process and its group (see the module rules) and reaps it. The caller has closed stdin.
pub(super) async fn stop(child: &mut Child, pid: u32, grace: Duration) {
    let Some(group) = group_id(pid) else { return };
    let exited = timeout(grace, child.wait()).await.is_ok();
    signal_group(group, libc::SIGTERM);
    if !exited && timeout(grace, child.wait()).await.is_err() {
        signal_group(group, libc::SIGKILL);
    }
    match child.wait().await {
        Ok(status) => tracing::debug!(pid, %status, "stdio backend process reaped"),
        Err(error) => tracing::warn!(pid, %error, "could not reap a stdio backend process"),
    }
    if !group_empty_within(group, grace).await {
        signal_group(group, libc::SIGKILL);
    }
}

/// The process group to signal; never 0 or 1, which `killpg` would read as "our own group" or init.
fn group_id(pid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pid).ok().filter(|group| *group > 1)
}

fn signal_group(group: libc::pid_t, signal: libc::c_int) {
    sys::kill_group(group, signal);
}

/// Whether every member of the group is gone within `grace` (polled with signal 0).
async fn group_empty_within(group: libc::pid_t, grace: Duration) -> bool {
    let until = Instant::now() + grace;
    loop {
        if !sys::group_exists(group) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        sleep(GROUP_POLL).await;
    }
}
