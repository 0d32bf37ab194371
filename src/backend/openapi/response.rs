//! An HTTP answer of a REST API as an MCP `CallToolResult`.
//!
//! Rules: a JSON body is the result's text and, when it is an object, its `structuredContent`; any other body is
//! text, cut at [`MAX_TEXT`] bytes (a body that is not UTF-8 is described, not shown); a status outside 2xx makes
//! the result an error (`isError: true`) whose text starts with the status.

use serde_json::{Value, json};

use super::body::is_json;

/// The most bytes of a non-JSON body shown to the agent.
pub const MAX_TEXT: usize = 64 * 1024;

/// The result for an answer with `status`, `content_type` and `body`.
pub fn result(status: http::StatusCode, content_type: Option<&str>, body: &[u8]) -> Value {
    let failed = !status.is_success();
    let json = content_type.is_some_and(is_json).then(|| serde_json::from_slice::<Value>(body).ok()).flatten();
    let shown = match &json {
        Some(_) => String::from_utf8_lossy(body).into_owned(),
        None => text(content_type, body),
    };
    let text = match failed {
        true => format!("HTTP {status}: {shown}"),
        false => shown,
    };
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    match (failed, json) {
        (true, _) => result["isError"] = Value::Bool(true),
        (false, Some(object @ Value::Object(_))) => result["structuredContent"] = object,
        (false, _) => {}
    }
    result
}

fn text(content_type: Option<&str>, body: &[u8]) -> String {
    let kind = content_type.unwrap_or("no content type");
    let Ok(text) = std::str::from_utf8(body) else {
        return format!("({} bytes of {kind}, not text)", body.len());
    };
    if text.len() <= MAX_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[cut: {} of {} bytes shown]", &text[..end], end, text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn answers_become_results() {
        let created = result(StatusCode::CREATED, Some("application/json"), br#"{"id":1}"#);
        assert_eq!(created["structuredContent"], json!({"id": 1}));
        assert_eq!(created["content"][0]["text"], r#"{"id":1}"#);
        let conflict = result(StatusCode::CONFLICT, Some("application/problem+json"), br#"{"title":"taken"}"#);
        assert_eq!(conflict["isError"], true);
        assert!(conflict["content"][0]["text"].as_str().unwrap().starts_with("HTTP 409 Conflict: "));
        assert!(conflict.get("structuredContent").is_none());
        let list = result(StatusCode::OK, Some("application/json"), b"[1]");
        assert!(list.get("structuredContent").is_none());
        let csv = result(StatusCode::OK, Some("text/csv"), &vec![b'a'; MAX_TEXT + 10]);
        assert!(csv["content"][0]["text"].as_str().unwrap().ends_with("[cut: 65536 of 65546 bytes shown]"));
        let binary = result(StatusCode::OK, Some("image/png"), &[0xff, 0xfe]);
        assert_eq!(binary["content"][0]["text"], "(2 bytes of image/png, not text)");
    }
}
