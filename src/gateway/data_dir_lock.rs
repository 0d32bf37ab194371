//! One running gateway per data directory (docs/operations.md, *The data directory*): `serve` holds an exclusive
//! advisory lock on `<data_dir>/gateway.lock` and writes its PID there, so a second gateway started on the same
//! directory is refused, naming the first one's PID, instead of sharing its instance id (and so its claims), its
//! control socket and its stdio process records.
//!
//! Rules: the lock is `flock`'s, which the kernel releases when the process ends however it ends (a SIGKILL
//! leaves no stale lock); the file itself stays, with the last holder's PID. Commands that only read the
//! ledger take no lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The lock file's name in the data directory.
pub const LOCK_FILE_NAME: &str = "gateway.lock";

/// Why the data directory could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum DataDirLockError {
    #[error(
        "the data directory {} is in use by another running gateway{}; stop it, or give this one its own \
         `[server] data_dir`",
        .path.display(),
        .pid.map(|pid| format!(" (PID {pid})")).unwrap_or_default()
    )]
    InUse { path: PathBuf, pid: Option<u32> },
    #[error("cannot lock {}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

/// The held lock; dropping it releases the directory.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the data directory `data_dir` (which exists) for this process.
pub fn lock(data_dir: &Path) -> Result<DataDirLock, DataDirLockError> {
    let path = data_dir.join(LOCK_FILE_NAME);
    let io = |source| DataDirLockError::Io { path: path.clone(), source };
    // Private like every file of the data directory (`private_files`).
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false).mode(0o600);
    let mut file = options.open(&path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let pid = file.read_to_string(&mut text).ok().and_then(|_| text.trim().parse().ok());
            return Err(DataDirLockError::InUse { path: data_dir.to_path_buf(), pid });
        }
        Err(TryLockError::Error(error)) => return Err(io(error)),
    }
    file.set_len(0).and_then(|()| file.rewind()).map_err(io)?;
    writeln!(file, "{}", std::process::id()).and_then(|()| file.flush()).map_err(io)?;
    Ok(DataDirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = std::env::temp_dir().join(format!("switchyard-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = lock(&dir).expect("the first takes it");
        match lock(&dir) {
            Err(DataDirLockError::InUse { pid, path }) => {
                assert_eq!((pid, path.as_path()), (Some(std::process::id()), dir.as_path()));
            }
            other => panic!("a second holder was not refused: {other:?}"),
        }
        let message = lock(&dir).unwrap_err().to_string();
        assert!(message.contains(&format!("(PID {})", std::process::id())), "{message}");
        drop(first);
        lock(&dir).expect("free again once the first let go");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
