//! What the memory store keeps per claim: a compact [`Stored`] record, and the [`Names`] its records share.
//!
//! Rules:
//! - A record keeps exactly what a [`ClaimRecord`] shows (replay, `switchyard calls` inspection), in its
//!   smallest faithful form: times as milliseconds (what every store keeps), the claim id as its 16 bytes, an
//!   arguments digest that is SHA-256 hex as its 32 bytes; [`Stored::to_record`] gives back the exact record.
//! - Principal, session, backend, tool and owner are interned: all records with the same name share one
//!   `Arc<str>`. A name is forgotten when the last record using it is removed ([`Names::release`]), so the
//!   table holds only names of stored claims, however many sessions came and went.
//! - The lock-holder's rule: nothing here allocates or frees more than one record's own data at a time.

use std::sync::Arc;

use crate::raw_json::RawJson;

use super::super::rules::Current;
use super::super::types::{ClaimKey, ClaimRecord, ClaimState, NewClaim, from_millis};
use super::table::Table;
use crate::hex;

/// A text that is usually lowercase SHA-256 hex (an arguments digest), kept as its bytes when it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Digest {
    Sha256([u8; 32]),
    Text(Box<str>),
}

impl Digest {
    pub(super) fn of(text: &str) -> Digest {
        let mut bytes = [0u8; 32];
        let is_hex = text.len() == 64 && text.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
        if !is_hex {
            return Digest::Text(text.into());
        }
        for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
            *byte = (nibble(pair[0]) << 4) | nibble(pair[1]);
        }
        Digest::Sha256(bytes)
    }

    fn to_text(&self) -> String {
        match self {
            Digest::Sha256(bytes) => hex::encode(bytes),
            Digest::Text(text) => text.to_string(),
        }
    }
}

/// The value of one lowercase hex digit (checked by the caller).
fn nibble(digit: u8) -> u8 {
    if digit.is_ascii_digit() { digit - b'0' } else { digit - b'a' + 10 }
}

/// One claim as the memory store keeps it; its key is the table's.
#[derive(Debug)]
pub(super) struct Stored {
    pub(super) id: [u8; 16],
    pub(super) principal: Arc<str>,
    pub(super) session: Arc<str>,
    pub(super) backend: Arc<str>,
    pub(super) tool: Arc<str>,
    pub(super) owner: Arc<str>,
    pub(super) args_digest: Digest,
    pub(super) state: ClaimState,
    pub(super) result: Option<RawJson>,
    pub(super) result_digest: Option<Box<str>>,
    pub(super) error: Option<Box<str>>,
    pub(super) created_ms: i64,
    pub(super) updated_ms: i64,
    pub(super) lease_ms: i64,
}

impl Stored {
    /// The record of `new` with claim id `id`, claimed at `now_ms` until `lease_ms`, its names interned in `names`.
    pub(super) fn claimed(new: &NewClaim, id: [u8; 16], (now_ms, lease_ms): (i64, i64), names: &mut Names) -> Stored {
        Stored {
            id,
            principal: names.intern(&new.principal),
            session: names.intern(&new.session),
            backend: names.intern(&new.backend),
            tool: names.intern(&new.tool),
            owner: names.intern(&new.owner),
            args_digest: Digest::of(&new.args_digest),
            state: ClaimState::InFlight,
            result: None,
            result_digest: None,
            error: None,
            created_ms: now_ms,
            updated_ms: now_ms,
            lease_ms,
        }
    }

    /// The record as the ledger's API shows it.
    pub(super) fn to_record(&self, key: &str) -> ClaimRecord {
        ClaimRecord {
            key: ClaimKey::from_stored(key.to_owned()),
            id: hex::encode(&self.id),
            principal: self.principal.to_string(),
            session: self.session.to_string(),
            backend: self.backend.to_string(),
            tool: self.tool.to_string(),
            args_digest: self.args_digest.to_text(),
            state: self.state,
            result: self.result.clone(),
            result_digest: self.result_digest.as_deref().map(str::to_owned),
            error: self.error.as_deref().map(str::to_owned),
            created_at: from_millis(self.created_ms),
            updated_at: from_millis(self.updated_ms),
            owner: self.owner.to_string(),
            lease_until: from_millis(self.lease_ms),
        }
    }

    /// What the state machine reads of it.
    pub(super) fn current(&self) -> Current<'_> {
        Current {
            owner: &self.owner,
            state: self.state,
            result: self.result.as_ref().map(RawJson::get),
            result_digest: self.result_digest.as_deref(),
        }
    }

    /// Gives its names back to `names` as the record goes.
    pub(super) fn forget(self, names: &mut Names) {
        for name in [self.principal, self.session, self.backend, self.tool, self.owner] {
            names.release(name);
        }
    }
}

/// The interned names of the stored claims.
#[derive(Debug, Default)]
pub(super) struct Names(Table<()>);

impl Names {
    /// The shared copy of `name`, made on its first use.
    pub(super) fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some((shared, ())) = self.0.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = name.into();
        self.0.insert_new(shared.clone(), ());
        shared
    }

    /// Drops one record's use of `name`, forgetting the name when no other record uses it: records hold the only
    /// other references (what the store hands out are copies), so the table's own is then the last but this one.
    pub(super) fn release(&mut self, name: Arc<str>) {
        if Arc::strong_count(&name) == 2 {
            self.0.remove(&name);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}
