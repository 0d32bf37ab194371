//! Unit tests of the request record: what it reports once its last holder lets go.

use super::*;
use crate::telemetry::metrics::tests::sample;
use serde_json::json;

#[test]
fn a_tool_call_is_observed_and_counted_when_the_last_holder_drops_it() {
    let metrics = Arc::new(Metrics::new());
    let record = RequestRecord::start(Arc::clone(&metrics), "POST");
    record.principal("alice");
    record.session(&"0123");
    record.message("tools/call", true);
    let backend: Arc<str> = Arc::from("demo");
    let held_by_the_call = Arc::clone(&record);
    held_by_the_call.tool(&backend, "demo__fail");
    held_by_the_call.tool_outcome(ToolOutcome::ToolError);
    let counted = "switchyard_tool_calls_total{backend=\"demo\",tool=\"demo__fail\",outcome=\"tool_error\"}";
    assert_eq!(sample(&metrics.encode(), counted), Some(1.0), "counted as soon as the outcome is known");
    record.answered(&json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}}));
    record.responded(200);
    drop(record);
    let series = "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"demo__fail\",error_type=\"tool_error\"}";
    assert_eq!(sample(&metrics.encode(), series), None, "not observed while the call still holds it");
    drop(held_by_the_call);
    assert_eq!(sample(&metrics.encode(), series), Some(1.0));
}

#[test]
fn notifications_refusals_and_unrecorded_requests() {
    let metrics = Arc::new(Metrics::new());
    let note = RequestRecord::start(Arc::clone(&metrics), "POST");
    note.message("notifications/initialized", false);
    note.responded(202);
    drop(note);
    assert!(!metrics.encode().contains("notifications/initialized"), "a notification is no operation");
    let refused = RequestRecord::start(Arc::clone(&metrics), "POST");
    refused.message("tools/list", true);
    refused.refused(-32600);
    refused.responded(404);
    drop(refused);
    let series = "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/list\",gen_ai_tool_name=\"\",error_type=\"-32600\"}";
    assert_eq!(sample(&metrics.encode(), series), Some(1.0));
    let unknown = RequestRecord::start(Arc::clone(&metrics), "POST");
    unknown.message("tools/call", true);
    unknown.unknown_tool();
    unknown.tool_outcome(ToolOutcome::Denied);
    drop(unknown);
    let text = metrics.encode();
    assert!(!text.contains("switchyard_tool_calls_total{"), "an unknown tool is no backend's call:\n{text}");
    let series = "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"_unknown\",error_type=\"\"}";
    assert_eq!(sample(&text, series), Some(1.0));
    let detached = RequestRecord::unrecorded();
    detached.message("tools/list", true);
    drop(detached);
}
