//! [`Swap`]: a value that is replaced whole and read as an `Arc` snapshot — what a configuration reload swaps in
//! each part (the router's backends and policies, the catalog's specs, the front's authentication and limits).
//!
//! Rules: a reader takes one snapshot ([`Swap::load`]) and uses it for the whole of its work, so it never sees
//! half of an old value and half of a new one; a writer builds the new value completely before [`Swap::store`].
//! A neutral leaf: it imports no crate module, and every layer may use it.

use std::sync::Arc;

use parking_lot::RwLock;

/// A value replaced as a whole (an `RwLock` over an `Arc`: the lock is held only to clone or replace the
/// pointer, never while the value is used).
pub struct Swap<T>(RwLock<Arc<T>>);

impl<T> Swap<T> {
    pub fn new(value: T) -> Self {
        Self(RwLock::new(Arc::new(value)))
    }

    /// The current value; later stores do not change it.
    pub fn load(&self) -> Arc<T> {
        Arc::clone(&self.0.read())
    }

    /// Replaces the value; readers holding the old one keep it until they drop it.
    pub fn store(&self, value: impl Into<Arc<T>>) {
        *self.0.write() = value.into();
    }
}

impl<T: Default> Default for Swap<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_snapshot_survives_a_store() {
        let swap = Swap::new(vec![1]);
        let before = swap.load();
        swap.store(vec![2, 3]);
        assert_eq!(*before, [1], "a reader keeps the value it loaded");
        assert_eq!(*swap.load(), [2, 3]);
    }
}
