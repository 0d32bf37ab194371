//! The hash chain of the audit trail: what links each event to the one before it, and the check that a file (or
//! a run of rotated files) is complete and unaltered.
//!
//! Rules:
//! - An event is one line of JSON. Its `prev` is the lowercase hex SHA-256 of the previous event's line as
//!   written (its bytes without the newline); the first event of a new trail has [`GENESIS`] (64 zeros).
//! - The chain runs across rotations and restarts: the first line of a new file links to the last line of the
//!   file before it, and a restarted gateway links to the last line it finds.
//! - `seq` counts events from 1 along the whole trail, so a removed line is told from an altered one.
//! - Verifying reads lines in order and stops at the first break, naming the file and line; a file whose first
//!   `prev` is not [`GENESIS`] continues an earlier file, which is reported, not refused (the earlier file may
//!   have been rotated away). The last line is protected only once an event follows it.

use std::fmt;

use sha2::{Digest, Sha256};

/// The `prev` of the first event of a trail.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain stands: the hash of the last line and its `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub hash: String,
    pub seq: u64,
}

impl Link {
    /// The link before the first event.
    pub fn genesis() -> Link {
        Link { hash: GENESIS.to_owned(), seq: 0 }
    }

    /// The link after `line`, whose `seq` is `seq`.
    pub fn after(line: &str, seq: u64) -> Link {
        Link { hash: line_hash(line), seq }
    }
}

/// Lowercase hex SHA-256 of one line (without its newline).
pub fn line_hash(line: &str) -> String {
    crate::hex::encode(&Sha256::digest(line.as_bytes()))
}

/// The `seq` and `prev` a line declares, if it is an event at all.
pub fn read_link(line: &str) -> Option<(u64, String)> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let seq = value.get("seq")?.as_u64()?;
    let prev = value.get("prev")?.as_str()?.to_owned();
    Some((seq, prev))
}

/// What a verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub events: u64,
    /// The `prev` of the first event: [`GENESIS`], or the hash of a line of an earlier file.
    pub first_prev: Option<String>,
    pub last_seq: u64,
}

/// Where and how a chain breaks (`line` counts from 1 in `file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    pub file: String,
    pub line: usize,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The line is not an event (not JSON, or without `seq` and `prev`).
    Unreadable,
    /// Events are missing before this line: `seq` jumps.
    Missing { expected: u64, found: u64 },
    /// `prev` is not the hash of the line before it: that line (or this line's `prev`) was altered.
    Altered { previous_line: usize, previous_file: String },
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Break { file, line, problem } = self;
        match problem {
            Problem::Unreadable => write!(f, "{file}, line {line}: not an audit event (altered or truncated)"),
            Problem::Missing { expected, found } => write!(
                f,
                "{file}, line {line}: events are missing before this line (seq {found} follows seq {})",
                expected - 1
            ),
            Problem::Altered { previous_line, previous_file } => write!(
                f,
                "{file}, line {line}: its prev is not the SHA-256 of {previous_file}, line {previous_line}: that line \
                 was altered (or this line's prev was)"
            ),
        }
    }
}

/// Checks the chain of `files` (name, text), oldest first.
pub fn verify<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Verified, Break> {
    let mut verified = Verified { events: 0, first_prev: None, last_seq: 0 };
    let mut last: Option<(String, usize, Link)> = None;
    for (file, text) in files {
        for (index, line) in text.lines().enumerate() {
            let at = |problem| Break { file: file.to_owned(), line: index + 1, problem };
            let (seq, prev) = read_link(line).ok_or_else(|| at(Problem::Unreadable))?;
            match &last {
                None => verified.first_prev = Some(prev),
                Some((_, _, link)) if seq != link.seq + 1 => {
                    return Err(at(Problem::Missing { expected: link.seq + 1, found: seq }));
                }
                Some((previous_file, previous_line, link)) if prev != link.hash => {
                    let previous_file = previous_file.clone();
                    return Err(at(Problem::Altered { previous_line: *previous_line, previous_file }));
                }
                Some(_) => {}
            }
            verified.events += 1;
            verified.last_seq = seq;
            last = Some((file.to_owned(), index + 1, Link::after(line, seq)));
        }
    }
    Ok(verified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, prev: &str) -> String {
        format!("{{\"seq\":{seq},\"event\":\"reload\",\"prev\":\"{prev}\"}}")
    }

    fn trail(count: u64) -> Vec<String> {
        let mut link = Link::genesis();
        (1..=count)
            .map(|seq| {
                let line = event(seq, &link.hash);
                link = Link::after(&line, seq);
                line
            })
            .collect()
    }

    #[test]
    fn an_intact_trail_verifies_across_files() {
        let lines = trail(5);
        let (first, second) = (lines[..2].join("\n"), lines[2..].join("\n"));
        let verified = verify([("a.1", first.as_str()), ("a", second.as_str())]).expect("intact");
        assert_eq!((verified.events, verified.last_seq), (5, 5));
        assert_eq!(verified.first_prev.as_deref(), Some(GENESIS));
    }

    #[test]
    fn a_changed_line_breaks_the_link_after_it() {
        let mut lines = trail(4);
        lines[1] = lines[1].replace("reload", "reloaD");
        let text = lines.join("\n");
        let broken = verify([("f", text.as_str())]).expect_err("altered");
        let expected = Problem::Altered { previous_line: 2, previous_file: "f".into() };
        assert_eq!((broken.line, broken.problem), (3, expected));
    }

    #[test]
    fn a_removed_line_is_named_as_missing() {
        let mut lines = trail(4);
        lines.remove(1);
        let text = lines.join("\n");
        let broken = verify([("f", text.as_str())]).expect_err("removed");
        assert_eq!((broken.line, broken.problem.clone()), (2, Problem::Missing { expected: 2, found: 3 }));
        assert!(broken.to_string().contains("seq 3 follows seq 1"), "{broken}");
    }

    #[test]
    fn a_line_that_is_no_event_is_unreadable() {
        let text = format!("{}\nnot json\n", trail(1)[0]);
        let broken = verify([("f", text.as_str())]).expect_err("unreadable");
        assert_eq!((broken.line, broken.problem), (2, Problem::Unreadable));
    }
}
