//! Staging replay: the default scenario's storm against a local service on 127.0.0.1, through
//! the stock tower stack, with the simulator's prediction printed beside what was observed.
//!
//! ```sh
//! cargo run -p emulate --release --example staging_replay            # about 75 s of wall time
//! cargo run -p emulate --release --example staging_replay -- FILE    # another scenario file
//! ```
//!
//! The scenario's faults are split first by `reliable::chaos::scenario_faults`: those a client
//! can play (outage, error rate, latency inflation, throttle, partition) go to a chaos
//! `TimelineLayer` on the client's side, and those only a server can make are refused there with
//! the reason, and played by the local service instead. The default storm is a capacity loss (60%
//! of the workers for 15 s): the service's, so the local service plays it, and the client stack is
//! the stock one (`ReliableLayer`'s pieces, `HttpPolicy`) with the scenario's own configs.
//!
//! Two policies of `scenarios/default-scaled.ron` (the default scenario at a quarter of its
//! traffic, what two cores drive faithfully), the one the simulator predicts stuck ("naive
//! retries") and the one it predicts recovers ("retry budget"), run at twice the speed (time scale
//! 0.5: 75 s of scenario in 37.5 s of wall time each, 1,600 attempts/s at the peak, within the
//! 2,000 the emulator drives faithfully on two cores), seed 1 as the simulation. Exits with status
//! 2 if a verdict differs.

use std::process::ExitCode;

use emulate::compare::Row;
use emulate::run::run_policy;
use emulate::simface;

const POLICIES: [&str; 2] = ["naive retries", "retry budget"];
const TIME_SCALE: f64 = 0.5;

fn main() -> ExitCode {
    match replay() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn replay() -> Result<bool, String> {
    let path = std::env::args().nth(1).map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/default-scaled.ron"),
        std::path::PathBuf::from,
    );
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let c = simface::load(&path, None)?;
    let downstream = c
        .scenario
        .downstreams
        .first()
        .map(|d| d.name.clone())
        .ok_or("the scenario has no downstream")?;

    // Which faults the client plays, which the service plays.
    let faults = reliable::chaos::scenario_faults(&text, &downstream)
        .map_err(|e| format!("{}:{e}", path.display()))?;
    println!("scenario {} ({})", c.scenario.name, path.display());
    for w in &faults.client {
        println!(
            "  client side (chaos TimelineLayer): {:?} from {} until {}",
            w.fault, w.from, w.until
        );
    }
    for r in &faults.refused {
        println!("  {r}\n    -> played by the local service on 127.0.0.1");
    }
    if !faults.client.is_empty() {
        return Err(
            "this example plays server-side storms only: the emulator's clients do not take a \
             TimelineLayer yet"
                .into(),
        );
    }

    // The two policies of the scenario as it is, simulated and replayed with the same seed.
    let seed = c.scenario.seed;
    let mut picked = Vec::new();
    for name in POLICIES {
        let p = c
            .scenario
            .policies
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| format!("the scenario has no policy \"{name}\""))?;
        picked.push(p);
    }
    let predicted = simface::simulate(&c, seed)?;

    println!(
        "\n| policy | amplification during (predicted / observed) | after | verdict (predicted / observed) | agree |"
    );
    println!("|---|---|---|---|---|");
    let mut agree = true;
    for &p in &picked {
        let sim = predicted
            .iter()
            .find(|r| r.policy == p)
            .ok_or("the simulation lost a policy")?;
        eprintln!(
            "replaying \"{}\" for {:.0} s of wall time ...",
            c.scenario.policies[p].name,
            c.scenario.horizon.as_secs_f64() * TIME_SCALE
        );
        let (observed, fidelity) = run_policy(&c, p, seed, TIME_SCALE)?;
        let row = Row::new(&sim.output.summary, &observed.summary);
        let amp = |x: (Option<f64>, Option<f64>)| {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
            format!("{} / {}", f(x.0), f(x.1))
        };
        println!(
            "| {} | {} | {} | {} / {} | {} |",
            row.policy,
            amp(row.amp_during),
            amp(row.amp_after),
            row.verdict.0,
            row.verdict.1,
            if row.same_verdict() { "yes" } else { "NO" }
        );
        eprintln!(
            "  {} arrivals, send lag p99 {:.2} ms",
            fidelity.arrivals, fidelity.lag_p99_ms
        );
        agree &= row.same_verdict();
    }
    if !agree {
        eprintln!("a verdict observed differs from the simulator's prediction");
    }
    Ok(agree)
}
