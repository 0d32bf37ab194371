//! Latency percentiles per backend, from the ledger (see `docs/decisions.md`).
//!
//! Rules: a sample is one completed `tools/call` — from its claim to its completion, as the gateway recorded
//! them, so it covers the backend's work, the network and the handshake of a first call, and nothing of the
//! agent's side. The window is the last [`LATENCY_WINDOW`], at most [`LATENCY_SAMPLES`] calls (the newest);
//! calls an operator settled are not samples. Percentiles are nearest-rank over those samples, in whole
//! milliseconds (the ledger's resolution). Reading costs one indexed query per backend and nothing on the call
//! path.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::super::CallRouter;
use super::calls::unix_ms;
use crate::ledger::{ClaimState, LedgerError, ListFilter, OPERATOR};

/// How far back the samples reach.
pub const LATENCY_WINDOW: Duration = Duration::from_secs(60 * 60);
/// Most samples per backend (the newest of the window).
pub const LATENCY_SAMPLES: usize = 500;

/// One backend's recent latency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Latency {
    pub window_seconds: u64,
    pub samples: usize,
    pub p50_ms: Option<u64>,
    pub p90_ms: Option<u64>,
    pub p99_ms: Option<u64>,
    /// The samples, oldest first, for the chart.
    pub points: Vec<LatencyPoint>,
}

/// One completed call: when it started and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LatencyPoint {
    pub at_ms: u64,
    pub duration_ms: u64,
}

impl CallRouter {
    /// `backend`'s latency over the window.
    pub(super) async fn latency(&self, backend: &str) -> Result<Latency, LedgerError> {
        let filter = ListFilter {
            state: Some(ClaimState::Completed),
            backend: Some(backend.to_owned()),
            since: Some(SystemTime::now() - LATENCY_WINDOW),
            limit: LATENCY_SAMPLES,
            ..ListFilter::default()
        };
        let records = self.ledger.store.list(&filter).await?;
        let points = records
            .iter()
            .rev()
            .filter(|record| record.owner != OPERATOR)
            .map(|record| LatencyPoint {
                at_ms: unix_ms(record.created_at),
                duration_ms: unix_ms(record.updated_at).saturating_sub(unix_ms(record.created_at)),
            })
            .collect();
        Ok(Latency::of(points))
    }
}

impl Latency {
    fn of(points: Vec<LatencyPoint>) -> Latency {
        let mut sorted: Vec<u64> = points.iter().map(|point| point.duration_ms).collect();
        sorted.sort_unstable();
        Latency {
            window_seconds: LATENCY_WINDOW.as_secs(),
            samples: sorted.len(),
            p50_ms: percentile(&sorted, 50),
            p90_ms: percentile(&sorted, 90),
            p99_ms: percentile(&sorted, 99),
            points,
        }
    }
}

/// The nearest-rank `p`th percentile of ascending `sorted`: the smallest sample at or below which `p` % lie.
fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(durations: &[u64]) -> Vec<LatencyPoint> {
        durations.iter().enumerate().map(|(at, &duration_ms)| LatencyPoint { at_ms: at as u64, duration_ms }).collect()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let hundred: Vec<u64> = (1..=100).rev().collect();
        let latency = Latency::of(points(&hundred));
        assert_eq!((latency.p50_ms, latency.p90_ms, latency.p99_ms), (Some(50), Some(90), Some(99)));
        assert_eq!(latency.samples, 100);
        assert_eq!(latency.points[0], LatencyPoint { at_ms: 0, duration_ms: 100 }, "points keep their order");
        let three = Latency::of(points(&[30, 10, 20]));
        assert_eq!((three.p50_ms, three.p90_ms, three.p99_ms), (Some(20), Some(30), Some(30)));
        let one = Latency::of(points(&[7]));
        assert_eq!((one.p50_ms, one.p99_ms), (Some(7), Some(7)));
    }

    #[test]
    fn no_samples_no_percentiles() {
        let none = Latency::of(Vec::new());
        assert_eq!((none.samples, none.p50_ms, none.p90_ms, none.p99_ms), (0, None, None, None));
        assert_eq!(none.window_seconds, 3600);
    }
}
