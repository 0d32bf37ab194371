//! What search mode says to an agent: the gateway tools' definitions and a search's result.
//!
//! Rules: a search's `structuredContent` lists each hit's `name`, `title`, `description` and `inputSchema` (what
//! the model needs to call it without another round trip); its text renders the same compactly — one line per
//! tool, then its parameters with their types and whether each is required — for clients that read text only.
//! A bad argument is a tool error (`isError`), so the model can correct it.

use std::fmt::Write;

use serde_json::{Value, json};

use super::{CALL_TOOL, DEFAULT_LIMIT, MAX_LIMIT, SEARCH_TOOL};

/// The longest description the text rendering shows, in characters (the structured hits carry it whole).
const TEXT_DESCRIPTION: usize = 300;

/// The definitions of `switchyard__search_tools` and `switchyard__call_tool`.
pub fn gateway_tools() -> Vec<Value> {
    let hit = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "inputSchema": {"type": "object"}
        },
        "required": ["name", "inputSchema"]
    });
    vec![
        json!({
            "name": SEARCH_TOOL,
            "title": "Search tools",
            "description": format!(
                "Find the tools for a task among every tool behind this gateway. Describe the task in a few words; \
                 the answer lists the best matching tools with their input schemas. Call one with {CALL_TOOL}, or \
                 directly by its name."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The task, in a few words (e.g. \"create a github issue\")"},
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                        "description": "How many tools to return"
                    }
                },
                "required": ["query"]
            },
            "outputSchema": {"type": "object", "properties": {"tools": {"type": "array", "items": hit}}, "required": ["tools"]},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": format!(
                "Call a tool {SEARCH_TOOL} found, by its name, with its arguments. The answer is that tool's own result."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": format!("The tool's name, exactly as {SEARCH_TOOL} gave it")},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema describes them"}
                },
                "required": ["name"]
            }
        }),
    ]
}

/// A search's result: the hits' definitions, structured and as text.
pub(super) fn found(query: &str, hits: &[Value]) -> Value {
    let tools: Vec<Value> = hits.iter().map(hit).collect();
    let text = match tools.is_empty() {
        true => format!("No tool matches \"{query}\". Try other words for the task, or fewer of them."),
        false => tools.iter().map(render).collect::<Vec<_>>().join("\n"),
    };
    json!({"content": [{"type": "text", "text": text}], "structuredContent": {"tools": tools}})
}

/// A gateway tool's refusal of its arguments, which the model can correct.
pub(super) fn refused(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn hit(definition: &Value) -> Value {
    let mut hit = json!({"name": definition["name"], "inputSchema": definition["inputSchema"]});
    for member in ["title", "description"] {
        if let Some(text) = definition.get(member).filter(|text| text.is_string()) {
            hit[member] = text.clone();
        }
    }
    hit
}

/// `name — title: description` then `  params: a: string (required), b: integer`.
fn render(hit: &Value) -> String {
    let text = |member: &str| hit.get(member).and_then(Value::as_str);
    let mut line = text("name").unwrap_or_default().to_owned();
    let description: String = text("description").unwrap_or_default().chars().take(TEXT_DESCRIPTION).collect();
    match (text("title"), description.is_empty()) {
        (Some(title), false) => _ = write!(line, " — {title}: {description}"),
        (Some(title), true) => _ = write!(line, " — {title}"),
        (None, false) => _ = write!(line, " — {description}"),
        (None, true) => {}
    }
    let schema = &hit["inputSchema"];
    let required = |name: &str| schema["required"].as_array().is_some_and(|names| names.iter().any(|n| n == name));
    let parameters: Vec<String> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, property)| {
            let kind = property.get("type").map_or_else(|| "any".to_owned(), |kind| kind.to_string().replace('"', ""));
            let marker = if required(name) { " (required)" } else { "" };
            format!("{name}: {kind}{marker}")
        })
        .collect();
    if !parameters.is_empty() {
        _ = write!(line, "\n  params: {}", parameters.join(", "));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_carries_what_a_call_needs_structured_and_as_text() {
        let definition = json!({"name": "github__create_issue", "title": "Create issue", "description": "Open one",
            "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}, "labels": {"type": "array"}},
                            "required": ["title"]},
            "annotations": {"readOnlyHint": false}});
        let answer = found("issue", std::slice::from_ref(&definition));
        let tools = &answer["structuredContent"]["tools"];
        assert_eq!(
            tools[0],
            json!({"name": "github__create_issue", "title": "Create issue", "description": "Open one",
                   "inputSchema": definition["inputSchema"]})
        );
        let text = answer["content"][0]["text"].as_str().expect("text");
        assert_eq!(
            text,
            "github__create_issue — Create issue: Open one\n  params: title: string (required), labels: array"
        );
        assert!(found("x", &[])["content"][0]["text"].as_str().is_some_and(|text| text.starts_with("No tool matches")));
        assert_eq!(found("x", &[])["structuredContent"], json!({"tools": []}));
    }
}
