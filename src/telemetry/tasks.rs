//! The task metrics: `switchyard_tasks{state}` (the tasks this instance runs now, `working`, and those it saw
//! end since it started, by the status they ended in) and `switchyard_tasks_created_total`.
//!
//! Rules: the state is one of four fixed labels, every series present from the start (at zero).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub const TASKS: &str = "switchyard_tasks";
pub const TASKS_CREATED: &str = "switchyard_tasks_created_total";
const STATES: [&str; 4] = ["working", "completed", "failed", "cancelled"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

/// The two families, registered once with the gateway's registry.
#[derive(Default)]
pub(super) struct TaskMetrics {
    tasks: Family<StateLabels, Gauge>,
    created: Counter,
}

impl TaskMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        STATES.iter().for_each(|state| drop(self.tasks.get_or_create(&StateLabels { state })));
        let tasks = "Tasks this instance runs now (working), and those it saw end since it started, by status";
        registry.register(TASKS, tasks, self.tasks.clone());
        // The exposition adds `_total` to a counter's registered name.
        let created = "Tasks agents created through this instance";
        registry.register(TASKS_CREATED.trim_end_matches("_total"), created, self.created.clone());
    }

    pub(super) fn created(&self) {
        self.created.inc();
        self.tasks.get_or_create(&StateLabels { state: "working" }).inc();
    }

    /// A task this instance ran ended `state`; one it did not run (`ran` false) left no `working` series.
    pub(super) fn ended(&self, state: &str, ran: bool) {
        if ran {
            self.tasks.get_or_create(&StateLabels { state: "working" }).dec();
        }
        if let Some(state) = STATES.into_iter().skip(1).find(|known| *known == state) {
            self.tasks.get_or_create(&StateLabels { state }).inc();
        }
    }
}
