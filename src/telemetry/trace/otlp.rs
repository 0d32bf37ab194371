//! The OTLP/HTTP JSON encoding of a batch of spans: an `ExportTraceServiceRequest` in the protobuf JSON mapping
//! (OTLP specification, "JSON Protobuf Encoding"; `opentelemetry/proto/trace/v1/trace.proto`).
//!
//! Rules: field names are lowerCamelCase; trace and span ids are lowercase hex strings (not base64, as OTLP
//! requires); 64-bit integers (times, `intValue`) are decimal strings; enums are their numbers (kind SERVER 2,
//! CLIENT 3; status UNSET 0, ERROR 2). A span's `flags` carry its trace flags and, when it has a parent, whether that parent is remote.
//! One resource and one instrumentation scope per request.

use serde::Serialize;

use super::span::{Attr, AttrValue, Event, Kind, SpanRecord};

/// The instrumentation scope of every span.
const SCOPE_NAME: &str = "switchyard";
/// `SpanFlags`: the parent's remoteness is known (bit 8), and it is remote (bit 9).
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// The JSON body of one export.
pub fn encode(resource: &[(String, String)], spans: &[SpanRecord]) -> Vec<u8> {
    let request = ExportRequest {
        resource_spans: [ResourceSpans {
            resource: Resource {
                attributes: resource
                    .iter()
                    .map(|(key, value)| KeyValue { key, value: AnyValue::Text(value.clone()) })
                    .collect(),
            },
            scope_spans: [ScopeSpans {
                scope: Scope { name: SCOPE_NAME, version: env!("CARGO_PKG_VERSION") },
                spans: spans.iter().map(Span::of).collect(),
            }],
        }],
    };
    // Serializing these plain structs cannot fail (no maps with non-string keys, no foreign Serialize impls).
    serde_json::to_vec(&request).unwrap_or_default()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExportRequest<'a> {
    resource_spans: [ResourceSpans<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    resource: Resource<'a>,
    scope_spans: [ScopeSpans<'a>; 1],
}

#[derive(Serialize)]
struct Resource<'a> {
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Serialize)]
struct ScopeSpans<'a> {
    scope: Scope,
    spans: Vec<Span<'a>>,
}

#[derive(Serialize)]
struct Scope {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Span<'a> {
    trace_id: String,
    span_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_state: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_span_id: Option<String>,
    flags: u32,
    name: &'a str,
    kind: u8,
    start_time_unix_nano: String,
    end_time_unix_nano: String,
    attributes: Vec<KeyValue<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    events: Vec<SpanEvent<'a>>,
    status: Status<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SpanEvent<'a> {
    time_unix_nano: String,
    name: &'a str,
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Serialize)]
struct Status<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    code: u8,
}

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'a str,
    value: AnyValue,
}

/// OTLP's `AnyValue`, one member named for its type.
#[derive(Serialize)]
enum AnyValue {
    #[serde(rename = "stringValue")]
    Text(String),
    /// int64, written as a decimal string.
    #[serde(rename = "intValue")]
    Int(String),
    #[cfg(test)]
    #[serde(rename = "boolValue")]
    Bool(bool),
}

impl<'a> Span<'a> {
    fn of(record: &'a SpanRecord) -> Self {
        let remote = match record.parent {
            Some((_, true)) => HAS_IS_REMOTE | IS_REMOTE,
            Some((_, false)) => HAS_IS_REMOTE,
            None => 0,
        };
        Span {
            trace_id: record.context.trace_id.to_string(),
            span_id: record.context.span_id.to_string(),
            trace_state: record.context.trace_state.as_deref(),
            parent_span_id: record.parent.map(|(id, _)| id.to_string()),
            flags: u32::from(record.context.sampled) | remote,
            name: &record.name,
            kind: match record.kind {
                Kind::Server => 2,
                Kind::Client => 3,
            },
            start_time_unix_nano: record.start.to_string(),
            end_time_unix_nano: record.end.to_string(),
            attributes: attributes(&record.attributes, record.failure.as_ref().map(|f| f.error_type.as_str())),
            events: record.events.iter().map(SpanEvent::of).collect(),
            status: match &record.failure {
                Some(failure) => Status { message: failure.message.as_deref(), code: 2 },
                None => Status { message: None, code: 0 },
            },
        }
    }
}

impl<'a> SpanEvent<'a> {
    fn of(event: &'a Event) -> Self {
        SpanEvent {
            time_unix_nano: event.at.to_string(),
            name: event.name,
            attributes: attributes(&event.attributes, None),
        }
    }
}

/// The span's attributes, `error.type` included when it failed.
fn attributes<'a>(attributes: &'a [Attr], error_type: Option<&'a str>) -> Vec<KeyValue<'a>> {
    let error = error_type.map(|error| KeyValue { key: "error.type", value: AnyValue::Text(error.to_owned()) });
    attributes.iter().map(KeyValue::of).chain(error).collect()
}

impl<'a> KeyValue<'a> {
    fn of(attribute: &'a Attr) -> Self {
        let value = match &attribute.value {
            AttrValue::Text(text) => AnyValue::Text(text.clone()),
            AttrValue::Int(number) => AnyValue::Int(number.to_string()),
            #[cfg(test)]
            AttrValue::Bool(flag) => AnyValue::Bool(*flag),
        };
        KeyValue { key: attribute.key, value }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::super::context::{SpanContext, SpanId, TraceId};
    use super::*;

    fn record(parent: Option<&SpanContext>, kind: Kind) -> SpanRecord {
        let context = SpanContext {
            trace_id: TraceId([0xab; 16]),
            span_id: SpanId([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
            sampled: true,
            remote: false,
            trace_state: Some(Arc::from("k=v")),
        };
        let mut record = SpanRecord::start(context, parent, "tools/call echo".into(), kind);
        record.attributes =
            vec![Attr::text("mcp.method.name", "tools/call"), Attr::int("server.port", 8080), Attr::bool("b", true)];
        record.event("switchyard.handshake", vec![Attr::text("mcp.protocol.version", "2025-11-25")]);
        record.end();
        record
    }

    #[test]
    fn a_batch_is_an_export_trace_service_request_in_protobuf_json() {
        let agent = SpanContext {
            trace_id: TraceId([0xab; 16]),
            span_id: SpanId([0xff; 8]),
            sampled: true,
            remote: true,
            trace_state: None,
        };
        let mut server = record(Some(&agent), Kind::Server);
        server.fail("tool_error", Some("the tool failed"));
        let client = record(None, Kind::Client);
        let resource = [("service.name".to_owned(), "gw".to_owned())];
        let body: Value = serde_json::from_slice(&encode(&resource, &[server.clone(), client])).expect("JSON");
        let resource_spans = &body["resourceSpans"][0];
        assert_eq!(
            resource_spans["resource"]["attributes"],
            json!([{"key": "service.name", "value": {"stringValue": "gw"}}])
        );
        let scope_spans = &resource_spans["scopeSpans"][0];
        assert_eq!(scope_spans["scope"]["name"], "switchyard");
        let spans = scope_spans["spans"].as_array().expect("spans");
        assert_eq!(spans.len(), 2);
        let first = &spans[0];
        assert_eq!(first["traceId"], "abababababababababababababababab");
        assert_eq!(first["spanId"], "0102030405060708");
        assert_eq!(first["parentSpanId"], "ffffffffffffffff");
        assert_eq!(first["traceState"], "k=v");
        assert_eq!(first["flags"], 0x301, "sampled, parent remote");
        assert_eq!(first["kind"], 2);
        assert_eq!(first["name"], "tools/call echo");
        assert_eq!(first["startTimeUnixNano"], server.start.to_string());
        assert_eq!(first["endTimeUnixNano"], server.end.to_string());
        assert!(server.end >= server.start);
        assert_eq!(
            first["attributes"],
            json!([
                {"key": "mcp.method.name", "value": {"stringValue": "tools/call"}},
                {"key": "server.port", "value": {"intValue": "8080"}},
                {"key": "b", "value": {"boolValue": true}},
                {"key": "error.type", "value": {"stringValue": "tool_error"}},
            ])
        );
        assert_eq!(first["status"], json!({"code": 2, "message": "the tool failed"}));
        let event = &first["events"][0];
        assert_eq!(event["name"], "switchyard.handshake");
        assert!(event["timeUnixNano"].is_string());
        assert_eq!(event["attributes"][0]["value"]["stringValue"], "2025-11-25");
        let second = &spans[1];
        assert_eq!(second["kind"], 3);
        assert!(second.get("parentSpanId").is_none(), "a root span has no parent");
        assert_eq!(second["flags"], 0x01, "sampled, no parent");
        assert_eq!(second["status"], json!({"code": 0}));
    }
}
