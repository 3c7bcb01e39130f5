//! The plots of a scenario's report, built from the runs' buckets, and the reference lines they
//! need, computed from the scenario's model.
//!
//! - `amplification`: server arrivals ÷ the baseline (offered) rate over time, one line per
//!   policy, fault windows shaded, the downstream's capacity dashed, the offered load dotted;
//! - `goodput`: successful logical requests per second over time, with the same references;
//! - `queue`: jobs waiting in the servers' queues at each bucket's end, the queue capacity dashed;
//! - `latency`: client-observed latency by percentile (a percentile curve on a "nines" axis).
//!
//! With several seeds each line is the mean over the seeds and a band shows its 95% interval
//! (normal approximation, as in `summary.json`).
//!
//! # Capacity
//!
//! The capacity and offered-load lines are the model's curves ([`crate::model::capacity`]): the
//! servers' completions per second with the faults applied, and the open loop's rate.

use crate::compile::Compiled;
use crate::metrics::Bucket;
use crate::model::dist::Sampler;
use crate::run::RunResult;
use crate::scenario::{DownstreamModel, Fault, OutageMode, Workload};

use crate::plot::{Axis, Chart, Reference, Series, TickFormat, Window, group};
use crate::stats::mean_ci95 as mean_ci;

/// One figure of the report.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem: `amplification` gives `amplification.svg` and `amplification.png`.
    pub stem: &'static str,
    /// What to draw.
    pub chart: Chart,
    /// How to read it: one paragraph for `summary.md`.
    pub how_to_read: String,
}

/// Seconds of `ns`.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The rate the amplification plot divides by, and how it was obtained: the open loop's rate,
/// or else the mean first tries per second before the first fault (the whole run without
/// faults), over every policy and seed. `None` when there is no such rate (a job set).
pub fn baseline(c: &Compiled, results: &[RunResult]) -> Option<(f64, &'static str)> {
    match &c.scenario.workload {
        Workload::OpenLoop { rate, .. } => Some((*rate, "the workload's rate")),
        Workload::JobSet { .. } => None,
        Workload::ClosedLoop { .. } => {
            let w = secs(c.bucket_ns);
            let end = c
                .timeline
                .span()
                .map_or(c.buckets, |(a, _)| (a / c.bucket_ns) as usize);
            let from = usize::from(end >= 2);
            let mut sum = 0.0;
            let mut n = 0usize;
            for r in results {
                for b in r.output.buckets.iter().take(end).skip(from) {
                    sum += b.first_tries as f64 / w;
                    n += 1;
                }
            }
            (n > 0 && sum > 0.0)
                .then(|| (sum / n as f64, "the mean first-try rate before the fault"))
        }
    }
}

/// A step function over `[0, horizon]` with breaks at `breaks` (ns): `(x s, value)` points,
/// two per segment, equal neighbouring segments merged.
fn step_points(c: &Compiled, mut breaks: Vec<u64>, f: impl Fn(u64) -> f64) -> Vec<(f64, f64)> {
    breaks.push(0);
    breaks.push(c.horizon_ns);
    breaks.retain(|b| *b <= c.horizon_ns);
    breaks.sort_unstable();
    breaks.dedup();
    let mut segs: Vec<(u64, u64, f64)> = Vec::new();
    for w in breaks.windows(2) {
        let v = f(w[0]);
        match segs.last_mut() {
            Some(last) if last.2 == v => last.1 = w[1],
            _ => segs.push((w[0], w[1], v)),
        }
    }
    segs.iter()
        .flat_map(|(a, b, v)| [(secs(*a), *v), (secs(*b), *v)])
        .collect()
}

fn fault_edges(c: &Compiled) -> Vec<u64> {
    c.timeline.edges().iter().map(|(t, _)| *t).collect()
}

/// The capacity step line (jobs/s), or `None` without servers.
pub fn capacity_line(c: &Compiled) -> Option<Vec<(f64, f64)>> {
    c.capacity_at(0)?;
    Some(step_points(c, fault_edges(c), |t| {
        c.capacity_at(t).unwrap_or(0.0)
    }))
}

/// The offered-load step line (requests/s), open loop only.
pub fn offered_line(c: &Compiled) -> Option<Vec<(f64, f64)>> {
    let Workload::OpenLoop { start, steps, .. } = &c.scenario.workload else {
        return None;
    };
    let mut breaks = fault_edges(c);
    breaks.push(start.as_nanos());
    breaks.extend(steps.iter().map(|s| s.at.as_nanos()));
    Some(step_points(c, breaks, |t| c.offered_at(t).unwrap_or(0.0)))
}

/// How each server's capacity is computed, one line each, with the numbers.
pub fn capacity_notes(c: &Compiled) -> Vec<String> {
    let mut out = Vec::new();
    for d in &c.scenario.downstreams {
        let DownstreamModel::Server {
            workers,
            service,
            per_in_flight,
            ..
        } = &d.model
        else {
            continue;
        };
        let mean = Sampler::new(service).mean_secs();
        let extra = secs(per_in_flight.as_nanos()) * f64::from(*workers);
        let text = if extra > 0.0 {
            format!(
                "`{}`: {workers} workers ÷ ({:.1} ms mean service time + {workers} × {} per job in the server) = {} jobs/s",
                d.name,
                mean * 1e3,
                per_in_flight,
                group(f64::from(*workers) / (mean + extra), 0)
            )
        } else if mean > 0.0 {
            format!(
                "`{}`: {workers} workers ÷ {:.1} ms mean service time = {} jobs/s",
                d.name,
                mean * 1e3,
                group(f64::from(*workers) / mean, 0)
            )
        } else {
            format!("`{}`: no service time, no capacity limit", d.name)
        };
        out.push(text);
    }
    out
}

/// A short label for a fault window.
pub fn fault_label(f: &Fault, many_downstreams: bool) -> String {
    let what = match f {
        Fault::Outage { mode, .. } => match mode {
            OutageMode::FailFast => "outage (fail fast)".to_string(),
            OutageMode::Hang => "outage (hang)".to_string(),
        },
        Fault::Partition { .. } => "partition (buffered)".to_string(),
        Fault::ErrorRate { rate, .. } => format!("errors {}%", group(rate * 100.0, 0)),
        Fault::LatencyInflation { factor, .. } => format!("latency ×{factor}"),
        Fault::CapacityLoss { share, .. } => {
            format!("capacity −{}%", group(share * 100.0, 0))
        }
        Fault::Throttle {
            share, retry_after, ..
        } => format!(
            "throttle {}%, Retry-After {retry_after}",
            group(share * 100.0, 0)
        ),
        Fault::LoadSpike { factor, .. } => format!("load ×{factor}"),
    };
    match f.downstream() {
        Some(d) if many_downstreams => format!("{what} on {d}"),
        _ => what,
    }
}

/// The fault windows, faults with the same window merged into one label.
pub fn windows(c: &Compiled) -> Vec<Window> {
    let many = c.scenario.downstreams.len() > 1;
    let mut out: Vec<Window> = Vec::new();
    for f in &c.scenario.faults {
        let (a, b) = f.window();
        let (from, until) = (secs(a.as_nanos()), secs(b.as_nanos()));
        let label = fault_label(f, many);
        match out.iter_mut().find(|w| w.from == from && w.until == until) {
            Some(w) => {
                w.label.push_str(" + ");
                w.label.push_str(&label);
            }
            None => out.push(Window { from, until, label }),
        }
    }
    out
}

/// Mean, and the 95% band when there are several values.
fn stat(xs: &[f64]) -> (f64, Option<(f64, f64)>) {
    let (m, half) = mean_ci(xs);
    (m, (xs.len() > 1).then_some((m - half, m + half)))
}

/// One series per policy of `value(bucket, width s)` at each bucket's center (or end, for
/// gauges), mean over seeds with a band when there are several.
fn over_time(
    c: &Compiled,
    results: &[RunResult],
    at_end: bool,
    value: impl Fn(&Bucket, f64) -> f64,
) -> Vec<Series> {
    series_over_time(c, results, |r| &r.output.buckets, at_end, value)
        .into_iter()
        .flatten()
        .collect()
}

/// [`over_time`] for any per-bucket record `per_bucket` picks from a run: `None` for a policy
/// whose runs have none.
fn series_over_time<T>(
    c: &Compiled,
    results: &[RunResult],
    per_bucket: impl Fn(&RunResult) -> &[T],
    at_end: bool,
    value: impl Fn(&T, f64) -> f64,
) -> Vec<Option<Series>> {
    let w = secs(c.bucket_ns);
    let horizon = secs(c.horizon_ns);
    (0..c.stacks.len())
        .map(|p| {
            let runs: Vec<&[T]> = results
                .iter()
                .filter(|r| r.policy == p)
                .map(&per_bucket)
                .filter(|b| !b.is_empty())
                .collect();
            if runs.is_empty() {
                return None;
            }
            let mut points = Vec::with_capacity(c.buckets);
            let mut band = Vec::new();
            for i in 0..c.buckets {
                let start = i as f64 * w;
                let end = ((i + 1) as f64 * w).min(horizon);
                let width = (end - start).max(1e-12);
                let x = if at_end { end } else { (start + end) / 2.0 };
                let xs: Vec<f64> = runs
                    .iter()
                    .filter_map(|b| b.get(i))
                    .map(|b| value(b, width))
                    .collect();
                if xs.is_empty() {
                    continue;
                }
                let (m, ci) = stat(&xs);
                points.push((x, m));
                if let Some((lo, hi)) = ci {
                    band.push((x, lo.max(0.0), hi));
                }
            }
            Some(Series::line(&c.scenario.policies[p].name, points).with_band(band))
        })
        .collect()
}

/// `scenario NAME · seed N` or `scenario NAME · mean of K seeds (A–B); band: 95% interval`.
pub fn subtitle(c: &Compiled, seeds: &[u64], extra: &str) -> String {
    let runs = match seeds {
        [one] => format!("seed {one}"),
        many => format!(
            "mean of {} seeds ({}–{}); band: 95% interval of the mean",
            many.len(),
            many.first().copied().unwrap_or(0),
            many.last().copied().unwrap_or(0)
        ),
    };
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(" · {extra}")
    };
    format!("scenario “{}” · {runs}{extra}", c.scenario.name)
}

fn time_axis(c: &Compiled) -> Axis {
    Axis::linear("time (s)", TickFormat::Number).with_range(0.0, secs(c.horizon_ns))
}

fn scaled(points: &[(f64, f64)], by: f64) -> Vec<(f64, f64)> {
    points.iter().map(|(x, y)| (*x, y / by)).collect()
}

fn bucket_width_text(c: &Compiled) -> String {
    c.scenario.bucket.to_string()
}

/// Said of every time plot: identical lines hide each other.
const OVERLAP: &str = " Where policies behave alike their lines coincide, and the one lower in the legend is drawn on top.";

/// The four figures of a report.
pub fn figures(c: &Compiled, seeds: &[u64], results: &[RunResult]) -> Vec<Figure> {
    let wins = windows(c);
    let cap = capacity_line(c);
    let offered = offered_line(c);
    let cap_label = if c
        .scenario
        .downstreams
        .iter()
        .filter(|d| matches!(d.model, DownstreamModel::Server { .. }))
        .count()
        > 1
    {
        "capacity of the servers (workers ÷ mean service time, summed)"
    } else {
        "capacity (workers ÷ mean service time)"
    };
    let fault_note = match wins.len() {
        0 => OVERLAP.to_string(),
        1 => format!(" Grey: the fault window.{OVERLAP}"),
        _ => format!(" Grey: the fault windows.{OVERLAP}"),
    };
    let mut out = Vec::new();

    // Amplification.
    let base = baseline(c, results);
    let (amp_series, amp_y, amp_refs, base_text) = match base {
        Some((rate, how)) => {
            let series = over_time(c, results, false, |b, w| {
                b.server_arrivals as f64 / w / rate
            });
            let mut refs = Vec::new();
            if let Some(cap) = &cap {
                refs.push(Reference::dashed(cap_label, scaled(cap, rate)));
            }
            if let Some(off) = &offered {
                refs.push(Reference::dotted(
                    "offered load (first tries only)",
                    scaled(off, rate),
                ));
            }
            (
                series,
                Axis::linear(
                    &format!(
                        "server arrivals ÷ baseline ({} req/s)",
                        group(rate, if rate < 10.0 { 2 } else { 0 })
                    ),
                    TickFormat::Times,
                ),
                refs,
                format!(
                    "the baseline is {} req/s, {how}",
                    group(rate, if rate < 10.0 { 2 } else { 0 })
                ),
            )
        }
        None => {
            let series = over_time(c, results, false, |b, w| b.server_arrivals as f64 / w);
            let refs = cap
                .iter()
                .map(|cap| Reference::dashed(cap_label, cap.clone()))
                .collect();
            (
                series,
                Axis::linear("server arrivals (calls/s)", TickFormat::Number),
                refs,
                "this workload has no steady rate, so arrivals are shown per second".to_string(),
            )
        }
    };
    let cap_note = match (&cap, base) {
        (Some(_), Some(_)) => {
            " The dashed line is the downstream's capacity on the same scale: above it the server cannot keep up, its queue grows and requests start to time out."
        }
        (Some(_), None) => {
            " The dashed line is the downstream's capacity: above it the server cannot keep up."
        }
        _ => "",
    };
    out.push(Figure {
        stem: "amplification",
        chart: Chart {
            title: "Load on the server: retries on top of the offered traffic".into(),
            subtitle: subtitle(c, seeds, &format!("{} buckets", bucket_width_text(c))),
            x: time_axis(c),
            y: amp_y,
            series: amp_series,
            windows: wins.clone(),
            references: amp_refs,
        },
        how_to_read: format!(
            "Each line is one policy: the calls reaching the server per second divided by a fixed baseline ({base_text}). At 1x the server sees only the offered traffic; 3x means two extra calls (retries) for every request; below 1x, clients refused requests locally.{cap_note} A policy that keeps its line under the capacity once the fault ends lets the server recover.{fault_note}"
        ),
    });

    // Goodput.
    let mut refs = Vec::new();
    if let Some(off) = &offered {
        refs.push(Reference::dotted("offered load (requests/s)", off.clone()));
    }
    if let Some(cap) = &cap {
        refs.push(Reference::dashed(cap_label, cap.clone()));
    }
    out.push(Figure {
        stem: "goodput",
        chart: Chart {
            title: "Goodput: requests that succeeded, per second".into(),
            subtitle: subtitle(c, seeds, &format!("{} buckets", bucket_width_text(c))),
            x: time_axis(c),
            y: Axis::linear("successful requests/s", TickFormat::Number),
            series: over_time(c, results, false, |b, w| b.successes as f64 / w),
            windows: wins.clone(),
            references: refs,
        },
        how_to_read: format!(
            "Successful logical requests per second, counted when their final answer arrives (after any retries). A healthy policy tracks the offered load{}; a line that stays low after the fault window is a policy stuck in a retry storm (metastable failure), even though the cause is gone.{fault_note}",
            if offered.is_some() {
                " (dotted)"
            } else {
                ""
            }
        ),
    });

    // Queue.
    let has_server = c
        .scenario
        .downstreams
        .iter()
        .any(|d| matches!(d.model, DownstreamModel::Server { .. }));
    let queue_cap: Option<u64> = c
        .scenario
        .downstreams
        .iter()
        .filter_map(|d| match &d.model {
            DownstreamModel::Server { queue, .. } => Some(queue.capacity.map(u64::from)),
            _ => None,
        })
        .sum::<Option<u64>>()
        .filter(|_| has_server);
    let (q_title, q_axis, q_series, q_text) = if has_server {
        (
            "Queue: jobs waiting at the server",
            "jobs waiting in the queue",
            over_time(c, results, true, |b, _| b.queue_len as f64),
            "Jobs waiting in the servers' queues (not yet being served), sampled at the end of each bucket. A full queue means every new call waits behind it: if the wait is longer than the clients' timeout, the server spends its time on requests nobody is waiting for any more.",
        )
    } else {
        (
            "Requests in flight",
            "logical requests in flight",
            over_time(c, results, true, |b, _| b.in_flight as f64),
            "Logical requests started and not yet finished, sampled at the end of each bucket.",
        )
    };
    let q_refs: Vec<Reference> = queue_cap
        .into_iter()
        .filter(|_| has_server)
        .map(|cap| {
            Reference::dashed(
                "queue capacity",
                vec![(0.0, cap as f64), (secs(c.horizon_ns), cap as f64)],
            )
        })
        .collect();
    out.push(Figure {
        stem: "queue",
        chart: Chart {
            title: q_title.into(),
            subtitle: subtitle(c, seeds, &format!("sampled every {}", bucket_width_text(c))),
            x: time_axis(c),
            y: Axis::linear(q_axis, TickFormat::Number),
            series: q_series,
            windows: wins.clone(),
            references: q_refs,
        },
        how_to_read: format!(
            "{q_text}{}{fault_note}",
            if queue_cap.is_some() {
                " The dashed line is the queue's capacity: arrivals finding it full are rejected."
            } else {
                ""
            }
        ),
    });

    // Latency.
    out.push(latency_figure(c, seeds, results));
    out.extend(limit_figures(c, seeds, results, &wins, &fault_note));
    out.extend(depth_figure(c, seeds, results, &wins));
    out
}

/// Over a call graph: arrivals at each depth per edge request over time, one line per policy and
/// depth.
fn depth_figure(
    c: &Compiled,
    seeds: &[u64],
    results: &[RunResult],
    wins: &[Window],
) -> Option<Figure> {
    let depths = results
        .iter()
        .map(|r| r.output.depth_arrivals.len())
        .max()
        .filter(|&d| d > 0)?;
    let mut series = Vec::new();
    for d in 0..depths {
        let per = series_over_time(
            c,
            results,
            |r| {
                r.output
                    .depth_arrivals
                    .get(d)
                    .map_or(&[][..], Vec::as_slice)
            },
            false,
            |&(arrived, first), _| {
                if first == 0 {
                    0.0
                } else {
                    arrived as f64 / first as f64
                }
            },
        );
        for mut s in per.into_iter().flatten() {
            s.label = format!("{} · depth {}", s.label, d + 1);
            series.push(s);
        }
    }
    Some(Figure {
        stem: "amplification-by-depth",
        chart: Chart {
            title: "Amplification by depth".into(),
            subtitle: subtitle(c, seeds, &format!("per {}", bucket_width_text(c))),
            x: time_axis(c),
            y: Axis::linear("arrivals per edge request", TickFormat::Number),
            series,
            windows: wins.to_vec(),
            references: Vec::new(),
        },
        how_to_read: "Calls arriving at the downstreams at each depth of the call graph (depth 1: those the edge calls) per logical request the workload started in the same bucket. Retries at each hop multiply: a line well above the one of the depth above it is a hop whose retries amplify the load below it.".into(),
    })
}

/// With concurrency limits: the admitted concurrency against Little's law, and the limits.
fn limit_figures(
    c: &Compiled,
    seeds: &[u64],
    results: &[RunResult],
    wins: &[Window],
    fault_note: &str,
) -> Vec<Figure> {
    if results.iter().all(|r| r.output.limits.is_empty()) {
        return Vec::new();
    }
    fn limits(r: &RunResult) -> &[crate::metrics::extra::LimitBucket] {
        &r.output.limits
    }
    let admitted: Vec<Series> = series_over_time(c, results, limits, false, |b, _| b.admitted)
        .into_iter()
        .flatten()
        .collect();
    let limit: Vec<Series> = series_over_time(c, results, limits, true, |b, _| b.limit as f64)
        .into_iter()
        .flatten()
        .collect();
    let mut edges = fault_edges(c);
    edges.sort_unstable();
    let little = c
        .concurrency_at(0)
        .map(|_| step_points(c, edges, |t| c.concurrency_at(t).unwrap_or(0.0)));
    let refs: Vec<Reference> = little
        .iter()
        .map(|l| Reference::dashed("capacity × unloaded latency (Little's law)", l.clone()))
        .collect();
    let subtitle_text = subtitle(c, seeds, &format!("{} buckets", bucket_width_text(c)));
    vec![
        Figure {
            stem: "concurrency",
            chart: Chart {
                title: "Admitted concurrency: calls in flight through the limit".into(),
                subtitle: subtitle_text.clone(),
                x: time_axis(c),
                y: Axis::linear("calls in flight (time average)", TickFormat::Number),
                series: admitted,
                windows: wins.to_vec(),
                references: refs.clone(),
            },
            how_to_read: format!(
                "Calls a policy's concurrency limit had admitted and not yet seen answered, averaged over each bucket's time (policies without a limit are not drawn). The dashed line is Little's law for the server: its capacity times the latency of a call that does not queue (mean service time plus the network round trip), the concurrency that keeps every worker busy with no queue. Above it, admitted calls wait in the server's queue; below it, workers sit idle.{fault_note}"
            ),
        },
        Figure {
            stem: "limit",
            chart: Chart {
                title: "The concurrency limit over time".into(),
                subtitle: subtitle_text,
                x: time_axis(c),
                y: Axis::linear("limit (calls)", TickFormat::Number),
                series: limit,
                windows: wins.to_vec(),
                references: refs,
            },
            how_to_read: format!(
                "Each policy's concurrency limit at the end of each bucket (summed over its limiters when each client has its own). A static bulkhead is a flat line; AIMD and the gradient move it as answers come back. The dashed line is Little's law for the server, as in the concurrency plot.{fault_note}"
            ),
        },
    ]
}

/// p50 in nines: `−log10(1 − 0.5)`. The latency plot starts there: below the median, the curve
/// only shows the fastest answers (often instant local rejections), and it would stretch the log
/// axis down to microseconds.
const P50_NINES: f64 = std::f64::consts::LOG10_2;

/// Percentile ticks on the nines axis.
fn nines_ticks(max: f64) -> Vec<(f64, String)> {
    let mut t = vec![(P50_NINES, "p50".to_string())];
    if max <= 3.0 + 1e-9 {
        // Room for the in-between percentiles SREs quote.
        t.push((4f64.log10(), "p75".into()));
        t.push((20f64.log10(), "p95".into()));
    }
    for (n, label) in [
        (1.0, "p90"),
        (2.0, "p99"),
        (3.0, "p99.9"),
        (4.0, "p99.99"),
        (5.0, "p99.999"),
    ] {
        if n <= max + 1e-9 {
            t.push((n, label.to_string()));
        }
    }
    t.retain(|(n, _)| *n <= max + 1e-9);
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    t
}

fn latency_figure(c: &Compiled, seeds: &[u64], results: &[RunResult]) -> Figure {
    // Show the tail as far as every policy has at least ~10 requests beyond the percentile.
    let min_count = (0..c.stacks.len())
        .filter_map(|p| {
            results
                .iter()
                .filter(|r| r.policy == p)
                .map(|r| r.output.summary.latency_ms.count)
                .min()
        })
        .min()
        .unwrap_or(0);
    let max_nines = if min_count >= 10 {
        ((min_count as f64).log10() - 1.0).floor().clamp(1.0, 5.0)
    } else {
        1.0
    };
    let series: Vec<Series> =
        (0..c.stacks.len())
            .map(|p| {
                // Each run's curve from p50 (its exact median, then the curve's grid points).
                let curves: Vec<Vec<(f64, f64)>> =
                    results
                        .iter()
                        .filter(|r| r.policy == p && !r.output.latency_curve.is_empty())
                        .map(|r| {
                            std::iter::once((P50_NINES, r.output.summary.latency_ms.p50))
                                .chain(r.output.latency_curve.iter().copied().filter(|(n, _)| {
                                    *n > P50_NINES + 1e-9 && *n <= max_nines + 1e-9
                                }))
                                .collect()
                        })
                        .collect();
                let mut points = Vec::new();
                let mut band = Vec::new();
                let len = curves.iter().map(Vec::len).min().unwrap_or(0);
                for i in 0..len {
                    let n = curves[0][i].0;
                    let xs: Vec<f64> = curves.iter().map(|c| c[i].1).collect();
                    let (m, ci) = stat(&xs);
                    points.push((n, m));
                    if let Some((lo, hi)) = ci {
                        band.push((n, lo.max(m * 0.01), hi));
                    }
                }
                Series::line(&c.scenario.policies[p].name, points).with_band(band)
            })
            .collect();
    Figure {
        stem: "latency",
        chart: Chart {
            title: "Latency seen by clients, by percentile".into(),
            subtitle: subtitle(c, seeds, "every finished request, success or failure"),
            x: Axis::linear("percentile (spaced by nines)", TickFormat::Number)
                .with_range(P50_NINES, max_nines)
                .with_ticks(nines_ticks(max_nines)),
            y: Axis::log("latency, first try to final answer (log scale)", TickFormat::Millis),
            series,
            windows: Vec::new(),
            references: Vec::new(),
        },
        how_to_read: "Time from a logical request's first try to its final answer (success or failure, retries and backoff included), at each percentile: the line's height at p99 is the latency that 99% of requests stayed under. The x axis gives each \"nine\" the same room (p90, p99, p99.9), so the tail is visible; the y axis is logarithmic. Flat stretches at round values are usually timeouts: requests that gave up after one or more attempts ran into their timeout (plus any backoff between them).".to_string(),
    }
}
