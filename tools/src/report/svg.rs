//! The SVG plot: busbw and time per call against message size, side by side.
//!
//! Layout: 1280 px wide, the height grows with the legend.
//!
//! ```text
//! +---------------------------------------------------------------+
//! |            all-reduce (float, sum) · 2 ranks · cuda            |  title
//! |    2 × NVIDIA H200 · CUDA driver API 13000 · NCCL 2.28.3       |  hardware, smaller
//! +-------------------------------+-------------------------------+
//! | bus bandwidth: busbw (GB/s,   | time per call: µs, log10 y,   |
//! | linear) vs size (log2), with  | vs size (log2): the small     |
//! | the peer-copy ceiling         | messages, and path switches   |
//! +-------------------------------+-------------------------------+
//! | legend: one entry per algorithm, wrapped to the width         |
//! | note: line styles; combinations not plotted                   |
//! +---------------------------------------------------------------+
//! ```
//!
//! Only the first (collective, type, op) combination of the report is
//! plotted: one picture per combination would mean several files per run,
//! and stacking several panel pairs makes a tall picture in which the
//! combinations are hard to compare anyway. The others are in the JSON and
//! CSV (and the text tables), and the legend's note names them.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::output::{check_extension, write_output, Format, PLOT_FLAG};
use super::{first_appearances, Combo, Report, ReportError, Row};

mod axis;
mod text;
use axis::{size_label, TickAxis, XRange};
use text::{fit_text, text_width};

/// Width of the picture, px.
const SVG_WIDTH: u32 = 1280;
/// Outer padding, px.
const PAD: u32 = 16;
/// Font sizes as given to plotters, whose SVG backend writes `font-size` =
/// size / [`SVG_FONT_SCALE`] (so 24 renders at about 19.4 px).
const TITLE_FONT: u32 = 24;
const SUBTITLE_FONT: u32 = 17;
const LEGEND_FONT: u32 = 15;
const PANEL_CAPTION_FONT: u32 = 18;
const TICK_FONT: u32 = 14;
const SWITCH_FONT: u32 = 13;
const AXIS_DESC_FONT: u32 = 15;
/// plotters-svg divides every font size by this.
const SVG_FONT_SCALE: f64 = 1.24;

/// The `font-size` (px) the SVG gets for a plotters font size.
fn rendered(size: u32) -> f64 {
    f64::from(size) / SVG_FONT_SCALE
}
/// Height of the title block and of the panels, px.
const TITLE_H: u32 = 66;
const PANEL_H: u32 = 470;
/// Legend geometry, px: row height, sample width, gap between columns.
const LEGEND_ROW_H: u32 = 22;
const LEGEND_SAMPLE_W: i32 = 52;
const LEGEND_COL_GAP: u32 = 28;
/// The widest legend label, px (longer ones lose paths, then get an ellipsis).
const LEGEND_LABEL_MAX: f64 = 520.0;
const FONT: &str = "sans-serif";

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn plot_err<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

impl Report {
    /// Writes [`Report::to_svg`] to `path` (which must end in `.svg`, unless
    /// it is a device, FIFO or descriptor) as
    /// [`write_output`] does (a regular file is replaced
    /// atomically).
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        check_extension(PLOT_FLAG, path, Format::Svg)?;
        let svg = self.to_svg()?;
        write_output(PLOT_FLAG, path, svg.as_bytes())
    }

    /// The plot of the first (collective, type, op) combination, as SVG text
    /// 1280 px wide; the other combinations are in the JSON/CSV.
    ///
    /// * Title: the combination, rank count and backend name on a first line;
    ///   the hardware (first `hardware` entry with its repeat count, driver,
    ///   NCCL version) on a second, smaller one; each shortened with `…` to
    ///   fit the width.
    /// * Left panel: busbw (GB/s, linear) against the size (log2), with the
    ///   peer-copy ceiling (`link_ceiling_gbps`) as a dashed line.
    /// * Right panel: time per call (µs, log10) against the size (log2), so
    ///   the small messages, where busbw is near 0, can be compared. Where a
    ///   series switches between 2 to 4 paths, each path is named at the
    ///   first size it ran.
    /// * One colour per algorithm (series key `algo`): out-of-place solid with
    ///   dots, in-place dashed and lighter. When several rows share an
    ///   (algo, size), the best value is plotted.
    /// * Legend below the panels: each label is the `algo`, followed by the
    ///   distinct paths its rows ran when they differ from it, e.g.
    ///   `auto (oneshot:fused / ring:pipe2)`; a path `a/b` (out-of-place /
    ///   in-place) counts as the two paths `a` and `b`.
    pub fn to_svg(&self) -> Result<String, ReportError> {
        let combos = self.combos();
        let combo = combos.first();
        let rows: Vec<&Row> = match combo {
            Some(c) => self.rows_of(c).collect(),
            None => Vec::new(),
        };
        let series = plot_series(&rows);
        let ceiling = self
            .header
            .link_ceiling_gbps
            .filter(|c| c.is_finite() && *c > 0.0);
        let title = self.title_lines(combo, f64::from(SVG_WIDTH - 2 * PAD));
        let note = legend_note(&combos, f64::from(SVG_WIDTH - 2 * PAD));
        let legend = LegendLayout::new(&series, f64::from(SVG_WIDTH - 2 * PAD));
        let height = TITLE_H + PANEL_H + legend.height();

        let mut buf = String::new();
        {
            let root = SVGBackend::with_string(&mut buf, (SVG_WIDTH, height)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let (title_area, rest) = root.split_vertically(TITLE_H);
            let (panels, legend_area) = rest.split_vertically(PANEL_H);
            let (left, right) = panels.split_horizontally(SVG_WIDTH / 2);
            draw_title(&title_area, &title)?;
            let x = XRange::of(&series);
            draw_busbw_panel(&left, &series, &x, ceiling)?;
            draw_time_panel(&right, &series, &x)?;
            draw_legend(&legend_area, &legend, &series, &note)?;
            root.present().map_err(plot_err)?;
        }
        Ok(buf)
    }

    /// The two title lines, each at most `width` px wide (estimated).
    fn title_lines(&self, combo: Option<&Combo>, width: f64) -> [String; 2] {
        let h = &self.header;
        let what = match combo {
            Some(c) => format!("{} ({}, {})", c.collective, c.dtype, c.redop),
            None => "no results".to_string(),
        };
        let backend = h
            .backend
            .split([':', '('])
            .next()
            .unwrap_or_default()
            .trim();
        let mut first = format!("{what} · {}", ringreduce::words::counted(h.ranks, "rank"));
        if !backend.is_empty() {
            first.push_str(" · ");
            first.push_str(backend);
        }
        let mut parts: Vec<String> = Vec::new();
        if let Some(hw) = h.hardware.first() {
            let repeats = h.hardware.iter().take_while(|x| *x == hw).count();
            parts.push(if repeats > 1 {
                format!("{repeats} × {hw}")
            } else {
                hw.clone()
            });
        }
        if let Some(d) = &h.driver {
            if !parts.iter().any(|p| p.contains(d.as_str())) {
                parts.push(d.clone());
            }
        }
        if let Some(v) = h
            .nccl_version
            .as_deref()
            .and_then(|v| v.split_whitespace().next())
        {
            parts.push(format!("NCCL {v}"));
        }
        if parts.is_empty() {
            parts.push("unknown hardware".to_string());
        }
        // Whether the ranks share a device (virtual ranks: no link between
        // them), and when it ran: a picture kept in the docs says both.
        let gpus = h.devices;
        if backend == "cpu" {
            parts.push("virtual ranks in host memory".to_string());
        } else if gpus > 0 && h.ranks > gpus {
            parts.push(format!(
                "virtual ranks: {} on {}",
                h.ranks,
                ringreduce::words::counted(gpus, "GPU")
            ));
        } else if gpus > 0 {
            parts.push("one rank per GPU".to_string());
        }
        if let Some(day) = h.date.get(..10) {
            parts.push(day.to_string());
        }
        let second = parts.join(" · ");
        [
            fit_text(&first, rendered(TITLE_FONT), width),
            fit_text(&second, rendered(SUBTITLE_FONT), width),
        ]
    }
}

/// Plot data of one algorithm; x = log2(bytes).
struct PlotSeries {
    label: String,
    /// (x, busbw GB/s), out-of-place and in-place.
    oop_bw: Vec<(f64, f64)>,
    ip_bw: Vec<(f64, f64)>,
    /// (x, log10(time µs)), out-of-place and in-place.
    oop_t: Vec<(f64, f64)>,
    ip_t: Vec<(f64, f64)>,
    /// Where the out-of-place path changes: (x, log10(time µs), new path);
    /// empty unless the series ran 2 to [`MAX_SWITCHES`] path segments.
    switches: Vec<(f64, f64, String)>,
}

/// The most path segments a series may have for the time panel to name
/// each at its first size (more would clutter it; the legend lists them).
const MAX_SWITCHES: usize = 4;

impl PlotSeries {
    fn points(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.oop_bw.iter().chain(&self.ip_bw)
    }
    fn times(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.oop_t.iter().chain(&self.ip_t)
    }
}

/// One series per algorithm (order of first appearance), best value per size.
fn plot_series(rows: &[&Row]) -> Vec<PlotSeries> {
    first_appearances(rows.iter().map(|r| r.algo.as_str()))
        .into_iter()
        .map(|algo| {
            let mine: Vec<&Row> = rows.iter().copied().filter(|r| r.algo == algo).collect();
            let mut bw = [BTreeMap::<u64, f64>::new(), BTreeMap::new()];
            let mut t = [BTreeMap::<u64, f64>::new(), BTreeMap::new()];
            for r in mine.iter().filter(|r| r.size > 0) {
                for (i, m) in [&r.out_of_place, &r.in_place].into_iter().enumerate() {
                    let Some(m) = m else { continue };
                    if m.busbw.is_finite() {
                        let e = bw[i].entry(r.size).or_insert(m.busbw);
                        *e = e.max(m.busbw);
                    }
                    if m.time_us.is_finite() && m.time_us > 0.0 {
                        let e = t[i].entry(r.size).or_insert(m.time_us);
                        *e = e.min(m.time_us);
                    }
                }
            }
            let pts = |map: &BTreeMap<u64, f64>, f: fn(f64) -> f64| -> Vec<(f64, f64)> {
                map.iter()
                    .map(|(size, v)| ((*size as f64).log2(), f(*v)))
                    .collect()
            };
            let ident: fn(f64) -> f64 = |v| v;
            let switches = path_switches(&mine);
            PlotSeries {
                switches,
                label: series_label(algo, &mine, LEGEND_LABEL_MAX),
                oop_bw: pts(&bw[0], ident),
                ip_bw: pts(&bw[1], ident),
                oop_t: pts(&t[0], f64::log10),
                ip_t: pts(&t[1], f64::log10),
            }
        })
        .collect()
}

/// The sizes at which the out-of-place path of `rows` (one algorithm)
/// changes, with the fastest row's path at each size; the first size counts
/// as a change. Empty when there is one path only or more than
/// [`MAX_SWITCHES`] segments.
fn path_switches(rows: &[&Row]) -> Vec<(f64, f64, String)> {
    let mut best: BTreeMap<u64, (f64, &str)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.size > 0) {
        let (Some(m), Some(path)) = (&r.out_of_place, r.path.as_deref()) else {
            continue;
        };
        if !(m.time_us.is_finite() && m.time_us > 0.0) {
            continue;
        }
        let oop_path = path.split('/').next().unwrap_or(path).trim();
        let e = best.entry(r.size).or_insert((m.time_us, oop_path));
        if m.time_us < e.0 {
            *e = (m.time_us, oop_path);
        }
    }
    let mut out: Vec<(f64, f64, String)> = Vec::new();
    let mut prev: Option<&str> = None;
    for (size, (t, path)) in best {
        if prev != Some(path) {
            out.push(((size as f64).log2(), t.log10(), path.to_string()));
            prev = Some(path);
        }
    }
    if out.len() < 2 || out.len() > MAX_SWITCHES {
        out.clear();
    }
    out
}

/// `algo`, plus the distinct paths its rows ran when they differ from it:
/// `auto (oneshot:fused / ring:pipe2)`. Paths that do not fit in `max_px`
/// become `+N more`.
fn series_label(algo: &str, rows: &[&Row], max_px: f64) -> String {
    let mut paths: Vec<&str> = Vec::new();
    for part in rows
        .iter()
        .filter_map(|r| r.path.as_deref())
        .flat_map(|p| p.split('/'))
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        if !paths.contains(&part) {
            paths.push(part);
        }
    }
    if paths.iter().all(|p| *p == algo) {
        return fit_text(algo, rendered(LEGEND_FONT), max_px);
    }
    let font = rendered(LEGEND_FONT);
    let mut shown = paths.len();
    loop {
        let mut list = paths[..shown].join(" / ");
        if shown < paths.len() {
            if shown > 0 {
                list.push_str(" / ");
            }
            list.push_str(&format!("+{} more", paths.len() - shown));
        }
        let label = format!("{algo} ({list})");
        if shown <= 1 || text_width(&label, font) <= max_px {
            return fit_text(&label, font, max_px);
        }
        shown -= 1;
    }
}

/// The legend's last line: how to read the lines, and the combinations that
/// are not plotted.
fn legend_note(combos: &[Combo], width: f64) -> String {
    let mut note = String::from("solid line, dots: out-of-place · dashed, lighter: in-place");
    if combos.len() > 1 {
        let others: Vec<String> = combos[1..].iter().map(Combo::to_string).collect();
        note.push_str(&format!(
            " · not plotted (see the JSON/CSV): {}",
            others.join(", ")
        ));
    }
    fit_text(&note, rendered(LEGEND_FONT), width)
}

fn draw_title(
    area: &DrawingArea<SVGBackend, Shift>,
    lines: &[String; 2],
) -> Result<(), ReportError> {
    let center = (SVG_WIDTH / 2) as i32;
    let top =
        TextStyle::from((FONT, TITLE_FONT).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(lines[0].as_str(), (center, 12), top))
        .map_err(plot_err)?;
    let sub = TextStyle::from((FONT, SUBTITLE_FONT).into_font())
        .color(&RGBColor(80, 80, 80))
        .pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(lines[1].as_str(), (center, 40), sub))
        .map_err(plot_err)?;
    Ok(())
}

/// The smallest and largest value, if any.
fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((v.min(lo), v.max(hi))),
    })
}

/// Pixels of the x axis in one panel, for the label count.
const PANEL_PLOT_W: i64 = (SVG_WIDTH / 2) as i64 - 62 - 34;

fn chart_builder<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, (FONT, PANEL_CAPTION_FONT))
        .margin_top(8)
        .margin_left(PAD)
        .margin_right(18)
        .margin_bottom(4)
        .x_label_area_size(44)
        .y_label_area_size(62);
    b
}

fn draw_busbw_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    series: &[PlotSeries],
    x: &XRange,
    ceiling: Option<f64>,
) -> Result<(), ReportError> {
    let y_max = series
        .iter()
        .flat_map(|s| s.points().map(|p| p.1))
        .chain(ceiling)
        .fold(0.0_f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.12 } else { 1.0 };
    let mut chart = chart_builder(area, "bus bandwidth")
        .build_cartesian_2d(x.axis(PANEL_PLOT_W / 60), 0.0..y_max)
        .map_err(plot_err)?;
    let decimals = if y_max >= 20.0 {
        0
    } else if y_max >= 2.0 {
        1
    } else {
        (2.0 - y_max.log10().floor()).clamp(2.0, 9.0) as usize
    };
    let y_fmt = move |v: &f64| format!("{v:.decimals$}");
    chart
        .configure_mesh()
        .x_desc("message size (log2 scale)")
        .y_desc("busbw (GB/s)")
        .x_label_formatter(&size_label)
        .y_label_formatter(&y_fmt)
        .label_style((FONT, TICK_FONT))
        .axis_desc_style((FONT, AXIS_DESC_FONT))
        .light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.15))
        .draw()
        .map_err(plot_err)?;
    for (i, s) in series.iter().enumerate() {
        draw_lines(&mut chart, &s.oop_bw, &s.ip_bw, PALETTE[i % PALETTE.len()])?;
    }
    if let Some(c) = ceiling {
        let style = BLACK.mix(0.7).stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x.lo, c), (x.hi, c)],
                8,
                6,
                style,
            ))
            .map_err(plot_err)?;
        let grey = BLACK.mix(0.75);
        let text = TextStyle::from((FONT, TICK_FONT).into_font())
            .color(&grey)
            .pos(Pos::new(HPos::Left, VPos::Bottom));
        chart
            .draw_series(std::iter::once(Text::new(
                format!("peer-copy ceiling {c:.1} GB/s"),
                (x.lo + 0.3, c + y_max * 0.01),
                text,
            )))
            .map_err(plot_err)?;
    }
    Ok(())
}

fn draw_time_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    series: &[PlotSeries],
    x: &XRange,
) -> Result<(), ReportError> {
    let (lo, hi) =
        min_max(series.iter().flat_map(|s| s.times()).map(|p| p.1)).unwrap_or((0.0, 3.0));
    // A little margin around the data; labels at 1-2-5 steps when the data
    // spans at most 4 decades, else at whole decades.
    let (lo, hi) = (lo - 0.08, hi + 0.08);
    let one_two_five = hi - lo <= 4.0;
    let mut bold = Vec::new();
    let mut light = Vec::new();
    for e in (lo.floor() as i64)..=(hi.ceil() as i64) {
        for k in 1..10 {
            let v = e as f64 + f64::from(k).log10();
            if v < lo || v > hi {
                continue;
            }
            light.push(v);
            if k == 1 || (one_two_five && (k == 2 || k == 5)) {
                bold.push(v);
            }
        }
    }
    let axis = TickAxis {
        lo,
        hi,
        bold,
        light,
    };
    let mut chart = chart_builder(area, "time per call")
        .build_cartesian_2d(x.axis(PANEL_PLOT_W / 60), axis)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("message size (log2 scale)")
        .y_desc("time per call (log10 scale)")
        .x_label_formatter(&size_label)
        .y_label_formatter(&|v: &f64| time_label(10_f64.powf(*v)))
        .label_style((FONT, TICK_FONT))
        .axis_desc_style((FONT, AXIS_DESC_FONT))
        .light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.15))
        .draw()
        .map_err(plot_err)?;
    for (i, s) in series.iter().enumerate() {
        draw_lines(&mut chart, &s.oop_t, &s.ip_t, PALETTE[i % PALETTE.len()])?;
    }
    // Name each path where a series switches to it, just above the point.
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let style = TextStyle::from((FONT, SWITCH_FONT).into_font())
            .color(&color)
            .pos(Pos::new(HPos::Left, VPos::Bottom));
        let backdrop = WHITE.mix(0.85).filled();
        chart
            .draw_series(s.switches.iter().map(|(x, y, path)| {
                let w = text_width(path, rendered(SWITCH_FONT)).ceil() as i32;
                let h = SWITCH_FONT as i32;
                EmptyElement::at((*x, *y))
                    + PathElement::new(vec![(0, -4), (0, -10)], color.stroke_width(1))
                    + Rectangle::new([(-4, -13 - h), (w, -11)], backdrop)
                    + Text::new(path.clone(), (-2, -12), style.clone())
            }))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// `10 µs`, `2 ms`, `1.5 s`: 3 significant digits, trailing zeros dropped.
fn time_label(us: f64) -> String {
    let (v, unit) = if us >= 1e6 {
        (us / 1e6, "s")
    } else if us >= 1e3 {
        (us / 1e3, "ms")
    } else {
        (us, "µs")
    };
    let digits = (2.0 - v.log10().floor()).clamp(0.0, 3.0) as usize;
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    format!("{s} {unit}")
}

/// Out-of-place solid with dots, in-place dashed and lighter, one colour.
fn draw_lines<Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<TickAxis, Y>>,
    oop: &[(f64, f64)],
    ip: &[(f64, f64)],
    color: RGBColor,
) -> Result<(), ReportError>
where
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let light = color.mix(0.55);
    if !ip.is_empty() {
        chart
            .draw_series(DashedLineSeries::new(
                ip.iter().copied(),
                6,
                4,
                light.stroke_width(2),
            ))
            .map_err(plot_err)?;
        chart
            .draw_series(ip.iter().map(|p| Circle::new(*p, 2, light.filled())))
            .map_err(plot_err)?;
    }
    if !oop.is_empty() {
        chart
            .draw_series(LineSeries::new(oop.iter().copied(), color.stroke_width(2)))
            .map_err(plot_err)?;
        chart
            .draw_series(oop.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// Legend entries placed left to right, wrapping to a new row when the
/// next one would not fit in the width.
struct LegendLayout {
    /// (x offset px, row) of each entry.
    spots: Vec<(i32, u32)>,
    rows: u32,
}

impl LegendLayout {
    fn new(series: &[PlotSeries], width: f64) -> Self {
        let mut spots = Vec::with_capacity(series.len());
        let (mut x, mut row) = (0.0_f64, 0_u32);
        for s in series {
            let w = f64::from(LEGEND_SAMPLE_W) + 8.0 + text_width(&s.label, rendered(LEGEND_FONT));
            if x > 0.0 && x + w > width {
                x = 0.0;
                row += 1;
            }
            spots.push((x.round() as i32, row));
            x += w + f64::from(LEGEND_COL_GAP);
        }
        LegendLayout {
            rows: if series.is_empty() { 0 } else { row + 1 },
            spots,
        }
    }

    /// Legend height: the entry rows, the note line and padding.
    fn height(&self) -> u32 {
        12 + self.rows * LEGEND_ROW_H + LEGEND_ROW_H + 8
    }
}

fn draw_legend(
    area: &DrawingArea<SVGBackend, Shift>,
    layout: &LegendLayout,
    series: &[PlotSeries],
    note: &str,
) -> Result<(), ReportError> {
    let font =
        TextStyle::from((FONT, LEGEND_FONT).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let x0 = PAD as i32 + 8;
    let y0 = 12 + LEGEND_ROW_H as i32 / 2;
    for (i, (s, (dx, row))) in series.iter().zip(&layout.spots).enumerate() {
        let x = x0 + dx;
        let y = y0 + (row * LEGEND_ROW_H) as i32;
        let color = PALETTE[i % PALETTE.len()];
        let light = color.mix(0.55);
        area.draw(&PathElement::new(
            vec![(x, y), (x + 22, y)],
            color.stroke_width(2),
        ))
        .map_err(plot_err)?;
        area.draw(&Circle::new((x + 11, y), 3, color.filled()))
            .map_err(plot_err)?;
        area.draw(&DashedPathElement::new(
            vec![(x + 28, y), (x + LEGEND_SAMPLE_W, y)],
            5,
            3,
            light.stroke_width(2),
        ))
        .map_err(plot_err)?;
        area.draw(&Text::new(
            s.label.as_str(),
            (x + LEGEND_SAMPLE_W + 8, y),
            font.clone(),
        ))
        .map_err(plot_err)?;
    }
    let y = y0 + (layout.rows * LEGEND_ROW_H) as i32;
    let grey = font.color(&RGBColor(90, 90, 90));
    area.draw(&Text::new(note, (x0, y), grey))
        .map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests;

/// Renders plots to look at: `RINGREDUCE_PLOT_DIR=/tmp/plots cargo test
/// --release --lib review_plots -- --ignored`; with `RINGREDUCE_PLOT_JSON`
/// set to a report written by `bench -J`, that report is plotted too.
#[cfg(test)]
mod review {
    use super::super::fixtures::*;
    use super::super::{Measurement, ALL_REDUCE};
    use super::*;

    /// 8 B .. 1 GiB, four contenders with latency + size / bandwidth times;
    /// `auto` runs one-shot up to 64 KiB and the ring above.
    pub fn realistic() -> Report {
        let model: [(&str, f64, f64); 4] = [
            ("nccl", 14.0, 330.0),
            ("nccl:graph", 9.5, 335.0),
            ("auto", 0.0, 0.0),
            ("ps", 30.0, 180.0),
        ];
        let mut rows = Vec::new();
        for e in 3..=30 {
            let size = 1_u64 << e;
            for (algo, lat, bw) in model {
                let (path, lat, bw) = match algo {
                    "auto" if size <= 64 << 10 => (Some("oneshot:fused"), 6.0, 120.0),
                    "auto" => (Some("ring:pipe2"), 20.0, 380.0),
                    "ps" => (Some("ps"), lat, bw),
                    _ => (None, lat, bw),
                };
                let t = lat + size as f64 / (bw * 1e3);
                let wiggle = 1.0 + 0.04 * ((e * 7 % 5) as f64 - 2.0) / 2.0;
                rows.push(Row {
                    out_of_place: Some(Measurement::new(ALL_REDUCE, size, 2, t, Some(0))),
                    in_place: Some(Measurement::new(ALL_REDUCE, size, 2, t * wiggle, Some(0))),
                    ..row(algo, path, size, 1.0, 1.0)
                });
            }
        }
        let mut header = header();
        header.hardware = vec![
            "NVIDIA H200".into(),
            "NVIDIA H200".into(),
            "CUDA driver API 13000".into(),
            "setup: driver load+cuInit 241.2 ms (once per process)".into(),
        ];
        header.driver = Some("CUDA driver API 13000".into());
        header.nccl_version = Some("2.28.3 (/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3)".into());
        header.backend = "cuda: GPU0 NVIDIA H200, GPU1 NVIDIA H200 (2 ranks on 2 GPUs: 0->GPU0 1->GPU1); driver API 13000".into();
        header.link_ceiling_gbps = Some(387.14);
        Report {
            header,
            cold_start: vec![],
            rows,
            breakdown: vec![],
        }
    }

    #[test]
    #[ignore = "writes plots to look at"]
    fn review_plots() {
        let dir =
            std::env::var_os("RINGREDUCE_PLOT_DIR").map_or_else(std::env::temp_dir, Into::into);
        realistic().write_svg(&dir.join("realistic.svg")).unwrap();
        // Long names, many contenders, several combinations, no ceiling.
        let mut stress = realistic();
        stress.header.hardware =
            vec!["AMD Instinct MI300X OAM with a very long marketing name".into(); 8];
        stress.header.backend = "a-backend-with-a-long-name-and-no-colon ".repeat(6);
        stress.header.link_ceiling_gbps = None;
        let extra: Vec<Row> = stress
            .rows
            .iter()
            .filter(|r| r.algo == "auto")
            .flat_map(|r| {
                ["ring", "ring:graph", "oneshot", "tree"].map(|a| Row {
                    algo: a.into(),
                    path: Some(format!("{a}:variant-{}", r.size.trailing_zeros() / 6)),
                    ..r.clone()
                })
            })
            .collect();
        stress.rows.extend(extra);
        stress.rows.push(Row {
            collective: super::super::ALL_GATHER,
            ..stress.rows[0].clone()
        });
        stress.rows.push(Row {
            dtype: ringreduce::element::DataType::Bfloat16,
            ..stress.rows[0].clone()
        });
        stress.write_svg(&dir.join("stress.svg")).unwrap();
        if let Some(json) = std::env::var_os("RINGREDUCE_PLOT_JSON") {
            let text = std::fs::read_to_string(json).unwrap();
            Report::from_json(&text)
                .unwrap()
                .write_svg(&dir.join("from_json.svg"))
                .unwrap();
        }
    }
}
