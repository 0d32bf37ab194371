//! The router: turns an agent's request into catalog lookups and backend calls, and a backend failure into an
//! answer an agent (and the LLM behind it) can act on.
//!
//! Rules: a tool is called on the backend session of the (agent session, backend) pair, never on another
//! agent's, and that session counts against the caller's fairness key ([`Caller::fairness_key`]) in the shared
//! session table; the backend sees its own tool name and the backend client's own request ids; a backend's
//! result — `isError` included — passes through verbatim; a failure of the call itself becomes a `CallToolResult` with
//! `isError: true`, a sentence that says whether the call ran, and `_meta["switchyard/outcome"]`.
//! - One policy (`auth::Policies`) decides what a caller sees in every list and what it may use: a
//!   tool, prompt or resource it may not use is answered exactly like one that does not exist (no existence
//!   leak), logged with the principal and the name, before any ledger claim or backend work. Tools and prompts
//!   are judged by their exposed name (the `/mcp` one) in both views.
//! - Each `tools/call` tells the caller's `telemetry::RequestRecord` its tool and backend (catalog names only; a
//!   name the catalog does not know is `_unknown`) and how it ended (`ToolOutcome`; policy refusals included).
//! - A sessionless agent's `tools/call`, `prompts/get` or `resources/read` answered `input_required` by a backend
//!   gets the gateway's sealed `requestState` ([`request_state`]), and its retry continues the same call, the same
//!   ledger claim included ([`continuation`]).
//! - `[[limits]]` are checked after the policy and before the ledger claim ([`limits`]): a refused call is not sent,
//!   and with a PostgreSQL ledger rates and quotas count for every replica together.
//! - A configuration reload replaces the backends' targets and the policies as one snapshot ([`Routing`],
//!   [`CallRouter::reconfigure`]); each request works with the snapshot it took, so a running call finishes on
//!   the backend it was routed to. Agents are told when the tools they see changed ([`ToolsChanged`]).
//!
//! Must not know: HTTP, agent session tokens, backend wire formats.

pub mod announcements;
mod answer;
mod approvals;
mod authorization;
mod caller;
mod claims;
mod continuation;
pub(crate) mod discovery;
mod forward;
pub(crate) mod idempotency;
mod input_rounds;
pub(crate) mod inspect;
pub mod limits;
mod outcome;
pub mod pins;
mod readiness;
pub mod request_state;
mod starting;
mod tasks;
pub mod testing;
pub mod tool_search;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::auth::{Grants, Policies};
pub use crate::backend::mcp_client::Audience;
use crate::backend::mcp_client::{BackendTarget, Destination, McpBackendClient, SpawnStatus};
pub use crate::catalog::View;
use crate::catalog::{self, BackendSpec, Catalog};
use crate::ledger::{LedgerStore, canonical_digest};
use crate::mcp::jsonrpc;
use crate::mcp::method::{self, Method};
use crate::mcp::{Relay, SessionHolder};
use crate::swap::Swap;
use crate::telemetry::ToolOutcome;
pub use answer::{Found, Relayed, RpcFailure};
pub use approvals::{
    Announce, ApprovalGate, Approvers, DecisionRefused, DecisionRequest, RefusalKind, VaultFile,
    arguments as approval_arguments, decide, decision_commands,
};
pub use caller::{Caller, fairness_key};
use claims::{Admission, GuardedCall};
pub use claims::{CallLedger, REPLAYED_META};
pub use continuation::HeldElsewhere;
use continuation::Waiting;
pub use forward::SessionMessages;
pub use idempotency::{IDEMPOTENCY_META, IdempotencyKey};
use limits::{Held, Limits};
use outcome::Report;
pub use outcome::{CLAIM_META, OUTCOME_META, RETRY_AFTER_META, shut_down};
pub use readiness::{Health, HealthReport, Readiness};
use request_state::{CallIdentity, StateKey, StateSealer};
use starting::Resolved;
pub use tasks::{
    BackendTaskWatch, RELATED_TASK_META, TASKS_EXTENSION, TaskBackends, TaskChange, TaskEar, TaskHearing,
    fail_orphaned_tasks,
};
pub use tool_search::{CALL_TOOL, CatalogModes, SEARCH_TOOL};
use tool_search::{Expansions, GatewayTool};

/// How each backend is reached and what each principal may use: what a configuration reload replaces in the
/// router, as one snapshot.
#[derive(Debug)]
pub struct Routing {
    /// How each backend is reached (any transport), renewed (a fresh deadline) for every call.
    pub targets: HashMap<Arc<str>, BackendTarget>,
    /// What each principal may use; none configured: everything.
    pub policies: Policies,
    /// How long a tool call of a backend still being discovered waits for it ([`starting`]).
    pub discovery_wait: Duration,
    /// `[[limits]]`: what each principal may spend ([`limits`]); a reload carries the unchanged ones' counters.
    pub limits: Limits,
    /// Each backend's pinning rules ([`pins`]); a backend without is not pinned.
    pub pins: HashMap<Arc<str>, pins::PinRules>,
    /// How each view offers its tools: every definition, or search ([`tool_search`]).
    pub catalog: CatalogModes,
    /// The backends whose tool calls may run as tasks, by who runs them ([`tasks`]).
    pub tasks: TaskBackends,
}

impl Routing {
    /// What `caller` may use.
    fn grants(&self, caller: &Caller) -> Grants<'_> {
        self.policies.for_principal(&caller.principal)
    }
}

/// Whose tool lists changed: the agents viewing one backend (at `/mcp` or `/mcp/<backend>`), every agent (the
/// policies changed), or one agent session (a search added tools to its list, [`tool_search`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolsChanged {
    Backend(Arc<str>),
    Everywhere,
    Session(SessionHolder),
}

impl ToolsChanged {
    /// Whether an agent with this view sees the change (a session's own change is [`ToolsChanged::shows_to`]'s).
    pub fn shows_in(&self, view: View<'_>) -> bool {
        match self {
            ToolsChanged::Backend(backend) => view.shows(backend),
            ToolsChanged::Everywhere => true,
            ToolsChanged::Session(_) => false,
        }
    }

    /// Whether the agent session keyed `session`, with this view, sees the change.
    pub fn shows_to(&self, view: View<'_>, session: &str) -> bool {
        match self {
            ToolsChanged::Session(SessionHolder::Agent(key)) => **key == *session,
            _ => self.shows_in(view),
        }
    }
}

pub struct CallRouter {
    catalog: Arc<Catalog>,
    client: Arc<McpBackendClient>,
    routing: Swap<Routing>,
    /// Announces whose exposed tools changed.
    tool_changes: broadcast::Sender<ToolsChanged>,
    /// The backends heard announcing that their tools or prompts changed (for the other replicas of a fleet).
    list_announcements: broadcast::Sender<Arc<str>>,
    ledger: CallLedger,
    resource_owners: forward::ResourceOwners,
    /// OAuth backends nobody has authorized yet.
    unauthorized: authorization::Unauthorized,
    /// Seals the `requestState` sessionless agents get; keyed from the session secret once the front exists.
    states: Swap<StateSealer>,
    /// This instance's tool calls waiting for their agents' input.
    waiting: Arc<Waiting>,
    /// Holds the calls policies say need an approval (set once by the composition root).
    approvals: std::sync::OnceLock<ApprovalGate>,
    /// The tools searches added to each agent session's list ([`tool_search`]).
    expansions: Expansions,
    /// The tool calls this instance runs as tasks.
    tasks: tasks::Tasks,
    /// The pin approvals the audit trail has recorded.
    audited_approvals: pins::AuditedApprovals,
    /// The backends with pins to watch; while there is none, the pins' poll sleeps.
    pinned: pins::PinnedBackends,
}

impl CallRouter {
    pub fn new(catalog: Arc<Catalog>, client: Arc<McpBackendClient>, mut routing: Routing, ledger: CallLedger) -> Self {
        let tasks = tasks::Tasks::default();
        if matches!(ledger.store, LedgerStore::Postgres(_)) {
            routing.limits.share_in(ledger.store.clone());
            tasks.share_changes();
        }
        client.health().track(&routing.targets.keys().cloned().collect::<Vec<_>>());
        Self {
            catalog,
            client,
            routing: Swap::new(routing),
            tool_changes: broadcast::channel(64).0,
            list_announcements: broadcast::channel(64).0,
            ledger,
            resource_owners: Default::default(),
            unauthorized: Default::default(),
            states: Swap::new(StateSealer::new(&StateKey::random())),
            waiting: Arc::default(),
            approvals: std::sync::OnceLock::new(),
            expansions: Expansions::default(),
            tasks,
            audited_approvals: pins::AuditedApprovals::default(),
            pinned: pins::PinnedBackends::default(),
        }
    }

    /// Holds the calls that need an approval with `gate` from now on (once; later gates are ignored).
    pub fn use_approvals(&self, gate: ApprovalGate) {
        let _ = self.approvals.set(gate);
    }

    /// Seals request states with `key` (derived from the session secret, which every replica shares) from now on.
    pub fn use_state_key(&self, key: &StateKey) {
        self.states.store(StateSealer::new(key));
        self.tasks.use_key(key);
    }

    /// Replaces the backends' targets and the policies, and the catalog's specs (a configuration reload); a
    /// request already running keeps what it took. Forgets what it knew of backends no longer configured (their
    /// sessions are the backend client's to retire) and tells agents whose tools changed: every agent when the
    /// policies changed or `principals_changed` (who is who, and in which groups, decides what policies grant),
    /// else the viewers of each backend whose exposed tools changed.
    pub fn reconfigure(&self, mut routing: Routing, specs: Vec<BackendSpec>, principals_changed: bool) {
        routing.limits = std::mem::take(&mut routing.limits).carried_from(&self.routing.load().limits);
        let running = self.routing.load();
        let everywhere =
            principals_changed || running.policies != routing.policies || running.catalog != routing.catalog;
        let configured = |backend: &str| routing.targets.contains_key(backend);
        self.unauthorized.retain(configured);
        self.resource_owners.retain(configured);
        self.client.health().track(&routing.targets.keys().cloned().collect::<Vec<_>>());
        self.routing.store(routing);
        let changed = self.catalog.reconfigure(specs);
        // Nobody listening (no agent stream open) is fine.
        if everywhere {
            let _ = self.tool_changes.send(ToolsChanged::Everywhere);
        } else {
            changed.into_iter().for_each(|backend| drop(self.tool_changes.send(ToolsChanged::Backend(backend))));
        }
    }

    /// The backends' targets and the policies in force.
    pub fn routing(&self) -> Arc<Routing> {
        self.routing.load()
    }

    /// Announcements of whose exposed tools changed (for agents' `notifications/tools/list_changed`).
    pub fn tool_changes(&self) -> broadcast::Receiver<ToolsChanged> {
        self.tool_changes.subscribe()
    }

    pub fn ledger(&self) -> &CallLedger {
        &self.ledger
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn has_backend(&self, name: &str) -> bool {
        self.routing.load().targets.contains_key(name)
    }

    /// The `instructions` of the gateway's `initialize` result.
    pub fn instructions(&self) -> String {
        let names: Vec<Arc<str>> = self.catalog.backend_names();
        format!(
            "Switchyard MCP gateway. Tools of these backends are available, each prefixed by its backend's name: {}.",
            names.join(", ")
        )
    }

    /// The stdio backends whose processes keep failing to start: (backend, failed starts in a row, the last
    /// error, the wait before the next attempt).
    pub fn failing_starts(&self) -> Vec<(Arc<str>, u32, String, std::time::Duration)> {
        let routing = self.routing.load();
        let mut failing: Vec<_> = routing
            .targets
            .iter()
            .filter_map(|(name, target)| match target.spawn_status()? {
                SpawnStatus::Failing { failures, last_error, retry_in } => {
                    Some((Arc::clone(name), failures, last_error, retry_in))
                }
                SpawnStatus::Ready => None,
            })
            .collect();
        failing.sort_by(|a, b| a.0.cmp(&b.0));
        failing
    }

    /// Ends an agent session's backend sessions.
    pub fn forget_session(&self, session: &str) {
        let holder = SessionHolder::agent(session);
        self.expansions.forget(&holder);
        self.client.forget_agent_session(&holder);
    }

    /// Serves one request of an agent; the backend's progress and log notifications about it go to `relay`.
    pub async fn handle(
        self: &Arc<Self>,
        caller: &Caller,
        view: View<'_>,
        method: &Method,
        params: Value,
        relay: &Relay,
    ) -> Result<Found, RpcFailure> {
        let built = match method {
            // The task methods are boxed: inline, their futures would size every call's future (and cost a copy
            // per move), as the gates in `call_tool` would.
            Method::ToolsCall if tasks::wanted(caller, &params, relay) => {
                return Box::pin(self.start_task(caller, view, params, relay)).await;
            }
            Method::ToolsCall => match GatewayTool::named(&params) {
                // Boxed: inline, its future would grow every call's.
                Some(tool) => return Box::pin(self.gateway_tool(caller, view, tool, params, relay)).await,
                None => return self.call_tool(caller, view, params, relay).await,
            },
            Method::TasksGet | Method::TasksResult | Method::TasksCancel | Method::TasksUpdate
                if tasks::names_backend_task(&params) =>
            {
                Box::pin(self.relay_task(caller, method.as_str(), params, relay)).await
            }
            Method::TasksGet => Box::pin(self.get_task(caller, &params, relay)).await,
            Method::TasksResult => Box::pin(self.task_result(caller, &params)).await,
            Method::TasksList => Box::pin(self.list_tasks(caller, view, &params)).await,
            Method::TasksCancel => Box::pin(self.cancel_task(caller, &params, relay)).await,
            Method::TasksUpdate => Box::pin(self.update_task(caller, &params, relay)).await,
            Method::Ping => Ok(json!({})),
            Method::ToolsList => self.list_tools(caller, view, relay).await.map(|mut listed| {
                self.offer_tasks(view, &mut listed);
                self.ledger.metrics.tools_list_bytes(tool_search::json_size(&listed));
                listed
            }),
            Method::PromptsList => {
                let routing = self.routing.load();
                let grants = routing.grants(caller);
                Ok(json!({ "prompts": self.catalog.usable_prompts(view, |name| grants.prompt(name)) }))
            }
            Method::PromptsGet => self.get_prompt(caller, view, params, relay).await,
            Method::ResourcesList => self.list_resources(caller, view, method, "resources", &params).await,
            Method::ResourcesTemplatesList => {
                self.list_resources(caller, view, method, "resourceTemplates", &params).await
            }
            Method::ResourcesRead | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                self.resource_request(caller, view, method, params, relay).await
            }
            Method::CompletionComplete => self.complete(caller, view, params, relay).await,
            Method::LoggingSetLevel => self.set_level(caller, view, params).await,
            _ => Err(RpcFailure::new(jsonrpc::METHOD_NOT_FOUND, format!("method not found: {}", method.as_str()))),
        };
        built.map(Found::Built)
    }

    async fn call_tool(
        &self,
        caller: &Caller,
        view: View<'_>,
        mut params: Value,
        relay: &Relay,
    ) -> Result<Found, RpcFailure> {
        let Some(name) = params.get("name").and_then(Value::as_str).map(str::to_owned) else {
            caller.record.unknown_tool();
            return Err(RpcFailure::new(jsonrpc::INVALID_PARAMS, "tools/call needs `params.name`, the tool's name"));
        };
        let routing = self.routing.load();
        let grants = routing.grants(caller);
        let unknown = || {
            let text = format!("unknown tool `{name}`; call tools/list for the available tools");
            RpcFailure::new(jsonrpc::INVALID_PARAMS, text)
        };
        let route = match self.resolve_tool(view, &name, routing.discovery_wait).await {
            Resolved::Route(route) => route,
            Resolved::Starting(backend) => {
                caller.record.unknown_tool();
                caller.record.tool_outcome(ToolOutcome::NotDelivered);
                return Ok(Found::Built(outcome::backend_starting(&backend)));
            }
            Resolved::Unknown => {
                caller.record.unknown_tool();
                let held = self.catalog.quarantined_tool(view, &name);
                return Err(match held.filter(|route| usable(&grants, caller, "tool", route, Grants::tool)) {
                    Some(route) => pins::refusal("tool", &name, &route),
                    None => unknown(),
                });
            }
        };
        caller.record.tool(&route.backend, &route.exposed);
        caller.record.arguments(params.get("arguments"), canonical_digest);
        if !usable(&grants, caller, "tool", &route, Grants::tool) {
            caller.record.policy_denied();
            caller.record.tool_outcome(ToolOutcome::Denied);
            return Err(unknown());
        }
        tasks::refuse_untasked(caller, &route.definition, relay)?;
        let Some(target) = routing.targets.get(&route.backend) else {
            return Err(RpcFailure::new(jsonrpc::INVALID_PARAMS, no_longer_configured("tool", &name, &route.backend)));
        };
        let (slot, context) = caller.on_backend(&route.backend, target);
        let args_digest = canonical_digest(params.get("arguments").unwrap_or(&Value::Null));
        // Only a call that continues or asks for input needs its identity: built then, not for every call.
        let identity = || CallIdentity::with_digest(caller, &route.backend, method::TOOLS_CALL, &name, &args_digest);
        let refused = |_: &RpcFailure| caller.record.tool_outcome(ToolOutcome::Denied);
        let state = continuation::take_state(&mut params).inspect_err(refused)?;
        // A continued call (a `requestState`) passed the gate when it started.
        if state.is_none()
            && grants.needs_approval(&route.exposed)
            && let approvals::Gate::Answered(outcome, answer) =
                Box::pin(self.hold_for_approval(caller, &route, &mut params, relay)).await
        {
            caller.record.tool_outcome(outcome);
            return answer.map(Found::Built);
        }
        // A continued call was admitted by the limits when it started. The gates above and here are boxed, and
        // only entered when configured: inline, their futures would grow every call's and cost a copy per move.
        let limited = match state {
            None if !routing.limits.is_empty() => {
                Box::pin(limits::admit_call(&routing.limits, caller, &route, params.get("arguments"))).await
            }
            _ => Ok(Held::default()),
        };
        let mut allowance = match limited {
            Ok(allowance) => allowance,
            Err(refused) => return Ok(Found::Built(refused)),
        };
        let guarded = GuardedCall {
            caller,
            route: &route,
            params: &params,
            args_digest: &args_digest,
            deadline: context.deadline(),
        };
        let admitted = match state {
            None => self.ledger.admit(&guarded).await,
            Some(text) => {
                let continued = self.open_state(&text, &identity()).inspect_err(refused)?;
                let admitted = Box::pin(self.ledger.resume(&guarded, &continued, &self.waiting)).await;
                continuation::restore_backend_state(&mut params, continued.backend_state);
                admitted
            }
        };
        let (key, round) = match admitted {
            Admission::Run(key, round) => {
                allowance.ran();
                (key, round)
            }
            Admission::Answered(outcome, answer) => {
                caller.record.tool_outcome(outcome);
                return answer.map(Found::Built);
            }
        };
        params["name"] = Value::String(route.name.clone());
        let claimed = context.claimed(key.as_str());
        let to_backend = Destination { slot: &slot, target, context: &claimed };
        let answer = self.request_in_rounds(to_backend, method::TOOLS_CALL, params, relay).await;
        caller.record.tool_outcome(claims::tool_outcome(&answer));
        let report = Report { backend: &route.backend, target, audience: caller.audience };
        let answer = match self.continue_call(caller, identity, &report, &key, round, answer) {
            Ok(answer) => answer,
            Err(held) => return Ok(Found::Built(held)),
        };
        let needed = answer.as_ref().err().and_then(authorization::Needed::of);
        let settled = self.ledger.settle(&key, &report, answer).await;
        match needed {
            Some(needed) if authorization::declares_url_elicitation(relay.capabilities()) => {
                Err(authorization::url_elicitation_required(&[needed]))
            }
            _ => settled,
        }
    }
}

impl CallRouter {
    /// Holds a call a policy says needs an approval ([`approvals`]); without an `[approvals]` gate (a router
    /// built without the composition root) such calls are refused, never run unapproved.
    async fn hold_for_approval(
        &self,
        caller: &Caller,
        route: &catalog::Route,
        params: &mut Value,
        relay: &Relay,
    ) -> approvals::Gate {
        match self.approvals.get() {
            Some(gate) => gate.admit(&self.ledger.store, caller, route, params, relay).await,
            None => approvals::Gate::Answered(
                ToolOutcome::Denied,
                Err(RpcFailure::new(
                    jsonrpc::INVALID_PARAMS,
                    "this tool needs an approval, and approvals are not set up; the call did not run",
                )),
            ),
        }
    }
}

/// Whether `caller` may use the tool or prompt `route` (`allowed` asks `grants`); a refusal is logged, as the
/// caller is told only that no such name exists.
fn usable<'p>(
    grants: &Grants<'p>,
    caller: &Caller,
    kind: &str,
    route: &catalog::Route,
    allowed: fn(&Grants<'p>, &str) -> bool,
) -> bool {
    let usable = allowed(grants, &route.exposed);
    if !usable {
        tracing::warn!(principal = %caller.principal.name, kind, name = %route.exposed, "refused by policy");
    }
    usable
}

/// The answer for a tool or prompt whose backend a reload removed after the catalog was read.
fn no_longer_configured(kind: &str, name: &str, backend: &str) -> String {
    format!(
        "the backend `{backend}` of {kind} `{name}` is no longer configured; call tools/list for the available tools"
    )
}
