//! The wire layer: one JSON-RPC exchange with a backend over Streamable HTTP, of either era — the `POST`, the
//! answer as JSON or an SSE stream, the resumption of a stream that ended early, a standalone or listen stream
//! read to its end — and the error class of each way it can fail. It knows endpoints, ids, deadlines and bytes;
//! it knows nothing of sessions, slots or retries (a session's id and version reach it as plain values in
//! [`Wire`]).
//!
//! Files: the exchange ([`exchange`]) and the reading of its answer and of standalone streams ([`reading`]), why
//! it failed ([`failure`]), which statuses prove a refusal ([`refusal`]), the final response decoded without a
//! tree ([`response`]), where notifications go ([`notifications`]), responses on the wrong stream ([`strays`]),
//! and the OAuth token a protected backend's request carries ([`authorize`]).

pub(crate) mod authorize;
pub(crate) mod exchange;
pub(crate) mod failure;
pub(crate) mod notifications;
mod reading;
pub(crate) mod refusal;
pub(crate) mod response;
pub(crate) mod server_request;
pub(crate) mod strays;
