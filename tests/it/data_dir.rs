//! The data directory holds every principal's tool results (the SQLite ledger) and the gateway's keys: `serve`
//! creates it 0700 and every file in it 0600, and warns about an existing one that others can reach. Checked on
//! the real binary, by `stat`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;
use switchyard::backend::stdio::RECORD_PREFIX;

use crate::support::gateway::{Agent, ChildGateway, ScratchDir};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|error| panic!("{}: {error}", path.display())).permissions().mode() & 0o777
}

/// Serves the embedded demo backend in `dir` (so the data directory is `dir/switchyard-data`) and makes one call,
/// so the ledger has written.
async fn serve_in(dir: &Path) -> ChildGateway {
    let gateway = ChildGateway::spawn_in(None, dir, &dir.join("gateway.log")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let echoed = agent.call_tool("demo__echo", json!({"text": "kept"})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "kept");
    gateway
}

#[tokio::test]
async fn a_new_data_directory_and_every_file_in_it_are_private() {
    let scratch = ScratchDir::new("private-data");
    let gateway = serve_in(scratch.path()).await;
    let data = scratch.path().join("switchyard-data");
    assert_eq!(mode(&data), 0o700, "the data directory");
    let record = format!("{RECORD_PREFIX}{}", gateway.pid());
    let expected =
        ["ledger.db", "ledger.db-wal", "ledger.db-shm", "instance.id", "session.key", "control.sock", record.as_str()];
    for name in expected {
        assert_eq!(mode(&data.join(name)), 0o600, "{name}");
    }
    for entry in std::fs::read_dir(&data).expect("the data directory") {
        let path = entry.expect("an entry").path();
        assert_eq!(mode(&path), 0o600, "every file the gateway created: {}", path.display());
    }
    let log = std::fs::read_to_string(scratch.path().join("gateway.log")).expect("the log");
    assert!(!log.contains("chmod 700"), "a private data directory is not warned about:\n{log}");
    gateway.kill().await;
}

#[tokio::test]
async fn an_existing_data_directory_open_to_others_is_warned_about_and_kept() {
    let scratch = ScratchDir::new("open-data");
    let data = scratch.path().join("switchyard-data");
    std::fs::create_dir(&data).expect("create");
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let gateway = serve_in(scratch.path()).await;
    let log = std::fs::read_to_string(scratch.path().join("gateway.log")).expect("the log");
    let warning = log.lines().find(|line| line.contains("the data directory is open to other users"));
    let warning = warning.unwrap_or_else(|| panic!("no warning in:\n{log}"));
    assert!(warning.contains("chmod 700 ./switchyard-data") && warning.contains("755"), "{warning}");
    assert_eq!(mode(&data), 0o755, "the operator's directory keeps its mode");
    assert_eq!(mode(&data.join("ledger.db")), 0o600, "the files created in it are private all the same");
    gateway.kill().await;
}
