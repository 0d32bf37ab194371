//! Resumable call streams (MCP transports §"Resumability and Redelivery"): every event of a call's
//! SSE stream is kept until the call is over and a grace period has passed, so an agent whose connection broke
//! can `GET` with `Last-Event-ID` and receive the rest of that call's messages — its result included — on the
//! new connection. A call goes on when its connection breaks (a disconnect is not a cancel).
//!
//! Rules: event ids are `<stream>-<sequence>` with a random stream id, so an id names its stream and is unique
//! within the session; a stream is resumed only by the session that opened it; only the events after the given
//! id are replayed, and nothing from another stream. Logs are bounded in number; the oldest finished ones go
//! first. State of this replica only.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

/// How long a finished call's events stay available for a resumption.
pub const KEEP_FINISHED: Duration = Duration::from_secs(60);
/// How many call logs a replica keeps at most.
const MAX_LOGS: usize = 10_000;

/// The events of one call stream.
pub struct CallLog {
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

    pub fn finish(log: &SharedLog) {
        let mut log = log.lock();
        log.finished = true;
        log.live = None;
    }
}

/// The call logs of this replica, by stream id.
#[derive(Default)]
pub struct Replays {
    logs: Mutex<HashMap<String, SharedLog>>,
}

impl Replays {
    /// Starts the log of a new stream read by `live`.
    pub fn open(self: &Arc<Self>, stream: &str, session: &str, live: mpsc::UnboundedSender<Bytes>) -> SharedLog {
        let log = Arc::new(Mutex::new(CallLog {
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
