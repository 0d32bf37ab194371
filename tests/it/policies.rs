//! One policy for listing and using, through the running gateway: two principals see
//! different lists from the same gateway, and what a principal may not use is answered exactly like a name that
//! does not exist, before anything runs — tools on `/mcp` and `/mcp/<backend>`, prompts, resources, templates and
//! completions. And no passthrough: the agent's `Authorization` header and cookies never reach a backend, which
//! gets only its own configured credential.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ScratchDir, TestGateway, backend_toml};
use crate::support::interop::InteropServer;

/// ops (alice) may use every tool and prompt and every backend's resources; readers (bob) only `*echo` and the
/// simple prompt, and no resources.
pub const POLICIES: &str = "[[policies]]\nprincipals = [\"group:ops\"]\nallow = [\"*\"]\nbackends = [\"*\"]\n\
     [[policies]]\nprincipals = [\"group:readers\"]\nallow = [\"*echo\", \"everything__simple-prompt\"]\n";

fn delete_repo() -> Value {
    json!({"name": "delete_repo", "inputSchema": {"type": "object"}})
}

fn names(listed: &Value, field: &str) -> Vec<String> {
    let items = listed["result"][field].as_array().unwrap_or_else(|| panic!("no {field}: {listed}"));
    items.iter().map(|item| item["name"].as_str().unwrap_or_default().to_owned()).collect()
}

/// The error of a refused request, with the name it refused replaced, so it can be compared with the error of a
/// name that does not exist.
fn error_without(reply: &Value, name: &str) -> Value {
    let mut error = reply["error"].clone();
    assert!(error.is_object(), "expected an error: {reply}");
    error["message"] = json!(error["message"].as_str().unwrap_or_default().replace(name, "NAME"));
    error
}

#[tokio::test]
async fn two_principals_see_and_call_only_what_their_policies_allow() {
    let fault = FaultBackend::start(Script {
        tools: vec![Script::default().tools[0].clone(), delete_repo()],
        ..Script::default()
    })
    .await;
    let sections = format!("{}{POLICIES}", api_keys());
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    assert_eq!(alice.tool_names().await, ["fault__echo", "fault__delete_repo"]);
    assert_eq!(bob.tool_names().await, ["fault__echo"]);

    let denied = bob.call_tool("fault__delete_repo", json!({})).await;
    let unknown = bob.call_tool("fault__no_such_tool", json!({})).await;
    assert_eq!(error_without(&denied, "fault__delete_repo"), error_without(&unknown, "fault__no_such_tool"));
    assert_eq!(fault.executions("delete_repo"), 0, "refused before the ledger or the backend");
    assert!(alice.call_tool("fault__delete_repo", json!({})).await["result"].is_object());
    assert_eq!(fault.executions("delete_repo"), 1);

    let mut bob_on_backend = Agent::connected_as(format!("{}/mcp/fault", gateway.base), BOB_KEY).await;
    assert_eq!(bob_on_backend.tool_names().await, ["echo"], "the same policy judges bare names by exposed name");
    let denied = bob_on_backend.call_tool("delete_repo", json!({})).await;
    let unknown = bob_on_backend.call_tool("no_such_tool", json!({})).await;
    assert_eq!(error_without(&denied, "delete_repo"), error_without(&unknown, "no_such_tool"));
    assert!(bob_on_backend.call_tool("echo", json!({"text": "hi"})).await["result"].is_object());
    assert_eq!(fault.executions("delete_repo"), 1);
}

#[tokio::test]
async fn prompts_resources_and_completions_obey_the_same_policy() {
    let Some(everything) = InteropServer::everything() else { return };
    let (address, _demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("demo");
    let backends = backend_toml("demo", &format!("http://{address}/mcp"), "")
        + &backend_toml("everything", &everything.url(), "timeout = \"20s\"");
    let gateway = TestGateway::start_with("", &format!("{}{POLICIES}", api_keys()), &backends).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;

    let alice_prompts = names(&alice.request("prompts/list", json!({})).await, "prompts");
    assert!(alice_prompts.len() > 1 && alice_prompts.contains(&"everything__args-prompt".to_owned()));
    assert_eq!(names(&bob.request("prompts/list", json!({})).await, "prompts"), ["everything__simple-prompt"]);
    let get = |name: &str| json!({"name": name, "arguments": {"city": "Lyon"}});
    let denied = bob.request("prompts/get", get("everything__args-prompt")).await;
    let unknown = bob.request("prompts/get", get("everything__nope")).await;
    assert_eq!(error_without(&denied, "everything__args-prompt"), error_without(&unknown, "everything__nope"));
    assert!(bob.request("prompts/get", get("everything__simple-prompt")).await["result"].is_object());
    let complete =
        |name: &str| json!({"ref": {"type": "ref/prompt", "name": name}, "argument": {"name": "city", "value": "L"}});
    let denied = bob.request("completion/complete", complete("everything__args-prompt")).await;
    let unknown = bob.request("completion/complete", complete("everything__nope")).await;
    assert_eq!(error_without(&denied, "everything__args-prompt"), error_without(&unknown, "everything__nope"));

    let listed = alice.request("resources/list", json!({})).await;
    let uri = listed["result"]["resources"][0]["uri"].as_str().expect("alice sees resources").to_owned();
    assert!(alice.request("resources/read", json!({"uri": uri})).await["result"].is_object());
    assert_eq!(bob.request("resources/list", json!({})).await["result"]["resources"], json!([]));
    let templates = bob.request("resources/templates/list", json!({})).await;
    assert_eq!(templates["result"]["resourceTemplates"], json!([]));
    let denied = bob.request("resources/read", json!({"uri": uri})).await;
    let unknown = bob.request("resources/read", json!({"uri": "demo://resource/nowhere"})).await;
    assert_eq!(error_without(&denied, &uri), error_without(&unknown, "demo://resource/nowhere"));
}

#[tokio::test]
async fn a_backend_gets_only_its_own_credential_never_the_agents() {
    let fault = FaultBackend::start(Script::default()).await;
    let secrets = ScratchDir::new("credential");
    let secret_file = secrets.path().join("backend-key");
    std::fs::write(&secret_file, "backend-secret\n").expect("write the secret");
    let credential =
        format!("[backends.credential]\nheader = \"X-Backend-Key\"\nfile = {:?}\n", secret_file.display().to_string());
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &fault.url(), &credential)).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let cookie = [("cookie", "session=agent-cookie")];
    let reply = alice
        .post_raw(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "fault__echo", "arguments": {"text": "hi"}}}))
            .expect("json"),
            &cookie,
        )
        .await;
    assert_eq!(reply.status, reqwest::StatusCode::OK, "{}", reply.raw);
    assert!(alice.call_tool("fault__echo", json!({"text": "again"})).await["result"].is_object());
    assert_eq!(fault.executions("echo"), 2);

    let requests = fault.requests();
    assert!(requests.iter().any(|request| request.rpc_method.as_deref() == Some("tools/call")));
    for request in &requests {
        assert_eq!(request.header("x-backend-key"), Some("backend-secret"), "{:?}", request.headers);
        assert_eq!(request.header("authorization"), None, "the agent's token is not passed on");
        assert_eq!(request.header("cookie"), None, "the agent's cookies are not passed on");
        let leaked =
            request.headers.iter().any(|(_, value)| value.contains(ALICE_KEY) || value.contains("agent-cookie"));
        assert!(!leaked, "{:?}", request.headers);
    }
}

/// `logging/setLevel` reaches only backends the principal's policies grant something on: a backend it may use
/// nothing of is not asked, and no session of the principal's is opened there.
#[tokio::test]
async fn set_level_skips_backends_the_principal_may_use_nothing_of() {
    let logging = || Script { capabilities: json!({"tools": {}, "logging": {}}), ..Script::default() };
    let (open, closed) = (FaultBackend::start(logging()).await, FaultBackend::start(logging()).await);
    let policies = "[[policies]]\nprincipals = [\"group:ops\"]\nallow = [\"*\"]\nbackends = [\"*\"]\n\
                    [[policies]]\nprincipals = [\"group:readers\"]\nallow = [\"open__*\"]\n";
    let backends = backend_toml("open", &open.url(), "") + &backend_toml("closed", &closed.url(), "");
    let gateway = TestGateway::start_with("", &format!("{}{policies}", api_keys()), &backends).await;
    let sessions_before = closed.rpc_count("initialize");

    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let set = bob.request("logging/setLevel", json!({"level": "debug"})).await;
    assert_eq!(set["result"], json!({}), "{set}");
    assert_eq!(open.rpc_count("logging/setLevel"), 1, "the granted backend is asked");
    assert_eq!(closed.rpc_count("logging/setLevel"), 0, "the wholly denied one is not");
    assert_eq!(closed.rpc_count("initialize"), sessions_before, "nor is a session of bob's opened there");

    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    alice.request("logging/setLevel", json!({"level": "info"})).await;
    assert_eq!((open.rpc_count("logging/setLevel"), closed.rpc_count("logging/setLevel")), (2, 1), "alice: both");
}
