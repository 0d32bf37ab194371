//! `switchyard import FILE [--write]`: the `[[backends]]` tables for the MCP servers of a client's file
//! (`switchyard::config::import`), printed or appended to the configuration file.
//!
//! Rules: notes (secrets moved to variables, renamed or skipped servers) go to stderr and the tables to stdout, so
//! the output can be redirected as it is; names are checked against the configuration file (`--config`, else
//! `SWITCHYARD_CONFIG`, else `./switchyard.toml`) when it exists; `--write` only appends (creating the file if
//! missing), and writes nothing when the import fails.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use switchyard::config::Config;
use switchyard::config::import::{configured_names, import_servers};

pub fn run(file: &Path, write: bool, explicit: Option<&Path>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let target = Config::target(explicit);
    let existing = match std::fs::read_to_string(&target) {
        Ok(config) => configured_names(&config, &target.display().to_string())?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", target.display())),
    };
    let imported = import_servers(&text, &file.display().to_string(), &existing)?;
    for note in &imported.notes {
        eprintln!("note: {note}");
    }
    if !write {
        print!("{}", imported.toml);
        return Ok(ExitCode::SUCCESS);
    }
    if imported.backends > 0 {
        append(&target, &imported.toml)?;
    }
    let shown = target.display();
    eprintln!("appended {} backend(s) to {shown}; next: switchyard check --config {shown}", imported.backends);
    Ok(ExitCode::SUCCESS)
}

fn append(path: &Path, tables: &str) -> anyhow::Result<()> {
    let ends_open = std::fs::read(path).is_ok_and(|bytes| bytes.last().is_some_and(|last| *last != b'\n'));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open {} to append to it", path.display()))?;
    let text = if ends_open { format!("\n{tables}") } else { tables.to_owned() };
    file.write_all(text.as_bytes()).with_context(|| format!("cannot append to {}", path.display()))
}
