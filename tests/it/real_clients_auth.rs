//! Real MCP clients authenticating to the gateway: the official Python SDK's client with an API key
//! header and with its OAuth client (`OAuthClientProvider`: it finds the test authorization server from the
//! gateway's 401 and Protected Resource Metadata, registers, runs the authorization code flow with PKCE and calls
//! a tool with the RS256 JWT it got), and `rmcp` with a bearer token. Two principals with different policies see
//! different `tools/list` results from the same gateway.
//!
//! Peers that are not installed skip the test outside CI, as in `support::interop`.

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::policies::POLICIES;
use crate::real_clients::{
    BACKEND_TIMEOUT, Demo, PythonAgent, rmcp_agent_with, rmcp_call_text, rmcp_close, rmcp_tool_names,
};
use crate::support::auth_server::AuthServer;
use crate::support::gateway::{TestGateway, backend_toml};
use crate::support::interop::python_interpreter;

/// A gateway in front of the demo server where alice (ops) may use everything and bob (readers) only `*echo`.
async fn gateway_with_keys(demo: &Demo) -> TestGateway {
    let sections = format!("{}{POLICIES}", api_keys());
    TestGateway::start_with("", &sections, &backend_toml("demo", &demo.url(), BACKEND_TIMEOUT)).await
}

#[tokio::test]
async fn python_sdk_clients_with_api_keys_see_what_their_policies_allow() {
    let Some(python) = python_interpreter() else { return };
    let demo = Demo::start().await;
    let gateway = gateway_with_keys(&demo).await;
    let header = |key: &str| format!("Authorization=Bearer {key}");
    let (alice_header, bob_header) = (header(ALICE_KEY), header(BOB_KEY));
    let mut alice = PythonAgent::connect_with(&python, &gateway.mcp(), &["--header", &alice_header]).await;
    let mut bob = PythonAgent::connect_with(&python, &gateway.mcp(), &["--header", &bob_header]).await;
    let alice_tools = alice.tool_names().await;
    assert!(alice_tools.iter().any(|name| name == "demo__counter") && alice_tools.len() > 1, "{alice_tools:?}");
    assert_eq!(bob.tool_names().await, ["demo__echo"]);
    assert_eq!(bob.call_text("demo__echo", json!({"text": "from bob"})).await, "from bob");
    assert_eq!(alice.call_text("demo__counter", json!({})).await, "1");
    alice.quit().await;
    bob.quit().await;
}

#[tokio::test]
async fn python_sdk_oauth_client_finds_the_issuer_gets_a_token_and_calls_a_tool() {
    let Some(python) = python_interpreter() else { return };
    let issuer = AuthServer::start("unused").await;
    let demo = Demo::start().await;
    let sections = format!(
        "[auth.jwt]\nissuer = \"{}\"\njwks_url = \"{}\"\nrequired_scopes = [\"mcp:tools\"]\n",
        issuer.issuer,
        issuer.jwks_url()
    );
    let gateway = TestGateway::start_with("", &sections, &backend_toml("demo", &demo.url(), BACKEND_TIMEOUT)).await;
    gateway.wait_for_tool("demo__echo").await;
    let mut agent = PythonAgent::connect_with(&python, &gateway.mcp(), &["--oauth"]).await;
    assert!(agent.tool_names().await.iter().any(|name| name == "demo__echo"));
    assert_eq!(agent.call_text("demo__echo", json!({"text": "with a JWT"})).await, "with a JWT");
    agent.quit().await;
}

#[tokio::test]
async fn rmcp_clients_with_bearer_tokens_see_what_their_policies_allow() {
    let demo = Demo::start().await;
    let gateway = gateway_with_keys(&demo).await;
    let connect = |key: &str| StreamableHttpClientTransportConfig::with_uri(gateway.mcp()).auth_header(key);
    let alice = rmcp_agent_with(connect(ALICE_KEY)).await;
    let bob = rmcp_agent_with(connect(BOB_KEY)).await;
    let alice_tools = rmcp_tool_names(&alice).await;
    assert!(alice_tools.iter().any(|name| name == "demo__counter") && alice_tools.len() > 1, "{alice_tools:?}");
    assert_eq!(rmcp_tool_names(&bob).await, ["demo__echo"]);
    assert_eq!(rmcp_call_text(&bob, "demo__echo", json!({"text": "from rmcp"})).await, "from rmcp");
    rmcp_close(alice).await;
    rmcp_close(bob).await;
}
