//! Sizes in backend pixels, and where the legend's entries go (the same in the SVG and the PNG).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, FONT_FAMILY, RefStyle, WIDTH, series_color};

/// Sizes in backend pixels for a scale factor.
pub(super) struct Layout {
    pub(super) s: f64,
    pub(super) width: f64,
    pub(super) margin: f64,
    pub(super) header: f64,
    pub(super) plot_block: f64,
    pub(super) title: f64,
    pub(super) subtitle: f64,
    pub(super) tick: f64,
    pub(super) axis_title: f64,
    pub(super) legend: f64,
    pub(super) window_label: f64,
    pub(super) legend_row: f64,
    pub(super) sample: f64,
}

impl Layout {
    pub(super) fn new(s: f64) -> Self {
        Layout {
            s,
            width: f64::from(WIDTH) * s,
            margin: 14.0 * s,
            header: 70.0 * s,
            plot_block: 380.0 * s,
            title: 23.0 * s,
            subtitle: 16.5 * s,
            tick: 16.5 * s,
            axis_title: 17.5 * s,
            legend: 16.5 * s,
            window_label: 15.5 * s,
            legend_row: 22.0 * s,
            sample: 30.0 * s,
        }
    }

    pub(super) fn legend_height(&self, rows: usize) -> f64 {
        if rows == 0 {
            self.margin
        } else {
            rows as f64 * self.legend_row + 2.0 * self.margin
        }
    }

    pub(super) fn px(&self, v: f64) -> i32 {
        (v * self.s).round() as i32
    }

    pub(super) fn stroke(&self, v: f64) -> u32 {
        (v * self.s).round().max(1.0) as u32
    }

    pub(super) fn font(&self, size: f64, color: RGBColor) -> TextStyle<'static> {
        TextStyle {
            font: FontDesc::new(FontFamily::Name(FONT_FAMILY), size, FontStyle::Normal),
            color: color.to_backend_color(),
            pos: Pos::new(HPos::Left, VPos::Top),
        }
    }
}

/// One legend entry.
pub(super) enum Key<'a> {
    Line(&'a str, RGBColor, bool),
    Reference(&'a str, RefStyle),
    Window(&'a str),
}

impl Key<'_> {
    pub(super) fn label(&self) -> &str {
        match self {
            Key::Line(l, ..) | Key::Reference(l, _) | Key::Window(l) => l,
        }
    }
}

pub(super) fn keys(chart: &Chart) -> Vec<Key<'_>> {
    let mut k: Vec<Key<'_>> = chart
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (c, dashed) = series_color(i);
            Key::Line(&s.label, c, dashed)
        })
        .collect();
    k.extend(
        chart
            .references
            .iter()
            .filter(|r| !r.label.is_empty())
            .map(|r| Key::Reference(&r.label, r.style)),
    );
    if !chart.windows.is_empty() {
        k.push(Key::Window(if chart.windows.len() > 1 {
            "fault windows"
        } else {
            "fault window"
        }));
    }
    k
}

/// Width of `text` in the vendored font at plotters size `size` (the same for every backend, so
/// the legend is laid out identically in the SVG and the PNG).
pub(crate) fn text_width(text: &str, size: f64) -> f64 {
    FontDesc::new(FontFamily::Name(FONT_FAMILY), size, FontStyle::Normal)
        .box_size(text)
        .map_or(text.chars().count() as f64 * size * 0.6, |(w, _)| {
            f64::from(w)
        })
}

/// Where each legend entry goes: `(x, row)` in backend pixels and row index, and the number of
/// rows. Series fill a grid of equal columns (so names line up); reference lines and the window
/// key follow on new rows, each as wide as it needs.
pub(super) fn legend_layout(chart: &Chart, l: &Layout) -> (Vec<(f64, usize)>, usize) {
    let keys = keys(chart);
    let avail = l.width - 2.0 * l.margin;
    let entry = |k: &Key<'_>| l.sample + 8.0 * l.s + text_width(k.label(), l.legend) + 24.0 * l.s;
    let lines: Vec<&Key<'_>> = keys.iter().filter(|k| matches!(k, Key::Line(..))).collect();
    let widest = lines.iter().map(|k| entry(k)).fold(0.0, f64::max);
    let cols = if lines.is_empty() {
        1
    } else {
        ((avail / widest).floor() as usize).clamp(1, lines.len())
    };
    let col_w = avail / cols as f64;
    let mut out = Vec::with_capacity(keys.len());
    for i in 0..lines.len() {
        out.push((l.margin + (i % cols) as f64 * col_w, i / cols));
    }
    let mut row = lines.len().div_ceil(cols);
    let mut x = l.margin;
    let mut used = false;
    for k in keys.iter().filter(|k| !matches!(k, Key::Line(..))) {
        let w = entry(k);
        if used && x + w > l.margin + avail {
            row += 1;
            x = l.margin;
        }
        out.push((x, row));
        x += w;
        used = true;
    }
    let rows = row + usize::from(used);
    (out, rows)
}

pub(super) fn legend_rows(chart: &Chart, l: &Layout) -> usize {
    legend_layout(chart, l).1
}
