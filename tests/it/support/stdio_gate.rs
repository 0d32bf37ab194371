//! The `gate` tool of `support/fault_stdio.py` from the test's side: a call that announces it runs (a line with
//! its process's PID in a log file) and answers only once the test releases it (a release file appears). Tests act
//! "while a call runs" by waiting for the announcement instead of sleeping.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::assert::eventually;
use crate::support::gateway::ScratchDir;

/// One gate's files, in a scratch directory of their own.
pub struct Gate {
    dir: ScratchDir,
}

impl Gate {
    pub fn new() -> Gate {
        Gate { dir: ScratchDir::new("gate") }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The `gate` tool's arguments.
    pub fn arguments(&self) -> Value {
        let path = |name: &str| self.file(name).display().to_string();
        json!({"log": path("gate.log"), "release": path("gate.release")})
    }

    /// The PIDs of the processes the calls ran in, one per call that reached its process.
    pub fn runs(&self) -> Vec<u32> {
        let log = std::fs::read_to_string(self.file("gate.log")).unwrap_or_default();
        log.lines().map(|line| line.parse().expect("a PID")).collect()
    }

    /// Waits until `calls` calls run in their processes.
    pub async fn wait_running(&self, calls: usize) {
        eventually(&format!("{calls} gate call(s) run"), || async { self.runs().len() >= calls }).await;
    }

    /// Lets every call answer (and every later one, at once).
    pub fn release(&self) {
        std::fs::write(self.file("gate.release"), "").expect("write the release file");
    }
}
