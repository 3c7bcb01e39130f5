//! The exports JavaScript calls, and the only `unsafe` code of the crate.
//!
//! WebAssembly runs one thread per instance and an export is never re-entered (nothing here
//! calls back into JavaScript), so the module's state can live in one global that each export
//! borrows mutably for the length of the call. That borrow is the single `unsafe` block below.
//!
//! Answers are numbers: a handle (`>= 0`) or `-1`; a time in milliseconds or `NaN`. After `-1`
//! or `NaN`, [`rk_error_kind`] says why and the other `rk_error_*` exports give the core's
//! field name and problem as data, which the TypeScript side turns into a `TypeError` or
//! `RangeError` naming the option. No export can trap: the crate is panic-free (the core denies
//! `unwrap`, indexing and `panic!`), and the panic handler refers to a function defined nowhere,
//! so a panic path left after optimisation would show up as an import of the module, which CI
//! refuses.
#![allow(unsafe_code)]

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;

use reliable_core::Problem;
use reliable_core::engine::{Input, Note};

use crate::{Event, Failure, Policy, World};

/// The module's state: the world (initialised on first use; zero bytes in the `.wasm` file, as
/// uninitialised memory is not stored) and the latest failure.
struct Global {
    world: UnsafeCell<MaybeUninit<World>>,
    ready: UnsafeCell<bool>,
    error: UnsafeCell<ErrorText>,
    /// The numbers of the latest event read.
    event: UnsafeCell<[f64; 4]>,
    /// Where JavaScript writes a config's tokens for [`rk_stack_layer`].
    input: UnsafeCell<[u8; INPUT]>,
}

/// The bytes of one layer's config tokens at most.
const INPUT: usize = 16 * 1024;

// SAFETY: a wasm32 instance has one thread; see the module docs.
unsafe impl Sync for Global {}

static GLOBAL: Global = Global {
    world: UnsafeCell::new(MaybeUninit::uninit()),
    ready: UnsafeCell::new(false),
    error: UnsafeCell::new(ErrorText::EMPTY),
    event: UnsafeCell::new([0.0; 4]),
    input: UnsafeCell::new([0; INPUT]),
};

/// The latest failure, as plain data: float formatting is left to JavaScript (the core's
/// `Display` would link libcore's float printer, which keeps panic paths).
struct ErrorText {
    kind: u32,
    problem: u32,
    numbers: [f64; 3],
    /// The field's dotted path, then (for an inconsistency) a NUL and the reason.
    len: usize,
    bytes: [u8; 192],
}

impl ErrorText {
    const EMPTY: ErrorText = ErrorText {
        kind: 0,
        problem: 0,
        numbers: [0.0; 3],
        len: 0,
        bytes: [0; 192],
    };

    fn push(&mut self, s: &str) {
        // Truncates rather than fail (the texts are the core's short field names and reasons).
        for &b in s.as_bytes() {
            if let Some(slot) = self.bytes.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }
}

/// The world, shared: everything in it is interior-mutable.
fn world() -> &'static World {
    // SAFETY: one thread, and no export calls another or is re-entered (no imports). The world
    // is written once, here, before anything borrows it (`ready` is set only after), and only
    // ever borrowed shared afterwards.
    unsafe {
        let world = GLOBAL.world.get().cast::<World>();
        if !*GLOBAL.ready.get() {
            crate::init::world(world);
            *GLOBAL.ready.get() = true;
        }
        &*world
    }
}

/// The world and the error text, borrowed mutably for one export call.
fn state() -> (&'static World, &'static mut ErrorText) {
    let w = world();
    // SAFETY: one thread, no re-entry: each export calls `state` at most once, so this is the
    // only live reference to the error text for the duration of the export that asked.
    (w, unsafe { &mut *GLOBAL.error.get() })
}

/// Keeps a failure for [`rk_error_kind`] and the detail exports.
fn fail(error: &mut ErrorText, failure: Failure) {
    *error = ErrorText::EMPTY;
    let bool = |b: bool| if b { 1.0 } else { 0.0 };
    match failure {
        Failure::Config(e) => {
            error.kind = 1;
            error.push(e.field);
            (error.problem, error.numbers) = match e.problem {
                Problem::NotAFraction {
                    value,
                    zero_ok,
                    one_ok,
                } => (1, [value, bool(zero_ok), bool(one_ok)]),
                Problem::OutOfRange { value, min, max } => (2, [value, min, max]),
                Problem::Zero => (3, [0.0; 3]),
                Problem::ExceedsCapacity {
                    requested,
                    capacity,
                } => (4, [requested as f64, capacity as f64, 0.0]),
                Problem::Inconsistent(why) => {
                    error.push("\0");
                    error.push(why);
                    (5, [0.0; 3])
                }
                _ => (0, [0.0; 3]),
            };
        }
        Failure::Full(table) => error.kind = 10 + table as u32,
        Failure::De => {
            error.kind = 20;
            if let Some(e) = world().read_error() {
                error.push(core::str::from_utf8(e.text()).unwrap_or("refused"));
            }
        }
        Failure::BadHandle => error.kind = 2,
    }
}

fn handle(r: Result<u32, Failure>, error: &mut ErrorText) -> i32 {
    match r {
        Ok(h) => h as i32,
        Err(f) => {
            fail(error, f);
            -1
        }
    }
}

fn number(r: Result<f64, Failure>, error: &mut ErrorText) -> f64 {
    r.unwrap_or_else(|f| {
        fail(error, f);
        f64::NAN
    })
}

/// What the latest `-1` or `NaN` meant: 1 a setting the core refused (see [`rk_error_problem`]),
/// 2 a handle naming nothing, 11/12/13 the breaker/policy/call table full.
#[unsafe(no_mangle)]
pub extern "C" fn rk_error_kind() -> u32 {
    state().1.kind
}

/// For a refused setting, what was wrong: 1 not a fraction (numbers: value, zero allowed, one
/// allowed), 2 out of range (value, min, max), 3 zero, 4 over capacity (requested, capacity),
/// 5 inconsistent (the reason follows the field after a NUL).
#[unsafe(no_mangle)]
pub extern "C" fn rk_error_problem() -> u32 {
    state().1.problem
}

/// The `i`-th number of the latest failure (0, 1 or 2; otherwise NaN).
#[unsafe(no_mangle)]
pub extern "C" fn rk_error_number(i: u32) -> f64 {
    state()
        .1
        .numbers
        .get(i as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// Where the latest failure's text (the field's dotted path) starts in linear memory.
#[unsafe(no_mangle)]
pub extern "C" fn rk_error_ptr() -> u32 {
    state().1.bytes.as_ptr() as u32
}

/// The latest failure's text length in bytes.
#[unsafe(no_mangle)]
pub extern "C" fn rk_error_len() -> u32 {
    state().1.len as u32
}

/// A breaker with the seed's options ([`crate::seed_breaker`]): a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_breaker_new(
    failure_rate: f64,
    window: u32,
    cooldown_ms: f64,
    probe: u32,
) -> i32 {
    let (w, e) = state();
    handle(
        w.breaker_new(crate::seed_breaker(
            failure_rate,
            window,
            cooldown_ms,
            probe,
        )),
        e,
    )
}

/// [`World::breaker_free`].
#[unsafe(no_mangle)]
pub extern "C" fn rk_breaker_free(breaker: u32) {
    state().0.breaker_free(breaker)
}

/// [`World::breaker_state`]: the state's number or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_breaker_state(breaker: u32, now_ms: f64) -> i32 {
    let (w, e) = state();
    handle(w.breaker_state(breaker, now_ms), e)
}

/// A policy with the seed's retry options ([`crate::seed_retry`]) and `breaker` (negative:
/// none): a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_policy_new(
    max_attempts: u32,
    timeout_ms: f64,
    base_ms: f64,
    factor: f64,
    jitter: f64,
    cap_ms: f64,
    max_server_delay_ms: f64,
    breaker: i32,
) -> i32 {
    let (w, e) = state();
    let r = crate::seed_retry(
        max_attempts,
        timeout_ms,
        base_ms,
        factor,
        jitter,
        cap_ms,
        max_server_delay_ms,
    )
    .map_err(Failure::Config)
    .and_then(|retry| {
        let plan = reliable_core::engine::Plan::new(retry);
        w.policy_new(Policy::new(plan), u32::try_from(breaker).ok())
    });
    handle(r, e)
}

/// [`World::policy_free`].
#[unsafe(no_mangle)]
pub extern "C" fn rk_policy_free(policy: u32) {
    state().0.policy_free(policy)
}

/// [`World::policy_share`]: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_policy_share(policy: u32, base: u32, layers: u32) -> i32 {
    let (w, e) = state();
    handle(w.policy_share(policy, base, layers).map(|()| 0), e)
}

/// Where JavaScript writes a layer's config tokens (see [`crate::de`]).
#[unsafe(no_mangle)]
pub extern "C" fn rk_input_ptr() -> u32 {
    GLOBAL.input.get() as u32
}

/// How many bytes of tokens fit there.
#[unsafe(no_mangle)]
pub extern "C" fn rk_input_cap() -> u32 {
    INPUT as u32
}

/// [`World::stack_begin`].
#[unsafe(no_mangle)]
pub extern "C" fn rk_stack_begin() {
    state().0.stack_begin()
}

/// [`World::stack_layer`] with the first `len` bytes of the input: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_stack_layer(kind: u32, flag: u32, len: u32) -> i32 {
    let (w, e) = state();
    // SAFETY: one thread, no re-entry: JavaScript wrote the input before this export and does
    // not touch it during it; this is the only reference for its duration.
    let input = unsafe { &*GLOBAL.input.get() };
    let tokens = input.get(..len as usize).unwrap_or_default();
    handle(w.stack_layer(kind, flag, tokens).map(|()| 0), e)
}

/// [`World::stack_finish`]: the policy's handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_stack_finish() -> i32 {
    let (w, e) = state();
    handle(w.stack_finish(), e)
}

/// Where the record of the latest action polled lives ([`crate::Record`]: the action, the
/// actions still queued, the samples the latest input used, the events to read, whether the call
/// waits for a time): JavaScript reads it as a `Float64Array` after each input or poll.
#[unsafe(no_mangle)]
pub extern "C" fn rk_record_ptr() -> u32 {
    state().0.record_ptr() as u32
}

/// [`World::call_start`]: a call's handle or -1; its first action is polled into the record.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_start(policy: u32, now_ms: f64, backoff: f64, throttle: f64) -> i32 {
    let (w, e) = state();
    handle(
        w.call_start(policy, now_ms, backoff, throttle)
            .and_then(|call| w.poll(call).map(|_| call)),
        e,
    )
}

/// Feeds `input`, then polls the call's next action into the record: its code or -1.
fn input(call: u32, input: Input, now_ms: f64, backoff: f64, throttle: f64) -> i32 {
    let (w, e) = state();
    handle(
        w.call_input(call, input, now_ms, backoff, throttle)
            .and_then(|()| w.poll(call))
            .map(|p| p as u32),
        e,
    )
}

/// Copy `n` of `call` answered (see [`crate::answer_of`] for the numbers): the next action's
/// code (see [`rk_call_poll`]) or -1.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn rk_call_answer(
    call: u32,
    n: u32,
    status: i32,
    server_delay_ms: f64,
    should_retry: i32,
    overloaded: u32,
    now_ms: f64,
    backoff: f64,
    throttle: f64,
) -> i32 {
    let answer = crate::answer_of(status, server_delay_ms, should_retry, overloaded);
    input(call, Input::Answer { n, answer }, now_ms, backoff, throttle)
}

/// The time passed for `call` (the timer it asked for fired): the next action's code or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_tick(call: u32, now_ms: f64, backoff: f64, throttle: f64) -> i32 {
    input(call, Input::Tick, now_ms, backoff, throttle)
}

/// The caller cancels `call`: the next action's code or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_cancel(call: u32, now_ms: f64) -> i32 {
    input(call, Input::Cancel, now_ms, 0.0, 0.0)
}

/// [`World::poll`]: the action's code ([`crate::Polled`]; it and its numbers in the record, see
/// [`rk_record_ptr`]) or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_poll(call: u32) -> i32 {
    let (w, e) = state();
    handle(w.poll(call).map(|p| p as u32), e)
}

/// [`World::timeout`]: how long until the call wants a tick (ms), -1 never, NaN failure.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_timeout(call: u32, now_ms: f64) -> f64 {
    let (w, e) = state();
    number(w.timeout(call, now_ms), e)
}

/// [`World::call_free`].
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_free(call: u32, now_ms: f64) {
    state().0.call_free(call, now_ms)
}

/// The oldest event not read yet, as a code (0: none left), its numbers from
/// [`rk_event_number`]: 1 a hedge sent (copy); 2 a hedge refused (who, as
/// [`crate::refusal_code`]); 3 a copy lost the race (copy); 4 refused locally (who, retry-after
/// ms or -1); 5 a retry (wait ms, class code, copies sent); 6 the concurrency limit moved (from,
/// to); 7 the ledger answered (kind: 0 retry, 1 hedge, 2 probe; granted 1 or 0); 8 a copy's
/// answer taken (copy, class code or -1 for a success); 9 the retry policy gave up; 10 a
/// breaker changed state (from, to, as state codes).
#[unsafe(no_mangle)]
pub extern "C" fn rk_event() -> u32 {
    let (w, _) = state();
    let opt = |d: Option<reliable_core::Duration>| d.map_or(-1.0, crate::millis);
    let class = |c: Option<reliable_core::outcome::ErrorClass>| {
        c.map_or(-1.0, |c| f64::from(crate::class_code(c)))
    };
    let (code, numbers) = match w.events().pop() {
        None => (0, [0.0; 4]),
        Some(Event::Note(note)) => match note {
            Note::Hedge { n } => (1, [f64::from(n), 0.0, 0.0, 0.0]),
            Note::NoHedge(r) => (2, [f64::from(crate::refusal_code(r)), 0.0, 0.0, 0.0]),
            Note::Lost { n } => (3, [f64::from(n), 0.0, 0.0, 0.0]),
            Note::Refused(r) => (
                4,
                [
                    f64::from(crate::refusal_code(r)),
                    opt(r.retry_after()),
                    0.0,
                    0.0,
                ],
            ),
            Note::Retry {
                after,
                class: c,
                attempts,
            } => (
                5,
                [
                    crate::millis(after),
                    class(Some(c)),
                    f64::from(attempts),
                    0.0,
                ],
            ),
            Note::Limit { from, to } => (6, [f64::from(from), f64::from(to), 0.0, 0.0]),
            Note::Ledger { kind, granted } => {
                let kind = match kind {
                    reliable_core::ledger::Extra::Retry => 0.0,
                    reliable_core::ledger::Extra::Hedge => 1.0,
                    reliable_core::ledger::Extra::Probe => 2.0,
                };
                (7, [kind, f64::from(u8::from(granted)), 0.0, 0.0])
            }
            Note::Ended { n, class: c } => (8, [f64::from(n), class(c), 0.0, 0.0]),
            Note::GaveUp(_) => (9, [0.0; 4]),
        },
        Some(Event::Breaker { from, to }) => (
            10,
            [
                f64::from(crate::state_code(from)),
                f64::from(crate::state_code(to)),
                0.0,
                0.0,
            ],
        ),
    };
    // SAFETY: one thread, no re-entry: the only reference for this export's duration.
    unsafe { *GLOBAL.event.get() = numbers };
    code
}

/// The `i`-th number of the latest event read (0 to 3; otherwise NaN).
#[unsafe(no_mangle)]
pub extern "C" fn rk_event_number(i: u32) -> f64 {
    // SAFETY: one thread, no re-entry: the only reference for this export's duration.
    let numbers = unsafe { *GLOBAL.event.get() };
    numbers.get(i as usize).copied().unwrap_or(f64::NAN)
}

/// Where the core's name of the latest give-up reason starts in linear memory.
#[unsafe(no_mangle)]
pub extern "C" fn rk_gave_up_ptr() -> u32 {
    state().0.gave_up().as_ptr() as u32
}

/// The length of that name in bytes.
#[unsafe(no_mangle)]
pub extern "C" fn rk_gave_up_len() -> u32 {
    state().0.gave_up().len() as u32
}

/// [`crate::answer_meaning`]: the core's meaning of an attempt's answer, as one number.
#[unsafe(no_mangle)]
pub extern "C" fn rk_answer(
    status: i32,
    server_delay_ms: f64,
    should_retry: i32,
    overloaded: u32,
) -> u32 {
    crate::answer_meaning(status, server_delay_ms, should_retry, overloaded)
}

/// [`crate::exp_backoff`]: ms or NaN.
#[unsafe(no_mangle)]
pub extern "C" fn rk_exp_backoff(
    attempt: u32,
    base_ms: f64,
    factor: f64,
    jitter: f64,
    unit: f64,
) -> f64 {
    let e = state().1;
    number(
        crate::exp_backoff(attempt, base_ms, factor, jitter, unit),
        e,
    )
}

/// A chaos layer from the [`crate::chaos::CONFIG`] numbers JavaScript wrote into the input
/// buffer ([`crate::chaos::config_of`]): a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_chaos_new() -> i32 {
    let (w, e) = state();
    // SAFETY: one thread, no re-entry: JavaScript wrote the input before this export and does
    // not touch it during it; this is the only reference for its duration.
    let input = unsafe { &*GLOBAL.input.get() };
    let mut numbers = [f64::NAN; crate::chaos::CONFIG];
    for (i, n) in numbers.iter_mut().enumerate() {
        if let Some(bytes) = input.get(i * 8..i * 8 + 8)
            && let Ok(b) = <[u8; 8]>::try_from(bytes)
        {
            *n = f64::from_le_bytes(b);
        }
    }
    handle(w.chaos.add(&numbers), e)
}

/// Frees a chaos layer.
#[unsafe(no_mangle)]
pub extern "C" fn rk_chaos_free(chaos: u32) {
    state().0.chaos.free(chaos)
}

/// Switches a strategy (its stream: 0 fault, 1 latency, 2 outcome, 3 behaviour) on (1) or off:
/// the strategies on now as bits, or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_chaos_set(chaos: u32, stream: u32, on: u32) -> i32 {
    let (w, e) = state();
    handle(w.chaos.set(chaos, stream, on != 0), e)
}

/// The attempts a chaos layer counted, or NaN.
#[unsafe(no_mangle)]
pub extern "C" fn rk_chaos_attempts(chaos: u32) -> f64 {
    let (w, e) = state();
    number(w.chaos.attempts(chaos), e)
}

/// What the next attempt through a chaos layer gets: 1 something (see [`rk_chaos_out_ptr`]), 0
/// nothing, -1 a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rk_chaos_decide(chaos: u32) -> i32 {
    let (w, e) = state();
    handle(w.chaos.decide(chaos), e)
}

/// Where the latest chaos decision's numbers live ([`crate::chaos::OUT`] of them).
#[unsafe(no_mangle)]
pub extern "C" fn rk_chaos_out_ptr() -> u32 {
    state().0.chaos.out_ptr() as u32
}

/// [`crate::chaos::Timelines::begin`]: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_begin(seed_hi: f64, seed_lo: f64) -> i32 {
    let (w, e) = state();
    handle(w.chaos.timelines.begin(seed_hi, seed_lo).map(|()| 0), e)
}

/// [`crate::chaos::Timelines::fault`]: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_fault(kind: u32, from_ms: f64, until_ms: f64, a: f64, b: f64) -> i32 {
    let (w, e) = state();
    handle(
        w.chaos
            .timelines
            .fault(kind, from_ms, until_ms, a, b)
            .map(|()| 0),
        e,
    )
}

/// [`crate::chaos::Timelines::finish`]: a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_finish() -> i32 {
    let (w, e) = state();
    handle(w.chaos.timelines.finish(), e)
}

/// Frees a timeline.
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_free(timeline: u32) {
    state().0.chaos.timelines.free(timeline)
}

/// [`crate::chaos::Timelines::send`]: the code or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_send(timeline: u32, t_ms: f64, n: f64) -> i32 {
    let (w, e) = state();
    handle(w.chaos.timelines.send(timeline, t_ms, n), e)
}

/// [`crate::chaos::Timelines::answer`]: the code or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_answer(timeline: u32, t_ms: f64, n: f64, success: u32) -> i32 {
    let (w, e) = state();
    handle(w.chaos.timelines.answer(timeline, t_ms, n, success != 0), e)
}

/// Where the latest timeline answer's numbers live (three of them).
#[unsafe(no_mangle)]
pub extern "C" fn rk_timeline_out_ptr() -> u32 {
    state().0.chaos.timelines.out_ptr() as u32
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    unsafe extern "C" {
        /// Defined nowhere: a panic path that survives optimisation becomes an import of the
        /// module, which the CI job refuses.
        fn panic_path_survived_optimisation() -> !;
    }
    // SAFETY: never linked; see above.
    unsafe { panic_path_survived_optimisation() }
}
