//! The gateway instance's owner id: the name its claims carry.
//!
//! Rules: the id must survive restarts, so [`super::LedgerStore::orphan`] can find the claims a crashed run left
//! in flight; it is kept in `<data_dir>/instance.id`, created on first use with `create_new` (mode 0600, the
//! directory 0700: [`crate::private_files`]) so two processes starting on one data directory agree on one id. Replicas sharing a PostgreSQL ledger each need their own data
//! directory (or their claims would be orphaned by each other's restarts). An instance whose data directory is
//! lost gets a new id; its old claims then become `unknown` when their leases expire.

use std::io::{ErrorKind, Write};
use std::path::Path;

use super::error::LedgerError;
use crate::hex;

/// The file, inside the data directory, that holds the instance id.
pub const INSTANCE_ID_FILE: &str = "instance.id";

/// Longest id read back from the file; anything longer was not written here.
const MAX_ID_LEN: usize = 128;

/// This instance's owner id, created on first use.
pub fn instance_id(data_dir: &Path) -> Result<String, LedgerError> {
    let path = data_dir.join(INSTANCE_ID_FILE);
    let unavailable = |error: std::io::Error| LedgerError::unavailable(format!("{}: {error}", path.display()));
    match read(&path) {
        Ok(Some(id)) => return Ok(id),
        Ok(None) => {}
        Err(error) => return Err(error),
    }
    crate::private_files::create_dir(data_dir).map_err(unavailable)?;
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| LedgerError::unavailable(format!("no randomness: {error}")))?;
    let id = format!("sy-{}", hex::encode(&bytes));
    match crate::private_files::new_file(&path) {
        Ok(mut file) => {
            file.write_all(format!("{id}\n").as_bytes()).and_then(|()| file.sync_all()).map_err(unavailable)?;
            Ok(id)
        }
        // Another process created it first: use its id.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            read(&path)?.ok_or_else(|| LedgerError::unavailable(format!("{} is empty", path.display())))
        }
        Err(error) => Err(unavailable(error)),
    }
}

/// The id in `path`; `None` when the file does not exist.
fn read(path: &Path) -> Result<Option<String>, LedgerError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let id = text.trim();
            let valid = !id.is_empty() && id.len() <= MAX_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic());
            if valid {
                Ok(Some(id.to_owned()))
            } else {
                Err(LedgerError::corrupt(format!("{} does not hold an instance id", path.display())))
            }
        }
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(LedgerError::unavailable(format!("{}: {error}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_id_is_created_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("switchyard-instance-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = instance_id(&dir).expect("created");
        assert!(first.starts_with("sy-") && first.len() == 19, "{first}");
        assert_eq!(instance_id(&dir).expect("read back"), first);
        let mode = |path: &Path| std::fs::metadata(path).expect("stat").permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&dir.join(INSTANCE_ID_FILE))), (0o700, 0o600), "private");
        std::fs::write(dir.join(INSTANCE_ID_FILE), "\n").expect("write");
        assert!(matches!(instance_id(&dir), Err(LedgerError::Corrupt { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
