//! Fair shares of the gateway's connections: an agent session holds at most `[server] max_streams_per_session`
//! standalone streams, and a principal at most `max_connections_per_principal` requests and streams at once
//! (unauthenticated agents counted per client address); over either the answer is 429 with a JSON-RPC error
//! naming the limit, and the room comes back when a stream closes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::auth::{api_key_digest, hex};

use crate::support::gateway::{Agent, TestGateway, backend_toml};

const ALICE_KEY: &str = "sy_shares_alice";
const BOB_KEY: &str = "sy_shares_bob";

async fn gateway(server_keys: &str, sections: &str) -> (TestGateway, tokio::task::JoinHandle<()>) {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("demo");
    let backends = backend_toml("demo", &format!("http://{address}/mcp"), "");
    (TestGateway::start_with(server_keys, sections, &backends).await, demo)
}

/// alice and bob by API key; agents without one are `anonymous`.
fn keys() -> String {
    let key = |principal: &str, key: &str| {
        format!("[[auth.api_keys]]\nprincipal = \"{principal}\"\nsha256 = \"{}\"\n", hex(&api_key_digest(key)))
    };
    format!("[auth]\nanonymous = true\n{}{}", key("alice", ALICE_KEY), key("bob", BOB_KEY))
}

/// A refusal's message, after checking it is a 429 JSON-RPC error.
async fn too_many(response: reqwest::Response) -> String {
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_str(&response.text().await.expect("body")).expect("JSON");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    body["error"]["message"].as_str().expect("a message").to_owned()
}

/// Opens a standalone stream, retrying for up to 5 s while it is refused (a closed stream is given back once the
/// gateway has noticed the connection closed).
async fn stream_once_room(agent: &Agent) -> reqwest::Response {
    for _ in 0..100 {
        let stream = agent.open_stream().await;
        if stream.status() != StatusCode::TOO_MANY_REQUESTS {
            return stream;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no room came back");
}

#[tokio::test]
async fn a_session_holds_at_most_max_streams_per_session() {
    let (gateway, _demo) = gateway("max_streams_per_session = 2", "").await;
    let agent = Agent::connected(gateway.mcp()).await;
    let first = agent.open_stream().await;
    let second = agent.open_stream().await;
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    let message = too_many(agent.open_stream().await).await;
    assert!(message.contains("max_streams_per_session = 2"), "{message}");

    let other = Agent::connected(gateway.mcp()).await;
    assert_eq!(other.open_stream().await.status(), StatusCode::OK, "another session's streams are its own");
    let mut still = agent.same_session();
    assert!(!still.tool_names().await.is_empty(), "the full session is still served");

    drop(first);
    assert_eq!(stream_once_room(&agent).await.status(), StatusCode::OK, "room once a stream closed");
    drop(second);
}

#[tokio::test]
async fn a_principal_holds_at_most_max_connections_per_principal() {
    let (gateway, _demo) = gateway("max_connections_per_principal = 3\nmax_streams_per_session = 10", &keys()).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let stream = alice.open_stream().await;
        assert_eq!(stream.status(), StatusCode::OK);
        held.push(stream);
    }
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let refused = alice.post_streaming(&list).await;
    let message = too_many(refused).await;
    assert!(message.contains("max_connections_per_principal = 3"), "{message}");
    let mut fresh = Agent::with_token(gateway.mcp(), ALICE_KEY);
    let initialize = fresh.initialize("2025-11-25").await;
    assert_eq!(initialize.status, StatusCode::TOO_MANY_REQUESTS, "a new session of alice's too: {}", initialize.raw);

    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    assert!(!bob.tool_names().await.is_empty(), "another principal is served");
    let answered = bob.send(&list).await;
    assert_eq!(answered.headers["content-type"], "application/json", "{}", answered.raw);
    let length = answered.headers.get("content-length").map(|value| value.to_str().unwrap().to_owned());
    assert_eq!(length, Some(answered.raw.len().to_string()), "a held answer keeps its Content-Length");

    held.pop();
    let mut answered = None;
    for _ in 0..100 {
        let reply = alice.send(&list).await;
        if reply.status != StatusCode::TOO_MANY_REQUESTS {
            answered = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answered.expect("room came back").status, StatusCode::OK);
    assert!(!alice.tool_names().await.is_empty());
}

#[tokio::test]
async fn anonymous_agents_are_counted_per_client_address() {
    let (gateway, _demo) = gateway("max_connections_per_principal = 2", &keys()).await;
    let here = Agent::connected(gateway.mcp()).await;
    let held = [here.open_stream().await, here.open_stream().await];
    assert!(held.iter().all(|stream| stream.status() == StatusCode::OK));
    let message = too_many(here.open_stream().await).await;
    assert!(message.contains("max_connections_per_principal = 2"), "{message}");

    // Another loopback address is another client (Linux routes all of 127.0.0.0/8 to loopback).
    let elsewhere = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let mut other = Agent::new(gateway.mcp());
    other.http = reqwest::Client::builder().local_address(elsewhere).build().expect("client");
    let mut other = other.connect(json!({})).await;
    assert!(!other.tool_names().await.is_empty(), "an anonymous agent at another address is served");
    drop(held);
}
