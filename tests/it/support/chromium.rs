//! Headless Chromium (Debian's `chromium`) driven over the Chrome DevTools Protocol, for the browser tests (the
//! operator's console, a page of another origin calling `/mcp`): open a page, evaluate JavaScript in it, and collect every console error, uncaught exception and error
//! log entry (failed loads, CSP violations) the page produced.
//!
//! The browser runs with the flags the project uses everywhere (`--headless --no-sandbox --disable-gpu
//! --disable-background-networking --no-first-run`), a fresh profile in a scratch directory, and its DevTools
//! endpoint on 127.0.0.1 at a port it picks. It runs in its own process group, killed and reaped on drop. The
//! DevTools WebSocket is spoken by [`WebSocket`], a minimal RFC 6455 client (text frames, fragmentation, ping),
//! so no WebSocket or browser-automation crate is needed. Where the binary is: `SWITCHYARD_CHROMIUM`, else
//! `/usr/bin/chromium`; a missing browser skips the test, or fails it under `CI=true`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use super::gateway::ScratchDir;
use super::interop::skip_unless_ci;

/// How long the browser gets to start and open its DevTools endpoint.
const STARTUP: Duration = Duration::from_secs(30);
/// The most bytes one DevTools message may have (a full-page screenshot fits easily).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// The Chromium binary, or `None` (after a `SKIPPED:` line; a panic under `CI=true`) when it is not installed.
pub fn chromium() -> Option<PathBuf> {
    let path =
        std::env::var_os("SWITCHYARD_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.is_file() {
        return Some(path);
    }
    skip_unless_ci(&format!("chromium not found at {}", path.display()), "apt-get install chromium (.ci/run does)")
}

/// A running headless browser with one page attached over DevTools.
pub struct Browser {
    child: Child,
    _profile: ScratchDir,
    page: WebSocket,
    next_id: u64,
    /// Console errors, exceptions and error log entries seen so far, as DevTools reported them.
    problems: Vec<Value>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // The whole group: the browser's zygote, renderer and utility processes go too.
            // SAFETY: killpg only sends a signal to the browser's own group.
            unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.child.start_kill();
        let _ = self.child.try_wait();
    }
}

impl Browser {
    /// Starts the browser on `about:blank` and attaches to its page with the Runtime, Log and Page domains on.
    pub async fn launch(binary: &PathBuf) -> Browser {
        let profile = ScratchDir::new("chromium");
        let mut command = Command::new(binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-dev-shm-usage",
                "--disable-extensions",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1280,1700",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start chromium");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let endpoint = tokio::time::timeout(STARTUP, async {
            while let Ok(Some(line)) = lines.next_line().await {
                stderr.lock().unwrap().push(line.clone());
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    return Some(url.trim().to_owned());
                }
            }
            None
        })
        .await;
        let Ok(Some(browser_url)) = endpoint else {
            panic!("chromium did not open its DevTools endpoint; its stderr:\n{}", stderr.lock().unwrap().join("\n"));
        };
        // Keep draining stderr so the browser never blocks on a full pipe; the lines help when a test fails.
        let kept = Arc::clone(&stderr);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock().unwrap().push(line);
            }
        });
        let page_url = page_endpoint(&browser_url).await;
        let page = WebSocket::connect(&page_url).await;
        let mut browser = Browser { child, _profile: profile, page, next_id: 0, problems: Vec::new(), stderr };
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            browser.call(domain, json!({})).await;
        }
        browser
    }

    /// Sends one DevTools command and returns its `result`, recording the events that arrive meanwhile.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.page.send_text(&json!({"id": id, "method": method, "params": params}).to_string()).await;
        loop {
            let message: Value = serde_json::from_str(&self.page.receive_text().await).expect("DevTools sends JSON");
            if message["id"] == json!(id) {
                if let Some(error) = message.get("error") {
                    panic!("DevTools {method} failed: {error}");
                }
                return message["result"].clone();
            }
            self.record(message);
        }
    }

    fn record(&mut self, event: Value) {
        let problem = match event["method"].as_str() {
            Some("Runtime.consoleAPICalled") => matches!(event["params"]["type"].as_str(), Some("error" | "assert")),
            Some("Runtime.exceptionThrown") => true,
            Some("Log.entryAdded") => event["params"]["entry"]["level"] == "error",
            _ => false,
        };
        if problem {
            self.problems.push(event["params"].clone());
        }
    }

    /// Opens `url` in the page.
    pub async fn navigate(&mut self, url: &str) {
        let navigated = self.call("Page.navigate", json!({"url": url})).await;
        assert!(navigated.get("errorText").is_none(), "navigating to {url}: {navigated}");
    }

    /// Evaluates `expression` in the page and returns its value (promises awaited, results by value).
    pub async fn evaluate(&mut self, expression: &str) -> Value {
        let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
        let evaluated = self.call("Runtime.evaluate", params).await;
        if let Some(exception) = evaluated.get("exceptionDetails") {
            panic!("evaluating {expression:?} threw: {exception}");
        }
        evaluated["result"]["value"].clone()
    }

    /// Evaluates `expression` every 100 ms until `done` accepts its value (returned), or panics after `limit`.
    pub async fn wait_for(&mut self, expression: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let value = self.evaluate(expression).await;
            if done(&value) {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "the page never got there; last value: {value}; problems: {:?}; browser stderr:\n{}",
                self.problems,
                self.stderr.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A PNG of the page as it is shown now.
    pub async fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine;
        let shot = self.call("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true})).await;
        let data = shot["data"].as_str().expect("screenshot data");
        base64::engine::general_purpose::STANDARD.decode(data).expect("screenshot base64")
    }

    /// The console errors, uncaught exceptions and error log entries seen so far.
    pub fn problems(&self) -> &[Value] {
        &self.problems
    }
}

/// The WebSocket URL of the browser's first page, from its `/json/list` (the page may take a moment to appear).
async fn page_endpoint(browser_url: &str) -> String {
    let authority = browser_url.trim_start_matches("ws://").split('/').next().expect("host:port").to_owned();
    for _ in 0..100 {
        let listed = reqwest::get(format!("http://{authority}/json/list")).await.expect("DevTools /json/list");
        let targets: Value = serde_json::from_str(&listed.text().await.expect("DevTools targets")).expect("JSON");
        let page = targets.as_array().into_iter().flatten().find(|target| target["type"] == "page");
        if let Some(url) = page.and_then(|page| page["webSocketDebuggerUrl"].as_str()) {
            return url.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromium shows no page target at {authority}");
}

/// A minimal WebSocket client (RFC 6455) for DevTools on loopback: text messages both ways, masked as a client
/// must; fragments joined; pings answered.
pub struct WebSocket {
    stream: BufReader<TcpStream>,
}

impl WebSocket {
    pub async fn connect(url: &str) -> WebSocket {
        let rest = url.strip_prefix("ws://").expect("a ws:// URL");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut stream = BufReader::new(TcpStream::connect(authority).await.expect("connect to DevTools"));
        // The key is a fixed nonce: the server only echoes its digest, and this client talks to loopback only.
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: c3dpdGNoeWFyZC10ZXN0cw==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.get_mut().write_all(request.as_bytes()).await.expect("send the upgrade");
        let mut status = String::new();
        stream.read_line(&mut status).await.expect("the upgrade answer");
        assert!(status.starts_with("HTTP/1.1 101"), "DevTools refused the WebSocket upgrade: {status}");
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).await.expect("upgrade headers");
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        WebSocket { stream }
    }

    pub async fn send_text(&mut self, text: &str) {
        self.send_frame(0x1, text.as_bytes()).await;
    }

    async fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        let mask = [0x5a, 0x17, 0xc3, 0x9e];
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            length @ 0..=125 => frame.push(0x80 | length as u8),
            length @ 126..=0xffff => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(length as u16).to_be_bytes());
            }
            length => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(length as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(index, byte)| byte ^ mask[index % 4]));
        self.stream.get_mut().write_all(&frame).await.expect("send a WebSocket frame");
    }

    /// The next text message (fragments joined); pings are answered, pongs skipped; a close panics.
    pub async fn receive_text(&mut self) -> String {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.stream.read_exact(&mut head).await.expect("a WebSocket frame");
            let (fin, opcode, masked) = (head[0] & 0x80 != 0, head[0] & 0x0f, head[1] & 0x80 != 0);
            let length = match head[1] & 0x7f {
                126 => u64::from(self.stream.read_u16().await.expect("length")),
                127 => self.stream.read_u64().await.expect("length"),
                short => u64::from(short),
            };
            let length = usize::try_from(length).ok().filter(|length| *length <= MAX_MESSAGE).expect("a sane length");
            let mut mask = [0u8; 4];
            if masked {
                self.stream.read_exact(&mut mask).await.expect("mask");
            }
            let mut payload = vec![0u8; length];
            self.stream.read_exact(&mut payload).await.expect("payload");
            if masked {
                payload.iter_mut().enumerate().for_each(|(index, byte)| *byte ^= mask[index % 4]);
            }
            match opcode {
                // continuation, text, binary
                0x0..=0x2 => message.extend_from_slice(&payload),
                0x8 => panic!("DevTools closed the WebSocket"),
                0x9 => {
                    self.send_frame(0xA, &payload).await;
                    continue;
                }
                _ => continue,
            }
            assert!(message.len() <= MAX_MESSAGE, "a DevTools message over {MAX_MESSAGE} bytes");
            if fin {
                return String::from_utf8(message).expect("a UTF-8 text message");
            }
        }
    }
}
