//! A fleet: two gateway processes on one PostgreSQL ledger (a fresh schema per test) and one session key, where
//! what belongs to a call on one replica lands on the other — an agent's answer to a relayed elicitation, a
//! `notifications/cancelled`, a 2026-07-28 retry continuing a multi-round call — and is served as if it had
//! landed on the replica holding the call; with that replica gone, the retry gets the lost call's answer at once.
//! A message sent while its receiver is cut off from PostgreSQL waits in its mailbox and is applied once the
//! receiver listens again; what a backend sends on its standalone stream reaches the agent's standalone stream
//! held by the other replica. Notifications reach agents on either replica ([`notifications`]).
//! Raw HTTP picks the replica each message lands on; the official Python SDK goes through a round-robin proxy
//! (each new connection to the next replica).

mod notifications;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::at_most_once::Instance;
use crate::gateway::{events, read_until};
use crate::modern_front::ModernAgent;
use crate::real_clients::ANSWER_TIMEOUT;
use crate::support::assert::{eventually, text};
use crate::support::fault_backend::{Answer, Eras, FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, SESSION, ScratchDir};
use crate::support::interop::{interop_dir, python_interpreter};
use crate::support::pg_proxy::TcpProxy;
use crate::support::postgres::{self, PgSchema};
use crate::support::round_robin::RoundRobin;
use switchyard::backend::event_stream::SseEvent;
use switchyard::ledger::LedgerStore;

/// Two replicas of one gateway in front of `backend`: `a` started first (it creates the schema and the key).
pub(crate) struct Replicas {
    pub(crate) a: ChildGateway,
    pub(crate) b: ChildGateway,
    dir: ScratchDir,
    schema: PgSchema,
}

impl Replicas {
    /// `None` (after a counted skip line) when PostgreSQL is unreachable outside CI.
    pub(crate) async fn start(backend: &FaultBackend) -> Option<Replicas> {
        Replicas::start_through(backend, None).await
    }

    /// [`Replicas::start`], with `a` reaching PostgreSQL through `proxy` when one is given.
    async fn start_through(backend: &FaultBackend, proxy: Option<&TcpProxy>) -> Option<Replicas> {
        Replicas::start_before(&backend.url(), proxy).await
    }

    /// Two replicas in front of the backend at `backend` (named `fault`), `a` reaching PostgreSQL through `proxy`
    /// when one is given.
    async fn start_before(backend: &str, proxy: Option<&TcpProxy>) -> Option<Replicas> {
        let schema = PgSchema::create().await?;
        let dir = ScratchDir::new("fleet");
        let secret = dir.path().join("session.key");
        let instance = |name, url: &str| Instance::new(dir.path(), name, url, backend, &secret);
        let a = instance("a", &proxy.map_or_else(|| schema.url(), |proxy| schema.url_through(proxy))).start().await;
        let b = instance("b", &schema.url()).start().await;
        Some(Replicas { a, b, dir, schema })
    }

    /// The instance id (its name on the fleet bus) of the replica named `name`.
    fn instance_id(&self, name: &str) -> String {
        switchyard::ledger::instance_id(&self.dir.path().join(name)).expect("the replica's instance id")
    }

    /// How many messages wait in the mailbox of the replica named `name`.
    async fn waiting_for(&self, name: &str) -> i64 {
        let client = crate::support::postgres::connect().await.expect("PostgreSQL");
        let sql = format!("SELECT count(*) FROM {}.switchyard_fleet_mail WHERE receiver = $1", self.schema.name);
        client.query_one(&sql, &[&self.instance_id(name)]).await.expect("the mailbox").get(0)
    }
}

/// An agent of the session `agent` holds, bound to `url` (another replica).
fn same_session(agent: &Agent, url: String) -> Agent {
    let mut other = Agent::new(url);
    other.session = agent.session.clone();
    other
}

/// Posts `message` on `agent`'s session asking for SSE, and returns the open response.
async fn streamed(agent: &Agent, message: &Value) -> reqwest::Response {
    let session = agent.session.as_deref().expect("a session");
    let post = agent.http.post(&agent.url).header("content-type", "application/json");
    let post = post.header("accept", "application/json, text/event-stream").header(SESSION, session);
    post.body(message.to_string()).send().await.expect("the call is posted")
}

fn call(id: u64, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": text}}})
}

/// A backend whose tool asks the agent for a colour (over SSE) and answers once it has the answer.
fn asking_for_a_colour() -> Script {
    Script {
        answer: Answer::Sse,
        before_result: vec![json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
            "params": {"message": "Which colour?", "requestedSchema": {"type": "object",
                "properties": {"colour": {"type": "string"}}}}})],
        await_answers: true,
        ..Script::default()
    }
}

/// Agents of one session on replicas `a` and `b`, a call streaming on `a` up to its elicitation, and the
/// events read so far (the priming event, then the request).
async fn asked_on_a(fleet: &Replicas) -> (Agent, Agent, reqwest::Response, Vec<SseEvent>) {
    let on_a = Agent::connected_with(fleet.a.mcp(), json!({"elicitation": {}})).await;
    let on_b = same_session(&on_a, fleet.b.mcp());
    let mut stream = streamed(&on_a, &call(1, "painted")).await;
    let seen = read_until(&mut stream, "elicitation/create", Duration::from_secs(10)).await.expect("the request");
    (on_a, on_b, stream, events(&seen))
}

/// The agent's answer to the elicitation among `seen`.
fn answer(seen: &[SseEvent]) -> Value {
    let asked = seen.iter().find(|event| event.data.contains("elicitation")).expect("an event");
    let asked: Value = serde_json::from_str(&asked.data).expect("JSON");
    json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"colour": "teal"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_an_elicitation_landing_on_the_other_replica_reaches_the_call() {
    let backend = FaultBackend::start(asking_for_a_colour()).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let (_on_a, on_b, mut stream, seen) = asked_on_a(&fleet).await;
    assert_eq!(on_b.send(&answer(&seen)).await.status, StatusCode::ACCEPTED);

    let rest = read_until(&mut stream, "painted", Duration::from_secs(20)).await.expect("the call goes on");
    assert!(rest.contains("\"id\":1"), "{rest}");
    let answers = backend.client_answers();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        (answers[0]["id"].clone(), answers[0]["result"]["content"]["colour"].clone()),
        (json!("srv-1"), json!("teal"))
    );
}

/// A call's stream cut after the elicitation, then resumed on the other replica from the priming event: every
/// event after it arrives once — the elicitation replayed from the ledger, the result followed as it came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_call_resumes_on_the_other_replica_with_every_event_once() {
    let backend = FaultBackend::start(asking_for_a_colour()).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let (_on_a, on_b, stream, seen) = asked_on_a(&fleet).await;
    drop(stream);
    let session = on_b.session.clone().expect("a session");
    let resume = on_b.http.get(&on_b.url).header(SESSION, session).header("accept", "text/event-stream");
    let mut resumed = resume.header("last-event-id", &seen[0].id).send().await.expect("the resumption");
    assert_eq!(resumed.status(), StatusCode::OK);
    assert_eq!(on_b.send(&answer(&seen)).await.status, StatusCode::ACCEPTED);
    let rest = read_until(&mut resumed, "painted", Duration::from_secs(20)).await.expect("the result follows");
    let rest = events(&rest);
    let data: Vec<&str> = rest.iter().map(|event| event.data.as_str()).collect();
    assert_eq!(data.len(), 2, "the elicitation, then the result: {data:?}");
    assert!(data[0].contains("elicitation/create") && data[1].contains("painted"), "{data:?}");
    assert_eq!(backend.client_answers().len(), 1);
}

/// The replica running the call is cut off from PostgreSQL (its bus connection included) when the agent's answer
/// lands on the other replica: the answer waits in its mailbox and reaches the call once it listens again, so the
/// call completes instead of running out its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_sent_while_the_calls_replica_reconnects_reaches_the_call_after() {
    let backend = FaultBackend::start(asking_for_a_colour()).await;
    let mut proxy = TcpProxy::start(postgres::address()).await;
    let Some(fleet) = Replicas::start_through(&backend, Some(&proxy)).await else { return };
    let (_on_a, on_b, mut stream, seen) = asked_on_a(&fleet).await;
    proxy.cut().await;
    assert_eq!(on_b.send(&answer(&seen)).await.status, StatusCode::ACCEPTED);
    eventually("the answer waits in a's mailbox", || async { fleet.waiting_for("a").await == 1 }).await;
    assert!(backend.client_answers().is_empty(), "a, cut off, could not have passed it on");

    proxy.restore().await;
    let rest = read_until(&mut stream, "painted", Duration::from_secs(30)).await.expect("the call goes on");
    assert!(rest.contains("\"id\":1"), "{rest}");
    let answers = backend.client_answers();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"]["content"]["colour"], "teal", "{answers:?}");
    assert_eq!(fleet.waiting_for("a").await, 0, "read once, and deleted");
}

/// The agent's standalone stream is on `b`; its backend session (and the backend's standalone stream) on `a`,
/// where its tool call ran: a notification and a `roots/list` request the backend sends there reach the agent's
/// stream on `b` in the order they were sent, and its answer, posted to `b`, reaches the backend through `a`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_backend_sends_on_its_own_stream_reaches_the_agents_stream_on_the_other_replica() {
    let standalone = vec![
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://watched"}}),
        json!({"jsonrpc": "2.0", "id": "srv-roots", "method": "roots/list"}),
    ];
    let backend = FaultBackend::start(Script { standalone: Some(standalone), ..Script::default() }).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let mut on_a = Agent::connected_with(fleet.a.mcp(), json!({"roots": {}})).await;
    let on_b = same_session(&on_a, fleet.b.mcp());
    let session = on_b.session.clone().expect("a session");
    let open = on_b.http.get(&on_b.url).header("accept", "text/event-stream").header(SESSION, session);
    let mut stream = open.send().await.expect("the standalone stream");
    assert_eq!(stream.status(), StatusCode::OK);
    read_until(&mut stream, "data: \n", Duration::from_secs(10)).await.expect("a priming event");

    on_a.call_tool("fault__echo", json!({"text": "x"})).await; // opens the backend session on a, and its stream
    let seen = read_until(&mut stream, "roots/list", Duration::from_secs(30)).await.expect("relayed to b");
    let seen = events(&seen);
    let order: Vec<bool> = seen.iter().map(|event| event.data.contains("resources/updated")).collect();
    assert_eq!(order, [true, false], "the notification, then the request, as the backend sent them: {seen:?}");
    let asked = seen.iter().find(|event| event.data.contains("roots/list")).expect("the request");
    let asked: Value = serde_json::from_str(&asked.data).expect("JSON");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [{"uri": "file:///work"}]}});
    assert_eq!(on_b.send(&answer).await.status, StatusCode::ACCEPTED);
    let answered = || backend.client_answers().into_iter().find(|answer| answer["id"] == "srv-roots");
    eventually("the answer reaches the backend", || async { answered().is_some() }).await;
    assert_eq!(answered().expect("an answer")["result"]["roots"][0]["uri"], "file:///work");
}

/// The replica's address, from its base URL.
fn address(replica: &ChildGateway) -> SocketAddr {
    replica.base.trim_start_matches("http://").parse().expect("a replica's address")
}

/// The official Python SDK's client behind a round-robin proxy: the tool call's stream is on one replica, and
/// the SDK posts its answers to the elicitation and the sampling request on new connections, which the proxy
/// sends to the other replica; the call completes with both answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_behind_a_round_robin_proxy_answers_on_the_other_replica() {
    let Some(python) = python_interpreter() else { return };
    let backend = FaultBackend::start(Script {
        answer: Answer::Sse,
        before_result: vec![
            json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
                "params": {"message": "How many seats?", "requestedSchema": {"type": "object",
                    "properties": {"seats": {"type": "integer"}}}}}),
            json!({"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage",
                "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Describe the seat"}}],
                    "maxTokens": 20}}),
        ],
        await_answers: true,
        ..Script::default()
    })
    .await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let proxy = RoundRobin::start(vec![address(&fleet.a), address(&fleet.b)]).await;
    let mut command = tokio::process::Command::new(python);
    let agent = command.arg(interop_dir().join("python_input_agent.py")).arg(proxy.mcp());
    agent.arg("fault__echo").arg(r#"{"text": "booked"}"#);
    agent.current_dir(interop_dir()).stdout(Stdio::piped()).kill_on_drop(true);
    let output = tokio::time::timeout(ANSWER_TIMEOUT, agent.output()).await.expect("the agent finishes");
    let line = String::from_utf8_lossy(&output.expect("the Python agent runs").stdout).into_owned();
    let report: Value = serde_json::from_str(line.trim()).unwrap_or_else(|_| panic!("one JSON line: {line}"));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!((report["isError"].clone(), report["texts"].clone()), (json!(false), json!(["booked"])), "{report}");
    let asked = json!([["elicitation/create", "How many seats?"], ["sampling/createMessage", "Describe the seat"]]);
    assert_eq!(report["asked"], asked, "{report}");
    let answers = backend.client_answers();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["result"]["content"]["seats"], 2, "{answers:?}");
    assert_eq!(answers[1]["result"]["model"], "python-sdk-test", "{answers:?}");
    assert!(proxy.connections().iter().all(|&count| count > 0), "both replicas served: {:?}", proxy.connections());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_landing_on_the_other_replica_cancels_the_call_at_the_backend() {
    let backend = FaultBackend::start(Script { stall: true, ..Script::default() }).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let on_a = Arc::new(Agent::connected(fleet.a.mcp()).await);
    let on_b = same_session(&on_a, fleet.b.mcp());
    let running = {
        let on_a = Arc::clone(&on_a);
        tokio::spawn(async move { on_a.send(&call(11, "slow")).await })
    };
    eventually("the call reaches the backend", || async { backend.executions("echo") == 1 }).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}});
    assert_eq!(on_b.send(&cancel).await.status, StatusCode::ACCEPTED);

    let answered = tokio::time::timeout(Duration::from_secs(20), running).await.expect("the call ends").unwrap();
    let body = answered.body.expect("an answer");
    assert!(text(&body).contains("cancelled"), "{body}");
    assert_eq!(body["result"]["_meta"]["switchyard/outcome"], "unknown", "honest: it may have run: {body}");
    let told = backend.requests().into_iter().any(|r| r.rpc_method.as_deref() == Some("notifications/cancelled"));
    assert!(told, "the backend hears the cancel");
    assert_eq!(backend.executions("echo"), 1, "never run again");
}

fn elicit(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message,
        "requestedSchema": {"type": "object", "properties": {"value": {"type": "string"}}}}})
}

fn multi_round_backend() -> Script {
    Script { eras: Eras::Modern, input_rounds: vec![json!({"name": elicit("your name?")})], ..Script::default() }
}

fn retry(state: &Value) -> Value {
    json!({"name": "fault__echo", "arguments": {"text": "hi"},
        "inputResponses": {"name": {"action": "accept", "content": {"value": "ada"}}}, "requestState": state})
}

fn result_of(body: Option<Value>, raw: &str) -> Value {
    body.and_then(|body| body.get("result").cloned()).unwrap_or_else(|| panic!("a result: {raw}"))
}

/// A multi-round call's first round, answered by replica `a`: its `input_required` result.
async fn first_round() -> Option<(FaultBackend, Replicas, Value)> {
    let backend = FaultBackend::start(multi_round_backend()).await;
    let fleet = Replicas::start(&backend).await?;
    let params = json!({"name": "fault__echo", "arguments": {"text": "hi"}});
    let first = ModernAgent::new(fleet.a.mcp()).send_with(json!(1), "tools/call", params, |_| {}).await;
    let first = result_of(first.body, &first.raw);
    assert_eq!(first["resultType"], "input_required", "{first}");
    Some((backend, fleet, first))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_round_call_continues_on_the_other_replica() {
    let Some((backend, fleet, first)) = first_round().await else { return };
    let on_b = ModernAgent::new(fleet.b.mcp());
    let done = on_b.send_with(json!(2), "tools/call", retry(&first["requestState"]), |_| {}).await;
    let done = result_of(done.body, &done.raw);
    assert_eq!(done["content"][0]["text"], "hi", "{done}");
    assert_eq!(backend.executions("echo"), 1, "the call ran its last round once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_whose_replica_is_gone_gets_the_lost_calls_answer_at_once() {
    let Some((backend, fleet, first)) = first_round().await else { return };
    let on_b = ModernAgent::new(fleet.b.mcp());
    fleet.a.kill().await;

    let retried = on_b.send_with(json!(2), "tools/call", retry(&first["requestState"]), |_| {});
    let lost = tokio::time::timeout(Duration::from_secs(30), retried).await.expect("no hang");
    let lost = result_of(lost.body, &lost.raw);
    assert_eq!(lost["isError"], true, "{lost}");
    assert_eq!(lost["_meta"]["switchyard/outcome"], "unknown", "{lost}");
    assert!(lost["content"][0]["text"].as_str().is_some_and(|text| text.contains("replica")), "{lost}");
    assert_eq!(backend.executions("echo"), 0, "never run by another replica");
}

/// The bus itself: a replica hears what is sent to it and to the fleet, never its own fleet-wide messages; a body
/// too long for a notification crosses through the spill table whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bus_carries_short_and_long_messages_to_their_replica() {
    let Some(schema) = PgSchema::create().await else { return };
    let dir = ScratchDir::new("bus");
    let store = LedgerStore::open(&schema.url(), dir.path()).await.expect("the ledger opens");
    let (a, mut heard_by_a) = store.fleet_bus("sy-a").expect("a bus on PostgreSQL");
    let (_b, mut heard_by_b) = store.fleet_bus("sy-b").expect("a bus on PostgreSQL");
    // Listening starts in the background: say hello until b hears it.
    let hello = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            a.send(Some("sy-b"), "hello").await.expect("sent");
            if let Ok(Some(heard)) = tokio::time::timeout(Duration::from_millis(200), heard_by_b.recv()).await {
                return heard;
            }
        }
    });
    assert_eq!(hello.await.expect("b listens").from, "sy-a");
    let long = "x".repeat(20_000);
    a.send(None, &long).await.expect("sent to the fleet");
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        // Hellos sent before b listened for the first may still arrive.
        loop {
            let heard = heard_by_b.recv().await.expect("the bus is open");
            if heard.body != "hello" {
                return heard;
            }
        }
    });
    let heard = heard.await.expect("the long message arrives");
    assert_eq!((heard.from.as_str(), heard.body.len()), ("sy-a", long.len()), "whole, through the spill table");
    assert!(heard_by_a.try_recv().is_err(), "a replica does not hear its own fleet-wide messages");
    assert!(LedgerStore::memory().fleet_bus("sy-a").is_none(), "one replica, no bus");
}
