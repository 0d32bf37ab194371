//! Getting ended spans to the collector without ever slowing a call: a bounded queue, one background task that
//! batches by size and by time, and an OTLP/HTTP JSON `POST` per batch (OTLP specification, "OTLP/HTTP").
//!
//! Rules: recording a span is one `try_send`; when the queue is full the span is dropped and counted, never
//! waited for. A batch goes out when it reaches `max_batch` spans or `delay` after the last export, whichever
//! comes first; a batch the collector refuses or does not answer within the timeout is dropped and counted (no
//! retries: the queue behind it matters more). The counts are the metrics' own counters, so `/metrics` shows them.
//! Posting, its logging and its headers' rules are [`super::super::otlp_post`]'s.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};

use super::super::otlp_post::OtlpPost;
use super::otlp;
use super::span::SpanRecord;

/// Where and how spans are exported.
#[derive(Debug, Clone)]
pub struct Export {
    /// The full traces URL (`…/v1/traces`).
    pub endpoint: Url,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// How long one export may take.
    pub timeout: Duration,
    /// The resource's attributes (`service.name` and the rest), sent with every batch.
    pub resource: Vec<(String, String)>,
    pub batch: Batch,
}

/// The batch span processor's bounds (`OTEL_BSP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// The longest a span waits for its batch.
    pub delay: Duration,
    /// Spans waiting beyond this many are dropped.
    pub max_queue: usize,
    /// The most spans sent in one request.
    pub max_batch: usize,
}

impl Default for Batch {
    /// The OpenTelemetry defaults: 5 s, 2048 spans queued, 512 per request.
    fn default() -> Self {
        Batch { delay: Duration::from_secs(5), max_queue: 2048, max_batch: 512 }
    }
}

/// The exporter's HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the trace exporter's HTTP client: {0}")]
pub struct ExportSetupError(String);

/// What happened to recorded spans, for operators: the counters [`crate::telemetry::Metrics`] exposes (clones share
/// their value).
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Spans accepted by the collector.
    pub exported: Counter,
    /// Spans dropped because the queue was full.
    pub dropped: Counter,
    /// Spans dropped because their export failed.
    pub failed: Counter,
    /// Export requests that failed (refused, unanswered or not connected).
    pub failed_exports: Counter,
}

/// The recording side of the exporter.
#[derive(Debug)]
pub(super) struct Queue {
    spans: mpsc::Sender<SpanRecord>,
    flushes: mpsc::Sender<oneshot::Sender<()>>,
    pub(super) counts: Counts,
}

/// Log a full queue once per this many dropped spans.
const DROPS_PER_WARNING: u64 = 10_000;

impl Queue {
    /// Starts the export task (on the current Tokio runtime).
    pub(super) fn start(export: Export, counts: Counts) -> Result<Queue, ExportSetupError> {
        let post =
            OtlpPost::new(export.endpoint, &export.headers, export.timeout, "spans").map_err(ExportSetupError)?;
        let (spans, receiver) = mpsc::channel(export.batch.max_queue.max(1));
        let (flushes, flush_requests) = mpsc::channel(1);
        let sender = Sender { post, resource: export.resource, counts: counts.clone() };
        tokio::spawn(run(receiver, flush_requests, sender, export.batch));
        Ok(Queue { spans, flushes, counts })
    }

    /// Queues an ended span, or drops it when the queue is full.
    pub(super) fn push(&self, record: SpanRecord) {
        if self.spans.try_send(record).is_err() {
            let dropped = self.counts.dropped.inc();
            if dropped.is_multiple_of(DROPS_PER_WARNING) {
                tracing::warn!(dropped = dropped + 1, "trace export queue full; spans are being dropped");
            }
        }
    }

    /// Exports everything queued so far; returns once the collector answered (or the export failed).
    pub(super) async fn flush(&self) {
        let (done, finished) = oneshot::channel();
        if self.flushes.send(done).await.is_ok() {
            let _ = finished.await;
        }
    }
}

async fn run(
    mut spans: mpsc::Receiver<SpanRecord>,
    mut flush_requests: mpsc::Receiver<oneshot::Sender<()>>,
    mut sender: Sender,
    batch: Batch,
) {
    let mut pending = Vec::with_capacity(batch.max_batch);
    let mut ticks = tokio::time::interval_at(Instant::now() + batch.delay, batch.delay);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            received = spans.recv() => {
                let Some(record) = received else { break };
                pending.push(record);
                if pending.len() >= batch.max_batch {
                    sender.send(&mut pending).await;
                    ticks.reset();
                }
            }
            _ = ticks.tick() => sender.send(&mut pending).await,
            Some(done) = flush_requests.recv() => {
                while let Ok(record) = spans.try_recv() {
                    pending.push(record);
                    if pending.len() >= batch.max_batch {
                        sender.send(&mut pending).await;
                    }
                }
                sender.send(&mut pending).await;
                let _ = done.send(());
            }
        }
    }
    sender.send(&mut pending).await;
}

/// Posts batches to the collector.
struct Sender {
    post: OtlpPost,
    resource: Vec<(String, String)>,
    counts: Counts,
}

impl Sender {
    /// Exports and empties `pending` (nothing to do when it is empty).
    async fn send(&mut self, pending: &mut Vec<SpanRecord>) {
        if pending.is_empty() {
            return;
        }
        let count = pending.len() as u64;
        let body = otlp::encode(&self.resource, pending);
        pending.clear();
        if self.post.post(body).await {
            self.counts.exported.inc_by(count);
        } else {
            self.counts.failed.inc_by(count);
            self.counts.failed_exports.inc();
        }
    }
}

#[cfg(test)]
impl Queue {
    /// A queue without an export task: the test reads what would be exported.
    pub(super) fn detached(max_queue: usize) -> (Queue, mpsc::Receiver<SpanRecord>) {
        let (spans, receiver) = mpsc::channel(max_queue);
        let (flushes, _) = mpsc::channel(1);
        (Queue { spans, flushes, counts: Counts::default() }, receiver)
    }
}
