//! `[[limits]]` with `methods = ["*"]` at the front: a request other than `tools/call` is admitted by the limits
//! that count every request, or refused with HTTP 429 and `Retry-After` ([`FrontError::Limited`]).
//!
//! Rules: a `tools/call` is left to the router, whose refusal is a tool result the agent can read; a request
//! admitted here holds its concurrency permits until its handler returns.

use super::Front;
use super::error::FrontError;
use crate::mcp::method::Method;
use crate::router::Caller;
use crate::router::limits::{Held, admit_request};

impl Front {
    /// Admits `caller`'s `method` request by the limits that count every request.
    pub(super) async fn admit_by_limits(&self, caller: &Caller, method: &Method) -> Result<Held, FrontError> {
        let routing = self.router.routing();
        // Boxed and only entered when configured, so an unlimited request's future stays small.
        if *method == Method::ToolsCall || !routing.limits.count_every_request() {
            return Ok(Held::default());
        }
        Box::pin(admit_request(&routing.limits, caller))
            .await
            .map_err(|refusal| FrontError::Limited { id: caller.request_id.clone(), refusal: Box::new(refusal) })
    }
}
