//! The control socket: how `switchyard reload` reaches the running gateway and hears what the reload did or why
//! it was refused (the choice is argued in `docs/decisions.md`).
//!
//! Rules:
//! - A Unix socket, `control.sock` in the data directory, mode 0600 before it takes that name (it is bound under a
//!   temporary name first): only the gateway's own user (or root) can reach it, whatever the listen address;
//!   nothing on the network can, not even through a local proxy.
//! - One exchange per connection, in UTF-8 lines: the client writes `reload`; the gateway answers `applied` or
//!   `refused`, then the text (what changed, or the error `switchyard check` prints), and closes.
//! - A request line is at most [`MAX_REQUEST`] bytes and must arrive within [`REQUEST_TIMEOUT`]; anything else
//!   is refused without reloading.
//! - At start an existing socket file is replaced only when no gateway answers on it (one left by a crash); a
//!   live one is left alone (this gateway then cannot be reached by `switchyard reload`; SIGHUP still reloads).
//!   The file is removed when the gateway stops.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::reload::Reloader;

/// The socket's file name in the data directory.
pub const SOCKET_FILE_NAME: &str = "control.sock";
/// The one request the socket takes.
pub const RELOAD: &str = "reload";
/// The longest request line read.
pub const MAX_REQUEST: u64 = 64;
/// How long a client may take to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest answer a client reads (an answer is a few lines).
const MAX_ANSWER: u64 = 1 << 20;
const APPLIED: &str = "applied";
const REFUSED: &str = "refused";

/// The control socket of the gateway whose data directory is `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET_FILE_NAME)
}

/// The socket's file, removed when dropped (the gateway stopped).
#[derive(Debug)]
pub struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Binds the control socket at `path` (see the module rules for an existing file).
pub(super) fn bind(path: &Path) -> io::Result<(UnixListener, SocketFile)> {
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(io::Error::new(io::ErrorKind::AddrInUse, "another running gateway answers on this socket"));
    }
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let unready = path.with_extension(format!("{}.new", std::process::id()));
    let _ = std::fs::remove_file(&unready);
    let listener = UnixListener::bind(&unready)?;
    let prepared = std::fs::set_permissions(&unready, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&unready, path));
    if let Err(error) = prepared {
        let _ = std::fs::remove_file(&unready);
        return Err(error);
    }
    Ok((listener, SocketFile(path.to_path_buf())))
}

/// Answers clients until aborted, each on its own task.
pub(super) async fn serve(listener: UnixListener, reloader: Reloader) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let reloader = reloader.clone();
                tokio::spawn(async move {
                    if let Err(error) = answer(stream, &reloader).await {
                        tracing::debug!(%error, "control socket: the client went away");
                    }
                });
            }
            Err(error) => {
                tracing::warn!(%error, "control socket: cannot accept; pausing");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer(stream: UnixStream, reloader: &Reloader) -> io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(reader).take(MAX_REQUEST);
    let read = reader.read_line(&mut line);
    let (status, text) = match tokio::time::timeout(REQUEST_TIMEOUT, read).await {
        Ok(Ok(_)) if line.trim_end() == RELOAD => match reloader.reload().await {
            Ok(reloaded) => (APPLIED, reloaded.to_string()),
            Err(refused) => (REFUSED, refused.0),
        },
        Ok(Ok(_)) => (REFUSED, format!("this socket takes one request, `{RELOAD}`; nothing was reloaded")),
        Ok(Err(error)) => return Err(error),
        Err(_) => (REFUSED, "no request within the time allowed; nothing was reloaded".to_owned()),
    };
    writer.write_all(format!("{status}\n{text}\n").as_bytes()).await?;
    writer.shutdown().await
}

/// What the running gateway answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// What the reload changed.
    Applied(String),
    /// Why it was refused (nothing changed).
    Refused(String),
}

/// Asks the gateway listening on `path` to reload, and waits for its answer (for `switchyard reload`).
pub async fn request_reload(path: &Path) -> io::Result<Answer> {
    let mut stream = UnixStream::connect(path).await?;
    stream.write_all(format!("{RELOAD}\n").as_bytes()).await?;
    let mut answer = String::new();
    stream.take(MAX_ANSWER).read_to_string(&mut answer).await?;
    let (status, text) = answer.split_once('\n').unwrap_or((answer.as_str(), ""));
    let text = text.trim_end().to_owned();
    match status {
        APPLIED => Ok(Answer::Applied(text)),
        REFUSED => Ok(Answer::Refused(text)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected answer {answer:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::reload::{Refused, Reloaded, channel};

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("switchyard-control-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn the_socket_carries_the_gateways_answer_and_only_the_reload_request() {
        let dir = scratch("answer");
        let path = socket_path(&dir);
        let (reloader, mut requests) = channel();
        let (listener, file) = bind(&path).expect("bind");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "only the gateway's user may connect");
        assert_eq!(bind(&path).err().map(|error| error.kind()), Some(io::ErrorKind::AddrInUse), "a live one stays");
        tokio::spawn(serve(listener, reloader));
        let worker = tokio::spawn(async move {
            let first = requests.recv().await.unwrap();
            first.send(Err(Refused("f.toml: bad".into()))).unwrap();
            let second = requests.recv().await.unwrap();
            let reloaded =
                Reloaded { file: "f.toml".into(), changes: vec!["policies changed".into()], needs_restart: vec![] };
            second.send(Ok(reloaded)).unwrap();
        });
        assert_eq!(request_reload(&path).await.unwrap(), Answer::Refused("f.toml: bad".into()));
        let applied = request_reload(&path).await.unwrap();
        assert_eq!(applied, Answer::Applied("reloaded f.toml:\n  policies changed".into()));
        worker.await.unwrap();

        let mut other = UnixStream::connect(&path).await.unwrap();
        other.write_all(b"shutdown\n").await.unwrap();
        let mut answer = String::new();
        other.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("refused\nthis socket takes one request"), "{answer}");
        drop(file);
        assert!(!path.exists(), "the file goes with the gateway");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_socket_file_nobody_answers_on_is_replaced() {
        let dir = scratch("stale");
        let path = socket_path(&dir);
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists(), "left behind, as by a crash");
        let (_listener, _file) = bind(&path).expect("a stale file is replaced");
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
