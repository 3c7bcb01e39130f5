//! Policies from the scenario files, run by the core's call engine on scripted answers: the
//! reference traces a face loading the same files must write (the Python package's test
//! `python/tests/test_policy_files.rs` runs the same cases through `Policy.from_file` and compares
//! with the same files).
//!
//! `policy-files/cases.json` lists the cases (a scenario file, the scenario when it holds several,
//! a policy's name), the calls every case runs (the sequences' format of calls and answers) and
//! the draws: a cyclic list of uniform numbers in [0, 1), each decision that needs randomness
//! (the breaker's seed when the policy loads, if its open time is jittered, then each backoff's jitter and each throttle
//! decision, in the order the engine asks) taking the next as the core's sample `⌊u · 2⁶⁴⌋`.
//! The engine is driven as the engine face drives it (`src/engine.rs`): each copy timed out at
//! the deadline the engine gives it, the engine woken at its `poll_timeout` on the next whole
//! millisecond. Its state is built as the Python package builds it (the lock-free breaker with a
//! count window of up to 1,024 calls and 16 probe slots).
//!
//! `BLESS=1 cargo test -p conformance --test policy_file_traces` rewrites the traces.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use reliable_core::Instant;
use reliable_core::answer::Answer;
use reliable_core::breaker::{
    AtomicCountWindow, BreakerPolicy, Observer, Outcome, Permit, Rejection, SharedBreaker, State,
    Transition,
};
use reliable_core::budget::{AnyBudget, Budget, Unlimited};
use reliable_core::engine::{Action, Call, Ended, Input, Note, Refusal, SampleFor, Shared, Stack};
use reliable_core::hedge::{HedgePolicy, Hedger};
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{Limiter, LimiterPolicy, RateLimiter, RatePolicy};
use reliable_core::outcome::ErrorClass;
use reliable_core::policy::Layer;
use reliable_core::throttle::{AdaptiveThrottle, ThrottlePolicy};
use serde::Deserialize;
use serde::de::IgnoredAny;

use conformance::{CallScript, Scripted, Trace, sample};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    #[allow(dead_code)]
    about: String,
    draws: Vec<f64>,
    calls: Vec<CallScript>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    file: String,
    #[serde(default)]
    scenario: Option<String>,
    policy: String,
    trace: String,
}

/// A policy entry of a scenario.
#[derive(Deserialize)]
struct Entry {
    name: String,
    stack: Layer<IgnoredAny>,
}

/// The policies of a scenario file (`Scenario(..)` or a list of them), each with its scenario's
/// name, the rest skipped.
struct ScenarioFile(Vec<(String, Entry)>);

impl<'de> Deserialize<'de> for ScenarioFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> serde::de::Visitor<'de> for FileVisitor {
    type Value = ScenarioFile;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a scenario or a list of them")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ScenarioFile, A::Error> {
        let (mut name, mut policies) = (String::new(), Vec::new());
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "policies" => policies = map.next_value::<Vec<Entry>>()?,
                "name" => name = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ScenarioFile(
            policies.into_iter().map(|p| (name.clone(), p)).collect(),
        ))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ScenarioFile, A::Error> {
        let mut all = Vec::new();
        while let Some(ScenarioFile(p)) = seq.next_element::<ScenarioFile>()? {
            all.extend(p);
        }
        Ok(ScenarioFile(all))
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn stack(case: &Case) -> Layer<IgnoredAny> {
    let path = root().join(&case.file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", case.file));
    let options = ron::Options::default().with_default_extension(
        ron::extensions::Extensions::IMPLICIT_SOME
            | ron::extensions::Extensions::UNWRAP_VARIANT_NEWTYPES,
    );
    let ScenarioFile(all) = options
        .from_str(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", case.file));
    let mut found: Vec<Entry> = all
        .into_iter()
        .filter(|(s, p)| {
            case.scenario.as_ref().is_none_or(|want| want == s) && p.name == case.policy
        })
        .map(|(_, p)| p)
        .collect();
    assert_eq!(found.len(), 1, "{}: policy {:?}", case.file, case.policy);
    found.remove(0).stack
}

/// Cyclic draws.
struct Draws {
    u: Vec<f64>,
    next: Cell<usize>,
}

impl Draws {
    fn take(&self) -> u64 {
        let i = self.next.get();
        self.next.set(i + 1);
        sample(self.u[i % self.u.len()])
    }
}

/// The breaker's transitions, written into the trace as they happen.
struct Lines(Trace);

impl Observer for Lines {
    fn on_transition(&self, t: Transition) {
        self.0.push(
            "breaker",
            &format!(",\"from\":\"{}\",\"to\":\"{}\"", t.from.name(), t.to.name()),
        );
    }
}

type Breaker = SharedBreaker<BreakerPolicy, AtomicCountWindow<1024, 16>, 16, Lines>;

struct Parts {
    breaker: Option<Breaker>,
    budget: Option<RefCell<AnyBudget>>,
    ledger: Option<RefCell<ExtraLedger>>,
    throttle: Option<RefCell<AdaptiveThrottle>>,
    hedger: Option<RefCell<Hedger>>,
    limiter: Option<RefCell<Limiter>>,
    rate: Option<RefCell<RateLimiter>>,
    random_backoff: bool,
    draws: Draws,
    trace: Trace,
}

fn with<T, R>(cell: &Option<RefCell<T>>, f: impl FnOnce(&mut T) -> R) -> Option<R> {
    cell.as_ref().map(|c| f(&mut c.borrow_mut()))
}

impl Shared for Parts {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        self.breaker.as_ref().map(|b| b.try_acquire(now))
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        if let Some(b) = &self.breaker {
            b.record(permit, outcome, now);
        }
    }
    fn breaker_refuses(&self, now: Instant) -> Option<reliable_core::Duration> {
        let b = self.breaker.as_ref()?;
        match b.retry_after(now) {
            Some(after) => Some(after),
            None if b.state(now) == State::ForcedOpen => Some(reliable_core::Duration::MAX),
            None => None,
        }
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        match (&self.ledger, &self.budget) {
            (Some(l), _) => f(&mut *l.borrow_mut()),
            (None, Some(b)) => f(&mut *b.borrow_mut()),
            (None, None) => f(&mut Unlimited),
        }
    }
    fn throttle<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::throttle::AnyThrottle) -> R,
    ) -> Option<R> {
        with(&self.throttle, |t| f(t))
    }
    fn ledger<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::ledger::AnyLedger) -> R,
    ) -> Option<R> {
        with(&self.ledger, |l| f(l))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        with(&self.hedger, f)
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        with(&self.limiter, f)
    }
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        with(&self.rate, f)
    }
    fn sample(&self, what: SampleFor) -> u64 {
        if what == SampleFor::Backoff && !self.random_backoff {
            return 0;
        }
        self.draws.take()
    }
    fn note(&self, note: Note) {
        let t = &self.trace;
        match note {
            Note::Hedge { n } => t.push("hedge", &format!(",\"n\":{n}")),
            Note::NoHedge(r) => t.push("no-hedge", &format!(",\"by\":\"{}\"", by(r))),
            Note::Lost { n } => t.push("cancelled", &format!(",\"n\":{n}")),
            Note::Refused(r) => t.push("refused", &format!(",\"by\":\"{}\"", by(r))),
            Note::Retry { after, .. } => {
                t.push("retry", &format!(",\"delay_ms\":{}", after.as_millis()))
            }
            Note::Limit { from, to } => t.push("limit", &format!(",\"from\":{from},\"to\":{to}")),
            Note::Ended { n, class } => {
                let accepted = class.is_none_or(|c: ErrorClass| c.consequences().accepted);
                t.answer(n, class, accepted)
            }
            Note::Ledger { .. } | Note::GaveUp(_) => {}
        }
    }
}

fn by(r: Refusal) -> &'static str {
    match r {
        Refusal::Breaker(_) => "breaker",
        Refusal::Throttle(_) => "throttle",
        Refusal::Ledger(_) => "ledger",
        Refusal::Limit(_) | Refusal::Rate(_) => "limiter",
    }
}

fn parts(stack: &Stack, trace: &Trace, u: &[f64]) -> Parts {
    let draws = Draws {
        u: u.to_vec(),
        next: Cell::new(0),
    };
    let random_backoff = [
        ErrorClass::Transient,
        ErrorClass::Throttled { retry_after: None },
    ]
    .into_iter()
    .any(|c| stack.plan.retry().backoff_for(c).is_random());
    let breaker = stack.breaker.map(|(c, _)| {
        let b: SharedBreaker<BreakerPolicy, AtomicCountWindow<1024, 16>, 16, ()> =
            SharedBreaker::with_storage(BreakerPolicy::new(c).expect("breaker"))
                .expect("breaker storage");
        let b: Breaker = b.observe(Lines(trace.clone()));
        // A jittered open time is seeded from the first draw, as the Python package does.
        let seed = if c.open.jitter > 0.0 { draws.take() } else { 0 };
        b.with_seed(seed)
    });
    Parts {
        breaker,
        budget: stack
            .budget
            .map(|(c, _)| RefCell::new(AnyBudget::from_config(c).expect("budget"))),
        ledger: stack
            .ledger
            .map(|(c, _)| RefCell::new(ExtraLedger::from_config(c).expect("ledger"))),
        throttle: stack.throttle.map(|(c, _)| {
            RefCell::new(
                AdaptiveThrottle::new(ThrottlePolicy::new(c).expect("throttle")).expect("throttle"),
            )
        }),
        hedger: stack
            .hedge
            .map(|(c, _)| RefCell::new(Hedger::new(HedgePolicy::new(c).expect("hedge")))),
        limiter: stack
            .limit
            .map(|(c, _)| RefCell::new(Limiter::new(LimiterPolicy::new(c).expect("limit")))),
        rate: stack
            .rate
            .map(|(c, _)| RefCell::new(RateLimiter::new(RatePolicy::new(c).expect("rate")))),
        random_backoff,
        draws,
        trace: trace.clone(),
    }
}

struct Flying {
    n: u32,
    arrives: Option<u64>,
    deadline: Option<u64>,
    answer: Option<Answer>,
}

fn ms(i: Instant) -> u64 {
    i.as_nanos() / 1_000_000
}

fn answer_of(a: &Scripted) -> Option<Answer> {
    match a {
        Scripted::Status(code, headers) => {
            let signals =
                reliable::http::HeaderSignals::from_headers(&headers[..], SystemTime::now());
            Some(reliable::http::answer(*code, &signals))
        }
        Scripted::Reset => Some(Answer::Connection),
        Scripted::Hang => None,
    }
}

/// The trace of `calls` through the policy `stack`.
fn run(stack: &Layer<IgnoredAny>, calls: &[CallScript], u: &[f64]) -> String {
    let clock = Arc::new(Mutex::new(0u64));
    let c = clock.clone();
    let trace = Trace::new(Arc::new(move || *c.lock().expect("clock")));
    let stack = Stack::from_layer(stack).unwrap_or_else(|e| panic!("{e}"));
    let parts = parts(&stack, &trace, u);
    let plan = stack.plan;
    let mut now = 0u64;
    for (i, script) in calls.iter().enumerate() {
        now = now.max(script.start_ms);
        *clock.lock().expect("clock") = now;
        trace.start_call(i);
        let answers: Vec<Scripted> = script
            .answers
            .iter()
            .map(|a| a.kind().expect("answer"))
            .collect();
        let mut call: Call<'_, Parts, 4> = Call::start(&plan, &parts, Instant::from_millis(now));
        let mut flying: Vec<Flying> = Vec::new();
        loop {
            let mut over = false;
            while let Some(action) = call.poll() {
                match action {
                    Action::Send { n, deadline, .. } => {
                        let k = trace.attempt();
                        assert_eq!(k, n, "call {i}: copy {n} sent as {k}");
                        let a = answers.get(n as usize - 1).expect("script exhausted");
                        let answer = answer_of(a);
                        let latency = script.answers[n as usize - 1].latency_ms;
                        flying.push(Flying {
                            n,
                            arrives: answer.map(|_| now + latency),
                            deadline: deadline.map(ms),
                            answer,
                        });
                    }
                    Action::Cancel { n, .. } => flying.retain(|f| f.n != n),
                    Action::Done(end) => {
                        let rest = match end.result {
                            Ended::Ok { .. } => "\"result\":\"ok\"".to_string(),
                            Ended::Refused(_) => "\"result\":\"refused\"".to_string(),
                            Ended::GaveUp(r) => {
                                format!("\"result\":\"gave-up\",\"reason\":\"{}\"", r.name())
                            }
                            Ended::Cancelled => "\"result\":\"cancelled\"".to_string(),
                        };
                        trace.push("end", &format!(",{rest},\"attempts\":{}", end.attempts));
                        over = true;
                    }
                }
            }
            if over {
                break;
            }
            let answer_at = flying.iter().filter_map(|f| f.arrives).min();
            let timer_at = flying
                .iter()
                .filter(|f| f.arrives.is_none_or(|a| f.deadline.is_some_and(|d| d <= a)))
                .filter_map(|f| f.deadline)
                .min();
            let wake_at = call
                .poll_timeout()
                .map(|t| t.as_nanos().div_ceil(1_000_000));
            let next = [answer_at, timer_at, wake_at]
                .into_iter()
                .flatten()
                .min()
                .expect("a timeout with no timer");
            now = now.max(next);
            *clock.lock().expect("clock") = now;
            let at = Instant::from_millis(now);
            if answer_at == Some(next) && timer_at.is_none_or(|t| t > next) {
                let pos = flying
                    .iter()
                    .position(|f| f.arrives == Some(next))
                    .expect("an answer due");
                let f = flying.remove(pos);
                let answer = f.answer.expect("an answer");
                call.handle(at, Input::Answer { n: f.n, answer });
            } else {
                // The engine times out each copy whose deadline passed.
                flying.retain(|f| f.deadline.is_none_or(|d| d > next));
                call.handle(at, Input::Tick);
            }
        }
    }
    trace.text()
}

#[test]
fn scenario_policies_on_scripted_answers() {
    let dir = root().join("conformance/policy-files");
    let text = std::fs::read_to_string(dir.join("cases.json")).expect("cases.json");
    let cases: Cases = serde_json::from_str(&text).expect("cases.json");
    let bless = std::env::var_os("BLESS").is_some();
    let mut failed = Vec::new();
    for case in &cases.cases {
        let got = run(&stack(case), &cases.calls, &cases.draws);
        let path = dir.join("traces").join(&case.trace);
        if bless {
            std::fs::create_dir_all(dir.join("traces")).expect("traces dir");
            std::fs::write(&path, &got).expect("write trace");
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(d) = conformance::first_difference(&want, &got) {
            println!("{} {:?}: {d}", case.file, case.policy);
            failed.push(case.trace.clone());
        }
    }
    assert!(failed.is_empty(), "traces differ: {failed:?}");
    println!(
        "{} scenario policies decide as their traces say",
        cases.cases.len()
    );
}
