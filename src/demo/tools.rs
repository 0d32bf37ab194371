//! The demo server's five tools (MCP 2025-11-25 `server/tools.mdx`, reference §A3): their definitions as
//! `tools/list` shows them, argument checking, and execution.
//!
//! Rules:
//! - Every tool has a `title`, a `description`, an `inputSchema` whose root is `type: "object"` (§A3.3; tools
//!   without parameters use the recommended `additionalProperties: false`) and explicit `annotations` (§A3.6), so a
//!   client never falls back to the pessimistic defaults.
//! - Arguments are checked against what the schema promises. A bad argument is a *tool execution error*: a
//!   `CallToolResult` with `isError: true` whose text says what to fix, so the model can correct itself (§A3.5,
//!   SEP-1303). Only an unknown tool is a protocol error, and the caller (`methods`) reports that.
//! - A tool with an `outputSchema` returns conforming `structuredContent` and, for older clients, the same JSON
//!   serialized in a text block (§A3.5 "SHOULD also return the serialized JSON").
//! - Definitions are built once per process; the hot path only reads them.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Map, Number, Value, json};

use super::sessions::{SessionId, Sessions};

/// The longest `sleep` accepted, so a call cannot hold a connection open for long.
pub const MAX_SLEEP_MS: u64 = 10_000;

/// One of the demo's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Echo,
    Add,
    Counter,
    Sleep,
    Fail,
}

/// Why a call's arguments were refused. The text is shown to the model, so it names the fix.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgumentError {
    #[error("missing required argument `{0}`")]
    Missing(&'static str),
    #[error("argument `{name}` must be {expected}")]
    WrongType { name: &'static str, expected: &'static str },
    #[error("argument `{name}` must be between {min} and {max}")]
    OutOfRange { name: &'static str, min: u64, max: u64 },
    #[error("unknown argument `{0}`; this tool accepts only the properties of its inputSchema")]
    Unknown(String),
    #[error("the sum does not fit in a JSON number")]
    SumOverflow,
}

/// Where a call runs: the caller's session, for the per-session `counter`.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub sessions: &'a Sessions,
    pub session: SessionId,
}

impl Tool {
    pub const ALL: [Tool; 5] = [Tool::Echo, Tool::Add, Tool::Counter, Tool::Sleep, Tool::Fail];

    pub fn named(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|tool| tool.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::Echo => "echo",
            Tool::Add => "add",
            Tool::Counter => "counter",
            Tool::Sleep => "sleep",
            Tool::Fail => "fail",
        }
    }

    /// Runs the tool and returns its `CallToolResult`; bad arguments become an `isError` result.
    pub async fn call(self, arguments: &Map<String, Value>, caller: Caller<'_>) -> Value {
        match self.run(arguments, caller).await {
            Ok(result) => result,
            // Not naming the tool: a gateway exposes it under another name (`demo__fail`), and the caller knows
            // which tool it called.
            Err(error) => error_result(&format!("invalid arguments: {error}")),
        }
    }

    async fn run(self, arguments: &Map<String, Value>, caller: Caller<'_>) -> Result<Value, ArgumentError> {
        let args = Args::checked(self, arguments)?;
        match self {
            Tool::Echo => Ok(text_result(args.string("text")?)),
            Tool::Add => Ok(structured_result(json!({"sum": sum(args.number("a")?, args.number("b")?)?}))),
            Tool::Counter => Ok(count(caller)),
            Tool::Sleep => {
                let ms = args.integer("ms", MAX_SLEEP_MS)?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(text_result(&format!("slept {ms} ms")))
            }
            Tool::Fail => Ok(error_result(args.string("message")?)),
        }
    }

    /// This tool's entry in `tools/list`.
    fn definition(self) -> Value {
        match self {
            Tool::Echo => json!({
                "name": "echo",
                "title": "Echo",
                "description": "Returns the given text unchanged.",
                "inputSchema": object_schema(json!({"text": {"type": "string", "description": "The text to return."}})),
                "annotations": annotations("Echo", true, true),
            }),
            Tool::Add => json!({
                "name": "add",
                "title": "Add two numbers",
                "description": "Adds two numbers and returns their sum, also as structured content.",
                "inputSchema": object_schema(json!({
                    "a": {"type": "number", "description": "The first addend."},
                    "b": {"type": "number", "description": "The second addend."},
                })),
                "outputSchema": object_schema(json!({"sum": {"type": "number", "description": "a + b"}})),
                "annotations": annotations("Add two numbers", true, true),
            }),
            Tool::Counter => json!({
                "name": "counter",
                "title": "Session counter",
                "description": "Adds one to a counter kept per MCP session and returns the new value. \
                                Each session counts on its own, starting at 1.",
                "inputSchema": object_schema(json!({})),
                "annotations": annotations("Session counter", false, false),
            }),
            Tool::Sleep => json!({
                "name": "sleep",
                "title": "Sleep",
                "description": format!("Waits the given number of milliseconds (at most {MAX_SLEEP_MS}), then \
                                        returns \"slept N ms\". Useful for trying timeouts and cancellation."),
                "inputSchema": object_schema(json!({"ms": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_SLEEP_MS,
                    "description": "How long to wait, in milliseconds.",
                }})),
                "annotations": annotations("Sleep", true, true),
            }),
            Tool::Fail => json!({
                "name": "fail",
                "title": "Fail",
                "description": "Always fails: returns a tool error (isError: true) carrying the given message. \
                                Useful for seeing how a client handles tool-level failures.",
                "inputSchema": object_schema(json!({"message": {
                    "type": "string",
                    "description": "The error message to return.",
                }})),
                "annotations": annotations("Fail", true, true),
            }),
        }
    }
}

/// The `tools/list` result: every tool on one page (no `nextCursor`, §A3.1), built once.
pub fn list_result() -> &'static Value {
    static LIST: OnceLock<Value> = OnceLock::new();
    LIST.get_or_init(|| json!({"tools": Tool::ALL.map(Tool::definition)}))
}

/// An input or output schema: an object with exactly these properties, all required.
fn object_schema(properties: Value) -> Value {
    let required: Vec<&String> = properties.as_object().map(|props| props.keys().collect()).unwrap_or_default();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// None of the demo's tools reaches outside the process, and none destroys anything.
fn annotations(title: &str, read_only: bool, idempotent: bool) -> Value {
    json!({
        "title": title,
        "readOnlyHint": read_only,
        "destructiveHint": false,
        "idempotentHint": idempotent,
        "openWorldHint": false,
    })
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn structured_result(structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": structured.to_string()}], "structuredContent": structured})
}

/// Integers stay integers (so `2 + 3` is `5`, not `5.0`); anything else is added as floating point.
fn sum(a: &Number, b: &Number) -> Result<Number, ArgumentError> {
    if let Some(sum) = a.as_i64().zip(b.as_i64()).and_then(|(a, b)| a.checked_add(b)) {
        return Ok(sum.into());
    }
    let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
    Number::from_f64(a + b).ok_or(ArgumentError::SumOverflow)
}

fn count(caller: Caller<'_>) -> Value {
    match caller.sessions.increment(caller.session) {
        Some(count) => text_result(&count.to_string()),
        // The session was ended by a concurrent DELETE; there is no counter left to report.
        None => error_result("this session has ended; start a new one to count again"),
    }
}

/// A call's arguments, already checked to name only properties the tool's schema declares.
struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    /// Refuses properties the schema does not declare: the schemas say `additionalProperties: false`, and a
    /// misspelt argument silently ignored would hide the model's mistake.
    fn checked(tool: Tool, arguments: &'a Map<String, Value>) -> Result<Args<'a>, ArgumentError> {
        let declared = tool_properties(tool);
        match arguments.keys().find(|key| !declared.is_some_and(|props| props.contains_key(key.as_str()))) {
            Some(unknown) => Err(ArgumentError::Unknown(unknown.clone())),
            None => Ok(Args(arguments)),
        }
    }

    fn get(&self, name: &'static str) -> Result<&'a Value, ArgumentError> {
        self.0.get(name).ok_or(ArgumentError::Missing(name))
    }

    fn string(&self, name: &'static str) -> Result<&'a str, ArgumentError> {
        self.get(name)?.as_str().ok_or(ArgumentError::WrongType { name, expected: "a string" })
    }

    fn number(&self, name: &'static str) -> Result<&'a Number, ArgumentError> {
        match self.get(name)? {
            Value::Number(number) => Ok(number),
            _ => Err(ArgumentError::WrongType { name, expected: "a number" }),
        }
    }

    /// A whole number in `0..=max`; JSON Schema's `integer` also admits `5.0`, so that is read as 5.
    fn integer(&self, name: &'static str, max: u64) -> Result<u64, ArgumentError> {
        let not_integer = ArgumentError::WrongType { name, expected: "an integer" };
        let number = match self.get(name)? {
            Value::Number(number) if number.as_f64().is_some_and(|value| value.fract() == 0.0) => number,
            _ => return Err(not_integer),
        };
        let out_of_range = ArgumentError::OutOfRange { name, min: 0, max };
        // Negative, huge and fractional values were excluded or fail here, so the float read is exact in range.
        match number.as_u64().or_else(|| number.as_f64().filter(|v| *v >= 0.0).map(|v| v as u64)) {
            Some(value) if value <= max => Ok(value),
            _ => Err(out_of_range),
        }
    }
}

/// The `properties` a tool's `inputSchema` declares, read from the cached definitions (the one source of truth).
fn tool_properties(tool: Tool) -> Option<&'static Map<String, Value>> {
    let tools = list_result()["tools"].as_array()?;
    let definition = tools.iter().find(|definition| definition["name"] == tool.name())?;
    definition["inputSchema"]["properties"].as_object()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("test arguments are an object")
    }

    async fn call(tool: Tool, arguments: Value) -> Value {
        let sessions = Sessions::default();
        let session = sessions.create();
        tool.call(&args(arguments), Caller { sessions: &sessions, session }).await
    }

    fn text(result: &Value) -> &str {
        result["content"][0]["text"].as_str().expect("a text block")
    }

    #[test]
    fn every_tool_is_listed_with_its_name_and_an_object_schema() {
        let tools = list_result()["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), Tool::ALL.len());
        for (tool, definition) in Tool::ALL.iter().zip(tools) {
            assert_eq!(definition["name"], tool.name());
            assert_eq!(Tool::named(tool.name()), Some(*tool));
            assert_eq!(definition["inputSchema"]["type"], "object");
            assert!(definition["title"].is_string() && definition["description"].is_string());
            assert!(definition["annotations"]["readOnlyHint"].is_boolean());
        }
        assert_eq!(Tool::named("nope"), None);
    }

    #[tokio::test]
    async fn add_keeps_integers_whole_and_adds_floats() {
        let result = call(Tool::Add, json!({"a": 2, "b": 3})).await;
        assert_eq!(result["structuredContent"], json!({"sum": 5}));
        assert_eq!(text(&result), r#"{"sum":5}"#);
        let result = call(Tool::Add, json!({"a": 0.5, "b": 0.25})).await;
        assert_eq!(result["structuredContent"]["sum"], 0.75);
        let result = call(Tool::Add, json!({"a": i64::MAX, "b": 1})).await;
        assert_eq!(result["structuredContent"]["sum"], 9_223_372_036_854_775_808.0);
        let result = call(Tool::Add, json!({"a": 1.0e308, "b": 1.0e308})).await;
        assert_eq!(result["isError"], true);
    }

    #[tokio::test]
    async fn bad_arguments_are_tool_errors_that_name_the_problem() {
        let cases = [
            (Tool::Echo, json!({}), "missing required argument `text`"),
            (Tool::Echo, json!({"text": 1}), "argument `text` must be a string"),
            (Tool::Add, json!({"a": "1", "b": 2}), "argument `a` must be a number"),
            (Tool::Sleep, json!({"ms": 10_001}), "argument `ms` must be between 0 and 10000"),
            (Tool::Sleep, json!({"ms": -1}), "argument `ms` must be between 0 and 10000"),
            (Tool::Sleep, json!({"ms": 1.5}), "argument `ms` must be an integer"),
            (Tool::Sleep, json!({}), "missing required argument `ms`"),
            (Tool::Counter, json!({"step": 2}), "unknown argument `step`"),
            (Tool::Fail, json!({}), "missing required argument `message`"),
        ];
        for (tool, arguments, expected) in cases {
            let result = call(tool, arguments).await;
            assert_eq!(result["isError"], true, "{tool:?}");
            let message = text(&result);
            assert!(message.starts_with(&format!("invalid arguments: {expected}")), "{tool:?}: {message}");
        }
    }

    #[tokio::test]
    async fn sleep_accepts_whole_floats() {
        assert_eq!(text(&call(Tool::Sleep, json!({"ms": 1.0})).await), "slept 1 ms");
    }
}
