//! Tests of `backend::mcp_client::tool_headers`: `x-mcp-header` rules and header values.

use serde_json::json;

use super::*;

fn tool(properties: Value) -> Value {
    json!({"name": "t", "inputSchema": {"type": "object", "properties": properties}})
}

fn headers_of(tool: &Value, arguments: Value) -> Vec<(String, String)> {
    let specs = param_headers(tool).expect("a valid tool");
    header_values(&specs, Some(&arguments))
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_str().expect("ascii").to_owned()))
        .collect()
}

#[test]
fn declared_arguments_become_headers_in_their_wire_form() {
    let tool = tool(json!({
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        "target": {"type": "object", "properties": {"host": {"type": "string", "x-mcp-header": "Host"}}},
        "plain": {"type": "string"}
    }));
    let arguments = json!({"region": "eu-west", "count": 3, "dry": false, "target": {"host": "ünï"}, "plain": "x"});
    assert_eq!(
        headers_of(&tool, arguments),
        [
            ("mcp-param-region".to_owned(), "eu-west".to_owned()),
            ("mcp-param-count".to_owned(), "3".to_owned()),
            ("mcp-param-dry".to_owned(), "false".to_owned()),
            ("mcp-param-host".to_owned(), "=?base64?w7xuw68=?=".to_owned()),
        ]
    );
}

#[test]
fn absent_and_null_arguments_send_no_header() {
    let region = tool(json!({"region": {"type": "string", "x-mcp-header": "Region"}}));
    assert!(headers_of(&region, json!({})).is_empty());
    assert!(headers_of(&region, json!({"region": null})).is_empty());
    assert_eq!(headers_of(&tool(json!({"n": {"type": "integer", "x-mcp-header": "N"}})), json!({"n": 4.0})).len(), 1);
}

#[test]
fn misplaced_or_malformed_declarations_make_the_tool_invalid() {
    let invalid = [
        ("on a number", tool(json!({"n": {"type": "number", "x-mcp-header": "N"}}))),
        ("without a type", tool(json!({"n": {"x-mcp-header": "N"}}))),
        ("empty", tool(json!({"n": {"type": "string", "x-mcp-header": ""}}))),
        ("not a token", tool(json!({"n": {"type": "string", "x-mcp-header": "a b"}}))),
        ("with a line break", tool(json!({"n": {"type": "string", "x-mcp-header": "a\r\nb"}}))),
        ("not a string", tool(json!({"n": {"type": "string", "x-mcp-header": 7}}))),
        (
            "twice, in other case",
            tool(
                json!({"a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}}),
            ),
        ),
        ("under items", tool(json!({"l": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}}))),
        ("under anyOf", tool(json!({"u": {"anyOf": [{"type": "string", "x-mcp-header": "U"}]}}))),
        ("on the root", json!({"name": "t", "inputSchema": {"type": "string", "x-mcp-header": "R"}})),
    ];
    for (what, tool) in invalid {
        assert!(param_headers(&tool).is_err(), "a declaration {what} must be refused");
    }
}

#[test]
fn a_property_named_properties_is_still_a_property() {
    let tool = tool(json!({"properties": {"type": "string", "x-mcp-header": "P"}}));
    assert_eq!(headers_of(&tool, json!({"properties": "v"})), [("mcp-param-p".to_owned(), "v".to_owned())]);
}

#[test]
fn learning_a_listing_drops_invalid_tools_and_remembers_the_rest() {
    let learnt = ToolHeaders::default();
    let backend: Arc<str> = "b".into();
    let good = json!({"name": "good", "inputSchema": {"type": "object", "properties": {
        "r": {"type": "string", "x-mcp-header": "R"}}}});
    let bad = json!({"name": "bad", "inputSchema": {"type": "object", "properties": {
        "r": {"type": "number", "x-mcp-header": "R"}}}});
    let mut result = json!({"tools": [good, bad, {"name": "bare", "inputSchema": {"type": "object"}}]});
    learnt.learn(&backend, &mut result);
    let names: Vec<&str> = result["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["good", "bare"]);
    assert_eq!(learnt.of("b", "good").map(|specs| specs.len()), Some(1));
    assert!(
        learnt.of("b", "bare").is_none() && learnt.of("b", "bad").is_none() && learnt.of("other", "good").is_none()
    );
}
