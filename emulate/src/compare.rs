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
