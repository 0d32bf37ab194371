//! `switchyard limits`: each `[[limits]]` entry's current use per principal, from the counters replicas share in
//! a PostgreSQL ledger. Part of the binary's edge, like `main.rs`.
//!
//! Rules: with a SQLite or memory ledger the counters live in each gateway's memory, so the command says where
//! to read them (the console, `/admin/api/limits`) instead of printing a table of nothing. Calls in flight are
//! counted per gateway and are not shown here. Principals are printed escaped ([`super::terminal`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use switchyard::config::Config;
use switchyard::gateway::limits;
use switchyard::ledger::{LedgerStore, LedgerUrl};
use switchyard::router::limits::LimitUse;

use super::table::print_table;
use super::terminal::escaped;

pub async fn run(config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let Some((path, config)) = Config::find(config.as_deref())? else {
        bail!("no configuration file: `switchyard limits` reads the [[limits]] and [ledger] of the gateway's file");
    };
    if config.limits.is_empty() {
        println!("{} configures no [[limits]]", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    if !matches!(config.ledger.url, LedgerUrl::Postgres(_)) {
        bail!(
            "with a `{}` ledger each gateway counts its limits in its own memory: read them on its console or at \
             GET /admin/api/limits",
            config.ledger.url.kind()
        );
    }
    let store = LedgerStore::open_url(&config.ledger.url, &config.server.data_dir).await?;
    let mut limits = limits(&config);
    limits.share_in(store);
    let rows = limits.usage().await.context("reading the shared limit counters")?;
    print_table(["LIMIT", "PRINCIPAL", "TOKENS LEFT", "QUOTA USED"], rows.iter().map(row).collect());
    Ok(ExitCode::SUCCESS)
}

fn row(limit: &LimitUse) -> [String; 4] {
    let of = |used: Option<u64>, of: Option<u64>| match (used, of) {
        (Some(used), Some(of)) => format!("{used}/{of}"),
        _ => "-".to_owned(),
    };
    [
        escaped(&limit.limit).into_owned(),
        escaped(&limit.principal).into_owned(),
        of(limit.tokens, limit.burst),
        of(limit.used, limit.quota),
    ]
}
