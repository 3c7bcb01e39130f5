//! The side-by-side table: per policy, simulated vs emulated amplification during and after the
//! fault, success, goodput and verdict, and whether the emulation agrees (same verdict,
//! amplification within [`TOLERANCE`]).

use serde::Serialize;

use crate::simface::PolicySummary;

/// Largest relative difference of amplification counted as agreement.
pub const TOLERANCE: f64 = 0.15;

/// One policy's row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Policy name.
    pub policy: String,
    /// Amplification during the fault: simulated, emulated.
    pub amp_during: (Option<f64>, Option<f64>),
    /// Amplification after the fault: simulated, emulated.
    pub amp_after: (Option<f64>, Option<f64>),
    /// Success rate: simulated, emulated.
    pub success: (f64, f64),
    /// Goodput per second: simulated, emulated.
    pub goodput: (f64, f64),
    /// Seconds from the fault's end to recovery: simulated, emulated.
    pub recovery_s: (Option<f64>, Option<f64>),
    /// Verdict: simulated, emulated.
    pub verdict: (String, String),
}

/// `(emulated − simulated) ÷ simulated`, if both exist and the simulated value is not 0.
pub fn rel(pair: (Option<f64>, Option<f64>)) -> Option<f64> {
    match pair {
        (Some(s), Some(e)) if s != 0.0 => Some((e - s) / s),
        _ => None,
    }
}

impl Row {
    /// Compares two summaries of one policy.
    pub fn new(sim: &PolicySummary, emu: &PolicySummary) -> Self {
        Row {
            policy: sim.name.clone(),
            amp_during: (
                sim.amplification.during_fault,
                emu.amplification.during_fault,
            ),
            amp_after: (sim.amplification.after_fault, emu.amplification.after_fault),
            success: (sim.success_rate, emu.success_rate),
            goodput: (sim.goodput_per_s, emu.goodput_per_s),
            recovery_s: (sim.recovery_s, emu.recovery_s),
            verdict: (sim.verdict.name().into(), emu.verdict.name().into()),
        }
    }

    /// Same verdict.
    pub fn same_verdict(&self) -> bool {
        self.verdict.0 == self.verdict.1
    }

    /// Amplification during and after the fault within [`TOLERANCE`] (or both absent).
    pub fn amplification_agrees(&self) -> bool {
        [self.amp_during, self.amp_after]
            .into_iter()
            .all(|p| p.0.is_none() && p.1.is_none() || rel(p).is_some_and(|r| r.abs() <= TOLERANCE))
    }
}

fn amp(pair: (Option<f64>, Option<f64>)) -> String {
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    match rel(pair) {
        Some(r) => format!("{} / {} ({:+.0}%)", f(pair.0), f(pair.1), r * 100.0),
        None => format!("{} / {}", f(pair.0), f(pair.1)),
    }
}

fn secs(x: Option<f64>) -> String {
    x.map_or("-".into(), |s| format!("{s:.0} s"))
}

/// The table in Markdown (simulated / emulated in each cell).
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| policy | amplification during fault (sim / emu) | amplification after fault (sim / emu) | success (sim / emu) | goodput/s (sim / emu) | recovery (sim / emu) | verdict (sim / emu) | agree |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let agree = match (r.same_verdict(), r.amplification_agrees()) {
            (true, true) => "yes",
            (true, false) => "verdict only",
            (false, _) => "**no**",
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.1}% / {:.1}% | {:.0} / {:.0} | {} / {} | {} / {} | {} |\n",
            r.policy,
            amp(r.amp_during),
            amp(r.amp_after),
            r.success.0 * 100.0,
            r.success.1 * 100.0,
            r.goodput.0,
            r.goodput.1,
            secs(r.recovery_s.0),
            secs(r.recovery_s.1),
            r.verdict.0,
            r.verdict.1,
            agree
        ));
    }
    s
}

/// Largest relative difference of a tier's amplification counted as agreement in a call graph.
pub const TIER_TOLERANCE: f64 = 0.10;

/// One downstream's row in a call graph (per policy): simulated, emulated.
#[derive(Clone, Debug, Serialize)]
pub struct TierRow {
    /// Policy name.
    pub policy: String,
    /// The downstream.
    pub tier: String,
    /// Hops from the edge.
    pub depth: Option<u32>,
    /// Arrivals ÷ the edge's first tries.
    pub amplification: (f64, f64),
    /// Successful answers per second.
    pub goodput: (f64, f64),
    /// Service time on jobs whose caller had given up ÷ all its service time.
    pub wasted_share: (f64, f64),
    /// Jobs refused, dropped or stopped past their caller's deadline.
    pub past_deadline: (u64, u64),
    /// Its goodput's verdict.
    pub verdict: (String, String),
}

impl TierRow {
    /// One row per downstream of a call graph (none for a scenario without services).
    pub fn rows(sim: &PolicySummary, emu: &PolicySummary) -> Vec<TierRow> {
        let (Some(s), Some(e)) = (&sim.hops, &emu.hops) else {
            return Vec::new();
        };
        s.iter()
            .zip(e)
            .map(|(s, e)| TierRow {
                policy: sim.name.clone(),
                tier: s.name.clone(),
                depth: s.depth,
                amplification: (s.amplification, e.amplification),
                goodput: (s.goodput_per_s, e.goodput_per_s),
                wasted_share: (s.wasted_share, e.wasted_share),
                past_deadline: (s.past_deadline, e.past_deadline),
                verdict: (s.verdict.name().into(), e.verdict.name().into()),
            })
            .collect()
    }

    /// `(emulated − simulated) ÷ simulated` amplification (0 when both are 0).
    pub fn amplification_rel(&self) -> Option<f64> {
        match self.amplification {
            (s, e) if s == 0.0 && e == 0.0 => Some(0.0),
            (s, e) => rel((Some(s), Some(e))),
        }
    }

    /// Same verdict.
    pub fn same_verdict(&self) -> bool {
        self.verdict.0 == self.verdict.1
    }

    /// Amplification within [`TIER_TOLERANCE`].
    pub fn amplification_agrees(&self) -> bool {
        self.amplification_rel()
            .is_some_and(|r| r.abs() <= TIER_TOLERANCE)
    }
}

/// The per-tier table in Markdown (simulated / emulated in each cell).
pub fn tier_markdown(rows: &[TierRow]) -> String {
    let mut s = String::from(
        "| policy | tier (depth) | amplification (sim / emu) | goodput/s (sim / emu) | wasted share (sim / emu) | past deadline (sim / emu) | verdict (sim / emu) | agree |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let agree = match (r.same_verdict(), r.amplification_agrees()) {
            (true, true) => "yes",
            (true, false) => "verdict only",
            (false, _) => "**no**",
        };
        let rel = r
            .amplification_rel()
            .map_or(String::new(), |x| format!(" ({:+.0}%)", x * 100.0));
        s.push_str(&format!(
            "| {} | {} ({}) | {:.2} / {:.2}{rel} | {:.1} / {:.1} | {:.0}% / {:.0}% | {} / {} | {} / {} | {} |\n",
            r.policy,
            r.tier,
            r.depth.map_or("-".into(), |d| d.to_string()),
            r.amplification.0,
            r.amplification.1,
            r.goodput.0,
            r.goodput.1,
            r.wasted_share.0 * 100.0,
            r.wasted_share.1 * 100.0,
            r.past_deadline.0,
            r.past_deadline.1,
            r.verdict.0,
            r.verdict.1,
            agree
        ));
    }
    s
}

/// A policy with a `Fleet` scope: what the simulated and the emulated instances did with the
/// store. Shown, not judged: the simulator's cached view and the service's refresh need not
/// send the same number of operations for the same verdict.
#[derive(Clone, Debug, Serialize)]
pub struct FleetRow {
    /// Policy name.
    pub policy: String,
    /// Operations sent to the store: simulated, emulated.
    pub ops: (u64, u64),
    /// Of which failed.
    pub failed: (u64, u64),
    /// The emulated failures by kind: at once, with the store's error, given up at the wait
    /// bound.
    pub emulated_failures: (u64, u64, u64),
    /// Results decided alone and replayed into the store when it answered again: those the
    /// store counted (simulated), those sent (emulated: the store counts only those that land
    /// while the fleet's breaker is closed, in its generation).
    pub reconciled: (u64, u64),
    /// Times the fleet's breaker opened.
    pub opens: (u64, u64),
    /// When it first opened, seconds from the start.
    pub first_open_s: (Option<f64>, Option<f64>),
}

impl FleetRow {
    /// The row of a policy whose simulation has fleet figures, if the emulation has its store's.
    pub fn new(sim: &PolicySummary, emu: Option<&crate::fleet::StoreFigures>) -> Option<Self> {
        let (s, e) = (sim.fleet.as_ref()?, emu?);
        Some(FleetRow {
            policy: sim.name.clone(),
            ops: (s.store_ops, e.ops),
            failed: (s.store_failures, e.failed),
            emulated_failures: (e.failed_at_once, e.errors, e.given_up),
            reconciled: (s.reconciled, e.reconciled),
            opens: (s.fleet_opens, e.opens),
            first_open_s: (s.first_fleet_open_s, e.first_open_s),
        })
    }
}

/// The fleet table in Markdown (simulated / emulated in each cell).
pub fn fleet_markdown(rows: &[FleetRow]) -> String {
    let at = |x: Option<f64>| x.map_or("-".into(), |s| format!("{s:.2} s"));
    let mut s = String::from(
        "| policy | store operations (sim / emu) | of which failed | emulated: at once, error, given up | results replayed (sim: counted; emu: sent) | fleet breaker opened | first opened |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} / {} | {} / {} | {}, {}, {} | {} / {} | {} / {} | {} / {} |\n",
            r.policy,
            r.ops.0,
            r.ops.1,
            r.failed.0,
            r.failed.1,
            r.emulated_failures.0,
            r.emulated_failures.1,
            r.emulated_failures.2,
            r.reconciled.0,
            r.reconciled.1,
            r.opens.0,
            r.opens.1,
            at(r.first_open_s.0),
            at(r.first_open_s.1)
        ));
    }
    s
}
