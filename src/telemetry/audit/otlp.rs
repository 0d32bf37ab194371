//! The audit trail as OpenTelemetry log records: batches of events POSTed as an OTLP/HTTP JSON
//! `ExportLogsServiceRequest` (OTLP specification, "OTLP/HTTP"; `opentelemetry/proto/logs/v1/logs.proto`).
//!
//! Rules: a record's body is the event's line exactly as the file has it (so a consumer can check the chain), its
//! `eventName` is `switchyard.audit.<event>`, severity INFO (9); one resource and one scope per request. Events
//! wait in a bounded queue; a full queue drops them (counted with the file's drops), a refused batch is logged by
//! [`super::super::otlp_post`] and lost (the file, if any, keeps them).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::super::otlp_post::OtlpPost;

/// The most records in one request.
const MAX_BATCH: usize = 256;
/// The longest a record waits for its batch.
const BATCH_DELAY: Duration = Duration::from_secs(1);

/// One event as a log record will carry it.
pub(super) struct Record {
    pub(super) at: SystemTime,
    pub(super) kind: &'static str,
    pub(super) line: String,
}

/// Sends batches of records until every sender is gone.
pub(super) async fn run(mut records: mpsc::Receiver<Record>, mut post: OtlpPost, resource: Vec<(String, String)>) {
    let mut pending = Vec::with_capacity(MAX_BATCH);
    loop {
        let first = tokio::time::timeout(BATCH_DELAY, records.recv()).await;
        match first {
            Ok(Some(record)) => pending.push(record),
            Ok(None) => break,
            Err(_) => {}
        }
        while pending.len() < MAX_BATCH
            && let Ok(record) = records.try_recv()
        {
            pending.push(record);
        }
        if !pending.is_empty() {
            post.post(encode(&resource, &pending)).await;
            pending.clear();
        }
    }
    if !pending.is_empty() {
        post.post(encode(&resource, &pending)).await;
    }
}

/// The JSON body of one export.
pub(super) fn encode(resource: &[(String, String)], records: &[Record]) -> Vec<u8> {
    let text = |key: &str, value: &str| json!({"key": key, "value": {"stringValue": value}});
    let attributes: Vec<Value> = resource.iter().map(|(key, value)| text(key, value)).collect();
    let records: Vec<Value> = records
        .iter()
        .map(|record| {
            let nanos = record.at.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos().to_string();
            json!({
                "timeUnixNano": nanos,
                "observedTimeUnixNano": nanos,
                "severityNumber": 9,
                "severityText": "INFO",
                "eventName": format!("switchyard.audit.{}", record.kind),
                "body": {"stringValue": record.line},
                "attributes": [text("switchyard.audit.event", record.kind)],
            })
        })
        .collect();
    let scope = json!({"name": "switchyard.audit", "version": env!("CARGO_PKG_VERSION")});
    let body = json!({"resourceLogs": [{
        "resource": {"attributes": attributes},
        "scopeLogs": [{"scope": scope, "logRecords": records}],
    }]});
    body.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_carries_the_line_as_its_body() {
        let record = Record { at: UNIX_EPOCH + Duration::from_secs(2), kind: "reload", line: "{\"seq\":1}".into() };
        let body: Value =
            serde_json::from_slice(&encode(&[("service.name".into(), "s".into())], &[record])).expect("json");
        let logs = &body["resourceLogs"][0];
        assert_eq!(logs["resource"]["attributes"][0]["value"]["stringValue"], "s");
        let record = &logs["scopeLogs"][0]["logRecords"][0];
        assert_eq!(record["body"]["stringValue"], "{\"seq\":1}");
        assert_eq!(record["timeUnixNano"], "2000000000");
        assert_eq!(record["eventName"], "switchyard.audit.reload");
    }
}
