//! What the client holds right now, per backend, for the operator's console: live backend sessions
//! (HTTP sessions, stdio processes' sessions, legacy SSE streams) and live stdio processes.
//!
//! Rules: a census (`McpBackendClient::census`) only reads — it takes the table's lock once and the process counters' lock once, never a
//! slot's handshake lock (a slot handshaking right now is skipped rather than waited for), so asking never
//! delays a call. Discovery's own session counts: the backend sees it like any other.

/// One backend's share of the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendCensus {
    /// Slots holding a live backend session.
    pub sessions: usize,
    /// Live stdio processes (0 for other transports).
    pub processes: usize,
}
