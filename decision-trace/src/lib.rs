//! # decision-trace: reliable-core's decisions on a fixed script, one line each
//!
//! [`run`] drives the core through one script of outcomes and times and writes every decision
//! to an [`Out`]. The library is `no_std`, allocation-free and formats its numbers itself (no
//! `core::fmt`), so the same code runs on the host (`cargo run -p decision-trace`) and on an
//! emulated Cortex-M4F (`firmware`, bin `qemu`, printing through semihosting). A target that
//! computes anything differently (64-bit arithmetic through compiler-builtins, 128-bit products,
//! soft-float `f64` in policy validation, 32-bit atomics, time saturating at `Instant::MAX`)
//! prints a different trace, and CI compares the two byte for byte.
//!
//! ## The format (version 1)
//!
//! Plain ASCII, one record a line, fields separated by single spaces, times and durations in
//! nanoseconds as decimal integers; a line starting with `#` is a comment. The first word names
//! the part of the core:
//!
//! - `seed i=N value=S`: the `N`-th [`instance_seed`](reliable_core::sample::instance_seed) of the
//!   program (a 32-bit atomic counter; these are the program's first calls of it).
//! - `breaker NAME from=T0 i=N t=T STEP ...`: step `N` of the breaker script at `t`; `STEP` is
//!   `S` (a success of 5 ms), `L` (a slow success, 300 ms), `F` (a failure, 5 ms) or `X` (a fatal
//!   error, ignored by the breaker); then `admit gen=G probe=0|1 -> STATE` or `reject REASON
//!   [retry_after=D] state=STATE`, then the snapshot's counts. Each breaker runs the script from
//!   `t0 = 1 s` and again from `t0 = Instant::MAX - 30 s`, where time saturates.
//! - `backoff NAME retry=K prev=P sample=X delay=D`: one delay of a backoff policy.
//! - `retry BUDGET req=R at=T attempt=A STEP -> DECISION`: one attempt of a logical request
//!   under the retry policy and a retry budget; `DECISION` is `success`, `retry-at T'`, or
//!   `give-up REASON`.
//! - `throttle i=N t=T sent accepted|sent rejected|shed p_ppm=P requests=R accepts=A`: request
//!   `N` through the adaptive throttle (shed locally with probability `P` ppm, or sent and
//!   answered), then the window's counts.
//! - `call i=N t=T WHAT ...`: call `N` driven whole through the core's call engine (a breaker,
//!   a token bucket, a hedger and a retry policy with an attempt timeout, against scripted
//!   answers): `send n=K deadline=D hedge=0|1`, `answer n=K class=C`, `cancel n=K why=W`,
//!   `note ...` (each decision the engine reports: `retry after=D class=C attempts=A`, `hedge
//!   n=K`, `lost n=K`, `refused by=WHO`, `ended n=K class=C`, `gave-up REASON`, ...), `end
//!   RESULT attempts=A [last=K last_class=C]`, then `breaker STATE` after the call.
//! - `config NAME error FIELD`: a policy the script builds was refused (never expected).
//!
//! The trace ends with `# end`. `expected.trace` beside this crate's manifest is the trace as
//! committed: a test compares it with a fresh one, so a change in what the core decides on this
//! script is seen and reviewed.
//!
//! ## What runs where
//!
//! The lock-free [`SharedBreaker`](reliable_core::breaker::SharedBreaker) needs 64-bit atomics,
//! which no Cortex-M has, so it is not in the firmware's trace; on the host a test drives it
//! through the same breaker script and requires the same lines as the `&mut` breaker's. The
//! atomic the firmware does exercise is the 32-bit instance counter (`seed` lines).
//!
//! ## The cross-face conformance suite
//!
//! This trace is the core's own, for one purpose: the same code on two targets. The conformance
//! suite (`conformance/`, JSON sequences of HTTP-like answers, JSON-lines traces) holds the
//! *faces* to one meaning of every answer. For the firmware to join it: its `build.rs` turns each
//! `conformance/sequences/*.json` into Rust tables (a Cortex-M cannot parse JSON at run time), a
//! runner drives the core's answer classification and retry/breaker/budget decisions in virtual
//! time from those tables, and the firmware prints the suite's JSON-lines events (integers and
//! fixed strings only, which this crate's writer already formats without `core::fmt`); CI then
//! compares them with `conformance/traces/*.jsonl` as it compares this trace with the host's.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod breakers;
mod calls;
mod delays;
mod retries;
mod throttling;

/// Where the trace goes: bytes, in order. A line ends with `\n`.
pub trait Out {
    /// Appends `bytes` to the trace.
    fn put(&mut self, bytes: &[u8]);
}

/// Writes the whole trace to `out`.
pub fn run(out: &mut dyn Out) {
    let mut t = Trace { out };
    t.s("# reliable-core decision trace, format 1").end();
    seeds(&mut t);
    breakers::all(&mut t);
    delays::all(&mut t);
    retries::all(&mut t);
    throttling::all(&mut t);
    calls::all(&mut t);
    t.s("# end").end();
}

/// The program's first instance seeds: the core's one static atomic, a read-modify-write.
fn seeds(t: &mut Trace<'_>) {
    for i in 0..3 {
        let value = reliable_core::sample::instance_seed();
        t.s("seed").kv("i", i).kv("value", value).end();
    }
}

/// A line being written: text and numbers, without `core::fmt`.
pub struct Trace<'o> {
    out: &'o mut dyn Out,
}

impl core::fmt::Debug for Trace<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Trace")
    }
}

impl<'o> Trace<'o> {
    /// A trace writing to `out`.
    pub fn new(out: &'o mut dyn Out) -> Self {
        Trace { out }
    }

    /// Appends `text`.
    pub fn s(&mut self, text: &str) -> &mut Self {
        self.out.put(text.as_bytes());
        self
    }

    /// Appends `value` in decimal.
    pub fn n(&mut self, mut value: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut len = 0;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (value % 10) as u8;
            value /= 10;
            len += 1;
            if value == 0 {
                break;
            }
        }
        let start = digits.len().saturating_sub(len);
        self.out.put(digits.get(start..).unwrap_or_default());
        self
    }

    /// Appends ` key=value`.
    pub fn kv(&mut self, key: &str, value: u64) -> &mut Self {
        self.s(" ").s(key).s("=").n(value)
    }

    /// Ends the line.
    pub fn end(&mut self) {
        self.out.put(b"\n");
    }

    /// Writes `config NAME error FIELD` for a policy the script could not build.
    fn refused(&mut self, name: &str, error: reliable_core::ConfigError) {
        self.s("config ").s(name).s(" error ").s(error.field).end();
    }
}

/// The trace in a `Vec`, for the host.
#[cfg(test)]
impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> String {
        let mut out = Vec::new();
        run(&mut out);
        String::from_utf8(out).expect("ASCII")
    }

    #[test]
    fn numbers_are_decimal() {
        let mut out = Vec::new();
        Trace::new(&mut out)
            .n(0)
            .s(" ")
            .n(7)
            .s(" ")
            .n(u64::MAX)
            .end();
        assert_eq!(out, b"0 7 18446744073709551615\n");
    }

    #[test]
    fn the_script_reaches_every_decision_it_is_meant_to() {
        let trace = trace();
        for needle in [
            "-> open",
            "-> half-open",
            "reject open retry_after=",
            "reject slow-start",
            "reject half-open-full",
            "from=18446744043709551615",
            "backoff exponential-decorrelated",
            "backoff exponential-proportional",
            "-> retry-at",
            "give-up budget",
            "give-up max-attempts",
            "give-up deadline",
            "give-up fatal",
            "give-up dont-retry",
            " shed p_ppm=",
            " sent rejected",
            "send n=2 deadline=",
            "note hedge n=2",
            "cancel n=1 why=lost",
            "cancel n=2 why=timed-out",
            "end refused by=breaker attempts=2 last=2 last_class=transient",
            "end ok n=1 attempts=1",
            "end gave-up budget",
            "end gave-up fatal",
            "breaker open",
            "# end",
        ] {
            assert!(
                trace.contains(needle),
                "no {needle:?} in the trace:\n{trace}"
            );
        }
        assert!(!trace.contains("config "), "a policy was refused:\n{trace}");
    }

    /// The seeds depend on how many instances this test process built before; a fresh process
    /// (CI's comparison) checks them too.
    fn without_seeds(trace: &str) -> Vec<&str> {
        trace.lines().filter(|l| !l.starts_with("seed ")).collect()
    }

    #[test]
    fn the_trace_is_the_same_every_run() {
        assert_eq!(without_seeds(&trace()), without_seeds(&trace()));
    }

    /// A change in what the core decides shows here first. When it is meant, regenerate the file:
    /// `cargo run -p decision-trace > decision-trace/expected.trace`, and read its diff.
    #[test]
    fn the_trace_is_the_committed_one() {
        let expected = include_str!("../expected.trace");
        let trace = trace();
        let (got, want) = (without_seeds(&trace), without_seeds(expected));
        let first = got.iter().zip(&want).position(|(a, b)| a != b);
        assert!(
            got == want,
            "the trace differs from expected.trace (first at line {first:?} of {} and {})",
            got.len(),
            want.len()
        );
    }
}
