//! A picture of a call graph (`graph.svg`): the edge and each downstream in columns by depth,
//! an arrow for each call, and in each box every policy's figures for that downstream
//! (arrivals per edge request, goodput and verdict; see [`crate::metrics::hops`]).
//!
//! A replicated downstream is one box, as calls see it (they go to the group, through its
//! balancer): its name, replica count and balancer, every policy's figures over all its replicas
//! (arrivals and goodput summed, the worst verdict), then a panel per replica with that
//! replica's figures, shaded by its worst verdict, so a bad replica stands out. A scenario with
//! replicas but no services has a picture too, from the downstreams' totals: no verdicts there,
//! each downstream's error share instead (shaded as bad from 5%). Past
//! [`MAX_LISTED`] replicas the rest are counted, not drawn (every replica's figures are in
//! `summary.json`).

use std::fmt::Write;

use crate::client::NodeKind;
use crate::compile::Compiled;
use crate::metrics::PolicySummary;
use crate::metrics::Verdict;
use crate::metrics::hops::HopSummary;

const BOX_W: f64 = 360.0;
const COL_GAP: f64 = 90.0;
const ROW_GAP: f64 = 24.0;
const LINE: f64 = 16.0;
const PAD: f64 = 20.0;

/// Most replicas of one downstream drawn with their own panel.
pub const MAX_LISTED: usize = 16;

/// XML-escapes `s`.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn colour(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Stuck) => "#f4c7c3",
        Some(Verdict::Inconclusive) => "#fce8b2",
        Some(Verdict::Recovered) => "#d9ead3",
        _ => "#eef3fb",
    }
}

/// One box: the downstreams it stands for (one, or a group's replicas), its column, its lines
/// (text, bold) and its replica panels (first line, line count, fill).
struct Node {
    members: Vec<usize>,
    col: usize,
    lines: Vec<(String, bool)>,
    panels: Vec<(usize, usize, &'static str)>,
    fill: &'static str,
}

impl Node {
    fn height(&self) -> f64 {
        LINE * self.lines.len() as f64 + 10.0
    }
}

/// One downstream's figures under one policy: from its hop figures in a call graph, or, in a
/// scenario with replicas but no services, from its totals (then no verdict, its error share).
#[derive(Clone, Copy, Debug)]
struct Row {
    amplification: f64,
    goodput_per_s: f64,
    verdict: Option<Verdict>,
    errors: u64,
    arrivals: u64,
}

impl Row {
    fn of_hop(h: &HopSummary) -> Row {
        Row {
            amplification: h.amplification,
            goodput_per_s: h.goodput_per_s,
            verdict: Some(h.verdict),
            errors: 0,
            arrivals: h.arrivals,
        }
    }
}

/// Rows judged by their error share (no verdicts): this much or more is shaded as bad.
const BAD_ERROR_SHARE: f64 = 0.05;

/// The fill for `rows` (one downstream, or a group's replicas, under every policy).
fn fill_of(rows: &[Row]) -> &'static str {
    if rows.iter().all(|r| r.verdict.is_some()) {
        return colour(rows.iter().filter_map(|r| r.verdict).max());
    }
    let errors: u64 = rows.iter().map(|r| r.errors).sum();
    let arrivals: u64 = rows.iter().map(|r| r.arrivals).sum();
    if arrivals > 0 && errors as f64 >= BAD_ERROR_SHARE * arrivals as f64 {
        colour(Some(Verdict::Stuck))
    } else {
        colour(Some(Verdict::Recovered))
    }
}

/// A policy's figures line for `rows` (one downstream, or a group's replicas summed).
fn figures(name: &str, rows: &[Row], prefix: &str) -> String {
    let amp: f64 = rows.iter().map(|h| h.amplification).sum();
    let goodput: f64 = rows.iter().map(|h| h.goodput_per_s).sum();
    let tail = if rows.iter().all(|r| r.verdict.is_some()) {
        rows.iter()
            .filter_map(|h| h.verdict)
            .max()
            .map_or("", |v| v.name())
            .to_string()
    } else {
        let errors: u64 = rows.iter().map(|r| r.errors).sum();
        let arrivals: u64 = rows.iter().map(|r| r.arrivals).sum();
        format!(
            "{:.1}% errors",
            100.0 * errors as f64 / arrivals.max(1) as f64
        )
    };
    format!(
        "{}: {prefix}{amp:.2}× · {goodput:.0}/s ok · {tail}",
        esc(name)
    )
}

/// Every policy's rows, by downstream, and each downstream's name and depth (fewest hops from
/// the edge).
type Table = (Vec<Vec<Row>>, Vec<(String, Option<u32>)>);

/// The figures to draw: the hop figures of a call graph, or, with replicas but no services, the
/// downstreams' totals; `None` for a scenario with neither.
fn table(c: &Compiled, policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<Table> {
    let first = &policies.first()?.0;
    if let Some(hops) = &first.hops {
        let rows = policies
            .iter()
            .map(|(p, _)| p.hops.iter().flatten().map(Row::of_hop).collect::<Vec<_>>())
            .collect();
        let names = hops.iter().map(|h| (h.name.clone(), h.depth)).collect();
        return Some((rows, names));
    }
    if c.groups.is_empty() {
        return None;
    }
    // No services: what the edge calls is at depth 1 (a group's replicas with it).
    let n = c.scenario.downstreams.len();
    let mut depth = vec![None; n];
    for stack in &c.stacks {
        for node in &stack.nodes {
            if let NodeKind::Call { ds, .. } | NodeKind::Llm { ds, .. } = node.kind {
                let ds = usize::from(ds);
                let g = c.group_of.get(ds).copied().unwrap_or(u16::MAX);
                match c.groups.get(usize::from(g)) {
                    Some(group) => {
                        for &m in &group.members {
                            depth[usize::from(m)] = Some(1);
                        }
                    }
                    None => depth[ds] = Some(1),
                }
            }
        }
    }
    let horizon_s = c.scenario.horizon.as_nanos() as f64 / 1e9;
    let rows = policies
        .iter()
        .map(|(p, _)| {
            p.downstreams
                .iter()
                .map(|d| Row {
                    amplification: d.arrivals as f64 / p.first_tries.max(1) as f64,
                    goodput_per_s: d.ok as f64 / horizon_s.max(1e-9),
                    verdict: None,
                    errors: d.errors,
                    arrivals: d.arrivals,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let names = first
        .downstreams
        .iter()
        .zip(depth)
        .map(|(d, depth)| (d.name.clone(), depth))
        .collect();
    Some((rows, names))
}

/// The SVG, or `None` for a scenario with neither services nor replicas.
pub fn graph_svg(c: &Compiled, policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    let (rows, first) = table(c, policies)?;
    let n = first.len();
    let judged = rows.iter().flatten().all(|r| r.verdict.is_some());
    let hop = |k: usize, i: usize| rows.get(k).and_then(|r| r.get(i)).copied();
    let fill = |members: &[usize]| {
        let all: Vec<Row> = (0..policies.len())
            .flat_map(|k| members.iter().filter_map(move |&i| hop(k, i)))
            .collect();
        fill_of(&all)
    };
    // Column of each downstream: its depth (unreachable ones in a last column); the edge is 0.
    let max_depth = first.iter().filter_map(|h| h.1).max().unwrap_or(1) as usize;
    let col = |i: usize| first[i].1.map_or(max_depth + 1, |d| d as usize);
    // A last column only if some downstream is unreachable.
    let cols = (0..n).map(col).max().unwrap_or(0) + 1;
    // The boxes: one per group, one per other downstream, in downstream order.
    let mut node_of = vec![usize::MAX; n];
    let mut nodes: Vec<Node> = Vec::new();
    for i in 0..n {
        if node_of[i] != usize::MAX {
            continue;
        }
        let group = c
            .group_of
            .get(i)
            .and_then(|&g| c.groups.get(usize::from(g)));
        let depth = first[i]
            .1
            .map_or("unreachable".to_string(), |d| format!("depth {d}"));
        let node = match group {
            None => {
                let mut lines = vec![(format!("{} ({depth})", esc(&first[i].0)), true)];
                for (k, (p, _)) in policies.iter().enumerate() {
                    if let Some(h) = hop(k, i) {
                        lines.push((figures(&p.name, &[h], ""), false));
                    }
                }
                Node {
                    members: vec![i],
                    col: col(i),
                    lines,
                    panels: Vec::new(),
                    fill: fill(&[i]),
                }
            }
            Some(g) => {
                let members: Vec<usize> = g.members.iter().map(|&m| usize::from(m)).collect();
                let mut lines = vec![(
                    format!(
                        "{} × {} replicas, {:?} ({depth})",
                        esc(&g.name),
                        members.len(),
                        g.balancer
                    ),
                    true,
                )];
                for (k, (p, _)) in policies.iter().enumerate() {
                    let hs: Vec<Row> = members.iter().filter_map(|&m| hop(k, m)).collect();
                    lines.push((figures(&p.name, &hs, "all "), false));
                }
                let mut panels = Vec::new();
                for &m in members.iter().take(MAX_LISTED) {
                    let start = lines.len();
                    lines.push((esc(&first[m].0), true));
                    for (k, (p, _)) in policies.iter().enumerate() {
                        if let Some(h) = hop(k, m) {
                            lines.push((figures(&p.name, &[h], ""), false));
                        }
                    }
                    panels.push((start, lines.len() - start, fill(&[m])));
                }
                if members.len() > MAX_LISTED {
                    lines.push((
                        format!(
                            "… and {} more replicas (figures in summary.json)",
                            members.len() - MAX_LISTED
                        ),
                        false,
                    ));
                }
                Node {
                    fill: fill(&members),
                    col: col(i),
                    members,
                    lines,
                    panels,
                }
            }
        };
        for &m in &node.members {
            if let Some(x) = node_of.get_mut(m) {
                *x = nodes.len();
            }
        }
        nodes.push(node);
    }
    // Places: each column stacks its boxes; the edge's box is the first of column 0.
    let edge_lines = 1 + policies.len();
    let edge_h = LINE * edge_lines as f64 + 10.0;
    let top = PAD + 30.0;
    let mut bottom = vec![top; cols];
    bottom[0] = top + edge_h + ROW_GAP;
    let mut at = vec![(0.0, 0.0); nodes.len()];
    for (k, node) in nodes.iter().enumerate() {
        at[k] = (PAD + node.col as f64 * (BOX_W + COL_GAP), bottom[node.col]);
        bottom[node.col] += node.height() + ROW_GAP;
    }
    let width = PAD + cols as f64 * (BOX_W + COL_GAP) - COL_GAP + PAD;
    let height = bottom.iter().copied().fold(top, f64::max) - ROW_GAP + PAD;
    // Calls: edge → what any policy's own stack calls; a service → what its handler calls; a
    // call to a group goes to its box, as the balancer does.
    let mut arrows: Vec<(Option<usize>, usize)> = Vec::new();
    for stack in &c.stacks {
        let first_handler = stack.handlers.iter().flatten().copied().min().unwrap_or(0);
        for (i, node) in stack.nodes.iter().enumerate() {
            let NodeKind::Call { ds, .. } = node.kind else {
                continue;
            };
            // The root owning this node: walk up to the node without a parent.
            let mut r = i;
            while stack.nodes[r].parent != crate::client::stack::NONE {
                r = usize::from(stack.nodes[r].parent);
            }
            let from = if r < usize::from(first_handler) {
                None
            } else {
                stack
                    .handlers
                    .iter()
                    .position(|h| h.contains(&(r as u16)))
                    .and_then(|d| node_of.get(d).copied())
            };
            let Some(&to) = node_of.get(usize::from(ds)) else {
                continue;
            };
            let a = (from, to);
            if to != usize::MAX && !arrows.contains(&a) {
                arrows.push(a);
            }
        }
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, sans-serif" font-size="12">"##
    );
    let _ = writeln!(
        s,
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs><rect width="100%" height="100%" fill="white"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{PAD}" y="{:.0}" font-size="15" font-weight="bold">Call graph of “{}”: arrivals per edge request, goodput and {}, per policy (mean over seeds)</text>"##,
        PAD + 10.0,
        esc(&c.scenario.name),
        if judged { "verdict" } else { "error share" }
    );
    // Arrows from the right side of a box to the left side of the next, at its header.
    for (from, to) in &arrows {
        let (fx, fy) = match from {
            None => (PAD + BOX_W, top + edge_h / 2.0),
            Some(f) => (at[*f].0 + BOX_W, at[*f].1 + LINE),
        };
        let (tx, ty) = (at[*to].0, at[*to].1 + LINE);
        let _ = writeln!(
            s,
            r##"<line x1="{fx:.1}" y1="{fy:.1}" x2="{tx:.1}" y2="{ty:.1}" stroke="#555" stroke-width="1.5" marker-end="url(#arrow)"/>"##
        );
    }
    // The edge.
    let _ = writeln!(
        s,
        r##"<rect x="{PAD:.1}" y="{top:.1}" width="{BOX_W}" height="{edge_h:.1}" rx="6" fill="#eeeeee" stroke="#333"/><text x="{:.1}" y="{:.1}" font-weight="bold">edge (the workload)</text>"##,
        PAD + 8.0,
        top + LINE + 2.0
    );
    for (k, (p, _)) in policies.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}">{}: success {:.1}%, {}</text>"##,
            PAD + 8.0,
            top + LINE * (k as f64 + 2.0) + 2.0,
            esc(&p.name),
            p.success_rate * 100.0,
            p.verdict.name()
        );
    }
    for (node, &(bx, by)) in nodes.iter().zip(&at) {
        let _ = writeln!(
            s,
            r##"<rect x="{bx:.1}" y="{by:.1}" width="{BOX_W}" height="{:.1}" rx="6" fill="{}" stroke="#333"/>"##,
            node.height(),
            node.fill
        );
        for &(start, len, fill) in &node.panels {
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="4" fill="{fill}" stroke="#888"/>"##,
                bx + 4.0,
                by + LINE * start as f64 + 6.0,
                BOX_W - 8.0,
                LINE * len as f64
            );
        }
        for (j, (text, bold)) in node.lines.iter().enumerate() {
            let weight = if *bold { r#" font-weight="bold""# } else { "" };
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}"{weight}>{text}</text>"##,
                bx + 8.0,
                by + LINE * (j as f64 + 1.0) + 2.0,
            );
        }
    }
    s.push_str("</svg>\n");
    Some(s)
}
