//! What a run leaves behind: the report folder's files, their content, the plots (SVG and PNG),
//! the terminal table and the conclusion. Content, not just existence.

use std::path::PathBuf;

use crate::compile::Compiled;
use crate::metrics::PolicySummary;
use crate::plot::{self, PALETTE, PNG_SCALE, WIDTH};
use crate::report::conclusion::{Style, conclusion};
use crate::report::figures::{self, Figure};
use crate::report::{self, csv, table};
use crate::run::{BatchOptions, RunResult, Runs, run_all};

const STORM: &str = include_str!("../../tests/data/storm.ron");

mod common {
    /// Parses, checks and compiles `text`, panicking with the error message if it is refused.
    pub fn compile(text: &str) -> crate::compile::Compiled {
        crate::load::load(text, "test.ron").unwrap_or_else(|e| panic!("{e}"))
    }
}

fn per_policy(c: &Compiled, results: &[RunResult]) -> Vec<(PolicySummary, Vec<PolicySummary>)> {
    runs(c, &[], results).per_policy()
}

/// A [`Runs`] over `results` (which it clones).
fn runs<'c>(c: &'c Compiled, seeds: &[u64], results: &[RunResult]) -> Runs<'c> {
    Runs {
        compiled: c,
        seeds: seeds.to_vec(),
        results: results.to_vec(),
    }
}

fn write_all(
    dir: &std::path::Path,
    c: &Compiled,
    seeds: &[u64],
    results: &[RunResult],
) -> std::io::Result<()> {
    let r = runs(c, seeds, results);
    let written = report::write(dir, &r)?;
    // The tests read the files from `dir`: move them up.
    for e in std::fs::read_dir(&written)? {
        let e = e?;
        std::fs::rename(e.path(), dir.join(e.file_name()))?;
    }
    std::fs::remove_dir(&written)
}

fn run(c: &Compiled, seeds: &[u64], jobs: usize) -> Vec<RunResult> {
    run_all(
        c,
        seeds,
        BatchOptions {
            jobs,
            progress: false,
        },
    )
    .unwrap()
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sim-reports-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn figure<'a>(figs: &'a [Figure], stem: &str) -> &'a Figure {
    figs.iter().find(|f| f.stem == stem).unwrap()
}

fn hex(c: plotters::style::RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The `<polyline>` elements of `svg` drawn in colour `color` with stroke width `width`.
fn polylines(svg: &str, color: &str, width: &str) -> usize {
    svg.lines()
        .filter(|l| {
            l.starts_with("<polyline")
                && l.contains(&format!("stroke=\"{color}\""))
                && l.contains(&format!("stroke-width=\"{width}\""))
        })
        .count()
}

#[test]
fn the_report_folder_has_every_file_and_the_markdown_shows_table_plots_and_parameters() {
    let c = common::compile(STORM);
    let results = run(&c, &[42], 1);
    let dir = temp("folder");
    write_all(&dir, &c, &[42], &results).unwrap();
    let names = report::file_names();
    assert_eq!(names.len(), 3 + 2 * report::FIGURES.len());
    for f in &names {
        let len = std::fs::metadata(dir.join(f)).unwrap().len();
        assert!(len > 500, "{f} has only {len} bytes");
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.starts_with("# test-storm\n\nSmall storm used by"),
        "{md}"
    );
    // Sections in reading order.
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("no {s:?} in\n{md}"));
    assert!(at("## Conclusion") < at("## Results"));
    assert!(at("## Results") < at("## Plots"));
    assert!(at("## Plots") < at("## Parameters"));
    assert!(at("## Parameters") < at("## Policies"));
    assert!(at("## Policies") < at("## Definitions"));
    // The table: header, alignment row, one row per policy with its verdict.
    assert!(md.contains(
        "| policy | amp peak | amp fault | amp after | success | goodput/s | p99 ms | wasted | recovery | verdict |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n"
    ));
    for (p, _) in per_policy(&c, &results) {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", p.name)))
            .unwrap_or_else(|| panic!("no row for {}", p.name));
        assert!(row.ends_with(&format!("| {} |", p.verdict)), "{row}");
        assert_eq!(row.matches(" | ").count(), 9, "{row}");
    }
    // Every plot embedded by a relative link, with its SVG and how to read it.
    for stem in report::FIGURES {
        assert!(
            md.contains(&format!("]({stem}.png)")),
            "{stem}.png not linked"
        );
        assert!(
            md.contains(&format!("[{stem}.svg]({stem}.svg)")),
            "{stem}.svg not linked"
        );
    }
    assert_eq!(
        md.matches("*How to read it:*").count(),
        report::FIGURES.len()
    );
    // Parameters: workload, downstreams, faults and policies in RON, and the capacity.
    assert!(md.contains("`OpenLoop(rate: 400.0"), "{md}");
    assert!(
        md.contains("- downstream `primary`: `Server(workers: 8"),
        "{md}"
    );
    assert!(
        md.contains("`Outage(downstream: \"primary\", from: \"10s\", until: \"14s\", mode: Hang)`")
    );
    assert!(
        md.contains("- **shared breaker, fallback**: `Fallback(["),
        "{md}"
    );
    assert!(
        md.contains("`primary`: 8 workers ÷ (") && md.contains("jobs/s"),
        "{md}"
    );
    assert!(md.contains("- **wasted** = "), "{md}");
    // The conclusion is the one the terminal prints, in Markdown.
    let policies = per_policy(&c, &results);
    assert!(md.contains(&conclusion(&c, &policies, Style::Markdown)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn csv_has_its_header_and_one_row_per_policy_seed_and_bucket() {
    let c = common::compile(STORM);
    for seeds in [vec![42u64], vec![1, 2, 3]] {
        let results = run(&c, &seeds, 2);
        let text = csv::timeseries(&c, &results);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(csv::HEADER));
        let rows: Vec<&str> = lines.collect();
        assert_eq!(rows.len(), c.stacks.len() * seeds.len() * c.buckets);
        let columns = csv::HEADER.split(',').count();
        for r in &rows {
            // Names with commas are quoted: count the separators outside quotes.
            let mut quoted = false;
            let mut fields = 1;
            for ch in r.chars() {
                match ch {
                    '"' => quoted = !quoted,
                    ',' if !quoted => fields += 1,
                    _ => {}
                }
            }
            assert_eq!(fields, columns, "{r}");
        }
        assert!(
            rows[0].starts_with(&format!("plain,{},0,0,1,", seeds[0])),
            "{}",
            rows[0]
        );
    }
}

#[test]
fn the_amplification_svg_has_title_axes_one_line_per_policy_capacity_and_fault_windows() {
    let c = common::compile(STORM);
    let results = run(&c, &[42], 1);
    let figs = figures::figures(&c, &[42], &results);
    assert_eq!(
        figs.iter().map(|f| f.stem).collect::<Vec<_>>(),
        report::FIGURES
    );
    let f = figure(&figs, "amplification");
    let svg = plot::svg(&f.chart).unwrap();
    assert!(svg.starts_with(&format!(
        "<svg width=\"{WIDTH}\" height=\"{}\"",
        plot::height(&f.chart)
    )));
    assert!(svg.contains(&format!("<title>{}</title>", f.chart.title)));
    assert!(svg.contains("\nLoad on the server: retries on top of the offered traffic\n"));
    assert!(svg.contains("\ntime (s)\n"));
    assert!(
        svg.contains("\nserver arrivals ÷ baseline (400 req/s)\n"),
        "{svg}"
    );
    assert!(svg.contains("font-family=\"DejaVu Sans, Verdana, sans-serif\""));
    // One line per policy in the plot (stroke 2) plus its legend sample (stroke 3), in palette
    // order, each with its name in the legend.
    for (i, p) in c.scenario.policies.iter().enumerate() {
        let color = hex(PALETTE[i]);
        assert_eq!(polylines(&svg, &color, "2"), 1, "{}", p.name);
        assert_eq!(polylines(&svg, &color, "3"), 1, "{}", p.name);
        assert!(svg.contains(&format!("\n{}\n", p.name)), "{}", p.name);
    }
    // Capacity (dashed: many short segments) and offered load, both in the legend.
    assert!(polylines(&svg, "#333333", "2") > 20);
    assert!(svg.contains("\ncapacity of the servers (workers ÷ mean service time, summed)\n"));
    assert!(svg.contains("\noffered load (first tries only)\n"));
    // The four fault windows shaded, plus the legend's swatch, and labelled.
    let shaded = svg
        .lines()
        .filter(|l| l.starts_with("<rect") && l.contains("fill=\"#999999\""))
        .count();
    assert_eq!(shaded, 4 + 1);
    for label in [
        "capacity −50% on primary",
        "outage (hang) on primary",
        "errors 30% on primary",
        "throttle 50%, Retry-After 2s on backup",
        "fault windows",
    ] {
        assert!(svg.contains(&format!("\n{label}\n")), "{label}");
    }
    // The first fault window starts at 5 s of 30: a sixth of the way along the x axis, whose
    // line is the first grey (#888888) polyline: left end, corner, right end.
    let window_x: Vec<i32> = svg
        .lines()
        .filter(|l| l.starts_with("<rect") && l.contains("fill=\"#999999\""))
        .filter_map(|l| l.split("x=\"").nth(1)?.split('"').next()?.parse().ok())
        .collect();
    let axis: Vec<i32> = svg
        .lines()
        .find(|l| l.starts_with("<polyline") && l.contains("stroke=\"#888888\""))
        .and_then(|l| l.split("points=\"").nth(1))
        .unwrap()
        .split(' ')
        .filter_map(|p| p.split(',').next()?.parse().ok())
        .collect();
    let (x0, x1) = (axis[1], axis[2]);
    let expect = x0 + (x1 - x0) / 6;
    assert!(
        window_x.iter().any(|x| (x - expect).abs() <= 1),
        "window at {window_x:?}, expected {expect} (axis {x0}..{x1})"
    );
}

#[test]
fn every_plot_has_its_title_units_and_lines() {
    let c = common::compile(STORM);
    let results = run(&c, &[42], 1);
    let figs = figures::figures(&c, &[42], &results);
    let expect = [
        ("goodput", "successful requests/s"),
        ("queue", "jobs waiting in the queue"),
        ("latency", "latency, first try to final answer (log scale)"),
    ];
    for (stem, y) in expect {
        let f = figure(&figs, stem);
        let svg = plot::svg(&f.chart).unwrap();
        assert!(svg.contains(&format!("\n{}\n", f.chart.title)), "{stem}");
        assert!(svg.contains(&format!("\n{y}\n")), "{stem}: no {y}");
        for (i, color) in PALETTE.iter().take(c.stacks.len()).enumerate() {
            assert_eq!(polylines(&svg, &hex(*color), "2"), 1, "{stem} policy {i}");
        }
        assert!(!f.how_to_read.is_empty());
    }
    // The latency plot runs from p50 to the deepest percentile every policy has data for.
    let lat = figure(&figs, "latency");
    let svg = plot::svg(&lat.chart).unwrap();
    for tick in ["\np50\n", "\np90\n", "\np99\n"] {
        assert!(svg.contains(tick), "{tick}");
    }
    assert!(svg.contains(" ms\n") || svg.contains(" s\n"));
    // The queue plot's dashed reference is the sum of the bounded queues: primary holds 200,
    // backup is unbounded, so there is none.
    assert!(figure(&figs, "queue").chart.references.is_empty());
}

#[test]
fn pngs_decode_to_twice_the_svg_size() {
    let c = common::compile(STORM);
    let results = run(&c, &[42], 1);
    for f in figures::figures(&c, &[42], &results) {
        let bytes = plot::png(&f.chart).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.width, WIDTH * PNG_SCALE, "{}", f.stem);
        assert_eq!(
            info.height,
            plot::height(&f.chart) * PNG_SCALE,
            "{}",
            f.stem
        );
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let px = &buf[..info.buffer_size()];
        // White background, and the first policy's colour somewhere (its line).
        assert_eq!(&px[..3], &[255, 255, 255]);
        let blue = [PALETTE[0].0, PALETTE[0].1, PALETTE[0].2];
        assert!(
            px.chunks_exact(3).filter(|p| *p == blue).count() > 100,
            "{}: the first policy's line is missing",
            f.stem
        );
        // Text was rasterised: dark grey pixels exist in the title's band.
        let row = info.width as usize * 3;
        let title_band = &px[row * 20..row * 50];
        assert!(
            title_band
                .chunks_exact(3)
                .any(|p| p[0] < 100 && p[1] < 100 && p[2] < 100),
            "{}: no title text",
            f.stem
        );
    }
}

#[test]
fn plots_and_files_are_byte_identical_for_the_same_inputs() {
    let c = common::compile(STORM);
    let seeds = [42, 43];
    let (one, two) = (temp("det-one"), temp("det-two"));
    write_all(&one, &c, &seeds, &run(&c, &seeds, 1)).unwrap();
    write_all(&two, &c, &seeds, &run(&c, &seeds, 2)).unwrap();
    for f in report::file_names() {
        let a = std::fs::read(one.join(&f)).unwrap();
        let b = std::fs::read(two.join(&f)).unwrap();
        assert!(a == b, "{f} differs between two identical runs");
    }
    // And different inputs give different plots.
    let other = temp("det-other");
    write_all(&other, &c, &[7], &run(&c, &[7], 1)).unwrap();
    assert_ne!(
        std::fs::read(one.join("goodput.png")).unwrap(),
        std::fs::read(other.join("goodput.png")).unwrap()
    );
    for d in [one, two, other] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn several_seeds_give_means_with_bands_and_intervals() {
    let c = common::compile(STORM);
    let seeds = [1, 2, 3];
    let results = run(&c, &seeds, 2);
    let figs = figures::figures(&c, &seeds, &results);
    for f in &figs {
        assert!(
            f.chart
                .subtitle
                .contains("mean of 3 seeds (1–3); band: 95% interval"),
            "{}",
            f.chart.subtitle
        );
        for s in &f.chart.series {
            assert!(!s.band.is_empty(), "{}: {} has no band", f.stem, s.label);
            for ((x, m), (bx, lo, hi)) in s.points.iter().zip(&s.band) {
                assert_eq!(x, bx);
                assert!(
                    *lo <= *m + 1e-9 && *m <= *hi + 1e-9,
                    "{}: {lo} {m} {hi}",
                    f.stem
                );
            }
        }
        let svg = plot::svg(&f.chart).unwrap();
        let bands = svg
            .lines()
            .filter(|l| l.starts_with("<polygon") && l.contains("opacity=\"0.14\""))
            .count();
        assert_eq!(bands, c.stacks.len(), "{}", f.stem);
    }
    // The mean line is the mean of the seeds' values: goodput in bucket 2 of the first policy.
    let good = figure(&figs, "goodput");
    let per_seed: Vec<f64> = results
        .iter()
        .filter(|r| r.policy == 0)
        .map(|r| r.output.buckets[2].successes as f64)
        .collect();
    let mean = per_seed.iter().sum::<f64>() / 3.0;
    assert!((good.chart.series[0].points[2].1 - mean).abs() < 1e-9);
    assert_eq!(good.chart.series[0].points[2].0, 2.5);
    // Tables show `mean ±half-width`.
    let policies = per_policy(&c, &results);
    let md = table::markdown(&policies);
    assert!(md.lines().skip(2).all(|l| l.contains(" ±")), "{md}");
    let one_seed = per_policy(&c, &run(&c, &[1], 1));
    assert!(!table::markdown(&one_seed).contains('±'));
}

#[test]
fn the_terminal_table_is_plain_unless_styled_and_marks_best_and_worst() {
    let c = common::compile(STORM);
    let results = run(&c, &[42], 1);
    let policies = per_policy(&c, &results);
    let plain = table::table(&policies, false).to_string();
    assert!(
        !plain.contains('\u{1b}'),
        "escape codes in a plain table:\n{plain}"
    );
    let lines: Vec<&str> = plain.lines().collect();
    assert!(lines[1].contains("policy") && lines[1].contains("goodput/s"));
    for (p, _) in &policies {
        let row = lines
            .iter()
            .find(|l| l.contains(&format!("│ {} ", p.name)))
            .unwrap_or_else(|| panic!("no row for {}", p.name));
        assert!(row.contains(&format!("{:.1}", p.goodput_per_s)), "{row}");
    }
    let styled = table::table(&policies, true).to_string();
    assert!(styled.contains("\u{1b}["), "no colour when styled");
    // The best goodput is green and bold, the worst red.
    let best = policies
        .iter()
        .max_by(|a, b| a.0.goodput_per_s.total_cmp(&b.0.goodput_per_s))
        .unwrap();
    let worst = policies
        .iter()
        .min_by(|a, b| a.0.goodput_per_s.total_cmp(&b.0.goodput_per_s))
        .unwrap();
    let cell = |p: &PolicySummary| format!("{:.1}", p.goodput_per_s);
    let rows = table::rows(&policies);
    let goodput_col = table::header()
        .iter()
        .position(|h| *h == "goodput/s")
        .unwrap();
    for row in &rows {
        let g = &row[goodput_col];
        assert_eq!(g.best, g.text == cell(&best.0), "{row:?}");
        assert_eq!(g.worst, g.text == cell(&worst.0), "{row:?}");
    }
    // On the terminal: some green (and bold) span of the best policy's row holds its goodput.
    let best_line = styled.lines().find(|l| l.contains(&best.0.name)).unwrap();
    let green_spans: Vec<&str> = best_line
        .split("\u{1b}[38;5;10m")
        .skip(1)
        .map(|s| s.split("\u{1b}[0m").next().unwrap())
        .collect();
    assert!(
        green_spans
            .iter()
            .any(|s| s.contains("\u{1b}[1m") && s.contains(&cell(&best.0))),
        "{best_line:?}"
    );
}

/// A policy summary taken from a real run, renamed and given the figures a test needs.
fn crafted(
    template: &PolicySummary,
    name: &str,
    verdict: &str,
    recovery: Option<f64>,
    goodput: f64,
    amp_fault: f64,
) -> (PolicySummary, Vec<PolicySummary>) {
    let mut p = template.clone();
    p.name = name.into();
    p.verdict = match verdict {
        "stuck" => crate::metrics::Verdict::Stuck,
        "recovered" => crate::metrics::Verdict::Recovered,
        _ => crate::metrics::Verdict::NoFault,
    };
    p.recovery_s = recovery;
    p.goodput_per_s = goodput;
    p.amplification.during_fault = Some(amp_fault);
    p.amplification.after_fault = Some(if verdict == "stuck" { 5.0 } else { 1.0 });
    p.local_rejections = 0;
    (p.clone(), vec![p])
}

#[test]
fn the_conclusion_names_the_stuck_policies_and_picks_the_best_that_recovered() {
    let c = common::compile(STORM);
    let results = run(&c, &[42], 1);
    let t = &results[0].output.summary;
    let policies = vec![
        crafted(t, "alpha", "recovered", Some(4.0), 300.0, 1.2),
        crafted(t, "bravo", "stuck", None, 900.0, 6.5),
        crafted(t, "charlie", "recovered", Some(2.0), 350.0, 0.9),
        crafted(t, "delta", "stuck", None, 50.0, 3.0),
    ];
    let text = conclusion(&c, &policies, Style::Plain);
    assert!(
        text.contains("2 of 4 policies recovered after the faults ended at 16 s: \"charlie\" (in 2 s) and \"alpha\" (in 4 s)."),
        "{text}"
    );
    assert!(
        text.contains("\"bravo\" and \"delta\" were stuck"),
        "{text}"
    );
    assert!(
        text.contains("\"charlie\" kept amplification lowest (0.90x server calls per request) and \"bravo\" pushed it highest (6.50x)"),
        "{text}"
    );
    // The most goodput overall went to a stuck policy; the bottom line picks among the policies
    // that recovered.
    assert!(
        text.contains("\"bravo\" delivered the most goodput (900.0 req/s"),
        "{text}"
    );
    assert!(
        text.contains("Bottom line: \"charlie\" kept the downstream alive best in this scenario: it recovered 2 s after the fault"),
        "{text}"
    );
    assert!(text.contains("Avoid \"bravo\" and \"delta\""), "{text}");
    // Stuck policies whose load after the fault (5x) exceeds the capacity are said to be kept
    // down by their own retries.
    assert!(
        text.contains("their own retries kept it overloaded"),
        "{text}"
    );
    // Markdown sets names in bold.
    let md = conclusion(&c, &policies, Style::Markdown);
    assert!(md.contains("**bravo** and **delta** were stuck"), "{md}");

    // Nothing recovered.
    let none = vec![
        crafted(t, "alpha", "stuck", None, 10.0, 3.0),
        crafted(t, "bravo", "stuck", None, 20.0, 4.0),
    ];
    let text = conclusion(&c, &none, Style::Plain);
    assert!(text.contains("Every policy was stuck"), "{text}");
    assert!(
        text.contains("Bottom line: no policy kept the downstream alive through this fault; \"bravo\" lost the least goodput."),
        "{text}"
    );

    // Ties are named together.
    let tie = vec![
        crafted(t, "alpha", "recovered", Some(1.0), 100.0, 1.0),
        crafted(t, "bravo", "stuck", None, 20.0, 4.0),
        crafted(t, "charlie", "stuck", None, 20.0, 4.0),
    ];
    let text = conclusion(&c, &tie, Style::Plain);
    assert!(
        text.contains("\"bravo\" and \"charlie\" delivered the least (20.0 req/s)"),
        "{text}"
    );
    assert!(
        text.contains("\"bravo\" and \"charlie\" pushed it highest (4.00x)"),
        "{text}"
    );
}

#[test]
fn the_conclusion_of_a_scenario_without_faults_says_so() {
    let text = STORM.split("faults: [").next().unwrap().to_string()
        + "policies: ["
        + STORM.split("policies: [").nth(1).unwrap();
    let c = common::compile(&text);
    let results = run(&c, &[42], 1);
    let policies = per_policy(&c, &results);
    let out = conclusion(&c, &policies, Style::Plain);
    assert!(out.starts_with("This scenario has no fault"), "{out}");
    assert!(out.contains("Over the run,"), "{out}");
    assert!(out.contains("Bottom line: \""), "{out}");
    assert!(
        !out.contains("stuck") && !out.contains("recovered"),
        "{out}"
    );
    // No fault windows in the plots.
    for f in figures::figures(&c, &[42], &results) {
        assert!(f.chart.windows.is_empty());
        let svg = plot::svg(&f.chart).unwrap();
        assert!(!svg.contains("fill=\"#999999\""), "{}", f.stem);
    }
}
