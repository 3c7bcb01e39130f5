//! Everything the emulator takes from the simulator, in one place: the scenario format and its
//! loading, the simulator's [`emulation`](sim::emulation) components (arrivals, server model,
//! fault timeline, recorder, summary), the report writers, and a simulated run to compare
//! against. The emulator replaces only what is virtual in `sim` (time, the event queue, the
//! network and the client layers) with the real thing.

pub use sim::compile::Compiled;
pub use sim::emulation::{
    Admission, ByKind, ExtraCounters, Handle, Job, LedgerCounts, OpenLoop, Recorder, ReplicaGroup,
    Sampler, Server, Started, Stream, StreamId, Timeline, arrivals, buckets, clients, downstreams,
    finish, give_up, graph_shape, groups, hints, recorder, recorder_for, server, timeline,
};
pub use sim::metrics::PolicySummary;
pub use sim::metrics::hops::{HopCounters, HopSummary};
pub use sim::run::{BatchOptions, RunOutput, RunResult, Runs};
pub use sim::scenario::{
    Balancer, ClientFault, Dist, Downstream, DownstreamModel, Fault, Handler, Layer, OutageMode,
    RetryHost, Scenario, Scope, StoreFault, Workload,
};

/// Reads a scenario file and compiles it as `sim run` does: its only scenario, or the one called
/// `name` in a file that holds several.
pub fn load(path: &std::path::Path, name: Option<&str>) -> Result<Compiled, String> {
    let limits = sim::compile::Limits::default();
    let mut all = sim::load_file_all(path, &limits).map_err(|e| e.to_string())?;
    let names: Vec<String> = all
        .iter()
        .map(|c| format!("\"{}\"", c.scenario.name))
        .collect();
    let pick = match name {
        Some(n) => all
            .iter()
            .position(|c| c.scenario.name == n)
            .ok_or_else(|| {
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
    Ok(all.swap_remove(pick))
}

/// Reads every scenario of a file, compiled as `sim run` compiles them.
pub fn load_all(path: &std::path::Path) -> Result<Vec<Compiled>, String> {
    sim::load_file_all(path, &sim::compile::Limits::default()).map_err(|e| e.to_string())
}

/// Compiles a scenario built in code (a subset of another's policies, a calibration set-up).
/// It is written with the extensions `sim` reads scenario files with (`Some` implied, newtype
/// variants unwrapped): without them a retry budget, `Ratio((ratio: ..))`, would not read back.
pub fn compile(s: &Scenario) -> Result<Compiled, String> {
    use ron::extensions::Extensions;
    let text = ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
        .to_string(s)
        .map_err(|e| e.to_string())?;
    sim::load(&text, &s.name).map_err(|e| e.to_string())
}

/// The runs of an emulation, as the report layer takes them.
pub fn runs(c: &Compiled, seed: u64, results: Vec<RunResult>) -> Runs<'_> {
    Runs {
        compiled: c,
        seeds: vec![seed],
        results,
    }
}

/// Writes `sim run`'s outputs (summary.json, summary.md, timeseries.csv, plots) into
/// `out/<folder>/`, the folder named after the scenario, and returns it.
pub fn write_report(out: &std::path::Path, runs: &Runs<'_>) -> std::io::Result<std::path::PathBuf> {
    sim::report::write(out, runs)
}

/// The terminal table `sim run` prints.
pub fn table(runs: &Runs<'_>) -> String {
    sim::report::table(runs, false)
}

/// Runs the simulation of the same scenario and seed (every policy, in parallel).
pub fn simulate(c: &Compiled, seed: u64) -> Result<Vec<RunResult>, String> {
    Ok(sim::run::run(c, &[seed], BatchOptions::default())
        .map_err(|e| e.to_string())?
        .results)
}

/// The report folder name `sim` uses for a scenario.
pub fn folder_name(name: &str) -> String {
    sim::scenario::folder_name(name)
}
