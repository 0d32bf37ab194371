//! How a tool call that did not simply succeed reads to an agent: a `CallToolResult` with
//! `isError: true`, one sentence an LLM can act on — did the call run, may it be retried, and the backend's
//! failure in the one sentence every report of it uses ([`Failure`]; without addresses, commands or stderr for a
//! caller that may not read the console) — and the machine-readable [`Outcome`] in `_meta["switchyard/outcome"]`
//! (`not_delivered` | `unknown` | `in_progress` | `completed`), with the ledger key in `_meta["switchyard/claim"]`
//! when there is one.

use serde_json::{Map, Value, json};

use crate::backend::mcp_client::{Audience, BackendTarget, Failure, McpError};
use crate::ledger::{ClaimKey, ClaimRecord, LedgerError};
pub use crate::mcp::OUTCOME_META;
use crate::mcp::Outcome;

pub const CLAIM_META: &str = "switchyard/claim";
/// Whole seconds after which a call a limit refused may succeed.
pub const RETRY_AFTER_META: &str = "switchyard/retry-after";

/// Which backend a failure is reported of, and to whom: what its sentence needs besides the error.
#[derive(Clone, Copy)]
pub struct Report<'a> {
    pub backend: &'a str,
    pub target: &'a BackendTarget,
    pub audience: Audience,
}

impl Report<'_> {
    /// The failure's sentence ([`Failure`]).
    pub fn sentence(&self, error: &McpError) -> String {
        let place = self.target.place();
        Failure { backend: self.backend, place: &place, error, audience: self.audience }.to_string()
    }
}

/// The result of a call that failed on the way to or from the backend.
pub fn failed_call(report: &Report<'_>, error: &McpError, claim: Option<&ClaimKey>) -> Value {
    let backend = report.backend;
    if let McpError::Cancelled = error {
        let sentence = format!(
            "The call to `{backend}` was cancelled at your request after the backend received it; it may have partly run; it was not repeated."
        );
        return error_result(Outcome::Unknown, &sentence, claim, Answer::ThisCall);
    }
    if let McpError::AuthorizationRequired { url: Some(url), .. } = error {
        let sentence = format!(
            "The backend `{backend}` needs your authorization first; the call was not sent. Ask the user to open {url} and authorize access, then retry the call."
        );
        return error_result(Outcome::NotDelivered, &sentence, claim, Answer::ThisCall);
    }
    let failure = report.sentence(error);
    if error.proves_not_delivered() {
        let sentence = format!("The call did not run; it is safe to retry. Why: {failure}.");
        return error_result(Outcome::NotDelivered, &sentence, claim, Answer::ThisCall);
    }
    let sentence = format!(
        "The call may have run (the backend may have received it); it was not repeated. Check its effects before retrying. Why: {failure}."
    );
    error_result(Outcome::Unknown, &sentence, claim, Answer::ThisCall)
}

/// The tool may belong to a backend whose first discovery had not ended within `[server] discovery_wait`.
pub fn backend_starting(backend: &str) -> Value {
    let sentence = format!(
        "The backend `{backend}` is starting: the gateway has not finished discovering its tools, so the call was not sent; it did not run; retry in a few seconds."
    );
    error_result(Outcome::NotDelivered, &sentence, None, Answer::ThisCall)
}

/// The ledger could not record the call, so it was not sent (fail closed).
pub fn ledger_unavailable(error: &LedgerError) -> Value {
    let sentence = format!(
        "The gateway could not record the call in its ledger ({error}); the call did not run; it is safe to retry once the ledger is back."
    );
    error_result(Outcome::NotDelivered, &sentence, None, Answer::ThisCall)
}

/// A `[[limits]]` entry refused the call (`sentence` says which, and when to retry): it was not sent.
pub fn limited(sentence: &str, retry_after: u64) -> Value {
    let mut result = error_result(Outcome::NotDelivered, sentence, None, Answer::ThisCall);
    result["_meta"][RETRY_AFTER_META] = retry_after.into();
    result
}

/// A duplicate found the first call still running past its own deadline.
pub fn in_progress(first: &ClaimRecord) -> Value {
    let sentence = "The same call is still running (started by an earlier request with this key); it was not started again. Retry later with the same key to get its result.";
    error_result(Outcome::InProgress, sentence, Some(&first.key), Answer::ThisCall)
}

/// A call still running when the gateway's shutdown drain ran out: the gateway stops waiting for it, and will
/// mark its claim `unknown` before it exits.
pub fn shut_down() -> Value {
    let sentence = "The gateway is shutting down and stopped waiting for this call, which may have reached the backend and run; it was not repeated. Check its effects before retrying.";
    error_result(Outcome::Unknown, sentence, None, Answer::ThisCall)
}

/// A retry continued a call whose replica is gone (it stopped answering the fleet): the call is lost with it.
pub fn replica_gone(claim: &ClaimKey) -> Value {
    let sentence = "The gateway replica running the call this retry continues is gone, so the call could not go on; it reached the backend and may have partly run; it was not repeated. Check its effects before retrying.";
    error_result(Outcome::Unknown, sentence, Some(claim), Answer::ThisCall)
}

/// A duplicate kept finding the key claimed and released by others.
pub fn in_progress_unclaimed() -> Value {
    let sentence = "The same call is being retried by other requests with this key; it was not started again. Retry later with the same key.";
    error_result(Outcome::InProgress, sentence, None, Answer::ThisCall)
}

/// A duplicate of a call whose outcome is unknown. Why it is unknown is the operator's text (a backend's failure
/// with its stderr, say), so `audience` [`Audience::Agent`] is not told.
pub fn unknown_duplicate(first: &ClaimRecord, audience: Audience) -> Value {
    let why = match (first.error.as_deref(), audience) {
        (_, Audience::Agent) => String::new(),
        (Some(why), Audience::Operator) => format!(" ({why})"),
        (None, Audience::Operator) => " (the gateway stopped while it ran)".to_owned(),
    };
    let sentence = format!(
        "An earlier call with this key reached the backend `{}` but its outcome is unknown{why}; it was not repeated. Check its effects; an operator can settle it with `switchyard calls resolve`.",
        first.backend
    );
    error_result(Outcome::Unknown, &sentence, Some(&first.key), Answer::Replayed)
}

/// A duplicate of a completed call whose result was not kept (too large, or settled by an operator).
pub fn settled_without_result(first: &ClaimRecord) -> Value {
    let sentence = match &first.result_digest {
        Some(_) => {
            "An earlier call with this key completed, but its result was too large to keep; it was not repeated."
        }
        None => "An earlier call with this key was marked completed by an operator; it was not repeated.",
    };
    error_result(Outcome::Completed, sentence, Some(&first.key), Answer::Replayed)
}

/// Whom a result answers for: this call, or an earlier call with the same key (marked `switchyard/replayed`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    ThisCall,
    Replayed,
}

fn error_result(outcome: Outcome, text: &str, claim: Option<&ClaimKey>, answer: Answer) -> Value {
    let mut meta = Map::new();
    meta.insert(OUTCOME_META.into(), outcome.into());
    if let Some(claim) = claim {
        meta.insert(CLAIM_META.into(), claim.as_str().into());
    }
    if answer == Answer::Replayed {
        meta.insert(super::claims::REPLAYED_META.into(), true.into());
    }
    json!({"content": [{"type": "text", "text": text}], "isError": true, "_meta": meta})
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::mcp_client::{AfterDeliveryCause, BackendEndpoint, Fault, NotDeliveredCause};

    fn target() -> BackendTarget {
        let url = "http://admin:pw@10.0.0.5:9000/mcp?token=t0ken".parse().expect("url");
        BackendEndpoint::new(url, Duration::from_secs(5)).into()
    }

    fn text(result: &Value) -> &str {
        result["content"][0]["text"].as_str().expect("a text")
    }

    #[test]
    fn outcome_follows_the_error_class() {
        let target = target();
        let report = Report { backend: "github", target: &target, audience: Audience::Operator };
        let refused = McpError::NotDelivered {
            cause: NotDeliveredCause::Connect,
            reason: Fault::ConnectionRefused { address: "10.0.0.5:9000".into() },
        };
        let refused = failed_call(&report, &refused, None);
        assert_eq!(refused["_meta"][OUTCOME_META], "not_delivered");
        assert_eq!(refused["isError"], true);
        assert!(text(&refused).contains("safe to retry"));
        let key = ClaimKey::request("s", &json!(1));
        let lost =
            McpError::AfterDelivery { cause: AfterDeliveryCause::Ended, reason: "the connection was reset".into() };
        let lost = failed_call(&report, &lost, Some(&key));
        assert_eq!(lost["_meta"][OUTCOME_META], "unknown");
        assert_eq!(lost["_meta"][CLAIM_META], key.as_str());
        assert!(text(&lost).contains("not repeated"));
        let status = failed_call(&report, &McpError::HttpStatus { status: 500, body: String::new() }, None);
        assert_eq!(status["_meta"][OUTCOME_META], "unknown", "an HTTP error may come after the tool ran");
    }

    #[test]
    fn only_an_operator_reads_where_the_backend_is() {
        let target = target();
        let refused = McpError::NotDelivered {
            cause: NotDeliveredCause::Connect,
            reason: Fault::ConnectionRefused { address: "10.0.0.5:9000".into() },
        };
        let operator = Report { backend: "github", target: &target, audience: Audience::Operator };
        let told = failed_call(&operator, &refused, None);
        assert!(
            text(&told).contains("backend `github` (http://10.0.0.5:9000/mcp): connection refused at 10.0.0.5:9000")
        );
        assert!(!text(&told).contains("t0ken") && !text(&told).contains("pw"), "no secret of the URL: {told}");
        let agent = Report { audience: Audience::Agent, ..operator };
        let told = failed_call(&agent, &refused, None);
        assert!(text(&told).contains("backend `github`: the connection was refused"), "{told}");
        assert!(!text(&told).contains("10.0.0.5"), "no address: {told}");
    }
}
