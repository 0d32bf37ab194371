//! The console's approvals page API: `GET /admin/api/approvals` (the calls awaiting approval),
//! `POST /admin/api/approvals/decisions` (approve or deny one) and `GET /admin/api/approvals/link` (the one
//! request an announcement's link names). The rules of who decides are the router's ([`crate::router::decide`]:
//! an approver, never the call's own principal); this module says who is asking.
//!
//! Rules:
//! - Approvers read the page (`[approvals] approvers`, by name or group), and so do administrators; with no
//!   approvers listed, administrators (and callers on this machine where the console lets them in) decide. Only a
//!   reader who may decide gets the arguments in full and a form token ([`super::tickets`]).
//! - A decision is a JSON body (`key`, `decision` = `approve` | `deny`, optional `note`) with the form token in
//!   [`FORM_TOKEN_HEADER`]; it is made in the shared ledger, so it holds for every replica, and counted in
//!   `switchyard_approvals_total{decision}`.
//! - A link ticket lets its holder see its one request (never the arguments) while it awaits a decision; once
//!   decided or expired the link answers 410 with what became of it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::super::body::{BodyLimits, read_json};
use super::super::error::FrontError;
use super::super::{Front, now_unix};
use super::access::{Identity, identify, judge_or_refuse};
use super::{answer, query};
use crate::auth::Principal;
use crate::router::DecisionRequest;
use crate::router::inspect::LinkedApproval;

/// The header that carries a decision's form token.
pub const FORM_TOKEN_HEADER: &str = "x-csrf-token";
/// Who decides when the console lets a caller of this machine in without a credential.
const THIS_MACHINE: &str = "operator";

/// A reader of the approvals page; `decider` when it may also decide.
pub(super) struct ApprovalReader {
    decider: Option<Principal>,
}

impl FromRequestParts<Arc<Front>> for ApprovalReader {
    type Rejection = FrontError;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, FrontError> {
        let settings = front.settings.load();
        settings.admission.check(&parts.headers)?;
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(address)| *address);
        let (approvers, admins) = (&settings.approvers, &settings.admins);
        match identify(&settings, peer, &parts.headers).await? {
            Identity::ThisMachine => {
                let decider = approvers.is_open().then(|| Principal { name: THIS_MACHINE.into(), groups: Vec::new() });
                Ok(ApprovalReader { decider })
            }
            Identity::Authenticated(principal) => {
                let decides = approvers.lists(&principal) || (approvers.is_open() && admins.admits(&principal));
                let reads = decides || admins.admits(&principal);
                judge_or_refuse(&settings, &principal, reads, FrontError::NotApprover)?;
                Ok(ApprovalReader { decider: decides.then_some(principal) })
            }
        }
    }
}

/// The calls awaiting approval; for a reader who decides, with their arguments, its name and a form token.
pub(super) async fn pending(
    reader: ApprovalReader,
    State(front): State<Arc<Front>>,
    uri: Uri,
) -> Result<Response, FrontError> {
    let limit = query::limit_query(uri.query())?;
    let for_approver = reader.decider.is_some();
    let approvals = front.router.pending_approvals(limit, for_approver).await.map_err(FrontError::Inspect)?;
    let mut body = json!({ "limit": limit, "approvals": approvals });
    if let Some(decider) = &reader.decider {
        body["decider"] = decider.name.clone().into();
        body["form_token"] = front.tickets.form_token(&decider.name, now_unix()).into();
    }
    Ok(answer(body))
}

/// What a decision's body says.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionForm {
    key: String,
    decision: String,
    note: Option<String>,
}

/// Approves or denies one call.
pub(super) async fn decide(
    reader: ApprovalReader,
    State(front): State<Arc<Front>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, FrontError> {
    let decider = reader.decider.ok_or(FrontError::NotApprover)?;
    let token = headers.get(FORM_TOKEN_HEADER).and_then(|token| token.to_str().ok()).unwrap_or_default();
    if !front.tickets.form_token_admits(token, &decider.name, now_unix()) {
        return Err(FrontError::NoFormToken);
    }
    let settings = front.settings.load();
    let limits = BodyLimits { max_body: settings.max_body, body_timeout: settings.body_timeout };
    let bytes = read_json(&headers, body, limits).await?;
    let form: DecisionForm =
        serde_json::from_slice(&bytes).map_err(|error| FrontError::BadDecision(error.to_string()))?;
    let approve = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => return Err(FrontError::BadDecision(format!("`decision` must be approve or deny, not `{other}`"))),
    };
    let note = form.note.filter(|note| !note.trim().is_empty());
    let request = DecisionRequest { decider: &decider, key: &form.key, approve, note };
    let row = front.router.decide_call(&settings.approvers, request).await?;
    tracing::info!(key = %row.key, by = %decider.name, state = row.state.as_str(), "an approval was decided in the console");
    Ok(answer(json!({
        "key": row.key.as_str(),
        "state": row.state.as_str(),
        "decided_by": row.decided_by,
        "note": row.note,
    })))
}

/// The request an announcement's link names, while it awaits a decision.
pub(super) async fn link(
    State(front): State<Arc<Front>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, FrontError> {
    front.settings.load().admission.check(&headers)?;
    let ticket = query::ticket_query(uri.query())?;
    let key = front.tickets.open_link(&ticket).ok_or(FrontError::BadLinkTicket)?;
    match front.router.linked_approval(&key).await.map_err(FrontError::Inspect)? {
        Some(LinkedApproval::Awaiting(view)) => Ok(answer(json!({ "approval": view }))),
        Some(LinkedApproval::Closed { state, by }) => Err(FrontError::LinkUsed { state, by }),
        None => Err(FrontError::BadLinkTicket),
    }
}
