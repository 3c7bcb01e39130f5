//! The per-attempt timer of an async call: made only when the attempt has to wait, for the time
//! left until the attempt's deadline then, so an answer ready at once costs no timer and a slow
//! first poll still counts against the timeout.

use reliable::Reliable;
use reliable::clock::ManualClock;
use reliable::sleep::{Sleep, SleepFuture};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A sleep that records each timer asked of it and never fires.
#[derive(Clone, Debug, Default)]
struct Timers(Arc<Mutex<Vec<Duration>>>);

impl Timers {
    fn asked(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleep for Timers {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        self.0.lock().unwrap().push(duration);
        Box::pin(std::future::pending())
    }
}

/// An attempt whose first poll takes `first_poll` of the manual clock and then waits; it answers
/// on its next poll.
struct SlowFirstPoll {
    clock: ManualClock,
    first_poll: Duration,
    polled: bool,
}

impl Future for SlowFirstPoll {
    type Output = Result<u32, std::io::Error>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.polled {
            return Poll::Ready(Ok(7));
        }
        self.polled = true;
        self.clock.advance(self.first_poll);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn rel(clock: &ManualClock, timers: &Timers) -> Reliable {
    Reliable::builder("timer")
        .clock(clock.clone())
        .sleep(timers.clone())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn an_answer_ready_at_once_needs_no_timer() {
    let (clock, timers) = (ManualClock::new(), Timers::default());
    let rel = rel(&clock, &timers);
    for _ in 0..3 {
        let call = std::pin::pin!(rel.call(|| async { Ok::<_, std::io::Error>(1) }));
        assert!(matches!(poll(call), Poll::Ready(Ok(1))));
    }
    assert_eq!(timers.asked(), []);
}

#[test]
fn a_waiting_attempt_gets_the_time_left_after_its_first_poll() {
    // 10 s per attempt: 3 s spent in the first poll leave 7; 12 s leave none.
    for (first_poll, left) in [(3, 7), (12, 0)] {
        let (clock, timers) = (ManualClock::new(), Timers::default());
        let rel = rel(&clock, &timers);
        let mut call = std::pin::pin!(rel.call(|| SlowFirstPoll {
            clock: clock.clone(),
            first_poll: Duration::from_secs(first_poll),
            polled: false,
        }));
        assert!(poll(call.as_mut()).is_pending());
        assert_eq!(timers.asked(), [Duration::from_secs(left)]);
        // The answer is polled before the timer, as with `tokio::time::timeout`.
        assert!(matches!(poll(call.as_mut()), Poll::Ready(Ok(7))));
        // One timer for the attempt, not one per poll.
        assert_eq!(timers.asked().len(), 1);
    }
}
