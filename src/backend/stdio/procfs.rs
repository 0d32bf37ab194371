//! What `/proc` says about processes, for recognising a stdio backend's processes after the gateway that started
//! them is gone (proc(5): `/proc/<pid>/stat`, `/proc/<pid>/environ`, `/proc/sys/kernel/random/boot_id`).
//!
//! Rules: read only, never a signal; anything unreadable (no `/proc`, a process that ended meanwhile, another
//! user's process) is `None` or `false`, which the callers read as "not ours".

use std::fs;

/// What `/proc/<pid>/stat` says of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    pub(super) group: i32,
    /// Clock ticks after boot: with the boot id, it tells a process from a later one given the same pid.
    pub(super) start: u64,
    /// Ended, waiting to be reaped: nothing is left to stop.
    pub(super) zombie: bool,
}

/// The kernel's id of this boot (a process of an earlier boot cannot be running).
pub(super) fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned()).filter(|id| !id.is_empty())
}

/// The process `pid`'s group, start time and whether it is a zombie.
pub(super) fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The process ids in `/proc`.
pub(super) fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// Whether the environment the process `pid` was started with holds exactly `entry` (`NAME=value`).
pub(super) fn has_env(pid: i32, entry: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|byte| *byte == 0).any(|item| item == entry.as_bytes()))
}

/// Parses `pid (comm) state ppid pgrp … starttime …`; `comm` may hold spaces and parentheses, so the fields are
/// counted after its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is the first after the name; pgrp is field 5, starttime field 22.
    Some(Stat {
        zombie: matches!(*fields.first()?, "Z" | "X"),
        group: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_last_parenthesis() {
        let line =
            "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 10 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        assert_eq!(parse_stat(line), Some(Stat { group: 4240, start: 987_654, zombie: false }));
        let zombie = "7 (sleep) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55";
        assert_eq!(parse_stat(zombie), Some(Stat { group: 7, start: 55, zombie: true }));
        assert_eq!(parse_stat("7 (sleep) S 1 7"), None, "a short line is not guessed at");
    }

    #[test]
    fn this_process_is_found_with_its_environment() {
        let me = i32::try_from(std::process::id()).expect("a pid fits i32");
        let stat = stat(me).expect("our own stat");
        assert!(stat.start > 0 && !stat.zombie);
        assert!(pids().contains(&me));
        let path = std::env::var("PATH").expect("tests run with PATH");
        assert!(has_env(me, &format!("PATH={path}")));
        assert!(!has_env(me, "PATH=surely-not-this"));
        assert!(boot_id().is_some_and(|id| id.len() >= 32));
    }
}
