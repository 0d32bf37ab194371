//! The root cause of a backend failure: typed once, where it is found, and put into words in one place
//! ([`Fault::render`]) — for an operator, or for an agent without what only an operator may read.
//!
//! Rules:
//! - A failure is reported by its root cause, once. A layer that passes a failure on keeps its `Fault` (and may
//!   change the error's class); it never wraps the text in words of its own ("the handshake failed: …").
//! - Each fault says what to do, in the backend's configuration keys (`url`, `credential`, `oauth`, `command`,
//!   `args`, `env`).
//! - [`Audience::Agent`] leaves out addresses, the program's path, stderr lines, an HTTP error body and the HTTP
//!   stack's words; [`Fault::Other`] texts are read by agents as they are, so they name no address.
//! - Only the gateway's own stop is [`Fault::ClosedByGateway`]: a process that exited by itself or was killed
//!   from outside is [`Fault::ProcessEnded`], with its exit status or signal and its last stderr lines.

use std::fmt;
use std::time::Duration;

use super::wire::refusal::Refusal;

/// Who reads a failure: an operator (everything), or an agent whose principal may not read the console (no
/// addresses, commands or stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Operator,
    Agent,
}

/// Why a request to a backend failed, at the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A TCP connection to `address` (host and port) was refused: nothing listens there.
    ConnectionRefused { address: String },
    /// No connection to `address` could be made for another reason (name resolution, TLS, a reset), `detail` in
    /// the HTTP stack's words.
    Unreachable { address: String, detail: String },
    /// The backend answered an HTTP error status; `body` is the start of its body.
    Status { status: u16, body: String },
    /// The backend's process could not be started.
    NotStarted { program: String, error: String },
    /// The backend's process ended by itself, or something outside the gateway killed it.
    ProcessEnded(ProcessEnd),
    /// The backend's process keeps failing to start; the next start is allowed after `retry_in`.
    BackingOff { failures: u32, retry_in: Duration, last: Box<Fault> },
    /// The gateway closed the session (and stopped its process, for stdio).
    ClosedByGateway,
    /// Any other cause, in words an agent may read.
    Other(String),
}

/// How a backend's process ended, and what it said last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEnd {
    pub exit: Exit,
    /// Its last stderr lines (oldest first), bounded.
    pub stderr: Vec<String>,
    /// A package manager's error recognised among those lines (`npx`, `uvx`).
    pub manager: Option<ManagerError>,
}

/// A process's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Status(i32),
    Signal(i32),
    /// Its status could not be read.
    Unknown,
}

/// What a package manager (`npm`, `uv`) said before the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerError {
    /// `npm` or `uv`.
    pub tool: &'static str,
    /// The package its registry does not have, when that was the error.
    pub missing: Option<String>,
    /// The line that says so.
    pub line: String,
}

impl From<String> for Fault {
    fn from(text: String) -> Self {
        Fault::Other(text)
    }
}

impl From<&str> for Fault {
    fn from(text: &str) -> Self {
        Fault::Other(text.to_owned())
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.render(Audience::Operator, f)
    }
}

impl Fault {
    /// An HTTP error status with the start of its body.
    pub fn status(status: u16, body: &str) -> Fault {
        Fault::Status { status, body: body.trim().to_owned() }
    }

    /// The fault in words for `audience`, with what to do about it (see the module rules).
    pub fn render(&self, audience: Audience, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operator = audience == Audience::Operator;
        match self {
            Fault::ConnectionRefused { address } if operator => {
                write!(f, "connection refused at {address}; check that the server is running and listening there")
            }
            Fault::ConnectionRefused { .. } => f.write_str("the connection was refused; the server is not running"),
            Fault::Unreachable { address, detail } if operator => {
                write!(f, "could not connect to {address}: {detail}; check the `url` and the network")
            }
            Fault::Unreachable { .. } => f.write_str("the server could not be reached"),
            Fault::Status { status, body } => render_status(*status, body, audience, f),
            Fault::NotStarted { program, error } if operator => {
                write!(f, "could not start `{program}`: {error}; check the `command`")
            }
            Fault::NotStarted { .. } => f.write_str("its process could not be started; check the `command`"),
            Fault::ProcessEnded(end) => end.render(audience, f),
            Fault::BackingOff { failures, retry_in, last } => {
                last.render(audience, f)?;
                write!(f, " (failed starts in a row: {failures}; the next in {} ms)", retry_in.as_millis())
            }
            Fault::ClosedByGateway => f.write_str("the gateway closed the session"),
            Fault::Other(text) => f.write_str(text),
        }
    }
}

impl ProcessEnd {
    fn render(&self, audience: Audience, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.exit {
            Exit::Status(code) => write!(f, "the process exited with status {code}")?,
            Exit::Signal(signal) => match signal_name(signal) {
                Some(name) => write!(f, "the process was killed by signal {signal} ({name})")?,
                None => write!(f, "the process was killed by signal {signal}")?,
            },
            Exit::Unknown => f.write_str("the process ended")?,
        }
        let operator = audience == Audience::Operator;
        if let Some(manager) = &self.manager {
            let tool = manager.tool;
            return match (&manager.missing, operator) {
                (Some(package), true) => write!(
                    f,
                    ": {tool} could not find the package {package} in its registry; check the package name in `args`"
                ),
                (Some(_), false) => write!(f, ": {tool} could not find its package; check the package name in `args`"),
                (None, true) => write!(f, ": {tool} said \"{}\"; check `command` and `args`", manager.line),
                (None, false) => write!(f, ": {tool} failed; check `command` and `args`"),
            };
        }
        if let Exit::Signal(_) = self.exit {
            f.write_str("; it crashed or was killed outside the gateway")?;
        }
        match (self.stderr.is_empty(), operator) {
            (false, true) => write!(f, "; its last stderr lines: \"{}\"", self.stderr.join(" | "))?,
            (true, true) => f.write_str("; it wrote nothing to stderr")?,
            (_, false) => {}
        }
        f.write_str("; check `command`, `args` and `env`")
    }
}

/// An HTTP error status, with what the operator should check for the statuses that point at the configuration.
pub(super) fn render_status(status: u16, body: &str, audience: Audience, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let name = Refusal::of(status)
        .map(Refusal::name)
        .or_else(|| http::StatusCode::from_u16(status).ok().and_then(|status| status.canonical_reason()));
    write!(f, "HTTP {status}")?;
    if let Some(name) = name {
        write!(f, " {name}")?;
    }
    let body = body.trim();
    if audience == Audience::Operator && !body.is_empty() {
        write!(f, " (\"{}\")", first_line(body))?;
    }
    match status {
        404 => f.write_str("; check the path in `url`"),
        401 | 403 => f.write_str("; check `credential` or `oauth`"),
        429 => f.write_str("; the server limits its rate, retry later"),
        500..=599 => f.write_str("; the server failed, see its own log"),
        _ => Ok(()),
    }
}

/// The first line of an error body, at most [`BODY_SHOWN`] characters.
fn first_line(body: &str) -> String {
    let line = body.lines().next().unwrap_or_default();
    match line.char_indices().nth(BODY_SHOWN) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// How much of an HTTP error body a sentence quotes.
const BODY_SHOWN: usize = 200;

/// The name of the signals a process commonly dies of.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
