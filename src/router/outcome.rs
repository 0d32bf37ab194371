//! How a failed tool call reads to an agent (design §5): a `CallToolResult` with `isError: true`, one sentence
//! an LLM can act on — did the call run, may it be retried — and the machine-readable outcome in
//! `_meta["switchyard/outcome"]`.

use serde_json::{Value, json};

use crate::backend::mcp_client::McpError;

pub const OUTCOME_META: &str = "switchyard/outcome";

/// The agent-facing result of a call that failed in the gateway or on the way.
pub fn failed_call(backend: &str, error: &McpError) -> Value {
    let (outcome, sentence) = if error.proves_not_delivered() {
        (
            "not_delivered",
            format!("The backend `{backend}` could not be reached; the call did not run; it is safe to retry."),
        )
    } else {
        (
            "unknown",
            format!(
                "The backend `{backend}` failed after receiving the call; it may have run; it was not repeated. Check its effects before retrying."
            ),
        )
    };
    json!({
        "content": [{"type": "text", "text": format!("{sentence} ({error})")}],
        "isError": true,
        "_meta": {OUTCOME_META: outcome},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_follows_the_error_class() {
        let refused = failed_call("github", &McpError::NotDelivered { reason: "refused".into() });
        assert_eq!(refused["_meta"][OUTCOME_META], "not_delivered");
        assert_eq!(refused["isError"], true);
        assert!(refused["content"][0]["text"].as_str().unwrap().contains("safe to retry"));
        let lost = failed_call("github", &McpError::AfterDelivery { reason: "reset".into() });
        assert_eq!(lost["_meta"][OUTCOME_META], "unknown");
        assert!(lost["content"][0]["text"].as_str().unwrap().contains("not repeated"));
        let status = failed_call("github", &McpError::HttpStatus { status: 500, body: String::new() });
        assert_eq!(status["_meta"][OUTCOME_META], "unknown", "an HTTP error may come after the tool ran");
    }
}
