//! How an access line reaches the log without costing the request: the line is formatted once,
//! by hand, into a reused per-thread buffer (no `tracing` formatter, no intermediate strings), appended to a
//! shared bounded buffer, and written to stderr by a dedicated writer thread.
//!
//! Rules:
//! - The two shapes are those of the rest of the log ([`super::logs`]): text
//!   (`<timestamp>  INFO switchyard::access: request key=value …`, strings quoted) and one JSON object per line
//!   (`timestamp`, `level`, `message`, the fields, `target`); strings are escaped the same way in both.
//! - Whether a line is written at all is still the log filter's decision (`SWITCHYARD_LOG`, target
//!   [`super::access::ACCESS_TARGET`]); the writer only replaces the formatting and the write.
//! - A request never waits for the log: when the buffer is full the line is dropped and counted, and the writer
//!   says how many were dropped in the log itself. The writer wakes at most once per [`LINGER`] while lines keep
//!   coming (one wake-up for many lines), and not at all while none come.
//! - [`flush`] writes what is buffered, in order; `serve` calls it when the gateway stops.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};

use super::logs::LogFormat;

/// How long the writer lets lines gather after the first one woke it.
const LINGER: Duration = Duration::from_millis(20);
/// The most bytes buffered for the writer; a line that does not fit is dropped.
const CAPACITY: usize = 4 << 20;
/// From this many bytes on, the writer is woken without waiting out its linger.
const HURRY: usize = CAPACITY / 4;

/// One access line's fields, as the record knows them when it is done.
pub struct AccessFields<'a> {
    pub principal: &'a str,
    pub session: &'a str,
    pub method: &'a str,
    pub tool: &'a str,
    pub backend: &'a str,
    pub outcome: &'a str,
    pub error_type: &'a str,
    pub status: u16,
    /// The request's duration in microseconds (logged in milliseconds, three decimals).
    pub micros: u64,
}

/// The process's access log writer, once [`install`]ed.
static INSTALLED: OnceLock<Arc<AccessWriter>> = OnceLock::new();

/// Starts the writer thread for lines of `format` on stderr (`ansi`: colour the text shape). A second call does
/// nothing.
pub fn install(format: LogFormat, ansi: bool) {
    let _ = INSTALLED.get_or_init(|| AccessWriter::start(format, ansi, Box::new(std::io::stderr())));
}

/// Queues the access line of `fields`, when a writer is installed and the log filter lets access lines through.
pub fn write(fields: &AccessFields<'_>) {
    if let Some(writer) = INSTALLED.get()
        && tracing::enabled!(target: super::access::ACCESS_TARGET, tracing::Level::INFO)
    {
        writer.queue(fields, SystemTime::now());
    }
}

/// Writes every queued line now (the gateway is stopping).
pub fn flush() {
    if let Some(writer) = INSTALLED.get() {
        writer.flush();
    }
}

/// The buffer shared by the requests and the writer thread, and where the writer writes.
struct AccessWriter {
    format: LogFormat,
    ansi: bool,
    state: Mutex<State>,
    wake: Condvar,
    /// Held while bytes are written, so [`AccessWriter::flush`] and the thread keep the lines in order.
    out: Mutex<Box<dyn Write + Send>>,
    dropped: AtomicU64,
}

#[derive(Default)]
struct State {
    pending: Vec<u8>,
    /// The writer waits for the first line (a line must wake it).
    idle: bool,
    /// The writer was woken early because the buffer is filling up.
    hurried: bool,
}

thread_local! {
    /// Each thread's line, reused: formatting allocates only when a line is longer than any before it.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl AccessWriter {
    /// A writer whose thread writes to `out`.
    fn start(format: LogFormat, ansi: bool, out: Box<dyn Write + Send>) -> Arc<AccessWriter> {
        let writer = Arc::new(AccessWriter::new(format, ansi, out));
        let thread = Arc::clone(&writer);
        let started = std::thread::Builder::new().name("access-log".into()).spawn(move || thread.run());
        if let Err(error) = started {
            // Without its thread the writer still works: lines are written by `flush` only.
            eprintln!("cannot start the access log writer: {error}");
        }
        writer
    }

    /// A writer without its thread: lines reach `out` when [`AccessWriter::flush`] is called.
    fn new(format: LogFormat, ansi: bool, out: Box<dyn Write + Send>) -> AccessWriter {
        AccessWriter {
            format,
            ansi,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            out: Mutex::new(out),
            dropped: AtomicU64::new(0),
        }
    }

    /// Formats the line and hands it to the writer, or drops and counts it when the buffer is full.
    fn queue(&self, fields: &AccessFields<'_>, now: SystemTime) {
        LINE.with_borrow_mut(|line| {
            line.clear();
            match self.format {
                LogFormat::Text => text_line(line, fields, now, self.ansi),
                LogFormat::Json => json_line(line, fields, now),
            }
            let mut state = self.state.lock();
            if state.pending.len() + line.len() > CAPACITY {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            state.pending.extend_from_slice(line);
            if state.idle {
                state.idle = false;
                self.wake.notify_one();
            } else if state.pending.len() >= HURRY && !state.hurried {
                state.hurried = true;
                self.wake.notify_one();
            }
        });
    }

    fn run(&self) {
        let mut batch = Vec::new();
        loop {
            let mut state = self.state.lock();
            while state.pending.is_empty() {
                state.idle = true;
                self.wake.wait(&mut state);
            }
            if state.pending.len() < HURRY {
                self.wake.wait_for(&mut state, LINGER);
            }
            drop(state);
            self.write_out(&mut batch);
        }
    }

    /// Writes every queued line now.
    fn flush(&self) {
        self.write_out(&mut Vec::new());
    }

    /// Takes what is queued (swapping in `spare`, so both buffers are reused) and writes it.
    fn write_out(&self, spare: &mut Vec<u8>) {
        let mut out = self.out.lock();
        {
            let mut state = self.state.lock();
            std::mem::swap(&mut state.pending, spare);
            state.hurried = false;
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = writeln!(out, "switchyard: {dropped} access lines dropped (the log could not keep up)");
        }
        // A log that cannot be written has nowhere to report it.
        let _ = out.write_all(spare).and_then(|()| out.flush());
        spare.clear();
    }
}

fn text_line(line: &mut Vec<u8>, fields: &AccessFields<'_>, now: SystemTime, ansi: bool) {
    let (dim, green, reset): (&[u8], &[u8], &[u8]) =
        if ansi { (b"\x1b[2m", b"\x1b[32m", b"\x1b[0m") } else { (b"", b"", b"") };
    line.extend_from_slice(dim);
    timestamp(line, now);
    line.extend_from_slice(reset);
    line.extend_from_slice(b" ");
    line.extend_from_slice(green);
    line.extend_from_slice(b" INFO");
    line.extend_from_slice(reset);
    line.extend_from_slice(b" ");
    line.extend_from_slice(dim);
    line.extend_from_slice(super::access::ACCESS_TARGET.as_bytes());
    line.extend_from_slice(b":");
    line.extend_from_slice(reset);
    line.extend_from_slice(b" request");
    each_field(fields, |name, value| {
        line.push(b' ');
        line.extend_from_slice(name.as_bytes());
        line.push(b'=');
        value.write(line);
    });
    line.push(b'\n');
}

fn json_line(line: &mut Vec<u8>, fields: &AccessFields<'_>, now: SystemTime) {
    line.extend_from_slice(b"{\"timestamp\":\"");
    timestamp(line, now);
    line.extend_from_slice(b"\",\"level\":\"INFO\",\"message\":\"request\"");
    each_field(fields, |name, value| {
        line.extend_from_slice(b",\"");
        line.extend_from_slice(name.as_bytes());
        line.extend_from_slice(b"\":");
        value.write(line);
    });
    line.extend_from_slice(b",\"target\":\"");
    line.extend_from_slice(super::access::ACCESS_TARGET.as_bytes());
    line.extend_from_slice(b"\"}\n");
}

/// A field's value: a string (quoted and escaped in both shapes) or a number.
enum FieldValue<'a> {
    Text(&'a str),
    Status(u16),
    Millis(u64),
}

impl FieldValue<'_> {
    fn write(&self, line: &mut Vec<u8>) {
        match self {
            FieldValue::Text(text) => quoted(line, text),
            FieldValue::Status(status) => line.extend_from_slice(itoa::Buffer::new().format(*status).as_bytes()),
            FieldValue::Millis(micros) => {
                let mut digits = itoa::Buffer::new();
                line.extend_from_slice(digits.format(micros / 1000).as_bytes());
                line.push(b'.');
                let fraction = micros % 1000;
                line.extend(std::iter::repeat_n(b'0', 3 - digits.format(fraction).len()));
                line.extend_from_slice(digits.format(fraction).as_bytes());
            }
        }
    }
}

/// The fields in the line's order.
fn each_field(fields: &AccessFields<'_>, mut write: impl FnMut(&str, FieldValue<'_>)) {
    for (name, value) in [
        ("principal", fields.principal),
        ("session", fields.session),
        ("method", fields.method),
        ("tool", fields.tool),
        ("backend", fields.backend),
        ("outcome", fields.outcome),
        ("error_type", fields.error_type),
    ] {
        write(name, FieldValue::Text(value));
    }
    write("status", FieldValue::Status(fields.status));
    write("duration_ms", FieldValue::Millis(fields.micros));
}

/// `text` as a JSON string (a valid quoted string of the text shape too): quotes, backslashes and control
/// characters escaped, so a name cannot break the line or forge another.
fn quoted(line: &mut Vec<u8>, text: &str) {
    line.push(b'"');
    for byte in text.bytes() {
        match byte {
            b'"' => line.extend_from_slice(b"\\\""),
            b'\\' => line.extend_from_slice(b"\\\\"),
            b'\n' => line.extend_from_slice(b"\\n"),
            b'\r' => line.extend_from_slice(b"\\r"),
            b'\t' => line.extend_from_slice(b"\\t"),
            0..0x20 | 0x7f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                line.extend_from_slice(b"\\u00");
                line.push(HEX[usize::from(byte >> 4)]);
                line.push(HEX[usize::from(byte & 0xf)]);
            }
            _ => line.push(byte),
        }
    }
    line.push(b'"');
}

/// `now` in RFC 3339, UTC, microseconds (`2026-12-01T11:53:48.123456Z`), as the rest of the log writes it.
pub(super) fn timestamp(line: &mut Vec<u8>, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (year, month, day) = crate::civil_date::civil_date(seconds / 86_400);
    let of_day = seconds % 86_400;
    let mut digits = itoa::Buffer::new();
    line.extend_from_slice(digits.format(year).as_bytes());
    for (separator, value, width) in [
        (b'-', u64::from(month), 2),
        (b'-', u64::from(day), 2),
        (b'T', of_day / 3600, 2),
        (b':', of_day / 60 % 60, 2),
        (b':', of_day % 60, 2),
        (b'.', u64::from(since.subsec_micros()), 6),
    ] {
        line.push(separator);
        let text = digits.format(value);
        line.extend(std::iter::repeat_n(b'0', width - text.len().min(width)));
        line.extend_from_slice(text.as_bytes());
    }
    line.push(b'Z');
}

#[cfg(test)]
#[path = "access_line_tests.rs"]
mod tests;
