//! Benchmark results: data types, nccl-tests-style text, JSON, CSV and an SVG plot.
//!
//! # Definitions (as in nccl-tests, `doc/PERFORMANCE.md`)
//!
//! For an all-reduce of `S` bytes per rank over `N` ranks that takes `t` seconds:
//!
//! * **algbw** = `S / t`, in GB/s with 1 GB = 1e9 B ([`algbw_gbps`]).
//! * **busbw** = `algbw * 2(N-1)/N` ([`busbw_factor`]). The factor is the
//!   fraction of the data each rank must send (and receive) in an optimal
//!   all-reduce, so busbw is comparable with the link's hardware bandwidth and
//!   independent of `N`. As in nccl-tests the factor is `0` for `N = 1`, so a
//!   single rank reports a busbw of 0.
//!
//! A [`Measurement`] whose `wrong` is `None` was not checked and prints `N/A`,
//! like nccl-tests run with `-c 0`. A non-positive or non-finite time yields
//! `algbw = busbw = 0` (rather than infinity) so the JSON output stays valid.
//!
//! # Text output
//!
//! [`Report::render_algo_table`] reproduces the nccl-tests column layout
//! character for character (116 columns; a row's `path`, if any, is appended
//! after the last column). Every other line [`Report::render_all`] produces
//! starts with `#`, so tools that parse nccl-tests output by skipping `#`
//! lines see only the data rows.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Errors from writing the SVG plot.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Creating or writing the output file failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The plotting library reported an error (includes its write errors).
    #[error("plotting failed: {0}")]
    Plot(String),
}

/// One timed all-reduce configuration (out-of-place or in-place).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    /// Mean time per all-reduce, microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s (1e9 B/s).
    pub algbw: f64,
    /// Bus bandwidth, GB/s (1e9 B/s).
    pub busbw: f64,
    /// Number of wrong elements; `None` = not checked (printed `N/A`).
    pub wrong: Option<u64>,
}

impl Measurement {
    /// Builds a measurement, computing algbw and busbw from the size per rank,
    /// the rank count and the time.
    pub fn new(size_bytes: u64, ranks: usize, time_us: f64, wrong: Option<u64>) -> Self {
        let algbw = algbw_gbps(size_bytes, time_us);
        Measurement {
            time_us,
            algbw,
            busbw: algbw * busbw_factor(ranks),
            wrong,
        }
    }
}

/// `size_bytes / time` in GB/s (1e9 B/s); 0 when `time_us` is not a positive
/// finite number.
pub fn algbw_gbps(size_bytes: u64, time_us: f64) -> f64 {
    if time_us.is_finite() && time_us > 0.0 {
        // bytes / (us * 1e-6 s) / 1e9 = bytes / (us * 1e3)
        size_bytes as f64 / (time_us * 1e3)
    } else {
        0.0
    }
}

/// The nccl-tests all-reduce bus-bandwidth factor `2(N-1)/N` (0 for `N <= 1`).
pub fn busbw_factor(ranks: usize) -> f64 {
    if ranks <= 1 {
        0.0
    } else {
        let n = ranks as f64;
        2.0 * (n - 1.0) / n
    }
}

/// One line of results: one algorithm at one message size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Algorithm name, e.g. `"ring"` or `"nccl"`; the plot's series key.
    pub algo: String,
    /// Optional implementation path detail, e.g. `"ring:pipe4"`.
    pub path: Option<String>,
    /// Number of ranks.
    pub ranks: usize,
    /// Bytes per rank.
    pub size: u64,
    /// Elements per rank.
    pub count: u64,
    /// Element type name, e.g. `"float"`.
    #[serde(rename = "type")]
    pub dtype: String,
    /// Reduction operator name, e.g. `"sum"`.
    pub redop: String,
    /// Out-of-place result (separate send and receive buffers).
    pub out_of_place: Option<Measurement>,
    /// In-place result (receive buffer = send buffer).
    pub in_place: Option<Measurement>,
}

/// Cold-start cost of one algorithm at one size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ColdStart {
    /// Algorithm name.
    pub algo: String,
    /// Bytes per rank.
    pub size: u64,
    /// Communicator / buffer setup, milliseconds.
    pub setup_ms: f64,
    /// First all-reduce call (including lazy initialisation), milliseconds.
    pub first_call_ms: f64,
    /// Steady-state time per call after warm-up, microseconds.
    pub steady_us: f64,
}

/// Run metadata, printed as `#` lines before the tables.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// Tool name.
    pub tool: String,
    /// Tool version.
    pub version: String,
    /// Date/time of the run.
    pub date: String,
    /// Command line.
    pub command: String,
    /// Hardware description lines (the first one appears in the plot title).
    pub hardware: Vec<String>,
    /// Driver version, if known.
    pub driver: Option<String>,
    /// NCCL version, if NCCL was used.
    pub nccl_version: Option<String>,
    /// Number of ranks.
    pub ranks: usize,
    /// Number of devices.
    pub devices: usize,
    /// `rank_to_device[r]` is the device rank `r` runs on.
    pub rank_to_device: Vec<usize>,
    /// Backend name, e.g. `"cuda"` or `"cpu"`.
    pub backend: String,
    /// How time was measured.
    pub timing: String,
    /// Timed iterations per measurement.
    pub iters: usize,
    /// Warm-up iterations per measurement.
    pub warmup: usize,
    /// Measured peer-copy bandwidth ceiling, GB/s.
    pub link_ceiling_gbps: Option<f64>,
    /// Free-form notes.
    pub notes: Vec<String>,
}

/// A complete benchmark report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Run metadata.
    pub header: Header,
    /// Cold-start measurements.
    pub cold_start: Vec<ColdStart>,
    /// Result rows, in the order they were measured.
    pub rows: Vec<Row>,
}

impl Report {
    /// Pretty-printed JSON of the whole report (header, cold_start, rows).
    pub fn to_json(&self) -> String {
        match serde_json::to_string_pretty(self) {
            Ok(s) => s,
            // Unreachable for these types; keep the output valid JSON anyway.
            Err(e) => serde_json::json!({ "error": e.to_string() }).to_string(),
        }
    }

    /// Writes [`Report::to_json`] (plus a trailing newline) to `path`.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        let mut s = serde_json::to_string_pretty(self).map_err(io::Error::from)?;
        s.push('\n');
        std::fs::write(path, s)
    }

    /// Writes one CSV line per row, after a header line. `None` values are
    /// empty cells; text cells are quoted when needed (RFC 4180).
    pub fn write_csv(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.to_csv())
    }

    /// The CSV text written by [`Report::write_csv`].
    fn to_csv(&self) -> String {
        let mut s = String::from(
            "algo,path,ranks,size,count,type,redop,\
             oop_time_us,oop_algbw,oop_busbw,oop_wrong,\
             ip_time_us,ip_algbw,ip_busbw,ip_wrong\n",
        );
        for r in &self.rows {
            let mut cells = vec![
                csv_cell(&r.algo),
                r.path.as_deref().map(csv_cell).unwrap_or_default(),
                r.ranks.to_string(),
                r.size.to_string(),
                r.count.to_string(),
                csv_cell(&r.dtype),
                csv_cell(&r.redop),
            ];
            for m in [&r.out_of_place, &r.in_place] {
                match m {
                    Some(m) => {
                        cells.push(m.time_us.to_string());
                        cells.push(m.algbw.to_string());
                        cells.push(m.busbw.to_string());
                        cells.push(m.wrong.map(|w| w.to_string()).unwrap_or_default());
                    }
                    None => cells.extend(["", "", "", ""].map(String::from)),
                }
            }
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }

    /// Algorithm names in order of first appearance in `rows`.
    pub fn algos(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !out.contains(&r.algo.as_str()) {
                out.push(&r.algo);
            }
        }
        out
    }

    /// Writes a 900x560 SVG plot of busbw vs message size to `path`.
    ///
    /// One colour per algorithm (the series key is `algo`; `path` is ignored):
    /// out-of-place is a solid line, in-place a dashed lighter line of the same
    /// colour. The x axis is log2 of the size in bytes. When several rows share
    /// an (algo, size), the highest busbw is plotted. A dashed horizontal line
    /// marks `link_ceiling_gbps` ("peer-copy ceiling") when present.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        use plotters::prelude::*;

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

        let series = self.plot_series();
        let xs = series
            .iter()
            .flat_map(|s| s.oop.iter().chain(s.ip.iter()).map(|p| p.0));
        let (x_lo, x_hi) = xs
            .fold(None, |acc: Option<(f64, f64)>, x| match acc {
                None => Some((x, x)),
                Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
            })
            .unwrap_or((3.0, 30.0));
        let (x0, x1) = (x_lo - 0.5, x_hi + 0.5);
        let ceiling = self
            .header
            .link_ceiling_gbps
            .filter(|c| c.is_finite() && *c > 0.0);
        let y_max = series
            .iter()
            .flat_map(|s| s.oop.iter().chain(s.ip.iter()).map(|p| p.1))
            .chain(ceiling)
            .fold(0.0_f64, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.12 } else { 1.0 };

        // Tick marks at integer powers of two; labels every `step` exponents,
        // always on multiples of `step` so 1KiB / 1MiB / 1GiB are labelled.
        let e_lo = x0.ceil() as i64;
        let e_hi = x1.floor() as i64;
        let span = (e_hi - e_lo).max(0);
        let step = [1_i64, 2, 5, 10]
            .into_iter()
            .find(|s| span / s <= 12)
            .unwrap_or(10);
        let bold: Vec<f64> = (e_lo..=e_hi)
            .filter(|e| e.rem_euclid(step) == 0)
            .map(|e| e as f64)
            .collect();
        let light: Vec<f64> = (e_lo..=e_hi).map(|e| e as f64).collect();

        let hw = self
            .header
            .hardware
            .first()
            .map(String::as_str)
            .unwrap_or("unknown hardware");
        let title = format!(
            "all-reduce busbw: {} ranks, {} backend, {}",
            self.header.ranks, self.header.backend, hw
        );

        let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(
                Log2Axis {
                    lo: x0,
                    hi: x1,
                    bold,
                    light,
                },
                0.0..y_max,
            )
            .map_err(plot_err)?;
        let x_fmt = |v: &f64| {
            let e = v.round();
            if (0.0..64.0).contains(&e) {
                format_size(1_u64 << (e as u32))
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc("message size per rank (bytes, log2 scale)")
            .y_desc("busbw (GB/s)")
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&|v: &f64| format!("{v:.0}"))
            .light_line_style(BLACK.mix(0.06))
            .bold_line_style(BLACK.mix(0.15))
            .draw()
            .map_err(plot_err)?;

        for (i, s) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let solid = color.stroke_width(2);
            let light_color = color.mix(0.55);
            let dashed = light_color.stroke_width(2);
            if !s.oop.is_empty() {
                chart
                    .draw_series(LineSeries::new(s.oop.iter().copied(), solid))
                    .map_err(plot_err)?
                    .label(s.algo.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], solid));
                chart
                    .draw_series(s.oop.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(plot_err)?;
            }
            if !s.ip.is_empty() {
                chart
                    .draw_series(DashedLineSeries::new(s.ip.iter().copied(), 6, 4, dashed))
                    .map_err(plot_err)?
                    .label(format!("{} (in-place)", s.algo))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], dashed));
                chart
                    .draw_series(
                        s.ip.iter()
                            .map(|p| Circle::new(*p, 2, light_color.filled())),
                    )
                    .map_err(plot_err)?;
            }
        }
        if let Some(c) = ceiling {
            let style = BLACK.stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new(vec![(x0, c), (x1, c)], 8, 6, style))
                .map_err(plot_err)?
                .label(format!("peer-copy ceiling ({c:.1} GB/s)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
        Ok(())
    }

    /// Per-algo (log2 size, busbw) points, sorted by size, best per size.
    fn plot_series(&self) -> Vec<PlotSeries> {
        self.algos()
            .into_iter()
            .map(|algo| {
                let mut oop: BTreeMap<u64, f64> = BTreeMap::new();
                let mut ip: BTreeMap<u64, f64> = BTreeMap::new();
                for r in self.rows.iter().filter(|r| r.algo == algo && r.size > 0) {
                    for (m, map) in [(&r.out_of_place, &mut oop), (&r.in_place, &mut ip)] {
                        if let Some(m) = m.as_ref().filter(|m| m.busbw.is_finite()) {
                            let e = map.entry(r.size).or_insert(m.busbw);
                            *e = e.max(m.busbw);
                        }
                    }
                }
                let pts = |map: BTreeMap<u64, f64>| {
                    map.into_iter()
                        .map(|(size, bw)| ((size as f64).log2(), bw))
                        .collect()
                };
                PlotSeries {
                    algo: algo.to_string(),
                    oop: pts(oop),
                    ip: pts(ip),
                }
            })
            .collect()
    }

    /// `#`-prefixed run metadata, in the spirit of the nccl-tests preamble.
    pub fn render_header(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        let _ = writeln!(s, "# {} {}", h.tool, h.version);
        let _ = writeln!(s, "# Date: {}", h.date);
        let _ = writeln!(s, "# Command: {}", h.command);
        for hw in &h.hardware {
            let _ = writeln!(s, "# Hardware: {hw}");
        }
        let _ = writeln!(s, "# Driver: {}", h.driver.as_deref().unwrap_or("n/a"));
        let _ = writeln!(
            s,
            "# NCCL version: {}",
            h.nccl_version.as_deref().unwrap_or("n/a")
        );
        let _ = writeln!(
            s,
            "# Backend: {}  ranks: {}  devices: {}",
            h.backend, h.ranks, h.devices
        );
        let _ = writeln!(s, "#");
        let _ = writeln!(s, "# Using devices");
        for (rank, dev) in h.rank_to_device.iter().enumerate() {
            let _ = writeln!(s, "#  Rank {rank:>2} -> device {dev:>2}");
        }
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# Timing: {}  warmup iters: {}  iters: {}",
            h.timing, h.warmup, h.iters
        );
        match h.link_ceiling_gbps {
            Some(c) => {
                let _ = writeln!(s, "# Peer-copy link ceiling: {c:.2} GB/s");
            }
            None => {
                let _ = writeln!(s, "# Peer-copy link ceiling: not measured");
            }
        }
        let _ = writeln!(
            s,
            "# algbw = size / time (GB/s = 1e9 B/s); busbw = algbw * 2(N-1)/N (0 for N = 1)"
        );
        for note in &h.notes {
            let _ = writeln!(s, "# Note: {note}");
        }
        s
    }

    /// nccl-tests-style block for one algorithm: a `# algo:` line, the three
    /// nccl-tests header lines, one data line per row (path appended when
    /// present), the out-of-bounds count (when anything was checked) and
    /// `# Avg bus bandwidth` (mean busbw over all out-of-place and in-place
    /// measurements, as nccl-tests computes it).
    pub fn render_algo_table(&self, algo: &str) -> String {
        let rows: Vec<&Row> = self.rows.iter().filter(|r| r.algo == algo).collect();
        let mut paths: Vec<&str> = Vec::new();
        for p in rows.iter().filter_map(|r| r.path.as_deref()) {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        let mut s = String::new();
        if paths.is_empty() {
            let _ = writeln!(s, "# algo: {algo}");
        } else {
            let _ = writeln!(s, "# algo: {algo} [{}]", paths.join(", "));
        }
        let _ = writeln!(s, "#");
        for line in nccl_header_lines() {
            let _ = writeln!(s, "{line}");
        }
        let mut bw_sum = 0.0;
        let mut bw_count = 0_usize;
        let mut checked = false;
        let mut wrong_total = 0_u64;
        for r in &rows {
            let _ = writeln!(s, "{}", nccl_data_line(r));
            for m in [&r.out_of_place, &r.in_place].into_iter().flatten() {
                bw_sum += m.busbw;
                bw_count += 1;
                if let Some(w) = m.wrong {
                    checked = true;
                    wrong_total = wrong_total.saturating_add(w);
                }
            }
        }
        if checked {
            let verdict = if wrong_total == 0 { "OK" } else { "FAILED" };
            let _ = writeln!(s, "# Out of bounds values : {wrong_total} {verdict}");
        }
        let avg = if bw_count > 0 {
            bw_sum / bw_count as f64
        } else {
            0.0
        };
        let _ = writeln!(s, "# Avg bus bandwidth    : {}", fmt_g(avg));
        let _ = writeln!(s, "#");
        s
    }

    /// Table comparing every algorithm other than `reference` with it, one
    /// line per (size, row): busbw out-of-place / in-place for both, and the
    /// speed ratio `algo / reference` (algbw ratio at the same size and rank
    /// count, i.e. the inverse time ratio; > 1 means faster than the
    /// reference; defined even for N = 1 where busbw is 0). `-` marks missing
    /// values. All lines start with `#`.
    pub fn render_comparison(&self, reference: &str) -> String {
        let mut s = String::new();
        if !self.rows.iter().any(|r| r.algo == reference) {
            let _ = writeln!(s, "# Comparison: reference '{reference}' has no rows");
            return s;
        }
        let mut keys: Vec<(u64, usize)> = self.rows.iter().map(|r| (r.size, r.ranks)).collect();
        keys.sort_unstable();
        keys.dedup();

        let headers: Vec<String> = vec![
            "size".into(),
            "ranks".into(),
            "algo".into(),
            "path".into(),
            "oop busbw".into(),
            format!("{reference} oop"),
            "oop ratio".into(),
            "ip busbw".into(),
            format!("{reference} ip"),
            "ip ratio".into(),
        ];
        let left = [
            false, false, true, true, false, false, false, false, false, false,
        ];
        let mut cells: Vec<Vec<String>> = Vec::new();
        for (size, ranks) in keys {
            let at = |r: &&Row| r.size == size && r.ranks == ranks;
            let Some(refrow) = self.rows.iter().filter(at).find(|r| r.algo == reference) else {
                continue;
            };
            for r in self.rows.iter().filter(at).filter(|r| r.algo != reference) {
                let mut line = vec![
                    format_size(size),
                    ranks.to_string(),
                    r.algo.clone(),
                    r.path.clone().unwrap_or_else(|| "-".into()),
                ];
                for (m, rm) in [
                    (&r.out_of_place, &refrow.out_of_place),
                    (&r.in_place, &refrow.in_place),
                ] {
                    line.push(opt_num(m.as_ref().map(|m| m.busbw), 2));
                    line.push(opt_num(rm.as_ref().map(|m| m.busbw), 2));
                    line.push(ratio(m.as_ref(), rm.as_ref()));
                }
                cells.push(line);
            }
        }
        let _ = writeln!(
            s,
            "# Comparison vs {reference}: busbw in GB/s; ratio = algo / {reference} speed (>1 = faster)"
        );
        s.push_str(&hash_table(&headers, &cells, &left));
        s
    }

    /// Cold-start table: algo | size | setup (ms) | first call (ms) |
    /// setup+first (ms) | steady (us), plus `(setup+first) / nccl's` when an
    /// `"nccl"` entry exists (same size if available, else the first one).
    /// Empty string when there are no cold-start entries.
    pub fn render_cold_start(&self) -> String {
        if self.cold_start.is_empty() {
            return String::new();
        }
        let nccl_for = |size: u64| {
            let mut nccl = self.cold_start.iter().filter(|c| c.algo == "nccl");
            let first = nccl.clone().next();
            nccl.find(|c| c.size == size).or(first)
        };
        let has_nccl = self.cold_start.iter().any(|c| c.algo == "nccl");
        let mut headers: Vec<String> = [
            "algo",
            "size",
            "setup (ms)",
            "first call (ms)",
            "setup+first (ms)",
            "steady (us)",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect();
        if has_nccl {
            headers.push("vs nccl".into());
        }
        let mut left = vec![true, false, false, false, false, false];
        if has_nccl {
            left.push(false);
        }
        let cells: Vec<Vec<String>> = self
            .cold_start
            .iter()
            .map(|c| {
                let total = c.setup_ms + c.first_call_ms;
                let mut line = vec![
                    c.algo.clone(),
                    format_size(c.size),
                    format!("{:.3}", c.setup_ms),
                    format!("{:.3}", c.first_call_ms),
                    format!("{total:.3}"),
                    format!("{:.2}", c.steady_us),
                ];
                if has_nccl {
                    let r = nccl_for(c.size)
                        .map(|n| n.setup_ms + n.first_call_ms)
                        .filter(|t| *t > 0.0)
                        .map(|t| format!("{:.2}x", total / t))
                        .unwrap_or_else(|| "-".into());
                    line.push(r);
                }
                line
            })
            .collect();
        let mut s = String::from(
            "# Cold start (setup = init before the first call; first call includes lazy init; steady = per call after warm-up)\n",
        );
        s.push_str(&hash_table(&headers, &cells, &left));
        s.push_str("#\n");
        s
    }

    /// Everything: header, cold start, one table per algorithm (order of first
    /// appearance) and, when `reference` names an algorithm present in the
    /// rows, the comparison table.
    pub fn render_all(&self, reference: Option<&str>) -> String {
        let mut s = self.render_header();
        s.push_str("#\n");
        s.push_str(&self.render_cold_start());
        let algos = self.algos();
        for algo in &algos {
            s.push_str(&self.render_algo_table(algo));
        }
        if let Some(r) = reference.filter(|r| algos.contains(r)) {
            s.push_str(&self.render_comparison(r));
        }
        // Graph replays compared with graph replays, as a second comparison.
        if algos.contains(&"nccl:graph")
            && algos
                .iter()
                .any(|a| a.ends_with(":graph") && *a != "nccl:graph")
        {
            s.push_str("#\n");
            s.push_str(&self.render_comparison("nccl:graph"));
        }
        s
    }
}

/// X axis of the plot: values are log2(bytes), mapped linearly, with fixed
/// tick positions (`bold` get labels and grid lines, `light` only grid lines).
struct Log2Axis {
    lo: f64,
    hi: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for Log2Axis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return limit.0;
        }
        let frac = (value - self.lo) / span;
        limit.0 + (f64::from(limit.1 - limit.0) * frac).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Plot data of one algorithm.
struct PlotSeries {
    algo: String,
    oop: Vec<(f64, f64)>,
    ip: Vec<(f64, f64)>,
}

/// The three nccl-tests column header lines (each 116 characters wide).
fn nccl_header_lines() -> [String; 3] {
    [
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
            "", "", "", "", ""
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}",
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong"
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
            "(GB/s)", ""
        ),
    ]
}

/// One nccl-tests data line (`%12li  %12li  %8s  %6s  %6i` + two result
/// blocks), with `  <path>` appended when the row has one.
fn nccl_data_line(r: &Row) -> String {
    let mut s = format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
        r.size, r.count, r.dtype, r.redop, -1
    );
    for m in [&r.out_of_place, &r.in_place] {
        match m {
            Some(m) => {
                let wrong = m
                    .wrong
                    .map(|w| w.to_string())
                    .unwrap_or_else(|| "N/A".into());
                let _ = write!(
                    s,
                    "  {:>7}  {:>6.2}  {:>6.2}  {:>5}",
                    fmt_time(m.time_us),
                    m.algbw,
                    m.busbw,
                    wrong
                );
            }
            None => s.push_str(&" ".repeat(32)),
        }
    }
    if let Some(p) = &r.path {
        let _ = write!(s, "  {p}");
    }
    s
}

/// nccl-tests time format: `%7.0f` from 10000 us, `%7.1f` from 100 us, else `%7.2f`.
fn fmt_time(us: f64) -> String {
    if us >= 10000.0 {
        format!("{us:>7.0}")
    } else if us >= 100.0 {
        format!("{us:>7.1}")
    } else {
        format!("{us:>7.2}")
    }
}

/// C `%g` (6 significant digits, trailing zeros removed) for ordinary magnitudes.
fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        return format!("{v:.5e}");
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn opt_num(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// `"1.50x"`: algbw of `m` over algbw of the reference `r`.
fn ratio(m: Option<&Measurement>, r: Option<&Measurement>) -> String {
    match (m, r) {
        (Some(m), Some(r)) if r.algbw > 0.0 && m.algbw.is_finite() => {
            format!("{:.2}x", m.algbw / r.algbw)
        }
        _ => "-".into(),
    }
}

/// A `# `-prefixed table with two spaces between columns; `left[i]` selects
/// left alignment for column `i` (right otherwise).
fn hash_table(headers: &[String], rows: &[Vec<String>], left: &[bool]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let fmt_line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if left.get(i).copied().unwrap_or(false) {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        format!("# {}", parts.join("  ").trim_end())
    };
    let mut s = String::new();
    let _ = writeln!(s, "{}", fmt_line(headers));
    for row in rows {
        let _ = writeln!(s, "{}", fmt_line(row));
    }
    s
}

/// Quotes a CSV cell when it contains a comma, quote or line break.
fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

const UNITS: [(u64, &str); 4] = [
    (1 << 40, "TiB"),
    (1 << 30, "GiB"),
    (1 << 20, "MiB"),
    (1 << 10, "KiB"),
];

/// Short, exact size label: `"8B"`, `"4KiB"`, `"1.5MiB"`, `"1GiB"`, `"1GiB+12B"`.
///
/// The largest binary unit not exceeding `bytes` is used when the value is a
/// whole number or has at most two decimals in it (quarters: `1.5MiB`,
/// `2.25GiB`); otherwise the shorter of plain bytes (`"1500B"`) and
/// "unit + remainder" (`"1GiB+12B"`, remainder formatted the same way).
pub fn format_size(bytes: u64) -> String {
    let Some(&(unit, name)) = UNITS.iter().find(|(u, _)| bytes >= *u) else {
        return format!("{bytes}B");
    };
    let whole = bytes / unit;
    let rem = bytes % unit;
    if rem == 0 {
        return format!("{whole}{name}");
    }
    if rem % (unit / 4) == 0 {
        // Quarter units: at most two decimals, exactly representable.
        let frac = (rem / (unit / 4)) * 25;
        let frac = if frac % 10 == 0 {
            (frac / 10).to_string()
        } else {
            frac.to_string()
        };
        return format!("{whole}.{frac}{name}");
    }
    let plain = format!("{bytes}B");
    let split = format!("{whole}{name}+{}", format_size(rem));
    if split.len() < plain.len() {
        split
    } else {
        plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    /// Width of every nccl-tests table line (without an appended path).
    const TABLE_WIDTH: usize = 116;

    fn header() -> Header {
        Header {
            tool: "ringreduce".into(),
            version: "0.1.0".into(),
            date: "2025-01-01T00:00:00Z".into(),
            command: "ringreduce bench -b 8 -e 1G".into(),
            hardware: vec!["NVIDIA H200".into(), "2x AMD EPYC".into()],
            driver: Some("560.35".into()),
            nccl_version: Some("2.23.4".into()),
            ranks: 2,
            devices: 2,
            rank_to_device: vec![0, 1],
            backend: "cuda".into(),
            timing: "cuda events".into(),
            iters: 20,
            warmup: 5,
            link_ceiling_gbps: Some(350.0),
            notes: vec!["synthetic".into()],
        }
    }

    fn row(algo: &str, path: Option<&str>, size: u64, oop_us: f64, ip_us: f64) -> Row {
        Row {
            algo: algo.into(),
            path: path.map(String::from),
            ranks: 2,
            size,
            count: size / 4,
            dtype: "float".into(),
            redop: "sum".into(),
            out_of_place: Some(Measurement::new(size, 2, oop_us, Some(0))),
            in_place: Some(Measurement::new(size, 2, ip_us, None)),
        }
    }

    fn report() -> Report {
        Report {
            header: header(),
            cold_start: vec![
                ColdStart {
                    algo: "nccl".into(),
                    size: 8,
                    setup_ms: 400.0,
                    first_call_ms: 100.0,
                    steady_us: 18.0,
                },
                ColdStart {
                    algo: "ring".into(),
                    size: 8,
                    setup_ms: 40.0,
                    first_call_ms: 10.0,
                    steady_us: 25.0,
                },
            ],
            rows: vec![
                row("nccl", None, 8, 18.47, 18.29),
                row("ring", Some("ring:pipe4"), 8, 30.0, 31.0),
                row("nccl", None, 1 << 20, 150.0, 160.0),
                row("ring", Some("ring:pipe4"), 1 << 20, 100.0, 200.0),
                row("nccl", None, GIB, 2740.0, 2750.0),
                row("ring", Some("ring:pipe1"), GIB, 12345.6, 3000.0),
            ],
        }
    }

    #[test]
    fn bandwidth_arithmetic() {
        let m = Measurement::new(GIB, 2, 2740.0, Some(0));
        let expect = 1_073_741_824.0 / 2740e-6 / 1e9;
        assert!((m.algbw - expect).abs() < 1e-9);
        assert!((m.algbw - 391.876).abs() < 1e-3);
        assert_eq!(m.busbw, m.algbw); // factor 1 for N = 2
        let m4 = Measurement::new(GIB, 4, 2740.0, None);
        assert!((m4.busbw - 1.5 * m4.algbw).abs() < 1e-9);
        assert_eq!(busbw_factor(1), 0.0);
        assert_eq!(busbw_factor(0), 0.0);
        assert_eq!(busbw_factor(8), 1.75);
        assert_eq!(Measurement::new(GIB, 1, 2740.0, None).busbw, 0.0);
        assert_eq!(algbw_gbps(1_000_000_000, 1e6), 1.0);
        assert_eq!(algbw_gbps(8, 0.0), 0.0);
    }

    #[test]
    fn nccl_layout_exact() {
        let lines = nccl_header_lines();
        assert_eq!(
            lines[0],
            "#                                                              out-of-place                       in-place          "
        );
        assert_eq!(
            lines[1],
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
        );
        assert_eq!(
            lines[2],
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
        );
        let r = Row {
            algo: "nccl".into(),
            path: None,
            ranks: 2,
            size: 8,
            count: 2,
            dtype: "float".into(),
            redop: "sum".into(),
            out_of_place: Some(Measurement::new(8, 2, 18.47, Some(0))),
            in_place: Some(Measurement::new(8, 2, 18.29, Some(0))),
        };
        assert_eq!(
            nccl_data_line(&r),
            "           8             2     float     sum      -1    18.47    0.00    0.00      0    18.29    0.00    0.00      0"
        );
    }

    /// (end column, token) of every whitespace-separated token except a leading '#'.
    fn token_ends(line: &str) -> Vec<(usize, &str)> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in line
            .char_indices()
            .chain(std::iter::once((line.len(), ' ')))
        {
            match (c.is_whitespace(), start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    out.push((i, &line[s..i]));
                    start = None;
                }
                _ => {}
            }
        }
        out.into_iter().filter(|(_, t)| *t != "#").collect()
    }

    #[test]
    fn rendered_table_aligns_under_titles() {
        let rep = report();
        let table = rep.render_algo_table("nccl");
        let lines: Vec<&str> = table.lines().collect();
        let hdr = lines
            .iter()
            .position(|l| l.contains("out-of-place"))
            .unwrap_or(usize::MAX);
        assert!(hdr < lines.len(), "{table}");
        let titles = token_ends(lines[hdr + 1]);
        assert_eq!(titles.len(), 13);
        let data: Vec<&str> = lines[hdr + 3..]
            .iter()
            .copied()
            .filter(|l| !l.starts_with('#'))
            .collect();
        assert_eq!(data.len(), 3, "{table}");
        for l in &lines[hdr..hdr + 3] {
            assert_eq!(l.len(), TABLE_WIDTH);
        }
        for d in &data {
            assert_eq!(d.len(), TABLE_WIDTH, "{d:?}");
            let toks = token_ends(d);
            assert_eq!(toks.len(), 13, "{d:?}");
            for (t, h) in toks.iter().zip(&titles) {
                assert_eq!(t.0, h.0, "{:?} not under {:?}", t.1, h.1);
            }
        }
        // Time formats switch like nccl-tests; unchecked in-place prints N/A.
        assert!(data[1].contains("   150.0 "), "{}", data[1]);
        assert!(data[2].contains("   2740.0 "), "{}", data[2]);
        assert!(data[0].ends_with("  N/A"));
        assert!(table.starts_with("# algo: nccl\n"));
        assert!(table.contains("# Out of bounds values : 0 OK\n"));
        assert!(table.contains("# Avg bus bandwidth    : "));

        // Ring rows carry a path after the last column and use %7.0f above 10 ms.
        let ring = rep.render_algo_table("ring");
        assert!(ring.starts_with("# algo: ring [ring:pipe4, ring:pipe1]\n"));
        let last = ring.lines().rfind(|l| !l.starts_with('#')).unwrap_or("");
        assert!(last.ends_with("  ring:pipe1"));
        assert_eq!(&last[TABLE_WIDTH..], "  ring:pipe1");
        assert!(last.contains("   12346 "), "{last}");
    }

    #[test]
    fn avg_bus_bandwidth_is_mean_of_all_measurements() {
        let rep = Report {
            header: header(),
            cold_start: vec![],
            rows: vec![Row {
                out_of_place: Some(Measurement {
                    time_us: 1.0,
                    algbw: 1.0,
                    busbw: 10.0,
                    wrong: None,
                }),
                in_place: Some(Measurement {
                    time_us: 1.0,
                    algbw: 1.0,
                    busbw: 20.5,
                    wrong: None,
                }),
                ..row("x", None, 8, 1.0, 1.0)
            }],
        };
        let t = rep.render_algo_table("x");
        assert!(t.contains("# Avg bus bandwidth    : 15.25\n"), "{t}");
        assert!(!t.contains("Out of bounds"));
        assert_eq!(fmt_g(220.9214), "220.921");
        assert_eq!(fmt_g(0.5), "0.5");
    }

    #[test]
    fn json_round_trip() {
        let rep = report();
        let json = rep.to_json();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rep);
        let path =
            std::env::temp_dir().join(format!("ringreduce_report_{}.json", std::process::id()));
        rep.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), rep);
        assert!(json.contains("\"cold_start\"") && json.contains("\"rank_to_device\""));
    }

    #[test]
    fn csv_header_and_rows() {
        let mut rep = report();
        rep.rows[0].path = Some("a,b".into());
        rep.rows[1].in_place = None;
        let path =
            std::env::temp_dir().join(format!("ringreduce_report_{}.csv", std::process::id()));
        rep.write_csv(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + rep.rows.len());
        assert_eq!(
            lines[0],
            "algo,path,ranks,size,count,type,redop,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong"
        );
        assert!(lines[1].starts_with("nccl,\"a,b\",2,8,2,float,sum,18.47,"));
        assert!(lines[1].ends_with(",")); // in-place wrong = None
        assert!(lines[2].starts_with("ring,ring:pipe4,2,8,2,float,sum,30,"));
        assert!(lines[2].ends_with(",0,,,,"));
        assert!(lines[3].starts_with("nccl,,2,1048576,262144,"));
    }

    #[test]
    fn svg_written_with_each_algo() {
        let rep = report();
        let path =
            std::env::temp_dir().join(format!("ringreduce_report_{}.svg", std::process::id()));
        rep.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("<svg"));
        for name in [
            "nccl",
            "ring",
            "peer-copy ceiling",
            "1MiB",
            "1GiB",
            "NVIDIA H200",
        ] {
            assert!(svg.contains(name), "missing {name}");
        }
        // No data at all still yields a valid (empty) chart.
        let empty = Report {
            header: Header {
                hardware: vec![],
                link_ceiling_gbps: None,
                ..header()
            },
            cold_start: vec![],
            rows: vec![],
        };
        let path2 =
            std::env::temp_dir().join(format!("ringreduce_empty_{}.svg", std::process::id()));
        empty.write_svg(&path2).unwrap();
        let svg2 = std::fs::read_to_string(&path2).unwrap();
        let _ = std::fs::remove_file(&path2);
        assert!(svg2.contains("<svg"));
    }

    #[test]
    fn svg_bad_path_is_an_error() {
        let path = std::env::temp_dir()
            .join("ringreduce_no_such_dir_x9")
            .join("plot.svg");
        assert!(report().write_svg(&path).is_err());
    }

    #[test]
    fn format_size_cases() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(8), "8B");
        assert_eq!(format_size(1000), "1000B");
        assert_eq!(format_size(1024), "1KiB");
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(1536), "1.5KiB");
        assert_eq!(format_size(3 << 19), "1.5MiB");
        assert_eq!(format_size(5 << 18), "1.25MiB");
        assert_eq!(format_size(1 << 20), "1MiB");
        assert_eq!(format_size(GIB), "1GiB");
        assert_eq!(format_size(8 * GIB), "8GiB");
        assert_eq!(format_size(GIB + 12), "1GiB+12B");
        assert_eq!(format_size(1500), "1500B");
        assert_eq!(format_size(1 << 40), "1TiB");
    }

    #[test]
    fn comparison_ratio() {
        let rep = report();
        let c = rep.render_comparison("nccl");
        // 1 MiB: ring 100 us vs nccl 150 us out-of-place -> 1.50x; in-place 200 vs 160 -> 0.80x.
        let line = c.lines().find(|l| l.contains("1MiB")).unwrap_or_default();
        assert!(line.contains("1.50x"), "{c}");
        assert!(line.contains("0.80x"), "{c}");
        assert!(line.contains("ring:pipe4"));
        assert!(c.lines().all(|l| l.starts_with('#')));
        assert_eq!(c.lines().count(), 2 + 3); // title + header + 3 sizes
        assert!(!c.lines().skip(2).any(|l| l.contains(" nccl ")));

        // Missing measurement -> "-".
        let mut rep2 = rep.clone();
        rep2.rows[3].in_place = None;
        let c2 = rep2.render_comparison("nccl");
        let line2 = c2.lines().find(|l| l.contains("1MiB")).unwrap_or_default();
        assert!(
            line2.contains("1.50x") && line2.trim_end().ends_with('-'),
            "{c2}"
        );

        assert!(rep.render_comparison("mpi").contains("has no rows"));
    }

    #[test]
    fn cold_start_table() {
        let c = report().render_cold_start();
        assert!(c.contains("setup+first (ms)") && c.contains("vs nccl"));
        let ring = c
            .lines()
            .find(|l| l.starts_with("# ring"))
            .unwrap_or_default();
        assert!(ring.contains("50.000") && ring.contains("0.10x"), "{c}");
        let nccl = c
            .lines()
            .find(|l| l.starts_with("# nccl"))
            .unwrap_or_default();
        assert!(nccl.contains("500.000") && nccl.contains("1.00x"), "{c}");
        let mut rep = report();
        rep.cold_start.retain(|c| c.algo != "nccl");
        assert!(!rep.render_cold_start().contains("vs nccl"));
        rep.cold_start.clear();
        assert_eq!(rep.render_cold_start(), "");
    }

    #[test]
    fn render_all_sections_in_order() {
        let rep = report();
        let all = rep.render_all(Some("nccl"));
        let pos = |s: &str| all.find(s).unwrap_or(usize::MAX);
        assert!(pos("# ringreduce 0.1.0") < pos("# Cold start"));
        assert!(pos("# Cold start") < pos("# algo: nccl"));
        assert!(pos("# algo: nccl") < pos("# algo: ring"));
        assert!(pos("# algo: ring") < pos("# Comparison vs nccl"));
        assert!(pos("# Comparison vs nccl") < all.len());
        assert!(!rep.render_all(Some("mpi")).contains("Comparison"));
        assert!(!rep.render_all(None).contains("Comparison"));
        let h = rep.render_header();
        assert!(h.lines().all(|l| l.starts_with('#')));
        for s in [
            "2025-01-01",
            "ringreduce bench",
            "NVIDIA H200",
            "560.35",
            "2.23.4",
            "Rank  1 -> device  1",
            "cuda events",
            "350.00 GB/s",
        ] {
            assert!(h.contains(s), "missing {s} in\n{h}");
        }
    }
}
