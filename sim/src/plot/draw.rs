//! Drawing a [`Chart`] on any plotters backend (SVG or bitmap), one function per part of the
//! figure, in the order they are painted: header, frame (ranges and the plot rectangle), fault
//! windows, grid and axes, window labels, data (bands, references, lines), legend.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::layout::{Key, Layout, keys, legend_layout};
use super::ticks::{Resolved, resolve};
use super::{
    AXIS, BAND_ALPHA, Chart, GRID, INK, MUTED, PlotError, REFERENCE, RefStyle, Scale, WINDOW,
    WINDOW_ALPHA, err, series_color,
};

type Area<DB> = DrawingArea<DB, Shift>;

type Ctx<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The x and y ranges with their ticks, and the plot rectangle's corners in backend pixels
/// (`(x0, y0)` bottom left, `(x1, y1)` top right).
struct Frame {
    xr: Resolved,
    yr: Resolved,
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
}

/// Draws `chart` on `root` at scale `s` (1 for SVG, [`PNG_SCALE`](super::PNG_SCALE) for PNG).
pub(super) fn draw<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart,
    s: f64,
) -> Result<(), PlotError> {
    let l = Layout::new(s);
    root.fill(&WHITE).map_err(err)?;
    header(root, chart, &l)?;
    let (mut cc, f) = frame(root, chart, &l)?;
    windows(&mut cc, chart, &f)?;
    grid_and_axes(root, &mut cc, chart, &l, &f)?;
    window_labels(root, &cc, chart, &l, &f)?;
    data(&mut cc, chart, &l, &f)?;
    legend(root, chart, &l)
}

/// The title and subtitle.
fn header<DB: DrawingBackend>(root: &Area<DB>, chart: &Chart, l: &Layout) -> Result<(), PlotError> {
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
    Ok(())
}

/// Dash and gap lengths of a reference line, in backend pixels.
fn dash_gap(l: &Layout, style: RefStyle) -> (i32, i32) {
    match style {
        RefStyle::Dashed => (l.px(9.0), l.px(5.0)),
        RefStyle::Dotted => (l.px(2.0), l.px(4.0)),
    }
}

fn px<DB: DrawingBackend>(cc: &Ctx<'_, DB>, x: f64, y: f64) -> (i32, i32) {
    cc.backend_coord(&(x, y))
}

/// The axes' ranges and ticks (fitted to every point, band, reference and window), and the plot
/// rectangle, leaving room for the tick labels and axis titles.
fn frame<'a, DB: DrawingBackend>(
    root: &'a Area<DB>,
    chart: &Chart,
    l: &Layout,
) -> Result<(Ctx<'a, DB>, Frame), PlotError> {
    let s = l.s;
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
    let cc = ChartBuilder::on(root)
        .margin_left(plot_left.round() as u32)
        .margin_right((f64::from(w_total) - plot_right).round() as u32)
        .margin_top(plot_top.round() as u32)
        .margin_bottom((h_total - plot_bottom).round() as u32)
        .build_cartesian_2d(xr.lo..xr.hi, yr.lo..yr.hi)
        .map_err(err)?;
    let (x0, y0) = px(&cc, xr.lo, yr.lo);
    let (x1, y1) = px(&cc, xr.hi, yr.hi);
    Ok((
        cc,
        Frame {
            xr,
            yr,
            x0,
            y0,
            x1,
            y1,
        },
    ))
}

/// The fault windows, shaded behind everything.
fn windows<DB: DrawingBackend>(
    cc: &mut Ctx<'_, DB>,
    chart: &Chart,
    f: &Frame,
) -> Result<(), PlotError> {
    let (xr, yr) = (&f.xr, &f.yr);
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
    Ok(())
}

/// Grid lines at the ticks, the axis lines, tick marks and labels, and the axis titles.
fn grid_and_axes<DB: DrawingBackend>(
    root: &Area<DB>,
    cc: &mut Ctx<'_, DB>,
    chart: &Chart,
    l: &Layout,
    f: &Frame,
) -> Result<(), PlotError> {
    let (xr, yr) = (&f.xr, &f.yr);
    let (x0, y0, x1, y1) = (f.x0, f.y0, f.x1, f.y1);
    let tick_style = l.font(l.tick, MUTED);
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
    root.draw(&PathElement::new(
        vec![(x0, y1), (x0, y0), (x1, y0)],
        axis_style,
    ))
    .map_err(err)?;
    let tick_len = l.px(5.0);
    for (v, label) in &yr.ticks {
        let (_, y) = px(cc, xr.lo, *v);
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
        let (x, _) = px(cc, *v, yr.lo);
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
    Ok(())
}

/// The windows' labels along the top, pushed down a row when they would overlap.
fn window_labels<DB: DrawingBackend>(
    root: &Area<DB>,
    cc: &Ctx<'_, DB>,
    chart: &Chart,
    l: &Layout,
    f: &Frame,
) -> Result<(), PlotError> {
    let (xr, yr) = (&f.xr, &f.yr);
    let (x0, x1, y1) = (f.x0, f.x1, f.y1);
    let label_style = l.font(l.window_label, MUTED);
    let mut rows_end: Vec<i32> = Vec::new();
    for w in chart.windows.iter().filter(|w| !w.label.is_empty()) {
        let Some(a) = xr.map(w.from) else { continue };
        let (x, _) = px(cc, a.clamp(xr.lo, xr.hi), yr.hi);
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
    Ok(())
}

/// The data: bands, then reference lines, then the series' lines on top.
fn data<DB: DrawingBackend>(
    cc: &mut Ctx<'_, DB>,
    chart: &Chart,
    l: &Layout,
    f: &Frame,
) -> Result<(), PlotError> {
    let (xr, yr) = (&f.xr, &f.yr);
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
        let (dash, gap) = dash_gap(l, r.style);
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
    Ok(())
}

/// The legend, below the plot: a sample of each line, reference and window, and its label.
fn legend<DB: DrawingBackend>(root: &Area<DB>, chart: &Chart, l: &Layout) -> Result<(), PlotError> {
    let window_fill = WINDOW.mix(WINDOW_ALPHA).filled();
    let (positions, _) = legend_layout(chart, l);
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
                let (dash, gap) = dash_gap(l, *st);
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
