//! Line, stacked-area and bar charts and heatmaps, written as SVG (plotters) and, with the
//! `png` feature (on by default), PNG (the SVG rendered by resvg with the system's fonts),
//! both atomically.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use sharemap::trace::write_whole;
use sharemap::{Error, ErrorKind, Result};
use std::path::Path;

/// A drawing or encoding that failed, in words.
fn failed(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, what.to_string())
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Draw the series as stacked areas (each on top of the previous ones).
    pub stacked: bool,
    pub log_x: bool,
}

/// A line's colour: the first (the optimum) black, the others as the bars'.
fn line_colour(i: usize) -> RGBColor {
    if i == 0 { BLACK } else { BAR_COLOURS[(i - 1) % BAR_COLOURS.len()] }
}

/// Renders the chart as an SVG document.
pub fn svg(chart: &Chart) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed(format!("plot: {e}")))?;
        let series: Vec<Series> = if chart.stacked {
            stack(chart.series)
        } else {
            chart.series.iter().map(|s| Series { name: s.name.clone(), points: s.points.clone() }).collect()
        };
        let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
        let y1 = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0f64, f64::max);
        let (x0, x1) = if x0.is_finite() && x1 > x0 { (x0, x1) } else { (0.0, 1.0) };
        let y1 = if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
        // Costs per reference never go below 1: start there when the data allows.
        let ymin = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(f64::INFINITY, f64::min);
        let y0 = if !chart.stacked && ymin >= 1.0 && y1 > 1.0 { 1.0 - (y1 - 1.0) * 0.05 } else { 0.0 };
        let mut builder = ChartBuilder::on(&root);
        builder.caption(chart.title, ("sans-serif", 20)).margin(24).x_label_area_size(44).y_label_area_size(70);
        let err = |e: DrawingAreaErrorKind<_>| failed(format!("plot: {e}"));
        macro_rules! draw {
            ($ctx:expr) => {{
                let mut ctx = $ctx;
                ctx.configure_mesh()
                    .x_desc(chart.x_label)
                    .y_desc(chart.y_label)
                    .light_line_style(WHITE.mix(0.0))
                    .draw()
                    .map_err(err)?;
                // Stacked areas: the tallest (cumulative) first, so each lower band shows.
                // Lines: the first (the optimum) last, on top of any it ties with.
                let order: Vec<usize> = if chart.stacked {
                    (0..series.len()).rev().collect()
                } else {
                    (1..series.len()).chain(0..series.len().min(1)).collect()
                };
                for i in order {
                    let s = &series[i];
                    let color = line_colour(i);
                    if chart.stacked {
                        ctx.draw_series(
                            AreaSeries::new(s.points.iter().copied(), 0.0, color.mix(0.35))
                                .border_style(color.stroke_width(1)),
                        )
                        .map_err(err)?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.mix(0.5).filled()));
                    } else {
                        let width = if i == 0 { 3 } else { 2 };
                        ctx.draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(width)))
                            .map_err(err)?
                            .label(s.name.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(width))
                            });
                    }
                }
                ctx.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .draw()
                    .map_err(err)?;
            }};
        }
        if chart.log_x && x0 > 0.0 {
            draw!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1).map_err(err)?);
        } else {
            draw!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?);
        }
        root.present().map_err(|e| failed(format!("plot: {e}")))?;
    }
    Ok(out)
}

/// Cumulative sums: series i becomes the sum of series 0..=i (same x values assumed).
fn stack(series: &[Series]) -> Vec<Series> {
    let mut acc: Vec<(f64, f64)> =
        series.first().map(|s| s.points.iter().map(|&(x, _)| (x, 0.0)).collect()).unwrap_or_default();
    series
        .iter()
        .map(|s| {
            for (a, p) in acc.iter_mut().zip(&s.points) {
                a.1 += p.1;
            }
            Series { name: s.name.clone(), points: acc.clone() }
        })
        .collect()
}

/// The extensions each plot is written with.
#[cfg(feature = "png")]
pub const EXTENSIONS: &[&str] = &["svg", "png"];
#[cfg(not(feature = "png"))]
pub const EXTENSIONS: &[&str] = &["svg"];

/// `base.svg,base.png` (or only `base.svg` without the `png` feature).
pub fn files(base: &str) -> String {
    EXTENSIONS.iter().map(|e| format!("{base}.{e}")).collect::<Vec<_>>().join(",")
}

/// Rendering options with the system's fonts, loaded once per process (scanning the font
/// directories was a good part of a plot's cost).
#[cfg(feature = "png")]
fn render_options() -> &'static resvg::usvg::Options<'static> {
    static OPTIONS: std::sync::OnceLock<resvg::usvg::Options<'static>> = std::sync::OnceLock::new();
    OPTIONS.get_or_init(|| {
        let mut opt = resvg::usvg::Options::default();
        let db = opt.fontdb_mut();
        db.load_system_fonts();
        let family = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"]
            .into_iter()
            .find(|f| db.faces().any(|face| face.families.iter().any(|(n, _)| n == f)));
        match family {
            Some(f) => db.set_sans_serif_family(f),
            None => {
                eprintln!("sharemap: warning: no font found for PNG text (install fonts-dejavu-core); the SVG has it")
            }
        }
        opt
    })
}

/// The SVG rendered to PNG bytes (fast deflate: plots are mostly flat colour, and the
/// default level cost more than rendering them).
#[cfg(feature = "png")]
pub fn png(svg: &str) -> Result<Vec<u8>> {
    let tree =
        resvg::usvg::Tree::from_str(svg, render_options()).map_err(|e| failed(format!("rendering plot: {e}")))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| failed("rendering plot: empty image"))?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let rgba: Vec<u8> = pixmap
        .pixels()
        .iter()
        .flat_map(|p| {
            let c = p.demultiply();
            [c.red(), c.green(), c.blue(), c.alpha()]
        })
        .collect();
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, size.width(), size.height());
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header().map_err(|e| failed(format!("encoding PNG: {e}")))?;
    writer.write_image_data(&rgba).map_err(|e| failed(format!("encoding PNG: {e}")))?;
    writer.finish().map_err(|e| failed(format!("encoding PNG: {e}")))?;
    Ok(out)
}

/// A bar per name with its value and, where known, an error bar of that half-width, and a
/// dashed line at 1 (values normalised to a baseline): seed 000's figure 3.
pub fn bars_svg(title: &str, y_label: &str, bars: &[(String, f64, Option<f64>)]) -> Result<String> {
    bars_svg_with(title, y_label, bars, true)
}

/// Bar colours: distinct, none of them the baseline's grey (the first bar's).
const BAR_COLOURS: [RGBColor; 14] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(255, 152, 150),
    RGBColor(197, 176, 213),
];

/// Short labels for the bars: a name's part before its options (`kmaf:period-ms=1` is
/// `kmaf`), at most 16 characters, numbered when two would read alike; and the (short,
/// full) pairs that were cut.
pub fn short_labels(names: &[&str]) -> (Vec<String>, Vec<(String, String)>) {
    short_labels_within(names, 16)
}

/// `short_labels` for a table's column, where names may be longer than under a bar.
pub fn table_labels(names: &[&str]) -> (Vec<String>, Vec<(String, String)>) {
    short_labels_within(names, 28)
}

fn short_labels_within(names: &[&str], most: usize) -> (Vec<String>, Vec<(String, String)>) {
    let mut labels: Vec<String> = Vec::new();
    let mut cut = Vec::new();
    let fits = |text: &str| text.chars().count() <= most;
    for name in names {
        // The whole spec when it fits; else its name and values without the keys
        // (`static:compact`); else its name alone, cut to fit.
        let values = name.split_once(':').map(|(base, options)| {
            let values: Vec<&str> = options.split(',').map(|kv| kv.split_once('=').map_or(kv, |(_, v)| v)).collect();
            format!("{base}:{}", values.join(","))
        });
        let base = name.split_once(':').map_or(*name, |(b, _)| b);
        let base = if fits(name) {
            name.to_string()
        } else if let Some(v) = values.filter(|v| fits(v)) {
            v
        } else if !fits(base) {
            base.chars().take(most - 1).collect::<String>() + "~"
        } else {
            base.into()
        };
        let mut label = base.clone();
        let mut n = 1;
        while labels.contains(&label) {
            n += 1;
            label = format!("{base}#{n}");
        }
        if label != *name {
            cut.push((label.clone(), name.to_string()));
        }
        labels.push(label);
    }
    (labels, cut)
}

/// `bars_svg`, with the line at 1 only when `baseline` (absolute values go without).
pub fn bars_svg_with(
    title: &str,
    y_label: &str,
    bars: &[(String, f64, Option<f64>)],
    baseline: bool,
) -> Result<String> {
    let mut out = String::new();
    let full: Vec<&str> = bars.iter().map(|(n, _, _)| n.as_str()).collect();
    let (names, cut) = short_labels(&full);
    // The full names of the shortened labels, one line each, under the plot.
    let key_height = if cut.is_empty() { 0 } else { 14 + 18 * cut.len() as u32 };
    {
        let root = SVGBackend::with_string(&mut out, (900, 560 + key_height)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| failed(format!("plot: {e}"));
        root.fill(&WHITE).map_err(err)?;
        let (root, key) = root.split_vertically(560);
        for (i, (short, long)) in cut.iter().enumerate() {
            let line = fit_text(&format!("{short}: {long}"), 13, 860).0;
            key.draw(&Text::new(line, (24, 6 + 18 * i as i32), ("sans-serif", 13).into_font()))
                .map_err(|e| failed(format!("plot: {e}")))?;
        }
        let floor = if baseline { 1.0f64 } else { f64::MIN_POSITIVE };
        let top = bars.iter().map(|(_, v, e)| v + e.unwrap_or(0.0)).fold(floor, f64::max) * 1.1;
        let mut ctx = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(24)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d((0..bars.len().saturating_sub(1)).into_segmented(), 0.0..top)
            .map_err(err)?;
        ctx.configure_mesh()
            .y_desc(y_label)
            .disable_x_mesh()
            .light_line_style(WHITE.mix(0.0))
            .x_labels(bars.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).map_or(String::new(), |n| n.to_string()),
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        let colors = |i: usize| if i == 0 { RGBColor(127, 127, 127) } else { BAR_COLOURS[(i - 1) % BAR_COLOURS.len()] };
        ctx.draw_series(bars.iter().enumerate().map(|(i, (_, v, _))| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (if i + 1 < bars.len() { SegmentValue::Exact(i + 1) } else { SegmentValue::Last }, *v),
                ],
                colors(i).mix(0.8).filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            bar
        }))
        .map_err(err)?;
        ctx.draw_series(bars.iter().enumerate().filter_map(|(i, (_, v, e))| {
            e.map(|e| ErrorBar::new_vertical(SegmentValue::CenterOf(i), v - e, *v, v + e, BLACK.stroke_width(2), 12))
        }))
        .map_err(err)?;
        if baseline {
            ctx.draw_series(DashedLineSeries::new(
                [(SegmentValue::Exact(0), 1.0), (SegmentValue::Last, 1.0)],
                6,
                4,
                BLACK.mix(0.6).stroke_width(1),
            ))
            .map_err(err)?;
        }
        root.present().map_err(|e| failed(format!("plot: {e}")))?;
    }
    Ok(out)
}

/// Writes `base.svg` and (with the `png` feature) `base.png`.
pub fn save(chart: &Chart, base: &Path) -> Result<()> {
    save_svg(&svg(chart)?, base)
}

/// Average advance of a sans-serif character, in font sizes (DejaVu Sans is about 0.55-0.6).
const CHAR_WIDTH: f64 = 0.6;
/// Smallest font a line is shrunk to before it is cut.
const MIN_FONT: u32 = 9;

/// A line of text and a font size (at most `size`) at which it fits `width` pixels: shrunk
/// first, then cut with an ellipsis (long detector specs would run off the image).
fn fit_text(text: &str, size: u32, width: u32) -> (String, u32) {
    let chars = text.chars().count().max(1) as f64;
    let fitting = (width as f64 / (CHAR_WIDTH * chars)).floor() as u32;
    if fitting >= MIN_FONT {
        return (text.to_string(), fitting.min(size));
    }
    let keep = (width as f64 / (CHAR_WIDTH * MIN_FONT as f64)) as usize - 1;
    (text.chars().take(keep).chain(std::iter::once('…')).collect(), MIN_FONT)
}

/// Decades of the heatmaps' colour scale: a cell at a thousandth of the largest still shows.
const DECADES: f64 = 3.0;

/// Where a cell's value sits on the heatmaps' logarithmic scale: 0 at `max / 10^DECADES` or
/// below, 1 at `max`; None for nothing at all (drawn white). A linear scale hid weak sharing
/// (the neighbours of a phase-change pattern vanished beside its strong pairs).
pub fn log_level(value: f64, max: f64) -> Option<f64> {
    if !(value > 0.0 && max > 0.0) {
        return None;
    }
    Some((1.0 + (value / max).log10() / DECADES).clamp(0.0, 1.0))
}

/// The colour of a level: light yellow through orange to dark plum, darker for more.
fn level_colour(t: f64) -> RGBColor {
    const STOPS: [(f64, [f64; 3]); 3] =
        [(0.0, [252.0, 228.0, 130.0]), (0.5, [238.0, 108.0, 42.0]), (1.0, [84.0, 6.0, 66.0])];
    let k = if t < STOPS[1].0 { 0 } else { 1 };
    let (t0, a) = STOPS[k];
    let (t1, b) = STOPS[k + 1];
    let f = ((t - t0) / (t1 - t0)).clamp(0.0, 1.0);
    let mix = |i: usize| (a[i] + (b[i] - a[i]) * f).round() as u8;
    RGBColor(mix(0), mix(1), mix(2))
}

/// Every how many rows (or columns) of `n` a tick label goes: at most about 16 labels.
fn tick_step(n: usize) -> usize {
    let raw = n.div_ceil(16).max(1);
    [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000].into_iter().find(|&s| s >= raw).unwrap_or(raw)
}

/// What a heatmap shows: its grid's size, what its rows and columns are, and how a row and a
/// column are labelled.
pub struct Grid<'a> {
    pub title: &'a str,
    pub note: &'a str,
    pub rows: usize,
    pub cols: usize,
    pub row_axis: &'a str,
    pub col_axis: &'a str,
    pub row_tick: &'a dyn Fn(usize) -> String,
    pub col_tick: &'a dyn Fn(usize) -> String,
}

/// A grid of `rows` x `cols` cells coloured on a logarithmic scale of the largest value, with
/// tick labels on both axes and a colour bar saying what each colour is a fraction of.
pub fn heatmap_svg(grid: &Grid, value: impl Fn(usize, usize) -> f64) -> Result<String> {
    let (rows, cols) = (grid.rows.max(1), grid.cols.max(1));
    let max = (0..grid.rows)
        .flat_map(|i| (0..grid.cols).map(move |j| (i, j)))
        .map(|(i, j)| value(i, j))
        .fold(0.0f64, f64::max);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 700)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| failed(format!("plot: {e}"));
        root.fill(&WHITE).map_err(err)?;
        let (title, title_size) = fit_text(grid.title, 20, 728);
        let (note, note_size) = fit_text(grid.note, 13, 728);
        root.draw(&Text::new(title, (16, 8), ("sans-serif", title_size))).map_err(err)?;
        root.draw(&Text::new(note, (16, 34), ("sans-serif", note_size))).map_err(err)?;
        // Grid at (x0, y0), row labels left of it, column labels under it, the bar right.
        let (x0, y0, w, h) = (70i32, 66i32, 560.0f64, 560.0f64);
        let (mut cw, mut ch) = (w / cols as f64, h / rows as f64);
        if rows == cols {
            cw = cw.min(ch);
            ch = cw;
        }
        let font = ("sans-serif", 11).into_font();
        for i in 0..grid.rows {
            for j in 0..grid.cols {
                let Some(t) = log_level(value(i, j), max) else { continue };
                let (l, t0) = (x0 + (j as f64 * cw) as i32, y0 + (i as f64 * ch) as i32);
                let (r, b) = (x0 + ((j + 1) as f64 * cw) as i32, y0 + ((i + 1) as f64 * ch) as i32);
                root.draw(&Rectangle::new([(l, t0), (r.max(l + 1), b.max(t0 + 1))], level_colour(t).filled()))
                    .map_err(err)?;
            }
        }
        let (gw, gh) = ((cols as f64 * cw) as i32, (rows as f64 * ch) as i32);
        root.draw(&Rectangle::new([(x0, y0), (x0 + gw, y0 + gh)], BLACK.stroke_width(1))).map_err(err)?;
        let anchored = |h: HPos, v: VPos| TextStyle::from(font.clone()).pos(Pos::new(h, v));
        let step = tick_step(grid.rows);
        for i in (0..grid.rows).step_by(step) {
            let y = y0 + ((i as f64 + 0.5) * ch) as i32;
            root.draw(&Text::new((grid.row_tick)(i), (x0 - 6, y), anchored(HPos::Right, VPos::Center))).map_err(err)?;
        }
        let step = tick_step(grid.cols);
        for j in (0..grid.cols).step_by(step) {
            let x = x0 + ((j as f64 + 0.5) * cw) as i32;
            root.draw(&Text::new((grid.col_tick)(j), (x, y0 + gh + 4), anchored(HPos::Center, VPos::Top)))
                .map_err(err)?;
        }
        let axis = ("sans-serif", 13).into_font();
        root.draw(&Text::new(
            grid.col_axis.to_string(),
            (x0 + gw / 2, y0 + gh + 22),
            TextStyle::from(axis.clone()).pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            grid.row_axis.to_string(),
            (16, y0 + gh / 2),
            TextStyle::from(axis.transform(FontTransform::Rotate270)).pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
        // The colour bar: top = the largest value, each third a decade below.
        let (bx, bh) = (x0 + gw + 30, gh.max(120));
        const STEPS: i32 = 60;
        for k in 0..STEPS {
            let t = 1.0 - (k as f64 + 0.5) / STEPS as f64;
            let (top, bottom) = (y0 + bh * k / STEPS, y0 + bh * (k + 1) / STEPS);
            root.draw(&Rectangle::new([(bx, top), (bx + 18, bottom)], level_colour(t).filled())).map_err(err)?;
        }
        root.draw(&Rectangle::new([(bx, y0), (bx + 18, y0 + bh)], BLACK.stroke_width(1))).map_err(err)?;
        for (d, label) in [(0, "max"), (1, "max/10"), (2, "max/100"), (3, "max/1000")] {
            let y = y0 + bh * d / DECADES as i32;
            root.draw(&Text::new(label, (bx + 22, y), anchored(HPos::Left, VPos::Center))).map_err(err)?;
        }
        root.draw(&Text::new("white: none", (bx - 4, y0 + bh + 6), anchored(HPos::Left, VPos::Top))).map_err(err)?;
        root.draw(&Text::new("log scale", (bx - 4, y0 - 14), anchored(HPos::Left, VPos::Top))).map_err(err)?;
        root.present().map_err(|e| failed(format!("plot: {e}")))?;
    }
    Ok(out)
}

/// The heatmap of a sharing matrix: threads against threads.
pub fn sharing_heatmap_svg(title: &str, matrix: &sharemap::SharingMatrix) -> Result<String> {
    let n = matrix.threads();
    let tick = |i: usize| i.to_string();
    let grid = Grid {
        title,
        note: "darker = more sharing between the two threads",
        rows: n,
        cols: n,
        row_axis: "thread",
        col_axis: "thread",
        row_tick: &tick,
        col_tick: &tick,
    };
    heatmap_svg(&grid, |i, j| matrix.get(i, j))
}

/// Most rows of the page-usage plot: beyond that, neighbouring pages share a row.
const PAGE_ROWS: usize = 256;

/// The page-usage plot: pages by address (top to bottom, binned into at most `PAGE_ROWS`
/// rows) against threads, darker for more accesses.
pub fn page_usage_svg(usage: &sharemap::PageUsage, threads: usize) -> Result<String> {
    let pages = usage.sorted();
    // Rows of equal pages each, all of them filled (rows first then pages per row left up to
    // a fifth of the plot empty).
    let per_row = pages.len().div_ceil(PAGE_ROWS).max(1);
    let rows = pages.len().div_ceil(per_row).max(1);
    let mut cells = vec![0.0f64; rows * threads.max(1)];
    for (k, (_, entry)) in pages.iter().enumerate() {
        let row = k / per_row;
        for (t, &a) in entry.accesses.iter().enumerate().take(threads) {
            cells[row * threads + t] += a as f64;
        }
    }
    let note = format!("{} pages by address, lowest at the top; darker = more accesses", pages.len());
    let row_axis =
        if per_row > 1 { format!("page (by address; {per_row} pages a row)") } else { "page (by address)".into() };
    let row_tick = |i: usize| (i * per_row).to_string();
    let col_tick = |j: usize| j.to_string();
    let grid = Grid {
        title: "Page usage: accesses per page and thread",
        note: &note,
        rows,
        cols: threads.max(1),
        row_axis: &row_axis,
        col_axis: "thread",
        row_tick: &row_tick,
        col_tick: &col_tick,
    };
    heatmap_svg(&grid, |i, j| cells[i * threads.max(1) + j])
}

/// Writes `svg` as `base.svg` and, with the `png` feature, `base.png`.
pub fn save_svg(svg: &str, base: &Path) -> Result<()> {
    save_svg_with(svg, |ext, bytes| Ok(write_whole(&base.with_extension(ext), bytes)?))
}

/// Saves a plot as SVG (and PNG) through `write`, given each file's extension and bytes (a
/// file of an output directory, say).
pub fn save_svg_with(svg: &str, write: impl Fn(&str, &[u8]) -> Result<()>) -> Result<()> {
    #[cfg(feature = "png")]
    let png = png(svg)?;
    #[cfg(feature = "png")]
    let files = [("svg", svg.as_bytes()), ("png", &png[..])];
    #[cfg(not(feature = "png"))]
    let files = [("svg", svg.as_bytes())];
    for (ext, bytes) in files {
        write(ext, bytes)?;
    }
    Ok(())
}

/// Seed 000's figures 3 and 4 for one trace: time over `os`'s, last-level misses per 1000
/// accesses, interconnect traffic; written as `BASE-time`, `BASE-misses`, `BASE-traffic`.
pub fn simulation(s: &sharemap::Simulation, base: &Path, trace: &str) -> Result<()> {
    let with_suffix = |suffix: &str| {
        let mut name = base.file_name().unwrap_or_default().to_os_string();
        name.push(format!("-{suffix}"));
        base.with_file_name(name)
    };
    let bars = |f: &dyn Fn(&sharemap::simulate::Outcome) -> f64| -> Vec<(String, f64, Option<f64>)> {
        s.mechanisms.iter().map(|m| (m.mechanism.clone(), f(m), None)).collect()
    };
    let os = s.mechanisms.iter().find(|m| m.mechanism == "os").map(|m| m.time_ns).filter(|&t| t > 0.0);
    let (time, label) = match os {
        Some(t) => (bars(&|m| m.time_ns / t), "time / os time"),
        None => (bars(&|m| m.time_ns / 1e6), "time (ms)"),
    };
    let on = trace;
    save_svg(
        &bars_svg_with(&format!("{on}: simulated execution time"), label, &time, os.is_some())?,
        &with_suffix("time"),
    )?;
    let llc = s.cache_levels.last().map_or("no cache".to_string(), |l| format!("L{l}"));
    save_svg(
        &bars_svg_with(
            &format!("{on}: {llc} misses per 1000 accesses"),
            "misses / 1000 accesses",
            &bars(&|m| m.llc_mpka()),
            false,
        )?,
        &with_suffix("misses"),
    )?;
    save_svg(
        &bars_svg_with(
            &format!("{on}: interconnect traffic"),
            "MB",
            &bars(&|m| m.counts.interconnect_bytes as f64 / 1e6),
            false,
        )?,
        &with_suffix("traffic"),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{BAR_COLOURS, CHAR_WIDTH, fit_text, short_labels};

    /// Bars carry the mechanism's name, its options in the key under the plot; two alike get
    /// numbers; no two bars of the first 15 share a colour, nor any the baseline's grey.
    #[test]
    fn bars_have_short_labels_and_distinct_colours() {
        let names = [
            "os",
            "numa-balancing:scan-delay-ms=0.1,scan-period-ms=0.1",
            "static:threads=scatter",
            "static:threads=compact",
        ];
        let (labels, cut) = short_labels(&names);
        assert_eq!(labels, ["os", "numa-balancing", "static:scatter", "static:compact"]);
        assert_eq!(cut.len(), 3);
        assert_eq!(cut[0], ("numa-balancing".to_string(), names[1].to_string()));
        for (i, a) in BAR_COLOURS.iter().enumerate() {
            assert_ne!((a.0, a.1, a.2), (127, 127, 127));
            assert!(BAR_COLOURS[i + 1..].iter().all(|b| (a.0, a.1, a.2) != (b.0, b.1, b.2)));
        }
    }

    #[test]
    fn titles_fit_the_image() {
        let short = "Sharing between threads (oracle)";
        assert_eq!(fit_text(short, 20, 608), (short.to_string(), 20));
        let spec = "Sharing between threads (sammu:l1=64,l1ways=4,l2=512,l2ways=4,ac=32,nc=4,nt=10,flush=1)";
        let (text, size) = fit_text(spec, 20, 608);
        assert_eq!(text, spec, "shrunk, not cut");
        assert!(size < 20 && text.chars().count() as f64 * CHAR_WIDTH * size as f64 <= 608.0);
        let huge = "x".repeat(500);
        let (text, size) = fit_text(&huge, 20, 608);
        assert!(text.ends_with('…') && text.chars().count() as f64 * CHAR_WIDTH * size as f64 <= 608.0);
    }
}
