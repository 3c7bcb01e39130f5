//! [`Trace`]: the decision trace a face writes, one JSON line per event, keys in the README's
//! order; also the `reliable` observer that turns a face's reports into those lines.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use reliable::ShedReason;
use reliable::observer::{NotSent, Observer};
use reliable_core::breaker::Transition;
use reliable_core::outcome::ErrorClass;

/// Virtual milliseconds since the sequence's start.
pub type Now = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A trace being written: lines, the call in progress, its attempts so far, and how it ended.
#[derive(Clone)]
pub struct Trace {
    lines: Arc<Mutex<Vec<String>>>,
    now: Now,
    call: Arc<AtomicUsize>,
    attempts: Arc<AtomicU32>,
    ending: Arc<Mutex<Option<String>>>,
    /// Attempts of this call the face cancelled (losers of a hedged race).
    cancelled: Arc<Mutex<Vec<u32>>>,
    /// Attempts of this call that reached the scripted downstream (each takes the next answer).
    reached: Arc<AtomicU32>,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace").finish_non_exhaustive()
    }
}

/// A class's name in a trace.
pub fn class_name(class: Option<ErrorClass>) -> &'static str {
    class.map_or("ok", ErrorClass::name)
}

impl Trace {
    /// An empty trace on the clock `now`.
    pub fn new(now: Now) -> Self {
        Trace {
            lines: Arc::default(),
            now,
            call: Arc::default(),
            attempts: Arc::default(),
            ending: Arc::default(),
            cancelled: Arc::default(),
            reached: Arc::default(),
        }
    }

    /// Writes one line: event `event`, then `rest` (its other keys, each after a comma).
    pub fn push(&self, event: &str, rest: &str) {
        let line = format!(
            "{{\"t\":{},\"call\":{},\"ev\":\"{event}\"{rest}}}",
            (self.now)(),
            self.call.load(Ordering::SeqCst)
        );
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line);
    }

    /// Call `i` starts.
    pub fn start_call(&self, i: usize) {
        self.call.store(i, Ordering::SeqCst);
        self.attempts.store(0, Ordering::SeqCst);
        self.reached.store(0, Ordering::SeqCst);
        *self.ending.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.cancelled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Whether the face cancelled attempt `n` of this call (it lost a hedged race): its drop is
    /// not a timeout.
    pub fn was_cancelled(&self, n: u32) -> bool {
        self.cancelled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&n)
    }

    /// An attempt is sent; its number.
    pub fn attempt(&self) -> u32 {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        self.push("attempt", &format!(",\"n\":{n}"));
        n
    }

    /// An attempt reached the scripted downstream: the index of its answer in the call's script
    /// (from 0). Without chaos it is the attempt's number less one.
    pub fn reach(&self) -> usize {
        self.reached.fetch_add(1, Ordering::SeqCst) as usize
    }

    /// An attempt sent was answered by the chaos layer with Polly's `event` (`draw`: the
    /// attempt's number through the chaos layer, from 0): the chaos line; its number.
    pub fn injected(&self, event: &str, draw: u64) -> u32 {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        self.push(
            "chaos",
            &format!(",\"n\":{n},\"event\":\"{event}\",\"draw\":{draw}"),
        );
        n
    }

    /// The chaos layer delays attempt `n` (not sent yet: its `attempt` line comes when the delay
    /// is over) by `delay_ms`: the chaos line.
    pub fn delayed(&self, draw: u64, delay_ms: u64) {
        let n = self.attempts.load(Ordering::SeqCst) + 1;
        self.push(
            "chaos",
            &format!(
                ",\"n\":{n},\"event\":\"Chaos.OnLatency\",\"draw\":{draw},\"delay_ms\":{delay_ms}"
            ),
        );
    }

    /// The call in progress.
    pub fn call(&self) -> usize {
        self.call.load(Ordering::SeqCst)
    }

    /// Attempts sent in this call.
    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }

    /// Attempt `n` ended with `class` (`None`: success), `accepted` by the face's rule.
    pub fn answer(&self, n: u32, class: Option<ErrorClass>, accepted: bool) {
        let c = class_name(class);
        self.push(
            "answer",
            &format!(",\"n\":{n},\"class\":\"{c}\",\"accepted\":{accepted}"),
        );
    }

    /// The call is over; `ok`: it succeeded. How it failed comes from what the face reported
    /// (a refusal, or the retry policy's reason).
    pub fn end(&self, ok: bool) {
        let ending = self.ending.lock().unwrap_or_else(|p| p.into_inner()).take();
        let rest = match (ok, ending) {
            (true, _) => "\"result\":\"ok\"".to_string(),
            (false, Some(r)) if r == "refused" => "\"result\":\"refused\"".to_string(),
            (false, Some(reason)) => format!("\"result\":\"gave-up\",\"reason\":\"{reason}\""),
            (false, None) => "\"result\":\"unknown\"".to_string(),
        };
        self.push("end", &format!(",{rest},\"attempts\":{}", self.attempts()));
    }

    /// The lines written, each ending with a newline.
    pub fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// An observer writing the face's reports into this trace.
    pub fn observer(&self) -> Recorder {
        Recorder(self.clone())
    }
}

/// The `reliable` observer of a [`Trace`].
#[derive(Debug)]
pub struct Recorder(Trace);

impl Observer for Recorder {
    fn on_retry(&self, _: &str, _: u32, _: ErrorClass, delay: std::time::Duration) {
        self.0
            .push("retry", &format!(",\"delay_ms\":{}", delay.as_millis()));
        // A refusal waited out does not end the call.
        *self.0.ending.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn on_reject(&self, _: &str, refusal: NotSent) {
        let by = refuser(refusal);
        self.0.push("refused", &format!(",\"by\":\"{by}\""));
        let mut ending = self.0.ending.lock().unwrap_or_else(|p| p.into_inner());
        ending.get_or_insert_with(|| "refused".into());
    }

    fn on_transition(&self, _: &str, t: Transition) {
        self.0.push(
            "breaker",
            &format!(",\"from\":\"{}\",\"to\":\"{}\"", t.from.name(), t.to.name()),
        );
    }

    fn on_hedge(&self, _: &str, attempt: u32) {
        self.0.push("hedge", &format!(",\"n\":{attempt}"));
    }

    fn on_hedge_refused(&self, _: &str, refusal: NotSent) {
        let by = refuser(refusal);
        self.0.push("no-hedge", &format!(",\"by\":\"{by}\""));
    }

    fn on_attempt_cancelled(&self, _: &str, attempt: u32) {
        self.0.push("cancelled", &format!(",\"n\":{attempt}"));
        let mut cancelled = self.0.cancelled.lock().unwrap_or_else(|p| p.into_inner());
        cancelled.push(attempt);
    }

    fn on_limit_change(&self, _: &str, from: u32, to: u32) {
        self.0
            .push("limit", &format!(",\"from\":{from},\"to\":{to}"));
    }

    fn on_give_up(&self, _: &str, _: u32, reason: &'static str) {
        let mut ending = self.0.ending.lock().unwrap_or_else(|p| p.into_inner());
        // A refusal already ended the call (the retry layer then reports "refused" too).
        ending.get_or_insert_with(|| reason.into());
    }
}

/// Who refused, as a trace names it.
fn refuser(refusal: NotSent) -> &'static str {
    match refusal {
        NotSent::Open { .. }
        | NotSent::Rejected(ShedReason::HalfOpenFull | ShedReason::SlowStart) => "breaker",
        NotSent::Rejected(ShedReason::Throttled { .. }) => "throttle",
        NotSent::Rejected(ShedReason::Budget(_)) => "budget",
        NotSent::Rejected(ShedReason::Ledger(_)) => "ledger",
        NotSent::Rejected(ShedReason::Limit { .. } | ShedReason::RateLimited { .. }) => "limiter",
    }
}
