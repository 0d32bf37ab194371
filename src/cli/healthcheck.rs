//! `switchyard healthcheck`: asks a gateway's `/healthz` whether it serves, for container and orchestrator health
//! checks that have no HTTP client of their own (the image holds this binary and its libraries only). Exit status
//! 0 on `200 OK`, else 1 with one sentence saying what was answered or why nothing was. Part of the binary's edge.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};

/// The address `serve` listens on by default, as an image's health check reaches it from inside.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8808/healthz";

/// Longer than `/healthz` ever takes on a live gateway, shorter than the usual health check timeout, so the
/// sentence, not the orchestrator's kill, reports a gateway that does not answer.
const TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(url: &str) -> anyhow::Result<ExitCode> {
    // A proxy from the environment must not stand between a health check and the gateway beside it.
    let client =
        reqwest::Client::builder().no_proxy().timeout(TIMEOUT).build().context("cannot build an HTTP client")?;
    let response = client.get(url).send().await.with_context(|| format!("no answer from {url}"))?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        bail!("{url} answered {status}, not 200 OK: the gateway is not healthy");
    }
    println!("{url}: ok");
    Ok(ExitCode::SUCCESS)
}
