//! `switchyard healthcheck`: asks a gateway's `/healthz` whether it serves, for container and orchestrator health
//! checks that have no HTTP client of their own (the image holds this binary and its libraries only). Exit status
//! 0 on `200 OK`, else 1 with one sentence saying what was answered or why nothing was. Part of the binary's edge.
//!
//! An `https` URL is checked against the platform's roots, plus `--ca-cert` when given: the certificate that
//! issued the gateway's (or, self-signed, the gateway's own `tls_cert`). With `--ca-cert` the name in the
//! certificate is not compared with the URL's host, since the check asks the gateway beside it by address
//! (`127.0.0.1`), which a certificate for the gateway's public name does not list.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};

/// The address `serve` listens on by default, as an image's health check reaches it from inside.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8808/healthz";

/// Longer than `/healthz` ever takes on a live gateway, shorter than the usual health check timeout, so the
/// sentence, not the orchestrator's kill, reports a gateway that does not answer.
const TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(url: &str, ca_cert: Option<&Path>) -> anyhow::Result<ExitCode> {
    // A proxy from the environment must not stand between a health check and the gateway beside it.
    let mut builder = reqwest::Client::builder().no_proxy().timeout(TIMEOUT);
    if let Some(path) = ca_cert {
        let pem = std::fs::read(path).with_context(|| format!("cannot read --ca-cert {}", path.display()))?;
        let certificate = reqwest::Certificate::from_pem(&pem)
            .with_context(|| format!("--ca-cert {} is not a PEM certificate", path.display()))?;
        builder = builder.add_root_certificate(certificate).danger_accept_invalid_hostnames(true);
    }
    let client = builder.build().context("cannot build an HTTP client")?;
    let response = client.get(url).send().await.with_context(|| format!("no answer from {url}"))?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        bail!("{url} answered {status}, not 200 OK: the gateway is not healthy");
    }
    println!("{url}: ok");
    Ok(ExitCode::SUCCESS)
}
