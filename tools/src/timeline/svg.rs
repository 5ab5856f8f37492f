//! The timeline as an SVG picture that reads without any viewer.
//!
//! ```text
//! +-----------------------------------------------------------------+
//! | title: what ran, on what, the clock                              |
//! |                  call 1          call 2            nccl          |
//! | rank 0 compute  [RS0][RS1]..   [RS0]..                           |
//! | rank 0 copy         [copy]..                                     |
//! | rank 1 ...       arrows: waits across ranks and lanes            |
//! | NCCL rank 0                                    [nccl all-reduce] |
//! | time axis (us from the earliest start)                           |
//! | legend: colours per phase and kind; notes                        |
//! +-----------------------------------------------------------------+
//! ```
//!
//! Written by hand (rectangles, lines, text), one row per rank and lane in
//! use and one per rank for NCCL; colours per phase (reduce-scatter blue,
//! all-gather green, unphased orange), darker for kernels than for copies;
//! a slice carries its label when it is wide enough, and a `<title>` with
//! everything for viewers that show tooltips.

use super::{track_name, Category, Slice, Timeline, NCCL_TRACK, OP_TRACKS};
use ringreduce::backend::BackendKind;
use ringreduce::schedule::Phase;
use std::fmt::Write as _;

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 200.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 92.0;
const ROW_H: f64 = 24.0;
const ROW_GAP: f64 = 4.0;
const GROUP_GAP: f64 = 12.0;
const FONT: &str = "sans-serif";
/// Most wait arrows drawn (more only clutter the picture).
const MAX_ARROWS: usize = 4000;
/// Average width of a character of the 11 px label font, px.
const CHAR_W: f64 = 6.2;

/// XML-escaped text.
pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// (fill, text colour) of a slice.
fn colours(s: &Slice) -> (&'static str, &'static str) {
    match (s.category, s.phase) {
        (Category::Nccl, _) => ("#6a51a3", "#ffffff"),
        (Category::Marker, _) => ("#9e9e9e", "#000000"),
        (Category::Copy, Some(Phase::ReduceScatter)) => ("#9ecae1", "#000000"),
        (Category::Reduce, Some(Phase::ReduceScatter)) => ("#2171b5", "#ffffff"),
        (Category::Copy, Some(Phase::AllGather)) => ("#a1d99b", "#000000"),
        (Category::Reduce, Some(Phase::AllGather)) => ("#238b45", "#ffffff"),
        (Category::Copy, None) => ("#fdae6b", "#000000"),
        (Category::Reduce, None) => ("#d94801", "#ffffff"),
    }
}

/// A round tick step for a span of `span` units with about `n` ticks.
pub(super) fn tick_step(span: f64, n: f64) -> f64 {
    if span.is_nan() || span <= 0.0 {
        return 1.0;
    }
    let raw = span / n;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    };
    k * p
}

/// A number of microseconds for an axis label.
fn fmt_us(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else if step >= 0.1 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The picture of `t`.
pub fn to_svg(t: &Timeline) -> Result<String, String> {
    let mut slices = t.slices()?;
    let flows = t.flows(&slices);
    let ranks = t.ranks();
    let shift = align_nccl(&mut slices);
    let lay = Layout::of(&slices, ranks);
    let mut notes = note_lines(t, flows.len());
    if let Some((ns, call)) = shift {
        notes.extend(wrap(
            &format!(
                "NCCL's call ran {:.3} ms after the start of call {call}: its rows are drawn shifted to start with that call, on the same time scale (the JSON and the text report keep the true times)",
                ns / 1e6
            ),
            ((WIDTH - 32.0) / (CHAR_W * 1.05)) as usize,
        ));
    }
    let legend_y = lay.plot_bottom + 48.0;
    let height = legend_y + 30.0 + 16.0 * notes.len() as f64 + 16.0;

    let mut o = String::new();
    head(&mut o, t, height);
    axis(&mut o, &lay, t.is_ideal());
    launch_marks(&mut o, t, &lay, shift.map_or(0.0, |(ns, _)| ns));
    row_labels(&mut o, t, &lay);
    draw_slices(&mut o, &slices, &lay);
    // Waits.
    if flows.len() <= MAX_ARROWS {
        for f in &flows {
            let (a, b) = (&slices[f.from], &slices[f.to]);
            let (Some(ia), Some(ib)) = (lay.row_of(a.rank, a.track), lay.row_of(b.rank, b.track))
            else {
                continue;
            };
            let ya = lay.row_y[ia] + ROW_H / 2.0;
            let yb = lay.row_y[ib] + ROW_H / 2.0;
            let _ = writeln!(
                o,
                r##"<line x1="{:.2}" y1="{ya:.1}" x2="{:.2}" y2="{yb:.1}" stroke="#444" stroke-opacity="0.45" stroke-width="0.8" marker-end="url(#arrow)"/>"##,
                lay.x(a.end_ns),
                lay.x(b.start_ns)
            );
        }
    }
    legend(&mut o, &slices, legend_y, &notes);
    o.push_str("</svg>\n");
    Ok(o)
}

/// NCCL's calls run after ringreduce's, often milliseconds later (its own
/// warm-up, the host in between): on one axis the ring would shrink to a
/// strip at the left edge. NCCL's slices are moved, on the same scale, so
/// that its first call starts where ringreduce's last timed call starts.
/// Returns the shift (ns) and that call's number (from 1), if any.
pub(super) fn align_nccl(slices: &mut [Slice]) -> Option<(f64, usize)> {
    let last = slices.iter().filter(|s| !s.nccl).map(|s| s.call).max()?;
    let ring_start = slices
        .iter()
        .filter(|s| !s.nccl && s.call == last)
        .map(|s| s.start_ns)
        .fold(f64::INFINITY, f64::min);
    let nccl_start = slices
        .iter()
        .filter(|s| s.nccl)
        .map(|s| s.start_ns)
        .fold(f64::INFINITY, f64::min);
    let shift = nccl_start - ring_start;
    if !shift.is_finite() || shift <= 0.0 {
        return None;
    }
    for s in slices.iter_mut().filter(|s| s.nccl) {
        s.start_ns -= shift;
        s.end_ns -= shift;
    }
    Some((shift, last + 1))
}

/// Where things go: a row per (rank, lane) in use, then NCCL's rows, and
/// the time axis.
struct Layout {
    rows: Vec<(usize, usize)>,
    row_y: Vec<f64>,
    plot_bottom: f64,
    t_end: f64,
    plot_w: f64,
}

impl Layout {
    fn of(slices: &[Slice], ranks: usize) -> Layout {
        // Rows: every (rank, track) in use (the lanes, then the network),
        // then NCCL's rows.
        let mut rows: Vec<(usize, usize)> = Vec::new();
        for r in 0..ranks {
            for track in OP_TRACKS {
                if slices
                    .iter()
                    .any(|s| !s.nccl && s.rank == r && s.track == track)
                {
                    rows.push((r, track));
                }
            }
        }
        for r in 0..ranks {
            if slices.iter().any(|s| s.nccl && s.rank == r) {
                rows.push((r, NCCL_TRACK));
            }
        }
        let mut row_y: Vec<f64> = Vec::with_capacity(rows.len());
        let mut y = TOP;
        for (i, &(r, tr)) in rows.iter().enumerate() {
            if i > 0 {
                let (pr, ptr) = rows[i - 1];
                y += if pr != r || (ptr == NCCL_TRACK) != (tr == NCCL_TRACK) {
                    GROUP_GAP
                } else {
                    ROW_GAP
                };
            }
            row_y.push(y);
            y += ROW_H;
        }
        let plot_bottom = y;
        let t_end = slices
            .iter()
            .map(|s| s.end_ns)
            .fold(0.0f64, f64::max)
            .max(1.0);
        Layout {
            rows,
            row_y,
            plot_bottom,
            t_end,
            plot_w: WIDTH - LEFT - RIGHT,
        }
    }

    /// The row of (rank, track), if it has one.
    fn row_of(&self, rank: usize, track: usize) -> Option<usize> {
        self.rows.iter().position(|&x| x == (rank, track))
    }

    /// The x of a time.
    fn x(&self, ns: f64) -> f64 {
        LEFT + ns.clamp(0.0, self.t_end) / self.t_end * self.plot_w
    }
}

/// The document's start, the title and the clock.
fn head(o: &mut String, t: &Timeline, height: f64) {
    let ranks = t.ranks();
    let _ = writeln!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="{FONT}">"##
    );
    let _ = writeln!(
        o,
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#444"/></marker></defs>"##
    );
    let _ = writeln!(
        o,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height:.0}" fill="#ffffff"/>"##
    );
    // Title.
    let paths: Vec<String> = {
        let mut v: Vec<String> = t.calls.iter().map(|c| c.plan.name.clone()).collect();
        v.dedup();
        v
    };
    let mut title = format!(
        "{} · {} · {}",
        paths.join(", "),
        t.what,
        ringreduce::words::counted(ranks, "rank")
    );
    // An idealized schedule timed no call.
    if !t.is_ideal() {
        let _ = write!(
            title,
            " · {}{}",
            ringreduce::words::counted(t.calls.len(), "timed call"),
            if t.nccl.is_empty() { "" } else { " + NCCL" }
        );
    }
    let _ = writeln!(
        o,
        r##"<text x="{}" y="26" font-size="18" font-weight="bold" text-anchor="middle">{}</text>"##,
        WIDTH / 2.0,
        esc(&title)
    );
    let clock = match t.kind {
        _ if t.is_ideal() => "not a measurement",
        BackendKind::Cuda => "GPU timestamps on one clock",
        BackendKind::Cpu => "host timestamps (CPU backend)",
    };
    let _ = writeln!(
        o,
        r##"<text x="{}" y="46" font-size="13" fill="#333" text-anchor="middle">{}</text>"##,
        WIDTH / 2.0,
        esc(&format!("{} · {clock}", t.backend))
    );
}

/// The grid and the time axis.
fn axis(o: &mut String, lay: &Layout, ideal: bool) {
    let (plot_bottom, plot_w, t_end) = (lay.plot_bottom, lay.plot_w, lay.t_end);
    let x = |ns: f64| lay.x(ns);
    let span_us = t_end / 1e3;
    let step = tick_step(span_us, 12.0);
    let mut v = 0.0;
    while v <= span_us + 1e-9 {
        let xx = x(v * 1e3);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#e0e0e0" stroke-width="1"/>"##,
            TOP - 6.0,
            plot_bottom + 4.0
        );
        let _ = writeln!(
            o,
            r##"<text x="{xx:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#333">{}</text>"##,
            plot_bottom + 18.0,
            fmt_us(v, step)
        );
        v += step;
    }
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333" stroke-width="1"/>"##,
        plot_bottom + 4.0,
        WIDTH - RIGHT,
        plot_bottom + 4.0
    );
    let what = if ideal {
        "time (units of the idealized schedule)"
    } else {
        "time (µs from the earliest op start)"
    };
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">{what}</text>"##,
        LEFT + plot_w / 2.0,
        plot_bottom + 34.0
    );
}

/// A dashed line at each call's launch, labelled where there is room.
/// NCCL's marks move with its rows (`nccl_shift_ns`, see [`align_nccl`]).
fn launch_marks(o: &mut String, t: &Timeline, lay: &Layout, nccl_shift_ns: f64) {
    let plot_bottom = lay.plot_bottom;
    let x = |ns: f64| lay.x(ns);
    let zero = t.zero_ns();
    let mut marks: Vec<(f64, String)> = t
        .calls
        .iter()
        .enumerate()
        .map(|(k, c)| (c.times.launch_ns - zero, format!("call {}", k + 1)))
        .collect();
    for (k, c) in t.nccl.iter().enumerate() {
        let shifted = if nccl_shift_ns > 0.0 {
            " (shifted)"
        } else {
            ""
        };
        marks.push((
            c.launch_ns - zero - nccl_shift_ns,
            format!("nccl {}{shifted}", k + 1),
        ));
    }
    let mut last_label_x = f64::NEG_INFINITY;
    for (ns, label) in marks {
        let xx = x(ns.max(0.0));
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#888" stroke-dasharray="3,3" stroke-width="1"/>"##,
            TOP - 14.0,
            plot_bottom
        );
        if xx - last_label_x > 60.0 {
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#555">{} launched</text>"##,
                xx + 2.0,
                TOP - 16.0,
                esc(&label)
            );
            last_label_x = xx;
        }
    }
}

/// Each row's band and label.
fn row_labels(o: &mut String, t: &Timeline, lay: &Layout) {
    let (rows, row_y, plot_w) = (&lay.rows, &lay.row_y, lay.plot_w);
    for (i, &(r, tr)) in rows.iter().enumerate() {
        let yy = row_y[i];
        let label = match (tr, t.kind) {
            (NCCL_TRACK, _) => format!("NCCL rank {r}"),
            (_, BackendKind::Cuda) => format!(
                "rank {r} (GPU {}) {}",
                t.rank_to_device.get(r).copied().unwrap_or(0),
                track_name(tr)
            ),
            (_, BackendKind::Cpu) => format!("rank {r} {}", track_name(tr)),
        };
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{yy:.1}" width="{plot_w:.1}" height="{ROW_H}" fill="{}"/>"##,
            if i % 2 == 0 { "#f7f7f7" } else { "#fbfbfb" }
        );
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end" fill="#111">{}</text>"##,
            LEFT - 8.0,
            yy + ROW_H / 2.0 + 4.0,
            esc(&label)
        );
    }
}

/// Every op as a box with its tip, labelled where it fits.
fn draw_slices(o: &mut String, slices: &[Slice], lay: &Layout) {
    let row_y = &lay.row_y;
    let x = |ns: f64| lay.x(ns);
    for s in slices {
        let Some(i) = lay.row_of(s.rank, s.track) else {
            continue;
        };
        let yy = row_y[i];
        let (x0, x1) = (x(s.start_ns), x(s.end_ns));
        let w = (x1 - x0).max(0.8);
        let (fill, fg) = colours(s);
        let (ry, rh) = if s.category == Category::Marker {
            (yy + ROW_H * 0.3, ROW_H * 0.4)
        } else {
            (yy + 2.0, ROW_H - 4.0)
        };
        let mut tip = format!(
            "rank {} {}: {} · {:.2} µs at {:.2} µs",
            s.rank,
            track_name(s.track),
            s.name,
            s.dur_ns() / 1e3,
            s.start_ns / 1e3
        );
        if s.bytes > 0 {
            let _ = write!(tip, " · {}", ringreduce::size::format_bytes(s.bytes));
        }
        if let Some(g) = s.gbps() {
            let _ = write!(tip, " · {g:.1} GB/s");
        }
        let _ = writeln!(
            o,
            r##"<rect x="{x0:.2}" y="{ry:.1}" width="{w:.2}" height="{rh:.1}" fill="{fill}" stroke="#ffffff" stroke-width="0.4"><title>{}</title></rect>"##,
            esc(&tip)
        );
        let label = if s.nccl {
            s.name.clone()
        } else {
            s.name
                .split_once(' ')
                .map_or(s.name.clone(), |(_, rest)| rest.to_string())
        };
        if s.category != Category::Marker && w > CHAR_W * label.chars().count() as f64 + 6.0 {
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="{fg}" text-anchor="middle">{}</text>"##,
                x0 + w / 2.0,
                yy + ROW_H / 2.0 + 4.0,
                esc(&label)
            );
        }
    }
}

/// The legend of the colours present, the arrows, and the notes.
fn legend(o: &mut String, slices: &[Slice], legend_y: f64, notes: &[String]) {
    let mut entries: Vec<(&str, &str)> = Vec::new();
    let has = |c: Category, p: Option<Phase>| {
        slices.iter().any(|s| {
            s.category == c && (c == Category::Nccl || c == Category::Marker || s.phase == p)
        })
    };
    for (c, p, label) in [
        (
            Category::Copy,
            Some(Phase::ReduceScatter),
            "reduce-scatter copy",
        ),
        (
            Category::Reduce,
            Some(Phase::ReduceScatter),
            "reduce-scatter reduce",
        ),
        (Category::Copy, Some(Phase::AllGather), "all-gather copy"),
        (
            Category::Reduce,
            Some(Phase::AllGather),
            "all-gather reduce",
        ),
        (Category::Copy, None, "copy"),
        (Category::Reduce, None, "reduce / exchange kernel"),
        (Category::Marker, None, "begin / end"),
        (Category::Nccl, None, "NCCL call"),
    ] {
        if has(c, p) {
            let probe = Slice {
                category: c,
                phase: p,
                ..slices[0].clone()
            };
            entries.push((colours(&probe).0, label));
        }
    }
    let mut lx = LEFT;
    for (fill, label) in entries {
        let _ = writeln!(
            o,
            r##"<rect x="{lx:.1}" y="{:.1}" width="14" height="12" fill="{fill}"/><text x="{:.1}" y="{:.1}" font-size="12" fill="#111">{}</text>"##,
            legend_y,
            lx + 18.0,
            legend_y + 10.5,
            esc(label)
        );
        lx += 18.0 + CHAR_W * 1.1 * label.len() as f64 + 20.0;
    }
    let _ = writeln!(
        o,
        r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#444" stroke-width="1" marker-end="url(#arrow)"/><text x="{:.1}" y="{:.1}" font-size="12" fill="#111">wait for another rank or lane</text>"##,
        legend_y + 6.0,
        lx + 26.0,
        legend_y + 6.0,
        lx + 32.0,
        legend_y + 10.5
    );
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(
            o,
            r##"<text x="16" y="{:.1}" font-size="12" fill="#333">{}</text>"##,
            legend_y + 34.0 + 16.0 * i as f64,
            esc(n)
        );
    }
}

/// The picture's notes: clock, spans, the caller's notes.
fn note_lines(t: &Timeline, flows: usize) -> Vec<String> {
    let mut v = vec![format!("clock: {}", t.clock())];
    v.extend(t.spans());
    if flows > MAX_ARROWS {
        v.push(format!(
            "{flows} waits: too many to draw (see the JSON for the arrows)"
        ));
    }
    v.extend(t.notes.iter().cloned());
    // Long lines are wrapped at the picture's width.
    let max = ((WIDTH - 32.0) / (CHAR_W * 1.05)) as usize;
    v.iter().flat_map(|l| wrap(l, max)).collect()
}

/// `line` cut at spaces into pieces of at most `max` characters (a longer
/// word stays whole); continuation lines are indented.
pub(super) fn wrap(line: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in line.split(' ') {
        let extra = if cur.is_empty() { 0 } else { 1 };
        if !cur.is_empty() && cur.chars().count() + extra + word.chars().count() > max {
            out.push(std::mem::take(&mut cur));
            cur.push_str("    ");
        }
        if !cur.is_empty() && !cur.ends_with("    ") {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}
