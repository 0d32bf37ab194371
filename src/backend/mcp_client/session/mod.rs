//! The session layer: one live backend session, whatever carries it — Streamable HTTP of the 2025 era or of
//! 2026-07-28, a stdio process, a legacy HTTP+SSE stream — how it is started in the backend's era, how one request
//! is sent on it, and what is known per backend (era, tools' headers, list-change streams, live processes). It
//! knows slots only as the key a session belongs to and the [`background::BackgroundStream`] a slot lends it; it
//! knows nothing of the session table, retries, metrics or traces' spans beyond the call's context.
//!
//! Files: the layer's state and API ([`sessions`]), the session type ([`transport`]), the 2025-era HTTP handshake
//! and request ([`http`]), the 2026-07-28 wire ([`modern`], [`tool_headers`], [`subscriptions`]), era verdicts
//! ([`era`], [`negotiate`]), the `initialize` params ([`params`]), a session's standalone stream
//! ([`standalone`]) and the slot's stream it lives in ([`background`]), a REST API's requests ([`rest`]), stdio process caps ([`processes`]), what
//! every operation shares ([`shared`]) and who hears messages outside calls ([`subscribers`]).

pub(crate) mod asked;
pub(crate) mod background;
pub(crate) mod era;
pub(crate) mod http;
pub(crate) mod modern;
pub(crate) mod negotiate;
pub(crate) mod params;
pub(crate) mod processes;
pub(crate) mod rest;
pub(crate) mod sessions;
pub(crate) mod shared;
pub(crate) mod standalone;
pub(crate) mod subscribers;
pub(crate) mod subscriptions;
pub(crate) mod tool_headers;
pub(crate) mod transport;
