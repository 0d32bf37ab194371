//! `subscriptions/listen` through the running gateway: acknowledged first, only what was opted into, tagged with
//! the listen request's id; tool list changes from the catalog, resource updates from the backend sessions of
//! the agent's principal, unsubscribed when the stream closes.

use std::time::Duration;

use serde_json::{Value, json};

use super::{ModernAgent, gateway_with, messages};
use crate::gateway::read_until;
use crate::support::fault_backend::{Answer, Script};

#[tokio::test]
async fn listen_is_acknowledged_first_and_hears_of_a_backends_tool_change() {
    let (fault, gateway) = gateway_with(Script::default()).await;
    let agent = ModernAgent::new(gateway.mcp());
    let mut tools = agent.listen("listen-1", json!({"toolsListChanged": true, "promptsListChanged": true})).await;
    let mut prompts_only = agent.listen("listen-2", json!({"promptsListChanged": true})).await;
    let acked = read_until(&mut tools, "acknowledged", Duration::from_secs(5)).await.expect("an acknowledgement");
    let ack = &messages(&acked)[0];
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "the first message: {acked}");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "only what the gateway honors");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen-1");
    assert!(read_until(&mut prompts_only, "acknowledged", Duration::from_secs(5)).await.is_some());

    fault.update(|script| {
        script.answer = Answer::Sse;
        script.tools.push(json!({"name": "added", "inputSchema": {"type": "object"}}));
        script.before_result = vec![json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})];
    });
    let called = agent.send(json!(1), "tools/call", json!({"name": "fault__echo", "arguments": {"text": "x"}})).await;
    assert!(!called.raw.contains("list_changed"), "list changes never ride on a call's stream: {}", called.raw);
    let told = read_until(&mut tools, "notifications/tools/list_changed", Duration::from_secs(5)).await;
    let told = told.expect("the listen stream hears of the change");
    let change = messages(&told).into_iter().find(|m| m["method"] == "notifications/tools/list_changed").unwrap();
    assert_eq!(change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen-1");
    let leaked = read_until(&mut prompts_only, "notifications/tools/list_changed", Duration::from_millis(500)).await;
    assert!(leaked.is_none(), "a stream that did not opt into tool changes is not told");
    let listed = agent.result(2, "tools/list", json!({})).await;
    assert!(listed["tools"].as_array().unwrap().iter().any(|tool| tool["name"] == "fault__added"), "{listed}");
}

#[tokio::test]
async fn listen_subscribes_to_resources_and_delivers_only_their_updates() {
    let updated =
        |uri: &str| json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
    let script = Script {
        capabilities: json!({"tools": {}, "resources": {"subscribe": true}}),
        standalone: Some(vec![updated("test://other"), updated("test://watched")]),
        ..Script::default()
    };
    let (fault, gateway) = gateway_with(script).await;
    let agent = ModernAgent::new(gateway.mcp());
    let mut stream = agent.listen("watch", json!({"resourceSubscriptions": ["test://watched"]})).await;
    let seen = read_until(&mut stream, "notifications/resources/updated", Duration::from_secs(5)).await;
    let seen = messages(&seen.expect("the update reaches the listen stream"));
    assert_eq!(seen[0]["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(seen[0]["params"]["notifications"], json!({"resourceSubscriptions": ["test://watched"]}));
    let updates: Vec<&Value> = seen.iter().filter(|m| m["method"] == "notifications/resources/updated").collect();
    assert_eq!(updates.len(), 1, "{seen:?}");
    assert_eq!(updates[0]["params"]["uri"], "test://watched", "only what the agent subscribed to");
    assert_eq!(updates[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "watch");
    let subscribed = fault.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("resources/subscribe"));
    assert_eq!(subscribed.expect("subscribed on the backend").body.unwrap()["params"]["uri"], "test://watched");

    drop(stream);
    for _ in 0..100 {
        if fault.rpc_count("resources/unsubscribe") == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("closing the listen stream did not unsubscribe on the backend");
}
