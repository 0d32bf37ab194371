//! Failed discoveries remembered per backend, so a backend whose metadata is missing, refused or hanging costs
//! one attempt per back-off period, not one per `tools/list` of every principal.
//!
//! Rules: the first failure holds further attempts off for [`FIRST_BACKOFF`], each consecutive one for twice
//! the previous period, up to [`MAX_BACKOFF`]; a success forgets the failures. While held off, the last error is
//! answered at once ([`OAuthError::Backoff`]). Failures of the gateway itself (the token store, the random
//! source) are not held against the backend.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::error::OAuthError;

/// How long the first failure holds attempts off.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(30);
/// The longest hold.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Failure {
    until: Instant,
    period: Duration,
    error: OAuthError,
}

/// One backend's discovery failures.
#[derive(Debug, Default)]
pub(super) struct Backoff(Mutex<Option<Failure>>);

impl Backoff {
    /// The remembered error while attempts are held off.
    pub(super) fn check(&self, backend: &str) -> Result<(), OAuthError> {
        let failure = self.0.lock();
        match failure.as_ref() {
            Some(failure) if Instant::now() < failure.until => Err(OAuthError::Backoff {
                backend: backend.to_owned(),
                retry_in_secs: failure.until.saturating_duration_since(Instant::now()).as_secs().max(1),
                error: Box::new(failure.error.clone()),
            }),
            _ => Ok(()),
        }
    }

    /// Remembers how an attempt ended.
    pub(super) fn record<T>(&self, outcome: &Result<T, OAuthError>) {
        let mut failure = self.0.lock();
        match outcome {
            Ok(_) => *failure = None,
            Err(OAuthError::Store(_) | OAuthError::Random) => {}
            Err(error) => {
                let period = failure.as_ref().map_or(FIRST_BACKOFF, |last| (last.period * 2).min(MAX_BACKOFF));
                *failure = Some(Failure { until: Instant::now() + period, period, error: error.clone() });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> Result<(), OAuthError> {
        Err(OAuthError::NotFound { what: "protected resource metadata", tried: "https://x.example".to_owned() })
    }

    fn period(backoff: &Backoff) -> Option<Duration> {
        backoff.0.lock().as_ref().map(|failure| failure.period)
    }

    #[test]
    fn failures_double_up_to_the_cap_and_a_success_forgets_them() {
        let backoff = Backoff::default();
        assert_eq!(backoff.check("docs"), Ok(()), "nothing failed yet");
        backoff.record(&failed());
        let held = backoff.check("docs").expect_err("held off");
        assert!(
            matches!(&held, OAuthError::Backoff { backend, retry_in_secs: 29..=30, error }
            if backend == "docs" && matches!(**error, OAuthError::NotFound { .. })),
            "{held:?}"
        );
        assert!(held.to_string().contains("no protected resource metadata found"), "{held}");
        let mut expected = FIRST_BACKOFF;
        for _ in 0..6 {
            assert_eq!(period(&backoff), Some(expected));
            backoff.record(&failed());
            expected = (expected * 2).min(MAX_BACKOFF);
        }
        assert_eq!(period(&backoff), Some(MAX_BACKOFF), "capped at ten minutes");
        backoff.record(&Ok(()));
        assert_eq!(backoff.check("docs"), Ok(()), "a success forgets the failures");
        backoff.record(&Err::<(), _>(OAuthError::Store("disk full".to_owned())));
        assert_eq!(backoff.check("docs"), Ok(()), "the gateway's own failures are not held against the backend");
    }

    #[test]
    fn the_hold_ends() {
        let backoff = Backoff::default();
        backoff.record(&failed());
        backoff.0.lock().as_mut().expect("failure").until = Instant::now();
        assert_eq!(backoff.check("docs"), Ok(()), "tried again once the period is over");
    }
}
