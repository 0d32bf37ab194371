//! What a failed request leads to: a retry — at most one, and only after the backend
//! proved it did not process the request — or the failure the caller gets. A pure decision: the client carries
//! it out.
//!
//! Rules: a session the backend ended (HTTP `404` on a session id) is replaced; on the 2026-07-28 wire, a version
//! the backend does not serve (`-32022`) or a refusal without a JSON-RPC body (`400`/`405`: the backend may have
//! become a 2025-era server) forgets the era verdict so that the new session probes again, and a `tools/call` whose
//! `Mcp-Param-*` headers the backend found wrong (`-32020`) lists the backend's tools again and is resent on the
//! same session. Every other failure, and a second one, goes to the caller.

use super::error::{McpError, NotDeliveredCause};
use super::wire::failure::ExchangeError;
use crate::mcp::{jsonrpc, method};

/// What a failed request is retried with.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Retry {
    /// A new session (the old one ended, or the backend's era must be probed again).
    NewSession,
    /// The same session, once the backend's tools were listed again (what the request carries changed).
    SameSessionAfterListing,
}

/// The decision on a failed request: whether the session's era verdict is forgotten, and then the retry or the
/// failure.
#[derive(Debug)]
pub(super) struct Decision {
    pub(super) forget_era: bool,
    pub(super) then: Result<Retry, McpError>,
}

/// Decides what `error` (of a `method` request to `backend`) leads to; `retried`: this was already the retry.
pub(super) fn decide(backend: &str, method: &str, error: ExchangeError, retried: bool) -> Decision {
    let keep = |then| Decision { forget_era: false, then };
    let rejection = match error {
        ExchangeError::Failed(error) => return keep(Err(error)),
        ExchangeError::SessionGone if !retried => {
            tracing::info!(%backend, "backend ended the session; re-initializing");
            return keep(Ok(Retry::NewSession));
        }
        ExchangeError::SessionGone => {
            return keep(Err(McpError::NotDelivered {
                cause: NotDeliveredCause::SessionEnded,
                reason: "the backend ended the freshly initialized session too (404 twice)".into(),
            }));
        }
        ExchangeError::NotModern(error) => {
            tracing::info!(%backend, %error, "a 2026-07-28 request was refused without a JSON-RPC error");
            let then = if retried || !error.proves_not_delivered() { Err(error) } else { Ok(Retry::NewSession) };
            return Decision { forget_era: true, then };
        }
        ExchangeError::Rejected(rejection) => rejection,
    };
    match rejection.code {
        jsonrpc::UNSUPPORTED_PROTOCOL_VERSION if !retried => {
            tracing::info!(%backend, message = %rejection.message, "the backend refused our protocol version");
            Decision { forget_era: true, then: Ok(Retry::NewSession) }
        }
        jsonrpc::HEADER_MISMATCH if method == method::TOOLS_CALL && !retried => {
            tracing::info!(%backend, message = %rejection.message, "header mismatch; fetching the tool list again");
            keep(Ok(Retry::SameSessionAfterListing))
        }
        _ => keep(Err(rejection.into_error())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::mcp_client::wire::failure::Rejection;

    fn rejected(code: i64) -> ExchangeError {
        ExchangeError::Rejected(Rejection { status: 400, code, message: "no".into(), data: None })
    }

    #[test]
    fn only_a_first_failure_that_proves_no_delivery_is_retried() {
        assert_eq!(decide("b", "tools/call", ExchangeError::SessionGone, false).then.unwrap(), Retry::NewSession);
        assert!(decide("b", "tools/call", ExchangeError::SessionGone, true).then.is_err());
        let version = decide("b", "tools/call", rejected(jsonrpc::UNSUPPORTED_PROTOCOL_VERSION), false);
        assert!(version.forget_era && version.then.unwrap() == Retry::NewSession);
        let headers = decide("b", "tools/call", rejected(jsonrpc::HEADER_MISMATCH), false);
        assert_eq!(headers.then.unwrap(), Retry::SameSessionAfterListing);
        assert!(decide("b", "prompts/get", rejected(jsonrpc::HEADER_MISMATCH), false).then.is_err());
        let ended = McpError::AfterDelivery {
            cause: crate::backend::mcp_client::AfterDeliveryCause::Ended,
            reason: "x".into(),
        };
        let not_modern = decide("b", "tools/call", ExchangeError::NotModern(ended), false);
        assert!(not_modern.forget_era && not_modern.then.is_err(), "an answer that may have run is never resent");
    }
}
