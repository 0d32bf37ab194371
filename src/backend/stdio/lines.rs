//! Reads newline-terminated lines from a child's pipe with a bound on the bytes kept per line.
//!
//! Rules: a line never holds more than `max` bytes; when a line is longer, the first `max` bytes are returned
//! marked `truncated` and the rest of it is skipped on the next read (so a huge line costs `max` bytes of memory,
//! not its length). The terminating `\n` (and a `\r` before it) is not part of the line. Reading is linear in the
//! bytes read: each byte is looked at once by `memchr`.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line, at most `max` bytes of it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Line {
    pub(super) bytes: Vec<u8>,
    /// The line was longer than `max`; `bytes` is its beginning.
    pub(super) truncated: bool,
}

pub(super) struct LineReader<R> {
    inner: R,
    max: usize,
    /// The rest of a truncated line is still to be skipped.
    skipping: bool,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub(super) fn new(inner: R, max: usize) -> Self {
        Self { inner, max, skipping: false }
    }

    /// The next line; `Ok(None)` at the end of the stream (a last line without `\n` is still returned).
    pub(super) async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        loop {
            let buffer = self.inner.fill_buf().await?;
            if buffer.is_empty() {
                self.skipping = false;
                return Ok((!bytes.is_empty()).then(|| Line { bytes: strip_cr(bytes), truncated: false }));
            }
            let newline = memchr::memchr(b'\n', buffer);
            let end = newline.unwrap_or(buffer.len());
            if self.skipping {
                self.inner.consume(newline.map_or(end, |at| at + 1));
                self.skipping = newline.is_none();
                continue;
            }
            let room = self.max - bytes.len();
            if end > room {
                bytes.extend_from_slice(&buffer[..room]);
                self.inner.consume(room);
                self.skipping = true;
                return Ok(Some(Line { bytes, truncated: true }));
            }
            bytes.extend_from_slice(&buffer[..end]);
            self.inner.consume(newline.map_or(end, |at| at + 1));
            if newline.is_some() {
                return Ok(Some(Line { bytes: strip_cr(bytes), truncated: false }));
            }
        }
    }
}

fn strip_cr(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn lines(input: &[u8], max: usize, capacity: usize) -> Vec<Line> {
        let mut reader = LineReader::new(BufReader::with_capacity(capacity, input), max);
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line().await.expect("in-memory reads do not fail") {
            lines.push(line);
        }
        lines
    }

    fn line(text: &str, truncated: bool) -> Line {
        Line { bytes: text.as_bytes().to_vec(), truncated }
    }

    #[tokio::test]
    async fn lines_are_split_on_newlines_whatever_the_buffering() {
        for capacity in [1, 2, 3, 64] {
            let got = lines(b"one\ntwo\r\n\nlast", 16, capacity).await;
            assert_eq!(got, [line("one", false), line("two", false), line("", false), line("last", false)]);
        }
    }

    #[tokio::test]
    async fn long_lines_are_truncated_and_their_rest_skipped() {
        for capacity in [1, 4, 64] {
            let got = lines(b"abcdefghij\nok\nxyzxyzxyz", 4, capacity).await;
            assert_eq!(got, [line("abcd", true), line("ok", false), line("xyzx", true)], "capacity {capacity}");
        }
    }

    #[tokio::test]
    async fn a_line_of_exactly_max_bytes_is_whole() {
        assert_eq!(lines(b"abcd\n", 4, 2).await, [line("abcd", false)]);
    }
}
