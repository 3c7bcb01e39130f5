//! Line charts as SVG and PNG from plain data: the drawing code behind every plot `sim` writes,
//! reusable for any figure made of lines over a numeric x axis.
//!
//! A [`Chart`] is plain data: [`Series`] (one line each, with an optional band such as a 95%
//! interval), [`Window`]s shaded behind the lines (fault windows), dashed or dotted
//! [`Reference`] lines (capacity, offered load), and two [`Axis`] descriptions (label with its
//! unit, linear or log scale, how ticks are written). [`svg()`] and [`png()`] draw it; [`render()`]
//! writes `STEM.svg` and `STEM.png`.
//!
//! ```
//! use sim::report::plot::{Axis, Chart, Reference, Series, TickFormat, Window};
//!
//! let chart = Chart {
//!     title: "Load on the server vs failure probability".into(),
//!     subtitle: "mean of 10 seeds; band: 95% interval".into(),
//!     x: Axis::linear("failure probability", TickFormat::Percent),
//!     y: Axis::linear("server arrivals ÷ offered load", TickFormat::Times),
//!     series: vec![Series::line("naive retries", vec![(0.0, 1.0), (0.5, 2.0), (0.9, 3.8)])
//!         .with_band(vec![(0.0, 0.9, 1.1), (0.5, 1.8, 2.2), (0.9, 3.5, 4.1)])],
//!     windows: vec![Window { from: 0.4, until: 0.6, label: "overload".into() }],
//!     references: vec![Reference::dashed("capacity", vec![(0.0, 1.5), (0.9, 1.5)])],
//! };
//! let svg = sim::report::plot::svg(&chart).unwrap();
//! assert!(svg.contains("naive retries"));
//! let png = sim::report::plot::png(&chart).unwrap();
//! assert_eq!(&png[1..4], b"PNG");
//! ```
//!
//! Design choices, so every plot reads the same way:
//! - Colours follow the Okabe–Ito palette (safe for the common colour-vision deficiencies), in
//!   [`PALETTE`] order; past seven series the colours repeat with dashed lines. Reference lines
//!   are dark grey, dashed or dotted; windows are light grey.
//! - The legend sits below the plot, never over the data.
//! - The layout is in CSS pixels for an 800-pixel-wide figure (the width of a README column).
//!   The SVG has that size (and a `viewBox`, so it scales); the PNG is drawn at [`PNG_SCALE`]
//!   times that size, so it stays sharp on high-density screens and when scaled down to fit.
//! - Text uses DejaVu Sans, compiled into the binary (`sim/assets/`, with its licence): the PNG
//!   needs no system font, and the SVG names `DejaVu Sans, Verdana, sans-serif`, a stack of
//!   fonts of similar width.
//! - Output is a pure function of the chart: the same data gives byte-identical files.

use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font family name used in text styles, and written into SVG files as a CSS font stack.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// DejaVu Sans 2.37 (see `sim/assets/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Width of every figure in CSS pixels (the SVG's size).
pub const WIDTH: u32 = 800;

/// The PNG is drawn this many times larger than the SVG.
pub const PNG_SCALE: u32 = 2;

/// The Okabe–Ito palette without black (kept for reference lines), most distinct first.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];

const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
const GRID: RGBColor = RGBColor(0xE3, 0xE3, 0xE3);
const AXIS: RGBColor = RGBColor(0x88, 0x88, 0x88);
const REFERENCE: RGBColor = RGBColor(0x33, 0x33, 0x33);
const WINDOW: RGBColor = RGBColor(0x99, 0x99, 0x99);
const WINDOW_ALPHA: f64 = 0.22;
const BAND_ALPHA: f64 = 0.14;

/// A figure: lines over a numeric x axis.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    /// Shown on top, large.
    pub title: String,
    /// Shown under the title, smaller (what was run; what a band means). May be empty.
    pub subtitle: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The lines, drawn in order (later ones on top), coloured in [`PALETTE`] order.
    pub series: Vec<Series>,
    /// Shaded x ranges, drawn behind everything, labelled at the top of the plot.
    pub windows: Vec<Window>,
    /// Reference lines (capacity, offered load), drawn under the series.
    pub references: Vec<Reference>,
}

/// One axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The axis title, with its unit (`"time (s)"`).
    pub label: String,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// How automatic ticks are written.
    pub format: TickFormat,
    /// Ticks at these values with these labels instead of automatic ones.
    pub ticks: Vec<(f64, String)>,
    /// The range shown; `None`: fitted to the data (and references).
    pub range: Option<(f64, f64)>,
    /// With a fitted linear range, start at zero (counts, rates, ratios).
    pub include_zero: bool,
}

impl Default for Axis {
    fn default() -> Self {
        Axis::linear("", TickFormat::Number)
    }
}

impl Axis {
    /// A linear axis fitted to the data, from zero.
    pub fn linear(label: &str, format: TickFormat) -> Self {
        Axis {
            label: label.to_string(),
            scale: Scale::Linear,
            format,
            ticks: Vec::new(),
            range: None,
            include_zero: true,
        }
    }

    /// A log-10 axis fitted to the (positive) data.
    pub fn log(label: &str, format: TickFormat) -> Self {
        Axis {
            scale: Scale::Log10,
            include_zero: false,
            ..Axis::linear(label, format)
        }
    }

    /// The same axis showing exactly `[from, to]`.
    pub fn with_range(mut self, from: f64, to: f64) -> Self {
        self.range = Some((from, to));
        self
    }

    /// The same axis with these ticks.
    pub fn with_ticks(mut self, ticks: Vec<(f64, String)>) -> Self {
        self.ticks = ticks;
        self
    }
}

/// An axis scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced values.
    #[default]
    Linear,
    /// Evenly spaced powers of ten (values at or below zero are left out).
    Log10,
}

/// How automatic tick labels are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TickFormat {
    /// `0`, `2.5`, `1,200`.
    #[default]
    Number,
    /// A ratio: `1.5x`.
    Times,
    /// A share: `0.25` is written `25%`.
    Percent,
    /// Milliseconds: `50 ms`, `2 s`.
    Millis,
}

/// One line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
    /// `(x, low, high)`: a shaded band around the line (a 95% interval, say). Empty: none.
    pub band: Vec<(f64, f64, f64)>,
}

impl Series {
    /// A line without a band.
    pub fn line(label: &str, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.to_string(),
            points,
            band: Vec::new(),
        }
    }

    /// The same line with a band.
    pub fn with_band(mut self, band: Vec<(f64, f64, f64)>) -> Self {
        self.band = band;
        self
    }
}

/// A shaded x range.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// Start.
    pub from: f64,
    /// End.
    pub until: f64,
    /// Written at the top of the plot, at the window's start. May be empty.
    pub label: String,
}

/// A reference line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reference {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points; repeat an x to draw a step.
    pub points: Vec<(f64, f64)>,
    /// Dashed or dotted.
    pub style: RefStyle,
}

impl Reference {
    /// A dashed reference line.
    pub fn dashed(label: &str, points: Vec<(f64, f64)>) -> Self {
        Reference {
            label: label.to_string(),
            points,
            style: RefStyle::Dashed,
        }
    }

    /// A dotted reference line.
    pub fn dotted(label: &str, points: Vec<(f64, f64)>) -> Self {
        Reference {
            style: RefStyle::Dotted,
            ..Reference::dashed(label, points)
        }
    }
}

/// How a reference line is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefStyle {
    /// Long dashes.
    #[default]
    Dashed,
    /// Short dots.
    Dotted,
}

/// Why a chart could not be drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotError(pub String);

impl std::fmt::Display for PlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot draw the plot: {}", self.0)
    }
}

impl std::error::Error for PlotError {}

impl From<PlotError> for std::io::Error {
    fn from(e: PlotError) -> Self {
        std::io::Error::other(e.0)
    }
}

pub(crate) fn err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError(format!("{e:?}"))
}

/// Registers the vendored font with plotters (once per process).
pub(crate) fn ensure_font() -> Result<(), PlotError> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the vendored DejaVu Sans font did not load".to_string())
    })
    .clone()
    .map_err(PlotError)
}

/// The colour of series `i`, and whether it is dashed (past the palette's length).
pub fn series_color(i: usize) -> (RGBColor, bool) {
    (PALETTE[i % PALETTE.len()], i >= PALETTE.len())
}

/// The figure's height in CSS pixels (it grows with the legend).
pub fn height(chart: &Chart) -> u32 {
    // Without the font, text measures by character count; drawing reports the error.
    let _ = ensure_font();
    let layout = Layout::new(1.0);
    let rows = legend_rows(chart, &layout);
    (layout.header + layout.plot_block + layout.legend_height(rows)).round() as u32
}

/// Draws `chart` as an SVG document.
pub fn svg(chart: &Chart) -> Result<String, PlotError> {
    ensure_font()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height(chart))).into_drawing_area();
        draw(&root, chart, 1.0)?;
        root.present().map_err(err)?;
    }
    // An accessible name for the figure (screen readers, hover text in browsers).
    if let Some(end) = out.find('>') {
        let title = chart
            .title
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        out.insert_str(end + 1, &format!("\n<title>{title}</title>"));
    }
    Ok(out)
}

/// Draws `chart` as a PNG image, [`PNG_SCALE`] times the SVG's size.
pub fn png(chart: &Chart) -> Result<Vec<u8>, PlotError> {
    ensure_font()?;
    let (w, h) = (WIDTH * PNG_SCALE, height(chart) * PNG_SCALE);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, chart, f64::from(PNG_SCALE))?;
        root.present().map_err(err)?;
    }
    encode_png(&rgb, w, h)
}

/// An 8-bit RGB buffer of `w × h` pixels as PNG bytes (maximum compression, deterministic).
pub(crate) fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, PlotError> {
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::High);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(rgb).map_err(err)?;
        writer.finish().map_err(err)?;
    }
    Ok(bytes)
}

/// `STEM.svg` and `STEM.png` of `chart`, as (file name, bytes).
pub fn render(chart: &Chart, stem: &str) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    Ok(vec![
        (format!("{stem}.svg"), svg(chart)?.into_bytes()),
        (format!("{stem}.png"), png(chart)?),
    ])
}

/// Sizes in backend pixels for a scale factor.
struct Layout {
    s: f64,
    width: f64,
    margin: f64,
    header: f64,
    plot_block: f64,
    title: f64,
    subtitle: f64,
    tick: f64,
    axis_title: f64,
    legend: f64,
    window_label: f64,
    legend_row: f64,
    sample: f64,
}

impl Layout {
    fn new(s: f64) -> Self {
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

    fn legend_height(&self, rows: usize) -> f64 {
        if rows == 0 {
            self.margin
        } else {
            rows as f64 * self.legend_row + 2.0 * self.margin
        }
    }

    fn px(&self, v: f64) -> i32 {
        (v * self.s).round() as i32
    }

    fn stroke(&self, v: f64) -> u32 {
        (v * self.s).round().max(1.0) as u32
    }

    fn font(&self, size: f64, color: RGBColor) -> TextStyle<'static> {
        TextStyle {
            font: FontDesc::new(FontFamily::Name(FONT_FAMILY), size, FontStyle::Normal),
            color: color.to_backend_color(),
            pos: Pos::new(HPos::Left, VPos::Top),
        }
    }
}

/// One legend entry.
enum Key<'a> {
    Line(&'a str, RGBColor, bool),
    Reference(&'a str, RefStyle),
    Window(&'a str),
}

impl Key<'_> {
    fn label(&self) -> &str {
        match self {
            Key::Line(l, ..) | Key::Reference(l, _) | Key::Window(l) => l,
        }
    }
}

fn keys(chart: &Chart) -> Vec<Key<'_>> {
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
fn legend_layout(chart: &Chart, l: &Layout) -> (Vec<(f64, usize)>, usize) {
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

fn legend_rows(chart: &Chart, l: &Layout) -> usize {
    legend_layout(chart, l).1
}

/// Nice tick values covering `[lo, hi]`, about `target` of them.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Decimals needed to tell ticks `step` apart.
fn decimals(step: f64) -> usize {
    if step <= 0.0 || !step.is_finite() {
        return 0;
    }
    let mut d = 0;
    while d < 6
        && ((step * 10f64.powi(d as i32)).round() - step * 10f64.powi(d as i32)).abs() > 1e-6
    {
        d += 1;
    }
    d
}

/// `1234567.8` with `d` decimals and thousands separators.
pub fn group(v: f64, d: usize) -> String {
    let s = format!("{:.*}", d, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let mut out = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 && s.chars().any(|c| c != '0' && c != '.') {
        out.insert(0, '-');
    }
    out
}

fn format_tick(v: f64, step: f64, f: TickFormat) -> String {
    match f {
        TickFormat::Number => group(v, decimals(step)),
        TickFormat::Times => format!("{}x", group(v, decimals(step))),
        TickFormat::Percent => format!("{}%", group(v * 100.0, decimals(step * 100.0))),
        TickFormat::Millis => {
            if v >= 1000.0 {
                format!("{} s", group(v / 1000.0, decimals(step / 1000.0).min(3)))
            } else {
                format!("{} ms", group(v, decimals(step.min(v.max(step)))))
            }
        }
    }
}

/// The axis in drawing space (log10 applied for log axes): range, ticks at drawing-space
/// positions with their labels.
struct Resolved {
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
    log: bool,
}

impl Resolved {
    fn map(&self, v: f64) -> Option<f64> {
        if self.log {
            (v > 0.0 && v.is_finite()).then(|| v.log10())
        } else {
            v.is_finite().then_some(v)
        }
    }
}

fn resolve(axis: &Axis, values: &[f64], extra_headroom: f64, target: usize) -> Resolved {
    let log = axis.scale == Scale::Log10;
    let mapped: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .map(|v| if log { v.log10() } else { v })
        .collect();
    let (mut lo, mut hi) = match axis.range {
        Some((a, b)) if log => (a.max(1e-12).log10(), b.max(1e-12).log10()),
        Some((a, b)) => (a, b),
        None => {
            let lo = mapped.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = mapped.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
        }
    };
    if axis.range.is_none() {
        if axis.include_zero && !log {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi - lo < 1e-9 {
            hi = lo + if log { 1.0 } else { lo.abs().max(1.0) };
        }
        let span = hi - lo;
        hi += span * extra_headroom;
        if !(axis.include_zero && !log && lo == 0.0) {
            lo -= span * 0.04;
        }
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let ticks: Vec<(f64, String)> = if !axis.ticks.is_empty() {
        axis.ticks
            .iter()
            .filter_map(|(v, label)| {
                let m = if log {
                    (*v > 0.0).then(|| v.log10())?
                } else {
                    *v
                };
                (m >= lo - 1e-9 && m <= hi + 1e-9).then(|| (m, label.clone()))
            })
            .collect()
    } else if log {
        log_ticks(lo, hi, axis.format)
    } else {
        let t = nice_ticks(lo, hi, target);
        let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
        t.into_iter()
            .map(|v| (v, format_tick(v, step, axis.format)))
            .collect()
    };
    Resolved { lo, hi, ticks, log }
}

/// Ticks of a log axis over `[lo, hi]` (log10 space): decades, with 2 and 5 when few decades.
fn log_ticks(lo: f64, hi: f64, f: TickFormat) -> Vec<(f64, String)> {
    let mults: &[f64] = if hi - lo <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut out = Vec::new();
    for d in (lo.floor() as i32)..=(hi.ceil() as i32) {
        for m in mults {
            let v = m * 10f64.powi(d);
            let p = v.log10();
            if p >= lo - 1e-9 && p <= hi + 1e-9 {
                out.push((p, format_tick(v, v, f)));
            }
        }
    }
    if out.len() < 3 {
        // Less than a decade or so: round values, evenly spaced in value, placed on the log axis.
        let (a, b) = (10f64.powf(lo), 10f64.powf(hi));
        let t = nice_ticks(a, b, 5);
        let step = if t.len() > 1 { t[1] - t[0] } else { a };
        out = t
            .into_iter()
            .filter(|v| *v > 0.0)
            .map(|v| (v.log10(), format_tick(v, step, f)))
            .collect();
    }
    out
}

type Area<DB> = DrawingArea<DB, Shift>;

fn draw<DB: DrawingBackend>(root: &Area<DB>, chart: &Chart, s: f64) -> Result<(), PlotError> {
    let l = Layout::new(s);
    root.fill(&WHITE).map_err(err)?;

    // Header.
    let left = l.margin;
    root.draw(&Text::new(
        chart.title.clone(),
        (left as i32, l.px(12.0)),
        l.font(l.title, INK),
    ))
    .map_err(err)?;
    if !chart.subtitle.is_empty() {
        root.draw(&Text::new(
            chart.subtitle.clone(),
            (left as i32, l.px(40.0)),
            l.font(l.subtitle, MUTED),
        ))
        .map_err(err)?;
    }

    // Axes in drawing space.
    let mut xs: Vec<f64> = Vec::new();
    let mut ys: Vec<f64> = Vec::new();
    for sr in &chart.series {
        xs.extend(sr.points.iter().map(|p| p.0));
        ys.extend(sr.points.iter().map(|p| p.1));
        ys.extend(sr.band.iter().flat_map(|b| [b.1, b.2]));
    }
    for r in &chart.references {
        xs.extend(r.points.iter().map(|p| p.0));
        ys.extend(r.points.iter().map(|p| p.1));
    }
    xs.extend(chart.windows.iter().flat_map(|w| [w.from, w.until]));
    let headroom = if chart.windows.iter().any(|w| !w.label.is_empty()) {
        0.16
    } else {
        0.06
    };
    let mut x_axis = chart.x.clone();
    if x_axis.range.is_none() {
        // Lines over x fill the width: no padding, and zero only if asked.
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi > lo && x_axis.scale == Scale::Linear {
            x_axis.range = Some((if x_axis.include_zero { lo.min(0.0) } else { lo }, hi));
        }
    }
    let xr = resolve(&x_axis, &xs, 0.0, 10);
    let yr = resolve(&chart.y, &ys, headroom, 6);

    // Plot rectangle: room for the y tick labels and the rotated y title on the left, the x
    // tick labels and x title below.
    let tick_style = l.font(l.tick, MUTED);
    let widest_y = yr
        .ticks
        .iter()
        .map(|(_, t)| {
            root.estimate_text_size(t, &tick_style)
                .map(|(w, _)| f64::from(w))
                .unwrap_or(0.0)
        })
        .fold(0.0, f64::max);
    let plot_left = l.margin + l.axis_title + 10.0 * s + widest_y + 8.0 * s;
    let plot_right = l.width - 30.0 * s;
    let plot_top = l.header;
    let plot_bottom = l.header + l.plot_block - (l.tick + l.axis_title + 22.0 * s);
    let (w_total, _) = root.dim_in_pixel();
    let h_total = f64::from(root.dim_in_pixel().1);
    let mut cc = ChartBuilder::on(root)
        .margin_left(plot_left.round() as u32)
        .margin_right((f64::from(w_total) - plot_right).round() as u32)
        .margin_top(plot_top.round() as u32)
        .margin_bottom((h_total - plot_bottom).round() as u32)
        .build_cartesian_2d(xr.lo..xr.hi, yr.lo..yr.hi)
        .map_err(err)?;
    let px = |cc: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
              x: f64,
              y: f64| cc.backend_coord(&(x, y));

    // Windows, behind everything.
    let window_fill = WINDOW.mix(WINDOW_ALPHA).filled();
    for w in &chart.windows {
        let (Some(a), Some(b)) = (xr.map(w.from), xr.map(w.until)) else {
            continue;
        };
        let (a, b) = (a.clamp(xr.lo, xr.hi), b.clamp(xr.lo, xr.hi));
        cc.draw_series(std::iter::once(Rectangle::new(
            [(a, yr.lo), (b, yr.hi)],
            window_fill,
        )))
        .map_err(err)?;
    }

    // Grid and axes.
    let grid = ShapeStyle::from(&GRID).stroke_width(l.stroke(1.0));
    for (v, _) in &yr.ticks {
        cc.draw_series(std::iter::once(PathElement::new(
            vec![(xr.lo, *v), (xr.hi, *v)],
            grid,
        )))
        .map_err(err)?;
    }
    for (v, _) in &xr.ticks {
        cc.draw_series(std::iter::once(PathElement::new(
            vec![(*v, yr.lo), (*v, yr.hi)],
            grid,
        )))
        .map_err(err)?;
    }
    let axis_style = ShapeStyle::from(&AXIS).stroke_width(l.stroke(1.0));
    let (x0, y0) = px(&cc, xr.lo, yr.lo);
    let (x1, y1) = px(&cc, xr.hi, yr.hi);
    root.draw(&PathElement::new(
        vec![(x0, y1), (x0, y0), (x1, y0)],
        axis_style,
    ))
    .map_err(err)?;
    let tick_len = l.px(5.0);
    for (v, label) in &yr.ticks {
        let (_, y) = px(&cc, xr.lo, *v);
        root.draw(&PathElement::new(
            vec![(x0 - tick_len, y), (x0, y)],
            axis_style,
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            label.clone(),
            (x0 - tick_len - l.px(4.0), y),
            tick_style.pos(Pos::new(HPos::Right, VPos::Center)),
        ))
        .map_err(err)?;
    }
    for (v, label) in &xr.ticks {
        let (x, _) = px(&cc, *v, yr.lo);
        root.draw(&PathElement::new(
            vec![(x, y0), (x, y0 + tick_len)],
            axis_style,
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            label.clone(),
            (x, y0 + tick_len + l.px(4.0)),
            tick_style.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
    }
    let title_style = l.font(l.axis_title, INK);
    root.draw(&Text::new(
        chart.x.label.clone(),
        ((x0 + x1) / 2, y0 + tick_len + l.px(8.0) + l.tick as i32),
        title_style.pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(err)?;
    root.draw(&Text::new(
        chart.y.label.clone(),
        (l.margin as i32, (y0 + y1) / 2),
        title_style
            .pos(Pos::new(HPos::Center, VPos::Top))
            .transform(FontTransform::Rotate270),
    ))
    .map_err(err)?;

    // Window labels along the top, pushed down a row when they would overlap.
    let label_style = l.font(l.window_label, MUTED);
    let mut rows_end: Vec<i32> = Vec::new();
    for w in chart.windows.iter().filter(|w| !w.label.is_empty()) {
        let Some(a) = xr.map(w.from) else { continue };
        let (x, _) = px(&cc, a.clamp(xr.lo, xr.hi), yr.hi);
        let width = root
            .estimate_text_size(&w.label, &label_style)
            .map(|(w, _)| w as i32)
            .unwrap_or(0);
        let x = (x + l.px(4.0)).min(x1 - width).max(x0 + l.px(2.0));
        let row = rows_end
            .iter()
            .position(|end| *end < x)
            .unwrap_or(rows_end.len());
        if row == rows_end.len() {
            rows_end.push(0);
        }
        rows_end[row] = x + width + l.px(6.0);
        root.draw(&Text::new(
            w.label.clone(),
            (x, y1 + l.px(4.0) + row as i32 * l.px(16.0)),
            label_style.pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(err)?;
    }

    // Bands, then references, then lines.
    for (i, sr) in chart.series.iter().enumerate() {
        let pts: Vec<(f64, f64, f64)> = sr
            .band
            .iter()
            .filter_map(|(x, a, b)| Some((xr.map(*x)?, yr.map(*a)?, yr.map(*b)?)))
            .collect();
        if pts.len() < 2 {
            continue;
        }
        let (c, _) = series_color(i);
        let mut poly: Vec<(f64, f64)> = pts.iter().map(|(x, _, hi)| (*x, *hi)).collect();
        poly.extend(pts.iter().rev().map(|(x, lo, _)| (*x, *lo)));
        cc.draw_series(std::iter::once(Polygon::new(
            poly,
            c.mix(BAND_ALPHA).filled(),
        )))
        .map_err(err)?;
    }
    for r in &chart.references {
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter_map(|(x, y)| Some((xr.map(*x)?, yr.map(*y)?.clamp(yr.lo, yr.hi))))
            .collect();
        let style = ShapeStyle::from(&REFERENCE).stroke_width(l.stroke(1.6));
        let (dash, gap) = match r.style {
            RefStyle::Dashed => (l.px(9.0), l.px(5.0)),
            RefStyle::Dotted => (l.px(2.0), l.px(4.0)),
        };
        cc.draw_series(DashedLineSeries::new(pts, dash, gap, style))
            .map_err(err)?;
    }
    for (i, sr) in chart.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = sr
            .points
            .iter()
            .filter_map(|(x, y)| Some((xr.map(*x)?, yr.map(*y)?.clamp(yr.lo, yr.hi))))
            .collect();
        let (c, dashed) = series_color(i);
        let style = ShapeStyle::from(&c).stroke_width(l.stroke(2.0));
        if dashed {
            cc.draw_series(DashedLineSeries::new(pts, l.px(12.0), l.px(4.0), style))
                .map_err(err)?;
        } else {
            cc.draw_series(LineSeries::new(pts, style)).map_err(err)?;
        }
    }

    // Legend, below the plot.
    let (positions, _) = legend_layout(chart, &l);
    let legend_top = l.header + l.plot_block + l.margin * 0.5;
    let text_style = l.font(l.legend, INK);
    for (key, (x, row)) in keys(chart).iter().zip(positions) {
        let x = x as i32;
        let y = (legend_top + row as f64 * l.legend_row + l.legend_row / 2.0) as i32;
        let x_end = x + l.sample as i32;
        match key {
            Key::Line(_, c, dashed) => {
                let style = ShapeStyle::from(c).stroke_width(l.stroke(2.5));
                if *dashed {
                    root.draw(&PathElement::new(vec![(x, y), (x + l.px(12.0), y)], style))
                        .map_err(err)?;
                    root.draw(&PathElement::new(
                        vec![(x + l.px(17.0), y), (x_end, y)],
                        style,
                    ))
                    .map_err(err)?;
                } else {
                    root.draw(&PathElement::new(vec![(x, y), (x_end, y)], style))
                        .map_err(err)?;
                }
            }
            Key::Reference(_, st) => {
                let style = ShapeStyle::from(&REFERENCE).stroke_width(l.stroke(1.6));
                let (dash, gap) = match st {
                    RefStyle::Dashed => (l.px(9.0), l.px(5.0)),
                    RefStyle::Dotted => (l.px(2.0), l.px(4.0)),
                };
                let mut a = x;
                while a < x_end {
                    let b = (a + dash).min(x_end);
                    root.draw(&PathElement::new(vec![(a, y), (b, y)], style))
                        .map_err(err)?;
                    a = b + gap;
                }
            }
            Key::Window(_) => {
                root.draw(&Rectangle::new(
                    [(x, y - l.px(7.0)), (x_end, y + l.px(7.0))],
                    window_fill,
                ))
                .map_err(err)?;
            }
        }
        root.draw(&Text::new(
            key.label().to_string(),
            (x_end + l.px(8.0), y),
            text_style.pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_are_round_and_cover_the_range() {
        assert_eq!(
            nice_ticks(0.0, 120.0, 10),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0]
        );
        assert_eq!(nice_ticks(0.0, 7.3, 6), vec![0.0, 2.0, 4.0, 6.0]);
        assert_eq!(nice_ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn tick_labels() {
        assert_eq!(format_tick(1500.0, 500.0, TickFormat::Number), "1,500");
        assert_eq!(format_tick(2.5, 0.5, TickFormat::Times), "2.5x");
        assert_eq!(format_tick(0.25, 0.25, TickFormat::Percent), "25%");
        assert_eq!(format_tick(2000.0, 2000.0, TickFormat::Millis), "2 s");
        assert_eq!(format_tick(50.0, 50.0, TickFormat::Millis), "50 ms");
        assert_eq!(group(-1234567.891, 2), "-1,234,567.89");
        assert_eq!(group(999.0, 0), "999");
    }

    #[test]
    fn log_ticks_use_decades_and_halves() {
        let t: Vec<String> = log_ticks(1.0, 3.0, TickFormat::Millis)
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        assert_eq!(
            t,
            [
                "10 ms", "20 ms", "50 ms", "100 ms", "200 ms", "500 ms", "1 s"
            ]
        );
    }

    fn line(i: usize) -> Series {
        let pts = (0..20).map(|k| (k as f64, (k * (i + 1)) as f64)).collect();
        Series::line(&format!("policy {i}"), pts)
    }

    #[test]
    fn past_seven_series_colours_repeat_dashed_and_the_legend_grows() {
        let few = Chart {
            title: "t".into(),
            series: (0..3).map(line).collect(),
            ..Chart::default()
        };
        let many = Chart {
            series: (0..9).map(line).collect(),
            ..few.clone()
        };
        assert!(height(&many) > height(&few));
        let svg = svg(&many).unwrap();
        let blue = "stroke=\"#0072B2\" stroke-width=\"2\"";
        // Series 0 is one solid polyline; series 7 (blue again) is dashed: many segments.
        let blue_lines = svg.lines().filter(|l| l.contains(blue)).count();
        assert!(blue_lines > 5, "{blue_lines}");
        assert_eq!(series_color(7), (PALETTE[0], true));
        for i in 0..9 {
            assert!(svg.contains(&format!("\npolicy {i}\n")));
        }
    }

    #[test]
    fn odd_inputs_still_draw() {
        // Nothing at all, a log axis with zeros and negatives, overlapping labelled windows, a
        // flat series, NaN.
        let empty = Chart::default();
        assert!(svg(&empty).is_ok() && png(&empty).is_ok());
        let odd = Chart {
            title: "odd".into(),
            x: Axis::linear("x", TickFormat::Number),
            y: Axis::log("y", TickFormat::Millis),
            series: vec![Series::line(
                "s",
                vec![
                    (0.0, 0.0),
                    (1.0, -5.0),
                    (2.0, 10.0),
                    (3.0, f64::NAN),
                    (4.0, 10.0),
                ],
            )],
            windows: vec![
                Window {
                    from: 0.5,
                    until: 1.5,
                    label: "a long label for a window".into(),
                },
                Window {
                    from: 1.0,
                    until: 3.0,
                    label: "another long label".into(),
                },
            ],
            references: vec![Reference::dotted("r", vec![(0.0, 5.0), (4.0, 5.0)])],
            ..Chart::default()
        };
        let text = svg(&odd).unwrap();
        assert!(
            text.contains("\na long label for a window\n")
                && text.contains("\nanother long label\n")
        );
        assert!(png(&odd).is_ok());
    }
}
