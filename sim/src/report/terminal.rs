//! What `sim run` prints for one scenario: its name and description, the table and the
//! conclusion, wrapped to the table's width, and what breakers in shadow mode would have done.

use crate::run::Runs;
use crate::scenario::{escape, escape_lines};

/// The text `sim run` prints for `runs` (`styled`: ANSI colours in the table).
pub fn terminal(runs: &Runs<'_>, styled: bool) -> String {
    let c = runs.compiled;
    let policies = runs.per_policy();
    let mut out = String::new();
    let first = c
        .scenario
        .description
        .trim()
        .lines()
        .next()
        .unwrap_or("")
        .trim();
    let name = escape(&c.scenario.name);
    if first.is_empty() {
        out.push_str(&format!("{name}\n"));
    } else {
        out.push_str(&format!("{name}: {}\n", escape(first)));
    }
    let k = runs.seeds.len();
    if k > 1 {
        out.push_str(&format!(
            "means over {k} seeds from {}, ± the 95% interval of the mean\n",
            runs.seeds[0]
        ));
    }
    let table = super::table::table(&policies, styled);
    out.push_str(&format!("{table}\n"));
    if styled {
        out.push_str("green: best of its column, red: worst\n");
    }
    let text = super::conclusion::conclusion(c, &policies, super::conclusion::Style::Plain);
    // The terminal's width (at most 100 columns), else 100.
    let width = table.width().map_or(100, |w| usize::from(w).clamp(40, 100));
    out.push_str(&format!(
        "\n{}\n\n",
        escape_lines(&super::conclusion::wrap(&text, width))
    ));
    for line in super::shadow::lines(&policies)
        .into_iter()
        .chain(super::hops::lines(&policies))
    {
        out.push_str(&format!(
            "{}\n",
            escape_lines(&super::conclusion::wrap(&line, width))
        ));
    }
    out
}
