//! The series of [`super::Metrics`]' families: their label sets, the duration histograms' constructor, the
//! bookkeeping that lets a removed backend's series be dropped, and [`Counted`], a gauge held up while something
//! lives.
//!
//! Rules: a label set holds only bounded values (`&'static str` from fixed lists, interned `Arc<str>` names); a
//! series labelled with more than a backend is noted when created ([`BackendSeries::note`]), so
//! [`drop_series`] can find it when a reload removes that backend.

use std::collections::HashSet;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::BUCKETS;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ServerLabels {
    pub(super) mcp_method_name: &'static str,
    pub(super) gen_ai_tool_name: Arc<str>,
    pub(super) error_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ClientLabels {
    pub(super) mcp_method_name: &'static str,
    pub(super) gen_ai_tool_name: Arc<str>,
    pub(super) error_type: &'static str,
    pub(super) backend: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ToolCallLabels {
    pub(super) backend: Arc<str>,
    pub(super) tool: Arc<str>,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BackendLabels {
    pub(super) backend: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabels {
    pub(super) state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct MethodLabels {
    pub(super) method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DecisionLabels {
    pub(super) decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LimitLabels {
    pub(super) limit: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: &'static str,
}

pub(super) type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

pub(super) fn duration_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

#[derive(Default)]
pub(super) struct BackendSeries {
    pub(super) client_duration: Vec<ClientLabels>,
    pub(super) tool_calls: Vec<ToolCallLabels>,
    /// Backends a reload removed: a call that was running on one when it was removed starts no series.
    pub(super) removed: HashSet<Arc<str>>,
}

impl BackendSeries {
    /// Notes a new series of `backend`; false when the backend was removed.
    pub(super) fn note<L>(&mut self, backend: &str, labels: &L, noted: fn(&mut BackendSeries) -> &mut Vec<L>) -> bool
    where
        L: Clone,
    {
        if self.removed.contains(backend) {
            return false;
        }
        noted(self).push(labels.clone());
        true
    }
}

/// Removes from `family` the series `noted` holds whose labels `gone` picks, and forgets them.
pub(super) fn drop_series<L, M, C>(family: &Family<L, M, C>, noted: &mut Vec<L>, gone: impl Fn(&L) -> bool)
where
    L: Clone + Eq + std::hash::Hash,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    noted.retain(|labels| {
        let dropped = gone(labels);
        if dropped {
            family.remove(labels);
        }
        !dropped
    });
}

/// Something counted in a gauge while it lives.
#[derive(Debug)]
pub struct Counted(pub(super) Gauge);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Counts one in `family`'s series of `backend` until the guard is dropped.
pub(super) fn counted(family: &Family<BackendLabels, Gauge>, backend: &Arc<str>) -> Counted {
    let gauge = family.get_or_create_owned(&BackendLabels { backend: Arc::clone(backend) });
    gauge.inc();
    Counted(gauge)
}
