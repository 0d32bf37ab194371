//! One MCP session with one stdio backend process (MCP 2025-11-25 `basic/transports.mdx` §stdio).
//!
//! Rules:
//! - Framing: one JSON-RPC message per line on stdin and stdout, UTF-8, no embedded newlines (serde_json never
//!   writes one). A stdout line is bounded ([`super::StdioOptions::max_line`]); a longer one, a line that is not
//!   JSON, or JSON that is not a JSON-RPC message is logged and ends the process. Blank lines are skipped.
//! - One writer task owns stdin, so a message's line is written whole or not at all, whatever the caller does, and
//!   lines keep their order; the session core reads stdout ([`crate::backend::duplex`]); a supervisor task owns the
//!   process and stops it (see [`super::process`]) when the session ends, the connection is closed or dropped, or
//!   the process ends or misbehaves; the process's group is in the gateway's [`ProcessGroups`] from its spawn
//!   until it is stopped.
//! - Why a session ended is said once, by whoever knows: the gateway's own stop is
//!   [`Fault::ClosedByGateway`]; a process that exited by itself or was killed from outside is reported by the
//!   supervisor with its status or signal and its last stderr lines ([`super::tail`]). The reader and the writer,
//!   which see the pipes close first, wait (up to [`EXIT_WAIT`]) for that report instead of giving their own.
//! - Everything JSON-RPC (ids, the handshake, server-to-client requests, relaying, cancellation) is the shared
//!   session core's; this file only says what a pipe proves: `NotDelivered` when no byte of a message entered
//!   stdin (the process had already ended, or stdin closed before the first byte), `AfterDelivery` once any did.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout, timeout_at};

use super::exit::process_end;
use super::groups::{GroupToken, ProcessGroups};
use super::lines::LineReader;
use super::process::{self, Spawned};
use super::tail::Tail;
use super::{StdioBackend, StdioOptions};
use crate::backend::duplex::{Duplex, DuplexConnection, MessageSink, MessageSource, Opening, Peer, Sending, Standing};
use crate::backend::mcp_client::{AfterDeliveryCause, Fault, McpError, NotDeliveredCause};

/// How long the reader or writer, seeing a pipe close, waits for the supervisor to report how the process ended.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// How the process ended, once the supervisor knows.
type Ending = watch::Receiver<Option<Fault>>;

/// A live session with one process; the MCP side of it is the [`DuplexConnection`] it dereferences to.
pub struct StdioConnection {
    connection: DuplexConnection,
    duplex: Arc<Duplex>,
    supervisor: Option<JoinHandle<()>>,
    pid: u32,
}

/// A line for stdin; `written` learns whether it went in whole (`Err(n)`: only `n` bytes did).
struct Outgoing {
    line: Vec<u8>,
    written: Option<oneshot::Sender<Result<(), usize>>>,
}

/// Hands lines to the writer task.
struct StdinSink {
    writer: mpsc::UnboundedSender<Outgoing>,
}

/// Reads stdout line by line.
struct StdoutSource {
    lines: LineReader<BufReader<ChildStdout>>,
    max_line: usize,
    ending: Ending,
}

impl StdioConnection {
    /// Starts a process for `backend` and opens its session as `opening` says before `deadline`, offering the
    /// agent's client `capabilities` in a handshake; what the process sends outside calls goes to `standing`.
    /// Every failure is `NotDelivered`: no request of the caller was sent yet.
    pub async fn connect(
        backend: &StdioBackend,
        options: &StdioOptions,
        capabilities: &Value,
        standing: Standing,
        opening: Opening,
        deadline: Instant,
    ) -> Result<StdioConnection, McpError> {
        let program = &backend.command.program;
        let not_started = |error: std::io::Error| McpError::NotDelivered {
            cause: NotDeliveredCause::ProcessStart,
            reason: Fault::NotStarted { program: program.display().to_string(), error: error.to_string() },
        };
        let token = GroupToken::new().map_err(not_started)?;
        let Spawned { child, pid, stdin, stdout, stderr } =
            process::spawn(&backend.name, &backend.command, &token).map_err(not_started)?;
        let (writer, queue) = mpsc::unbounded_channel();
        let (ended, ending) = watch::channel(None);
        let what = "the backend process";
        let peer = Peer { backend: Arc::clone(&backend.name), what, sharing: backend.sharing, standing };
        let lines = LineReader::new(BufReader::new(stdout), options.max_line);
        let source = StdoutSource { lines, max_line: options.max_line, ending: ending.clone() };
        let duplex = Duplex::start(peer, StdinSink { writer }, source);
        tokio::spawn(write_stdin(Arc::clone(&duplex), stdin, queue, ending));
        options.groups.insert(pid, token, &duplex);
        let owner = Owner { backend: Arc::clone(&backend.name), pid, grace: options.grace, stderr, ended };
        let supervisor = tokio::spawn(supervise(Arc::clone(&duplex), owner, child, Arc::clone(&options.groups)));
        // A failed handshake ends the session, and the supervisor stops the process.
        let connection = DuplexConnection::establish(Arc::clone(&duplex), capabilities, opening, deadline).await?;
        Ok(StdioConnection { connection, duplex, supervisor: Some(supervisor), pid })
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Stops the process (stdin closed, SIGTERM, SIGKILL to its group) and waits until it is reaped (only
    /// [`crate::backend::testing`] calls it).
    pub(crate) async fn close(mut self) {
        self.duplex.end(Fault::ClosedByGateway);
        if let Some(supervisor) = self.supervisor.take() {
            let _ = supervisor.await;
        }
    }
}

impl Deref for StdioConnection {
    type Target = DuplexConnection;

    fn deref(&self) -> &DuplexConnection {
        &self.connection
    }
}

impl MessageSink for StdinSink {
    fn send<'a>(&'a self, message: &'a Value, deadline: Instant) -> Sending<'a> {
        Box::pin(self.write(message, deadline))
    }

    fn notify(&self, message: Value) {
        // Queued synchronously, so it keeps its place among the lines: a cancellation precedes what follows it.
        if let Ok(line) = encode(&message) {
            let _ = self.writer.send(Outgoing { line, written: None });
        }
    }
}

impl StdinSink {
    /// Queues the line and learns whether any of it entered the pipe.
    async fn write(&self, message: &Value, deadline: Instant) -> Result<(), McpError> {
        let line = encode(message)
            .map_err(|reason| McpError::NotDelivered { cause: NotDeliveredCause::Encode, reason: reason.into() })?;
        let unsent = || McpError::NotDelivered {
            cause: NotDeliveredCause::SessionEnded,
            reason: "the backend process's stdin closed before the message was written".into(),
        };
        let (written, outcome) = oneshot::channel();
        self.writer.send(Outgoing { line, written: Some(written) }).map_err(|_| unsent())?;
        match timeout_at(deadline, outcome).await {
            Ok(Ok(Ok(()))) => Ok(()),
            // Dropped unwritten (the writer stopped first), or refused before its first byte.
            Ok(Err(_) | Ok(Err(0))) => Err(unsent()),
            Ok(Ok(Err(bytes))) => Err(McpError::AfterDelivery {
                cause: AfterDeliveryCause::Ended,
                reason: format!("the backend process stopped reading after {bytes} bytes of the message").into(),
            }),
            Err(_) => Err(McpError::AfterDelivery {
                cause: AfterDeliveryCause::Deadline,
                reason: "the deadline passed while the message was being written to the process".into(),
            }),
        }
    }
}

fn encode(message: &Value) -> Result<Vec<u8>, String> {
    let mut line = serde_json::to_vec(message).map_err(|error| format!("cannot encode the message: {error}"))?;
    line.push(b'\n');
    Ok(line)
}

impl MessageSource for StdoutSource {
    async fn receive(&mut self) -> Result<Vec<u8>, Fault> {
        loop {
            match self.lines.next_line().await {
                Ok(None) => return Err(why_closed(&mut self.ending, "the process closed its stdout").await),
                Err(error) => return Err(format!("reading the process's stdout failed: {error}").into()),
                Ok(Some(line)) if line.truncated => {
                    return Err(format!("the process wrote a line longer than {} bytes", self.max_line).into());
                }
                Ok(Some(line)) if line.bytes.trim_ascii().is_empty() => {}
                Ok(Some(line)) => return Ok(line.bytes),
            }
        }
    }
}

/// Why a pipe of the process closed: how the process ended, once the supervisor reports it (within
/// [`EXIT_WAIT`]); else `closed`, the process still running.
async fn why_closed(ending: &mut Ending, closed: &str) -> Fault {
    match timeout(EXIT_WAIT, ending.wait_for(Option::is_some)).await {
        Ok(Ok(fault)) => fault.clone().unwrap_or(Fault::ClosedByGateway),
        _ => Fault::Other(format!("{closed} but kept running")),
    }
}

async fn write_stdin(
    duplex: Arc<Duplex>,
    mut stdin: ChildStdin,
    mut queue: mpsc::UnboundedReceiver<Outgoing>,
    mut ending: Ending,
) {
    loop {
        let next = tokio::select! {
            biased;
            () = duplex.closed() => break,
            next = queue.recv() => next,
        };
        let Some(outgoing) = next else { break };
        let result = write_line(&mut stdin, &outgoing.line).await;
        let failed = result.is_err();
        if let Some(written) = outgoing.written {
            let _ = written.send(result);
        }
        if failed {
            duplex.end(why_closed(&mut ending, "the process closed its stdin").await);
            break;
        }
    }
    // Dropping stdin closes the pipe: the first step of a polite shutdown.
}

/// Writes all of `line`; `Err(n)` when the pipe failed after `n` bytes.
async fn write_line(stdin: &mut ChildStdin, line: &[u8]) -> Result<(), usize> {
    let mut written = 0;
    while written < line.len() {
        match stdin.write(&line[written..]).await {
            Ok(0) | Err(_) => return Err(written),
            Ok(bytes) => written += bytes,
        }
    }
    Ok(())
}

/// Which process a supervisor owns, how long each step of stopping it may take, its stderr's tail, and where it
/// reports how the process ended.
struct Owner {
    backend: Arc<str>,
    pid: u32,
    grace: Duration,
    stderr: Tail,
    ended: watch::Sender<Option<Fault>>,
}

/// Owns the process: waits until the session ends (the gateway's stop) or the process ends by itself (reported
/// with its status and stderr, see the module rules), then stops its group, reaps it and takes it out of
/// `groups`. The session ends only after that, so a last answer the process wrote before exiting is still read.
async fn supervise(duplex: Arc<Duplex>, owner: Owner, mut child: Child, groups: Arc<ProcessGroups>) {
    let Owner { backend, pid, grace, stderr, ended } = owner;
    let fault = tokio::select! {
        biased;
        () = duplex.closed() => Fault::ClosedByGateway,
        status = child.wait() => {
            let status = status.ok();
            let (lines, manager) = stderr.settled().await;
            let code = status.and_then(|status| status.code());
            let signal = status.and_then(|status| std::os::unix::process::ExitStatusExt::signal(&status));
            tracing::info!(%backend, pid, code, signal, "stdio backend process exited");
            Fault::ProcessEnded(process_end(status, lines, manager))
        }
    };
    ended.send_replace(Some(fault.clone()));
    process::stop(&mut child, pid, grace).await;
    groups.remove(pid);
    duplex.end(fault);
    tracing::debug!(%backend, pid, "stdio backend process stopped");
}
