//! Throughput of `switchyard::backend::event_stream::SseDecoder` next to the `eventsource-stream` crate, measured in
//! the same run on the same inputs split into the same chunks.
//!
//! Run with `cargo bench --bench sse`. No bench framework: each case runs a warm-up and then repeats until
//! it has at least `MIN_REPS` samples and `TIME_BUDGET` has passed (capped at `MAX_REPS`), and reports the
//! best and the median rate in MB/s (10^6 bytes per second) of input consumed, events drained included.
//!
//! `eventsource-stream` re-parses its whole pending buffer on every chunk, so an event split into k chunks
//! costs it O(k × event size). The 16 MiB event in 1 KiB and 1 B chunks would take it minutes to hours, so
//! for those rows it is measured on a smaller event (both decoders on that same smaller input) instead.
//! Both drivers check each other's event count and data size, so a decoder that skipped work would show.
//! Without `--bench` (as under `cargo test --all-targets`) it only runs a quick agreement check.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test, bench or example reports a failure by panicking")]

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::Stream;
use switchyard::backend::event_stream::SseDecoder;

const MIN_REPS: usize = 3;
const MAX_REPS: usize = 15;
const TIME_BUDGET: Duration = Duration::from_secs(2);
/// Large enough for the 16 MiB event; the limit is not what is measured.
const LIMIT: usize = 32 << 20;

/// What a decoder produced, to check both decoders saw the same events.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Summary {
    events: usize,
    data_bytes: usize,
}

impl Summary {
    fn add(&mut self, data: &str) {
        self.events += 1;
        self.data_bytes += data.len();
    }
}

struct Stats {
    best: f64,
    median: f64,
    /// Page faults per repetition: fresh pages the kernel had to map and zero, which on this VM can cost
    /// more than the decoding itself; `None` where `/proc/self/stat` is unavailable.
    faults: Option<u64>,
}

struct Case {
    name: String,
    input: Vec<u8>,
    chunk: usize,
    compare: bool,
}

fn large_event(payload_len: usize) -> Vec<u8> {
    let pattern = br#"{"type":"text","text":"lorem ipsum dolor sit amet"},"#;
    let mut input = b"data: ".to_vec();
    input.extend(pattern.iter().cycle().take(payload_len));
    input.extend_from_slice(b"\n\n");
    input
}

fn small_events(count: usize) -> Vec<u8> {
    let mut input = Vec::new();
    for i in 0..count {
        let event = format!(
            "id: {i}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":\
             {{\"progressToken\":\"tok-{i}\",\"progress\":{i},\"total\":{count},\"message\":\"step {i}\"}}}}\n\n"
        );
        input.extend_from_slice(event.as_bytes());
    }
    input
}

fn cases() -> Vec<Case> {
    let big = large_event(16 << 20);
    let case = |name: &str, input: &Vec<u8>, chunk: usize, compare: bool| Case {
        name: name.to_owned(),
        input: input.clone(),
        chunk,
        compare,
    };
    let small = small_events(100_000);
    vec![
        case("1 event of 16 MiB", &big, 64 << 10, true),
        case("1 event of 16 MiB", &big, 1 << 10, false),
        case("1 event of 1 MiB", &large_event(1 << 20), 1 << 10, true),
        case("1 event of 16 MiB", &big, 1, false),
        case("1 event of 64 KiB", &large_event(64 << 10), 1, true),
        case("100 000 small events", &small, 64 << 10, true),
        case("100 000 small events", &small, 1 << 10, true),
    ]
}

fn run_ours(chunks: &[&[u8]]) -> Summary {
    let mut decoder = SseDecoder::new(LIMIT);
    let mut summary = Summary::default();
    for chunk in chunks {
        decoder.feed(chunk).expect("bench input is within the limit");
        while let Some(event) = decoder.next_event() {
            summary.add(&event.data);
        }
    }
    summary
}

fn run_theirs(chunks: &[&[u8]]) -> Summary {
    let source = futures_util::stream::iter(chunks.iter().map(|c| Ok::<&[u8], Infallible>(c)));
    let mut events = pin!(source.eventsource());
    // The source is an in-memory iterator, so every poll is ready and no executor is needed.
    let mut cx = Context::from_waker(Waker::noop());
    let mut summary = Summary::default();
    loop {
        match events.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(Ok(event))) => summary.add(&event.data),
            Poll::Ready(Some(Err(e))) => panic!("eventsource-stream failed: {e}"),
            Poll::Ready(None) => return summary,
            Poll::Pending => panic!("an in-memory stream is never pending"),
        }
    }
}

fn measure(bytes: usize, mut run: impl FnMut() -> Summary) -> (Stats, Summary) {
    let summary = black_box(run());
    let mut samples = Vec::new();
    let faults_before = minor_faults();
    let started = Instant::now();
    while samples.len() < MAX_REPS && (samples.len() < MIN_REPS || started.elapsed() < TIME_BUDGET) {
        let t = Instant::now();
        black_box(run());
        samples.push(t.elapsed().as_secs_f64());
    }
    let faults = faults_before.zip(minor_faults()).map(|(before, after)| (after - before) / samples.len() as u64);
    samples.sort_by(f64::total_cmp);
    let rate = |secs: f64| bytes as f64 / secs / 1e6;
    let stats = Stats { best: rate(samples[0]), median: rate(samples[samples.len() / 2]), faults };
    (stats, summary)
}

/// The process's minor page faults so far (field 10 of `/proc/self/stat`, the 8th after the command name).
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(7)?.parse().ok()
}

fn chunk_label(chunk: usize) -> String {
    match chunk {
        c if c >= 1 << 10 => format!("{} KiB", c >> 10),
        c => format!("{c} B"),
    }
}

/// Keeps two decimals for the very slow rates, which would otherwise all print as 0.0.
fn cell(rate: f64) -> String {
    if rate < 10.0 { format!("{rate:>9.2}") } else { format!("{rate:>9.1}") }
}

fn run_case(case: &Case) {
    let chunks: Vec<&[u8]> = case.input.chunks(case.chunk).collect();
    let (ours, ours_summary) = measure(case.input.len(), || run_ours(&chunks));
    let theirs = case.compare.then(|| {
        let (theirs, theirs_summary) = measure(case.input.len(), || run_theirs(&chunks));
        assert_eq!(ours_summary, theirs_summary, "decoders disagree on {}", case.name);
        theirs
    });
    let (theirs_cols, ratio) = match theirs {
        Some(t) => (format!("{} | {}", cell(t.best), cell(t.median)), format!("{:>6.1}x", ours.median / t.median)),
        None => (format!("{:>9} | {:>9}", "-", "-"), format!("{:>7}", "-")),
    };
    let faults = ours.faults.map_or_else(|| "-".to_owned(), |f| f.to_string());
    println!(
        "| {:<22} | {:>6} | {} | {} | {:>11} | {} | {} |",
        case.name,
        chunk_label(case.chunk),
        cell(ours.best),
        cell(ours.median),
        faults,
        theirs_cols,
        ratio
    );
}

/// `cargo test --all-targets` also runs this file, unoptimised and without `--bench`; there the full
/// workloads (and the competitor's quadratic cases) would take very long, so it only checks on small inputs
/// that both decoders agree.
fn smoke_test() {
    let inputs = [large_event(4 << 10), small_events(100)];
    for input in &inputs {
        for chunk in [1, 7, 1 << 10] {
            let chunks: Vec<&[u8]> = input.chunks(chunk).collect();
            assert_eq!(run_ours(&chunks), run_theirs(&chunks), "decoders disagree at chunk size {chunk}");
        }
    }
    println!("sse bench smoke test passed; run `cargo bench --bench sse` for figures");
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        smoke_test();
        return;
    }
    println!("SSE decoder throughput, MB/s of input (best | median); ratio = ours median / theirs median;");
    println!("ours faults = minor page faults per repetition of our decoder");
    println!();
    println!(
        "| input                  |  chunk | ours best | ours med. | ours faults | them best | them med. |   ratio |"
    );
    println!(
        "|------------------------|-------:|----------:|----------:|------------:|----------:|----------:|--------:|"
    );
    for case in cases() {
        run_case(&case);
    }
}
