//! A picture of a call graph (`graph.svg`): the edge and each downstream in columns by depth,
//! an arrow for each call, and in each box every policy's figures for that downstream
//! (arrivals per edge request and verdict; see [`crate::metrics::hops`]).

use std::fmt::Write;

use crate::client::NodeKind;
use crate::compile::Compiled;
use crate::metrics::PolicySummary;

const BOX_W: f64 = 300.0;
const COL_GAP: f64 = 90.0;
const ROW_GAP: f64 = 24.0;
const LINE: f64 = 16.0;
const PAD: f64 = 20.0;

/// XML-escapes `s`.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG, or `None` for a scenario without services.
pub fn graph_svg(c: &Compiled, policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    let first = policies.first()?.0.hops.as_ref()?;
    let n = first.len();
    // Column of each downstream: its depth (unreachable ones in a last column); the edge is 0.
    let max_depth = first.iter().filter_map(|h| h.depth).max().unwrap_or(1) as usize;
    let col = |i: usize| first[i].depth.map_or(max_depth + 1, |d| d as usize);
    let cols = max_depth + 2;
    let mut rows = vec![0usize; cols];
    let mut pos = vec![(0usize, 0usize); n];
    for (i, p) in pos.iter_mut().enumerate() {
        let k = col(i);
        *p = (k, rows[k]);
        rows[k] += 1;
    }
    let box_h = 2.0 * LINE + LINE * policies.len() as f64 + 8.0;
    let x = |k: usize| PAD + k as f64 * (BOX_W + COL_GAP);
    let y = |r: usize| PAD + 30.0 + r as f64 * (box_h + ROW_GAP);
    let width = x(cols) - COL_GAP + PAD;
    let height = y(rows.iter().copied().max().unwrap_or(1).max(1)) + PAD;
    // Calls: edge → what any policy's own stack calls; service → what its handler calls.
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
                stack.handlers.iter().position(|h| h.contains(&(r as u16)))
            };
            let a = (from, usize::from(ds));
            if !arrows.contains(&a) {
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
        r##"<text x="{PAD}" y="{:.0}" font-size="15" font-weight="bold">Call graph of “{}”: arrivals per edge request and verdict, per policy (mean over seeds)</text>"##,
        PAD + 10.0,
        esc(&c.scenario.name)
    );
    let edge_y = y(0);
    let center = |k: usize, r: usize| (x(k), y(r) + box_h / 2.0);
    for (from, to) in &arrows {
        let (fx, fy) = match from {
            None => (x(0) + BOX_W, edge_y + box_h / 2.0),
            Some(f) => {
                let (k, r) = pos[*f];
                (x(k) + BOX_W, y(r) + box_h / 2.0)
            }
        };
        let (k, r) = pos[*to];
        let (tx, ty) = center(k, r);
        let _ = writeln!(
            s,
            r##"<line x1="{fx:.1}" y1="{fy:.1}" x2="{tx:.1}" y2="{ty:.1}" stroke="#555" stroke-width="1.5" marker-end="url(#arrow)"/>"##
        );
    }
    let colour = |v: &str| match v {
        "stuck" => "#f4c7c3",
        "inconclusive" => "#fce8b2",
        "recovered" => "#d9ead3",
        _ => "#eef3fb",
    };
    // The edge.
    let _ = writeln!(
        s,
        r##"<rect x="{:.1}" y="{edge_y:.1}" width="{BOX_W}" height="{box_h:.1}" rx="6" fill="#eeeeee" stroke="#333"/><text x="{:.1}" y="{:.1}" font-weight="bold">edge (the workload)</text>"##,
        x(0),
        x(0) + 8.0,
        edge_y + LINE + 2.0
    );
    for (k, (p, _)) in policies.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}">{}: success {:.1}%, {}</text>"##,
            x(0) + 8.0,
            edge_y + LINE * (k as f64 + 2.0) + 2.0,
            esc(&p.name),
            p.success_rate * 100.0,
            p.verdict.name()
        );
    }
    for i in 0..n {
        let (k, r) = pos[i];
        let (bx, by) = (x(k), y(r));
        let worst = policies
            .iter()
            .filter_map(|(p, _)| p.hops.as_ref()?.get(i).map(|h| h.verdict))
            .max()
            .map_or("no-fault", |v| v.name());
        let depth = first[i]
            .depth
            .map_or("unreachable".to_string(), |d| format!("depth {d}"));
        let _ = writeln!(
            s,
            r##"<rect x="{bx:.1}" y="{by:.1}" width="{BOX_W}" height="{box_h:.1}" rx="6" fill="{}" stroke="#333"/><text x="{:.1}" y="{:.1}" font-weight="bold">{} ({depth})</text>"##,
            colour(worst),
            bx + 8.0,
            by + LINE + 2.0,
            esc(&first[i].name)
        );
        for (j, (p, _)) in policies.iter().enumerate() {
            let Some(h) = p.hops.as_ref().and_then(|v| v.get(i)) else {
                continue;
            };
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}">{}: {:.2}× · {:.0}/s ok · {}</text>"##,
                bx + 8.0,
                by + LINE * (j as f64 + 2.0) + 2.0,
                esc(&p.name),
                h.amplification,
                h.goodput_per_s,
                h.verdict.name()
            );
        }
    }
    s.push_str("</svg>\n");
    Some(s)
}
