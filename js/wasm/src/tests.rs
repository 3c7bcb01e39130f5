use super::*;

fn world() -> &'static World {
    Box::leak(Box::new(World::new()))
}

/// Polls every action of `call`.
fn actions(w: &World, call: u32) -> Vec<(Polled, [f64; 6])> {
    let mut out = Vec::new();
    loop {
        match w.poll(call).unwrap() {
            Polled::Idle => return out,
            p => out.push((p, w.out())),
        }
    }
}

fn seed_policy(w: &World, attempts: u32, breaker: Option<u32>) -> u32 {
    let retry = seed_retry(attempts, -1.0, 200.0, 2.0, 0.0, -1.0, 30_000.0).unwrap();
    w.policy_new(Policy::new(Plan::new(retry)), breaker)
        .unwrap()
}

#[test]
fn a_call_is_decided_by_the_engine() {
    let w = world();
    let p = seed_policy(w, 3, None);
    let c = w.call_start(p, 0.0, 0.5, 0.5).unwrap();
    assert_eq!(
        actions(w, c),
        [(Polled::Send, [1.0, -1.0, 0.0, 0.0, 0.0, 0.0])]
    );
    let answer = Input::Answer {
        n: 1,
        answer: answer_of(500, -1.0, -1, 0),
    };
    w.call_input(c, answer, 10.0, 0.5, 0.5).unwrap();
    assert!(actions(w, c).is_empty());
    assert_eq!(w.timeout(c, 10.0).unwrap(), 200.0);
    let notes: Vec<Event> = core::iter::from_fn(|| w.events().pop()).collect();
    assert!(notes.contains(&Event::Note(Note::Retry {
        after: Duration::from_millis(200),
        class: ErrorClass::Transient,
        attempts: 1
    })));
    w.call_input(c, Input::Tick, 210.0, 0.5, 0.5).unwrap();
    assert_eq!(actions(w, c)[0].0, Polled::Send);
    let ok = Input::Answer {
        n: 2,
        answer: answer_of(200, -1.0, -1, 0),
    };
    w.call_input(c, ok, 220.0, 0.5, 0.5).unwrap();
    assert_eq!(
        actions(w, c),
        [(Polled::Done, [0.0, 2.0, 2.0, -1.0, -1.0, -1.0])]
    );
    w.call_free(c, 220.0);
    assert_eq!(w.poll(c), Err(Failure::BadHandle));
}

#[test]
fn an_answer_that_opens_the_breaker_ends_the_call() {
    let w = world();
    let b = w.breaker_new(seed_breaker(1.0, 2, 1000.0, 1)).unwrap();
    let p = seed_policy(w, 5, Some(b));
    let c = w.call_start(p, 0.0, 0.5, 0.5).unwrap();
    actions(w, c);
    for (n, now) in [(1, 10.0), (2, 220.0)] {
        let answer = Input::Answer {
            n,
            answer: answer_of(503, -1.0, -1, 0),
        };
        w.call_input(c, answer, now, 0.5, 0.5).unwrap();
        if n == 1 {
            w.call_input(c, Input::Tick, 210.0, 0.5, 0.5).unwrap();
            actions(w, c);
        }
    }
    let done = actions(w, c);
    // Refused by the breaker (0), with the 503 (throttled, 2) of copy 2 as the last answer.
    assert_eq!(done, [(Polled::Done, [2.0, 2.0, 2.0, 2.0, 0.0, 1000.0])]);
    assert_eq!(w.breaker_state(b, 220.0).unwrap(), 1);
    let events: Vec<Event> = core::iter::from_fn(|| w.events().pop()).collect();
    assert!(events.contains(&Event::Breaker {
        from: State::Closed,
        to: State::Open
    }));
}

#[test]
fn handles_are_checked_and_tables_fill() {
    let w = world();
    assert_eq!(w.breaker_state(7, 0.0), Err(Failure::BadHandle));
    assert_eq!(w.poll(100), Err(Failure::BadHandle));
    assert_eq!(w.call_start(3, 0.0, 0.0, 0.0), Err(Failure::BadHandle));
    let b = w.breaker_new(seed_breaker(0.5, 20, 30_000.0, 3)).unwrap();
    w.breaker_free(b);
    w.breaker_free(b);
    assert_eq!(w.breaker_state(b, 0.0), Err(Failure::BadHandle));
    assert!(matches!(
        w.breaker_new(seed_breaker(0.5, MAX_WINDOW as u32 + 1, 1.0, 1)),
        Err(Failure::Config(_))
    ));
    assert!(matches!(
        w.breaker_new(seed_breaker(f64::NAN, 20, 1.0, 1)),
        Err(Failure::Config(e)) if e.field == "failure_rate"
    ));
    let p = seed_policy(w, 3, None);
    let calls: Vec<u32> = (0..MAX_CALLS)
        .map(|_| w.call_start(p, 0.0, 0.0, 0.0).unwrap())
        .collect();
    assert_eq!(
        w.call_start(p, 0.0, 0.0, 0.0),
        Err(Failure::Full(Table::Calls))
    );
    w.call_free(calls[5], 0.0);
    assert_eq!(w.call_start(p, 0.0, 0.0, 0.0), Ok(calls[5]));
}

#[test]
fn answers_mean_what_the_core_says() {
    let none = -1.0;
    let class = |m: u32| m & ANSWER_CLASS;
    let cases = [
        // status, server delay, x-should-retry, overload marker, class, flags
        (200, none, -1, 0, ANSWER_OK, ANSWER_ACCEPTED),
        (0, none, -1, 0, ANSWER_OK, ANSWER_ACCEPTED),
        (
            404,
            2000.0,
            -1,
            0,
            3,
            ANSWER_BREAKER_IGNORES | ANSWER_ACCEPTED,
        ),
        (408, none, -1, 0, 0, ANSWER_ACCEPTED),
        (429, 1500.0, -1, 0, 2, ANSWER_DELAY_HONOURED),
        (503, none, -1, 0, 2, 0),
        (503, f64::NAN, -1, 0, 2, 0),
        (400, none, -1, 1, 2, 0),
        (429, none, 0, 0, 4, ANSWER_ACCEPTED),
        (400, none, 1, 0, 0, ANSWER_ACCEPTED),
        (70_000, none, -1, 0, 0, ANSWER_ACCEPTED),
        (-1, 5000.0, -1, 0, 1, 0),
        (-2, none, -1, 0, 0, ANSWER_ACCEPTED),
        (i32::MIN, none, -1, 0, 0, ANSWER_ACCEPTED),
    ];
    for (status, delay, should_retry, overloaded, code, flags) in cases {
        let m = answer_meaning(status, delay, should_retry, overloaded);
        assert_eq!(
            (class(m), m & !ANSWER_CLASS),
            (code, flags),
            "{status} {delay} {should_retry} {overloaded}"
        );
    }
}

#[test]
fn a_nesting_flag_reads_as_the_core_nests() {
    use crate::policy::nesting_of;
    use reliable_core::engine::{Gate, Nesting};
    // Throttle, breaker outside the retry (the ledger between them), limit, rate inside.
    let flag = 1 | 2 << 3 | 3 << 6 | 4 << 9 | 2 << 12 | 1 << 15;
    let want = Nesting::new(
        &[Gate::Throttle, Gate::Breaker],
        1,
        &[Gate::Limit, Gate::Rate],
    )
    .unwrap();
    assert_eq!(nesting_of(flag), Some(want));
    assert_eq!(nesting_of(0), Some(Nesting::new(&[], 0, &[]).unwrap()));
    // A gate twice, an unknown gate, more outside than there are, a ledger past them, stray bits.
    for bad in [1 | 1 << 3, 5, 1 | 2 << 12, 1 | 1 << 12 | 2 << 15, 1 << 20] {
        assert_eq!(nesting_of(bad), None, "{bad:#x}");
    }
}

/// A policy of one attempt through a bulkhead of one call and the seed's breaker (opened by one
/// failure): the limit's and the breaker's state are its own until shared.
fn limited(w: &'static World) -> u32 {
    use reliable_core::limit::{Limiter, LimiterConfig, LimiterPolicy};
    let retry = seed_retry(1, -1.0, 200.0, 2.0, 0.0, -1.0, 30_000.0).unwrap();
    let mut p = Policy::new(Plan::new(retry));
    p.limiter = Some(RefCell::new(Limiter::new(
        LimiterPolicy::new(LimiterConfig::bulkhead(1)).unwrap(),
    )));
    p.owns_breaker = true;
    let b = w.breaker_new(seed_breaker(1.0, 1, 1000.0, 1)).unwrap();
    w.policy_new(p, Some(b)).unwrap()
}

/// The breaker a policy's calls pass.
fn breaker_of(w: &World, policy: u32) -> u32 {
    w.policies[policy as usize]
        .borrow()
        .as_ref()
        .and_then(|p| p.breaker)
        .unwrap()
}

/// The code of the first action of a call started under `policy`, and the call.
fn first(w: &'static World, policy: u32, now: f64) -> (Polled, [f64; 6], u32) {
    let c = w.call_start(policy, now, 0.5, 0.5).unwrap();
    let (p, out) = actions(w, c).first().copied().unwrap();
    (p, out, c)
}

#[test]
fn policies_share_the_layers_they_are_told_to_and_only_those() {
    use crate::policy::{Kind, shared_bit};
    let w = world();
    let base = limited(w);
    let base_breaker = breaker_of(w, base);
    let (one, two, own) = (limited(w), limited(w), limited(w));
    let own_breaker = breaker_of(w, one);
    let both = shared_bit(Kind::Breaker) | shared_bit(Kind::Limit);
    w.policy_share(one, base, both).unwrap();
    w.policy_share(two, base, both).unwrap();
    // Its own breaker is freed: the base's is used.
    assert_eq!(w.breaker_state(own_breaker, 0.0), Err(Failure::BadHandle));
    assert_eq!(breaker_of(w, one), base_breaker);
    // `own` shares the breaker only: its limit is its own.
    w.policy_share(own, base, shared_bit(Kind::Breaker))
        .unwrap();
    // One call in flight through `one` takes the shared bulkhead's one slot: `two` is refused
    // (by the limiter, 3), `own` is not.
    let (sent, _, c1) = first(w, one, 0.0);
    assert_eq!(sent, Polled::Send);
    let (refused, out, _) = first(w, two, 0.0);
    assert_eq!((refused, out[0], out[4]), (Polled::Done, 2.0, 3.0));
    let (sent, _, c3) = first(w, own, 0.0);
    assert_eq!(sent, Polled::Send);
    // `own`'s failure opens the shared breaker: `two` is refused by it (0), though it never
    // failed.
    let fail = Input::Answer {
        n: 1,
        answer: answer_of(503, -1.0, -1, 0),
    };
    w.call_input(c3, fail, 10.0, 0.5, 0.5).unwrap();
    actions(w, c3);
    w.call_input(c1, fail, 10.0, 0.5, 0.5).unwrap();
    actions(w, c1);
    let (refused, out, _) = first(w, two, 20.0);
    assert_eq!((refused, out[0], out[4]), (Polled::Done, 2.0, 0.0));
    // Bad shares: itself, twice, a dependent as a base, an unknown layer.
    assert_eq!(w.policy_share(base, base, both), Err(Failure::BadHandle));
    assert_eq!(w.policy_share(one, base, both), Err(Failure::BadHandle));
    assert_eq!(w.policy_share(base, one, both), Err(Failure::BadHandle));
    w.policy_free(own);
    let late = limited(w);
    assert_eq!(w.policy_share(late, base, 1 << 20), Err(Failure::BadHandle));
    // The base freed while `one` and `two` draw from it is kept for them (a new share is
    // refused), and freed with the last of them, its breaker with it.
    w.policy_free(base);
    assert_eq!(w.policy_share(late, base, both), Err(Failure::BadHandle));
    assert_eq!(w.breaker_state(base_breaker, 20.0), Ok(1));
    w.policy_free(one);
    assert_eq!(w.breaker_state(base_breaker, 20.0), Ok(1));
    w.policy_free(two);
    assert_eq!(w.breaker_state(base_breaker, 20.0), Err(Failure::BadHandle));
    assert_eq!(w.call_start(base, 0.0, 0.5, 0.5), Err(Failure::BadHandle));
}
