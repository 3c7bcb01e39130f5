//! [`InFlight`]: how many `reliable_http_call`s run at once (`--max-http-calls`), in all and per
//! session.
//!
//! One tool call sends up to `max_attempts × (1 + max_hedges)` requests, holding up to
//! `1 + max_hedges` sockets and response bodies at a time; an agent issuing calls in parallel, or
//! several sessions doing so, multiplies that. The bound caps it, and is itself a way to attack
//! availability (take every slot, and every other client is refused), so it is shared out:
//!
//! With `N` the total (`--max-http-calls`) and `q = max(1, N / 4)`, a quarter of it:
//! - at most `N` calls are in flight in all;
//! - one session holds at most `q` of them (its share): one session cannot take them all;
//! - at most `N - q` of them are a session's second or later call: the last quarter is a reserve
//!   that a session with nothing in flight may take (its first call), and no other.
//!
//! Why both, and why no lending of idle slots beyond a share: a slot given is held until its call
//! ends, up to `--max-call-time` (120 s by default). Nothing is taken back: a call half done is not
//! thrown away for another, its requests already cost the downstream. So fairness has to be kept
//! when slots are given. A share alone lets `N / q` (4) busy sessions take every slot; with the
//! reserve, a full server has at least `q` sessions' first calls in it. A session holding nothing
//! is refused only when all `N` slots are taken, which takes at least `max(q, ⌈N / q⌉)` sessions
//! holding calls: 8 at the default of 32 (at most 8 each), 4 at `N = 8`.
//!
//! A call over the bound is refused at once (no queue: a queued call would hold its client for
//! up to `--max-call-time` without a word of why), saying what was refused, the bound and its
//! flag, and when to come back: the soonest time at which one of the calls in flight whose end
//! would let this session in reaches its ceiling (its start plus `--max-call-time`); it may end
//! sooner. The slot is held by a [`Slot`] that goes with the call's work: it is given back when
//! the work ends or is dropped (the client cancelled the call, or its session ended).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::policy_arg::Client;

/// The share of the slots one session may hold, and the reserve kept for sessions holding none:
/// `max(1, N / SHARE_DIVISOR)`.
pub const SHARE_DIVISOR: usize = 4;

/// The bound on `reliable_http_call`s in flight (see the [module docs](self)).
#[derive(Debug)]
pub struct InFlight {
    max: usize,
    share: usize,
    /// The longest a call may take (`--max-call-time`): a call in flight ends by its start plus
    /// this.
    ceiling: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The next call's number.
    next: u64,
    /// The calls in flight: whose, and when each started.
    calls: BTreeMap<u64, (Client, Instant)>,
    /// Calls in flight per session holding any (no entry for a session holding none).
    held: BTreeMap<Client, usize>,
}

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// All `N` slots are in flight.
    Full,
    /// The session holds its share.
    Share,
    /// The rest are the reserve, and the session holds a call already.
    Reserve,
}

impl State {
    /// Calls in flight in all.
    fn total(&self) -> usize {
        self.calls.len()
    }

    /// The calls in flight that are a session's second or later one.
    fn extras(&self) -> usize {
        self.total() - self.held.len()
    }
}

/// Whether a session holding `mine` may take one more slot, with `total` in flight of which
/// `extras` are a session's second or later call: the rule of the [module docs](self).
fn refusal(max: usize, share: usize, total: usize, extras: usize, mine: usize) -> Option<Refused> {
    // The session's own share first: it is what holds whatever the others do (only its own
    // calls' ends let it in), so the refusal names it.
    if mine >= share {
        Some(Refused::Share)
    } else if total >= max {
        Some(Refused::Full)
    } else if mine > 0 && extras >= max - share {
        // A second or later call would eat into the reserve: the last `share` slots are for
        // sessions with nothing in flight, so that a full server holds many sessions' calls,
        // not a few sessions' many.
        Some(Refused::Reserve)
    } else {
        None
    }
}

impl InFlight {
    /// At most `max` calls in flight (at least 1), each taking at most `ceiling`.
    pub fn new(max: usize, ceiling: Duration) -> Self {
        let max = max.max(1);
        InFlight {
            max,
            share: (max / SHARE_DIVISOR).max(1),
            ceiling,
            state: Mutex::default(),
        }
    }

    /// The most calls in flight at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The most one session may hold, and the slots kept for sessions holding none.
    pub fn share(&self) -> usize {
        self.share
    }

    /// The calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.lock().total()
    }

    /// The calls `client` has in flight now.
    pub fn held_by(&self, client: Client) -> usize {
        self.lock().held.get(&client).copied().unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a call of `client` starting at `now`, or the refusal to give the caller.
    pub fn try_take(self: &Arc<Self>, client: Client, now: Instant) -> Result<Slot, String> {
        let mut state = self.lock();
        let mine = state.held.get(&client).copied().unwrap_or(0);
        if let Some(why) = refusal(self.max, self.share, state.total(), state.extras(), mine) {
            return Err(self.refused(&state, why, client, mine, now));
        }
        let id = state.next;
        state.next += 1;
        state.calls.insert(id, (client, now));
        *state.held.entry(client).or_default() += 1;
        Ok(Slot {
            slots: self.clone(),
            id,
        })
    }

    fn release(&self, id: u64) {
        let mut state = self.lock();
        if let Some((client, _)) = state.calls.remove(&id)
            && let Some(n) = state.held.get_mut(&client)
        {
            *n -= 1;
            if *n == 0 {
                state.held.remove(&client);
            }
        }
    }

    /// When a slot comes free for `client`, at the latest: of the calls in flight whose end
    /// would let it in, the soonest to reach its ceiling (its start plus [`Self::ceiling`]).
    fn free_for(&self, state: &State, client: Client, mine: usize) -> Option<Instant> {
        state
            .calls
            .values()
            .filter(|&&(owner, _)| {
                let theirs = state.held.get(&owner).copied().unwrap_or(0);
                let sessions = state.held.len() - usize::from(theirs == 1);
                let total = state.total() - 1;
                let mine = mine - usize::from(owner == client);
                refusal(self.max, self.share, total, total - sessions, mine).is_none()
            })
            .map(|&(_, started)| started + self.ceiling)
            .min()
    }

    fn refused(
        &self,
        state: &State,
        why: Refused,
        client: Client,
        mine: usize,
        now: Instant,
    ) -> String {
        let (max, total) = (self.max, state.total());
        let what = match why {
            Refused::Full => format!(
                "all {max} reliable_http_calls this server runs at once are in flight \
                 (--max-http-calls {max}; this session holds {mine} of them)"
            ),
            Refused::Share => format!(
                "this session has {mine} reliable_http_calls in flight, its share of the {max} this \
                 server runs at once (a quarter of --max-http-calls {max}, at least 1: one session \
                 cannot take them all)"
            ),
            Refused::Reserve => format!(
                "{total} of the {max} reliable_http_calls this server runs at once are in flight, \
                 and the other {} are kept for sessions with no call in flight (a quarter of \
                 --max-http-calls {max} is kept so; this session holds {mine})",
                max - total
            ),
        };
        let at = self
            .free_for(state, client, mine)
            .unwrap_or(now + self.ceiling);
        let wait = at.saturating_duration_since(now);
        // Whole seconds, rounded up, and at least one (a call past its ceiling is ending).
        let secs = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
        format!(
            "refused, nothing sent: {what}. Retry after {secs} s: by then the soonest call in \
             flight whose end frees a slot for this session reaches the per-call time ceiling \
             (--max-call-time {}), if it has not ended before.",
            humane(self.ceiling)
        )
    }
}

/// `120 s`, `0.25 s`.
fn humane(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// One call's slot: given back when dropped, which is when the call's work ends or is dropped.
#[derive(Debug)]
#[must_use = "the slot is given back when dropped: hold it for as long as the call runs"]
pub struct Slot {
    slots: Arc<InFlight>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CEILING: Duration = Duration::from_secs(120);

    fn slots(max: usize) -> Arc<InFlight> {
        Arc::new(InFlight::new(max, CEILING))
    }

    /// The figure in a refusal's "Retry after N s".
    fn retry_after(e: &str) -> u64 {
        e.split("Retry after ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no retry-after figure in {e}"))
    }

    #[test]
    fn the_share_is_a_quarter_and_at_least_one() {
        for (max, share) in [
            (1, 1),
            (3, 1),
            (4, 1),
            (7, 1),
            (8, 2),
            (32, 8),
            (33, 8),
            (256, 64),
        ] {
            assert_eq!(slots(max).share(), share, "{max}");
        }
    }

    /// One session takes its share and no more; others still get theirs; the last quarter goes
    /// only to sessions holding nothing; when full, everyone is refused; a slot given back is
    /// taken again.
    #[test]
    fn the_rule_at_the_default_of_32() {
        let s = slots(32);
        let now = Instant::now();
        let mut held = Vec::new();
        let mut take = |client: Client| s.try_take(client, now).map(|slot| held.push(slot));
        for _ in 0..8 {
            take(1).unwrap();
        }
        let e = take(1).unwrap_err();
        assert!(
            e.contains("this session has 8 reliable_http_calls in flight, its share of the 32"),
            "{e}"
        );
        // Sessions 2 and 3 take their shares too: 24 in flight, 21 of them extras.
        for client in [2, 3] {
            for _ in 0..8 {
                take(client).unwrap();
            }
        }
        // Session 4 gets 4: at 24 extras the remaining 4 are the reserve.
        for _ in 0..4 {
            take(4).unwrap();
        }
        let e = take(4).unwrap_err();
        assert!(
            e.contains("28 of the 32 reliable_http_calls this server runs at once are in flight, and the other 4 are kept for sessions with no call in flight"),
            "{e}"
        );
        // Four sessions holding nothing get one each, then the server is full.
        for client in 5..=8 {
            take(client).unwrap();
        }
        assert_eq!(s.in_flight(), 32);
        let e = take(9).unwrap_err();
        assert!(e.contains("all 32 reliable_http_calls this server runs at once are in flight (--max-http-calls 32; this session holds 0 of them)"), "{e}");
        assert_eq!(retry_after(&e), 120);
        // Session 5's call ends: a session holding nothing takes its slot, session 4 does not.
        let i = held.len() - 4;
        drop(held.remove(i));
        assert_eq!(s.in_flight(), 31);
        assert!(s.try_take(4, now).is_err());
        let ninth = s.try_take(9, now).unwrap();
        drop(ninth);
        drop(held);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(
            s.lock().held.len(),
            0,
            "no session is left holding anything"
        );
    }

    /// Any sequence of takes and releases keeps the rule's invariants: at most `max` in all, at
    /// most `share` per session, at most `max - share` extras, and a session holding nothing is
    /// refused only when all are in flight.
    #[test]
    fn invariants_hold_under_any_sequence() {
        for max in [1, 2, 3, 4, 5, 8, 9, 16, 32] {
            let s = slots(max);
            let now = Instant::now();
            let mut held: Vec<Slot> = Vec::new();
            // A small deterministic generator: xorshift.
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ max as u64;
            for _ in 0..5_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let client = x % 12;
                if x.is_multiple_of(3) && !held.is_empty() {
                    let i = (x as usize / 3) % held.len();
                    drop(held.swap_remove(i));
                } else {
                    let before = s.held_by(client);
                    let total = s.in_flight();
                    match s.try_take(client, now) {
                        Ok(slot) => held.push(slot),
                        Err(e) => {
                            assert!(before > 0 || total == max, "{max}: {e}");
                            assert!(e.contains("--max-http-calls"), "{e}");
                        }
                    }
                }
                let state = s.lock();
                assert!(state.total() <= max);
                assert!(state.extras() <= max - s.share());
                assert!(state.held.values().all(|&n| 0 < n && n <= s.share()));
                assert_eq!(state.held.values().sum::<usize>(), state.total());
            }
        }
    }

    /// The figure is the soonest end, at its ceiling, of a call whose end lets this session in:
    /// its own for a session at its share, anyone's for one holding nothing.
    #[test]
    fn retry_after_is_the_soonest_ceiling_that_frees_a_slot_for_the_caller() {
        let s = slots(8); // a share of 2
        let t0 = Instant::now();
        let mut held = Vec::new();
        for (client, at) in [
            (1, 0),
            (2, 10),
            (2, 20),
            (3, 30),
            (3, 40),
            (4, 50),
            (4, 60),
            (1, 70),
        ] {
            held.push(s.try_take(client, t0 + Duration::from_secs(at)).unwrap());
        }
        let now = t0 + Duration::from_secs(80);
        // Session 5, holding nothing: the first call ends at 0 + 120, 40 s from now.
        assert_eq!(retry_after(&s.try_take(5, now).unwrap_err()), 40);
        // Session 3, at its share: only its own calls' ends let it in (30 + 120).
        assert_eq!(retry_after(&s.try_take(3, now).unwrap_err()), 70);
        // A fraction of a second rounds up.
        let later = now + Duration::from_millis(500);
        assert_eq!(retry_after(&s.try_take(5, later).unwrap_err()), 40);
        // Past every ceiling: at least 1 s.
        let past = t0 + Duration::from_secs(1000);
        assert_eq!(retry_after(&s.try_take(5, past).unwrap_err()), 1);
    }
}
