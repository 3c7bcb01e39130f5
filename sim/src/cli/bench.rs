//! `sim bench`: events per second on fixed scenarios (one thread), and memory with 10⁶ clients.

use crate::bench::{BenchReport, THROUGHPUT, bench as run_bench, in_flight, million};
use crate::cli::out::outln;
use clap::Args;

/// Options of `sim bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Also run the 10⁶-client memory scenario (about a minute; measure with /usr/bin/time -v).
    #[arg(long)]
    pub million: bool,
    /// Run only the in-flight memory scenario with this horizon in seconds (10⁵ requests in flight
    /// per second): the difference of peak RSS between two horizons, divided by the difference of
    /// requests in flight, is the memory per in-flight request.
    #[arg(long, value_name = "SECONDS", conflicts_with = "million",
          value_parser = clap::value_parser!(u32).range(1..=60))]
    pub in_flight: Option<u32>,
    /// Repetitions of the throughput scenario (the best is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
}

fn print(r: &BenchReport) -> Result<(), String> {
    outln!(
        "{}: {} events in {:.3} s = {:.2} M events/s (one thread); peak {} pending events, {} requests in flight; ~{} bytes per in-flight request{}",
        r.name,
        r.events,
        r.seconds,
        r.events_per_sec() / 1e6,
        r.peak_events,
        r.peak_requests,
        r.bytes_per_request,
        r.peak_rss
            .map(|b| format!("; peak RSS {:.0} MiB", b as f64 / 1_048_576.0))
            .unwrap_or_default()
    );
    Ok(())
}

pub fn bench(args: BenchArgs) -> Result<(), String> {
    if let Some(seconds) = args.in_flight {
        return print(&run_bench(&in_flight(seconds))?);
    }
    let mut best: Option<BenchReport> = None;
    for _ in 0..args.repeat.max(1) {
        let r = run_bench(THROUGHPUT)?;
        if best.as_ref().is_none_or(|b| r.seconds < b.seconds) {
            best = Some(r);
        }
    }
    if let Some(b) = &best {
        print(b)?;
    }
    print(&run_bench(crate::DEFAULT_SCENARIO)?)?;
    if args.million {
        print(&run_bench(&million())?)?;
    }
    Ok(())
}
