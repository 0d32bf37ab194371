//! The memory store's pins: a map by key and a write counter, behind one lock. The rules are those the SQL
//! stores encode in their conditional statements (`ledger/pins.rs`); the behaviour suite holds all three to them.

use std::collections::BTreeMap;

use super::super::error::LedgerError;
use super::super::pins::{PinKey, PinOffer, PinRow, PinState};
use super::MemoryStore;

#[derive(Debug, Default)]
pub(super) struct Pins {
    rows: BTreeMap<PinKey, PinRow>,
    /// Raised by every write.
    revision: i64,
}

impl Pins {
    /// Applies `change` to the row of `key`, if any; counts a write when it changed something.
    fn update(&mut self, key: &PinKey, change: impl FnOnce(&mut PinRow) -> bool) -> bool {
        let changed = self.rows.get_mut(key).is_some_and(change);
        self.revision += i64::from(changed);
        changed
    }
}

impl MemoryStore {
    pub(crate) async fn trust_pin(&self, row: &PinRow) -> Result<bool, LedgerError> {
        let mut pins = self.inner.pins.lock();
        if pins.rows.contains_key(&row.key) {
            return Ok(false);
        }
        pins.rows.insert(row.key.clone(), PinRow { approved_by: None, approved_at: None, ..row.clone() });
        pins.revision += 1;
        Ok(true)
    }

    pub(crate) async fn offer_pin(&self, offer: &PinOffer) -> Result<bool, LedgerError> {
        Ok(self.inner.pins.lock().update(&offer.key, |row| {
            if row.digest == offer.digest {
                let had_offer = row.offered_digest.take().is_some();
                row.offered = None;
                row.state = if had_offer { PinState::Pinned } else { row.state };
                return had_offer;
            }
            if row.offered_digest.as_deref() == Some(offer.digest.as_str()) {
                return false;
            }
            row.offered_digest = Some(offer.digest.clone());
            row.offered = Some(offer.definition.clone());
            if offer.quarantine {
                row.state = PinState::Quarantined;
            }
            true
        }))
    }

    pub(crate) async fn approve_pin(
        &self,
        key: &PinKey,
        offered: &str,
        by: &str,
        at: u64,
    ) -> Result<bool, LedgerError> {
        Ok(self.inner.pins.lock().update(key, |row| {
            if row.offered_digest.as_deref() != Some(offered) {
                return false;
            }
            row.digest = row.offered_digest.take().unwrap_or_default();
            row.definition = row.offered.take().unwrap_or_default();
            row.state = PinState::Pinned;
            row.approved_by = Some(by.to_owned());
            row.approved_at = Some(at);
            true
        }))
    }

    pub(crate) async fn reject_pin(&self, key: &PinKey, offered: &str) -> Result<bool, LedgerError> {
        Ok(self.inner.pins.lock().update(key, |row| {
            let offered_now = row.offered_digest.as_deref() == Some(offered);
            if offered_now {
                row.state = PinState::Quarantined;
            }
            offered_now
        }))
    }

    pub(crate) async fn pins(&self, backend: Option<&str>) -> Result<Vec<PinRow>, LedgerError> {
        let pins = self.inner.pins.lock();
        let wanted = |row: &&PinRow| backend.is_none_or(|backend| row.key.backend == backend);
        Ok(pins.rows.values().filter(wanted).cloned().collect())
    }

    pub(crate) async fn pins_revision(&self) -> Result<i64, LedgerError> {
        Ok(self.inner.pins.lock().revision)
    }
}
