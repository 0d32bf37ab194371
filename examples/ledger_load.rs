//! The ledger's share of a durable call, without HTTP: TASKS concurrent tasks each claim a fresh key, yield (the
//! backend call's place) and queue the completion, as the router does, for SECONDS; then it reports calls per
//! second, the process's and the ledger threads' CPU per call, and what the writers did
//! (`LedgerStore::writer_stats`). CPU per call and the writer counts are load-independent enough to compare
//! builds on a busy machine, where calls per second are not. Used by `bench/ledger/load.sh`; not part of the
//! gateway.
//!
//!     ledger_load URL [TASKS=64] [SECONDS=3]      URL: memory | sqlite://PATH | postgres://…?schema=NAME
//!
//! Prints one line: `ledger_load store=… tasks=… calls=… calls_per_s=… cpu_us_per_call=…
//! ledger_threads_cpu_us_per_call=… <writer stats>`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use switchyard::ledger::{ClaimKey, ClaimOutcome, LedgerStore, NewClaim, Settlement};
use switchyard::raw_json::RawJson;

const OWNER: &str = "ledger-load";
const MAX_RESULT: usize = 1 << 20;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(url) = args.first() else { bail!("usage: ledger_load URL [TASKS] [SECONDS]") };
    let tasks: usize = args.get(1).map_or(Ok(64), |text| text.parse()).context("TASKS")?;
    let seconds: u64 = args.get(2).map_or(Ok(3), |text| text.parse()).context("SECONDS")?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(url, tasks, Duration::from_secs(seconds)))
}

async fn run(url: &str, tasks: usize, duration: Duration) -> anyhow::Result<()> {
    let store = LedgerStore::open(url, Path::new(".")).await.context("opening the ledger")?;
    // Warm-up: connections, statement caches, the file's first pages.
    drive(&store, tasks, Duration::from_millis(500)).await?;
    store.orphan(OWNER).await?;
    let (stats0, cpu0, threads0) = (store.writer_stats(), process_cpu(), ledger_threads_cpu());
    let started = Instant::now();
    let calls = drive(&store, tasks, duration).await?;
    // Every queued completion is applied before the counts are read.
    store.orphan(OWNER).await?;
    let elapsed = started.elapsed();
    let (stats, cpu, threads) =
        (store.writer_stats().since(&stats0), process_cpu() - cpu0, ledger_threads_cpu() - threads0);
    let per_call = |seconds: f64| seconds * 1e6 / calls.max(1) as f64;
    println!(
        "ledger_load store={} tasks={tasks} calls={calls} calls_per_s={:.0} cpu_us_per_call={:.1} \
         ledger_threads_cpu_us_per_call={:.1} {stats}",
        store.kind(),
        calls as f64 / elapsed.as_secs_f64(),
        per_call(cpu),
        per_call(threads),
    );
    Ok(())
}

/// Runs `tasks` callers for `duration`; returns how many calls they made.
async fn drive(store: &LedgerStore, tasks: usize, duration: Duration) -> anyhow::Result<u64> {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let (stop, calls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let result = RawJson::of(&json!({"content": [{"type": "text", "text": "hello"}]}));
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let (store, stop, calls, result) = (store.clone(), stop.clone(), calls.clone(), result.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = ClaimKey::request(&format!("load-{}-{run}-{task}", std::process::id()), &json!(n));
                    n += 1;
                    let claimed = store.claim(new_claim(&key)).await?;
                    if !matches!(claimed, ClaimOutcome::Claimed(_)) {
                        bail!("{key} was already claimed");
                    }
                    tokio::task::yield_now().await;
                    store.settle_soon(&key, OWNER, Settlement::Completed(result.clone()), MAX_RESULT);
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await??;
    }
    Ok(calls.load(Ordering::Relaxed))
}

fn new_claim(key: &ClaimKey) -> NewClaim {
    NewClaim {
        key: key.clone(),
        principal: "anonymous".to_owned(),
        session: "load-session".to_owned(),
        backend: "fast".to_owned(),
        tool: "echo".to_owned(),
        args_digest: "0".repeat(64),
        owner: OWNER.to_owned(),
        lease: Duration::from_secs(30),
    }
}

/// User + system CPU seconds of `stat` (a `/proc/…/stat` line).
fn cpu_of(stat: &str) -> f64 {
    // Fields after the command (which may hold spaces) start after its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0
}

fn process_cpu() -> f64 {
    std::fs::read_to_string("/proc/self/stat").map_or(0.0, |stat| cpu_of(&stat))
}

/// The CPU seconds of the SQLite store's threads (named `switchyard-ledger*`).
fn ledger_threads_cpu() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|name| name.starts_with("switchyard-ledg"))
        })
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .map(|stat| cpu_of(&stat))
        .sum()
}
