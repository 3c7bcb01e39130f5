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

use crate::{Failure, Slab, Tables};

/// The module's state: the tables (initialised on first use; zero bytes in the `.wasm` file, as
/// uninitialised memory is not stored) and the latest failure.
struct Global {
    tables: UnsafeCell<MaybeUninit<Tables>>,
    ready: UnsafeCell<bool>,
    error: UnsafeCell<ErrorText>,
}

// SAFETY: a wasm32 instance has one thread; see the module docs.
unsafe impl Sync for Global {}

static GLOBAL: Global = Global {
    tables: UnsafeCell::new(MaybeUninit::uninit()),
    ready: UnsafeCell::new(false),
    error: UnsafeCell::new(ErrorText::EMPTY),
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

/// The state, borrowed for one export call.
fn state() -> (&'static mut Tables, &'static mut ErrorText) {
    // SAFETY: one thread, and no export calls another or is re-entered (no imports), so these
    // are the only live references to the global for the duration of the export that asked.
    // `ready` is set only after `tables` is written.
    unsafe {
        let ready = &mut *GLOBAL.ready.get();
        let tables = &mut *GLOBAL.tables.get();
        if !*ready {
            init(tables.as_mut_ptr());
            *ready = true;
        }
        (tables.assume_init_mut(), &mut *GLOBAL.error.get())
    }
}

/// Writes empty tables in place. `tables.write(Tables::new())` would build them on the stack
/// first, and the tables (about 750 KiB) are close to the 1 MiB stack: past it, the stack runs
/// below address 0 and every export traps.
///
/// # Safety
/// `t` points to memory for a `Tables`, which this writes whole.
unsafe fn init(t: *mut Tables) {
    // SAFETY: every field of `*t` is written once through raw pointers, nothing is read.
    unsafe {
        init_slab(&raw mut (*t).breakers);
        init_slab(&raw mut (*t).policies);
        init_slab(&raw mut (*t).calls);
        (&raw mut (*t).gave_up).write("");
    }
}

/// # Safety
/// `s` points to memory for a `Slab<T, N>`, which this writes whole.
unsafe fn init_slab<T, const N: usize>(s: *mut Slab<T, N>) {
    // SAFETY: the slots are an array of N `Option<T>` and the free stack of N `u16`, all in `*s`.
    unsafe {
        let slots = (&raw mut (*s).slots).cast::<Option<T>>();
        for i in 0..N {
            slots.add(i).write(None);
        }
        (&raw mut (*s).free).cast::<u16>().write_bytes(0, N);
        (&raw mut (*s).free_len).write(0);
        (&raw mut (*s).fresh).write(0);
    }
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

/// [`Tables::breaker_new`]: a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_breaker_new(
    failure_rate: f64,
    window: u32,
    cooldown_ms: f64,
    probe: u32,
) -> i32 {
    let (t, e) = state();
    handle(t.breaker_new(failure_rate, window, cooldown_ms, probe), e)
}

/// [`Tables::breaker_free`].
#[unsafe(no_mangle)]
pub extern "C" fn rk_breaker_free(breaker: u32) {
    state().0.breaker_free(breaker)
}

/// [`Tables::breaker_state`]: the state's number or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_breaker_state(breaker: u32, now_ms: f64) -> i32 {
    let (t, e) = state();
    handle(t.breaker_state(breaker, now_ms), e)
}

/// [`Tables::acquire`]: -1 admitted, `>= 0` rejected with that `retry_after` (ms), NaN failure.
#[unsafe(no_mangle)]
pub extern "C" fn rk_acquire(breaker: u32, call: u32, now_ms: f64) -> f64 {
    let (t, e) = state();
    number(
        t.acquire(breaker, call, now_ms).map(|r| r.unwrap_or(-1.0)),
        e,
    )
}

/// [`Tables::record`]: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_record(breaker: u32, call: u32, outcome: u32, now_ms: f64) -> i32 {
    let (t, e) = state();
    handle(t.record(breaker, call, outcome, now_ms).map(|()| 0), e)
}

/// [`Tables::policy_new`]: a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_policy_new(
    max_attempts: u32,
    timeout_ms: f64,
    base_ms: f64,
    factor: f64,
    jitter: f64,
    cap_ms: f64,
    max_server_delay_ms: f64,
) -> i32 {
    let (t, e) = state();
    let r = t.policy_new(
        max_attempts,
        timeout_ms,
        base_ms,
        factor,
        jitter,
        cap_ms,
        max_server_delay_ms,
    );
    handle(r, e)
}

/// [`Tables::policy_free`].
#[unsafe(no_mangle)]
pub extern "C" fn rk_policy_free(policy: u32) {
    state().0.policy_free(policy)
}

/// [`Tables::attempt_timeout`]: ms, negative for none, NaN failure.
#[unsafe(no_mangle)]
pub extern "C" fn rk_attempt_timeout(policy: u32) -> f64 {
    let (t, e) = state();
    number(t.attempt_timeout(policy), e)
}

/// [`Tables::call_start`]: a handle or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_start(policy: u32, now_ms: f64) -> i32 {
    let (t, e) = state();
    handle(t.call_start(policy, now_ms), e)
}

/// [`Tables::begin`]; `breaker` negative for none: the call's handle (admitted), `-1` failure,
/// or `-2 - retry_after_ms` (rejected; the call is over).
#[unsafe(no_mangle)]
pub extern "C" fn rk_begin(policy: u32, breaker: i32, now_ms: f64) -> f64 {
    let (t, e) = state();
    match t.begin(policy, u32::try_from(breaker).ok(), now_ms) {
        Ok(Ok(call)) => f64::from(call),
        Ok(Err(retry_after_ms)) => -2.0 - retry_after_ms,
        Err(f) => {
            fail(e, f);
            -1.0
        }
    }
}

/// [`Tables::succeed`]; `breaker` negative for none: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_succeed(policy: u32, breaker: i32, call: u32, now_ms: f64) -> i32 {
    let (t, e) = state();
    handle(
        t.succeed(policy, u32::try_from(breaker).ok(), call, now_ms)
            .map(|()| 0),
        e,
    )
}

/// [`Tables::call_failed`]: ms to wait before the retry, -1 give up, NaN failure.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_failed(
    policy: u32,
    call: u32,
    class: u32,
    retry_after_ms: f64,
    now_ms: f64,
    unit: f64,
) -> f64 {
    let (t, e) = state();
    number(
        t.call_failed(policy, call, class, retry_after_ms, now_ms, unit),
        e,
    )
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

/// [`Tables::call_end`]; `breaker` negative for none: 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rk_call_end(
    policy: u32,
    breaker: i32,
    call: u32,
    succeeded: u32,
    now_ms: f64,
) -> i32 {
    let (t, e) = state();
    let breaker = u32::try_from(breaker).ok();
    handle(
        t.call_end(policy, breaker, call, succeeded != 0, now_ms)
            .map(|()| 0),
        e,
    )
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
