//! Revocations that hold, end to end: a deleted session id stays refused (404) until
//! the session would have expired — when the list is full (`server.max_revocations`, kept small here), across a
//! restart on SQLite, and on another replica sharing a PostgreSQL ledger — and a full list refuses new deletions
//! and new sessions (503, a JSON-RPC error naming the bound, `Retry-After`) instead of forgetting old deletions;
//! a deletion the ledger cannot record is refused and changes nothing; one client that fills its share of the
//! list (`server.max_revocations_per_owner`) is refused alone, and other principals still open sessions.
//! PostgreSQL tests use a schema of their own and are skipped (loudly) when PostgreSQL is unreachable outside CI,
//! like the at-most-once suite's.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::agent_auth::{ALICE_KEY, api_keys};
use crate::at_most_once::ledger_section;
use crate::support::assert::eventually_within;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, SESSION, ScratchDir, TestGateway, backend_toml, wait_ready};
use crate::support::pg_proxy::TcpProxy;
use crate::support::postgres::{self, PgSchema};

/// How long another replica may take to hear of a deletion (PostgreSQL `NOTIFY`; normally milliseconds).
const PROPAGATION_BOUND: Duration = Duration::from_secs(10);

/// The status of a `ping` sent with session `id` to `url`.
async fn ping_status(url: &str, id: &str) -> StatusCode {
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(SESSION, id)
        .body(ping.to_string())
        .send()
        .await
        .expect("gateway reachable");
    response.status()
}

/// `DELETE` of session `id` at `url`: the status, the `Retry-After` header and the body.
async fn delete(url: &str, id: &str) -> (StatusCode, Option<String>, Value) {
    delete_as(url, id, None).await
}

/// [`delete`], presenting API key `key` when there is one.
async fn delete_as(url: &str, id: &str, key: Option<&str>) -> (StatusCode, Option<String>, Value) {
    let request = reqwest::Client::new().delete(url).header(SESSION, id);
    let request = match key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    let response = request.send().await.expect("gateway reachable");
    let status = response.status();
    let retry_after = response.headers().get("retry-after").map(|value| value.to_str().unwrap().to_owned());
    let body = response.text().await.unwrap_or_default();
    (status, retry_after, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn session_of(agent: &Agent) -> String {
    agent.session.clone().expect("a session")
}

/// A gateway in front of a fault backend with these `[server]` keys and extra sections.
async fn gateway(server: &str, sections: &str, backend: &FaultBackend) -> TestGateway {
    TestGateway::start_with(server, sections, &backend_toml("fault", &backend.url(), "")).await
}

/// The old list dropped the soonest-expiring deletions once it held `capacity` of them, and those sessions came
/// back to life. Now the deletion that would overflow the list is refused, as is every new session, and every
/// recorded deletion holds. (One owner's share is the whole list here, so one client can fill it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_list_refuses_instead_of_reviving_deleted_sessions() {
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway("max_revocations = 2\nmax_revocations_per_owner = 2", "", &backend).await;
    let mut agents = Vec::new();
    for _ in 0..3 {
        agents.push(Agent::connected(gateway.mcp()).await);
    }
    let ids: Vec<String> = agents.iter().map(session_of).collect();
    for id in &ids[..2] {
        assert_eq!(delete(&gateway.mcp(), id).await.0, StatusCode::OK);
    }

    let (status, retry_after, body) = delete(&gateway.mcp(), &ids[2]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not deleted") && message.contains("server.max_revocations"), "{body}");
    let retry_after: u64 = retry_after.expect("Retry-After").parse().expect("whole seconds");
    assert!(retry_after > 0, "{retry_after}");

    for id in &ids[..2] {
        assert_eq!(ping_status(&gateway.mcp(), id).await, StatusCode::NOT_FOUND, "a deleted session stays deleted");
    }
    assert_eq!(ping_status(&gateway.mcp(), &ids[2]).await, StatusCode::OK, "the refused deletion changed nothing");

    let mut newcomer = Agent::new(gateway.mcp());
    let refused = newcomer.initialize("2025-11-25").await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.raw);
    assert!(newcomer.session.is_none(), "no session id is handed out");
    let body = refused.body.expect("a JSON-RPC error body");
    assert_eq!(body["id"], json!(0), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot start a session") && message.contains("server.max_revocations"), "{body}");
    assert!(refused.headers.contains_key("retry-after"));
}

/// One anonymous client opening and deleting sessions in a loop used to fill the whole list, after which every
/// `initialize`, anyone's, was refused until the entries expired (a day by default). Now it fills only its share
/// (a quarter of the list by default): its own next session and deletion are refused, saying so, while another
/// principal still opens and deletes sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_filling_its_share_blocks_only_itself() {
    let backend = FaultBackend::start(Script::default()).await;
    let sections = format!("[auth]\nanonymous = true\n{}", api_keys());
    let gateway = gateway("max_revocations = 8", &sections, &backend).await;
    let kept = session_of(&Agent::connected(gateway.mcp()).await);
    let mut deleted = 0;
    let refused = loop {
        assert!(deleted <= 8, "never refused: the share does not hold");
        let mut agent = Agent::new(gateway.mcp());
        let reply = agent.initialize("2025-11-25").await;
        if reply.status != StatusCode::OK {
            break reply;
        }
        assert_eq!(delete(&gateway.mcp(), &session_of(&agent)).await.0, StatusCode::OK);
        deleted += 1;
    };
    assert_eq!(deleted, 2, "a quarter of max_revocations = 8");
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.raw);
    let message = refused.raw.as_str();
    assert!(message.contains("cannot start a session") && message.contains("max_revocations_per_owner"), "{message}");
    assert!(message.contains("anonymous@127.0.0.1"), "it names whose share is full: {message}");
    assert!(refused.headers.contains_key("retry-after"));

    let (status, retry_after, body) = delete(&gateway.mcp(), &kept).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not deleted") && message.contains("server.max_revocations_per_owner"), "{body}");
    assert!(retry_after.expect("Retry-After").parse::<u64>().expect("whole seconds") > 0);
    assert_eq!(ping_status(&gateway.mcp(), &kept).await, StatusCode::OK, "the refused deletion changed nothing");

    let alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let (status, _, body) = delete_as(&gateway.mcp(), &session_of(&alice), Some(ALICE_KEY)).await;
    assert_eq!(status, StatusCode::OK, "another principal still deletes: {body}");
}

/// An entry lasts as long as its session would have, then is purged and makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_deletions_are_purged_and_make_room() {
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway("max_revocations = 1\nsession_ttl = \"1s\"", "", &backend).await;
    let agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(delete(&gateway.mcp(), &session_of(&agent)).await.0, StatusCode::OK);
    let mut newcomer = Agent::new(gateway.mcp());
    assert_eq!(newcomer.initialize("2025-11-25").await.status, StatusCode::SERVICE_UNAVAILABLE, "the list is full");

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = newcomer.initialize("2025-11-25").await.status;
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(Instant::now() < deadline, "the expired deletion was never purged");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(ping_status(&gateway.mcp(), &session_of(&agent)).await, StatusCode::NOT_FOUND, "expired anyway");
}

/// SQLite: a deletion is in the ledger's file, so the gateway that starts next on it still refuses the id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_survives_a_restart_on_sqlite() {
    let backend = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("revoked-sqlite");
    let server = format!("session_secret_file = {:?}", dir.path().join("session.key").display().to_string());
    let sections = ledger_section(&format!("sqlite://{}", dir.path().join("ledger.db").display()));

    let first = gateway(&server, &sections, &backend).await;
    let deleted = session_of(&Agent::connected(first.mcp()).await);
    let kept = session_of(&Agent::connected(first.mcp()).await);
    assert_eq!(delete(&first.mcp(), &deleted).await.0, StatusCode::OK);
    assert_eq!(ping_status(&first.mcp(), &deleted).await, StatusCode::NOT_FOUND);
    drop(first);

    let second = gateway(&server, &sections, &backend).await;
    assert_eq!(ping_status(&second.mcp(), &kept).await, StatusCode::OK, "same key: sessions carry over");
    assert_eq!(ping_status(&second.mcp(), &deleted).await, StatusCode::NOT_FOUND, "the deletion carried over too");
}

/// PostgreSQL: two replicas on one ledger and one session key; a `DELETE` on one is refused by the other once
/// the announcement arrives, and by a replica that starts later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_on_one_replica_is_refused_by_the_others() {
    let Some(schema) = PgSchema::create().await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("revoked-replicas");
    let server = format!("session_secret_file = {:?}", dir.path().join("session.key").display().to_string());
    let sections = ledger_section(&schema.url());
    let a = gateway(&server, &sections, &backend).await;
    let b = gateway(&server, &sections, &backend).await;
    let id = session_of(&Agent::connected(a.mcp()).await);
    assert_eq!(ping_status(&b.mcp(), &id).await, StatusCode::OK, "no stickiness: B serves A's session");

    assert_eq!(delete(&a.mcp(), &id).await.0, StatusCode::OK);
    let refused_by_b = || async { ping_status(&b.mcp(), &id).await == StatusCode::NOT_FOUND };
    eventually_within(PROPAGATION_BOUND, "B refuses the session A deleted", refused_by_b).await;
    assert_eq!(delete(&b.mcp(), &id).await.0, StatusCode::NOT_FOUND, "and cannot delete it twice");

    let c = gateway(&server, &sections, &backend).await;
    assert_eq!(ping_status(&c.mcp(), &id).await, StatusCode::NOT_FOUND, "a replica started later loads it");
}

/// A deletion the ledger cannot record is refused (503, saying the session was not deleted) and changes nothing:
/// the session still works, and deleting it succeeds once PostgreSQL is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_the_ledger_cannot_record_is_refused() {
    let Some(schema) = PgSchema::create().await else { return };
    let mut proxy = TcpProxy::start(postgres::address()).await;
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway("", &ledger_section(&schema.url_through(&proxy)), &backend).await;
    let id = session_of(&Agent::connected(gateway.mcp()).await);

    proxy.cut().await;
    let (status, _, body) = delete(&gateway.mcp(), &id).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not deleted") && message.contains("could not be recorded"), "{body}");
    assert_eq!(ping_status(&gateway.mcp(), &id).await, StatusCode::OK, "the refused deletion changed nothing");

    proxy.restore().await;
    assert!(wait_ready(&gateway.base).await, "ready again once PostgreSQL is back");
    assert_eq!(delete(&gateway.mcp(), &id).await.0, StatusCode::OK);
    assert_eq!(ping_status(&gateway.mcp(), &id).await, StatusCode::NOT_FOUND);
}
