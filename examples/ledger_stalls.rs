//! Checks a ledger store for stalls and measures what the memory store keeps per claim (ARCHITECTURE.md,
//! *The memory ledger*; docs/ledger.md, *Retention*). Built with
//! `cargo run --release --example ledger_stalls [CLAIMS] [STORE]`, where STORE is `memory` (the default) or a
//! ledger URL such as `sqlite:///tmp/stalls/ledger.db` (a fresh file); not part of the gateway, and not a
//! throughput benchmark: it times single operations and counts those slower than a threshold, because one slow
//! operation holds the store (its lock, or the SQLite writer) and every call waits behind it.
//!
//! Phases, on a store filled with `CLAIMS` (300 000 by default) completed calls shaped like the benchmark's:
//! 1. fill: each claim and each completion timed on its own (SQLite: by 64 callers at once, so it ends in time);
//! 2. memory: bytes the store holds per retained claim, as the allocator saw them (requested bytes still live)
//!    and as the kernel did (RSS), both as the difference over the fill (meaningful for `memory` only);
//! 3. upkeep: one lease renewal and one lease expiry, each timed (with a few calls in flight);
//! 4. baseline: as many new calls as the sweep will take, claimed and completed one after another, timed;
//! 5. sweep: a purge of everything settled runs on one worker while the other keeps claiming and completing
//!    new calls; those calls are timed. The baseline's figures are the same calls without a purge.
//!
//! Prints one line per phase: operations, how many took over 1 ms and over 10 ms, and the slowest, by wall time
//! and by the thread's CPU time. On a busy machine the wall figures include preemption; the CPU figures of the
//! fill and the upkeep do not, and show whether one operation did work that grows with the store. (The calls
//! timed during the sweep wait for the lock or the writer without CPU time, so only their wall figures see the
//! sweep.)

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "an example reports a failure by panicking")]
#![allow(unsafe_code, reason = "it counts allocations with a global allocator and reads the thread's CPU clock")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use switchyard::ledger::{ClaimKey, ClaimOutcome, LedgerStore, NewClaim, canonical_digest};
use switchyard::raw_json::RawJson;

/// Counts the bytes requested and not yet freed, so the store's share can be told from the rest.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` with the caller's own arguments; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MAX_RESULT: usize = 64 * 1024;
const OWNER: &str = "3f0c2a9e8d7b4c1a9e6f5d4c3b2a1908";

/// Single operation times of one phase: wall time (what a caller waits, preemption included) and the thread's
/// CPU time (the operation's own work, without preemption or waiting for the lock).
#[derive(Default)]
struct Slow {
    operations: u64,
    wall: Counts,
    cpu: Counts,
}

#[derive(Default)]
struct Counts {
    over_1ms: u64,
    over_10ms: u64,
    slowest: Duration,
}

impl Counts {
    fn record(&mut self, took: Duration) {
        self.over_1ms += u64::from(took > Duration::from_millis(1));
        self.over_10ms += u64::from(took > Duration::from_millis(10));
        self.slowest = self.slowest.max(took);
    }
}

/// When one operation started, by both clocks.
struct Started(Instant, Duration);

impl Started {
    fn now() -> Started {
        Started(Instant::now(), thread_cpu())
    }
}

/// This thread's CPU time so far.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill; the clock id is a constant the kernel knows.
    let failed = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0;
    if failed {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(now.tv_sec).unwrap_or(0), u32::try_from(now.tv_nsec).unwrap_or(0))
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.over_1ms += other.over_1ms;
        self.over_10ms += other.over_10ms;
        self.slowest = self.slowest.max(other.slowest);
    }
}

impl Slow {
    fn add(&mut self, other: Slow) {
        self.operations += other.operations;
        self.wall.add(&other.wall);
        self.cpu.add(&other.cpu);
    }

    fn record(&mut self, started: Started) {
        self.operations += 1;
        self.wall.record(started.0.elapsed());
        self.cpu.record(thread_cpu().saturating_sub(started.1));
    }

    fn print(&self, phase: &str) {
        let Slow { operations, wall, cpu } = self;
        println!(
            "{phase}: operations={operations} wall: over_1ms={} over_10ms={} slowest={:?}; cpu: over_1ms={} \
             over_10ms={} slowest={:?}",
            wall.over_1ms, wall.over_10ms, wall.slowest, cpu.over_1ms, cpu.over_10ms, cpu.slowest
        );
    }
}

/// A call as the benchmark makes them: one agent session, fresh JSON-RPC ids, one echo tool.
fn call(session: &str, id: u64) -> NewClaim {
    NewClaim {
        key: ClaimKey::request(session, &serde_json::json!(id)),
        principal: "anonymous".to_owned(),
        session: session.to_owned(),
        backend: "bench".to_owned(),
        tool: "echo".to_owned(),
        args_digest: canonical_digest(&serde_json::json!({ "text": "hello" })),
        owner: OWNER.to_owned(),
        lease: Duration::from_secs(30),
    }
}

async fn timed_call(store: &LedgerStore, new: NewClaim, result: &RawJson, slow: &mut Slow) -> anyhow::Result<()> {
    let key = new.key.clone();
    let started = Started::now();
    let outcome = store.claim(new).await?;
    slow.record(started);
    anyhow::ensure!(matches!(outcome, ClaimOutcome::Claimed(_)), "{key} was claimed twice");
    let started = Started::now();
    store.complete(&key, OWNER, result, MAX_RESULT).await?;
    slow.record(started);
    Ok(())
}

fn rss_bytes() -> anyhow::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").context("read /proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).context("statm has no RSS field")?.parse()?;
    Ok(pages * 4096)
}

/// Fills the store with `claims` completed calls: one after another for the memory store (each operation's CPU
/// time is its own), 64 at a time for a durable one (whose calls wait for commits).
async fn fill(store: &LedgerStore, session: &str, claims: u64, result: &RawJson) -> anyhow::Result<Slow> {
    let callers = if store.kind() == "memory" { 1 } else { 64 };
    let mut tasks = tokio::task::JoinSet::new();
    for caller in 0..callers {
        let (store, session, result) = (store.clone(), session.to_owned(), result.clone());
        tasks.spawn(async move {
            let mut slow = Slow::default();
            for id in (caller..claims).step_by(callers as usize) {
                timed_call(&store, call(&session, id), &result, &mut slow).await?;
            }
            anyhow::Ok(slow)
        });
    }
    let mut all = Slow::default();
    while let Some(slow) = tasks.join_next().await {
        all.add(slow??);
    }
    Ok(all)
}

async fn run(claims: u64, store: LedgerStore) -> anyhow::Result<()> {
    let session = "0b9f6c2e-4d1a-4e8b-9c3f-7a6d5e4c3b2a";
    let result = RawJson::of(&serde_json::json!({"content": [{"type": "text", "text": "hello"}], "isError": false}));
    let (live_before, rss_before) = (LIVE.load(Ordering::Relaxed), rss_bytes()?);
    fill(&store, session, claims, &result).await?.print("fill");
    let live = (LIVE.load(Ordering::Relaxed) - live_before) as f64 / claims as f64;
    let rss = rss_bytes()?.saturating_sub(rss_before) as f64 / claims as f64;
    println!("memory: claims={claims} live_bytes_per_claim={live:.0} rss_bytes_per_claim={rss:.0}");

    let mut upkeep = Slow::default();
    for id in 0..16 {
        store.claim(call(session, claims + id)).await?;
    }
    let started = Started::now();
    store.renew_leases(OWNER, SystemTime::now() + Duration::from_secs(30)).await?;
    upkeep.record(started);
    let started = Started::now();
    store.expire_leases(SystemTime::now()).await?;
    upkeep.record(started);
    upkeep.print("upkeep");

    let sweeper = store.clone();
    let cutoff = SystemTime::now() + Duration::from_secs(1);
    // The cutoff covers the whole fill; the second is waited out so that the calls timed from here on settle
    // after it and are not purged.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut id = 2 * claims;
    let purge = tokio::spawn(async move { sweeper.purge(cutoff).await });
    let mut during = Slow::default();
    while !purge.is_finished() {
        timed_call(&store, call(session, id), &result, &mut during).await?;
        id += 1;
    }
    let purged = purge.await??;
    let mut baseline = Slow::default();
    for _ in 0..during.operations / 2 {
        timed_call(&store, call(session, id), &result, &mut baseline).await?;
        id += 1;
    }
    baseline.print("baseline (no purge)");
    during.print(&format!("sweep (purged={purged})"));
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let claims = match args.next() {
        Some(count) => count.parse().context("CLAIMS must be a number")?,
        None => 300_000,
    };
    let url = args.next().unwrap_or_else(|| "memory".to_owned());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let store = LedgerStore::open(&url, &std::env::temp_dir()).await.with_context(|| format!("open {url}"))?;
        run(claims, store).await
    })
}
