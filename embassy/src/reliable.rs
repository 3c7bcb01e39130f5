//! [`Reliable`]: a whole call driven through reliable-core's call engine, with the copies it
//! asks for as futures and its waits on a [`Clock`].
//!
//! The engine ([`reliable_core::engine::Call`]) decides every step: admission by each layer,
//! the retry and its wait, hedges, timeouts, the end. This face only runs the copies it asks
//! for (each a future from the caller's closure, in one of `COPIES` slots), drops the copies
//! it cancels, keeps one timer at the instant it asks to be woken, and hands back each copy's
//! result, classified by the caller.

use core::borrow::Borrow;
use core::cell::Cell;
use core::convert::Infallible;
use core::future::{Future, pending, poll_fn};
use core::task::Poll;

use embassy_futures::select::{Either, select, select_array};
use embassy_futures::yield_now;
use reliable_core::Duration;
use reliable_core::breaker::RejectReason;
use reliable_core::engine::{Action, Call, End, Ended, Input, Plan, Refusal, Shared};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::GiveUpReason;

use crate::clock::Clock;

/// Why a call returned no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error<E> {
    /// The breaker is open: nothing more was sent. `retry_after` says when it lets a call
    /// through again (`None`: opened by hand, until reset). `last` is the error of the attempt
    /// whose failure opened it, when this call's own attempt did (`None` if it timed out, or if
    /// the breaker was open before the call).
    Open {
        /// How long until the breaker lets a call through.
        retry_after: Option<Duration>,
        /// The error of this call's last attempt, if it had one.
        last: Option<E>,
    },
    /// Another local refusal ended the call: the breaker's half-open probes are taken or it is
    /// ramping up (slow start), the adaptive throttle shed it, the ledger could not pay for a
    /// probe, or a concurrency or rate limit was reached.
    Refused {
        /// Who refused, and why.
        by: Refusal,
        /// The error of this call's last attempt, if it had one.
        last: Option<E>,
    },
    /// The last attempt timed out (its future was dropped) and the policy stopped.
    Timeout {
        /// Why there was no further attempt.
        reason: GiveUpReason,
        /// Attempts sent (hedges included).
        attempts: u32,
    },
    /// The last attempt failed with `last` and the policy stopped (the error was not
    /// retryable, the attempts or the deadline ran out, or the budget refused a retry).
    GaveUp {
        /// Why there was no further attempt.
        reason: GiveUpReason,
        /// The last attempt's error.
        last: E,
        /// Attempts sent (hedges included).
        attempts: u32,
    },
    /// A copy was lost without an answer (no slot was free for it).
    Cancelled {
        /// Attempts sent.
        attempts: u32,
    },
}

impl<E> Error<E> {
    /// How long until the refuser lets a call through, when it says: the open breaker, or the
    /// rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Open { retry_after, .. } => *retry_after,
            Error::Refused { by, .. } => by.retry_after(),
            _ => None,
        }
    }
}

/// A policy around async calls; see the [crate docs](crate).
///
/// - `S`: the state its calls share, the core's [`Shared`]: a [`State`](crate::State) (a
///   breaker, a retry budget, any other layer) or your own.
/// - `C`: the [`Clock`].
/// - `P`: the [`Plan`], owned or borrowed (`&'static Plan`: a plan in flash, a few hundred
///   bytes less RAM).
/// - `COPIES`: how many copies of one attempt may be in flight at once (1: no hedging; up to 12,
///   and each slot takes the size of one attempt's future in the call's future).
pub struct Reliable<S, C, P = Plan, const COPIES: usize = 1> {
    shared: S,
    plan: P,
    clock: C,
}

impl<S, C, P, const COPIES: usize> core::fmt::Debug for Reliable<S, C, P, COPIES> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reliable").finish_non_exhaustive()
    }
}

impl<S: Shared, C: Clock, P: Borrow<Plan>, const COPIES: usize> Reliable<S, C, P, COPIES> {
    /// Calls drawing from `shared`, run as `plan` says, on `clock`.
    pub const fn new(shared: S, plan: P, clock: C) -> Self {
        Reliable {
            shared,
            plan,
            clock,
        }
    }

    /// The state its calls share.
    pub fn shared(&self) -> &S {
        &self.shared
    }

    /// The clock it reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Calls `f` (`|| async { … }`) as the engine says: each copy it sends is a future from
    /// `f`; `classify` says what each error means. A copy the engine times out (the attempt's
    /// timeout, its own, or the deadline) or cancels (it lost a hedged race) is dropped, which
    /// cancels whatever it was doing.
    ///
    /// Dropping the returned future (a `select` that took another branch, a timeout around the
    /// whole call) drops the copies in flight and hands what they held back to the state: the
    /// breaker's permits unused, the limits' slots, the budget's grant.
    pub async fn call<T, E, F, Fut>(
        &self,
        classify: impl Fn(&E) -> ErrorClass,
        f: F,
    ) -> Result<T, Error<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let slots: [Slot<Result<T, E>>; COPIES] = core::array::from_fn(|_| Slot::new());
        // The copies are made and run in the slots, polled before the driver, so the driver sees
        // every answer that came in before it looks at the time.
        let make = Cell::new(Some(f));
        let copies = select_array(slots.each_ref().map(|s| s.run(&make)));
        match select(copies, self.drive(&slots, classify)).await {
            Either::First((never, _)) => match never {},
            Either::Second(result) => result,
        }
    }

    /// The engine's driver: sends, cancels, the timer, the answers.
    async fn drive<T, E>(
        &self,
        slots: &[Slot<Result<T, E>>; COPIES],
        classify: impl Fn(&E) -> ErrorClass,
    ) -> Result<T, Error<E>> {
        let plan = self.plan.borrow();
        let mut run = Running {
            call: Call::<S, COPIES>::start(plan, &self.shared, self.clock.now()),
            clock: &self.clock,
            over: false,
        };
        let mut won: Option<(u32, T)> = None;
        let mut last: Option<(u32, E)> = None;
        loop {
            let (mut moved, mut cancelled) = (false, false);
            while let Some(action) = run.call.poll() {
                match action {
                    Action::Send { n, .. } => {
                        if cancelled {
                            // The copies cancelled are dropped before the next is made.
                            yield_now().await;
                            cancelled = false;
                        }
                        match slots.iter().find(|s| s.is_free()) {
                            Some(slot) => {
                                slot.send(n);
                                moved = true;
                            }
                            // Never with the engine's own count of copies; still no panic.
                            None => run.call.handle(self.clock.now(), Input::Dropped { n }),
                        }
                    }
                    Action::Cancel { n, .. } => {
                        if let Some(slot) = slots.iter().find(|s| s.copy.get() == n) {
                            slot.cancel();
                            (moved, cancelled) = (true, true);
                        }
                    }
                    Action::Done(end) => {
                        run.over = true;
                        return outcome(end, won, last);
                    }
                }
            }
            if moved {
                // The slots start and drop copies now, at this instant.
                yield_now().await;
            }
            let wake = run.call.poll_timeout();
            let answered = poll_fn(|_| answered(slots).map_or(Poll::Pending, Poll::Ready));
            let timer = async {
                match wake {
                    Some(at) => self.clock.sleep_until(at).await,
                    None => pending().await,
                }
            };
            let event = select(answered, timer).await;
            let now = self.clock.now();
            match event {
                Either::First((n, Ok(value))) => {
                    won = Some((n, value));
                    run.call.handle(now, Input::Classified { n, class: None });
                }
                Either::First((n, Err(e))) => {
                    let class = classify(&e);
                    last = Some((n, e));
                    let class = Some(class);
                    run.call.handle(now, Input::Classified { n, class });
                }
                Either::Second(()) => run.call.handle(now, Input::Tick),
            }
        }
    }
}

/// A call in progress; dropped unfinished (its future was dropped), it is cancelled: what its
/// copies hold goes back to the shared state.
struct Running<'a, S: Shared, C: Clock, const COPIES: usize> {
    call: Call<'a, S, COPIES>,
    clock: &'a C,
    over: bool,
}

impl<S: Shared, C: Clock, const COPIES: usize> Drop for Running<'_, S, C, COPIES> {
    fn drop(&mut self) {
        if !self.over {
            self.call.handle(self.clock.now(), Input::Cancel);
            while self.call.poll().is_some() {}
        }
    }
}

/// The first answer waiting in a slot (the lowest copy, as they were sent), its slot freed.
fn answered<O>(slots: &[Slot<O>]) -> Option<(u32, O)> {
    let slot = slots
        .iter()
        .filter(|s| s.copy.get() != 0 && s.has_answer())
        .min_by_key(|s| s.copy.get())?;
    let n = slot.copy.replace(0);
    slot.done.take().map(|out| (n, out))
}

/// The call's end as its result: the winner's value, or the error of the last answer taken
/// (none when it was a timeout).
fn outcome<T, E>(end: End, won: Option<(u32, T)>, last: Option<(u32, E)>) -> Result<T, Error<E>> {
    let attempts = end.attempts;
    let last = last
        .filter(|(k, _)| end.last.is_some_and(|(n, _)| n == *k))
        .map(|(_, e)| e);
    match end.result {
        Ended::Ok { n } => match won {
            Some((k, value)) if k == n => Ok(value),
            _ => Err(Error::Cancelled { attempts }),
        },
        Ended::GaveUp(reason) => Err(match last {
            Some(last) => Error::GaveUp {
                reason,
                last,
                attempts,
            },
            None => Error::Timeout { reason, attempts },
        }),
        Ended::Refused(Refusal::Breaker(RejectReason::Open { retry_after })) => Err(Error::Open {
            retry_after: (retry_after != Duration::MAX).then_some(retry_after),
            last,
        }),
        Ended::Refused(Refusal::Breaker(RejectReason::ForcedOpen)) => Err(Error::Open {
            retry_after: None,
            last,
        }),
        Ended::Refused(by) => Err(Error::Refused { by, last }),
        Ended::Cancelled => Err(Error::Cancelled { attempts }),
    }
}

/// Where one copy runs: the driver orders a copy (`send`) and takes its output out; the slot's
/// task makes the copy (the caller's closure) and polls it until it is done or cancelled.
struct Slot<O> {
    /// The copy in this slot (0: free).
    copy: Cell<u32>,
    /// A copy to make and start.
    start: Cell<bool>,
    /// The copy's output, until the driver takes it.
    done: Cell<Option<O>>,
}

impl<O> Slot<O> {
    fn new() -> Self {
        Slot {
            copy: Cell::new(0),
            start: Cell::new(false),
            done: Cell::new(None),
        }
    }

    fn is_free(&self) -> bool {
        self.copy.get() == 0
    }

    fn has_answer(&self) -> bool {
        let out = self.done.take();
        let some = out.is_some();
        self.done.set(out);
        some
    }

    fn send(&self, n: u32) {
        self.copy.set(n);
        self.done.set(None);
        self.start.set(true);
    }

    /// Frees the slot: the copy is dropped before it is polled again (or never made).
    fn cancel(&self) {
        self.copy.set(0);
        self.start.set(false);
        self.done.set(None);
    }

    /// The slot's task: makes each copy ordered in it with `make` and runs it until it answers
    /// or is cancelled.
    async fn run<F, Fut>(&self, make: &Cell<Option<F>>) -> Infallible
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = O>,
    {
        loop {
            poll_fn(|_| match self.start.replace(false) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            })
            .await;
            let n = self.copy.get();
            // The closure is lent to one slot at a time; it is always back between two polls.
            let Some(mut f) = make.take() else {
                continue;
            };
            let fut = f();
            make.set(Some(f));
            let cancelled = poll_fn(|_| match self.copy.get() == n {
                true => Poll::Pending,
                false => Poll::Ready(()),
            });
            // The cancellation first: a cancelled copy is never polled again.
            if let Either::Second(out) = select(cancelled, fut).await {
                self.done.set(Some(out));
            }
        }
    }
}
