//! Wake-ups a task gives itself while it is being polled, turned into another round of the same poll instead of
//! a trip through the scheduler.
//!
//! Tokio treats a wake-up that arrives while the task runs as a yield: it queues the task again and wakes an idle
//! worker thread to come and take it (a futex or eventfd round trip, and often the task moved to the other core)
//! for work this very poll could do at once. Two tasks get most of their wake-ups from inside their own poll:
//! - the task of an agent's connection (`front/listener.rs`): hyper's server connection, the handler it polls and
//!   the backend connection the handler drives hand each other the request, the backend's response head and body,
//!   the agent's request body, the call's message channel closing, the connection turning idle — eight wake-ups
//!   per call;
//! - a PostgreSQL ledger writer (`ledger/postgres/conn.rs`), which drives its own connection: the batch handed to
//!   the connection and the server's answers handed back.
//!
//! (docs/decisions.md, *The call path*.)
//!
//! Rules:
//! - The future is polled with a waker of its own. A wake-up while it is being polled only marks the poll for
//!   another round; one after it (from the I/O driver, a timer or another thread) wakes the task as before.
//! - No wake-up is lost: "being polled" and "woken meanwhile" are one atomic state, so a wake-up either lands
//!   while the poll runs (and the poll goes another round) or finds it over (and wakes the task).
//! - At most [`ROUNDS`] rounds per poll, and none more once the task has used up its cooperative budget (the
//!   runtime's resources then answer `Pending` until it yields): a future that keeps waking itself then has the
//!   task woken, so it still yields to the others. (Tokio's own `yield_now` defers its wake-up until after the
//!   poll, so it yields as before.)

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use parking_lot::Mutex;

/// The state bit set while the future is being polled.
const POLLING: u8 = 1;
/// The state bit set by a wake-up that arrived while [`POLLING`] was set.
const WOKEN: u8 = 2;
/// The most rounds of one poll.
const ROUNDS: usize = 4;

/// Runs `future` to its end, polled through an [`InlineWake`].
pub(crate) async fn run<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let wake = InlineWake::new();
    poll_fn(|cx| wake.poll(cx, |cx| future.as_mut().poll(cx))).await
}

/// Polls one future for the task that polls it now; reused across the future's polls.
struct InlineWake {
    shared: Arc<Shared>,
    /// A waker of `shared`, made once.
    waker: Waker,
}

struct Shared {
    state: AtomicU8,
    /// The waker of the task that polled last.
    task: Mutex<Option<Waker>>,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let marked = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| (state & POLLING != 0).then_some(state | WOKEN))
            .is_ok();
        if !marked && let Some(task) = &*self.task.lock() {
            task.wake_by_ref();
        }
    }
}

impl InlineWake {
    fn new() -> InlineWake {
        let shared = Arc::new(Shared { state: AtomicU8::new(0), task: Mutex::new(None) });
        let waker = Waker::from(shared.clone());
        InlineWake { shared, waker }
    }

    /// Polls `poll` for the task of `cx`, again while the round before woke it (see the module's rules).
    fn poll<T>(&self, cx: &mut Context<'_>, mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        self.remember(cx.waker());
        let mut inner = Context::from_waker(&self.waker);
        for _ in 0..ROUNDS {
            self.shared.state.store(POLLING, Ordering::Release);
            let outcome = poll(&mut inner);
            let state = self.shared.state.swap(0, Ordering::AcqRel);
            if outcome.is_ready() || state & WOKEN == 0 {
                return outcome;
            }
            // Out of budget, the runtime's resources answer `Pending` and wake at once until the task yields.
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn remember(&self, task: &Waker) {
        let mut slot = self.shared.task.lock();
        if !slot.as_ref().is_some_and(|known| known.will_wake(task)) {
            *slot = Some(task.clone());
        }
    }
}

#[cfg(test)]
#[path = "inline_wake_tests.rs"]
mod tests;
