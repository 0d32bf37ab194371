//! Resumable call streams (MCP transports §"Resumability and Redelivery"): every event of a call's
//! SSE stream is kept until the call is over and a grace period has passed, so an agent whose connection broke
//! can `GET` with `Last-Event-ID` and receive the rest of that call's messages — its result included — on the
//! new connection. A call goes on when its connection breaks (a disconnect is not a cancel).
//!
//! Rules: event ids are `<stream>-<sequence>` with a random stream id, so an id names its stream and is unique
//! within the session; a stream is resumed only by the session that opened it; only the events after the given
//! id are replayed, and nothing from another stream. Logs are bounded in number; the oldest finished ones go
//! first. On a fleet ([`SharedEvents`], PostgreSQL), every event is also kept in the ledger, so a resumption
//! landing on another replica replays what followed the given id from there and then follows the stream by
//! reading what the running replica keeps adding, until its last event (or [`FOLLOW_SILENCE`] without one).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

/// How long a finished call's events stay available for a resumption.
pub const KEEP_FINISHED: Duration = Duration::from_secs(60);
/// How many call logs a replica keeps at most.
const MAX_LOGS: usize = 10_000;

/// How often a stream followed from another replica's events is read again.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);
/// How many times a resumption looks for the stream's events before it is refused (they may not be written yet).
const CATCH_UP_ATTEMPTS: u32 = 8;
/// How long a followed stream may add nothing before the follower ends (the agent may resume again).
pub const FOLLOW_SILENCE: Duration = Duration::from_secs(5 * 60);

/// One event of a call stream as the fleet keeps it; `done` marks the stream's end (its text is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptEvent {
    pub stream: String,
    pub seq: u64,
    pub session: String,
    pub text: Bytes,
    pub done: bool,
}

/// What reading kept events gives: `None` when they cannot be read now.
pub type Kept<'a> = Pin<Box<dyn Future<Output = Option<Vec<KeptEvent>>> + Send + 'a>>;

/// Where a fleet keeps call streams' events (the composition root's, over the ledger).
pub trait SharedEvents: Send + Sync {
    /// Keeps `event`, without waiting.
    fn keep(&self, event: KeptEvent);
    /// The kept events of `stream` after `after` (all with `None`), if `session` opened it, in order.
    fn after<'a>(&'a self, stream: &'a str, session: &'a str, after: Option<u64>) -> Kept<'a>;
}

/// The events of one call stream.
pub struct CallLog {
    stream: String,
    shared: Option<Arc<dyn SharedEvents>>,
    session: String,
    events: Vec<Bytes>,
    /// The connection currently reading the stream, if any.
    live: Option<mpsc::UnboundedSender<Bytes>>,
    finished: bool,
}

pub type SharedLog = Arc<Mutex<CallLog>>;

impl CallLog {
    /// Records an event (its index is its sequence number) and passes it to the live connection, if any.
    pub fn record(log: &SharedLog, event: Bytes) {
        let mut log = log.lock();
        log.keep(event.clone(), false);
        log.events.push(event.clone());
        log.pass(event);
    }

    /// Passes bytes that are not kept (keep-alive comments) to the live connection.
    pub fn pass_through(log: &SharedLog, bytes: Bytes) {
        log.lock().pass(bytes);
    }

    fn pass(&mut self, bytes: Bytes) {
        if self.live.as_ref().is_some_and(|live| live.send(bytes).is_err()) {
            self.live = None;
        }
    }

    /// Keeps the next event in the fleet's store, if there is one.
    fn keep(&self, text: Bytes, done: bool) {
        if let Some(shared) = &self.shared {
            let (stream, session) = (self.stream.clone(), self.session.clone());
            shared.keep(KeptEvent { stream, seq: self.events.len() as u64, session, text, done });
        }
    }

    pub fn finish(log: &SharedLog) {
        let mut log = log.lock();
        log.keep(Bytes::new(), true);
        log.finished = true;
        log.live = None;
    }
}

/// The call logs of this replica, by stream id.
#[derive(Default)]
pub struct Replays {
    logs: Mutex<HashMap<String, SharedLog>>,
    /// The fleet's store of every stream's events (`None`: one replica).
    shared: Option<Arc<dyn SharedEvents>>,
}

impl Replays {
    /// Call logs that are also kept in the fleet's store.
    pub fn shared(shared: Arc<dyn SharedEvents>) -> Replays {
        Replays { logs: Mutex::default(), shared: Some(shared) }
    }

    /// Starts the log of a new stream read by `live`.
    pub fn open(self: &Arc<Self>, stream: &str, session: &str, live: mpsc::UnboundedSender<Bytes>) -> SharedLog {
        let log = Arc::new(Mutex::new(CallLog {
            stream: stream.to_owned(),
            shared: self.shared.clone(),
            session: session.to_owned(),
            events: Vec::new(),
            live: Some(live),
            finished: false,
        }));
        let mut logs = self.logs.lock();
        if logs.len() >= MAX_LOGS {
            logs.retain(|_, log| !log.lock().finished);
        }
        logs.insert(stream.to_owned(), Arc::clone(&log));
        log
    }

    /// Forgets a finished stream after [`KEEP_FINISHED`].
    pub fn expire(self: &Arc<Self>, stream: String) {
        let replays = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(KEEP_FINISHED).await;
            replays.logs.lock().remove(&stream);
        });
    }

    /// Resumes the stream named by `last_event_id` for `session`: the events after it, then (if the call is
    /// still running) the rest as it comes. `None` when there is no such stream for this session.
    pub fn resume(&self, session: &str, last_event_id: &str) -> Option<mpsc::UnboundedReceiver<Bytes>> {
        let (stream, sequence) = last_event_id.rsplit_once('-')?;
        let sequence: usize = sequence.parse().ok()?;
        let log = self.logs.lock().get(stream).cloned()?;
        let mut log = log.lock();
        if log.session != session {
            return None;
        }
        let (live, reader) = mpsc::unbounded_channel();
        for event in log.events.iter().skip(sequence + 1) {
            let _ = live.send(event.clone());
        }
        if !log.finished {
            log.live = Some(live);
        }
        Some(reader)
    }

    /// Resumes from the fleet's store a stream this replica does not hold: `None` when no event of it is kept for
    /// `session` (or there is no store).
    pub async fn resume_elsewhere(&self, session: &str, last_event_id: &str) -> Option<mpsc::UnboundedReceiver<Bytes>> {
        let shared = Arc::clone(self.shared.as_ref()?);
        let (stream, sequence) = last_event_id.rsplit_once('-')?;
        let sequence: u64 = sequence.parse().ok()?;
        // From the given event itself: that it is kept shows the stream is this session's. The replica running the
        // call writes its events as they go, so a resumption quick on the heels of a cut may wait a moment for them.
        let mut attempts = 0;
        let kept = loop {
            let kept = shared.after(stream, session, sequence.checked_sub(1)).await?;
            if kept.first().is_some_and(|first| first.seq <= sequence) {
                break kept;
            }
            attempts += 1;
            if attempts == CATCH_UP_ATTEMPTS {
                return None;
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        };
        let (live, reader) = mpsc::unbounded_channel();
        let (stream, session) = (stream.to_owned(), session.to_owned());
        tokio::spawn(async move {
            let mut follow = Follow { shared, stream, session, last: sequence, live };
            follow.run(kept).await;
        });
        Some(reader)
    }
}

/// A stream followed from the fleet's store.
struct Follow {
    shared: Arc<dyn SharedEvents>,
    stream: String,
    session: String,
    /// The last event passed on.
    last: u64,
    live: mpsc::UnboundedSender<Bytes>,
}

impl Follow {
    /// Passes on `kept`, then what is added, until the stream's end, the agent's leaving or a long silence.
    async fn run(&mut self, mut kept: Vec<KeptEvent>) {
        let mut silent_since = tokio::time::Instant::now();
        loop {
            if !kept.is_empty() {
                silent_since = tokio::time::Instant::now();
            }
            for event in kept.drain(..) {
                if event.seq <= self.last {
                    continue;
                }
                if event.done || self.live.send(event.text).is_err() {
                    return;
                }
                self.last = event.seq;
            }
            if silent_since.elapsed() > FOLLOW_SILENCE || self.live.is_closed() {
                return;
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
            kept = self.shared.after(&self.stream, &self.session, Some(self.last)).await.unwrap_or_default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(reader: &mut mpsc::UnboundedReceiver<Bytes>) -> Vec<Bytes> {
        std::iter::from_fn(|| reader.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn a_resumed_stream_gets_what_followed_and_what_comes() {
        let replays = Arc::new(Replays::default());
        let (live, mut first) = mpsc::unbounded_channel();
        let log = replays.open("abc", "s1", live);
        CallLog::record(&log, Bytes::from("e0"));
        CallLog::record(&log, Bytes::from("e1"));
        drop(first.try_recv());
        drop(first); // the connection broke
        CallLog::record(&log, Bytes::from("e2"));
        assert!(replays.resume("s2", "abc-0").is_none(), "another session cannot resume it");
        assert!(replays.resume("s1", "nope-0").is_none());
        let mut resumed = replays.resume("s1", "abc-0").unwrap();
        assert_eq!(drain(&mut resumed), [Bytes::from("e1"), Bytes::from("e2")]);
        CallLog::record(&log, Bytes::from("e3"));
        CallLog::finish(&log);
        assert_eq!(drain(&mut resumed), [Bytes::from("e3")]);
        assert!(resumed.recv().await.is_none(), "the stream ends with the call");
    }
}
