//! Results at rest: with `[ledger] encrypt_results`, a SQL store keeps each completed call's result sealed under
//! the gateway's vault key ([`crate::sealed_box`], the key of `oauth-tokens.key`), and every read opens it, so
//! replays are unchanged.
//!
//! Rules:
//! - A sealed result is stored as a JSON string, `"switchyard:sealed:v1:<base64 of the sealed bytes>"`: the
//!   column keeps holding JSON text, and it cannot be mistaken for a plaintext row (a `tools/call` result is an
//!   object), so a ledger written before (or with `encrypt_results = false`) keeps working row by row.
//! - The associated data is the claim key, so a sealed result moved to another claim does not open.
//! - A result too large to keep whole is stored as its digest alone, as without encryption (the bound applies to
//!   the plaintext); nothing is sealed then.
//! - A sealed row read without the key, or one that does not open, is [`LedgerError::Corrupt`]: a replay never
//!   answers with something other than what the tool returned.
//! - The memory store never persists, so it keeps results as they are.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;

use super::error::LedgerError;
use super::types::{ClaimKey, ClaimRecord};
use crate::raw_json::RawJson;
use crate::sealed_box::SealedBox;

/// What starts the JSON text of a sealed result (its opening quote included).
const SEALED_PREFIX: &str = "\"switchyard:sealed:v1:";
const DOMAIN: &[u8] = b"switchyard ledger result v1\0";

/// The vault key of a SQL store, and whether new results are sealed with it.
#[derive(Debug)]
pub(crate) struct AtRest {
    sealed_box: SealedBox,
    seal_new: bool,
}

impl AtRest {
    /// Opens sealed results with `key`, and seals new ones when `seal_new`.
    pub(crate) fn new(key: &[u8; 32], seal_new: bool) -> AtRest {
        AtRest { sealed_box: SealedBox::from_key(key), seal_new }
    }

    /// `result` sealed for the claim `key`, when new results are sealed and it is kept whole (at most
    /// `max_result` bytes); `None`: store it as it is.
    pub(crate) fn seal(
        &self,
        key: &ClaimKey,
        result: &RawJson,
        max_result: usize,
    ) -> Result<Option<RawJson>, LedgerError> {
        if !self.seal_new || result.get().len() > max_result {
            return Ok(None);
        }
        let sealed = self
            .sealed_box
            .seal(&associated_data(key.as_str()), result.get().as_bytes())
            .map_err(|error| LedgerError::unavailable(format!("cannot seal the result of claim {key}: {error}")))?;
        let text = format!("{SEALED_PREFIX}{}\"", STANDARD_NO_PAD.encode(sealed));
        RawJson::from_text(text).map(Some).map_err(|error| LedgerError::corrupt(error.to_string()))
    }
}

/// `record` with its result opened, when it is sealed (`at_rest`: the store's key, if it has one).
pub(crate) fn open(at_rest: Option<&AtRest>, mut record: ClaimRecord) -> Result<ClaimRecord, LedgerError> {
    let Some(sealed) = record.result.as_ref().and_then(|result| result.get().strip_prefix(SEALED_PREFIX)) else {
        return Ok(record);
    };
    let key = record.key.as_str();
    let unopenable = |why: &str| LedgerError::corrupt(format!("the sealed result of claim {key} {why}"));
    let at_rest = at_rest.ok_or_else(|| unopenable("cannot be opened without the vault key (oauth-tokens.key)"))?;
    let bytes =
        STANDARD_NO_PAD.decode(sealed.strip_suffix('"').unwrap_or(sealed)).map_err(|_| unopenable("is not base64"))?;
    let plaintext = at_rest
        .sealed_box
        .open(&associated_data(key), &bytes)
        .map_err(|_| unopenable("does not open with this gateway's vault key"))?;
    let text = String::from_utf8(plaintext).map_err(|_| unopenable("is not UTF-8"))?;
    record.result = Some(RawJson::from_text(text).map_err(|_| unopenable("is not JSON"))?);
    Ok(record)
}

fn associated_data(key: &str) -> Vec<u8> {
    [DOMAIN, key.as_bytes()].concat()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::ledger::types::NewClaim;

    fn record(key: &ClaimKey, result: RawJson) -> ClaimRecord {
        let new = NewClaim {
            key: key.clone(),
            principal: "alice".into(),
            session: "s".into(),
            backend: "b".into(),
            tool: "t".into(),
            args_digest: "d".into(),
            owner: "gw".into(),
            lease: Duration::from_secs(1),
        };
        ClaimRecord { result: Some(result), ..ClaimRecord::claimed(&new, "id".into(), SystemTime::now()) }
    }

    #[test]
    fn sealed_results_open_for_their_claim_and_plaintext_rows_pass() {
        let at_rest = AtRest::new(&[5; 32], true);
        let (key, other) = (ClaimKey::idempotency("alice", "k1"), ClaimKey::idempotency("alice", "k2"));
        let result = RawJson::of(&serde_json::json!({"content": [{"type": "text", "text": "secret words"}]}));
        let sealed = at_rest.seal(&key, &result, 1 << 20).expect("sealed").expect("kept whole");
        assert!(sealed.get().starts_with(SEALED_PREFIX) && !sealed.get().contains("secret"), "{}", sealed.get());
        assert_eq!(open(Some(&at_rest), record(&key, sealed.clone())).expect("opens").result, Some(result.clone()));
        assert!(open(Some(&at_rest), record(&other, sealed.clone())).is_err(), "bound to its claim");
        assert!(open(None, record(&key, sealed.clone())).is_err(), "not without the key");
        assert!(open(Some(&AtRest::new(&[6; 32], true)), record(&key, sealed)).is_err(), "not with another key");
        let plain = open(Some(&at_rest), record(&key, result.clone())).expect("a plaintext row");
        assert_eq!(plain.result, Some(result.clone()));
        assert_eq!(at_rest.seal(&key, &result, 10).expect("bounded"), None, "too large: the digest alone");
        assert_eq!(AtRest::new(&[5; 32], false).seal(&key, &result, 1 << 20).expect("off"), None);
    }
}
