//! [`CountedIds`]: byte strings that never repeat, without a system call each: the first N − 8 bytes are drawn
//! from the operating system's random source once, at the first id, and the last 8 are a count of the ids made so
//! far. Used for a sealed box's nonces (`sealed_box.rs`) and claim ids (`ledger/types.rs`).
//!
//! Rules: unique within the process (a 64-bit count does not wrap), and across the processes that draw their own
//! (restarts, replicas) unless two of them drew the same N − 8 random bytes. Not secrets: after one id, the next
//! is known. A neutral leaf: it imports no crate module.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

const COUNT_LEN: usize = 8;

/// A source of unique N-byte ids (see the module's rules).
pub(crate) struct CountedIds<const N: usize> {
    drawn: OnceLock<[u8; N]>,
    count: AtomicU64,
}

impl<const N: usize> CountedIds<N> {
    pub(crate) const fn new() -> Self {
        const { assert!(N > COUNT_LEN, "an id needs random bytes before its count") };
        CountedIds { drawn: OnceLock::new(), count: AtomicU64::new(0) }
    }

    /// The next id; fails only when the random source does, at the first id.
    pub(crate) fn next(&self) -> Result<[u8; N], getrandom::Error> {
        let mut id = match self.drawn.get() {
            Some(drawn) => *drawn,
            None => {
                let mut drawn = [0u8; N];
                getrandom::fill(&mut drawn[..N - COUNT_LEN])?;
                // Two first ids at once: both use the bytes that won.
                *self.drawn.get_or_init(|| drawn)
            }
        };
        id[N - COUNT_LEN..].copy_from_slice(&self.count.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_of_one_source_never_repeat_and_share_their_random_part() {
        let ids = CountedIds::<16>::new();
        let made: Vec<[u8; 16]> = (0..1000).map(|_| ids.next().expect("random")).collect();
        assert_eq!(made.iter().collect::<HashSet<_>>().len(), 1000);
        assert!(made.iter().all(|id| id[..8] == made[0][..8]));
        assert_eq!(made[999][8..], 999u64.to_le_bytes());
    }

    #[test]
    fn two_sources_draw_different_random_parts() {
        let (a, b) = (CountedIds::<16>::new(), CountedIds::<16>::new());
        let (a, b) = (a.next().expect("random"), b.next().expect("random"));
        assert_ne!(a[..8], b[..8]);
        assert_eq!(a[8..], b[8..]);
    }

    #[test]
    fn ids_made_on_many_threads_at_once_are_distinct() {
        let ids = CountedIds::<16>::new();
        let made: Vec<[u8; 16]> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..250).map(|_| ids.next().expect("random")).collect::<Vec<_>>()))
                .collect();
            workers.into_iter().flat_map(|worker| worker.join().expect("worker")).collect()
        });
        assert_eq!(made.iter().collect::<HashSet<_>>().len(), 1000);
        assert!(made.iter().all(|id| id[..8] == made[0][..8]));
    }
}
