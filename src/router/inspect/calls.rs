//! The ledger's calls for the console: recent calls, filtered, and the calls whose outcome is `unknown` with what
//! `switchyard calls resolve` would do to each.
//!
//! Rules: the filters are the ledger's own (`switchyard calls` uses the same), so the console and the CLI always
//! agree; an outcome is a ledger state (`in_flight`, `completed`, `unknown`) — a tool that answered `isError` (or
//! a backend's JSON-RPC error) ran and is `completed`, flagged `tool_error`; calls that were not delivered or were refused by policy leave no
//! claim and are not listed. A duration is from the claim to its settlement by the gateway; an operator's
//! settlement is not a duration.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use super::super::CallRouter;
use crate::ledger::{ClaimRecord, ClaimState, LedgerError, ListFilter, OPERATOR, Resolution};
use crate::raw_json::RawJson;

/// Most calls one query returns.
pub const MAX_CALLS: usize = 1000;
/// Calls a query returns when it names no limit.
pub const DEFAULT_CALLS: usize = 100;

/// Why the console's question could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("unknown outcome `{0}`: expected in_flight, completed or unknown")]
    UnknownOutcome(String),
    #[error("the ledger cannot be read: {0}")]
    Ledger(#[from] LedgerError),
}

/// Which calls to list; every set field must match. Newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallQuery {
    pub backend: Option<String>,
    /// The backend's own tool name.
    pub tool: Option<String>,
    /// A ledger state: `in_flight`, `completed` or `unknown`.
    pub outcome: Option<String>,
    pub principal: Option<String>,
    /// At most this many (capped at [`MAX_CALLS`]).
    pub limit: usize,
}

/// One call as the console shows it.
#[derive(Debug, Serialize)]
pub struct CallView {
    /// The claim key (`switchyard calls show KEY`).
    pub key: String,
    pub principal: String,
    pub backend: String,
    pub tool: String,
    /// The ledger state: `in_flight`, `completed` or `unknown`.
    pub outcome: &'static str,
    /// Whether the backend answered with an error (a result with `isError: true`, or a JSON-RPC error), when
    /// its answer is stored (completed calls whose answer was not too large to keep).
    pub tool_error: Option<bool>,
    /// When the call was claimed, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// From the claim until the gateway settled it (completed, or declared unknown); none while in flight or
    /// once an operator settled it.
    pub duration_ms: Option<u64>,
    /// Why the outcome is unknown, or an operator's note.
    pub error: Option<String>,
}

/// An `unknown` call and the two ways an operator may settle it.
#[derive(Debug, Serialize)]
pub struct UnknownCall {
    #[serde(flatten)]
    pub call: CallView,
    pub resolve: Vec<ResolveOption>,
}

/// One way to settle an `unknown` call.
#[derive(Debug, Serialize)]
pub struct ResolveOption {
    /// "completed" (it ran) or "failed" (it did not).
    pub resolution: &'static str,
    /// The command that does it, quoted for a POSIX shell (run where the gateway's configuration is).
    pub command: String,
    pub effect: &'static str,
}

impl CallRouter {
    /// The ledger's calls matching `query`, newest first.
    pub async fn calls(&self, query: &CallQuery) -> Result<Vec<CallView>, InspectError> {
        let state = match query.outcome.as_deref() {
            Some(text) => Some(ClaimState::parse(text).ok_or_else(|| InspectError::UnknownOutcome(text.into()))?),
            None => None,
        };
        let filter = ListFilter {
            state,
            principal: query.principal.clone(),
            backend: query.backend.clone(),
            tool: query.tool.clone(),
            since: None,
            limit: query.limit.min(MAX_CALLS),
        };
        Ok(self.ledger.store.list(&filter).await?.iter().map(call_view).collect())
    }

    /// The calls whose outcome is `unknown`, newest first, at most `limit`.
    pub async fn unknown_calls(&self, limit: usize) -> Result<Vec<UnknownCall>, InspectError> {
        let filter =
            ListFilter { state: Some(ClaimState::Unknown), limit: limit.min(MAX_CALLS), ..ListFilter::default() };
        let records = self.ledger.store.list(&filter).await?;
        Ok(records
            .iter()
            .map(|record| UnknownCall { call: call_view(record), resolve: resolve_options(record) })
            .collect())
    }
}

fn call_view(record: &ClaimRecord) -> CallView {
    let settled = record.state != ClaimState::InFlight && record.owner != OPERATOR;
    // Answers are stored as the claims module replays them: `{"result": …}` or `{"error": …}`.
    let tool_error =
        record.result.as_ref().map(RawJson::to_value).map(|answer| {
            answer.get("error").is_some() || answer.pointer("/result/isError") == Some(&Value::Bool(true))
        });
    CallView {
        key: record.key.to_string(),
        principal: record.principal.clone(),
        backend: record.backend.clone(),
        tool: record.tool.clone(),
        outcome: record.state.as_str(),
        tool_error,
        started_ms: unix_ms(record.created_at),
        duration_ms: settled.then(|| millis(record.updated_at.duration_since(record.created_at).unwrap_or_default())),
        error: record.error.clone(),
    }
}

fn resolve_options(record: &ClaimRecord) -> Vec<ResolveOption> {
    let key = shell_quote(record.key.as_str());
    Resolution::ALL
        .into_iter()
        .map(|resolution| ResolveOption {
            resolution: match resolution {
                Resolution::Completed => "completed",
                Resolution::Failed => "failed",
            },
            command: format!("switchyard calls resolve {key} {}", resolution.flag()),
            effect: resolution.effect(),
        })
        .collect()
}

/// `text` as one word of a POSIX shell: bare when it holds only characters no shell treats specially, otherwise
/// single-quoted (a `'` inside becomes `'\''`). Claim keys carry principals and agents' ids, which may hold
/// anything printable.
pub(super) fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.,:/@%+=".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

pub(super) fn unix_ms(time: SystemTime) -> u64 {
    millis(time.duration_since(UNIX_EPOCH).unwrap_or_default())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::ClaimKey;
    use serde_json::json;

    fn record(state: ClaimState, result: Option<Value>, owner: &str) -> ClaimRecord {
        let created_at = UNIX_EPOCH + Duration::from_millis(1_000);
        ClaimRecord {
            key: ClaimKey::idempotency("alice", "k"),
            id: "0".repeat(32),
            principal: "alice".into(),
            session: "s".into(),
            backend: "docs".into(),
            tool: "search".into(),
            args_digest: String::new(),
            state,
            result: result.as_ref().map(RawJson::of),
            result_digest: None,
            error: None,
            created_at,
            updated_at: created_at + Duration::from_millis(250),
            owner: owner.into(),
            lease_until: created_at,
        }
    }

    #[test]
    fn a_call_shows_its_tool_error_and_duration() {
        let ok = call_view(&record(ClaimState::Completed, Some(json!({"result": {"content": []}})), "gw"));
        assert_eq!((ok.tool_error, ok.duration_ms, ok.started_ms), (Some(false), Some(250), 1_000));
        assert_eq!((ok.outcome, ok.key.as_str()), ("completed", "idem:5:alice:k"));
        let failed = record(ClaimState::Completed, Some(json!({"result": {"isError": true, "content": []}})), "gw");
        assert_eq!(call_view(&failed).tool_error, Some(true));
        let rpc_error = record(ClaimState::Completed, Some(json!({"error": {"code": -32602, "message": "no"}})), "gw");
        assert_eq!(call_view(&rpc_error).tool_error, Some(true), "the backend's JSON-RPC error");
        let digest_only = call_view(&record(ClaimState::Completed, None, "gw"));
        assert_eq!(digest_only.tool_error, None, "a result too large to keep says nothing");
        let running = call_view(&record(ClaimState::InFlight, None, "gw"));
        assert_eq!((running.outcome, running.duration_ms), ("in_flight", None));
        let settled = call_view(&record(ClaimState::Completed, None, OPERATOR));
        assert_eq!(settled.duration_ms, None, "an operator's settlement is not a duration");
        assert_eq!(
            call_view(&record(ClaimState::Unknown, None, "gw")).duration_ms,
            Some(250),
            "until declared unknown"
        );
    }

    #[test]
    fn each_unknown_call_offers_both_resolutions() {
        let options = resolve_options(&record(ClaimState::Unknown, None, "gw"));
        let commands: Vec<&str> = options.iter().map(|option| option.command.as_str()).collect();
        assert_eq!(
            commands,
            ["switchyard calls resolve idem:5:alice:k --completed", "switchyard calls resolve idem:5:alice:k --failed"]
        );
        assert_eq!(options[1].effect, Resolution::Failed.effect());
    }

    #[test]
    fn keys_are_quoted_for_a_shell() {
        assert_eq!(shell_quote("idem:5:alice:order-42"), "idem:5:alice:order-42");
        assert_eq!(shell_quote("idem:5:alice:it's 1"), r"'idem:5:alice:it'\''s 1'");
        assert_eq!(shell_quote("req:3:abc:\"x\""), "'req:3:abc:\"x\"'");
        assert_eq!(shell_quote("a$b`c"), "'a$b`c'");
        assert_eq!(shell_quote(""), "''");
    }
}
