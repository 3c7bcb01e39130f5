//! Everything the emulator takes from the simulator, in one place: the scenario format and its
//! validation, the fault timeline, service-time distributions, the open-loop arrival source, the
//! server's queueing state machine, the metrics recorder and summary, the report writers, and a
//! simulated run to compare against. The emulator replaces only what is virtual in `sim` (time,
//! the event queue, the network and the client layers) with the real thing.

pub use sim::engine::{Handle, Stream, StreamId};
pub use sim::metrics::summary::{Context as SummaryContext, percentile_curve, summarize};
pub use sim::metrics::{PolicySummary, Recorder};
pub use sim::model::Sampler;
pub use sim::model::faults::Timeline;
pub use sim::model::server::{Admission, Job, Server, Started};
pub use sim::run::{BatchOptions, Compiled, RunOutput, RunResult, run_all};
pub use sim::scenario::{
    Downstream, DownstreamModel, Fault, Layer, OutageMode, Scenario, Scope, Workload,
};
pub use sim::workload::open_loop::OpenLoop;

/// Counts a retry layer giving up, by the core's reason name (`max-attempts`, `budget`, ...).
pub fn give_up(r: &mut Recorder, reason: &str) {
    if let Some(i) = sim::metrics::recorder::GIVE_UP_REASONS
        .iter()
        .position(|n| *n == reason)
    {
        r.give_ups[i] += 1;
    }
}

/// Reads and validates a scenario file and compiles it as `sim run` does: its only scenario, or
/// the one called `name` in a file that holds several.
pub fn load(path: &std::path::Path, name: Option<&str>) -> Result<Compiled, String> {
    let mut all = sim::scenario::load_file_all(path).map_err(|e| e.to_string())?;
    let names: Vec<String> = all.iter().map(|s| format!("\"{}\"", s.name)).collect();
    let pick = match name {
        Some(n) => all.iter().position(|s| s.name == n).ok_or_else(|| {
            format!(
                "no scenario \"{n}\" in {}: it has {}",
                path.display(),
                names.join(", ")
            )
        })?,
        None if all.len() == 1 => 0,
        None => {
            return Err(format!(
                "{} holds {} scenarios ({}): pick one with --scenario",
                path.display(),
                all.len(),
                names.join(", ")
            ));
        }
    };
    Compiled::new(all.swap_remove(pick))
}

/// The scenario's open-loop arrivals for `seed`, exactly as `sim` draws them.
pub fn arrivals(c: &Compiled, seed: u64) -> Option<OpenLoop> {
    match &c.scenario.workload {
        Workload::OpenLoop {
            rate,
            arrivals,
            clients,
            start,
            steps,
        } => Some(OpenLoop::new(
            seed,
            *rate,
            *arrivals,
            *clients,
            start.as_nanos(),
            steps,
            c.horizon_ns,
        )),
        _ => None,
    }
}

/// A server in the state `sim` starts downstream `i` in, with its service-time stream.
pub fn server(c: &Compiled, i: usize, seed: u64) -> Option<Server> {
    match &c.scenario.downstreams.get(i)?.model {
        DownstreamModel::Server {
            workers,
            queue,
            service,
            per_in_flight,
            error_rate,
            cancel_abandoned,
        } => Some(Server::new(
            *workers,
            queue.capacity,
            queue.discipline,
            Sampler::new(service),
            per_in_flight.as_nanos(),
            *error_rate,
            *cancel_abandoned,
            Stream::new(seed, StreamId::Service(i as u16)),
        )),
        _ => None,
    }
}

/// The summary of an emulated run, computed from its recorder by `sim`'s own definitions.
pub fn finish(
    c: &Compiled,
    policy: usize,
    seed: u64,
    rec: Recorder,
    unfinished: u64,
    peak_in_flight: u64,
) -> RunOutput {
    let s = &c.scenario;
    let scheduled = arrivals(c, seed).map(|src| src.scheduled(&c.timeline, c.bucket_ns, c.buckets));
    let cx = SummaryContext {
        name: &s.policies[policy].name,
        seed,
        horizon_ns: c.horizon_ns,
        bucket_ns: c.bucket_ns,
        fault: c.timeline.span(),
        threshold: s.recovery.threshold,
        relapse: s.recovery.relapse,
        sustain_ns: s.recovery.sustain.as_nanos(),
        unfinished,
        makespan_ns: None,
        events: 0,
        ds_names: &c.ds_names,
        register: vec![None; c.ds_names.len()],
        scheduled,
    };
    let mut summary = summarize(&rec, &cx);
    summary.peak_in_flight = peak_in_flight;
    RunOutput {
        summary,
        latency_curve: percentile_curve(&rec.latency),
        buckets: rec.buckets,
        trace: None,
        peak_events: 0,
        peak_requests: peak_in_flight as usize,
        peak_attempts: 0,
    }
}

/// Writes `sim run`'s outputs (summary.json, summary.md, timeseries.csv, plots) into `dir`.
pub fn write_report(
    dir: &std::path::Path,
    c: &Compiled,
    seed: u64,
    results: &[RunResult],
) -> std::io::Result<()> {
    sim::report::write_all(dir, c, &[seed], results)
}

/// The terminal table `sim run` prints.
pub fn table(c: &Compiled, results: &[RunResult]) -> String {
    sim::report::table::table(&sim::report::per_policy(c, results), false).to_string()
}

/// Runs the simulation of the same scenario and seed (every policy, in parallel).
pub fn simulate(c: &Compiled, seed: u64) -> Result<Vec<RunResult>, String> {
    run_all(
        c,
        &[seed],
        BatchOptions {
            jobs: 0,
            progress: false,
        },
    )
}

/// The report folder name `sim` uses for a scenario.
pub fn folder_name(name: &str) -> String {
    sim::report::folder_name(name)
}
