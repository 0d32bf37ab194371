//! Which traces are recorded: the OpenTelemetry SDK samplers `always_on`, `always_off`, `traceidratio` and their
//! `parentbased_*` forms (OpenTelemetry SDK trace specification, "Built-in samplers").
//!
//! Rules: a parent-based sampler follows its parent's `sampled` flag (an agent's, or our own SERVER span's for a
//! CLIENT span) and asks its root sampler only for a span without a parent; the ratio sampler decides on the
//! trace id alone (its last 8 bytes), so every span of a trace gets the same answer in every process that uses
//! the same rule.

use super::context::{SpanContext, TraceId};

/// What decides for a span without a parent (or for every span, when not parent-based).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RootSampler {
    AlwaysOn,
    AlwaysOff,
    /// Records this share of traces, 0.0 to 1.0.
    TraceIdRatio(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    pub root: RootSampler,
    /// Whether a span with a parent follows the parent's decision.
    pub parent_based: bool,
}

impl Default for Sampler {
    /// `parentbased_always_on`, the OpenTelemetry default.
    fn default() -> Self {
        Sampler { root: RootSampler::AlwaysOn, parent_based: true }
    }
}

impl Sampler {
    /// Whether the span (of trace `trace_id`, under `parent`) is recorded.
    pub(super) fn samples(&self, parent: Option<&SpanContext>, trace_id: TraceId) -> bool {
        match parent {
            Some(parent) if self.parent_based => parent.sampled,
            _ => self.root.samples(trace_id),
        }
    }
}

impl RootSampler {
    fn samples(&self, trace_id: TraceId) -> bool {
        match *self {
            RootSampler::AlwaysOn => true,
            RootSampler::AlwaysOff => false,
            RootSampler::TraceIdRatio(ratio) => {
                // The last 8 bytes, halved, against ratio × 2⁶³: 1.0 takes all, 0.0 none.
                let bound = (ratio.clamp(0.0, 1.0) * (1u64 << 63) as f64) as u64;
                (trace_id.low() >> 1) < bound
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::context::SpanId;
    use super::*;

    fn trace(low: u64) -> TraceId {
        let mut bytes = [7u8; 16];
        bytes[8..].copy_from_slice(&low.to_be_bytes());
        TraceId(bytes)
    }

    fn parent(sampled: bool) -> SpanContext {
        SpanContext { trace_id: trace(1), span_id: SpanId([1; 8]), sampled, remote: true, trace_state: None }
    }

    #[test]
    fn root_samplers_decide_alone() {
        let on = Sampler { root: RootSampler::AlwaysOn, parent_based: false };
        let off = Sampler { root: RootSampler::AlwaysOff, parent_based: false };
        assert!(on.samples(None, trace(5)) && on.samples(Some(&parent(false)), trace(5)));
        assert!(!off.samples(None, trace(5)) && !off.samples(Some(&parent(true)), trace(5)));
    }

    #[test]
    fn the_ratio_decides_on_the_trace_id_alone() {
        let half = RootSampler::TraceIdRatio(0.5);
        assert!(half.samples(trace(0)));
        assert!(half.samples(trace((1 << 63) - 2)), "just below half of the range");
        assert!(!half.samples(trace(1 << 63)));
        assert!(!half.samples(trace(u64::MAX)));
        assert!(RootSampler::TraceIdRatio(1.0).samples(trace(u64::MAX)));
        assert!(!RootSampler::TraceIdRatio(0.0).samples(trace(0)));
        let sampled = (0..2000).filter(|_| half.samples(TraceId::random())).count();
        assert!((700..1300).contains(&sampled), "about half of random traces: {sampled}");
    }

    #[test]
    fn parent_based_samplers_follow_the_parent() {
        let sampler = Sampler { root: RootSampler::AlwaysOff, parent_based: true };
        assert!(sampler.samples(Some(&parent(true)), trace(5)));
        assert!(!sampler.samples(Some(&parent(false)), trace(5)));
        assert!(!sampler.samples(None, trace(5)));
        assert!(Sampler::default().samples(None, trace(5)));
        assert!(!Sampler::default().samples(Some(&parent(false)), trace(5)));
    }
}
