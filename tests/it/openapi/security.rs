//! Security schemes and request bodies of REST APIs, end to end: `openapi/secured.yaml` (OpenAPI 3.0: an API key
//! in the query required by the whole document, one in a header, one in a cookie, bearer and basic, `security: []`;
//! form, multipart, text and JSON bodies) and the Petstore documents, served by the test server's [`super::seen`]
//! paths, which answer with where the credential arrived and how the body was encoded. What the configuration
//! cannot fill is refused when the gateway loads, naming the operation and the pointer.

use serde_json::{Value, json};
use switchyard::config::Config;
use switchyard::gateway::Gateway;

use super::{Shop, fixture};
use crate::support::assert::text;
use crate::support::gateway::{Agent, TestGateway};

const SECRET: &str = "s3cret/1";

/// A backend of `document` at the test server `url`, with `extra` keys (a credential, a selection).
fn backend(document: &str, url: &str, extra: &str) -> String {
    format!(
        "[[backends]]\nname = \"api\"\ntransport = \"openapi\"\nspec = {:?}\nurl = \"{url}\"\n{extra}\n",
        fixture(document).display().to_string()
    )
}

/// `credential` placed by the scheme `scheme`, from the variable `API_SECRET`.
fn scheme(scheme: &str) -> String {
    format!("credential = {{ scheme = \"{scheme}\", env = \"API_SECRET\" }}\n")
}

fn allow(operations: &[&str]) -> String {
    format!("operations = {{ allow = {operations:?} }}\n")
}

/// A gateway in front of the test server with `document` and `extra`, and an agent once `tool` is listed.
async fn gateway(document: &str, extra: &str, tool: &str) -> (TestGateway, Agent) {
    let url = Shop::default().start().await;
    let gateway = TestGateway::start_env("", &backend(document, &url, extra), &[("API_SECRET", SECRET)]).await;
    gateway.wait_for_tool(&format!("api__{tool}")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    (gateway, agent)
}

/// What the server saw of a call of `tool` with `arguments`.
async fn seen(agent: &mut Agent, tool: &str, arguments: Value) -> Value {
    let answer = agent.call_tool(&format!("api__{tool}"), arguments).await;
    let seen = answer["result"]["structuredContent"].clone();
    assert!(seen.is_object(), "{answer}");
    seen
}

/// Why loading `extra` on `document` is refused (as `check`, `serve` and a reload are).
async fn refused(document: &str, extra: &str) -> String {
    let text = format!("[server]\ndata_dir = \"/tmp/unused\"\n{}", backend(document, "http://127.0.0.1:9/api", extra));
    let config = Config::from_toml_str(&text, "test.toml", [("API_SECRET", SECRET)]).unwrap();
    let Err(error) = Gateway::for_discovery(config).await else { panic!("{extra} is refused on {document}") };
    error.to_string()
}

#[tokio::test]
async fn an_api_key_goes_in_the_query_where_the_document_says_and_public_operations_get_none() {
    let extra = format!("{}{}headers = {{ X-Team = \"t\" }}\n", scheme("key_query"), allow(&["inherited", "public"]));
    let (_gateway, mut agent) = gateway("secured.yaml", &extra, "public").await;
    let inherited = seen(&mut agent, "inherited", json!({"page": 2})).await;
    assert_eq!(inherited["query"], "page=2&api_key=s3cret%2F1", "{inherited}");
    assert_eq!(inherited["headers"], json!({"x-team": "t"}), "no header carries the key: {inherited}");
    let public = seen(&mut agent, "public", json!({})).await;
    assert_eq!(public["query"], Value::Null, "security: [] carries no credential: {public}");
    assert_eq!(public["headers"], json!({"x-team": "t"}), "the configured headers still go: {public}");
}

#[tokio::test]
async fn a_cookie_key_joins_the_cookie_parameters() {
    let (_gateway, mut agent) =
        gateway("secured.yaml", &(scheme("key_cookie") + &allow(&["cookieKey"])), "cookieKey").await;
    let cookie = seen(&mut agent, "cookieKey", json!({"session": "s1"})).await;
    assert_eq!(cookie["headers"]["cookie"], "session=s1; sid=s3cret/1", "{cookie}");
    assert_eq!(cookie["query"], Value::Null);
}

#[tokio::test]
async fn basic_is_encoded_and_a_header_credential_goes_as_configured_only_where_required() {
    let (_gateway, mut agent) = gateway("secured.yaml", &(scheme("basic") + &allow(&["basicAuth"])), "basicAuth").await;
    let basic = seen(&mut agent, "basicAuth", json!({})).await;
    assert_eq!(basic["headers"]["authorization"], "Basic czNjcmV0LzE=", "base64 of the secret: {basic}");
    let header = "credential = { header = \"X-Api-Key\", env = \"API_SECRET\" }\n";
    let (_gateway, mut agent) =
        gateway("secured.yaml", &(header.to_owned() + &allow(&["headerKey", "public"])), "public").await;
    let keyed = seen(&mut agent, "headerKey", json!({})).await;
    assert_eq!(keyed["headers"]["x-api-key"], SECRET, "{keyed}");
    let public = seen(&mut agent, "public", json!({})).await;
    assert_eq!(public["headers"], json!({}), "{public}");
}

#[tokio::test]
async fn what_the_configuration_cannot_fill_is_refused_at_load_by_name() {
    let unfilled = refused("secured.yaml", &scheme("key_query")).await;
    assert!(unfilled.contains("backend `api`"), "{unfilled}");
    assert!(unfilled.contains("at `#/paths/~1seen~1header/get/security`"), "{unfilled}");
    assert!(
        unfilled.contains("operation `headerKey` requires `key_header` (apiKey in header `x-api-key`)"),
        "{unfilled}"
    );
    assert!(unfilled.contains("operations = { deny = [\"headerKey\"] }"), "{unfilled}");
    let undefined = refused("secured.yaml", &(scheme("keys") + &allow(&["public"]))).await;
    assert!(undefined.contains("`credential.scheme` names `keys`, which the document does not define"), "{undefined}");
    assert!(undefined.contains("`basic`, `key_cookie`, `key_header`, `key_query`, `token`"), "{undefined}");
    let none = refused("secured.yaml", &allow(&["inherited"])).await;
    assert!(none.contains("operation `inherited` requires `key_query`"), "{none}");
    assert!(none.contains("at `#/security`"), "the document's requirement: {none}");
}

#[tokio::test]
async fn bodies_are_encoded_by_their_media_type_and_refused_when_they_do_not_fit() {
    let bodies = allow(&["submitForm", "upload", "note", "preferJson"]);
    let (_gateway, mut agent) = gateway("secured.yaml", &bodies, "preferJson").await;
    let listed = agent.request("tools/list", json!({})).await;
    let form_tool = &listed["result"]["tools"][0];
    assert_eq!(
        form_tool["inputSchema"]["properties"]["body"]["required"],
        json!(["name"]),
        "the Pet schema: {form_tool}"
    );

    let pet = json!({"name": "Rex & co", "tags": ["a", "b"], "owner": {"id": 1}});
    let form = seen(&mut agent, "submitForm", json!({"body": pet})).await;
    assert_eq!(form["headers"]["content-type"], "application/x-www-form-urlencoded", "preferred to multipart: {form}");
    assert_eq!(form["body"], "name=Rex+%26+co&tags=a&tags=b&owner=%7B%22id%22%3A1%7D");

    let upload = seen(&mut agent, "upload", json!({"body": {"note": "hi", "meta": {"k": 1}}})).await;
    let content_type = upload["headers"]["content-type"].as_str().unwrap();
    let boundary = content_type.strip_prefix("multipart/form-data; boundary=").expect("a boundary");
    let expected = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--{boundary}\r\n\
         Content-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{{\"k\":1}}\r\n\
         --{boundary}--\r\n"
    );
    assert_eq!(upload["body"], expected);

    let note = seen(&mut agent, "note", json!({"body": "hello"})).await;
    assert_eq!(
        (&note["method"], &note["headers"]["content-type"], &note["body"]),
        (&json!("PUT"), &json!("text/plain"), &json!("hello"))
    );
    let json_body = seen(&mut agent, "preferJson", json!({"body": {"name": "Rex"}})).await;
    assert_eq!(
        (&json_body["headers"]["content-type"], &json_body["body"]),
        (&json!("application/json"), &json!("{\"name\":\"Rex\"}"))
    );

    let not_text = agent.call_tool("api__note", json!({"body": {"a": 1}})).await;
    assert!(not_text.to_string().contains("`body` must be a string: it is sent as text/plain"), "{not_text}");
    let not_form = agent.call_tool("api__submitForm", json!({"body": "name=x"})).await;
    let said = not_form.to_string();
    assert!(said.contains("`body` must be an object: it is sent as application/x-www-form-urlencoded"), "{said}");
}

#[tokio::test]
async fn the_petstore_api_key_goes_in_its_header_and_its_oauth_only_operations_are_named() {
    let unfilled = refused("petstore-3.1.yaml", &scheme("api_key")).await;
    assert!(unfilled.contains("at `#/paths/~1pet/put/security`"), "{unfilled}");
    assert!(unfilled.contains("operation `updatePet` requires `petstore_auth` (oauth2: a bearer token)"), "{unfilled}");
    let selected = scheme("api_key") + &allow(&["getPetById", "getUserByName"]);
    let (_gateway, mut agent) = gateway("petstore-3.1.yaml", &selected, "getPetById").await;
    let pet = seen(&mut agent, "getPetById", json!({"petId": 7})).await;
    assert_eq!((&pet["path"], &pet["headers"]["api_key"]), (&json!("/api/pet/7"), &json!(SECRET)), "{pet}");
    let user = seen(&mut agent, "getUserByName", json!({"username": "ann"})).await;
    assert_eq!(user["headers"]["api_key"], SECRET, "no requirement declared: the credential as configured: {user}");
}

#[tokio::test]
async fn a_document_without_security_schemes_gets_the_credential_as_configured() {
    let credential = "credential = { header = \"Authorization\", prefix = \"Bearer \", env = \"API_SECRET\" }\n";
    let (_gateway, mut agent) = gateway("petstore-3.0.yaml", credential, "listPets").await;
    let listed = seen(&mut agent, "listPets", json!({"limit": 2})).await;
    assert_eq!((&listed["query"], &listed["headers"]["authorization"]), (&json!("limit=2"), &json!("Bearer s3cret/1")));
    let created = agent.call_tool("api__createPets", json!({"body": {"id": 1, "name": "Rex"}})).await;
    assert!(text(&created).contains("Bearer s3cret/1"), "{created}");
}
