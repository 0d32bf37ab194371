//! The session key: the secret that signs agent session ids, and the file it lives in (design §6).
//!
//! Rules: the key is exactly [`SECRET_LEN`] raw bytes from the operating system's secure random source; its file
//! is created exclusively with mode 0600 (directories 0700), so two processes starting at once agree on one key;
//! a file of another length, or not a regular file, is refused before a byte is read; a key readable by group or
//! others is used but warned about (whoever reads it can mint session ids for any principal). The key never
//! appears in `Debug` output.

use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{RandomUnavailable, random_bytes};

/// The length of the session key, in bytes.
pub const SECRET_LEN: usize = 32;
/// How long a process that lost the race to create the key file waits for the winner to finish writing it.
const RACE_PATIENCE: Duration = Duration::from_secs(1);
const RACE_POLL: Duration = Duration::from_millis(20);

/// Why the session key could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot read the session key file {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot create the session key file {}: {source}", .path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("the session key file {} must hold exactly {SECRET_LEN} raw bytes, but holds {len}", .path.display())]
    WrongLength { path: PathBuf, len: u64 },
    #[error("the session key file {} is not a regular file", .path.display())]
    NotAFile { path: PathBuf },
    #[error(transparent)]
    Random(#[from] RandomUnavailable),
}

/// The key that signs session ids. Every replica that must accept a session id holds the same key.
pub struct SessionSecret([u8; SECRET_LEN]);

impl fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl SessionSecret {
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(bytes)
    }

    /// Reads the key from `path` (exactly [`SECRET_LEN`] raw bytes), or creates the file with fresh random bytes
    /// and mode 0600 when it does not exist. Two processes starting at once agree on one key: the file is created
    /// exclusively, and the loser reads the winner's key. Blocking; meant for startup.
    pub fn load_or_create(path: &Path) -> Result<Self, SessionError> {
        if let Some(key) = read_key(path)? {
            return Ok(Self(key));
        }
        match create_key(path)? {
            Some(key) => Ok(Self(key)),
            None => read_key_after_race(path).map(Self),
        }
    }

    /// The raw key, for the sealer's MAC.
    pub(super) fn bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }
}

/// The key in `path`, or `None` when there is no such file.
fn read_key(path: &Path) -> Result<Option<[u8; SECRET_LEN]>, SessionError> {
    let read_error = |source| SessionError::Read { path: path.to_path_buf(), source };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(read_error(error)),
    };
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(SessionError::NotAFile { path: path.to_path_buf() });
    }
    // Checked before reading, so a wrong path (a log file, say) is refused without being read.
    if metadata.len() != SECRET_LEN as u64 {
        return Err(SessionError::WrongLength { path: path.to_path_buf(), len: metadata.len() });
    }
    warn_if_shared(path, &metadata);
    let mut key = [0u8; SECRET_LEN];
    file.read_exact(&mut key).map_err(read_error)?;
    Ok(Some(key))
}

/// Reads a key file another process has just created: it may still be shorter than a key for a moment.
fn read_key_after_race(path: &Path) -> Result<[u8; SECRET_LEN], SessionError> {
    let deadline = Instant::now() + RACE_PATIENCE;
    loop {
        match read_key(path) {
            Ok(Some(key)) => return Ok(key),
            Err(SessionError::WrongLength { len, .. }) if len < SECRET_LEN as u64 && Instant::now() < deadline => {
                std::thread::sleep(RACE_POLL);
            }
            // The creator failed to write its key and removed the file again.
            Ok(None) => {
                let source = io::Error::new(io::ErrorKind::NotFound, "the file vanished while being created");
                return Err(SessionError::Read { path: path.to_path_buf(), source });
            }
            Err(error) => return Err(error),
        }
    }
}

/// Creates the key file with a fresh key, or returns `None` when another process created it first.
fn create_key(path: &Path) -> Result<Option<[u8; SECRET_LEN]>, SessionError> {
    let create_error = |source| SessionError::Create { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        private_dir_builder().create(parent).map_err(create_error)?;
    }
    let key = random_bytes::<SECRET_LEN>()?;
    let mut file = match private_create_new().open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
        Err(error) => return Err(create_error(error)),
    };
    if let Err(error) = file.write_all(&key).and_then(|()| file.sync_all()) {
        // A short key file left behind would make every later start fail; removing it is best effort, the write
        // error is what the operator needs to see.
        let _ = fs::remove_file(path);
        return Err(create_error(error));
    }
    tracing::info!(path = %path.display(), "created a new session key file");
    Ok(Some(key))
}

/// Options that create a new file, failing if it exists, readable by its owner only.
fn private_create_new() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Directories the gateway creates for its key are its own.
fn private_dir_builder() -> fs::DirBuilder {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
}

/// Whoever can read the key can mint session ids for any principal; say so when others can.
#[cfg_attr(not(unix), allow(unused_variables))]
fn warn_if_shared(path: &Path, metadata: &Metadata) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = %format!("{mode:03o}"),
                "the session key file is accessible to group or others; it should be mode 0600"
            );
        }
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
