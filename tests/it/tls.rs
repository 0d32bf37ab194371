//! TLS on the gateway's listeners (`[server] tls_cert` / `tls_key`, `[telemetry] metrics_tls`): tools called over
//! https by a client trusting the test certificate (reqwest, and the official Python SDK), no plaintext answer on
//! the TLS port, a renewed certificate served after a reload, `switchyard healthcheck --ca-cert`, and each bad
//! file refused by `check`, `serve` and a reload with its name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::cli::{run, scratch_dir, stdout, switchyard};
use crate::real_clients::{Demo, PythonAgent};
use crate::support::gateway::{Agent, ChildGateway, TestGateway, test_certificate, trusting_client};
use crate::support::interop::python_interpreter;

/// `[server]` keys serving the certificate and key at these paths.
fn tls_keys(cert: &Path, key: &Path) -> String {
    format!("tls_cert = {:?}\ntls_key = {:?}\n", cert.display().to_string(), key.display().to_string())
}

/// A configuration file in `dir` whose `[server]` serves `cert` and `key`, with the demo backend at `url`.
fn write_config(dir: &Path, cert: &Path, key: &Path, url: &str) -> PathBuf {
    let path = dir.join("switchyard.toml");
    let data = dir.join("data").display().to_string();
    let text = format!(
        "[server]\ndata_dir = {data:?}\n{}[[backends]]\nname = \"demo\"\nurl = \"{url}\"\n",
        tls_keys(cert, key)
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether a client trusting only the test certificate `name` can read `/healthz` at `base`.
async fn trusted_by(name: &str, base: &str) -> bool {
    let client = trusting_client(&[name]);
    client.get(format!("{base}/healthz")).send().await.is_ok_and(|answer| answer.status().is_success())
}

/// An in-process gateway serving `tls-1` over https, with the demo backend (kept alive with it).
async fn https_gateway() -> (TestGateway, Demo) {
    let demo = Demo::start().await;
    let (cert, key) = test_certificate("tls-1");
    let backend = format!("[[backends]]\nname = \"demo\"\nurl = \"{}\"\n", demo.url());
    (TestGateway::start(&tls_keys(&cert, &key), &backend).await, demo)
}

#[tokio::test]
async fn tools_are_called_over_https_and_a_plaintext_request_gets_no_answer() {
    let (gateway, _demo) = https_gateway().await;
    assert!(gateway.base.starts_with("https://127.0.0.1:"), "{}", gateway.base);
    let mut agent = Agent::with_client(gateway.mcp(), trusting_client(&["tls-1"])).connect(json!({})).await;
    let answer = agent.call_tool("demo__echo", json!({"text": "over tls"})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "over tls", "{answer}");

    let plain = gateway.base.replacen("https://", "http://", 1);
    let refused = reqwest::Client::new().get(format!("{plain}/healthz")).send().await;
    assert!(refused.is_err(), "a plaintext request on the TLS port must not be answered: {refused:?}");
    assert!(!trusted_by("tls-2", &gateway.base).await, "a client that does not trust the certificate refuses it");
    assert!(trusted_by("tls-1", &gateway.base).await, "the TLS port still serves after a plaintext attempt");
}

#[tokio::test]
async fn the_metrics_listener_uses_the_certificate_only_when_asked() {
    let (cert, key) = test_certificate("tls-1");
    let server = tls_keys(&cert, &key);
    for metrics_tls in [true, false] {
        let telemetry = format!("[telemetry]\nmetrics_listen = \"127.0.0.1:0\"\nmetrics_tls = {metrics_tls}\n");
        let gateway = TestGateway::start_with(&server, &telemetry, "").await;
        let metrics = gateway.metrics_base.clone().expect("a metrics listener");
        assert_eq!(metrics.starts_with("https://"), metrics_tls, "{metrics}");
        let scraped = trusting_client(&["tls-1"]).get(format!("{metrics}/metrics")).send().await.unwrap();
        assert!(scraped.status().is_success(), "metrics_tls = {metrics_tls}: {}", scraped.status());
    }
}

#[tokio::test]
async fn a_reload_serves_the_renewed_certificate_and_refuses_a_mismatched_pair() {
    let demo = Demo::start().await;
    let dir = scratch_dir("tls-reload");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let install = |name: &str| {
        let (from_cert, from_key) = test_certificate(name);
        std::fs::copy(from_cert, &cert).unwrap();
        std::fs::copy(from_key, &key).unwrap();
    };
    install("tls-1");
    let config = write_config(&dir, &cert, &key, &demo.url());
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    assert!(gateway.base.starts_with("https://"), "the gateway announces https: {}", gateway.base);
    assert!(trusted_by("tls-1", &gateway.base).await);

    install("tls-2");
    let reloaded = run(switchyard().arg("reload").arg("--config").arg(&config)).await;
    assert!(reloaded.status.success(), "{}{}", stdout(&reloaded), String::from_utf8_lossy(&reloaded.stderr));
    assert!(stdout(&reloaded).contains("TLS certificate re-read"), "{}", stdout(&reloaded));
    assert!(trusted_by("tls-2", &gateway.base).await, "new connections get the renewed certificate");
    assert!(!trusted_by("tls-1", &gateway.base).await, "the old one is no longer served");

    std::fs::copy(test_certificate("tls-1").0, &cert).unwrap();
    let refused = run(switchyard().arg("reload").arg("--config").arg(&config)).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    let said = format!("{}{}", stdout(&refused), String::from_utf8_lossy(&refused.stderr));
    assert!(said.contains(&format!("the private key {} (`[server] tls_key`)", key.display())), "{said}");
    assert!(trusted_by("tls-2", &gateway.base).await, "a refused reload keeps the running certificate");

    let (ca, _) = test_certificate("tls-2");
    let url = format!("{}/healthz", gateway.base);
    let healthy = run(switchyard().args(["healthcheck", "--url", &url, "--ca-cert"]).arg(&ca)).await;
    assert!(healthy.status.success(), "{}", String::from_utf8_lossy(&healthy.stderr));
    let untrusted = run(switchyard().args(["healthcheck", "--url", &url])).await;
    assert_eq!(untrusted.status.code(), Some(1), "the platform's roots do not trust a test certificate");
    gateway.kill().await;
}

#[tokio::test]
async fn check_and_serve_refuse_each_bad_file_naming_it() {
    let dir = scratch_dir("tls-bad");
    let (cert, key) = test_certificate("tls-1");
    let (_, other_key) = test_certificate("tls-2");
    let missing = dir.join("missing.crt");
    let cases = [
        (missing.clone(), key.clone(), format!("cannot read {} (`[server] tls_cert`)", missing.display())),
        // A directory cannot be read as a file, whoever runs the test (root reads any mode).
        (cert.clone(), dir.clone(), format!("cannot read {} (`[server] tls_key`)", dir.display())),
        (key.clone(), key.clone(), format!("{} (`[server] tls_cert`) holds no certificate", key.display())),
        (
            cert.clone(),
            other_key.clone(),
            format!("the private key {} (`[server] tls_key`) cannot serve", other_key.display()),
        ),
    ];
    for (cert, key, expected) in cases {
        let config = write_config(&dir, &cert, &key, "http://127.0.0.1:9/mcp");
        let checked = run(switchyard().arg("check").arg("--config").arg(&config)).await;
        assert_eq!(checked.status.code(), Some(1), "{expected}");
        let error = String::from_utf8_lossy(&checked.stderr);
        assert!(error.contains(&expected), "check: {error}");
        let mut command = switchyard();
        command.arg("serve").arg("--config").arg(&config).args(["--listen", "127.0.0.1:0"]);
        let serve = run(&mut command);
        let served = tokio::time::timeout(Duration::from_secs(60), serve).await.expect("serve refuses, not serves");
        assert_eq!(served.status.code(), Some(1), "{expected}");
        let error = String::from_utf8_lossy(&served.stderr);
        assert!(error.contains(&expected), "serve: {error}");
    }
}

#[tokio::test]
async fn the_python_sdk_calls_tools_over_https() {
    let Some(python) = python_interpreter() else { return };
    let (gateway, _demo) = https_gateway().await;
    let trust = test_certificate("tls-1").0.display().to_string();
    let mut agent = PythonAgent::connect_env(&python, &gateway.mcp(), &[], &[("SSL_CERT_FILE", &trust)]).await;
    assert_eq!(agent.call_text("demo__echo", json!({"text": "python over tls"})).await, "python over tls");
    agent.quit().await;
}
