//! A REST API's session: `tools/list` answered from its OpenAPI document, `tools/call` sent as the operation's
//! HTTP request ([`crate::backend::openapi`]), on the client's one pooled HTTP client.
//!
//! Rules:
//! - Delivery classes as for every transport: a request that never left, or a refusal status of
//!   [`crate::backend::mcp_client::Refusal`], is `NotDelivered`; a lost answer (the connection ended, the deadline
//!   passed, the body broke off or outgrew the limit) is `AfterDelivery`. Any other answer, whatever its status, is
//!   the API's and becomes a result (outside 2xx an `isError` one).
//! - With `idempotency_header`, a non-safe operation's request carries a key derived from the call's ledger claim
//!   ([`idempotency_key`]), the same on every attempt; such a request (or an idempotent method, when
//!   `retry_idempotent_methods` allows) is sent again after a lost answer, up to `idempotent_retries` times within
//!   the call's deadline. Nothing else is ever sent twice.
//! - The credential goes where the operation's security requirement says ([`crate::backend::openapi::security`]);
//!   the OAuth token only when the requirement is filled by it (or the document declares none). OAuth as on the
//!   MCP wire: the stored token first, and after a 401 one more try with a fresh one.
//! - `ping` (the health probe) is a `HEAD` of the base URL, with the credential as configured: any answer shows
//!   the API reachable.

use base64::Engine as _;
use bytes::Bytes;
use http::Uri;
use http::header::{self, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::time::{Instant, timeout_at};

use super::shared::Shared;
use crate::backend::http_client::{self, Response};
use crate::backend::mcp_client::context::Call;
use crate::backend::mcp_client::endpoint::RestTarget;
use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError, NotDeliveredCause};
use crate::backend::mcp_client::fault::Fault;
use crate::backend::mcp_client::wire::authorize::Refused;
use crate::backend::mcp_client::wire::failure::{ExchangeError, classify_send_error, excerpt};
use crate::backend::mcp_client::wire::refusal::Refusal;
use crate::backend::oauth::AccessToken;
use crate::backend::openapi::{Operation, request, response};
use crate::mcp::{jsonrpc, method};
use crate::raw_json::RawJson;

/// What the REST transport answers `method` with.
pub(crate) async fn send(shared: &Shared, target: &RestTarget, call: Call<'_>) -> Result<RawJson, ExchangeError> {
    match call.method {
        method::TOOLS_LIST => Ok(RawJson::of(&target.api.tools)),
        method::PING => Ok(reach(shared, target, call).await?),
        method::TOOLS_CALL => Ok(call_tool(shared, target, call).await?),
        other => Err(rpc(jsonrpc::METHOD_NOT_FOUND, format!("a REST API serves tools only, not `{other}`")).into()),
    }
}

/// A health probe: any HTTP answer to a `HEAD` of the base URL shows the API is reachable (its status is the
/// API's business); only a failure to exchange is a failure.
async fn reach(shared: &Shared, target: &RestTarget, call: Call<'_>) -> Result<RawJson, McpError> {
    let mut parts = request::Parts::default();
    target.access.place(target.access.undeclared(), &mut parts);
    let (uri, headers) = address(target, parts)?;
    let request = http_client::request(http::Method::HEAD, &uri, headers, Bytes::new());
    match timeout_at(call.context.deadline(), shared.http.send(request)).await {
        Err(_) => Err(lost(AfterDeliveryCause::Deadline, "the API did not answer a HEAD request in time")),
        Ok(Err(error)) => Err(classify_send_error(&error)),
        Ok(Ok(_)) => Ok(RawJson::of(&json!({}))),
    }
}

/// The `initialize` result a REST API's session stands on: tools, nothing else.
pub(crate) fn capabilities() -> Value {
    json!({"tools": {}})
}

fn rpc(code: i64, message: String) -> McpError {
    McpError::Rpc { code, message, data: None }
}

async fn call_tool(shared: &Shared, target: &RestTarget, call: Call<'_>) -> Result<RawJson, McpError> {
    let params = call.params.unwrap_or(&Value::Null);
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let Some(operation) = target.api.operation(name) else {
        return Err(rpc(jsonrpc::INVALID_PARAMS, format!("no operation `{name}` in the API's document")));
    };
    let mut parts = request::build(operation, params.get("arguments"))
        .map_err(|error| rpc(jsonrpc::INVALID_PARAMS, error.to_string()))?;
    let plan = target.access.plan(operation);
    target.access.place(plan, &mut parts);
    let body = parts.body.take();
    let (uri, mut headers) = address(target, parts)?;
    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, */*;q=0.5"));
    let keyed = match (target.idempotency.header_for(operation), call.context.claim()) {
        (Some(name), Some(claim)) => {
            headers.insert(name.clone(), idempotency_key(claim));
            true
        }
        _ => false,
    };
    let body = match body {
        Some((media_type, bytes)) => {
            let media_type = HeaderValue::from_str(&media_type).map_err(|_| McpError::NotDelivered {
                cause: NotDeliveredCause::Encode,
                reason: format!("the media type `{media_type}` cannot be sent").into(),
            })?;
            headers.insert(header::CONTENT_TYPE, media_type);
            Bytes::from(bytes)
        }
        None => Bytes::new(),
    };
    let request = Prepared { shared, target, operation, oauth: plan.oauth, uri, headers, body, call };
    let retries = match target.idempotency.may_retry(operation, keyed) {
        true => target.idempotency.retries,
        false => 0,
    };
    let mut attempt = 0;
    loop {
        match request.attempt().await {
            Err(McpError::AfterDelivery { cause: AfterDeliveryCause::Ended, .. })
                if attempt < retries && Instant::now() < call.context.deadline() =>
            {
                attempt += 1;
                if let Some(span) = call.context.span() {
                    span.retry("idempotent");
                }
            }
            answer => return answer,
        }
    }
}

/// The URI and headers of a request of `parts` (its body aside) to the API.
fn address(target: &RestTarget, parts: request::Parts) -> Result<(Uri, HeaderMap), McpError> {
    let base = target.endpoint.url().as_str().trim_end_matches('/');
    let uri: Uri = format!("{base}{}", parts.target).parse().map_err(|error| McpError::NotDelivered {
        cause: NotDeliveredCause::Encode,
        reason: format!("the request URI is not valid: {error}").into(),
    })?;
    let mut headers = target.endpoint.common_headers().clone();
    for (name, value) in parts.headers {
        headers.append(name, value);
    }
    Ok((uri, headers))
}

/// The key a claim's requests carry: the claim key digested (SHA-256, base64url), so it is the same on every
/// attempt and every gateway replica, and says nothing of the principal or the agent's own key.
pub(crate) fn idempotency_key(claim: &str) -> HeaderValue {
    let digest = Sha256::digest(claim.as_bytes());
    let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// One call's request, ready to be sent as many times as it may be.
struct Prepared<'a> {
    shared: &'a Shared,
    target: &'a RestTarget,
    operation: &'a Operation,
    /// Whether the request carries the OAuth token (the operation's plan).
    oauth: bool,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    call: Call<'a>,
}

impl Prepared<'_> {
    /// Sends the request once (twice when OAuth refreshes its token) and reads its answer.
    async fn attempt(&self) -> Result<RawJson, McpError> {
        let Some(oauth) = self.target.endpoint.oauth().filter(|_| self.oauth) else {
            return self.answer(self.send(None).await?).await;
        };
        let principal = oauth.principal(self.call.context.principal().map(|p| &**p)).await?;
        let subject = self.call.context.subject_token();
        let first = oauth.before(&principal, subject).await?;
        let response = self.send(first.as_ref()).await?;
        let Some(refused) = Refused::of(&response) else { return self.answer(response).await };
        let second = oauth.after(&principal, subject, &refused, first.as_ref()).await?;
        self.answer(self.send(Some(&second)).await?).await
    }

    async fn send(&self, token: Option<&AccessToken>) -> Result<Response, McpError> {
        let mut headers = self.headers.clone();
        if let Some(token) = token {
            headers.insert(header::AUTHORIZATION, token.authorization().clone());
        }
        let method = self.operation.method.clone();
        let request = http_client::request(method, &self.uri, headers, self.body.clone());
        match timeout_at(self.call.context.deadline(), self.shared.http.send(request)).await {
            Err(_) => Err(lost(AfterDeliveryCause::Deadline, "the deadline passed while sending the request")),
            Ok(Err(error)) => Err(classify_send_error(&error)),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// The API's answer as a result, or the class of its failure.
    async fn answer(&self, mut response: Response) -> Result<RawJson, McpError> {
        let status = response.status();
        let content_type =
            response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = self.read(&mut response).await?;
        if let Some(refusal) = Refusal::of(status.as_u16()) {
            let reason = Fault::status(refusal.status(), &excerpt(&body));
            return Err(McpError::NotDelivered { cause: NotDeliveredCause::Refused, reason });
        }
        Ok(RawJson::of(&response::result(status, content_type.as_deref(), &body)))
    }

    async fn read(&self, response: &mut Response) -> Result<Vec<u8>, McpError> {
        let mut body = Vec::new();
        loop {
            let next = timeout_at(self.call.context.deadline(), http_client::next_chunk(response.body_mut())).await;
            match next {
                Err(_) => {
                    return Err(lost(AfterDeliveryCause::Deadline, "the deadline passed while reading the answer"));
                }
                Ok(Err(error)) => {
                    return Err(lost(AfterDeliveryCause::Ended, &format!("the answer broke off: {error}")));
                }
                Ok(Ok(None)) => return Ok(body),
                Ok(Ok(Some(chunk))) => {
                    body.extend_from_slice(&chunk);
                    if body.len() > self.shared.limit {
                        let problem = format!("the answer exceeded the {} byte limit", self.shared.limit);
                        return Err(lost(AfterDeliveryCause::Malformed, &problem));
                    }
                }
            }
        }
    }
}

fn lost(cause: AfterDeliveryCause, reason: &str) -> McpError {
    McpError::AfterDelivery { cause, reason: reason.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_has_one_key_and_claims_differ() {
        let key = idempotency_key("i5:alice:k1");
        assert_eq!(key, idempotency_key("i5:alice:k1"));
        assert_ne!(key, idempotency_key("i3:bob:k1"));
        assert_eq!(key.len(), 43, "SHA-256 in unpadded base64url");
        assert!(!key.to_str().unwrap().contains("alice"));
    }
}
