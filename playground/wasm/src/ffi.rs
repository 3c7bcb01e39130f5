//! The exports the page's Web Worker calls, and the one import it provides.
//!
//! Text crosses through linear memory: the worker asks [`pg_input`] for room, writes the UTF-8
//! scenario there, then calls [`pg_check`], [`pg_run_next`] (once per run) and [`pg_report`];
//! each leaves a JSON answer that [`pg_output_ptr`] and [`pg_output_len`] locate. The state lives
//! in thread-locals (the module has one thread), so the only `unsafe` here is what exporting and
//! importing symbols needs.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Session;

#[link(wasm_import_module = "env")]
unsafe extern "C" {
    /// Virtual time the current run has reached, in seconds: the worker turns it into progress.
    safe fn pg_progress(seconds: f64);
}

thread_local! {
    static INPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Virtual time of the run in progress, ns, and when progress was last reported.
static RUN_NS: AtomicU64 = AtomicU64::new(0);
static REPORTED_NS: AtomicU64 = AtomicU64::new(0);
/// Report progress at most once per this much virtual time.
const REPORT_EVERY_NS: u64 = 2_000_000_000;

fn answer(v: &serde_json::Value) {
    OUTPUT.with(|o| {
        let mut o = o.borrow_mut();
        o.clear();
        o.extend_from_slice(v.to_string().as_bytes());
    });
}

fn error(message: String) -> u32 {
    answer(&serde_json::json!({ "ok": false, "message": message }));
    2
}

/// Room for `len` bytes of input; returns where to write them.
#[unsafe(no_mangle)]
pub extern "C" fn pg_input(len: usize) -> *mut u8 {
    INPUT.with(|i| {
        let mut i = i.borrow_mut();
        i.clear();
        i.resize(len, 0);
        i.as_mut_ptr()
    })
}

/// Where the latest answer (JSON, UTF-8) starts.
#[unsafe(no_mangle)]
pub extern "C" fn pg_output_ptr() -> *const u8 {
    OUTPUT.with(|o| o.borrow().as_ptr())
}

/// The latest answer's length in bytes.
#[unsafe(no_mangle)]
pub extern "C" fn pg_output_len() -> usize {
    OUTPUT.with(|o| o.borrow().len())
}

/// Loads the input as a scenario (`with_seed` 1: `seed` replaces its first seed). Returns 1 and
/// the scenario's info, or 0 and the refusal (line, column, field, message).
#[unsafe(no_mangle)]
pub extern "C" fn pg_check(with_seed: u32, seed: u64) -> u32 {
    let text = INPUT.with(|i| String::from_utf8_lossy(&i.borrow()).into_owned());
    match crate::check(&text, (with_seed == 1).then_some(seed)) {
        Ok(s) => {
            answer(&s.info());
            SESSION.with(|c| *c.borrow_mut() = Some(s));
            1
        }
        Err(r) => {
            answer(&r.to_json());
            SESSION.with(|c| *c.borrow_mut() = None);
            0
        }
    }
}

/// Runs the loaded scenario's next (seed, policy) pair. Returns 1 and what the page shows of
/// it, 0 when every pair has run, 2 and a message on an error.
#[unsafe(no_mangle)]
pub extern "C" fn pg_run_next() -> u32 {
    RUN_NS.store(0, Ordering::Relaxed);
    REPORTED_NS.store(0, Ordering::Relaxed);
    let tick = |delta_ns: u64| {
        let now = RUN_NS.fetch_add(delta_ns, Ordering::Relaxed) + delta_ns;
        if now - REPORTED_NS.load(Ordering::Relaxed) >= REPORT_EVERY_NS {
            REPORTED_NS.store(now, Ordering::Relaxed);
            pg_progress(now as f64 / 1e9);
        }
    };
    SESSION.with(|c| match c.borrow_mut().as_mut() {
        None => error("no scenario loaded: call pg_check first".into()),
        Some(s) => match s.run_next(&tick) {
            Ok(Some(v)) => {
                answer(&v);
                1
            }
            Ok(None) => 0,
            Err(e) => error(e.to_string()),
        },
    })
}

/// Renders the loaded scenario's report once every pair has run. Returns 1 and the report
/// (`summary_json`, `summary_md`, `table_md`, `conclusion`, `svg`), or 2 and a message.
#[unsafe(no_mangle)]
pub extern "C" fn pg_report() -> u32 {
    SESSION.with(|c| match c.borrow().as_ref() {
        None => error("no scenario loaded: call pg_check first".into()),
        Some(s) if s.results.len() < s.pairs() => error(format!(
            "{} of {} runs done: run them all first",
            s.results.len(),
            s.pairs()
        )),
        Some(s) => match s.report() {
            Ok(v) => {
                answer(&v);
                1
            }
            Err(e) => error(e),
        },
    })
}
