//! REST APIs as tools (`transport = "openapi"`), end to end: a small REST server written for these tests
//! ([`Shop`], on a loopback port) described by `openapi/shop.yaml` (OpenAPI 3.1: path, query, header, cookie and
//! body parameters, `$ref`s, a 201 JSON answer, a 409, a CSV answer, an endpoint whose first answer is lost after
//! it ran, and server-side `Idempotency-Key` deduplication), behind an in-process gateway. Each test asserts what
//! the server saw (its executions and the keys it was sent) beside what the agent read. Every other path of the
//! server answers with what it saw of the request ([`seen`]): where credentials arrived and how bodies were
//! encoded, for the security schemes and media types of [`security`].

mod security;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::{Value, json};
use switchyard::backend::openapi::{self, Selection, SpecSource};
use switchyard::config::Config;
use switchyard::gateway::Gateway;

use crate::support::assert::{eventually, outcome, text};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/openapi").join(name)
}

/// What the test server saw.
#[derive(Default)]
struct Seen {
    /// How many times each operation really ran.
    executions: HashMap<&'static str, usize>,
    /// The `Idempotency-Key` of every request that reached `/payments`, in order.
    payment_keys: Vec<Option<String>>,
    /// Answers already given, by idempotency key.
    answered: HashMap<String, (StatusCode, Value)>,
}

#[derive(Clone, Default)]
struct Shop(Arc<Mutex<Seen>>);

impl Shop {
    /// Serves the shop under `/api` on a loopback port; returns its base URL.
    async fn start(&self) -> String {
        let app = Router::new()
            .route("/api/things/{id}", get(echo))
            .route("/api/orders", post(create_order))
            .route("/api/payments", post(pay))
            .route("/api/report", get(report))
            .route("/api/everything", delete(purge))
            .fallback(seen)
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{address}/api")
    }

    fn executions(&self, operation: &str) -> usize {
        self.0.lock().unwrap().executions.get(operation).copied().unwrap_or(0)
    }

    fn payment_keys(&self) -> Vec<Option<String>> {
        self.0.lock().unwrap().payment_keys.clone()
    }

    /// Runs `operation` once per idempotency key (RFC draft `Idempotency-Key`: a repeated key gets the first
    /// answer without running again); without a key, every request runs.
    fn run_once(
        &self,
        headers: &HeaderMap,
        operation: &'static str,
        run: impl FnOnce(usize) -> (StatusCode, Value),
    ) -> (StatusCode, Value, bool) {
        let key = headers.get("idempotency-key").map(|key| key.to_str().unwrap().to_owned());
        let mut seen = self.0.lock().unwrap();
        if let Some(answer) = key.as_ref().and_then(|key| seen.answered.get(key)) {
            return (answer.0, answer.1.clone(), false);
        }
        let count = seen.executions.entry(operation).or_default();
        *count += 1;
        let (status, body) = run(*count);
        if let Some(key) = key {
            seen.answered.insert(key, (status, body.clone()));
        }
        (status, body, true)
    }
}

async fn echo(uri: Uri, headers: HeaderMap) -> Response {
    let header = |name: &str| headers.get(name).map(|value| value.to_str().unwrap().to_owned());
    let seen =
        json!({"path": uri.path(), "query": uri.query(), "trace": header("x-trace"), "cookie": header("cookie")});
    axum::Json(seen).into_response()
}

/// Every request of another path: what the server saw of it — method, path, query, the headers credentials and
/// bodies travel in, and the body as text.
async fn seen(method: axum::http::Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| headers.get(name).map(|value| value.to_str().unwrap().to_owned());
    let named = ["authorization", "x-api-key", "api_key", "cookie", "content-type", "x-team"];
    let headers: serde_json::Map<String, Value> =
        named.iter().filter_map(|name| Some(((*name).to_owned(), Value::String(header(name)?)))).collect();
    let body = String::from_utf8(body.to_vec()).unwrap();
    axum::Json(
        json!({"method": method.as_str(), "path": uri.path(), "query": uri.query(), "headers": headers, "body": body}),
    )
    .into_response()
}

async fn create_order(State(shop): State<Shop>, headers: HeaderMap, body: Bytes) -> Response {
    let order: Value = serde_json::from_slice(&body).unwrap();
    if order["sku"] == "" {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "an empty SKU"}))).into_response();
    }
    let (status, body, _) = shop.run_once(&headers, "createOrder", |count| match order["sku"].as_str() {
        Some("taken") => (StatusCode::CONFLICT, json!({"error": "that SKU is taken"})),
        sku => (StatusCode::CREATED, json!({"id": count, "sku": sku})),
    });
    (status, axum::Json(body)).into_response()
}

/// Runs the payment, then loses the answer of its first run: the connection breaks after the status line.
async fn pay(State(shop): State<Shop>, headers: HeaderMap) -> Response {
    shop.0.lock().unwrap().payment_keys.push(headers.get("idempotency-key").map(|k| k.to_str().unwrap().into()));
    let (status, body, ran) = shop.run_once(&headers, "pay", |count| (StatusCode::CREATED, json!({"id": count})));
    if ran && shop.executions("pay") == 1 {
        let broken = futures_util::stream::once(async { Err::<Bytes, _>(std::io::Error::other("connection lost")) });
        return Response::builder().status(status).body(Body::from_stream(broken)).unwrap();
    }
    (status, axum::Json(body)).into_response()
}

async fn report() -> impl IntoResponse {
    ([("content-type", "text/csv")], "sku,count\nbolt,3\n")
}

async fn purge() -> StatusCode {
    StatusCode::NO_CONTENT
}

fn shop_backend(url: &str, extra: &str) -> String {
    format!(
        "[[backends]]\nname = \"shop\"\ntransport = \"openapi\"\nspec = {:?}\nurl = \"{url}\"\n\
         operations = {{ deny = [\"purge\"] }}\n{extra}\n",
        fixture("shop.yaml").display().to_string()
    )
}

const KEYED: &str = "idempotency_header = \"Idempotency-Key\"";

async fn shop_gateway(extra: &str) -> (Shop, TestGateway, Agent) {
    let shop = Shop::default();
    let url = shop.start().await;
    let gateway = TestGateway::start("", &shop_backend(&url, extra)).await;
    gateway.wait_for_tool("shop__getThing").await;
    let agent = Agent::connected(gateway.mcp()).await;
    (shop, gateway, agent)
}

#[tokio::test]
async fn operations_become_tools_with_their_schemas() {
    let (_shop, _gateway, mut agent) = shop_gateway(KEYED).await;
    let listed = agent.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["shop__getThing", "shop__createOrder", "shop__pay", "shop__report"], "purge is denied");
    let get_thing = &tools[0];
    assert_eq!(get_thing["description"], "Read a thing\n\nAnswers with what the server saw of the request.");
    assert_eq!(get_thing["annotations"]["readOnlyHint"], true);
    let input = &get_thing["inputSchema"];
    assert_eq!(input["required"], json!(["id"]), "the path parameter, from a $ref at the path item");
    assert_eq!(input["properties"]["id"]["description"], "The thing's id");
    for name in ["tags", "ids", "sp", "pipe", "filter", "point", "X-Trace", "session"] {
        assert!(input["properties"].get(name).is_some(), "{name} in {input}");
    }
    assert_eq!(get_thing["outputSchema"]["properties"]["path"], json!({"type": "string"}), "Echo, resolved");
    let create = &tools[1];
    assert_eq!(create["inputSchema"]["required"], json!(["body"]));
    assert_eq!(create["inputSchema"]["properties"]["body"]["required"], json!(["sku"]), "Order, resolved");
    assert_eq!(create["annotations"]["readOnlyHint"], false);
    assert!(tools[3].get("outputSchema").is_none(), "a CSV answer has no output schema");
}

#[tokio::test]
async fn a_call_serializes_every_parameter_style() {
    let (_shop, _gateway, mut agent) = shop_gateway("").await;
    let arguments = json!({
        "id": "a b/c", "tags": ["x", "y"], "ids": [1, 2], "sp": ["s", "t"], "pipe": ["p", "q"],
        "filter": {"color": "red"}, "point": {"x": 1, "y": 2}, "X-Trace": ["t1", "t2"], "session": "s1"
    });
    let answer = agent.call_tool("shop__getThing", arguments).await;
    let seen = &answer["result"]["structuredContent"];
    assert_eq!(seen["path"], "/api/things/a%20b%2Fc", "{answer}");
    assert_eq!(seen["query"], "tags=x&tags=y&ids=1,2&sp=s%20t&pipe=p%7Cq&filter%5Bcolor%5D=red&x=1&y=2");
    assert_eq!(seen["trace"], "t1,t2");
    assert_eq!(seen["cookie"], "session=s1");
    let missing = agent.call_tool("shop__getThing", json!({})).await;
    assert!(missing.to_string().contains("the argument `id` is required"), "{missing}");
}

#[tokio::test]
async fn answers_are_results_whatever_their_status_and_type() {
    let (shop, _gateway, mut agent) = shop_gateway(KEYED).await;
    let created = agent.call_tool("shop__createOrder", json!({"body": {"sku": "bolt", "quantity": 3}})).await;
    assert_eq!(created["result"]["structuredContent"], json!({"id": 1, "sku": "bolt"}), "{created}");
    assert!(created["result"].get("isError").is_none());
    let conflict = agent.call_tool("shop__createOrder", json!({"body": {"sku": "taken"}})).await;
    assert_eq!(conflict["result"]["isError"], true, "{conflict}");
    assert!(text(&conflict).starts_with("HTTP 409 Conflict: "), "{conflict}");
    assert!(text(&conflict).contains("that SKU is taken"));
    assert_eq!(shop.executions("createOrder"), 2);
    let report = agent.call_tool("shop__report", json!({})).await;
    assert_eq!(text(&report), "sku,count\nbolt,3\n");
}

#[tokio::test]
async fn a_refusal_status_and_an_unreachable_api_are_not_delivered() {
    let (shop, _gateway, mut agent) = shop_gateway(KEYED).await;
    let refused = agent.call_tool("shop__createOrder", json!({"body": {"sku": ""}})).await;
    assert_eq!(outcome(&refused), Some("not_delivered"), "{refused}");
    assert!(text(&refused).contains("400"), "{refused}");
    assert_eq!(shop.executions("createOrder"), 0);
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api", closed.local_addr().unwrap());
    drop(closed);
    let gateway = TestGateway::start("", &shop_backend(&url, KEYED)).await;
    gateway.wait_for_tool("shop__createOrder").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let unreachable = agent.call_tool("shop__createOrder", json!({"body": {"sku": "bolt"}})).await;
    assert_eq!(outcome(&unreachable), Some("not_delivered"), "{unreachable}");
}

#[tokio::test]
async fn a_lost_answer_is_retried_with_the_same_key_and_completes_once() {
    let (shop, _gateway, mut agent) = shop_gateway(KEYED).await;
    let paid = agent.call_tool("shop__pay", json!({"body": {"sku": "bolt"}})).await;
    assert_eq!(paid["result"]["structuredContent"], json!({"id": 1}), "{paid}");
    assert_eq!(shop.executions("pay"), 1, "the server deduplicated the retry");
    let keys = shop.payment_keys();
    assert_eq!(keys.len(), 2, "the first request and one retry: {keys:?}");
    assert!(keys[0].is_some() && keys[0] == keys[1], "the same key both times: {keys:?}");
    let again = agent.call_tool("shop__pay", json!({"body": {"sku": "nut"}})).await;
    assert_eq!(again["result"]["structuredContent"], json!({"id": 2}));
    assert_ne!(shop.payment_keys()[2], keys[0], "another call, another key");
}

#[tokio::test]
async fn without_the_header_a_lost_answer_is_unknown_and_never_repeated() {
    let (shop, _gateway, mut agent) = shop_gateway("").await;
    let paid = agent.call_tool("shop__pay", json!({"body": {"sku": "bolt"}})).await;
    assert_eq!(outcome(&paid), Some("unknown"), "{paid}");
    assert_eq!(shop.payment_keys(), [None], "sent once, without a key");
    assert_eq!(shop.executions("pay"), 1);
}

#[tokio::test]
async fn a_document_with_a_cycle_is_refused_with_its_pointer() {
    let text = format!(
        "[server]\ndata_dir = \"/tmp/unused\"\n[[backends]]\nname = \"nodes\"\ntransport = \"openapi\"\nspec = {:?}\n\
         url = \"http://127.0.0.1:9\"\n",
        fixture("cycle.yaml").display().to_string()
    );
    let config = Config::from_toml_str(&text, "test.toml", std::iter::empty::<(String, String)>()).unwrap();
    let Err(error) = Gateway::for_discovery(config).await else { panic!("a cycle is refused") };
    let message = error.to_string();
    assert!(message.contains("backend `nodes`"), "{message}");
    assert!(message.contains("at `#/components/schemas/Node/properties/next/$ref`"), "{message}");
    assert!(message.contains("cycle"), "{message}");
}

#[tokio::test]
async fn a_missing_document_is_refused_and_the_first_server_is_the_default_url() {
    let missing = SpecSource::File(fixture("nowhere.yaml"));
    let error = openapi::load(&missing, &Selection::default()).await.unwrap_err();
    assert!(error.problem.contains("cannot read"), "{error}");
    let shop = SpecSource::File(fixture("shop.yaml"));
    let api = openapi::load(&shop, &Selection::default()).await.unwrap();
    assert_eq!(openapi::base_url(None, &api, &shop).unwrap().as_str(), "http://127.0.0.1:9/api");
    let mut relative =
        openapi::load(&SpecSource::File(fixture("petstore-3.0.yaml")), &Selection::default()).await.unwrap();
    relative.server = Some("/v3".into());
    let error = openapi::base_url(None, &relative, &shop).unwrap_err();
    assert_eq!(error.pointer, "/servers/0/url");
    let source = SpecSource::File(fixture("cycle.yaml"));
    let document = openapi::document::read(&source).await.unwrap();
    let error = openapi::document::resolve(&document).unwrap_err();
    assert_eq!(error.pointer, "/components/schemas/Node/properties/next/$ref");
}

#[tokio::test]
async fn the_petstore_examples_load_with_their_operation_names() {
    let petstore = |name: &str| SpecSource::File(fixture(name));
    let names = |api: &openapi::Api| api.operations.iter().map(|op| op.name.clone()).collect::<Vec<_>>();
    let v30 = openapi::load(&petstore("petstore-3.0.yaml"), &Selection::default()).await.unwrap();
    assert_eq!(names(&v30), ["listPets", "createPets", "showPetById"]);
    assert_eq!(v30.server.as_deref(), Some("http://petstore.swagger.io/v1"));
    let v31 = openapi::load(&petstore("petstore-3.1.yaml"), &Selection::default()).await.unwrap();
    assert_eq!(
        names(&v31),
        [
            "updatePet",
            "addPet",
            "findPetsByStatus",
            "findPetsByTags",
            "getPetById",
            "updatePetWithForm",
            "deletePet",
            "uploadFile",
            "getInventory",
            "placeOrder",
            "getOrderById",
            "deleteOrder",
            "createUser",
            "createUsersWithListInput",
            "loginUser",
            "logoutUser",
            "getUserByName",
            "updateUser",
            "deleteUser",
        ]
    );
}

/// `switchyard <command> --config <config>`, without the test's own `SWITCHYARD_*` variables.
async fn switchyard(command: &str, config: &std::path::Path) -> std::process::Output {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    child.arg(command).arg("--config").arg(config);
    for (name, _) in std::env::vars_os().filter(|(name, _)| name.to_string_lossy().starts_with("SWITCHYARD_")) {
        child.env_remove(name);
    }
    child.output().await.unwrap()
}

#[tokio::test]
async fn check_refuses_a_bad_document_and_a_reload_reads_an_edited_one() {
    let dir = ScratchDir::new("openapi-reload");
    let (spec, config, log) =
        (dir.path().join("shop.yaml"), dir.path().join("switchyard.toml"), dir.path().join("log"));
    std::fs::write(&spec, std::fs::read_to_string(fixture("shop.yaml")).unwrap()).unwrap();
    let shop = Shop::default();
    let url = shop.start().await;
    let data_dir = dir.path().join("data").display().to_string();
    let backend = shop_backend(&url, KEYED).replace(&fixture("shop.yaml").display().to_string(), "shop.yaml");
    std::fs::write(&config, format!("[server]\ndata_dir = {data_dir:?}\n{backend}")).unwrap();

    let checked = switchyard("check", &config).await;
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    assert!(String::from_utf8_lossy(&checked.stdout).contains("shop__createOrder"));

    let gateway = ChildGateway::spawn(&config, &log).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert!(agent.tool_names().await.contains(&"shop__report".to_owned()));
    let edited = std::fs::read_to_string(&spec).unwrap().replace("operationId: report", "operationId: csvReport");
    std::fs::write(&spec, edited).unwrap();
    let reloaded = switchyard("reload", &config).await;
    assert!(reloaded.status.success(), "{}", String::from_utf8_lossy(&reloaded.stderr));
    assert!(String::from_utf8_lossy(&reloaded.stdout).contains("shop"), "the backend is named as replaced");
    eventually("the edited document's tool is served", || {
        let mut probe = agent.same_session();
        async move { probe.tool_names().await.contains(&"shop__csvReport".to_owned()) }
    })
    .await;

    let broken = std::fs::read_to_string(fixture("cycle.yaml")).unwrap();
    std::fs::write(&spec, broken).unwrap();
    let refused = switchyard("reload", &config).await;
    assert!(!refused.status.success(), "a reload with a broken document is refused");
    let checked = switchyard("check", &config).await;
    assert!(!checked.status.success());
    let said = String::from_utf8_lossy(&checked.stderr);
    assert!(said.contains("#/components/schemas/Node/properties/next/$ref"), "{said}");
    assert!(agent.tool_names().await.contains(&"shop__csvReport".to_owned()), "the running backend keeps serving");
    drop(gateway);
}
