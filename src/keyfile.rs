//! Secret key files in the data directory: read a fixed-length raw key, or create it with fresh random bytes,
//! readable by the owner only. Used for the backend token store's key (`<data_dir>/oauth-tokens.key`).
//!
//! Rules:
//! - A missing file is created exclusively (mode 0600, its directory 0700), so two processes starting at once
//!   agree on one key: the loser reads the winner's key, waiting briefly while it is still being written.
//! - A file of another length, or not a regular file, is refused before it is read (a wrong path is never
//!   mistaken for a key); a key readable by group or others is used but logged as a warning.
//! - The key is never printed (`Debug` of the error types names paths and lengths only).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a key file another process is writing may stay short.
const CREATION_PATIENCE: Duration = Duration::from_secs(2);

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read the key file {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot create the key file {}: {source}", .path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("the key file {} must hold exactly {expected} raw bytes, but holds {len}", .path.display())]
    WrongLength { path: PathBuf, expected: usize, len: u64 },
    #[error("the key file {} is not a regular file", .path.display())]
    NotAFile { path: PathBuf },
    #[error("the operating system's secure random source failed: {0}")]
    Random(getrandom::Error),
}

/// The key of `N` bytes in `path`, created if the file does not exist. Blocking; meant for startup.
pub fn load_or_create<const N: usize>(path: &Path) -> Result<[u8; N], KeyFileError> {
    let deadline = Instant::now() + CREATION_PATIENCE;
    loop {
        match read::<N>(path) {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => {
                if let Some(key) = create::<N>(path)? {
                    return Ok(key);
                }
            }
            // Another process created the file and is still writing it.
            Err(KeyFileError::WrongLength { len, .. }) if len < N as u64 && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(error),
        }
    }
}

fn read<const N: usize>(path: &Path) -> Result<Option<[u8; N]>, KeyFileError> {
    let failed = |source| KeyFileError::Read { path: path.to_path_buf(), source };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(failed(error)),
    };
    let metadata = file.metadata().map_err(failed)?;
    if !metadata.is_file() {
        return Err(KeyFileError::NotAFile { path: path.to_path_buf() });
    }
    if metadata.len() != N as u64 {
        return Err(KeyFileError::WrongLength { path: path.to_path_buf(), expected: N, len: metadata.len() });
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        let mode = format!("{mode:03o}");
        tracing::warn!(path = %path.display(), %mode, "a key file is readable by others; it should be mode 0600");
    }
    let mut key = [0u8; N];
    file.read_exact(&mut key).map_err(failed)?;
    Ok(Some(key))
}

/// Creates the file with a fresh key; `None` when another process created it first.
fn create<const N: usize>(path: &Path) -> Result<Option<[u8; N]>, KeyFileError> {
    let failed = |source| KeyFileError::Create { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        crate::private_files::create_dir(parent).map_err(failed)?;
    }
    let mut key = [0u8; N];
    getrandom::fill(&mut key).map_err(KeyFileError::Random)?;
    let mut file = match crate::private_files::new_file(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
        Err(error) => return Err(failed(error)),
    };
    if let Err(error) = file.write_all(&key).and_then(|()| file.sync_all()) {
        // A short file would fail every later start; the write error is what the operator needs to see.
        let _ = fs::remove_file(path);
        return Err(failed(error));
    }
    tracing::info!(path = %path.display(), "created a new key file");
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("switchyard-keyfile-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn creates_private_files_and_reads_them_back() {
        let dir = scratch("create");
        let path = dir.join("nested").join("k.key");
        let key = load_or_create::<32>(&path).expect("created");
        assert_eq!(fs::metadata(&path).expect("file").permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(path.parent().expect("dir")).expect("dir").permissions().mode() & 0o777, 0o700);
        assert_eq!(load_or_create::<32>(&path).expect("read"), key, "the same key on the next start");
        assert_ne!(key, [0u8; 32]);
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn wrong_files_are_refused_without_being_read() {
        let dir = scratch("wrong");
        fs::create_dir_all(&dir).expect("dir");
        let short = dir.join("short.key");
        fs::write(&short, b"secret").expect("write");
        let error = load_or_create::<32>(&short).expect_err("wrong length");
        assert!(matches!(error, KeyFileError::WrongLength { len: 6, expected: 32, .. }), "{error}");
        assert!(!error.to_string().contains("secret"));
        let error = load_or_create::<32>(&dir).expect_err("a directory");
        assert!(matches!(error, KeyFileError::NotAFile { .. }), "{error}");
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn concurrent_starts_agree_on_one_key() {
        let dir = scratch("race");
        let path = dir.join("k.key");
        let keys: Vec<[u8; 32]> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|_| scope.spawn(|| load_or_create::<32>(&path).expect("key"))).collect();
            handles.into_iter().map(|handle| handle.join().expect("thread")).collect()
        });
        assert!(keys.windows(2).all(|pair| pair[0] == pair[1]), "every process got the same key");
        let _ = fs::remove_dir_all(dir);
    }
}
