//! Heatmaps as SVG and PNG: a grid of cells over two parameters, one panel per policy, with a
//! region outlined. The drawing behind `sim map`'s figures, in the same style as the line charts
//! of [`plot`](super) (same font, sizes, width and PNG scale).
//!
//! A [`Heatmap`] is plain data: the two axes as categories (one tick per grid value, in the
//! parameter's own unit), one [`Panel`] per policy with a value per cell, and a [`ColorScale`].
//! Cells are drawn evenly spaced whatever the values (a grid of 1, 2, 5, 10 s reads as a grid),
//! the first y value at the bottom. Cells marked in a panel's `outline` get a thick border around
//! the region they form.
//!
//! ```
//! use sim::plot::heatmap::{Cell, ColorScale, Heatmap, Panel, Ramp};
//! let map = Heatmap {
//!     title: "stuck runs".into(),
//!     subtitle: String::new(),
//!     x: ("load (req/s)".into(), vec!["50".into(), "90".into()]),
//!     y: ("outage (s)".into(), vec!["1".into(), "10".into()]),
//!     panels: vec![Panel {
//!         title: "naive retries".into(),
//!         cells: vec![Cell::Value(0.0), Cell::Value(0.2), Cell::Value(0.6), Cell::Value(1.0)],
//!         labels: vec![],
//!         outline: vec![false, true, true, true],
//!     }],
//!     scale: ColorScale::share("share of seeds stuck", Ramp::Blues),
//!     outline_label: "at least one seed stuck".into(),
//! };
//! let svg = sim::plot::heatmap::svg(&map).unwrap();
//! assert!(svg.contains("naive retries"));
//! ```

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{FONT_FAMILY, PlotError, WIDTH, ensure_font, err, text_width, with_title};

const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
const EMPTY: RGBColor = RGBColor(0xFF, 0xFF, 0xFF);
const EDGE: RGBColor = RGBColor(0xBB, 0xBB, 0xBB);

/// A figure: one heatmap panel per policy over the same two axes and colour scale.
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// Shown on top, large.
    pub title: String,
    /// Under the title, smaller. May be empty.
    pub subtitle: String,
    /// The horizontal axis: its title with the unit, and one label per column, left to right.
    pub x: (String, Vec<String>),
    /// The vertical axis: its title with the unit, and one label per row, bottom to top.
    pub y: (String, Vec<String>),
    /// The panels, left to right, then top to bottom, two per row.
    pub panels: Vec<Panel>,
    /// How values become colours.
    pub scale: ColorScale,
    /// The legend's text for the outline (empty: no outline key).
    pub outline_label: String,
}

/// One panel: a value per cell, row by row from the bottom (`cells[row * columns + column]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// The cells, `rows × columns`.
    pub cells: Vec<Cell>,
    /// Text written in each cell when it fits (empty: none).
    pub labels: Vec<String>,
    /// Cells inside the outlined region (empty: no outline).
    pub outline: Vec<bool>,
}

/// What a cell shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// A value on the colour scale.
    Value(f64),
    /// Off the scale: drawn in the scale's `beyond` colour (a run that never recovered).
    Beyond,
    /// No data.
    Empty,
}

/// A sequential colour ramp, light for low values, dark for high ones (ColorBrewer, readable in
/// grey and with the common colour-vision deficiencies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ramp {
    /// White to dark blue.
    Blues,
    /// Cream to dark orange-brown.
    Oranges,
}

impl Ramp {
    fn stops(self) -> [RGBColor; 9] {
        let c = |h: u32| RGBColor((h >> 16) as u8, (h >> 8) as u8, h as u8);
        match self {
            Ramp::Blues => [
                0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6, 0x4292c6, 0x2171b5, 0x08519c,
                0x08306b,
            ]
            .map(c),
            Ramp::Oranges => [
                0xfff5eb, 0xfee6ce, 0xfdd0a2, 0xfdae6b, 0xfd8d3c, 0xf16913, 0xd94801, 0xa63603,
                0x7f2704,
            ]
            .map(c),
        }
    }

    /// The colour at `t` in [0, 1] (clamped), interpolated between the ramp's stops.
    pub fn at(self, t: f64) -> RGBColor {
        let stops = self.stops();
        let t = if t.is_finite() {
            t.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let pos = t * (stops.len() - 1) as f64;
        let i = (pos.floor() as usize).min(stops.len() - 2);
        let f = pos - i as f64;
        let (a, b) = (stops[i], stops[i + 1]);
        let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
        RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
    }
}

/// How values map to colours, and the legend that explains it.
#[derive(Clone, Debug, PartialEq)]
pub struct ColorScale {
    /// The legend's title, with the unit.
    pub label: String,
    /// The value drawn darkest (values above are clamped); the lightest is 0.
    pub max: f64,
    /// Legend ticks: `(value, text)`.
    pub ticks: Vec<(f64, String)>,
    /// The ramp.
    pub ramp: Ramp,
    /// The outline's colour.
    pub outline: RGBColor,
    /// [`Cell::Beyond`]'s colour and legend text, if the figure has such cells.
    pub beyond: Option<(RGBColor, String)>,
}

impl ColorScale {
    /// A share from 0 to 100%, ticks every 25%, outlined in vermillion.
    pub fn share(label: &str, ramp: Ramp) -> Self {
        ColorScale {
            label: label.to_string(),
            max: 1.0,
            ticks: (0..=4)
                .map(|k| (f64::from(k) / 4.0, format!("{}%", k * 25)))
                .collect(),
            ramp,
            outline: RGBColor(0xD5, 0x5E, 0x00),
            beyond: None,
        }
    }

    fn color(&self, c: Cell) -> RGBColor {
        match c {
            Cell::Value(v) if self.max > 0.0 => self.ramp.at(v / self.max),
            Cell::Value(_) => self.ramp.at(0.0),
            Cell::Beyond => self.beyond.as_ref().map_or(INK, |b| b.0),
            Cell::Empty => EMPTY,
        }
    }
}

/// Sizes in backend pixels for a scale factor `s` (CSS pixels at `s = 1`).
struct Layout {
    s: f64,
    margin: f64,
    header: f64,
    title: f64,
    subtitle: f64,
    panel_title: f64,
    tick: f64,
    cell_text: f64,
    axis_title: f64,
    cols: usize,
    panel_w: f64,
    row_h: f64,
    panel_h: f64,
    y_ticks_w: f64,
    legend_h: f64,
}

fn font(size: f64, color: RGBColor) -> TextStyle<'static> {
    TextStyle {
        font: FontDesc::new(FontFamily::Name(FONT_FAMILY), size, FontStyle::Normal),
        color: color.to_backend_color(),
        pos: Pos::new(HPos::Left, VPos::Top),
    }
}

impl Layout {
    fn new(map: &Heatmap, s: f64) -> Self {
        let width = f64::from(WIDTH) * s;
        let margin = 14.0 * s;
        let tick = 14.0 * s;
        let axis_title = 17.5 * s;
        let cols = map.panels.len().clamp(1, 2);
        let y_ticks_w = map
            .y
            .1
            .iter()
            .map(|t| text_width(t, tick))
            .fold(0.0, f64::max)
            + 8.0 * s;
        let panel_w = (width - 2.0 * margin - axis_title - 8.0 * s) / cols as f64;
        let rows = map.y.1.len().max(1) as f64;
        let columns = map.x.1.len().max(1) as f64;
        let cell_w = (panel_w - y_ticks_w - 16.0 * s) / columns;
        // Square-ish cells, but no taller than 30 px nor shorter than 14 px.
        let row_h = cell_w
            .clamp(14.0 * s, 30.0 * s)
            .min(300.0 * s / rows)
            .max(10.0 * s);
        let panel_h = 26.0 * s + rows * row_h + tick + 14.0 * s;
        Layout {
            s,
            margin,
            header: if map.subtitle.is_empty() { 48.0 } else { 70.0 } * s,
            title: 23.0 * s,
            subtitle: 16.5 * s,
            panel_title: 17.5 * s,
            tick,
            cell_text: 12.5 * s,
            axis_title,
            cols,
            panel_w,
            row_h,
            panel_h,
            y_ticks_w,
            legend_h: 84.0 * s,
        }
    }

    fn px(&self, v: f64) -> i32 {
        (v * self.s).round() as i32
    }

    fn panel_rows(&self, map: &Heatmap) -> usize {
        map.panels.len().max(1).div_ceil(self.cols)
    }

    fn height(&self, map: &Heatmap) -> f64 {
        self.header + self.panel_rows(map) as f64 * self.panel_h + self.axis_title + self.legend_h
    }
}

/// The figure's height in CSS pixels (it grows with the number of panels and rows).
pub fn height(map: &Heatmap) -> u32 {
    let _ = ensure_font();
    Layout::new(map, 1.0).height(map).round() as u32
}

/// Draws `map` as an SVG document.
pub fn svg(map: &Heatmap) -> Result<String, PlotError> {
    ensure_font()?;
    check(map)?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height(map))).into_drawing_area();
        draw(&root, map, 1.0)?;
        root.present().map_err(err)?;
    }
    Ok(with_title(out, &map.title))
}

/// Without the `png` feature: an error saying so.
#[cfg(not(feature = "png"))]
pub fn png(_map: &Heatmap) -> Result<Vec<u8>, PlotError> {
    Err(super::no_png())
}

/// Draws `map` as a PNG image, [`PNG_SCALE`](super::PNG_SCALE) times the SVG's size.
#[cfg(feature = "png")]
pub fn png(map: &Heatmap) -> Result<Vec<u8>, PlotError> {
    ensure_font()?;
    check(map)?;
    use super::PNG_SCALE;
    let (w, h) = (WIDTH * PNG_SCALE, height(map) * PNG_SCALE);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, map, f64::from(PNG_SCALE))?;
        root.present().map_err(err)?;
    }
    super::encode_png(&rgb, w, h)
}

fn check(map: &Heatmap) -> Result<(), PlotError> {
    let n = map.x.1.len() * map.y.1.len();
    if n == 0 || map.panels.is_empty() {
        return Err(PlotError(
            "a heatmap needs at least one cell and one panel".into(),
        ));
    }
    for p in &map.panels {
        if p.cells.len() != n
            || !(p.labels.is_empty() || p.labels.len() == n)
            || !(p.outline.is_empty() || p.outline.len() == n)
        {
            return Err(PlotError(format!(
                "panel \"{}\": {} cells for a {} × {} grid",
                p.title,
                p.cells.len(),
                map.x.1.len(),
                map.y.1.len()
            )));
        }
    }
    Ok(())
}

/// Whether white text reads better than ink on `c`.
fn dark(c: RGBColor) -> bool {
    0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2) < 140.0
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    map: &Heatmap,
    s: f64,
) -> Result<(), PlotError> {
    let l = Layout::new(map, s);
    root.fill(&WHITE).map_err(err)?;
    let text = |t: &str, x: f64, y: f64, style: TextStyle<'static>| {
        root.draw(&Text::new(
            t.to_string(),
            (x.round() as i32, y.round() as i32),
            style,
        ))
        .map_err(err)
    };
    text(&map.title, l.margin, 12.0 * s, font(l.title, INK))?;
    if !map.subtitle.is_empty() {
        text(&map.subtitle, l.margin, 40.0 * s, font(l.subtitle, MUTED))?;
    }
    let (nx, ny) = (map.x.1.len(), map.y.1.len());
    let grid_left0 = l.margin + l.axis_title + 8.0 * s;
    for (k, panel) in map.panels.iter().enumerate() {
        let (pc, pr) = (k % l.cols, k / l.cols);
        let left = grid_left0 + pc as f64 * l.panel_w;
        let top = l.header + pr as f64 * l.panel_h;
        text(
            &panel.title,
            left + l.y_ticks_w,
            top + 2.0 * s,
            font(l.panel_title, INK),
        )?;
        let x0 = left + l.y_ticks_w;
        let cell_w = (l.panel_w - l.y_ticks_w - 16.0 * s) / nx as f64;
        let y_top = top + 26.0 * s;
        let y_bottom = y_top + ny as f64 * l.row_h;
        let rect = |c: usize, r: usize| {
            // Row 0 at the bottom.
            let xa = x0 + c as f64 * cell_w;
            let yb = y_bottom - r as f64 * l.row_h;
            (xa, yb - l.row_h, xa + cell_w, yb)
        };
        for r in 0..ny {
            for c in 0..nx {
                let i = r * nx + c;
                let color = map.scale.color(panel.cells[i]);
                let (xa, ya, xb, yb) = rect(c, r);
                root.draw(&Rectangle::new(
                    [
                        (xa.round() as i32, ya.round() as i32),
                        (xb.round() as i32, yb.round() as i32),
                    ],
                    color.filled(),
                ))
                .map_err(err)?;
                if matches!(panel.cells[i], Cell::Empty) {
                    root.draw(&Rectangle::new(
                        [
                            (xa.round() as i32, ya.round() as i32),
                            (xb.round() as i32, yb.round() as i32),
                        ],
                        ShapeStyle::from(&EDGE).stroke_width(1),
                    ))
                    .map_err(err)?;
                }
                if let Some(label) = panel.labels.get(i).filter(|t| !t.is_empty()) {
                    let fits = text_width(label, l.cell_text) + 4.0 * s <= cell_w
                        && l.cell_text <= l.row_h + 2.0 * s;
                    if fits {
                        let ink = if dark(color) { WHITE } else { INK };
                        text(
                            label,
                            (xa + xb) / 2.0,
                            (ya + yb) / 2.0,
                            font(l.cell_text, ink).pos(Pos::new(HPos::Center, VPos::Center)),
                        )?;
                    }
                }
            }
        }
        // Ticks: every column and row, in the parameter's unit.
        let tick_style = font(l.tick, MUTED);
        for (c, t) in map.x.1.iter().enumerate() {
            let (xa, _, xb, _) = rect(c, 0);
            text(
                t,
                (xa + xb) / 2.0,
                y_bottom + 4.0 * s,
                tick_style.pos(Pos::new(HPos::Center, VPos::Top)),
            )?;
        }
        for (r, t) in map.y.1.iter().enumerate() {
            let (_, ya, _, yb) = rect(0, r);
            text(
                t,
                x0 - 6.0 * s,
                (ya + yb) / 2.0,
                tick_style.pos(Pos::new(HPos::Right, VPos::Center)),
            )?;
        }
        // The outline: every cell edge between a cell inside and one outside (or the border).
        if !panel.outline.is_empty() {
            let inside = |c: isize, r: isize| {
                c >= 0
                    && r >= 0
                    && (c as usize) < nx
                    && (r as usize) < ny
                    && panel.outline[r as usize * nx + c as usize]
            };
            let style = ShapeStyle::from(&map.scale.outline).stroke_width((3.0 * s).round() as u32);
            let p = |x: f64, y: f64| (x.round() as i32, y.round() as i32);
            for r in 0..ny as isize {
                for c in 0..nx as isize {
                    if !inside(c, r) {
                        continue;
                    }
                    let (xa, ya, xb, yb) = rect(c as usize, r as usize);
                    let mut edges = Vec::new();
                    if !inside(c - 1, r) {
                        edges.push([p(xa, ya), p(xa, yb)]);
                    }
                    if !inside(c + 1, r) {
                        edges.push([p(xb, ya), p(xb, yb)]);
                    }
                    if !inside(c, r - 1) {
                        edges.push([p(xa, yb), p(xb, yb)]);
                    }
                    if !inside(c, r + 1) {
                        edges.push([p(xa, ya), p(xb, ya)]);
                    }
                    for e in edges {
                        root.draw(&PathElement::new(e.to_vec(), style))
                            .map_err(err)?;
                    }
                }
            }
        }
    }
    // Axis titles: x once under the panels, y once on the left.
    let panels_bottom = l.header + l.panel_rows(map) as f64 * l.panel_h;
    let title_style = font(l.axis_title, INK);
    text(
        &map.x.0,
        f64::from(WIDTH) * s / 2.0,
        panels_bottom,
        title_style.pos(Pos::new(HPos::Center, VPos::Top)),
    )?;
    root.draw(&Text::new(
        map.y.0.clone(),
        (
            l.margin.round() as i32,
            ((l.header + panels_bottom) / 2.0).round() as i32,
        ),
        title_style
            .pos(Pos::new(HPos::Center, VPos::Top))
            .transform(FontTransform::Rotate270),
    ))
    .map_err(err)?;
    // Legend: the colour bar with its ticks and title, then the outline and off-scale keys.
    let ly = panels_bottom + l.axis_title + 14.0 * s;
    let (bar_x, bar_w, bar_h) = (l.margin + 16.0 * s, 260.0 * s, 14.0 * s);
    let steps = 52;
    for k in 0..steps {
        let a = bar_x + bar_w * k as f64 / steps as f64;
        let b = bar_x + bar_w * (k + 1) as f64 / steps as f64;
        let c = map.scale.ramp.at((k as f64 + 0.5) / steps as f64);
        root.draw(&Rectangle::new(
            [
                (a.round() as i32, ly.round() as i32),
                (b.round() as i32, (ly + bar_h).round() as i32),
            ],
            c.filled(),
        ))
        .map_err(err)?;
    }
    let tick_style = font(l.tick, MUTED);
    for (v, t) in &map.scale.ticks {
        let x = bar_x + bar_w * (v / map.scale.max.max(f64::MIN_POSITIVE)).clamp(0.0, 1.0);
        root.draw(&PathElement::new(
            vec![
                (x.round() as i32, (ly + bar_h).round() as i32),
                (x.round() as i32, (ly + bar_h + 4.0 * s).round() as i32),
            ],
            ShapeStyle::from(&MUTED).stroke_width(1),
        ))
        .map_err(err)?;
        text(
            t,
            x,
            ly + bar_h + 5.0 * s,
            tick_style.pos(Pos::new(HPos::Center, VPos::Top)),
        )?;
    }
    text(
        &map.scale.label,
        bar_x,
        ly + bar_h + 24.0 * s,
        font(l.tick, INK),
    )?;
    let mut kx = bar_x + bar_w + 36.0 * s;
    let swatch = 16.0 * s;
    if let Some((color, label)) = &map.scale.beyond {
        root.draw(&Rectangle::new(
            [
                (kx.round() as i32, ly.round() as i32),
                ((kx + swatch).round() as i32, (ly + swatch).round() as i32),
            ],
            color.filled(),
        ))
        .map_err(err)?;
        text(label, kx + swatch + 6.0 * s, ly, font(l.tick, INK))?;
        kx += swatch + 12.0 * s + text_width(label, l.tick) + 24.0 * s;
    }
    if !map.outline_label.is_empty() {
        let style = ShapeStyle::from(&map.scale.outline).stroke_width((3.0 * s).round() as u32);
        root.draw(&Rectangle::new(
            [
                (kx.round() as i32, ly.round() as i32),
                ((kx + swatch).round() as i32, (ly + swatch).round() as i32),
            ],
            style,
        ))
        .map_err(err)?;
        text(
            &map.outline_label,
            kx + swatch + 6.0 * s,
            ly,
            font(l.tick, INK),
        )?;
    }
    let _ = l.px(0.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(outline: Vec<bool>) -> Heatmap {
        Heatmap {
            title: "t".into(),
            subtitle: "s".into(),
            x: ("x (req/s)".into(), vec!["1".into(), "2".into(), "3".into()]),
            y: ("y (s)".into(), vec!["10".into(), "20".into()]),
            panels: vec![Panel {
                title: "p".into(),
                cells: vec![
                    Cell::Value(0.0),
                    Cell::Value(0.5),
                    Cell::Value(1.0),
                    Cell::Beyond,
                    Cell::Empty,
                    Cell::Value(0.25),
                ],
                labels: vec!["0".into(); 6],
                outline,
            }],
            scale: ColorScale::share("share", Ramp::Blues),
            outline_label: "outlined".into(),
        }
    }

    #[test]
    fn ramps_run_light_to_dark() {
        for ramp in [Ramp::Blues, Ramp::Oranges] {
            assert!(!dark(ramp.at(0.0)) && dark(ramp.at(1.0)));
            assert_eq!(ramp.at(-1.0), ramp.at(0.0));
            assert_eq!(ramp.at(f64::NAN), ramp.at(0.0));
            assert_eq!(ramp.at(2.0), ramp.at(1.0));
        }
    }

    #[test]
    fn draws_the_same_bytes_twice_and_refuses_bad_shapes() {
        let m = map(vec![false, true, true, false, false, false]);
        let a = svg(&m).unwrap();
        assert_eq!(a, svg(&m).unwrap());
        assert!(a.contains("<title>t</title>") && a.contains("outlined"));
        let p = png(&m).unwrap();
        assert_eq!(&p[1..4], b"PNG");
        assert_eq!(p, png(&m).unwrap());
        let mut bad = m.clone();
        bad.panels[0].cells.pop();
        assert!(svg(&bad).is_err());
        // The outline is drawn in its colour only when some cell is in the region.
        let none = svg(&map(vec![false; 6])).unwrap();
        let outlined = svg(&m).unwrap();
        let vermillion = "#D55E00";
        assert!(outlined.matches(vermillion).count() > none.matches(vermillion).count());
    }
}
