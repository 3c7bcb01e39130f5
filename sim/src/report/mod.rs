//! Reports: what a run leaves behind and prints.
//!
//! The public entry points render a [`Runs`]: [`write()`] (the whole report folder, written to a
//! temporary folder and renamed into place), [`table`], [`conclusion`], [`terminal`] (what `sim
//! run` prints), [`summary_json`], [`timeseries_csv`], [`summary_md`], [`figure_png`] and
//! [`figure_svg`]; [`grid::sweep`] renders a sweep the same way. Inside:
//!
//! - `json`: `summary.json` (the contract other tools read); the mean of several seeds'
//!   summaries is the summary types' own ([`crate::metrics::Mean`]).
//! - `csv`: `timeseries.csv`, one row per (policy, seed, bucket).
//! - `table`: the comparison table. `conclusion`: the plain-language conclusion.
//! - `markdown`: `summary.md`: description, conclusion, table, plots, parameters, definitions.
//! - `llm`: the tokens-and-money table, for scenarios with an LLM provider.
//! - `extra_load`: the hedges, extra-attempts and limits table, for stacks with those layers.
//! - `figures`: the report's plots (amplification, goodput, queue, latency; with concurrency
//!   limits, admitted concurrency and the limit against Little's law) built from the runs, with
//!   the model's capacity and offered-load curves as reference lines.
//! - `map`, `sweep`, `shards`: the renderings of maps and sweeps, and the shard files a map
//!   split over machines writes and merges.
//!
//! The drawing is [`crate::plot`]'s (line charts and heatmaps from plain data, to SVG and PNG),
//! which knows nothing of scenarios or runs: this module only hands it charts.
//!
//! Every writer is a pure function of the runs' results, so reports are byte-identical for the
//! same scenario and seeds whatever the thread count. Wall-clock figures never go into them.

pub(crate) mod conclusion;
pub(crate) mod csv;
pub(crate) mod extra_load;
pub(crate) mod figures;
pub(crate) mod fleet;
pub(crate) mod graph_svg;
pub mod grid;
pub(crate) mod hops;
pub(crate) mod json;
pub(crate) mod llm;
pub(crate) mod markdown;
pub(crate) mod shadow;
pub(crate) mod table;
mod terminal;
pub(crate) mod write;

pub use crate::plot::PlotError;
pub use terminal::terminal;
pub use write::write;

use crate::run::Runs;

/// The stems of the plots every run report has, in order (each written as SVG and PNG).
pub const FIGURES: [&str; 4] = ["amplification", "goodput", "queue", "latency"];

/// The files [`write()`] writes, in order.
pub fn file_names() -> Vec<String> {
    let mut v: Vec<String> = ["summary.md", "summary.json", "timeseries.csv"]
        .map(String::from)
        .to_vec();
    for stem in FIGURES {
        v.push(format!("{stem}.svg"));
        v.push(format!("{stem}.png"));
    }
    v
}

/// `summary.json` (see the `json` module docs for its shape).
pub fn summary_json(runs: &Runs<'_>) -> String {
    json::summary_json(runs.compiled, &runs.seeds, &runs.per_policy())
}

/// `timeseries.csv`: one row per (policy, seed, bucket).
pub fn timeseries_csv(runs: &Runs<'_>) -> String {
    csv::timeseries(runs.compiled, &runs.results)
}

/// `summary.md`: description, conclusion, table, plots, parameters and definitions.
pub fn summary_md(runs: &Runs<'_>) -> String {
    let figs = figures::figures(runs.compiled, &runs.seeds, &runs.results);
    markdown::summary_md(runs.compiled, &runs.seeds, &runs.per_policy(), &figs)
}

/// `graph.svg`: the call graph with each downstream's figures (a replicated one as one box with
/// a panel per replica), or `None` for a scenario with neither services nor replicas.
pub fn graph_svg(runs: &Runs<'_>) -> Option<String> {
    graph_svg::graph_svg(runs.compiled, &runs.per_policy())
}

/// The comparison table as text, one row per policy (`styled`: colour the best and worst value
/// of each column with ANSI escapes).
pub fn table(runs: &Runs<'_>, styled: bool) -> String {
    table::table(&runs.per_policy(), styled).to_string()
}

/// The plain-language conclusion: what happened, which policies recovered, the bottom line.
pub fn conclusion(runs: &Runs<'_>) -> String {
    conclusion::conclusion(runs.compiled, &runs.per_policy(), conclusion::Style::Plain)
}

/// One of the report's plots ([`FIGURES`]: `amplification`, `goodput`, `queue`, `latency`) as
/// PNG bytes.
pub fn figure_png(runs: &Runs<'_>, stem: &str) -> Result<Vec<u8>, PlotError> {
    crate::plot::png(&figure(runs, stem)?.chart)
}

/// One of the report's plots as SVG text.
pub fn figure_svg(runs: &Runs<'_>, stem: &str) -> Result<String, PlotError> {
    crate::plot::svg(&figure(runs, stem)?.chart)
}

fn figure(runs: &Runs<'_>, stem: &str) -> Result<figures::Figure, PlotError> {
    figures::figures(runs.compiled, &runs.seeds, &runs.results)
        .into_iter()
        .find(|f| f.stem == stem)
        .ok_or_else(|| {
            PlotError(format!(
                "no figure named {stem:?}: expected one of {}",
                FIGURES.join(", ")
            ))
        })
}

#[cfg(test)]
mod tests;
