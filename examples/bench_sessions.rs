//! Opens many MCP agent sessions as fast as it can, for the session benchmark (`bench/gateway/sessions.sh`):
//! each session is `initialize`, `notifications/initialized` and one `tools/call` of an echo tool, so that
//! through the gateway each one also opens its backend session. Built with
//! `cargo build --release --example bench_sessions`; not part of the gateway.
//!
//!     bench_sessions URL TOOL COUNT [CONCURRENCY]      (SY_AUTHORIZATION: an Authorization header value)
//!
//! Prints `opened=COUNT seconds=S` once every session answered its call. Rules: every answer is checked (the
//! session id header, HTTP 202 for the notification, a JSON-RPC result echoing the text); the first failure
//! stops the run with a non-zero exit, because a benchmark of failures is worthless. `CONCURRENCY` workers (64 by
//! default) each open sessions one after another on their own keep-alive connection.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test, bench or example reports a failure by panicking")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

const TEXT: &str = "hello";

struct Target {
    client: reqwest::Client,
    url: String,
    tool: String,
    next: AtomicUsize,
    count: usize,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, tool, count, concurrency) = match args.as_slice() {
        [url, tool, count] => (url, tool, count.parse()?, 64),
        [url, tool, count, concurrency] => (url, tool, count.parse()?, concurrency.parse()?),
        _ => bail!("usage: bench_sessions URL TOOL COUNT [CONCURRENCY]"),
    };
    let client = reqwest::Client::builder().default_headers(headers()?).pool_max_idle_per_host(concurrency).build()?;
    let target = Arc::new(Target { client, url: url.clone(), tool: tool.clone(), next: AtomicUsize::new(0), count });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let started = Instant::now();
    runtime.block_on(async {
        let workers: Vec<_> = (0..concurrency).map(|_| tokio::spawn(worker(Arc::clone(&target)))).collect();
        for worker in workers {
            worker.await??;
        }
        anyhow::Ok(())
    })?;
    println!("opened={count} seconds={:.3}", started.elapsed().as_secs_f64());
    Ok(())
}

fn headers() -> anyhow::Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    headers.insert("mcp-protocol-version", HeaderValue::from_static("2025-11-25"));
    if let Ok(authorization) = std::env::var("SY_AUTHORIZATION")
        && !authorization.is_empty()
    {
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&authorization).context("SY_AUTHORIZATION")?);
    }
    Ok(headers)
}

async fn worker(target: Arc<Target>) -> anyhow::Result<()> {
    while target.next.fetch_add(1, Ordering::Relaxed) < target.count {
        open(&target).await?;
    }
    Ok(())
}

/// One session: the handshake, then one call.
async fn open(target: &Target) -> anyhow::Result<()> {
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-sessions","version":"0"}}}"#;
    let answer = target.client.post(&target.url).body(initialize).send().await?;
    let session = answer
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .with_context(|| format!("initialize answered {} without an mcp-session-id", answer.status()))?;
    answer.bytes().await?;

    let notified = target
        .client
        .post(&target.url)
        .header("mcp-session-id", &session)
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .send()
        .await?;
    if notified.status() != reqwest::StatusCode::ACCEPTED {
        bail!("notifications/initialized answered {}", notified.status());
    }
    notified.bytes().await?;

    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{}","arguments":{{"text":"{TEXT}"}}}}}}"#,
        target.tool
    );
    let answer = target.client.post(&target.url).header("mcp-session-id", &session).body(call).send().await?;
    let status = answer.status();
    let body = answer.text().await?;
    if status != reqwest::StatusCode::OK
        || !body.contains("\"result\"")
        || body.contains("\"isError\":true")
        || !body.contains(TEXT)
    {
        bail!("tools/call answered {status}: {body}");
    }
    Ok(())
}
