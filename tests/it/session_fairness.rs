//! The fair backend-session table through the gateway: unauthenticated agents count per
//! client address, so one address that opens many agent sessions recycles its own backend sessions and never
//! pushes out another address's.

use std::net::{IpAddr, Ipv4Addr};

use reqwest::StatusCode;
use serde_json::json;

use crate::support::assert::eventually;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

/// An agent whose connections come from `address` (any 127.0.0.0/8 address is loopback on Linux).
async fn agent_from(url: String, address: Ipv4Addr) -> Agent {
    let mut agent = Agent::new(url);
    agent.http = reqwest::Client::builder().local_address(IpAddr::V4(address)).build().expect("a client");
    let reply = agent.initialize("2025-11-25").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.raw);
    agent.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    agent
}

async fn echo(agent: &mut Agent) {
    let answer = agent.call_tool("fault__echo", json!({"text": "hi"})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
}

#[tokio::test]
async fn one_address_at_its_cap_recycles_its_own_backend_sessions() {
    let backend = FaultBackend::start(Script::default()).await;
    let server = "max_backend_sessions_per_principal = 2";
    let gateway = TestGateway::start(server, &backend_toml("fault", &backend.url(), "")).await;
    let discovery = backend.rpc_count("initialize");
    let initialized = || backend.rpc_count("initialize") - discovery;
    let other = Ipv4Addr::new(127, 0, 0, 2);
    let mut bystander = agent_from(gateway.mcp(), other).await;
    echo(&mut bystander).await;

    let mut hog = Vec::new();
    for _ in 0..3 {
        let mut agent = agent_from(gateway.mcp(), Ipv4Addr::LOCALHOST).await;
        echo(&mut agent).await;
        hog.push(agent);
    }
    assert_eq!(initialized(), 4, "one backend session per agent session");
    let deletes = || backend.requests().iter().filter(|request| request.http_method == "DELETE").count();
    eventually("the third session of 127.0.0.1 ends one", || async { deletes() >= 1 }).await;
    assert_eq!(deletes(), 1, "the third session of 127.0.0.1 ended its own oldest backend session");

    echo(&mut bystander).await;
    assert_eq!(initialized(), 4, "the other address kept its backend session");
    echo(&mut hog[0]).await;
    assert_eq!(initialized(), 5, "the recycled agent session starts a new backend session");
    echo(&mut bystander).await;
    assert_eq!(initialized(), 5, "still untouched");
}

#[tokio::test]
async fn the_table_holds_max_backend_sessions_then_recycles_the_oldest_idle_one() {
    let backend = FaultBackend::start(Script::default()).await;
    let server = "max_backend_sessions = 3\nmax_backend_sessions_per_principal = 100";
    let gateway = TestGateway::start(server, &backend_toml("fault", &backend.url(), "")).await;
    let deletes = || backend.requests().iter().filter(|request| request.http_method == "DELETE").count();
    let mut agents = Vec::new();
    // The gateway's own discovery session takes one slot; two agent sessions fill the table of three.
    for _ in 0..2 {
        let mut agent = agent_from(gateway.mcp(), Ipv4Addr::LOCALHOST).await;
        echo(&mut agent).await;
        agents.push(agent);
    }
    assert_eq!(deletes(), 0, "three sessions fit a table of three");
    let mut third = agent_from(gateway.mcp(), Ipv4Addr::LOCALHOST).await;
    echo(&mut third).await;
    // The fourth session's DELETE is the marker: an eviction by the first three would have been sent before it.
    eventually("the fourth session ends one", || async { deletes() >= 1 }).await;
    assert_eq!(deletes(), 1, "a fourth session ended the oldest idle one: the table is max_backend_sessions long");
}
