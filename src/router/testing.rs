//! Hooks for the integration tests (`tests/it`) only: stopping the clock `[[limits]]` count in, so a test of a
//! rate or of a quota's window boundary depends on no scheduling. Production code must not call these.

use std::time::{Duration, SystemTime};

use super::CallRouter;

/// Stops the limits' clock at `at` (a reload keeps it stopped).
pub fn pause_limit_clock(router: &CallRouter, at: SystemTime) {
    router.routing().limits.clock().pause_at(at);
}

/// Moves the stopped limits' clock forward by `by`.
pub fn advance_limit_clock(router: &CallRouter, by: Duration) {
    router.routing().limits.clock().advance(by);
}
