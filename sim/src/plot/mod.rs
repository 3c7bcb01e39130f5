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
//! use sim::plot::{Axis, Chart, Reference, Series, TickFormat, Window};
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
//! let svg = sim::plot::svg(&chart).unwrap();
//! assert!(svg.contains("naive retries"));
//! let png = sim::plot::png(&chart).unwrap();
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
//!
//! The work is split by job: this file holds the chart's data types and the entry points,
//! `layout` the sizes and the legend's placement, `ticks` the axis ranges and tick labels, and
//! `draw` the drawing itself, one step per part of the figure.

mod draw;
pub mod heatmap;
mod layout;
mod ticks;

use plotters::prelude::*;

pub(crate) use layout::text_width;
use layout::{Layout, legend_rows};

pub use ticks::{group, nice_ticks};

/// The font family name used in text styles, and written into SVG files as a CSS font stack.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// DejaVu Sans 2.37 (see `sim/assets/DejaVuSans-LICENSE.txt`).
#[cfg(feature = "png")]
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

/// Registers the vendored font with plotters (once per process). Without the `png` feature
/// (the WebAssembly build) there is none to register: SVG text measures by plotters' estimate.
#[cfg(not(feature = "png"))]
pub(crate) fn ensure_font() -> Result<(), PlotError> {
    Ok(())
}

/// Registers the vendored font with plotters (once per process).
#[cfg(feature = "png")]
pub(crate) fn ensure_font() -> Result<(), PlotError> {
    use std::sync::OnceLock;
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
        draw::draw(&root, chart, 1.0)?;
        root.present().map_err(err)?;
    }
    Ok(with_title(out, &chart.title))
}

/// `svg` with an accessible name for the figure (screen readers, hover text in browsers).
pub(crate) fn with_title(mut svg: String, title: &str) -> String {
    if let Some(end) = svg.find('>') {
        let title = title
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        svg.insert_str(end + 1, &format!("\n<title>{title}</title>"));
    }
    svg
}

/// Without the `png` feature: an error saying so.
#[cfg(not(feature = "png"))]
pub fn png(_chart: &Chart) -> Result<Vec<u8>, PlotError> {
    Err(no_png())
}

#[cfg(not(feature = "png"))]
pub(crate) fn no_png() -> PlotError {
    PlotError("PNG output needs sim's `png` feature".into())
}

/// Draws `chart` as a PNG image, [`PNG_SCALE`] times the SVG's size.
#[cfg(feature = "png")]
pub fn png(chart: &Chart) -> Result<Vec<u8>, PlotError> {
    ensure_font()?;
    let (w, h) = (WIDTH * PNG_SCALE, height(chart) * PNG_SCALE);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw::draw(&root, chart, f64::from(PNG_SCALE))?;
        root.present().map_err(err)?;
    }
    encode_png(&rgb, w, h)
}

/// An 8-bit RGB buffer of `w × h` pixels as PNG bytes (maximum compression, deterministic).
#[cfg(feature = "png")]
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

#[cfg(test)]
mod tests {
    use super::ticks::{format_tick, log_ticks};
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
