//! Files private to the gateway's user: the data directory and what the gateway creates in it (the SQLite
//! ledger, `instance.id`, key files, the control socket, the record of stdio process groups).
//!
//! Rules:
//! - Directories the gateway creates are mode 0700, every level of them; files it creates are 0600, set when the
//!   file is created (never widened by the umask and narrowed later, so no moment exists when another user could
//!   open one). The process umask is never changed: it is process-wide, and other threads create files too.
//! - Existing directories and files keep their modes (an operator may have chosen them); `serve` warns about a
//!   data directory that others can reach ([`warn_if_exposed`]), naming the fix.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of the directories the gateway creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files the gateway creates.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents, each 0700; an existing directory is left as it is.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Creates the empty file `path` with mode 0600 unless it exists; returns whether it was created.
pub fn create_file(path: &Path) -> io::Result<bool> {
    match new_file(path) {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

/// Opens a new file at `path` for writing, mode 0600; fails if it exists.
pub fn new_file(path: &Path) -> io::Result<fs::File> {
    OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path)
}

/// Logs a warning when the existing directory `dir` can be entered or read by its group or others (its files
/// hold every principal's tool results and the gateway's keys). A missing directory is not warned about.
pub fn warn_if_exposed(dir: &Path) {
    let Ok(metadata) = fs::metadata(dir) else { return };
    let mode = metadata.permissions().mode() & 0o777;
    if exposed(mode) {
        let fix = format!("chmod 700 {}", dir.display());
        tracing::warn!(
            data_dir = %dir.display(),
            mode = %format!("{mode:03o}"),
            fix = %fix,
            "the data directory is open to other users (it holds the ledger's tool results and the gateway's keys); run `{fix}`"
        );
    }
}

/// Whether a directory of `mode` lets its group or others in.
fn exposed(mode: u32) -> bool {
    mode & 0o077 != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn created_directories_and_files_are_private_and_existing_files_are_kept() {
        let root = std::env::temp_dir().join(format!("switchyard-private-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let dir = root.join("a").join("b");
        create_dir(&dir).expect("created");
        assert_eq!((mode(&root), mode(&root.join("a")), mode(&dir)), (0o700, 0o700, 0o700));
        let file = dir.join("f");
        assert!(create_file(&file).expect("created"));
        assert_eq!(mode(&file), 0o600);
        fs::write(&file, b"kept").expect("write");
        assert!(!create_file(&file).expect("exists"), "an existing file is not created again");
        assert_eq!(fs::read(&file).expect("read"), b"kept", "nor truncated");
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn any_access_for_group_or_others_is_exposed() {
        assert!(!exposed(0o700));
        for mode in [0o755, 0o750, 0o711, 0o701, 0o770] {
            assert!(exposed(mode), "{mode:o}");
        }
    }
}
