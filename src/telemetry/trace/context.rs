//! W3C Trace Context (https://www.w3.org/TR/trace-context/, §3.2 `traceparent`, §3.3 `tracestate`) as MCP carries it:
//! unprefixed `traceparent` and `tracestate` members of a request's `params._meta` (OpenTelemetry MCP semantic
//! conventions, "Context propagation"). Also the random trace and span ids of new spans.
//!
//! Rules: a `traceparent` is honoured only when it is exactly well formed — lowercase hex, version not `ff`,
//! version `00` exactly 55 characters, a later version at least 55 with a `-` after the known fields, trace id
//! and parent id not all zeros; anything else is ignored (the span starts a new trace). A `tracestate` travels
//! only with a valid `traceparent`, and only when it is at most 512 printable ASCII characters; otherwise it is
//! dropped. Ids come from a per-thread generator seeded from the operating system (they need to be unique, not
//! secret), and are never all zeros.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// The `_meta` members that carry the context.
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` passed on (the W3C limit for propagating it whole).
const MAX_TRACESTATE: usize = 512;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub(super) [u8; 16]);

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub(super) [u8; 8]);

impl TraceId {
    pub fn random() -> Self {
        let (high, low) = (next_random(), next_random());
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&high.to_be_bytes());
        bytes[8..].copy_from_slice(&low.max(1).to_be_bytes());
        Self(bytes)
    }

    /// The trace id's last 8 bytes, the part the ratio sampler decides on.
    pub(super) fn low(&self) -> u64 {
        let mut low = [0; 8];
        low.copy_from_slice(&self.0[8..]);
        u64::from_be_bytes(low)
    }
}

impl SpanId {
    pub fn random() -> Self {
        Self(next_random().max(1).to_be_bytes())
    }
}

/// Ids print as lowercase hex (their W3C and OTLP form), also in `Debug`.
macro_rules! hex_id {
    ($id:ident) => {
        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                crate::hex::write(&self.0, f)
            }
        }

        impl fmt::Debug for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($id))
            }
        }
    };
}

hex_id!(TraceId);
hex_id!(SpanId);

/// The identity of one span as it propagates: where it sits in its trace and whether the trace is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// The `sampled` trace flag.
    pub sampled: bool,
    /// Whether the context came from another process (an agent's `traceparent`).
    pub remote: bool,
    /// The vendors' `tracestate`, passed on unchanged.
    pub trace_state: Option<Arc<str>>,
}

impl SpanContext {
    /// The context an agent sent in a request's `params._meta`, if it sent a valid one.
    pub fn from_params(params: &Value) -> Option<SpanContext> {
        let meta = params.get("_meta")?;
        let text = |key| meta.get(key).and_then(Value::as_str);
        SpanContext::from_fields(text(TRACEPARENT), text(TRACESTATE))
    }

    /// The context of a `traceparent` and `tracestate` pair (from `_meta` or HTTP headers), if the `traceparent` is
    /// valid; an invalid `tracestate` is dropped.
    pub fn from_fields(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<SpanContext> {
        let (trace_id, span_id, flags) = parse_traceparent(traceparent?)?;
        let trace_state = tracestate.filter(|state| valid_tracestate(state));
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
            remote: true,
            trace_state: trace_state.map(Arc::from),
        })
    }

    /// The `traceparent` value naming this span as the parent (version `00`).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, u8::from(self.sampled))
    }

    /// Writes this context into `params._meta` (made an object when `params` is `null`), replacing any there, so the
    /// receiver continues this span. `params` or `_meta` of another type are left alone: they are not ours to fix.
    pub fn inject(&self, params: &mut Value) {
        if params.is_null() {
            *params = Value::Object(serde_json::Map::new());
        }
        let Some(params) = params.as_object_mut() else { return };
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(serde_json::Map::new()));
        let Some(meta) = meta.as_object_mut() else { return };
        meta.insert(TRACEPARENT.into(), Value::String(self.traceparent()));
        match &self.trace_state {
            Some(state) => meta.insert(TRACESTATE.into(), Value::String(state.to_string())),
            None => meta.remove(TRACESTATE),
        };
    }
}

/// (trace id, parent id, flags) of a well-formed `traceparent`.
fn parse_traceparent(text: &str) -> Option<(TraceId, SpanId, u8)> {
    let bytes = text.as_bytes();
    if bytes.len() < 55 || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let version = hex_byte(&bytes[0..2])?;
    let exact = match version {
        0xff => return None,
        0x00 => bytes.len() == 55,
        _ => bytes.len() == 55 || bytes[55] == b'-',
    };
    if !exact {
        return None;
    }
    let mut trace_id = [0; 16];
    for (byte, pair) in trace_id.iter_mut().zip(bytes[3..35].chunks_exact(2)) {
        *byte = hex_byte(pair)?;
    }
    let mut span_id = [0; 8];
    for (byte, pair) in span_id.iter_mut().zip(bytes[36..52].chunks_exact(2)) {
        *byte = hex_byte(pair)?;
    }
    let flags = hex_byte(&bytes[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some((TraceId(trace_id), SpanId(span_id), flags))
}

/// Two lowercase hex digits.
fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(pair[0])? << 4 | digit(pair[1])?)
}

fn valid_tracestate(text: &str) -> bool {
    !text.trim().is_empty() && text.len() <= MAX_TRACESTATE && text.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

thread_local! {
    static RANDOM: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let mut bytes = [0; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    // Ids must be unique, not secret: the clock and this thread's stack address still tell threads apart.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let local = 0u8;
    (now.as_nanos() as u64) ^ (std::ptr::from_ref(&local) as u64).rotate_left(32)
}

/// The next number of this thread's generator (wyrand: one multiply per number, full period).
fn next_random() -> u64 {
    RANDOM.with(|state| {
        let next = state.get().wrapping_add(0xa076_1d64_78bd_642f);
        state.set(next);
        let product = u128::from(next) * u128::from(next ^ 0xe703_7ed1_a0b4_28db);
        ((product >> 64) ^ product) as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn parsed(traceparent: &str) -> Option<SpanContext> {
        SpanContext::from_params(&json!({"_meta": {"traceparent": traceparent, "tracestate": "rojo=00f067aa0ba902b7"}}))
    }

    #[test]
    fn a_valid_traceparent_is_read_and_written_back() {
        let context = parsed(GOOD).expect("valid");
        assert_eq!(context.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.span_id.to_string(), "00f067aa0ba902b7");
        assert!(context.sampled && context.remote);
        assert_eq!(context.trace_state.as_deref(), Some("rojo=00f067aa0ba902b7"));
        assert_eq!(context.traceparent(), GOOD);
        let unsampled = parsed(&GOOD.replace("-01", "-00")).expect("valid");
        assert!(!unsampled.sampled);
        let future = parsed(&format!("cc{}-what-comes-next", &GOOD[2..])).expect("a later version may add fields");
        assert_eq!(future.span_id.to_string(), "00f067aa0ba902b7");
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        let bad = [
            "",
            "garbage",
            &GOOD[..54],
            &format!("{GOOD}-extra"),
            &GOOD.to_uppercase(),
            &GOOD.replacen("00", "ff", 1),
            &format!("cc{}x", &GOOD[2..]),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        ];
        for traceparent in bad {
            assert_eq!(parsed(traceparent), None, "{traceparent:?} must be ignored");
        }
        for params in [json!(null), json!({}), json!({"_meta": {"traceparent": 7}}), json!({"_meta": "x"})] {
            assert_eq!(SpanContext::from_params(&params), None, "{params}");
        }
    }

    #[test]
    fn a_bad_tracestate_is_dropped_but_the_traceparent_kept() {
        for state in [json!(""), json!("a=\u{7f}"), json!("x".repeat(513)), json!(3)] {
            let context = SpanContext::from_params(&json!({"_meta": {"traceparent": GOOD, "tracestate": state}}));
            assert_eq!(context.expect("traceparent valid").trace_state, None, "{state}");
        }
    }

    #[test]
    fn injection_replaces_the_context_and_keeps_other_members() {
        let context = parsed(GOOD).expect("valid");
        let mut params = json!({"name": "t", "_meta": {"progressToken": 1, "traceparent": "old", "tracestate": "old"}});
        context.inject(&mut params);
        assert_eq!(
            params["_meta"],
            json!({"progressToken": 1, "traceparent": GOOD, "tracestate": "rojo=00f067aa0ba902b7"})
        );
        let mut empty = Value::Null;
        SpanContext { trace_state: None, ..context.clone() }.inject(&mut empty);
        assert_eq!(empty, json!({"_meta": {"traceparent": GOOD}}));
        let mut odd = json!({"_meta": "not an object"});
        context.inject(&mut odd);
        assert_eq!(odd, json!({"_meta": "not an object"}));
    }

    #[test]
    fn random_ids_are_never_zero_and_differ() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| SpanId::random()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(!ids.contains(&SpanId([0; 8])));
        assert_ne!(TraceId::random(), TraceId::random());
    }
}
