//! Turns the last `cargo bench -p reliable-benches` run into the Markdown tables of
//! `benches/README.md`: the median time per operation of each benchmark, and for each of ours the
//! ratio to each peer in the same group (peer time ÷ our time: how many of our calls fit in one of
//! theirs; for the two-thread groups, how many times their throughput ours is). Where a group
//! wraps a call, the ratios are of overheads instead: each time minus the bare call's, measured in
//! the same group (peer overhead ÷ our overhead).
//!
//! `cargo run -p reliable-benches --example table` (reads `target/criterion/*/*/new/estimates.json`;
//! `--example table -- DIR` reads another criterion directory).

use std::path::{Path, PathBuf};

struct Group {
    id: &'static str,
    title: &'static str,
    ours: &'static [(&'static str, &'static str)],
    peers: &'static [(&'static str, &'static str)],
    /// Listed with their times, without ratios.
    yardsticks: &'static [(&'static str, &'static str)],
    /// Show the spread of the samples (10th to 90th percentile), for noisy groups.
    spread: bool,
    /// The bare call that the others wrap: when set, an overhead column (time minus its time)
    /// and ratios of overheads.
    bare: Option<&'static str>,
}

const BREAKER_OURS: &[(&str, &str)] = &[
    (
        "reliable_consecutive",
        "`CircuitBreaker`, 3 failures in a row",
    ),
    ("reliable_rate100", "`CircuitBreaker`, 50% of 100 calls"),
    ("shared_consecutive", "`SharedBreaker`, 3 failures in a row"),
    ("shared_rate100", "`SharedBreaker`, 50% of 100 calls"),
];
const BREAKER_PEERS: &[(&str, &str)] = &[
    (
        "failsafe_consecutive",
        "failsafe 1.3 `consecutive_failures(3)`",
    ),
    ("failsafe_default", "failsafe 1.3 default policy"),
    (
        "recloser_default",
        "recloser 1.4 default (50% of 100 calls)",
    ),
];

const TOWER_TPS_BUDGET: &[(&str, &str)] = &[(
    "tower_tps_budget",
    "tower 0.5 `TpsBudget` (20%, 10/s, 10 s): deposit + withdraw",
)];
const BARE_SERVICE_CALL: &[(&str, &str)] = &[(
    "bare_service_call",
    "yardstick: the inner service alone, ready + call + poll",
)];

const GROUPS: &[Group] = &[
    Group {
        id: "breaker_closed_success",
        title: "Breaker closed, call succeeds: acquire + record",
        ours: BREAKER_OURS,
        peers: BREAKER_PEERS,
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "breaker_closed_every_5th_fails",
        title: "Breaker closed, every 5th call fails: acquire + record",
        ours: BREAKER_OURS,
        peers: BREAKER_PEERS,
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "breaker_open_rejection",
        title: "Breaker open: the rejection",
        ours: &[
            (
                "reliable_consecutive",
                "`CircuitBreaker` (computes `retry_after`)",
            ),
            (
                "shared_consecutive",
                "`SharedBreaker` (computes `retry_after`)",
            ),
        ],
        peers: &[
            ("failsafe_consecutive", "failsafe 1.3 (reads the clock)"),
            ("recloser", "recloser 1.4 (reads the clock)"),
        ],
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "breaker_half_open_probe",
        title: "Breaker half-open: open → half-open, one probe, it fails, open again",
        ours: &[
            ("reliable_consecutive", "`CircuitBreaker`"),
            ("shared_consecutive", "`SharedBreaker`"),
        ],
        peers: &[
            ("failsafe_consecutive", "failsafe 1.3 (reads the clock)"),
            (
                "recloser",
                "recloser 1.4 (reads the clock, allocates; decides every 2nd call)",
            ),
        ],
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "breaker_shared_2_threads",
        title: "One breaker, two threads, calls succeed: wall time per call (both threads)",
        ours: &[
            ("shared_consecutive", "`SharedBreaker`, 3 failures in a row"),
            ("shared_rate100", "`SharedBreaker`, 50% of 100 calls"),
            (
                "shared_rate100_clock",
                "`SharedBreaker`, 50% of 100 calls, + 2 `Instant::now()` per call",
            ),
        ],
        peers: &[
            (
                "failsafe_consecutive",
                "failsafe 1.3 `consecutive_failures(3)`",
            ),
            ("failsafe_default", "failsafe 1.3 default policy"),
            ("recloser_default", "recloser 1.4 default"),
        ],
        yardsticks: &[
            (
                "atomic_fetch_add",
                "yardstick: `fetch_add` on one shared atomic",
            ),
            ("clock_2_reads", "yardstick: 2 `Instant::now()` per call"),
            (
                "atomic_fetch_add_clock_2_reads",
                "yardstick: `fetch_add` on one shared atomic + 2 `Instant::now()`",
            ),
        ],
        spread: true,
        bare: None,
    },
    Group {
        id: "backoff_next_delay",
        title: "Backoff, exponential 100 ms × 2 up to 10 s: next delay (random draw included)",
        ours: &[
            ("reliable_none", "no jitter"),
            ("reliable_full", "full jitter"),
            ("reliable_equal", "equal jitter"),
            ("reliable_decorrelated", "decorrelated jitter"),
            ("reliable_proportional", "±10% jitter"),
        ],
        peers: &[
            ("backon_none", "backon 1.6, no jitter"),
            ("backon_jitter", "backon 1.6 `with_jitter`"),
        ],
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "budget_record_check",
        title: "Retry budget: record a request, check a retry",
        ours: &[
            (
                "reliable_token_bucket",
                "token bucket (gRPC 10, 0.1), 4-call ledger",
            ),
            (
                "reliable_ratio",
                "ratio (Finagle 20%, 10/s, 10 s), 4-call ledger",
            ),
            ("reliable_ratio_pair", "ratio, first try + retry check only"),
            ("reliable_quota", "quota (AWS standard), 4-call ledger"),
            ("reliable_concurrency", "concurrency (Envoy), 4-call ledger"),
            (
                "reliable_retry_breaker",
                "retry breaker (Yandex 2024), 4-call ledger",
            ),
        ],
        peers: TOWER_TPS_BUDGET,
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "throttle_decide_record",
        title: "Adaptive throttle: decision + record (no peer crate has one)",
        ours: &[("reliable_adaptive", "Google SRE, K = 2, 2 min")],
        peers: &[],
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "hedge_decision",
        title: "Hedging at p95, per call: start, when is the hedge due, record the latency",
        ours: &[
            (
                "reliable_p95_arm_record",
                "`Hedger`: start + `next_hedge_at` + `record`",
            ),
            (
                "reliable_p95_hedge_from_ledger",
                "`Hedger`, the hedge fires: + first try, `try_hedge_from` a ledger, settle",
            ),
        ],
        peers: &[(
            "tower_hedge",
            "tower 0.5 `Hedge` (p95, armed): ready + call + poll, answer at once",
        )],
        yardsticks: BARE_SERVICE_CALL,
        spread: false,
        bare: None,
    },
    Group {
        id: "ledger_draw",
        title: "Ledger of extra attempts: a first try, an extra attempt asked (and settled)",
        ours: &[
            (
                "reliable_first_try_draw_settle",
                "`ExtraLedger` (Finagle 20%, 10/s, 10 s): first try + draw + settle",
            ),
            (
                "reliable_first_try_draw_settle_granted",
                "`ExtraLedger` at 100%: every draw granted",
            ),
        ],
        peers: TOWER_TPS_BUDGET,
        yardsticks: &[],
        spread: false,
        bare: None,
    },
    Group {
        id: "limiter_acquire_release",
        title: "Limiters: acquire + release (rate: acquire)",
        ours: &[
            ("reliable_bulkhead", "`Limiter`, bulkhead of 100"),
            ("reliable_aimd", "`Limiter`, AIMD (Netflix defaults)"),
            (
                "reliable_gradient",
                "`Limiter`, Gradient2 (Netflix defaults)",
            ),
            ("reliable_rate", "`RateLimiter` (GCRA)"),
        ],
        peers: &[
            (
                "tower_concurrency_limit",
                "tower 0.5 `ConcurrencyLimit` (100): ready + call + poll",
            ),
            (
                "tower_rate_limit",
                "tower 0.5 `RateLimit`: ready + call + poll",
            ),
        ],
        yardsticks: BARE_SERVICE_CALL,
        spread: false,
        bare: None,
    },
    Group {
        id: "reliable_call_success",
        title: "A successful call through `reliable::Reliable` (breaker + retries), one thread",
        ours: &[
            (
                "reliable_blocking",
                "`call_blocking`, default breaker (50% of 20 calls)",
            ),
            (
                "reliable_blocking_consecutive",
                "`call_blocking`, 3 failures in a row",
            ),
            (
                "reliable_blocking_timeout",
                "`call_blocking`, + 8 s timeout",
            ),
            ("reliable_async", "`call` (async), default breaker"),
            (
                "reliable_async_consecutive",
                "`call` (async), 3 failures in a row",
            ),
            ("reliable_async_timeout", "`call` (async), + 8 s timeout"),
        ],
        peers: &[
            (
                "failsafe_call_default",
                "failsafe 1.3 `call`, default policy",
            ),
            (
                "failsafe_call_consecutive",
                "failsafe 1.3 `call`, `consecutive_failures(3)`",
            ),
        ],
        yardsticks: &[
            ("bare_async", "bare async call, polled once"),
            ("backon_retry_blocking", "backon 1.6 `retry`, blocking"),
            ("backon_retry_async", "backon 1.6 `retry`, async"),
        ],
        spread: false,
        bare: Some("bare"),
    },
    Group {
        id: "reliable_call_success_two_threads",
        title: "A successful blocking call, two threads sharing one instance: time per call on each",
        ours: &[
            ("reliable_blocking", "`call_blocking`, default breaker"),
            (
                "reliable_blocking_consecutive",
                "`call_blocking`, 3 failures in a row",
            ),
        ],
        peers: &[
            (
                "failsafe_call_default",
                "failsafe 1.3 `call`, default policy",
            ),
            (
                "failsafe_call_consecutive",
                "failsafe 1.3 `call`, `consecutive_failures(3)`",
            ),
        ],
        yardsticks: &[],
        spread: true,
        bare: None,
    },
    Group {
        id: "baselines",
        title: "Yardsticks",
        ours: &[
            ("atomic_fetch_add", "`AtomicU64::fetch_add`, one thread"),
            ("instant_now", "`std::time::Instant::now()`"),
        ],
        peers: &[],
        yardsticks: &[],
        spread: false,
        bare: None,
    },
];

fn read_json(
    dir: &Path,
    group: &str,
    bench: &str,
    file: &str,
) -> Result<serde_json::Value, String> {
    let path: PathBuf = [dir, Path::new(group), Path::new(bench)]
        .iter()
        .collect::<PathBuf>()
        .join("new")
        .join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (run `cargo bench -p reliable-benches` first)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The median time per iteration, as criterion estimated it.
fn median_ns(dir: &Path, group: &str, bench: &str) -> Result<f64, String> {
    read_json(dir, group, bench, "estimates.json")?["median"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| format!("{group}/{bench}: no median.point_estimate"))
}

/// The 10th and 90th percentiles of the samples' time per iteration.
fn spread_ns(dir: &Path, group: &str, bench: &str) -> Result<(f64, f64), String> {
    let sample = read_json(dir, group, bench, "sample.json")?;
    let numbers = |key: &str| -> Vec<f64> {
        sample[key]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mut per: Vec<f64> = numbers("times")
        .iter()
        .zip(numbers("iters"))
        .map(|(t, i)| t / i)
        .collect();
    if per.is_empty() {
        return Err(format!("{group}/{bench}: empty sample"));
    }
    per.sort_by(f64::total_cmp);
    let at = |q: usize| per[(per.len() - 1) * q / 10];
    Ok((at(1), at(9)))
}

fn ns(t: f64) -> String {
    if t < 10.0 {
        format!("{t:.2}")
    } else if t < 100.0 {
        format!("{t:.1}")
    } else {
        format!("{t:.0}")
    }
}

fn main() -> Result<(), String> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    for g in GROUPS {
        println!("**{}** (`{}`)\n", g.title, g.id);
        // With a bare call: times less the bare call's, compared as overheads.
        let bare = g.bare.map(|id| median_ns(&dir, g.id, id)).transpose()?;
        let less = |t: f64| t - bare.unwrap_or(0.0);
        let mut header = String::from("| | median ns/op |");
        let mut rule = String::from("|---|---:|");
        if bare.is_some() {
            header.push_str(" overhead ns |");
            rule.push_str("---:|");
        }
        if g.spread {
            header.push_str(" p10–p90 |");
            rule.push_str("---:|");
        }
        for (_, label) in g.peers {
            let of = if bare.is_some() {
                "overhead ratio to"
            } else {
                "ratio to"
            };
            header.push_str(&format!(" {of} {label} |"));
            rule.push_str("---:|");
        }
        println!("{header}\n{rule}");
        let peers: Vec<(f64, &str)> = g
            .peers
            .iter()
            .map(|(id, label)| median_ns(&dir, g.id, id).map(|t| (t, *label)))
            .collect::<Result<_, _>>()?;
        let cells = |t: f64, id: &str| -> Result<String, String> {
            let mut row = String::new();
            if bare.is_some() {
                row.push_str(&format!(" {} |", ns(less(t))));
            }
            if g.spread {
                let (lo, hi) = spread_ns(&dir, g.id, id)?;
                row.push_str(&format!(" {}–{} |", ns(lo), ns(hi)));
            }
            Ok(row)
        };
        for (id, label) in g.ours {
            let t = median_ns(&dir, g.id, id)?;
            let mut row = format!("| {label} | **{}** |{}", ns(t), cells(t, id)?);
            for (p, _) in &peers {
                row.push_str(&format!(" {:.1}× |", less(*p) / less(t)));
            }
            println!("{row}");
        }
        let yardsticks: Vec<(f64, &str)> = g
            .yardsticks
            .iter()
            .chain(g.bare.map(|id| (id, "bare call")).as_slice())
            .map(|(id, label)| median_ns(&dir, g.id, id).map(|t| (t, *label)))
            .collect::<Result<_, _>>()?;
        let others = g
            .peers
            .iter()
            .chain(g.yardsticks)
            .map(|(id, _)| *id)
            .chain(g.bare);
        for ((t, label), id) in peers.iter().chain(&yardsticks).zip(others) {
            let mut row = format!("| {label} | {} |{}", ns(*t), cells(*t, id)?);
            for _ in &peers {
                row.push_str(" |");
            }
            println!("{row}");
        }
        println!();
    }
    Ok(())
}
