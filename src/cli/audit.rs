//! `switchyard audit verify FILE…`: checks that audit files are complete and unaltered by following their hash
//! chain (the rules are `telemetry::audit::chain`'s). Part of the binary's edge, like `main.rs`.
//!
//! Rules: files are read whole and checked in the order given (oldest first: `audit.jsonl.2 audit.jsonl.1
//! audit.jsonl`); the first break is printed with its file and line and the exit status is 1.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use switchyard::telemetry::audit::chain::{self, GENESIS};

use super::terminal::escaped;

/// Verifies `files`, oldest first.
pub fn verify(files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let texts = files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            Ok((path.display().to_string(), text))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    match chain::verify(texts.iter().map(|(name, text)| (name.as_str(), text.as_str()))) {
        Ok(verified) => {
            let start = match verified.first_prev.as_deref() {
                None => "no events".to_owned(),
                Some(GENESIS) => "the first event starts the trail".to_owned(),
                Some(prev) => {
                    format!("the first event continues an earlier file whose last line has SHA-256 {}", escaped(prev))
                }
            };
            println!("intact: {} events, up to seq {}; {start}", verified.events, verified.last_seq);
            Ok(ExitCode::SUCCESS)
        }
        Err(broken) => {
            println!("broken: {}", escaped(&broken.to_string()));
            Ok(ExitCode::FAILURE)
        }
    }
}
