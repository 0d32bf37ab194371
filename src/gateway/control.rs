//! The control socket: how `switchyard reload` reaches the running gateway and hears what the reload did or why
//! it was refused (the choice is argued in `docs/decisions.md`).
//!
//! Rules:
//! - A Unix socket, `control.sock` in the data directory, mode 0600 before it takes that name (it is bound under a
//!   temporary name first): only the gateway's own user (or root) can reach it, whatever the listen address;
//!   nothing on the network can, not even through a local proxy.
//! - One exchange per connection, in UTF-8 lines: the client writes `reload`, or `reload FILE` naming the
//!   configuration file it means (absolute); the gateway answers `applied` or `refused`, then a line saying who
//!   it is ([`Identity`]: its PID and the file it serves), then the text (what changed, or the error `switchyard
//!   check` prints), and closes. A `reload FILE` for another file than the gateway's is refused: two gateways may
//!   share a data directory only by mistake, and reloading the wrong one must not look like success.
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
/// The longest request line read (`reload` and a path).
pub const MAX_REQUEST: u64 = 4096 + 16;
/// How long a client may take to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest answer a client reads (an answer is a few lines).
const MAX_ANSWER: u64 = 1 << 20;
const APPLIED: &str = "applied";
const REFUSED: &str = "refused";

/// Which gateway answers on a socket: its process and the configuration file it serves (absolute; `None`: the
/// embedded demo of a first run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub pid: u32,
    pub config: Option<PathBuf>,
}

impl Identity {
    /// This process, serving `config` (made absolute, so a client's spelling of the same file matches).
    pub fn of_this_process(config: Option<&Path>) -> Identity {
        let config = config.map(|path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        Identity { pid: std::process::id(), config }
    }

    /// Whether this gateway serves `file` (`None`: the client named no file, so any gateway will do).
    fn serves(&self, file: Option<&str>) -> bool {
        file.is_none_or(|file| self.config.as_deref() == Some(Path::new(file)))
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.config {
            Some(path) => write!(f, "gateway PID {} serving {}", self.pid, path.display()),
            None => write!(f, "gateway PID {} serving no configuration file (the embedded demo)", self.pid),
        }
    }
}

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
pub(super) async fn serve(listener: UnixListener, reloader: Reloader, identity: Identity) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let (reloader, identity) = (reloader.clone(), identity.clone());
                tokio::spawn(async move {
                    if let Err(error) = answer(stream, &reloader, &identity).await {
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

async fn answer(stream: UnixStream, reloader: &Reloader, identity: &Identity) -> io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(reader).take(MAX_REQUEST);
    let read = reader.read_line(&mut line);
    let (status, text) = match tokio::time::timeout(REQUEST_TIMEOUT, read).await {
        Ok(Ok(_)) => match reload_request(line.trim_end()) {
            Some(file) if !identity.serves(file) => {
                let text = format!("this is not the gateway of {}; nothing was reloaded", file.unwrap_or_default());
                (REFUSED, text)
            }
            Some(_) => match reloader.reload().await {
                Ok(reloaded) => (APPLIED, reloaded.to_string()),
                Err(refused) => (REFUSED, refused.0),
            },
            None => (REFUSED, format!("this socket takes one request, `{RELOAD} [FILE]`; nothing was reloaded")),
        },
        Ok(Err(error)) => return Err(error),
        Err(_) => (REFUSED, "no request within the time allowed; nothing was reloaded".to_owned()),
    };
    writer.write_all(format!("{status}\n{identity}\n{text}\n").as_bytes()).await?;
    writer.shutdown().await
}

/// The file a reload request names (`Some(None)`: a plain `reload`); `None` for anything else.
fn reload_request(line: &str) -> Option<Option<&str>> {
    match line.split_once(' ') {
        None => (line == RELOAD).then_some(None),
        Some((verb, file)) => (verb == RELOAD && !file.is_empty()).then_some(Some(file)),
    }
}

/// What the running gateway answered; each text starts with the line saying which gateway it is ([`Identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// What the reload changed.
    Applied(String),
    /// Why it was refused (nothing changed).
    Refused(String),
}

/// Asks the gateway listening on `path` to reload, and waits for its answer (for `switchyard reload`). With
/// `config` (absolute), a gateway serving another file refuses.
pub async fn request_reload(path: &Path, config: Option<&Path>) -> io::Result<Answer> {
    let mut stream = UnixStream::connect(path).await?;
    let request = match config {
        Some(file) => format!("{RELOAD} {}\n", file.display()),
        None => format!("{RELOAD}\n"),
    };
    stream.write_all(request.as_bytes()).await?;
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
        let identity = Identity { pid: 7, config: Some(PathBuf::from("/etc/f.toml")) };
        tokio::spawn(serve(listener, reloader, identity));
        let worker = tokio::spawn(async move {
            let first = requests.recv().await.unwrap();
            first.send(Err(Refused("f.toml: bad".into()))).unwrap();
            let second = requests.recv().await.unwrap();
            let reloaded =
                Reloaded { file: "f.toml".into(), changes: vec!["policies changed".into()], needs_restart: vec![] };
            second.send(Ok(reloaded)).unwrap();
        });
        let who = "gateway PID 7 serving /etc/f.toml";
        let refused = request_reload(&path, None).await.unwrap();
        assert_eq!(refused, Answer::Refused(format!("{who}\nf.toml: bad")));
        let applied = request_reload(&path, Some(Path::new("/etc/f.toml"))).await.unwrap();
        assert_eq!(applied, Answer::Applied(format!("{who}\nreloaded f.toml:\n  policies changed")));
        worker.await.unwrap();
        let elsewhere = request_reload(&path, Some(Path::new("/srv/other.toml"))).await.unwrap();
        let refusal = format!("{who}\nthis is not the gateway of /srv/other.toml; nothing was reloaded");
        assert_eq!(elsewhere, Answer::Refused(refusal), "another file's gateway is never reloaded");

        let mut other = UnixStream::connect(&path).await.unwrap();
        other.write_all(b"shutdown\n").await.unwrap();
        let mut answer = String::new();
        other.read_to_string(&mut answer).await.unwrap();
        assert!(
            answer.starts_with("refused\ngateway PID 7 serving /etc/f.toml\nthis socket takes one request"),
            "{answer}"
        );
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
