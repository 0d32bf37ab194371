//! The wall clock as the OAuth client reads it: whole seconds since the Unix epoch, for token expiry, signed
//! assertions and stored tokens.
//!
//! Rule: a clock before the epoch reads 0 (a token then looks expired, never valid forever).

use std::time::{SystemTime, UNIX_EPOCH};

pub(super) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
