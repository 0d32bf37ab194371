//! Incremental `text/event-stream` decoder for the responses of backend MCP servers.
//!
//! Owns the byte-level interpretation of an event stream: line splitting, field parsing, the event being
//! assembled, the stream's last event id and its reconnection time. It knows nothing about JSON-RPC or
//! HTTP; callers feed body chunks as they arrive and drain whole events.
//!
//! Rules, from WHATWG HTML "9.2.6 Interpreting an event stream":
//! - lines end in CRLF, LF or CR; a CR that ends one chunk and an LF that starts the next are one line end;
//! - one leading UTF-8 BOM is ignored, even when it arrives split across chunks;
//! - a line starting with `:` is a comment; a line without a colon is a field name with an empty value;
//!   exactly one space after the colon is stripped;
//! - `data` appends to the data buffer (lines joined with `\n`), `event` sets the type, `id` sets the last
//!   event id unless it contains NUL, `retry` sets the reconnection time when it is all ASCII digits; other
//!   fields are ignored;
//! - events are dispatched only on a blank line; the last event id is committed at that moment and persists
//!   across events;
//! - invalid UTF-8 is decoded lossily (U+FFFD), which is equivalent to decoding the whole stream first
//!   because every byte that splits lines and fields is ASCII.
//!
//! One deliberate deviation: WHATWG dispatches nothing for a block without a `data` field, but MCP servers
//! send priming events (an `id` with an empty or absent `data`) so that a client can resume from that id.
//! A block that had an `id` field is therefore delivered too, with `data == ""` (as is one with an empty
//! `data` line, per WHATWG); a block that set neither (only `event`, `retry`, comments, unknown fields, or
//! nothing at all) still dispatches nothing.
//!
//! Bounds and cost: one line, and one event's joined data, may not exceed `max_line` bytes; the check runs
//! as bytes arrive, so a hostile backend cannot make the decoder buffer more than that. Every input byte is
//! scanned for line ends once: only new bytes are searched, and the partial-line buffer never holds a line
//! end, so it is never rescanned. Complete lines are parsed straight from the caller's chunk, and an
//! unterminated `data` line is appended straight to the data buffer, so each payload byte is copied once
//! and UTF-8-validated once, at dispatch.

use std::collections::VecDeque;

use memchr::{memchr, memchr2};

/// The UTF-8 encoding of U+FEFF, which WHATWG says to skip once at the start of the stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event` field; empty when the stream did not set one (the WHATWG default type is "message").
    pub event: String,
    /// The `data` lines joined with `\n`; empty for priming events.
    pub data: String,
    /// The last event id in force when this event was dispatched (empty when none was ever set).
    pub id: String,
}

/// Errors the decoder reports; after an error the decoder must not be fed again.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// A single line (or the data of one event) grew past the configured limit.
    #[error("an event-stream line is longer than {limit} bytes")]
    LineTooLong { limit: usize },
}

/// Progress through the optional leading BOM; bytes that turn out not to be a BOM are replayed as data.
#[derive(Debug, Clone, Copy)]
enum BomState {
    /// This many leading bytes of the stream matched the BOM so far.
    Matching(usize),
    /// The BOM was skipped or ruled out; every further byte is stream content.
    Done,
}

/// The fields of the event being assembled since the last blank line.
#[derive(Debug, Default)]
struct Block {
    event: String,
    /// Kept as bytes so a large event is UTF-8-validated once, at dispatch, instead of line by line.
    data: Vec<u8>,
    has_data: bool,
    /// `Some` once a valid `id` field was seen; it becomes the last event id only at dispatch.
    id: Option<String>,
}

/// Incremental decoder: `feed` bytes in any chunking, then drain with `next_event`.
#[derive(Debug)]
pub struct SseDecoder {
    max_line: usize,
    bom: BomState,
    /// The previous chunk ended in CR, so an LF at the start of the next one is part of that line end.
    after_cr: bool,
    /// The unterminated tail of the input; never contains CR or LF.
    partial: Vec<u8>,
    /// `Some(bytes so far)` while the unterminated line is a `data` line whose value goes straight into the
    /// data buffer; `partial` is then empty. This saves a copy of every large event.
    data_line: Option<usize>,
    block: Block,
    last_event_id: String,
    retry_ms: Option<u64>,
    ready: VecDeque<SseEvent>,
    failed: bool,
}

impl SseDecoder {
    /// `max_line` bounds the bytes of one line and of one event's accumulated data.
    pub fn new(max_line: usize) -> Self {
        Self {
            max_line,
            bom: BomState::Matching(0),
            after_cr: false,
            partial: Vec::new(),
            data_line: None,
            block: Block::default(),
            last_event_id: String::new(),
            retry_ms: None,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// Feeds one chunk; complete events become available through `next_event`.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), SseError> {
        // State is half-updated after an error, so refusing further input keeps a misuse from yielding
        // events assembled from a truncated line.
        if self.failed {
            return Err(self.too_long());
        }
        let result = self.strip_bom(chunk).and_then(|rest| self.feed_lines(rest));
        self.failed = result.is_err();
        result
    }

    /// The next dispatched event, if any.
    #[inline]
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    /// The stream's last event id (what a reconnect sends as `Last-Event-ID`).
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time the stream asked for with `retry`, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    fn too_long(&self) -> SseError {
        SseError::LineTooLong { limit: self.max_line }
    }

    /// Returns the part of `chunk` after any BOM bytes, replaying a BOM prefix that proved to be content.
    fn strip_bom<'a>(&mut self, chunk: &'a [u8]) -> Result<&'a [u8], SseError> {
        let BomState::Matching(matched) = self.bom else {
            return Ok(chunk);
        };
        let want = &BOM[matched..];
        let n = want.len().min(chunk.len());
        if chunk[..n] == want[..n] {
            if n == want.len() {
                self.bom = BomState::Done;
            } else {
                self.bom = BomState::Matching(matched + n);
            }
            return Ok(&chunk[n..]);
        }
        self.bom = BomState::Done;
        self.feed_lines(&BOM[..matched])?;
        Ok(chunk)
    }

    fn feed_lines(&mut self, mut input: &[u8]) -> Result<(), SseError> {
        if self.after_cr && !input.is_empty() {
            self.after_cr = false;
            if input[0] == b'\n' {
                input = &input[1..];
            }
        }
        while let Some(end) = find_line_end(input) {
            self.complete_line(&input[..end])?;
            input = self.skip_line_end(input, end);
        }
        self.hold_partial(input)
    }

    /// Returns what follows the line end at `input[end]`, treating CRLF as one line end.
    fn skip_line_end<'a>(&mut self, input: &'a [u8], end: usize) -> &'a [u8] {
        let next = end + 1;
        if input[end] == b'\r' {
            match input.get(next) {
                Some(b'\n') => return &input[next + 1..],
                // The LF, if any, is in the next chunk.
                None => self.after_cr = true,
                Some(_) => {}
            }
        }
        &input[next..]
    }

    /// Handles the line whose last bytes are `tail` (the rest, if any, is in `partial`).
    fn complete_line(&mut self, tail: &[u8]) -> Result<(), SseError> {
        if self.partial.is_empty() && self.data_line.is_none() {
            if tail.len() > self.max_line {
                return Err(self.too_long());
            }
            return self.process_line(tail);
        }
        self.hold_partial(tail)?;
        // Possibly only `tail` made the line recognisable as a data line that is already appended.
        if self.data_line.take().is_some() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.partial);
        let result = self.process_line(&line);
        // Hand the buffer back so its capacity serves the next long line.
        self.partial = line;
        self.partial.clear();
        result
    }

    fn hold_partial(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if let Some(len) = self.data_line {
            return self.extend_data_line(len, bytes);
        }
        if self.partial.len() + bytes.len() > self.max_line {
            return Err(self.too_long());
        }
        self.partial.extend_from_slice(bytes);
        self.start_data_line()
    }

    /// Switches to streaming the pending line into the data buffer once it is recognisably a `data` line.
    fn start_data_line(&mut self) -> Result<(), SseError> {
        const PREFIX: &[u8] = b"data:";
        // The byte after the colon must be known to decide whether a space is stripped.
        if self.partial.len() <= PREFIX.len() || !self.partial.starts_with(PREFIX) {
            return Ok(());
        }
        let line = std::mem::take(&mut self.partial);
        let value = &line[PREFIX.len()..];
        let result = self.append_data(value.strip_prefix(b" ").unwrap_or(value));
        self.data_line = Some(line.len());
        self.partial = line;
        self.partial.clear();
        result
    }

    fn extend_data_line(&mut self, len: usize, bytes: &[u8]) -> Result<(), SseError> {
        let line_len = len + bytes.len();
        if line_len > self.max_line || self.block.data.len() + bytes.len() > self.max_line {
            return Err(self.too_long());
        }
        self.block.data.extend_from_slice(bytes);
        self.data_line = Some(line_len);
        Ok(())
    }

    fn process_line(&mut self, line: &[u8]) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch();
            return Ok(());
        }
        let (name, value) = split_field(line);
        match name {
            b"data" => self.append_data(value)?,
            b"event" => self.block.event = lossy(value),
            b"id" => self.set_id(value),
            b"retry" => self.set_retry(value),
            // An empty name is a comment line; other names are fields this stream format does not define.
            _ => {}
        }
        Ok(())
    }

    fn append_data(&mut self, value: &[u8]) -> Result<(), SseError> {
        let separator = usize::from(self.block.has_data);
        if self.block.data.len() + separator + value.len() > self.max_line {
            return Err(self.too_long());
        }
        if self.block.has_data {
            self.block.data.push(b'\n');
        }
        self.block.data.extend_from_slice(value);
        self.block.has_data = true;
        Ok(())
    }

    fn set_id(&mut self, value: &[u8]) {
        // WHATWG ignores ids with NUL because they cannot be sent back in a Last-Event-ID header.
        if memchr(0, value).is_none() {
            self.block.id = Some(lossy(value));
        }
    }

    fn set_retry(&mut self, value: &[u8]) {
        // An overflowing value is ignored like any other unusable one, keeping the previous time.
        if let Some(ms) = parse_digits(value) {
            self.retry_ms = Some(ms);
        }
    }

    fn dispatch(&mut self) {
        let block = std::mem::take(&mut self.block);
        let had_id = block.id.is_some();
        if let Some(id) = block.id {
            self.last_event_id = id;
        }
        if !(block.has_data || had_id) {
            return;
        }
        self.ready.push_back(SseEvent {
            event: block.event,
            data: into_string(block.data),
            id: self.last_event_id.clone(),
        });
    }
}

/// Finds the next CR or LF. Tiny chunks skip memchr's set-up, which dominates when a slow or adversarial
/// peer sends a few bytes at a time.
fn find_line_end(input: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    if input.len() < SHORT {
        return input.iter().position(|&b| b == b'\n' || b == b'\r');
    }
    memchr2(b'\n', b'\r', input)
}

/// Splits a line into field name and value, stripping exactly one space after the colon.
fn split_field(line: &[u8]) -> (&[u8], &[u8]) {
    match memchr(b':', line) {
        Some(colon) => {
            let value = &line[colon + 1..];
            (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
        }
        None => (line, &[]),
    }
}

/// Parses a non-empty string of ASCII digits; `None` for anything else or on overflow.
fn parse_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |acc, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
        acc.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Converts without copying when the bytes are valid UTF-8, which is the overwhelmingly common case.
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| lossy(e.as_bytes()))
}

#[cfg(test)]
#[path = "event_stream_tests.rs"]
mod tests;
