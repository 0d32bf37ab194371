//! One recorded span as the exporter sends it: identity, parent, name, kind, times, attributes, events and
//! status (the fields of OTLP's `Span`).
//!
//! Rules: times are Unix nanoseconds; the end is the start plus the time measured on the monotonic clock, so a
//! clock step never makes a span negative. Text values are cut to [`MAX_TEXT`] bytes (at a character boundary):
//! tool names, URIs and ids come from agents and backends, and one span must stay small.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::context::{SpanContext, SpanId};

/// The longest text attribute, span name or status message recorded, in bytes.
pub const MAX_TEXT: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Server,
    Client,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Text(String),
    Int(i64),
    #[cfg(test)]
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub key: &'static str,
    pub value: AttrValue,
}

impl Attr {
    pub fn text(key: &'static str, value: &str) -> Self {
        Attr { key, value: AttrValue::Text(bounded(value).to_owned()) }
    }

    pub fn int(key: &'static str, value: i64) -> Self {
        Attr { key, value: AttrValue::Int(value) }
    }

    #[cfg(test)]
    pub fn bool(key: &'static str, value: bool) -> Self {
        Attr { key, value: AttrValue::Bool(value) }
    }
}

/// Something that happened during a span (a handshake, a retry, a resumption).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: &'static str,
    pub at: u64,
    pub attributes: Vec<Attr>,
}

/// How the operation ended, when it failed: `error.type` and the status message.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub error_type: String,
    pub message: Option<String>,
}

/// A span being recorded, then (once ended) waiting to be exported.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    pub context: SpanContext,
    /// The parent's span id and whether the parent is in another process.
    pub parent: Option<(SpanId, bool)>,
    pub name: String,
    pub kind: Kind,
    pub start: u64,
    pub end: u64,
    pub attributes: Vec<Attr>,
    pub events: Vec<Event>,
    pub failure: Option<Failure>,
    /// When the span started, on the monotonic clock.
    started: Instant,
}

impl SpanRecord {
    pub fn start(context: SpanContext, parent: Option<&SpanContext>, name: String, kind: Kind) -> Self {
        SpanRecord {
            context,
            parent: parent.map(|parent| (parent.span_id, parent.remote)),
            name: bounded(&name).to_owned(),
            kind,
            start: unix_nanos(),
            end: 0,
            attributes: Vec::new(),
            events: Vec::new(),
            failure: None,
            started: Instant::now(),
        }
    }

    pub fn event(&mut self, name: &'static str, attributes: Vec<Attr>) {
        self.events.push(Event { name, at: self.now(), attributes });
    }

    pub fn fail(&mut self, error_type: &str, message: Option<&str>) {
        let message = message.map(|message| bounded(message).to_owned());
        self.failure = Some(Failure { error_type: bounded(error_type).to_owned(), message });
    }

    /// Stamps the end; the record is then ready to export.
    pub fn end(&mut self) {
        self.end = self.now();
    }

    fn now(&self) -> u64 {
        self.start.saturating_add(u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

fn unix_nanos() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX)
}

/// `text` cut to at most [`MAX_TEXT`] bytes at a character boundary.
pub fn bounded(text: &str) -> &str {
    if text.len() <= MAX_TEXT {
        return text;
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(MAX_TEXT);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_TEXT && cut.len() >= MAX_TEXT - 1, "{}", cut.len());
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
