//! What a stdio backend's processes may leave behind or cost, with the real `switchyard serve` binary: a
//! grandchild that ignores SIGTERM (`support/fault_stdio.py`'s `grandchild` tool) must not outlive the gateway —
//! neither a graceful shutdown (SIGTERM) nor, once the next gateway starts on the same data directory, a SIGKILL;
//! and a process that floods stderr gets a bounded share of the log. Every process a test starts is killed by its
//! pid when the test ends, whether it passed or not.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use switchyard::backend::stdio::{RECORD_PREFIX, STDERR_BURST, SUMMARY_EVERY};

use crate::stdio::{FAULT_SCRIPT, assert_gone, is_running, python};
use crate::support::assert::text;
use crate::support::gateway::{Agent, ChildGateway, ScratchDir};

/// Kills the process `pid` when dropped, if it is still the process that started at `start`.
struct Reaped {
    pid: u32,
    start: Option<u64>,
}

impl Reaped {
    fn new(pid: u32) -> Reaped {
        Reaped { pid, start: start_time(pid) }
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.start.is_some() && start_time(self.pid) == self.start {
            // SAFETY: kill only sends a signal, to the process this test started (its start time checked).
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

/// Field 22 of `/proc/<pid>/stat`, counted after the process name.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

struct Scene {
    dir: ScratchDir,
}

impl Scene {
    /// A gateway configuration with the stdio backend `f`: `support/fault_stdio.py`.
    fn new(tag: &str) -> Scene {
        let python = python().display().to_string();
        Scene::with_command(tag, &python, &[FAULT_SCRIPT, "normal"])
    }

    fn with_command(tag: &str, command: &str, args: &[&str]) -> Scene {
        let scene = Scene { dir: ScratchDir::new(tag) };
        let backend =
            format!("[[backends]]\nname = \"f\"\ntransport = \"stdio\"\ncommand = {command:?}\nargs = {args:?}\n");
        let data_dir = scene.data_dir().display().to_string();
        std::fs::write(scene.config(), format!("[server]\ndata_dir = {data_dir:?}\n{backend}")).expect("config");
        scene
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("switchyard.toml")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("gateway.log")
    }

    async fn gateway(&self) -> ChildGateway {
        ChildGateway::spawn(&self.config(), &self.log()).await
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }
}

/// Has the gateway start a stdio process that starts a grandchild; returns the grandchild, to be reaped, and the
/// stdio process's PID.
async fn grandchild_of(gateway: &ChildGateway) -> (Reaped, u32) {
    let mut agent = Agent::connected(gateway.mcp()).await;
    let reply = agent.call_tool("f__grandchild", json!({})).await;
    let grandchild = Reaped::new(text(&reply).parse().expect("a pid"));
    assert!(is_running(grandchild.pid), "the grandchild runs while the gateway does");
    let parent = text(&agent.call_tool("f__pid", json!({})).await).parse().expect("a pid");
    (grandchild, parent)
}

fn records(data_dir: &Path) -> Vec<String> {
    let names = std::fs::read_dir(data_dir)
        .expect("the data directory")
        .map(|entry| entry.expect("an entry").file_name().into_string().expect("a UTF-8 name"));
    names.filter(|name| name.starts_with(RECORD_PREFIX)).collect()
}

#[tokio::test]
async fn a_graceful_shutdown_stops_the_grandchildren() {
    let scene = Scene::new("groups-term");
    let gateway = scene.gateway().await;
    let (grandchild, _) = grandchild_of(&gateway).await;
    let status = gateway.terminate().await;
    assert!(status.success(), "{status}; log:\n{}", scene.log_text());
    assert!(!is_running(grandchild.pid), "the gateway exits only after its stdio process groups are stopped");
    assert!(records(&scene.data_dir()).is_empty(), "a clean stop leaves no record behind");
}

#[tokio::test]
async fn the_next_start_stops_what_a_killed_gateway_left_running() {
    let scene = Scene::new("groups-kill");
    let gateway = scene.gateway().await;
    let (grandchild, parent) = grandchild_of(&gateway).await;
    let killed = format!("{RECORD_PREFIX}{}", gateway.pid());
    gateway.kill().await;
    // The stdio process sees its stdin close and exits: the gateway's death has reached its processes.
    assert_gone(parent).await;
    assert!(is_running(grandchild.pid), "nothing stops a SIGKILLed gateway's grandchildren but the next start");
    assert_eq!(records(&scene.data_dir()), [killed], "the killed gateway's record is left");

    let next = scene.gateway().await;
    assert_gone(grandchild.pid).await;
    assert!(scene.log_text().contains("stopping stdio backend processes a crashed gateway left running"));
    assert_eq!(records(&scene.data_dir()), [format!("{RECORD_PREFIX}{}", next.pid())], "the stale record is gone");
    // A second gateway on the same data directory is refused, and leaves the running one's processes alone.
    let (survivor, _) = grandchild_of(&next).await;
    let mut second = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    second.args(["serve", "--listen", "127.0.0.1:0", "--config"]).arg(scene.config()).kill_on_drop(true);
    let refused = tokio::time::timeout(Duration::from_secs(20), second.output()).await.expect("it exits").unwrap();
    assert!(!refused.status.success(), "a second gateway on one data directory is refused");
    assert!(is_running(survivor.pid), "a running gateway's processes are not a crashed one's");
    assert_eq!(records(&scene.data_dir()), [format!("{RECORD_PREFIX}{}", next.pid())], "only the running one's");
    drop(next);
}

#[tokio::test]
async fn a_process_flooding_stderr_gets_a_bounded_share_of_the_log() {
    let flood = 20_000_000;
    let python = python().display().to_string();
    let script =
        format!("head -c {flood} /dev/zero | tr '\\0' e | fold -w 200 >&2; exec {python:?} {FAULT_SCRIPT:?} normal");
    let scene = Scene::with_command("stderr-flood", "/bin/sh", &["-c", &script]);
    let gateway = scene.gateway().await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let reply = agent.call_tool("f__echo", json!({"text": "after the flood"})).await;
    assert_eq!(reply["result"]["content"][0]["text"], "after the flood", "{reply}");
    let until = tokio::time::Instant::now() + SUMMARY_EVERY * 3;
    while !scene.log_text().contains("over the log budget") {
        assert!(tokio::time::Instant::now() < until, "no summary of the suppressed lines:\n{}", scene.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = scene.log_text();
    let logged = log.lines().filter(|line| line.contains("stderr: eeee")).count();
    assert!(logged > 0, "the first lines are logged");
    assert!(log.len() < 4 * STDERR_BURST as usize, "{} bytes of log for {flood} bytes of stderr", log.len());
    assert!(log.contains("suppressed "), "{log}");
}

#[tokio::test]
async fn check_and_tools_stop_the_processes_they_started() {
    let python = python().display().to_string();
    for command in ["check", "tools"] {
        let pid_dir = ScratchDir::new(command);
        let pid_file = pid_dir.path().join("grandchild.pid");
        let script = format!("sleep 600 & echo $! > {pid_file:?}; exec {python:?} {FAULT_SCRIPT:?} normal");
        let scene = Scene::with_command(command, "/bin/sh", &["-c", &script]);
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg(command)
            .arg("--config")
            .arg(scene.config())
            .env_remove("SWITCHYARD_DATA_DIR")
            .output()
            .await
            .expect("run switchyard");
        let grandchild =
            std::fs::read_to_string(&pid_file).ok().and_then(|pid| pid.trim().parse().ok()).map(Reaped::new);
        let grandchild = grandchild.unwrap_or_else(|| panic!("{command} started no process: {output:?}"));
        assert!(output.status.success(), "{command}: {output:?}");
        assert!(!is_running(grandchild.pid), "`switchyard {command}` left its stdio process group running");
    }
}
