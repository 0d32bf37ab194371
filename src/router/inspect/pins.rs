//! The pins as the console shows them: every pinned tool and prompt with its state, and for one whose backend
//! offers another definition both definitions, so the operator sees what changed before approving it.
//!
//! Rules: read-only; approvals are the `switchyard tools` commands' (named in each view), never this API's.

use serde::Serialize;
use serde_json::Value;

use super::CallRouter;
use super::calls::InspectError;
use crate::ledger::PinRow;

/// One pin.
#[derive(Debug, Serialize)]
pub struct PinView {
    pub backend: String,
    /// "tool" or "prompt".
    pub kind: String,
    pub name: String,
    /// "pinned" or "quarantined".
    pub state: &'static str,
    pub digest: String,
    pub first_seen: u64,
    pub approved_by: Option<String>,
    pub approved_at: Option<u64>,
    /// The backend's other definition, when it offers one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered: Option<Offered>,
}

/// What the backend offers instead of the pinned definition.
#[derive(Debug, Serialize)]
pub struct Offered {
    pub digest: String,
    /// The pinned definition (`null` for an item new since the backend's first discovery).
    pub pinned: Value,
    pub offered: Value,
    /// The commands that decide.
    pub approve: String,
    pub reject: String,
}

impl CallRouter {
    /// Every pin in the ledger, by backend, kind and name.
    pub async fn pin_views(&self) -> Result<Vec<PinView>, InspectError> {
        Ok(self.ledger.store.pins(None).await?.into_iter().map(view).collect())
    }
}

fn view(row: PinRow) -> PinView {
    let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
    let item = format!("{}/{}", row.key.backend, row.key.name);
    let offered = row.offered_digest.zip(row.offered).map(|(digest, offered)| Offered {
        digest,
        pinned: parse(&row.definition),
        offered: parse(&offered),
        approve: format!("switchyard tools approve {item}"),
        reject: format!("switchyard tools reject {item}"),
    });
    PinView {
        backend: row.key.backend,
        kind: row.key.kind,
        name: row.key.name,
        state: row.state.as_str(),
        digest: row.digest,
        first_seen: row.first_seen,
        approved_by: row.approved_by,
        approved_at: row.approved_at,
        offered,
    }
}
