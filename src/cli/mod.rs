//! The binary's subcommands that need more than a few lines; `main.rs` parses the command line and calls them.
//!
//! Rules: these modules use the library's public API only and never import `main.rs`; here, and in `main.rs`
//! alone, errors become `anyhow` reports and exit codes; what is printed of agents' and backends' text goes
//! through [`terminal`], so it is inert on the operator's terminal.

pub mod approvals;
pub mod audit;
pub mod auth;
pub mod calls;
pub mod discovered;
pub mod healthcheck;
pub mod import;
pub mod init;
pub mod keys;
pub mod limits;
pub mod pins;
pub mod reload;
pub mod search;
pub mod table;
pub mod tasks;
pub mod terminal;

use std::path::PathBuf;

use anyhow::bail;
use clap::Subcommand;
use switchyard::config::Config;
use switchyard::ledger::{LedgerStore, LedgerUrl};

/// `switchyard tools …`: searching the discovered tools, or deciding pinned definitions in the ledger.
#[derive(Subcommand)]
pub enum ToolsAction {
    /// Discover the backends and rank their tools for QUERY as an agent's `switchyard__search_tools` would.
    Search {
        query: String,
        /// Only the tools this principal's policies let it use (with the groups of its API keys).
        #[arg(long)]
        principal: Option<String>,
        /// How many tools to print (1–100).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=100))]
        limit: u16,
    },
    #[command(flatten)]
    Pins(pins::PinsAction),
}

/// The ledger of the configuration (`--config`, else `SWITCHYARD_CONFIG`'s file, else `./switchyard.toml`, else the
/// defaults), for the commands that read it or settle a call in it. Only `[server]` and `[ledger]` are read (no
/// backend secret is needed), and a ledger that does not exist is an error naming where it was looked for, never a
/// new empty one.
async fn open_ledger(config: Option<PathBuf>) -> anyhow::Result<LedgerStore> {
    open_ledger_of(&Config::find_ledger(config.as_deref())?).await
}

/// [`open_ledger`] for a configuration already read (with at least its `[server]` and `[ledger]`).
async fn open_ledger_of(config: &Config) -> anyhow::Result<LedgerStore> {
    let (url, data_dir) = (&config.ledger.url, &config.server.data_dir);
    if *url == LedgerUrl::Memory {
        bail!(
            "the configuration's ledger is `memory`: it lives inside the running gateway only, so no command can \
             read it (see its console instead)"
        );
    }
    if let Some(file) = url.sqlite_path(data_dir).filter(|file| !file.is_file()) {
        bail!(
            "no ledger at {}: nothing was created; check `--config` and the configuration's `[server] data_dir` and \
             `[ledger] url` (a gateway creates its ledger when it first starts)",
            file.display()
        );
    }
    let store = LedgerStore::open_url(url, data_dir).await?;
    switchyard::gateway::seal_results(&store, data_dir, false, false)?;
    Ok(store)
}

/// Who runs the command, for the records an operator's act leaves: `$USER`, else `$LOGNAME`, else `operator`.
pub fn os_user() -> String {
    let from_env = || ["USER", "LOGNAME"].iter().find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    from_env().unwrap_or_else(|| "operator".to_owned())
}
