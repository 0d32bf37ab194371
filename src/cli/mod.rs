//! The binary's subcommands that need more than a few lines; `main.rs` parses the command line and calls them.

pub mod auth;
pub mod calls;
pub mod import;
pub mod init;
pub mod keys;
pub mod reload;
pub mod table;
pub mod terminal;

use std::path::PathBuf;

use switchyard::config::Config;
use switchyard::ledger::LedgerStore;

/// The ledger of the configuration (`--config`, else `SWITCHYARD_CONFIG`'s file, else `./switchyard.toml`, else the
/// defaults).
async fn open_ledger(config: Option<PathBuf>) -> anyhow::Result<LedgerStore> {
    let config = match Config::find(config.as_deref())? {
        Some((_, config)) => config,
        None => Config::default_demo().with_env_overrides(std::env::vars())?,
    };
    Ok(LedgerStore::open_url(&config.ledger.url, &config.server.data_dir).await?)
}
