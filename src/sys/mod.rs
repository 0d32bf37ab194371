//! The crate's only `unsafe` code: the few `libc` calls the standard library does not wrap (signals to a process
//! or a process group, the parent-death signal of a child), each behind a safe function, and a SQLite VFS
//! ([`sqlite_log`]).
//!
//! Rules: `unsafe_code` is denied everywhere else (`[lints]` in `Cargo.toml`); every `unsafe` block here says in a
//! `SAFETY` comment why it is sound; a function here checks nothing about policy (which process may be signalled
//! is the caller's rule) and imports no crate module.
#![allow(unsafe_code)]

pub mod sqlite_log;

/// Sends `signal` to the process `pid`; `pid` must be > 1 (0, -1 and 1 would reach our own group, every process
/// or init), otherwise nothing is sent. Whether it arrived is not reported: the callers poll for the result.
pub fn kill(pid: i32, signal: libc::c_int) {
    if pid > 1 {
        // SAFETY: kill only sends a signal and reads no memory of ours.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Sends `signal` to every process of the group `group`; `group` must be > 1, otherwise nothing is sent.
pub fn kill_group(group: libc::pid_t, signal: libc::c_int) {
    if group > 1 {
        // SAFETY: killpg only sends a signal and reads no memory of ours.
        unsafe {
            libc::killpg(group, signal);
        }
    }
}

/// Whether the process group `group` still has a member (signal 0 checks for existence only).
pub fn group_exists(group: libc::pid_t) -> bool {
    // SAFETY: signal 0 sends nothing; killpg reads no memory of ours.
    group > 1 && unsafe { libc::killpg(group, 0) } != -1
}

/// Makes the child `command` starts receive SIGKILL when the thread that started it (the gateway) dies, and
/// refuses to start it when the gateway `parent` has already died.
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut tokio::process::Command, parent: u32) {
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe calls are
    // allowed: it makes two system calls and builds an `io::Error` from a raw code (no allocation).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The gateway may have died before the line above; then no signal would ever come.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere there is no parent-death signal; the process groups still stop every child at shutdown.
#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut tokio::process::Command, _parent: u32) {}

/// Calls the tests need: resetting an inherited SIGTERM disposition, and network namespaces.
#[cfg(test)]
pub(crate) mod testing {
    use std::os::fd::RawFd;
    use std::os::unix::process::CommandExt;

    /// The child `command` starts takes SIGTERM's default action, whatever disposition the test runner had.
    pub(crate) fn default_sigterm(command: &mut std::process::Command) {
        // SAFETY: between fork and exec the closure makes one async-signal-safe call.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                Ok(())
            });
        }
    }

    /// Whether the tests run as root.
    pub(crate) fn is_root() -> bool {
        // SAFETY: geteuid cannot fail and reads no memory of ours.
        unsafe { libc::geteuid() == 0 }
    }

    /// Moves the calling thread into the network namespace open as `fd`; `true` on success.
    pub(crate) fn enter_network_namespace(fd: RawFd) -> bool {
        // SAFETY: setns reads only the descriptor number; a bad one is an error return, not undefined behaviour.
        unsafe { libc::setns(fd, libc::CLONE_NEWNET) == 0 }
    }
}
