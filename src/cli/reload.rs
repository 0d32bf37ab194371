//! `switchyard reload`: asks the running gateway to re-read its configuration file, through its control socket
//! (`gateway::control`, found in the data directory the configuration names), and prints what changed — or the
//! error that refused the file (exit status 1; the gateway keeps serving its running configuration). Part of the
//! binary's edge, like `main.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use switchyard::config::Config;
use switchyard::gateway::control::{self, Answer};

/// `config`: the global `--config` (the gateway re-reads its own file; this one only says where it runs).
pub async fn run(config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let socket = control::socket_path(&Config::locate_data_dir(config.as_deref())?);
    // The gateway refuses when it serves another file than the one this command means.
    let file = Config::locate(config.as_deref())?;
    let file = file.map(|file| std::fs::canonicalize(&file).unwrap_or(file));
    let answer = control::request_reload(&socket, file.as_deref()).await.with_context(|| {
        format!(
            "no running gateway answers at {} (`switchyard serve` opens it in the configuration's data_dir; a \
             SIGHUP to the gateway's process reloads too)",
            socket.display()
        )
    })?;
    match answer {
        Answer::Applied(text) => {
            println!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Answer::Refused(text) => {
            // The reason first (it is what `check` prints for a refused file), then which gateway gave it.
            let (who, why) = text.split_once('\n').unwrap_or(("", text.as_str()));
            Err(anyhow::anyhow!("{why}\n({who})"))
        }
    }
}
