//! The audit trail: one event per security-relevant act (a tool call, an authentication failure, a policy
//! denial, an approval decision, a pin approval, a limit refusal, a reload), hash-chained ([`chain`]) and
//! written to a rotated JSON-lines file ([`file`]) and/or sent as OpenTelemetry log records ([`otlp`]).
//!
//! Rules:
//! - Off is one branch: the parts reach the trail through [`super::Metrics::audit`], `None` without `[audit]`.
//! - Recording never blocks: an event goes into a bounded queue with `try_send`; a full queue drops it, counts it
//!   in `switchyard_audit_events_dropped_total` and logs (once, then every [`DROPS_PER_WARNING`]). A dropped
//!   event leaves no gap in the chain (it was never numbered), so the counter is where drops show.
//! - One thread numbers, chains and writes the events in the order they were queued, so the file's order is the
//!   chain's; it hands each line to the OTLP task, which batches them.
//! - What the parts pass are plain values; arguments are rendered by [`Audit::arguments`] in the configured mode.

pub mod chain;
mod event;
mod file;
mod otlp;

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;

use super::otlp_post::OtlpPost;
use crate::glob::Glob;
use chain::Link;
use file::FileSink;

pub use event::{Arguments, AuditEvent, REDACTED};
pub use file::AuditFileError;

/// Events waiting for the writer beyond this many are dropped.
const QUEUE: usize = 4096;
/// Log a full queue once per this many dropped events.
const DROPS_PER_WARNING: u64 = 10_000;

/// What the composition root lowers `[audit]` into.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub file: Option<FileSettings>,
    pub otlp: Option<OtlpSettings>,
    pub arguments: Arguments,
    /// Lowercase globs of argument names `Arguments::Redacted` hides.
    pub redact: Vec<Glob>,
}

#[derive(Debug, Clone)]
pub struct FileSettings {
    pub path: PathBuf,
    pub max_size: u64,
    pub keep: usize,
}

/// Where log records go: the telemetry's collector (`…/v1/logs`), its headers and timeout, and the resource.
#[derive(Debug, Clone)]
pub struct OtlpSettings {
    pub endpoint: Url,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub timeout: Duration,
    pub resource: Vec<(String, String)>,
}

/// Why the trail cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    File(#[from] AuditFileError),
    #[error("cannot build the audit log exporter's HTTP client: {0}")]
    Otlp(String),
    #[error("cannot start the audit writer thread: {0}")]
    Thread(std::io::Error),
    #[error("the audit trail is already started")]
    Started,
}

enum Message {
    Event(AuditEvent),
    /// Answered once everything queued before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The recording side of the trail (one per gateway).
#[derive(Debug)]
pub struct Audit {
    queue: SyncSender<Message>,
    dropped: Counter,
    arguments: Arguments,
    redact: Vec<Glob>,
}

impl Audit {
    /// Opens the file, starts the writer thread and (on the current Tokio runtime) the OTLP task.
    pub(super) fn start(settings: AuditSettings, dropped: Counter) -> Result<Audit, AuditError> {
        let (file, link) = match &settings.file {
            Some(file) => {
                let (sink, link) = FileSink::open(&file.path, file.max_size, file.keep)?;
                (Some(sink), link)
            }
            None => (None, Link::genesis()),
        };
        let records = match settings.otlp {
            Some(otlp) => {
                let post = OtlpPost::new(otlp.endpoint, &otlp.headers, otlp.timeout, "audit events")
                    .map_err(AuditError::Otlp)?;
                let (records, receiver) = tokio::sync::mpsc::channel(QUEUE);
                tokio::spawn(otlp::run(receiver, post, otlp.resource));
                Some(records)
            }
            None => None,
        };
        let (queue, receiver) = mpsc::sync_channel(QUEUE);
        let writer = Writer { file, records, link, dropped: dropped.clone() };
        std::thread::Builder::new()
            .name("switchyard-audit".into())
            .spawn(move || writer.run(receiver))
            .map_err(AuditError::Thread)?;
        Ok(Audit { queue, dropped, arguments: settings.arguments, redact: settings.redact })
    }

    /// Queues `event`, or drops and counts it when the queue is full.
    pub fn record(&self, event: AuditEvent) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.queue.try_send(Message::Event(event)) {
            count_drop(&self.dropped);
        }
    }

    /// A tool call's arguments as the configured mode shows them; `digest` is the ledger's digest function.
    pub fn arguments(&self, arguments: &Value, digest: impl FnOnce(&Value) -> String) -> Value {
        event::render(self.arguments, &self.redact, arguments, digest)
    }

    /// Waits until everything queued so far is written to the file (the gateway is stopping).
    pub async fn flush(&self) {
        let (done, written) = tokio::sync::oneshot::channel();
        let queue = self.queue.clone();
        let sent = tokio::task::spawn_blocking(move || queue.send(Message::Flush(done))).await;
        if matches!(sent, Ok(Ok(()))) {
            let _ = written.await;
        }
    }
}

fn count_drop(dropped: &Counter) {
    let count = dropped.inc();
    if count.is_multiple_of(DROPS_PER_WARNING) {
        tracing::warn!(dropped = count + 1, "audit queue full; audit events are being dropped");
    }
}

/// The writer thread's state.
struct Writer {
    file: Option<FileSink>,
    records: Option<tokio::sync::mpsc::Sender<otlp::Record>>,
    link: Link,
    dropped: Counter,
}

impl Writer {
    fn run(mut self, queue: Receiver<Message>) {
        while let Ok(message) = queue.recv() {
            self.take(message);
            while let Ok(message) = queue.try_recv() {
                self.take(message);
            }
            self.flush();
        }
        self.flush();
    }

    fn take(&mut self, message: Message) {
        match message {
            Message::Event(event) => self.write(&event),
            Message::Flush(done) => {
                self.flush();
                let _ = done.send(());
            }
        }
    }

    fn write(&mut self, event: &AuditEvent) {
        let seq = self.link.seq + 1;
        let line = event.line(seq, &self.link.hash);
        if let Some(file) = &mut self.file
            && let Err(error) = file.write(&line)
        {
            tracing::error!(%error, "cannot write the audit file; the event is dropped");
            count_drop(&self.dropped);
            return;
        }
        self.link = Link::after(&line, seq);
        if let Some(records) = &self.records
            && records.try_send(otlp::Record { at: event.at, kind: event.kind, line }).is_err()
        {
            count_drop(&self.dropped);
        }
    }

    fn flush(&mut self) {
        if let Some(file) = &mut self.file
            && let Err(error) = file.flush()
        {
            tracing::error!(%error, "cannot write the audit file");
        }
    }
}
