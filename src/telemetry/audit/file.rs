//! The audit file: JSON lines appended to one file, rotated by size, with the chain picked up where the trail
//! left off.
//!
//! Rules:
//! - The file is opened for appending and created with mode 0600. A line is written whole (`write_all` of the
//!   line and its newline) and flushed when the queue runs dry, never `fsync`ed (like the access log).
//! - Before a line would take the file past `max_size`, the file is rotated: `PATH.(keep-1)` becomes `PATH.keep`,
//!   …, `PATH` becomes `PATH.1`, and the oldest beyond `keep` is deleted; the new `PATH` chains to the last line
//!   of `PATH.1`. A non-empty file always takes at least one line, so a line larger than `max_size` still goes out.
//! - At start the chain continues from the last line of `PATH` (or of `PATH.1` when `PATH` is empty or missing).
//!   A last line that is not an event (a write cut short) is refused: the operator verifies the file and moves it
//!   aside, rather than have the gateway hide the damage.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::chain::{Link, read_link};

/// How much of a file's end is read at first to find its last line (doubled until the line is whole).
const TAIL: u64 = 64 << 10;

/// Why the audit file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuditFileError {
    #[error("audit file {path}: {error}")]
    Io { path: String, error: io::Error },
    #[error(
        "audit file {path}: its last line is not an audit event (a write cut short?); check it with `switchyard audit \
         verify` and move the file aside"
    )]
    Damaged { path: String },
}

/// The open file and how to rotate it.
pub(super) struct FileSink {
    path: PathBuf,
    max_size: u64,
    keep: usize,
    out: BufWriter<File>,
    size: u64,
}

impl FileSink {
    /// Opens `path` for appending; the link is where its chain stands.
    pub(super) fn open(path: &Path, max_size: u64, keep: usize) -> Result<(FileSink, Link), AuditFileError> {
        let failed = |error| AuditFileError::Io { path: path.display().to_string(), error };
        let link = match last_link(path)? {
            Some(link) => link,
            None => last_link(&rotated(path, 1))?.unwrap_or_else(Link::genesis),
        };
        let file = open_append(path).map_err(failed)?;
        let size = file.metadata().map_err(failed)?.len();
        let mut sink = FileSink { path: path.to_owned(), max_size, keep, out: BufWriter::new(file), size };
        sink.end_last_line().map_err(failed)?;
        Ok((sink, link))
    }

    /// Appends `line` (rotating first when it would not fit).
    pub(super) fn write(&mut self, line: &str) -> io::Result<()> {
        let length = line.len() as u64 + 1;
        if self.size > 0 && self.size + length > self.max_size {
            self.rotate()?;
        }
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.size += length;
        Ok(())
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        match fs::remove_file(rotated(&self.path, self.keep)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        for index in (1..self.keep).rev() {
            match fs::rename(rotated(&self.path, index), rotated(&self.path, index + 1)) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        fs::rename(&self.path, rotated(&self.path, 1))?;
        self.out = BufWriter::new(open_append(&self.path)?);
        self.size = 0;
        Ok(())
    }

    /// A file cut short after a whole event but before its newline gets the newline.
    fn end_last_line(&mut self) -> io::Result<()> {
        if self.size == 0 {
            return Ok(());
        }
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::End(-1))?;
        let mut last = [0u8];
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            self.out.write_all(b"\n")?;
            self.size += 1;
        }
        Ok(())
    }
}

/// `PATH.index`.
pub(super) fn rotated(path: &Path, index: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{index}"));
    PathBuf::from(name)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().append(true).create(true).mode(0o600).open(path)
}

/// The link after the last line of `path`; `None` when it is missing or empty.
fn last_link(path: &Path) -> Result<Option<Link>, AuditFileError> {
    let shown = || path.display().to_string();
    let line = last_line(path).map_err(|error| AuditFileError::Io { path: shown(), error })?;
    let Some(line) = line else { return Ok(None) };
    match read_link(&line) {
        Some((seq, _)) => Ok(Some(Link::after(&line, seq))),
        None => Err(AuditFileError::Damaged { path: shown() }),
    }
}

/// The last non-empty line of `path`, reading only its end.
fn last_line(path: &Path) -> io::Result<Option<String>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let size = file.metadata()?.len();
    let mut window = TAIL;
    loop {
        let start = size.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut tail = Vec::new();
        Read::by_ref(&mut file).take(window).read_to_end(&mut tail)?;
        let text = String::from_utf8_lossy(&tail);
        let trimmed = text.trim_end_matches('\n');
        match trimmed.rfind('\n') {
            Some(at) => return Ok(Some(trimmed[at + 1..].to_owned())),
            None if start == 0 => return Ok((!trimmed.is_empty()).then(|| trimmed.to_owned())),
            None => window *= 2,
        }
    }
}
