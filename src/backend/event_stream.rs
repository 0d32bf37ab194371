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
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMIT: usize = 1 << 16;

    fn decode_chunks(chunks: &[&[u8]]) -> (Vec<SseEvent>, String, Option<u64>) {
        let mut dec = SseDecoder::new(LIMIT);
        let mut events = Vec::new();
        for chunk in chunks {
            dec.feed(chunk).expect("within limit");
            events.extend(std::iter::from_fn(|| dec.next_event()));
        }
        (events, dec.last_event_id().to_owned(), dec.retry_ms())
    }

    /// Decodes with a limit the generated streams often exceed, stopping at the first error.
    fn decode_bounded(chunks: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>) {
        let mut dec = SseDecoder::new(8);
        let mut events = Vec::new();
        for chunk in chunks {
            let result = dec.feed(chunk);
            events.extend(std::iter::from_fn(|| dec.next_event()));
            if let Err(e) = result {
                return (events, Some(e));
            }
        }
        (events, None)
    }

    fn decode(input: &[u8]) -> Vec<SseEvent> {
        decode_chunks(&[input]).0
    }

    fn ev(event: &str, data: &str, id: &str) -> SseEvent {
        SseEvent { event: event.into(), data: data.into(), id: id.into() }
    }

    #[test]
    fn lf_cr_and_crlf_all_end_lines() {
        let want = vec![ev("", "a\nb\nc", "")];
        assert_eq!(decode(b"data: a\ndata: b\ndata: c\n\n"), want);
        assert_eq!(decode(b"data: a\rdata: b\rdata: c\r\r"), want);
        assert_eq!(decode(b"data: a\r\ndata: b\r\ndata: c\r\n\r\n"), want);
        assert_eq!(decode(b"data: a\rdata: b\r\ndata: c\n\r\n"), want);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_line_end() {
        // Were the LF a second line end, it would be a blank line and dispatch "a" early as its own event.
        let (events, _, _) = decode_chunks(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(events, vec![ev("", "a\nb", "")]);
    }

    #[test]
    fn cr_at_chunk_end_completes_the_line_at_once() {
        let mut dec = SseDecoder::new(LIMIT);
        dec.feed(b"data: a\n\r").expect("within limit");
        assert_eq!(dec.next_event(), Some(ev("", "a", "")));
    }

    #[test]
    fn cr_then_lf_after_empty_chunk_is_still_one_line_end() {
        let (events, _, _) = decode_chunks(&[b"data: a\r", b"", b"\ndata: b\n\n"]);
        assert_eq!(events, vec![ev("", "a\nb", "")]);
    }

    #[test]
    fn leading_bom_is_ignored() {
        assert_eq!(decode(b"\xEF\xBB\xBFdata: x\n\n"), vec![ev("", "x", "")]);
    }

    #[test]
    fn bom_split_across_chunks_is_ignored() {
        let (events, _, _) = decode_chunks(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(events, vec![ev("", "x", "")]);
    }

    #[test]
    fn only_one_bom_is_ignored() {
        // A second BOM is part of the first line's field name, so the line is an unknown field.
        assert_eq!(decode(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"), vec![]);
    }

    #[test]
    fn bom_prefix_that_is_not_a_bom_is_kept_as_content() {
        let (events, _, _) = decode_chunks(&[b"data: \xEF", b"x\n\n"]);
        assert_eq!(events, vec![ev("", "\u{FFFD}x", "")]);
        let (events, _, _) = decode_chunks(&[b"\xEF\xBB", b"data: x\n\ndata: y\n\n"]);
        // The held bytes become a mangled field name, so only the second event survives.
        assert_eq!(events, vec![ev("", "y", "")]);
    }

    #[test]
    fn comments_are_ignored() {
        assert_eq!(decode(b": keep-alive\ndata: x\n:data: y\n\n"), vec![ev("", "x", "")]);
        assert_eq!(decode(b": only a comment\n\n"), vec![]);
    }

    #[test]
    fn field_without_colon_has_empty_value() {
        assert_eq!(decode(b"data\n\n"), vec![ev("", "", "")]);
        assert_eq!(decode(b"data\ndata\ndata: x\n\n"), vec![ev("", "\n\nx", "")]);
    }

    #[test]
    fn exactly_one_leading_space_is_stripped() {
        assert_eq!(decode(b"data:x\n\n"), vec![ev("", "x", "")]);
        assert_eq!(decode(b"data:  x \n\n"), vec![ev("", " x ", "")]);
        assert_eq!(decode(b"data: a: b\n\n"), vec![ev("", "a: b", "")]);
    }

    #[test]
    fn event_sets_type_for_one_event_only() {
        assert_eq!(decode(b"event: progress\ndata: 1\n\ndata: 2\n\n"), vec![ev("progress", "1", ""), ev("", "2", "")]);
    }

    #[test]
    fn id_persists_and_is_committed_at_dispatch() {
        let mut dec = SseDecoder::new(LIMIT);
        dec.feed(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n").expect("within limit");
        assert_eq!(dec.next_event(), Some(ev("", "a", "7")));
        assert_eq!(dec.next_event(), Some(ev("", "b", "7")));
        assert_eq!(dec.next_event(), None);
        // The block with id 8 is unfinished, so a reconnect must still resume after 7.
        assert_eq!(dec.last_event_id(), "7");
        dec.feed(b"\n").expect("within limit");
        assert_eq!(dec.next_event(), Some(ev("", "c", "8")));
        assert_eq!(dec.last_event_id(), "8");
    }

    #[test]
    fn empty_id_resets_last_event_id() {
        let (events, last, _) = decode_chunks(&[b"id: 1\ndata: a\n\nid\ndata: b\n\n"]);
        assert_eq!(events, vec![ev("", "a", "1"), ev("", "b", "")]);
        assert_eq!(last, "");
    }

    #[test]
    fn id_with_nul_is_ignored() {
        let (events, last, _) = decode_chunks(&[b"id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n"]);
        assert_eq!(events, vec![ev("", "a", "1"), ev("", "b", "1")]);
        assert_eq!(last, "1");
    }

    #[test]
    fn retry_accepts_only_ascii_digits() {
        let retry = |input: &[u8]| decode_chunks(&[input]).2;
        assert_eq!(retry(b"retry: 1500\n"), Some(1500));
        assert_eq!(retry(b"retry: 1500\nretry: 15x\n"), Some(1500));
        assert_eq!(retry(b"retry: -1\n"), None);
        assert_eq!(retry(b"retry: +1\n"), None);
        assert_eq!(retry(b"retry: 1.5\n"), None);
        assert_eq!(retry(b"retry:\n"), None);
        assert_eq!(retry(b"retry:  1\n"), None);
        assert_eq!(retry(b"retry: 99999999999999999999999\n"), None);
        assert_eq!(retry(b"retry: 18446744073709551615\n"), Some(u64::MAX));
    }

    #[test]
    fn retry_alone_dispatches_nothing() {
        assert_eq!(decode(b"retry: 10\n\n"), vec![]);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert_eq!(decode(b"foo: bar\nData: no\ndata: x\nretryx: 5\n\n"), vec![ev("", "x", "")]);
        assert_eq!(decode(b"foo: bar\n\n"), vec![]);
    }

    #[test]
    fn nothing_is_dispatched_without_a_blank_line() {
        let mut dec = SseDecoder::new(LIMIT);
        dec.feed(b"data: x\n").expect("within limit");
        assert_eq!(dec.next_event(), None);
    }

    #[test]
    fn priming_event_is_delivered_with_empty_data() {
        assert_eq!(decode(b"id: p1\ndata:\n\n"), vec![ev("", "", "p1")]);
        assert_eq!(decode(b"id: p1\n\n"), vec![ev("", "", "p1")]);
    }

    #[test]
    fn blocks_that_set_nothing_dispatch_nothing() {
        assert_eq!(decode(b"\n\n\r\n"), vec![]);
        assert_eq!(decode(b"event: x\n\n"), vec![]);
        // The type of a dropped block must not leak into the next one.
        assert_eq!(decode(b"event: x\n\ndata: y\n\n"), vec![ev("", "y", "")]);
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        assert_eq!(
            decode(b"event: \xFF\ndata: a\xC3\ndata: \xE2\x82\n\n"),
            vec![ev("\u{FFFD}", "a\u{FFFD}\n\u{FFFD}", "")]
        );
        let (events, _, _) = decode_chunks(&[b"data: \xE2\x82", b"\xAC\n\n"]);
        assert_eq!(events, vec![ev("", "\u{20AC}", "")]);
    }

    #[test]
    fn line_at_the_limit_is_accepted() {
        let mut dec = SseDecoder::new(8);
        assert_eq!(dec.feed(b"data: ab\n\n"), Ok(()));
        assert_eq!(dec.next_event(), Some(ev("", "ab", "")));
    }

    #[test]
    fn complete_line_over_the_limit_is_an_error() {
        let mut dec = SseDecoder::new(8);
        assert_eq!(dec.feed(b"data: abc\n\n"), Err(SseError::LineTooLong { limit: 8 }));
    }

    #[test]
    fn partial_line_over_the_limit_fails_before_its_end() {
        let mut dec = SseDecoder::new(8);
        assert_eq!(dec.feed(b"data: ab"), Ok(()));
        assert_eq!(dec.feed(b"c"), Err(SseError::LineTooLong { limit: 8 }));
        // Feeding after the error keeps failing instead of resuming mid-line.
        assert_eq!(dec.feed(b"\n\n"), Err(SseError::LineTooLong { limit: 8 }));
        assert_eq!(dec.next_event(), None);
    }

    #[test]
    fn partial_non_data_line_over_the_limit_fails_before_its_end() {
        // Data lines are streamed into the data buffer; every other line is held and checked separately.
        let mut dec = SseDecoder::new(8);
        assert_eq!(dec.feed(b"event: a"), Ok(()));
        assert_eq!(dec.feed(b"b"), Err(SseError::LineTooLong { limit: 8 }));
    }

    #[test]
    fn accumulated_data_over_the_limit_is_an_error() {
        let mut dec = SseDecoder::new(8);
        // Each line fits; the joined data "abc\nde\nfg" (9 bytes) does not.
        assert_eq!(dec.feed(b"data:abc\ndata:de\n"), Ok(()));
        assert_eq!(dec.feed(b"data:fg\n"), Err(SseError::LineTooLong { limit: 8 }));
    }

    #[test]
    fn accumulated_data_over_the_limit_fails_before_the_line_ends() {
        let mut dec = SseDecoder::new(12);
        assert_eq!(dec.feed(b"data:abcdef\ndata:x"), Ok(()));
        assert_eq!(dec.feed(b"yzw"), Ok(()));
        // The line "data:xyzwuv" still fits; the data "abcdef\nxyzwuv" (13 bytes) does not.
        assert_eq!(dec.feed(b"uv"), Err(SseError::LineTooLong { limit: 12 }));
    }

    #[test]
    fn line_recognised_as_data_only_by_its_last_chunk_is_not_a_blank_line() {
        // The held "data" becomes a streamed data line while its end is being handled; treating the emptied
        // partial buffer as a blank line would dispatch early.
        let (events, _, _) = decode_chunks(&[b"data", b": x\ndata: y\n\n"]);
        assert_eq!(events, vec![ev("", "x\ny", "")]);
    }

    #[test]
    fn large_event_fed_bytewise_is_decoded() {
        let payload = vec![b'x'; 1 << 20];
        let mut input = b"data: ".to_vec();
        input.extend_from_slice(&payload);
        input.extend_from_slice(b"\n\n");
        let mut dec = SseDecoder::new(2 << 20);
        for byte in &input {
            dec.feed(std::slice::from_ref(byte)).expect("within limit");
        }
        let event = dec.next_event().expect("one event");
        assert_eq!(event.data.len(), payload.len());
    }

    /// A straightforward reading of the rules over the whole stream, to check the incremental decoder against.
    fn reference(input: &[u8]) -> (Vec<SseEvent>, String, Option<u64>) {
        let input = input.strip_prefix(BOM).unwrap_or(input);
        let text = String::from_utf8_lossy(input).replace("\r\n", "\n").replace('\r', "\n");
        let mut lines: Vec<&str> = text.split('\n').collect();
        // The text after the last line end is an unterminated line, which is never processed.
        lines.pop();
        let (mut events, mut last_id, mut retry) = (Vec::new(), String::new(), None);
        let (mut event, mut data, mut id): (String, Option<String>, Option<String>) = (String::new(), None, None);
        for line in lines {
            if line.is_empty() {
                if let Some(new_id) = id.take() {
                    last_id = new_id;
                    data.get_or_insert_with(String::new);
                }
                if let Some(d) = data.take() {
                    events.push(ev(&event, &d, &last_id));
                }
                event.clear();
                continue;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match name {
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                "event" => event = value.to_owned(),
                "id" if !value.contains('\0') => id = Some(value.to_owned()),
                "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                    retry = value.parse().ok().or(retry);
                }
                _ => {}
            }
        }
        (events, last_id, retry)
    }

    fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
        let value = "[a-c é:\u{0}]{0,6}";
        prop_oneof![
            value.prop_map(|v| format!("data: {v}")),
            value.prop_map(|v| format!("data:{v}")),
            Just("data".to_owned()),
            value.prop_map(|v| format!("event: {v}")),
            value.prop_map(|v| format!("id: {v}")),
            "[0-9]{1,4}".prop_map(|v| format!("retry: {v}")),
            value.prop_map(|v| format!("retry: {v}")),
            value.prop_map(|v| format!(":{v}")),
            value.prop_map(|v| format!("x{v}")),
            Just(String::new()),
            Just(String::new()),
        ]
        .prop_map(String::into_bytes)
    }

    fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
        let line_end = prop_oneof![Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"\r\n"[..])];
        (
            any::<bool>(),
            prop::collection::vec((line_strategy(), line_end), 0..40),
            prop::collection::vec(any::<u8>(), 0..3),
        )
            .prop_map(|(bom, lines, tail)| {
                let mut out = if bom { BOM.to_vec() } else { Vec::new() };
                for (line, end) in lines {
                    out.extend_from_slice(&line);
                    out.extend_from_slice(end);
                }
                // Stray bytes (possibly invalid UTF-8 or a lone line end) after the last line.
                out.extend_from_slice(&tail);
                out
            })
    }

    fn split_at_points<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = points.iter().map(|p| p % (input.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts {
            chunks.push(&input[start..cut]);
            start = cut;
        }
        chunks.push(&input[start..]);
        chunks
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_chunking_decodes_like_the_whole_stream(
            input in stream_strategy(),
            points in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let whole = decode_chunks(&[&input]);
            let bytewise: Vec<&[u8]> = input.chunks(1).collect();
            prop_assert_eq!(&decode_chunks(&bytewise), &whole);
            prop_assert_eq!(&decode_chunks(&split_at_points(&input, &points)), &whole);
            prop_assert_eq!(&reference(&input), &whole);
        }

        #[test]
        fn any_chunking_hits_the_limit_at_the_same_line(
            input in stream_strategy(),
            points in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let whole = decode_bounded(&[&input]);
            let bytewise: Vec<&[u8]> = input.chunks(1).collect();
            prop_assert_eq!(&decode_bounded(&bytewise), &whole);
            prop_assert_eq!(&decode_bounded(&split_at_points(&input, &points)), &whole);
        }
    }
}
