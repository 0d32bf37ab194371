//! Tests of the inline wake-ups: one made during the poll is another round and reaches no scheduler, one made
//! after it wakes the task, a future that keeps waking itself still yields, and no wake-up from another thread
//! is lost.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

use super::*;

/// A task waker that counts its wake-ups.
#[derive(Default)]
struct Counted(AtomicUsize);

impl Wake for Counted {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted() -> (Arc<Counted>, Waker) {
    let counted = Arc::new(Counted::default());
    (counted.clone(), Waker::from(counted))
}

#[test]
fn a_wake_up_during_the_poll_is_another_round_not_a_wake_of_the_task() {
    let (task, waker) = counted();
    let wake = InlineWake::new();
    let mut rounds = 0;
    let outcome = wake.poll(&mut Context::from_waker(&waker), |cx| {
        rounds += 1;
        if rounds == 1 {
            // What a channel does when the receiver is polled by the same task: it wakes that task at once.
            cx.waker().wake_by_ref();
            Poll::Pending
        } else {
            Poll::Ready(rounds)
        }
    });
    assert_eq!(outcome, Poll::Ready(2));
    assert_eq!(task.0.load(Ordering::SeqCst), 0, "the task was not woken: the poll went another round");
}

#[test]
fn a_wake_up_after_the_poll_wakes_the_task_that_polled_last() {
    let (first, first_waker) = counted();
    let (second, second_waker) = counted();
    let wake = InlineWake::new();
    let mut kept = None;
    let mut poll_keeping = |waker: &Waker| {
        wake.poll(&mut Context::from_waker(waker), |cx| {
            kept = Some(cx.waker().clone());
            Poll::<()>::Pending
        })
    };
    assert_eq!(poll_keeping(&first_waker), Poll::Pending);
    assert_eq!(poll_keeping(&second_waker), Poll::Pending);
    kept.expect("polled").wake();
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1, "the wake-up reached the task that polled last");
}

#[test]
fn a_future_that_keeps_waking_itself_has_its_task_woken_after_a_few_rounds() {
    let (task, waker) = counted();
    let wake = InlineWake::new();
    let mut rounds = 0;
    let outcome = wake.poll(&mut Context::from_waker(&waker), |cx| {
        rounds += 1;
        cx.waker().wake_by_ref();
        Poll::<()>::Pending
    });
    assert_eq!(outcome, Poll::Pending);
    assert_eq!(rounds, ROUNDS);
    assert_eq!(task.0.load(Ordering::SeqCst), 1, "the task is woken so that it yields and comes back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_wake_up_from_another_thread_is_lost() {
    // Each future is ready once another thread set its flag, and that thread then wakes it: at whatever moment
    // of the poll the wake-up lands, the future must finish. A lost one hangs until the timeout.
    for _ in 0..2000 {
        let ready = Arc::new(AtomicBool::new(false));
        let registered: Arc<Mutex<Option<Waker>>> = Arc::default();
        let setter = {
            let (ready, registered) = (ready.clone(), registered.clone());
            std::thread::spawn(move || {
                ready.store(true, Ordering::SeqCst);
                if let Some(waker) = registered.lock().take() {
                    waker.wake();
                }
            })
        };
        let finished = run(std::future::poll_fn(|cx| {
            *registered.lock() = Some(cx.waker().clone());
            if ready.load(Ordering::SeqCst) { Poll::Ready(()) } else { Poll::Pending }
        }));
        tokio::time::timeout(Duration::from_secs(5), finished).await.expect("every wake-up arrives");
        setter.join().expect("the setter ends");
    }
}
