//! The stdio process groups a gateway runs: held in memory so shutdown stops every one of them, and recorded in a
//! file in the data directory so the next start stops those a crashed gateway left behind.
//!
//! Rules:
//! - Each gateway process records its groups in its own file, `stdio-groups.<pid>` (mode 0600): a header with the
//!   boot id and the gateway's pid and start time, then one line per group: its id, its leader's start time, and
//!   a random token the group's processes carry in their environment as [`GROUP_TOKEN_VAR`]. The file is
//!   rewritten (a new file renamed over it) whenever a group starts or ends, and removed when the registry is
//!   dropped. No fsync: the file only has to survive the gateway's process, not the machine — after a reboot
//!   nothing it names can be running.
//! - At start ([`ProcessGroups::recorded`]) every other `stdio-groups.*` file whose gateway is not running any
//!   more (a different boot, no such pid, or a pid now started at another time) is read; its leftover processes
//!   are stopped (SIGTERM, the grace period, SIGKILL) and the file removed. A file of a running gateway is left
//!   alone, so `switchyard check` or a second gateway on the same data directory stops nothing of anyone's.
//! - A leftover process is signalled only when all of these hold, so a recycled pid is never hit: the same boot;
//!   its process group is one the file names; it started no earlier than that group's leader; and its
//!   environment holds the group's token. (The leader itself is usually gone: it dies with the gateway by
//!   `PR_SET_PDEATHSIG`. Linux does not give a pid that is still a group's id to a new process, but once the last
//!   of the group has exited it may; the token is what a stranger in a recycled group cannot have.) Each process
//!   is signalled by its own pid, never the group, and is checked again before SIGKILL.
//! - A process caught inside `execve` shows an empty environment for that moment and is not recognised; a
//!   backend's helper that happens to be starting exactly when the gateway restarts may outlive the clean-up.
//! - Everything here is best effort and says so in the log: a record that cannot be written leaves the running
//!   gateway's shutdown as it is (the in-memory set), it only weakens the clean-up after a crash.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::{Instant, sleep};

use super::procfs::{self, Stat};
use crate::backend::duplex::Duplex;

/// The variable that carries a group's token into its processes' environment.
pub const GROUP_TOKEN_VAR: &str = "SWITCHYARD_STDIO_GROUP";
/// The record file's name in the data directory is this, then the gateway's pid.
pub const RECORD_PREFIX: &str = "stdio-groups.";
/// The record file's first line.
const RECORD_HEADER: &str = "switchyard stdio process groups 1";
/// How often the stopping of groups is checked on.
const POLL: Duration = Duration::from_millis(20);

/// The stdio process groups of one gateway.
pub struct ProcessGroups {
    /// Where they are recorded, and what the header says (`None`: not recorded, as for `switchyard check`).
    record: Option<Record>,
    live: Mutex<HashMap<i32, Group>>,
}

struct Record {
    path: PathBuf,
    header: String,
}

struct Group {
    leader_start: u64,
    token: String,
    session: Weak<Duplex>,
}

/// The token of one group, chosen before its leader starts.
pub(super) struct GroupToken(String);

impl GroupToken {
    pub(super) fn new() -> io::Result<GroupToken> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|error| io::Error::other(format!("no randomness: {error}")))?;
        Ok(GroupToken(crate::hex::encode(&bytes)))
    }

    /// The environment entry the group's processes get.
    pub(super) fn env(&self) -> (&'static str, &str) {
        (GROUP_TOKEN_VAR, &self.0)
    }
}

impl ProcessGroups {
    /// Groups kept in memory only (a gateway that only discovers).
    pub fn unrecorded() -> Arc<ProcessGroups> {
        Arc::new(ProcessGroups { record: None, live: Mutex::default() })
    }

    /// Stops what crashed gateways recorded in `data_dir` (waiting `grace` per step), then starts this
    /// gateway's own record there.
    pub async fn recorded(data_dir: &Path, grace: Duration) -> io::Result<Arc<ProcessGroups>> {
        let me = Gateway::this().ok_or_else(|| io::Error::other("cannot read this process's start time in /proc"))?;
        for (path, leftovers) in stale_records(data_dir, &me) {
            stop_leftovers(&path, &leftovers, grace).await;
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(record = %path.display(), %error, "cannot remove a crashed gateway's record of stdio process groups");
            }
        }
        let record = Record { path: data_dir.join(format!("{RECORD_PREFIX}{}", me.pid)), header: me.header() };
        record.write(&[])?;
        Ok(Arc::new(ProcessGroups { record: Some(record), live: Mutex::default() }))
    }

    /// Records the group led by `leader` (just started with `token`), whose session `session` stops it.
    pub(super) fn insert(&self, leader: u32, token: GroupToken, session: &Arc<Duplex>) {
        let Ok(group) = i32::try_from(leader) else { return };
        // The leader is our unreaped child, so its pid cannot have been given to anyone else yet.
        let leader_start = procfs::stat(group).map_or(0, |stat| stat.start);
        let mut live = self.live.lock();
        live.insert(group, Group { leader_start, token: token.0, session: Arc::downgrade(session) });
        self.save(&live);
    }

    /// Forgets the group led by `leader`, once it is stopped.
    pub(super) fn remove(&self, leader: u32) {
        let Ok(group) = i32::try_from(leader) else { return };
        let mut live = self.live.lock();
        if live.remove(&group).is_some() {
            self.save(&live);
        }
    }

    /// How many groups are running.
    pub fn len(&self) -> usize {
        self.live.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends every group's session — its process is then stopped as always: stdin closed, SIGTERM, SIGKILL to the
    /// group, `grace` apart — and waits until all are stopped, at most `within`.
    pub async fn stop_all(&self, within: Duration) {
        let sessions: Vec<Weak<Duplex>> = self.live.lock().values().map(|group| group.session.clone()).collect();
        if sessions.is_empty() {
            return;
        }
        tracing::info!(groups = sessions.len(), "stopping the stdio backend processes");
        for session in sessions.iter().filter_map(Weak::upgrade) {
            session.end("the gateway is shutting down".into());
        }
        let until = Instant::now() + within;
        while !self.is_empty() && Instant::now() < until {
            sleep(POLL).await;
        }
        if !self.is_empty() {
            tracing::warn!(groups = self.len(), "stdio backend processes were still stopping when the gateway exited");
        }
    }

    /// Rewrites the record (under the lock, so records are written in the order of the changes).
    fn save(&self, live: &HashMap<i32, Group>) {
        let Some(record) = &self.record else { return };
        let lines: Vec<String> =
            live.iter().map(|(id, group)| format!("group {id} {} {}", group.leader_start, group.token)).collect();
        if let Err(error) = record.write(&lines) {
            tracing::warn!(record = %record.path.display(), %error, "cannot record the stdio process groups; after a crash, the next start will not stop them");
        }
    }
}

impl Drop for ProcessGroups {
    fn drop(&mut self) {
        if let Some(record) = &self.record {
            let _ = fs::remove_file(&record.path);
        }
    }
}

impl Record {
    /// Writes the header and `lines` to a new private file and renames it over the record.
    fn write(&self, lines: &[String]) -> io::Result<()> {
        let mut fresh = self.path.clone().into_os_string();
        fresh.push(".new");
        let fresh = PathBuf::from(fresh);
        let _ = fs::remove_file(&fresh);
        let mut file = crate::private_files::new_file(&fresh)?;
        let mut text = format!("{}\n", self.header);
        lines.iter().for_each(|line| text.push_str(&format!("{line}\n")));
        file.write_all(text.as_bytes())?;
        fs::rename(&fresh, &self.path)
    }
}

/// A gateway process as its record's header names it.
#[derive(Debug, PartialEq, Eq)]
struct Gateway {
    boot: String,
    pid: i32,
    start: u64,
}

impl Gateway {
    fn this() -> Option<Gateway> {
        let pid = i32::try_from(std::process::id()).ok()?;
        Some(Gateway { boot: procfs::boot_id()?, pid, start: procfs::stat(pid)?.start })
    }

    fn header(&self) -> String {
        format!("{RECORD_HEADER}\nboot {}\ngateway {} {}", self.boot, self.pid, self.start)
    }

    /// Whether this gateway process is still running (on `boot`).
    fn running(&self, boot: &str) -> bool {
        self.boot == boot && procfs::stat(self.pid).is_some_and(|stat| stat.start == self.start && !stat.zombie)
    }
}

/// One recorded group.
#[derive(Debug, PartialEq, Eq)]
struct Leftover {
    group: i32,
    leader_start: u64,
    token: String,
}

impl Leftover {
    /// Whether the process `pid` (as `stat` says) belongs to this group (see the module rules).
    fn owns(&self, pid: i32, stat: &Stat) -> bool {
        stat.group == self.group
            && stat.start >= self.leader_start
            && !stat.zombie
            && procfs::has_env(pid, &format!("{GROUP_TOKEN_VAR}={}", self.token))
    }
}

/// Parses a record: its gateway and its groups (`None`: not a record this version wrote).
fn parse_record(text: &str) -> Option<(Gateway, Vec<Leftover>)> {
    let mut lines = text.lines();
    (lines.next()? == RECORD_HEADER).then_some(())?;
    let boot = lines.next()?.strip_prefix("boot ")?.to_owned();
    let (pid, start) = lines.next()?.strip_prefix("gateway ")?.split_once(' ')?;
    let gateway = Gateway { boot, pid: pid.parse().ok()?, start: start.parse().ok()? };
    let groups = lines
        .map(|line| {
            let mut words = line.strip_prefix("group ")?.split(' ');
            let (group, leader_start, token) = (words.next()?, words.next()?, words.next()?);
            Some(Leftover { group: group.parse().ok()?, leader_start: leader_start.parse().ok()?, token: token.into() })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((gateway, groups))
}

/// The records in `data_dir` of gateways not running any more, with the groups to stop (none when the record is
/// of an earlier boot, or unreadable: it is removed all the same).
fn stale_records(data_dir: &Path, me: &Gateway) -> Vec<(PathBuf, Vec<Leftover>)> {
    let Ok(entries) = fs::read_dir(data_dir) else { return Vec::new() };
    let records = entries.filter_map(|entry| {
        let path = entry.ok()?.path();
        let name = path.file_name()?.to_str()?;
        name.strip_prefix(RECORD_PREFIX)?.parse::<u32>().ok()?;
        Some(path)
    });
    let mut stale = Vec::new();
    for path in records {
        let Some((gateway, groups)) = fs::read_to_string(&path).ok().as_deref().and_then(parse_record) else {
            tracing::warn!(record = %path.display(), "removing an unreadable record of stdio process groups");
            stale.push((path, Vec::new()));
            continue;
        };
        if gateway == *me || gateway.running(&me.boot) {
            continue;
        }
        let leftovers = if gateway.boot == me.boot { groups } else { Vec::new() };
        stale.push((path, leftovers));
    }
    stale
}

/// Stops the processes of `leftovers` (SIGTERM, `grace`, SIGKILL to those still there).
async fn stop_leftovers(record: &Path, leftovers: &[Leftover], grace: Duration) {
    let victims: Vec<(i32, u64)> = procfs::pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = procfs::stat(pid)?;
            leftovers.iter().any(|group| group.owns(pid, &stat)).then_some((pid, stat.start))
        })
        .collect();
    if victims.is_empty() {
        return;
    }
    let pids: Vec<String> = victims.iter().map(|(pid, _)| pid.to_string()).collect();
    tracing::warn!(record = %record.display(), pids = %pids.join(" "), "stopping stdio backend processes a crashed gateway left running");
    let still_there = || victims.iter().filter(|(pid, start)| same_process(*pid, *start)).map(|(pid, _)| *pid);
    still_there().for_each(|pid| signal(pid, libc::SIGTERM));
    let until = Instant::now() + grace;
    while still_there().next().is_some() && Instant::now() < until {
        sleep(POLL).await;
    }
    still_there().for_each(|pid| signal(pid, libc::SIGKILL));
}

/// Whether `pid` is still the running process that started at `start`.
fn same_process(pid: i32, start: u64) -> bool {
    procfs::stat(pid).is_some_and(|stat| stat.start == start && !stat.zombie)
}

/// `pid` was checked to be one of the recorded group's processes.
fn signal(pid: i32, signal: libc::c_int) {
    crate::sys::kill(pid, signal);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    #[test]
    fn records_are_read_back_and_anything_else_is_refused() {
        let me = Gateway { boot: "b".into(), pid: 7, start: 99 };
        let text = format!("{}\ngroup 12 345 abc\ngroup 13 346 def\n", me.header());
        let (gateway, groups) = parse_record(&text).expect("a record");
        assert_eq!(gateway, me);
        assert_eq!(groups[1], Leftover { group: 13, leader_start: 346, token: "def".into() });
        assert_eq!(groups.len(), 2);
        assert!(parse_record(&format!("{}\ngroup 12 x abc\n", me.header())).is_none());
        assert!(parse_record("switchyard stdio process groups 2\nboot b\ngateway 7 99\n").is_none());
        assert!(parse_record("").is_none());
    }

    #[tokio::test]
    async fn only_a_process_with_the_group_token_is_owned_and_stopped() {
        let mut command = std::process::Command::new("sleep");
        command.arg("30").env(GROUP_TOKEN_VAR, "tok").process_group(0);
        // The test runner may have been started with SIGTERM ignored, which `sleep` would inherit; what is under
        // test is the order of the signals, so the child takes SIGTERM's default action.
        crate::sys::testing::default_sigterm(&mut command);
        let mut child = command.spawn().expect("spawn sleep");
        let pid = i32::try_from(child.id()).expect("a pid fits i32");
        // `spawn` returns once the exec has begun, but the kernel publishes the new environment a moment later: until
        // then `/proc/<pid>/environ` reads empty. Ownership is judged on a process that has started.
        let started = Instant::now() + Duration::from_secs(10);
        while fs::read(format!("/proc/{pid}/environ")).map_or(true, |environ| environ.is_empty()) {
            assert!(Instant::now() < started, "sleep's environment never appeared in /proc");
            sleep(Duration::from_millis(5)).await;
        }
        let stat = procfs::stat(pid).expect("the child's stat");
        assert_eq!(stat.group, pid, "it leads its own group");
        let group = |token: &str, leader_start| Leftover { group: pid, leader_start, token: token.into() };
        assert!(group("tok", stat.start).owns(pid, &stat));
        assert!(!group("other", stat.start).owns(pid, &stat), "another group's token");
        assert!(!group("tok", stat.start + 1).owns(pid, &stat), "started before the group's leader");
        assert!(!Leftover { group: pid + 1, ..group("tok", 0) }.owns(pid, &stat), "another group");
        stop_leftovers(Path::new("test"), &[group("other", 0)], Duration::from_millis(50)).await;
        assert!(same_process(pid, stat.start), "a stranger is left alone");
        stop_leftovers(Path::new("test"), &[group("tok", stat.start)], Duration::from_secs(2)).await;
        let status = child.wait().expect("reap");
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGTERM), "{status:?}");
    }

    #[tokio::test]
    async fn records_of_running_gateways_are_kept_and_stale_ones_removed() {
        let dir = std::env::temp_dir().join(format!("switchyard-groups-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        crate::private_files::create_dir(&dir).expect("dir");
        let me = Gateway::this().expect("our own /proc entry");
        // A running gateway's record (init, at its start time), a dead one's (init's pid, another start time), one
        // of an earlier boot, and one this version did not write.
        let init = Gateway { pid: 1, start: procfs::stat(1).expect("init").start, boot: me.boot.clone() };
        let dead = Gateway { boot: me.boot.clone(), pid: 1, start: init.start + 1 };
        let older_boot = Gateway { boot: "another boot".into(), pid: me.pid, start: me.start };
        for (name, gateway) in [("1", &init), ("2", &dead), ("3", &older_boot)] {
            let text = format!("{}\ngroup 999999 0 token\n", gateway.header());
            fs::write(dir.join(format!("{RECORD_PREFIX}{name}")), text).expect("write");
        }
        fs::write(dir.join(format!("{RECORD_PREFIX}4")), "garbage").expect("write");
        let groups = ProcessGroups::recorded(&dir, Duration::from_millis(10)).await.expect("recorded");
        let mut left: Vec<String> = fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        left.sort();
        assert_eq!(left, [format!("{RECORD_PREFIX}1"), format!("{RECORD_PREFIX}{}", me.pid)]);
        let own = dir.join(format!("{RECORD_PREFIX}{}", me.pid));
        assert_eq!(fs::metadata(&own).expect("stat").permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_to_string(&own).expect("read"), format!("{}\n", me.header()));
        drop(groups);
        assert!(!own.exists(), "a registry that stops cleanly leaves no record");
        let _ = fs::remove_dir_all(dir);
    }
}
