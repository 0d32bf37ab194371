//! Latency of the ledger's hot path, one claim followed by its completion, on each store: memory (the baseline),
//! SQLite (a file in a temporary directory) and PostgreSQL (a fresh schema in the test database), with one task
//! calling sequentially and with 64 concurrent tasks.
//!
//! Run with `cargo bench --bench ledger`; it prints a table and writes it, with the command and the machine, to
//! `BENCHMARKS.md`. PostgreSQL is found at `SWITCHYARD_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) and skipped, with a note, when unreachable. No bench framework:
//! every pair is timed on its own, after a warm-up, and the median and 99th percentile are reported.
//! Without `--bench` (as under `cargo test --all-targets`) it only runs a few pairs per store as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test, bench or example reports a failure by panicking")]

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde_json::json;
use switchyard::config::DEFAULT_MAX_RESULT;
use switchyard::ledger::{ClaimKey, ClaimOutcome, LedgerStore, NewClaim, Settlement, canonical_digest};
use switchyard::raw_json::RawJson;

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const CONCURRENT_TASKS: usize = 64;
/// The owner of every bench claim.
const OWNER: &str = "bench-instance";

/// How a pair's completion is written.
#[derive(Clone, Copy)]
enum Completion {
    /// `LedgerStore::complete`, waited for (timed).
    Awaited,
    /// `LedgerStore::settle_soon`, as the router completes a call: queued, not waited for; the claim alone is
    /// timed, and the rate counts until every completion is durable.
    Queued,
}

/// The pause between a claim and its completion, and between pairs, in the "paced" mode: a stand-in for the
/// backend call and for the gaps between an agent's calls, during which the store's threads fall asleep.
const PACE: Duration = Duration::from_millis(1);

/// How many pairs each measurement times.
#[derive(Clone, Copy)]
struct Sizes {
    warm_up: usize,
    sequential: usize,
    paced: usize,
    per_task: usize,
}

const FULL: Sizes = Sizes { warm_up: 2_000, sequential: 20_000, paced: 2_000, per_task: 500 };
const SMOKE: Sizes = Sizes { warm_up: 10, sequential: 50, paced: 5, per_task: 3 };

/// How to read the table; true of the design, whatever the run's figures.
const NOTES: &str = "Reading the figures:\n\n\
- SQLite: each operation is one hop to the store's thread and back plus one write to the write-ahead log (no \
fsync, `synchronous = NORMAL`); WAL checkpoints run on a thread of their own, off the callers' path. The \
store's thread sleeps on its queue between jobs (it never polls), so each hop may include waking a sleeping \
thread, which on a VM (virtual CPUs) costs tens of µs; \"paced\" shows that cost every time.\n\
- 64 tasks: operations that queue up while a store's writer is busy are committed together in one transaction \
(group commit; on PostgreSQL one pipelined round trip per batch), which is where the throughput comes from; \
each caller's latency is mostly waiting behind the other 63.\n\
- \"queued\" modes: the completion is handed to the writer without waiting (`LedgerStore::settle_soon`, what \
the router does), so a pair's time is its claim's; pairs/s counts until every completion is durable.\n\
- PostgreSQL: every commit waits for its WAL flush (`synchronous_commit = on`: an acknowledged claim survives \
a server crash, which at-most-once needs), and settles also send a `NOTIFY` from a trigger, which PostgreSQL \
serialises across all committing transactions. Batching shares both among the jobs of a batch.\n";

/// One store's figures for one mode.
struct Figures {
    store: &'static str,
    mode: &'static str,
    median: Duration,
    p99: Duration,
    pairs_per_second: f64,
}

fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let load_before = load_average();
    let figures = runtime.block_on(measure_all(if full { FULL } else { SMOKE }))?;
    let load = format!("{load_before} before the run, {} after", load_average());
    if !full {
        println!("ledger bench smoke test: {} measurements ran (use --bench for figures)", figures.len());
        return Ok(());
    }
    let table = render_table(&figures);
    println!("{table}");
    // The write-up for BENCHMARKS.md goes to target/, so a run never edits tracked files.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-ledger.md");
    std::fs::write(&path, render_document(&table, &load)).with_context(|| format!("writing {}", path.display()))?;
    println!("written to {}", path.display());
    Ok(())
}

async fn measure_all(sizes: Sizes) -> anyhow::Result<Vec<Figures>> {
    let mut figures = Vec::new();
    figures.extend(measure_store("memory", &LedgerStore::memory(), sizes).await?);

    let dir = std::env::temp_dir().join(format!("switchyard-ledger-bench-{}", std::process::id()));
    let sqlite = LedgerStore::open("sqlite", &dir).await?;
    figures.extend(measure_store("sqlite", &sqlite, sizes).await?);
    drop(sqlite);
    let _ = std::fs::remove_dir_all(&dir);

    match open_postgres().await {
        Ok((store, schema)) => {
            figures.extend(measure_store("postgres", &store, sizes).await?);
            drop(store);
            drop_schema(&schema).await;
        }
        Err(error) => eprintln!("SKIPPED: PostgreSQL ({error:#})"),
    }
    Ok(figures)
}

async fn measure_store(name: &'static str, store: &LedgerStore, sizes: Sizes) -> anyhow::Result<Vec<Figures>> {
    pairs(store, "warm-up", sizes.warm_up, Completion::Awaited).await?;
    let (sequential, sequential_rate) = timed(store, 1, sizes.sequential, Completion::Awaited).await?;
    let paced = paced_pairs(store, sizes.paced).await?;
    let (concurrent, concurrent_rate) = timed(store, CONCURRENT_TASKS, sizes.per_task, Completion::Awaited).await?;
    let (queued, queued_rate) = timed(store, 1, sizes.sequential, Completion::Queued).await?;
    let (concurrent_queued, concurrent_queued_rate) =
        timed(store, CONCURRENT_TASKS, sizes.per_task, Completion::Queued).await?;
    Ok(vec![
        figures(name, "1 task", sequential, sequential_rate),
        figures(name, "paced", paced, f64::NAN),
        figures(name, "64 tasks", concurrent, concurrent_rate),
        figures(name, "1 task, queued", queued, queued_rate),
        figures(name, "64 tasks, queued", concurrent_queued, concurrent_queued_rate),
    ])
}

/// `tasks` concurrent callers of `per_task` pairs each: every pair's time, and pairs per second until every
/// completion is durable (`orphan` first applies the queued ones, and finds nothing left in flight).
async fn timed(
    store: &LedgerStore,
    tasks: usize,
    per_task: usize,
    completion: Completion,
) -> anyhow::Result<(Vec<Duration>, f64)> {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    let callers: Vec<_> = (0..tasks)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move { pairs(&store, &format!("run-{run}-task-{task}"), per_task, completion).await })
        })
        .collect();
    let mut timings = Vec::with_capacity(tasks * per_task);
    for caller in callers {
        timings.extend(caller.await??);
    }
    let left = store.orphan(OWNER).await?;
    if left > 0 {
        bail!("{left} completions were not applied");
    }
    let rate = timings.len() as f64 / started.elapsed().as_secs_f64();
    Ok((timings, rate))
}

/// Claims and completes `count` fresh keys, timing each pair.
async fn pairs(
    store: &LedgerStore,
    label: &str,
    count: usize,
    completion: Completion,
) -> anyhow::Result<Vec<Duration>> {
    let result = RawJson::of(&json!({ "content": [{ "type": "text", "text": "ok" }], "isError": false }));
    let mut timings = Vec::with_capacity(count);
    for index in 0..count {
        let new = new_claim(&format!("{label}-{index}"));
        let key = new.key.clone();
        let started = Instant::now();
        claim(store, new, &key).await?;
        match completion {
            Completion::Awaited => store.complete(&key, OWNER, &result, DEFAULT_MAX_RESULT).await?,
            Completion::Queued => {
                store.settle_soon(&key, OWNER, Settlement::Completed(result.clone()), DEFAULT_MAX_RESULT);
            }
        }
        timings.push(started.elapsed());
    }
    Ok(timings)
}

/// Like [`pairs`], with [`PACE`] before each claim and between claim and completion (not counted).
async fn paced_pairs(store: &LedgerStore, count: usize) -> anyhow::Result<Vec<Duration>> {
    let result = RawJson::of(&json!({ "content": [{ "type": "text", "text": "ok" }], "isError": false }));
    let mut timings = Vec::with_capacity(count);
    for index in 0..count {
        let new = new_claim(&format!("paced-{index}"));
        let key = new.key.clone();
        tokio::time::sleep(PACE).await;
        let started = Instant::now();
        store.claim(new).await?;
        let claiming = started.elapsed();
        tokio::time::sleep(PACE).await;
        let started = Instant::now();
        store.complete(&key, OWNER, &result, DEFAULT_MAX_RESULT).await?;
        timings.push(claiming + started.elapsed());
    }
    Ok(timings)
}

async fn claim(store: &LedgerStore, new: NewClaim, key: &ClaimKey) -> anyhow::Result<()> {
    match store.claim(new).await? {
        ClaimOutcome::Claimed(_) => Ok(()),
        ClaimOutcome::Existing(record) => bail!("fresh key {key} was already claimed: {record:?}"),
    }
}

fn new_claim(name: &str) -> NewClaim {
    NewClaim {
        key: ClaimKey::idempotency("bench", name),
        principal: "bench".to_owned(),
        session: "bench-session".to_owned(),
        backend: "docs".to_owned(),
        tool: "search".to_owned(),
        args_digest: canonical_digest(&json!({ "query": name })),
        owner: OWNER.to_owned(),
        lease: Duration::from_secs(30),
    }
}

fn figures(store: &'static str, mode: &'static str, mut timings: Vec<Duration>, rate: f64) -> Figures {
    timings.sort_unstable();
    let at = |fraction: f64| {
        let index = ((timings.len() as f64 * fraction) as usize).min(timings.len().saturating_sub(1));
        timings.get(index).copied().unwrap_or_default()
    };
    Figures { store, mode, median: at(0.5), p99: at(0.99), pairs_per_second: rate }
}

async fn open_postgres() -> anyhow::Result<(LedgerStore, String)> {
    let base = std::env::var("SWITCHYARD_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.subsec_nanos());
    let schema = format!("sy_bench_{}_{}", std::process::id(), nanos % 1_000_000);
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}schema={schema}");
    let store = LedgerStore::open(&url, Path::new(".")).await?;
    Ok((store, schema))
}

async fn drop_schema(schema: &str) {
    let base = std::env::var("SWITCHYARD_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
    if let Ok((client, connection)) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await {
        tokio::spawn(connection);
        let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    }
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn render_table(figures: &[Figures]) -> String {
    let mut table = String::from(
        "| store    | callers          | median µs | p99 µs | median vs memory | added median µs | pairs/s |\n\
         |----------|------------------|----------:|-------:|-----------------:|----------------:|--------:|\n",
    );
    for row in figures {
        let baseline = figures.iter().find(|base| base.store == "memory" && base.mode == row.mode);
        let (ratio, added) = baseline.map_or((f64::NAN, f64::NAN), |base| {
            (micros(row.median) / micros(base.median), micros(row.median) - micros(base.median))
        });
        let _ = writeln!(
            table,
            "| {:<8} | {:<16} | {:>9.1} | {:>6.1} | {:>15.1}× | {:>15.1} | {:>7} |",
            row.store,
            row.mode,
            micros(row.median),
            micros(row.p99),
            ratio,
            added,
            if row.pairs_per_second.is_nan() { "–".to_owned() } else { format!("{:.0}", row.pairs_per_second) },
        );
    }
    table
}

/// The 1-minute load average: other work on the same cores moves these figures a lot.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn render_document(table: &str, load: &str) -> String {
    format!(
        "## Ledger: claim + completion (`benches/ledger.rs`)\n\n\
         What it measures: the time of one `LedgerStore::claim` of a fresh key followed by `LedgerStore::complete` \
         with a small result (the ledger work added to every tool call), per store. \"1 task\": one caller in a \
         loop ({sequential} timed pairs after {warm_up} warm-up pairs). \"paced\": one caller, \
         {paced} pairs, pausing {pace} ms before each claim and between claim and completion (a stand-in for the \
         backend call; not counted), so the store's threads have fallen asleep each time, as on a lightly loaded \
         gateway. \"64 tasks\": 64 concurrent callers, {per_task} \
         pairs each; each pair is timed on its own, so the latency includes waiting behind the other callers. \
         \"queued\": the same, completing with `LedgerStore::settle_soon` as the router does (see below). \
         \"added median\" = the store's median − the memory store's median in the same mode; \"pairs/s\" = pairs \
         completed per second of wall time. SQLite: a file in a temporary directory (WAL, synchronous = NORMAL); \
         PostgreSQL: a fresh schema in the local `test` database over TCP on 127.0.0.1.\n\n\
         Command:\n\n```\ncargo bench --bench ledger\n```\n\n\
         Machine: {machine}. Load average (1 min): {load}.\n\n{table}\n{NOTES}",
        sequential = FULL.sequential,
        warm_up = FULL.warm_up,
        per_task = FULL.per_task,
        paced = FULL.paced,
        pace = PACE.as_millis(),
        machine = machine(),
    )
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = command_output("uname", &["-sr"]);
    let rustc = command_output("rustc", &["--version"]);
    let postgres = command_output("psql", &["--version"]);
    format!("{cores} cores of \"{cpu}\", {kernel}, {rustc}, {postgres}, bench profile (release)")
}

fn command_output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map_or_else(|| format!("{program} unknown"), |text| text.trim().to_owned())
}
