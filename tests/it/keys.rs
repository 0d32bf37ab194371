//! API key lifecycle: a key with an expiry is refused from then on (counted as `expired_key`); `switchyard keys
//! list` shows the configured keys; `switchyard keys revoke` removes a key from the file, keeping its comments,
//! and the running gateway reloads and refuses it.

use reqwest::StatusCode;
use serde_json::json;

use crate::agent_auth::{ALICE_KEY, BOB_KEY};
use crate::cli::{run, scratch_dir, stdout, switchyard};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{ChildGateway, TestGateway, backend_toml};
use switchyard::auth::{api_key_digest, hex};

/// The status of an `initialize` sent to `mcp` with `key`.
async fn initialize_status(mcp: &str, key: &str) -> StatusCode {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "keys-test", "version": "1"}}});
    let response = reqwest::Client::new()
        .post(mcp)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string())
        .send()
        .await
        .expect("the gateway answers");
    response.status()
}

fn key_table(comment: &str, principal: &str, key: &str, expires: Option<&str>) -> String {
    let expires = expires.map(|at| format!("expires = \"{at}\"\n")).unwrap_or_default();
    format!(
        "# {comment}\n[[auth.api_keys]]\nprincipal = \"{principal}\"\nsha256 = \"{}\"\n{expires}\n",
        hex(&api_key_digest(key))
    )
}

#[tokio::test]
async fn an_expired_key_is_refused_and_counted_as_expired() {
    let fault = FaultBackend::start(Script::default()).await;
    let sections = "[auth]\n".to_owned()
        + &key_table("past", "alice", ALICE_KEY, Some("2020-01-01T00:00:00Z"))
        + &key_table("future", "bob", BOB_KEY, Some("2099-01-01T00:00:00+02:00"));
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    assert_eq!(initialize_status(&gateway.mcp(), ALICE_KEY).await, StatusCode::UNAUTHORIZED);
    assert_eq!(initialize_status(&gateway.mcp(), BOB_KEY).await, StatusCode::OK);
    let metrics = gateway.router.ledger().metrics.encode();
    assert!(metrics.contains("switchyard_auth_failures_total{reason=\"expired_key\"} 1"), "{metrics}");
}

#[tokio::test]
async fn keys_are_listed_and_a_revoked_key_is_refused_once_the_gateway_reloads() {
    let fault = FaultBackend::start(Script::default()).await;
    let dir = scratch_dir("keys-revoke");
    let config = dir.join("switchyard.toml");
    let text = format!(
        "# Switchyard for the keys test\n[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n[auth]\n{}{}{}",
        dir.join("data").display().to_string(),
        key_table("alice's laptop", "alice", ALICE_KEY, Some("2099-03-01T00:00:00Z")),
        key_table("bob's CI job", "bob", BOB_KEY, None),
        backend_toml("fault", &fault.url(), "")
    );
    std::fs::write(&config, &text).expect("write the configuration");
    let gateway = ChildGateway::spawn(&config, &dir.join("gateway.log")).await;
    assert_eq!(initialize_status(&gateway.mcp(), BOB_KEY).await, StatusCode::OK);

    let listed = stdout(&run(switchyard().args(["keys", "list", "--config"]).arg(&config)).await);
    let line = |principal: &str| listed.lines().find(|line| line.starts_with(principal)).unwrap_or_default().to_owned();
    let bob_prefix = &hex(&api_key_digest(BOB_KEY))[..12];
    assert!(line("alice").contains("2099-03-01") && line("alice").ends_with("active"), "{listed}");
    assert!(line("bob").contains(bob_prefix) && line("bob").contains("never"), "{listed}");

    let short = run(switchyard().args(["keys", "revoke", "--sha256", "abc", "--config"]).arg(&config)).await;
    assert!(!short.status.success() && String::from_utf8_lossy(&short.stderr).contains("at least 8 hex digits"));
    let nobody = run(switchyard().args(["keys", "revoke", "--principal", "carol", "--config"]).arg(&config)).await;
    assert!(!nobody.status.success() && String::from_utf8_lossy(&nobody.stderr).contains("no key"));
    assert_eq!(std::fs::read_to_string(&config).expect("read"), text, "a refused revoke changes nothing");

    let revoked = run(switchyard().args(["keys", "revoke", "--sha256", bob_prefix, "--config"]).arg(&config)).await;
    let said = stdout(&revoked);
    assert!(revoked.status.success(), "{said}\n{}", String::from_utf8_lossy(&revoked.stderr));
    assert!(said.contains("revoked the key of `bob`") && said.contains("reloaded"), "{said}");
    let edited = std::fs::read_to_string(&config).expect("read");
    assert_eq!(edited, text.replace(&key_table("", "bob", BOB_KEY, None)[2..], "\n\n"), "only bob's table went");
    assert!(edited.contains("# bob's CI job") && edited.contains("# Switchyard for the keys test"), "{edited}");
    assert_eq!(initialize_status(&gateway.mcp(), BOB_KEY).await, StatusCode::UNAUTHORIZED);
    assert_eq!(initialize_status(&gateway.mcp(), ALICE_KEY).await, StatusCode::OK);
}
