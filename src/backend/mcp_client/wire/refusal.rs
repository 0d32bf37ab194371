//! Which HTTP error answers prove that a backend refused a request without processing it.
//!
//! The at-most-once promise rests on this table: a status classified here makes the call
//! [`McpError::NotDelivered`](crate::backend::mcp_client::McpError::NotDelivered), which releases its ledger claim so that a retry runs
//! the tool. So a status is listed only when its own definition says the request was not processed — never
//! because servers usually check it early. Everything else (every 5xx, every other 4xx) stays
//! [`McpError::HttpStatus`](crate::backend::mcp_client::McpError::HttpStatus), whose outcome is unknown.
//!
//! | status | class | why (the definition of the status) |
//! |---|---|---|
//! | 400 | not delivered | RFC 9110 §15.5.1: the server "cannot or will not process the request"; MCP answers a bad `MCP-Protocol-Version` or a missing session id with it (transports §"Protocol Version Header", §"Session Management" 2) |
//! | 401 | not delivered | RFC 9110 §15.5.2: "the request has not been applied because it lacks valid authentication credentials" (MCP authorization: invalid or expired token) |
//! | 403 | not delivered | RFC 9110 §15.5.4: the server "refuses to fulfill" the request (MCP: an invalid `Origin`, an insufficient scope) |
//! | 404 | session rule | with a session id: the backend ended the session and did not process the request (transports §"Session Management" 3–4; re-initialize and retry once); without one: unknown |
//! | 405 | not delivered | RFC 9110 §15.5.6: the method is "not supported by the target resource" |
//! | 411 | not delivered | RFC 9110 §15.5.12: the server "refuses to accept the request" without a length |
//! | 413 | not delivered | RFC 9110 §15.5.14: the server "is refusing to process a request because the request content is larger than [it] is willing or able to process" |
//! | 414 | not delivered | RFC 9110 §15.5.15: the server "is refusing to service the request because the target URI is longer than [it] is willing to interpret" |
//! | 415 | not delivered | RFC 9110 §15.5.16: the server "is refusing to service the request because the content is in a format not supported" |
//! | 421 | not delivered | RFC 9110 §15.5.20: clients "MAY retry the request — whether or not the request method is idempotent" |
//! | 429 | not delivered | RFC 6585 §4: rate limiting, "the user has sent too many requests"; the answer says when to make "a new request" |
//! | 431 | not delivered | RFC 6585 §5: the server "is unwilling to process the request because its header fields are too large" |
//! | 406 | unknown | RFC 9110 §15.5.7 speaks of the answer's representation, not of whether the request was applied |
//! | 408 | unknown | RFC 9110 §15.5.9 says the request was not received completely, but the client sends its whole body before reading any answer, so a 408 after that contradicts its own meaning; in practice it reports handler timeouts |
//! | 409 | unknown | RFC 9110 §15.5.10: a conflict with the resource's state, possibly found after partial work |
//! | other 4xx, 5xx | unknown | nothing in their definitions says the request was not processed (a 500, 502 or 504 may come after the tool ran) |

use std::fmt;

/// An HTTP status by which a backend refused a request without processing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    BadRequest,
    Unauthorized,
    Forbidden,
    MethodNotAllowed,
    LengthRequired,
    ContentTooLarge,
    UriTooLong,
    UnsupportedMediaType,
    MisdirectedRequest,
    TooManyRequests,
    HeaderFieldsTooLarge,
}

impl Refusal {
    /// The refusal a status proves, or `None` when the status does not prove the request went unprocessed.
    pub fn of(status: u16) -> Option<Refusal> {
        Some(match status {
            400 => Refusal::BadRequest,
            401 => Refusal::Unauthorized,
            403 => Refusal::Forbidden,
            405 => Refusal::MethodNotAllowed,
            411 => Refusal::LengthRequired,
            413 => Refusal::ContentTooLarge,
            414 => Refusal::UriTooLong,
            415 => Refusal::UnsupportedMediaType,
            421 => Refusal::MisdirectedRequest,
            429 => Refusal::TooManyRequests,
            431 => Refusal::HeaderFieldsTooLarge,
            _ => return None,
        })
    }

    pub fn status(self) -> u16 {
        match self {
            Refusal::BadRequest => 400,
            Refusal::Unauthorized => 401,
            Refusal::Forbidden => 403,
            Refusal::MethodNotAllowed => 405,
            Refusal::LengthRequired => 411,
            Refusal::ContentTooLarge => 413,
            Refusal::UriTooLong => 414,
            Refusal::UnsupportedMediaType => 415,
            Refusal::MisdirectedRequest => 421,
            Refusal::TooManyRequests => 429,
            Refusal::HeaderFieldsTooLarge => 431,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::BadRequest => "Bad Request",
            Refusal::Unauthorized => "Unauthorized",
            Refusal::Forbidden => "Forbidden",
            Refusal::MethodNotAllowed => "Method Not Allowed",
            Refusal::LengthRequired => "Length Required",
            Refusal::ContentTooLarge => "Content Too Large",
            Refusal::UriTooLong => "URI Too Long",
            Refusal::UnsupportedMediaType => "Unsupported Media Type",
            Refusal::MisdirectedRequest => "Misdirected Request",
            Refusal::TooManyRequests => "Too Many Requests",
            Refusal::HeaderFieldsTooLarge => "Request Header Fields Too Large",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {} {}", self.status(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_statuses_prove_a_refusal() {
        let refusals: Vec<u16> = (100..600).filter(|status| Refusal::of(*status).is_some()).collect();
        assert_eq!(refusals, [400, 401, 403, 405, 411, 413, 414, 415, 421, 429, 431]);
        for status in refusals {
            assert_eq!(Refusal::of(status).map(Refusal::status), Some(status), "the status round-trips");
        }
    }
}
