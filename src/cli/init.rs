//! `switchyard init`: writes the starter configuration ([`switchyard::config::starter_file`]) where the other
//! commands will look for it (`--config`, else `SWITCHYARD_CONFIG`, else `./switchyard.toml`).
//!
//! Rules: an existing file is never touched (the file is created exclusively, so a file that appears meanwhile is
//! not overwritten either); the demo backend's command is this very binary, so the file works as written.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use switchyard::config::{Config, starter_file};

pub fn run(explicit: Option<&Path>) -> anyhow::Result<ExitCode> {
    let path = Config::target(explicit);
    let command = std::env::current_exe().map_or_else(|_| "switchyard".to_owned(), |exe| exe.display().to_string());
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => anyhow::bail!(
            "{} already exists; it was left untouched (remove it, or pass another --config path)",
            path.display()
        ),
        Err(error) => return Err(error).with_context(|| format!("cannot create {}", path.display())),
    };
    file.write_all(starter_file(&command).as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
    let shown = path.display();
    println!("wrote {shown}: one backend, `demo` (this binary's demo server over stdio).");
    println!("next: switchyard check --config {shown}    then: switchyard serve --config {shown}");
    Ok(ExitCode::SUCCESS)
}
