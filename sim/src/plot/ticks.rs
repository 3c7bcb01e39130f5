//! Axis ranges and ticks: round tick values, their labels in each [`TickFormat`], decades and
//! halves on a log axis.

use super::{Axis, Scale, TickFormat};

/// Nice tick values covering `[lo, hi]`, about `target` of them.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Decimals needed to tell ticks `step` apart.
pub(super) fn decimals(step: f64) -> usize {
    if step <= 0.0 || !step.is_finite() {
        return 0;
    }
    let mut d = 0;
    while d < 6
        && ((step * 10f64.powi(d as i32)).round() - step * 10f64.powi(d as i32)).abs() > 1e-6
    {
        d += 1;
    }
    d
}

/// `1234567.8` with `d` decimals and thousands separators.
pub fn group(v: f64, d: usize) -> String {
    let s = format!("{:.*}", d, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let mut out = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 && s.chars().any(|c| c != '0' && c != '.') {
        out.insert(0, '-');
    }
    out
}

pub(super) fn format_tick(v: f64, step: f64, f: TickFormat) -> String {
    match f {
        TickFormat::Number => group(v, decimals(step)),
        TickFormat::Times => format!("{}x", group(v, decimals(step))),
        TickFormat::Percent => format!("{}%", group(v * 100.0, decimals(step * 100.0))),
        TickFormat::Millis => {
            if v >= 1000.0 {
                format!("{} s", group(v / 1000.0, decimals(step / 1000.0).min(3)))
            } else {
                format!("{} ms", group(v, decimals(step.min(v.max(step)))))
            }
        }
    }
}

/// The axis in drawing space (log10 applied for log axes): range, ticks at drawing-space
/// positions with their labels.
pub(super) struct Resolved {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) ticks: Vec<(f64, String)>,
    pub(super) log: bool,
}

impl Resolved {
    pub(super) fn map(&self, v: f64) -> Option<f64> {
        if self.log {
            (v > 0.0 && v.is_finite()).then(|| v.log10())
        } else {
            v.is_finite().then_some(v)
        }
    }
}

pub(super) fn resolve(axis: &Axis, values: &[f64], extra_headroom: f64, target: usize) -> Resolved {
    let log = axis.scale == Scale::Log10;
    let mapped: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .map(|v| if log { v.log10() } else { v })
        .collect();
    let (mut lo, mut hi) = match axis.range {
        Some((a, b)) if log => (a.max(1e-12).log10(), b.max(1e-12).log10()),
        Some((a, b)) => (a, b),
        None => {
            let lo = mapped.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = mapped.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
        }
    };
    if axis.range.is_none() {
        if axis.include_zero && !log {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi - lo < 1e-9 {
            hi = lo + if log { 1.0 } else { lo.abs().max(1.0) };
        }
        let span = hi - lo;
        hi += span * extra_headroom;
        if !(axis.include_zero && !log && lo == 0.0) {
            lo -= span * 0.04;
        }
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let ticks: Vec<(f64, String)> = if !axis.ticks.is_empty() {
        axis.ticks
            .iter()
            .filter_map(|(v, label)| {
                let m = if log {
                    (*v > 0.0).then(|| v.log10())?
                } else {
                    *v
                };
                (m >= lo - 1e-9 && m <= hi + 1e-9).then(|| (m, label.clone()))
            })
            .collect()
    } else if log {
        log_ticks(lo, hi, axis.format)
    } else {
        let t = nice_ticks(lo, hi, target);
        let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
        t.into_iter()
            .map(|v| (v, format_tick(v, step, axis.format)))
            .collect()
    };
    Resolved { lo, hi, ticks, log }
}

/// Ticks of a log axis over `[lo, hi]` (log10 space): decades, with 2 and 5 when few decades.
pub(super) fn log_ticks(lo: f64, hi: f64, f: TickFormat) -> Vec<(f64, String)> {
    let mults: &[f64] = if hi - lo <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut out = Vec::new();
    for d in (lo.floor() as i32)..=(hi.ceil() as i32) {
        for m in mults {
            let v = m * 10f64.powi(d);
            let p = v.log10();
            if p >= lo - 1e-9 && p <= hi + 1e-9 {
                out.push((p, format_tick(v, v, f)));
            }
        }
    }
    if out.len() < 3 {
        // Less than a decade or so: round values, evenly spaced in value, placed on the log axis.
        let (a, b) = (10f64.powf(lo), 10f64.powf(hi));
        let t = nice_ticks(a, b, 5);
        let step = if t.len() > 1 { t[1] - t[0] } else { a };
        out = t
            .into_iter()
            .filter(|v| *v > 0.0)
            .map(|v| (v.log10(), format_tick(v, step, f)))
            .collect();
    }
    out
}
