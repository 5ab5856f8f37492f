//! `ringreduce compare`: the article's comparison, measured. For each rank
//! count, the parameter server and the ring run the same all-reduce; the
//! backend counts the bytes every rank sends and receives as it moves them,
//! shown beside the article's formulas ((N-1)·D at the parameter server's
//! root, 2(N-1)/N·D per ring rank), with the measured time of both. A
//! markdown table to paste, and an SVG plot.

use super::{check_host_memory, out, Common};
use crate::bench::{self, Contender, ContenderKind};
use crate::report::{self, ReportError};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use ringreduce::algo::Load;
use ringreduce::backend::BackendChoice;
use ringreduce::element::ReduceOp;
use ringreduce::engine::{Engine, EngineConfig};
use ringreduce::error::{Error, Result};
use ringreduce::plan::{Collective, Shape, Traffic};
use ringreduce::size::format_bytes;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Rank counts, comma-separated (more ranks than GPUs share them in
    /// blocks: 4 ranks on 2 GPUs are 0,0,1,1).
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    pub ranks: Vec<usize>,
    /// Data per rank D (all-reduce of float sum).
    #[arg(long, default_value = "64MiB", allow_hyphen_values = true)]
    pub size: String,
    /// Algorithms to compare, comma-separated.
    #[arg(long, default_value = "ps,ring")]
    pub algo: String,
    /// Backend: auto picks CUDA when a driver and a GPU are present.
    #[arg(long, value_parser = crate::cli::backend_arg(), default_value = "auto")]
    pub backend: BackendChoice,
    /// GPUs to use, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Back-to-back calls per timed block.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub iters: usize,
    /// Untimed calls first.
    #[arg(short = 'w', long, default_value_t = 2)]
    pub warmup: usize,
    /// Timed blocks; the time is the median block's mean.
    #[arg(long, default_value_t = 3)]
    pub blocks: usize,
    /// Draw bytes per rank and time against N as SVG: a path ending in
    /// .svg, or a device, FIFO or /dev/stdout.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Give up on any wait after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
}

/// One (N, algorithm) measurement.
#[derive(Debug, Clone)]
struct Point {
    ranks: usize,
    algo: String,
    path: String,
    /// The closed form of the path's traffic, from its algorithm.
    load: Option<Load>,
    /// Counted per rank for one call.
    traffic: Vec<Traffic>,
    time_us: f64,
}

impl Point {
    /// The busiest rank: (rank, sent, received).
    /// (The lowest such rank on a tie.)
    fn busiest(&self) -> (usize, u64, u64) {
        self.traffic
            .iter()
            .enumerate()
            .max_by(|(i, a), (j, b)| {
                a.sent
                    .max(a.received)
                    .cmp(&b.sent.max(b.received))
                    .then(j.cmp(i))
            })
            .map_or((0, 0, 0), |(r, t)| (r, t.sent, t.received))
    }
    /// The other ranks' range of max(sent, received).
    fn others(&self) -> Option<(u64, u64)> {
        let (b, _, _) = self.busiest();
        let v: Vec<u64> = self
            .traffic
            .iter()
            .enumerate()
            .filter(|(r, _)| *r != b)
            .map(|(_, t)| t.sent.max(t.received))
            .collect();
        Some((*v.iter().min()?, *v.iter().max()?))
    }
    /// The article's formula for the busiest rank at `n` ranks, if the
    /// path's algorithm has one: (formula, bytes).
    fn formula(&self, n: usize, d: u64) -> Option<(&'static str, f64)> {
        self.load.map(|l| (l.formula(), l.bytes(n, d)))
    }
}

fn mib(b: f64) -> String {
    format!("{:.2} MiB", b / (1u64 << 20) as f64)
}

/// The arguments, checked: D, the contenders and one engine configuration
/// per rank count.
struct Setup {
    d: u64,
    count: usize,
    contenders: Vec<Contender>,
    configs: Vec<EngineConfig>,
}

fn setup(a: &CompareArgs) -> Result<Setup> {
    let d = super::size_arg("--size", &a.size)?;
    if d == 0 || d % 4 != 0 {
        return Err(Error::BadArgument(format!(
            "--size {:?}: D must be a positive multiple of 4 bytes (float elements)",
            a.size
        )));
    }
    if a.ranks.is_empty() || a.ranks.iter().any(|&n| n < 2) {
        return Err(Error::BadArgument(
            "--ranks needs rank counts of at least 2 (one rank moves nothing)".into(),
        ));
    }
    if let Some(&n) = a.ranks.iter().find(|&&n| n > ringreduce::engine::MAX_RANKS) {
        return Err(Error::TooManyRanks {
            ranks: n,
            max: ringreduce::engine::MAX_RANKS,
        });
    }
    if a.iters == 0 || a.blocks == 0 || a.blocks > 100 || a.iters > 100_000 {
        return Err(Error::BadArgument(
            "-n/--iters must be 1 to 100000 and --blocks 1 to 100".into(),
        ));
    }
    let contenders: Vec<Contender> = bench::parse_contenders("--algo", &a.algo)?;
    if let Some(c) = contenders
        .iter()
        .find(|c| !matches!(c.kind, ContenderKind::Engine(_)))
    {
        return Err(Error::BadArgument(format!(
            "{}: compare runs the engine's paths (ps, ring, ring:pipeK, auto, ...)",
            c.name
        )));
    }
    report::check_files(&[("--plot", a.plot.as_deref(), report::Format::Svg)])
        .map_err(crate::cli::report_error)?;
    let count = (d / 4) as usize;
    let mut configs = Vec::new();
    for &n in &a.ranks {
        configs.push(config_for(a, n, d, count, &contenders)?);
    }
    Ok(Setup {
        d,
        count,
        contenders,
        configs,
    })
}

/// The engine configuration of `n` ranks, once every contender can run
/// the call and the host has the memory for it.
fn config_for(
    a: &CompareArgs,
    n: usize,
    d: u64,
    count: usize,
    contenders: &[Contender],
) -> Result<EngineConfig> {
    let cfg = Common {
        ranks: Some(n),
        backend: a.backend,
        devices: a.devices.clone(),
        timeout: a.timeout,
    }
    .config()?;
    let shape = Shape::all_reduce(n, count, 4, false);
    for c in contenders {
        if let ContenderKind::Engine(choice) = &c.kind {
            choice.resolve(&shape)?;
        }
    }
    let cpu = a.backend == BackendChoice::Cpu || crate::cli::cuda::gpus().is_err();
    // The parameter server's root needs (N-1)·D of scratch.
    let mut need = crate::cli::run::host_bytes(&shape, cpu);
    if cpu {
        need += (n as u128) * d as u128 * 2;
    }
    check_host_memory(need, &format!("the {n}-rank measurement"))?;
    Ok(cfg)
}

pub fn execute(a: CompareArgs) -> Result<bool> {
    let s = setup(&a)?;
    let mut points: Vec<Point> = Vec::new();
    let mut describe = Vec::new();
    for cfg in s.configs.iter().cloned() {
        let (dsc, mut p) = measure(&a, &s, cfg)?;
        describe.push(dsc);
        points.append(&mut p);
    }
    print_table(&a, s.d, describe.clone(), &points)?;
    let ok = check_formulas(&points, s.d)?;
    print_ratios(&a.ranks, &points)?;
    if let Some(p) = &a.plot {
        // Where the ranks ran, under the title: the largest N's engine
        // (on one GPU it says that every rank shares it).
        // (and when: a picture kept in the docs says its date).
        let engine = describe.last().cloned().unwrap_or_default();
        let caption = format!(
            "{} · {engine}{}",
            crate::cli::now_utc(),
            if engine.starts_with("cpu") {
                " · virtual ranks in one host memory (no link between them)"
            } else {
                ""
            }
        );
        let svg = plot(&points, s.d, &caption).map_err(crate::cli::report_error)?;
        report::write_output("--plot", p, svg.as_bytes()).map_err(crate::cli::report_error)?;
        out(format!("# wrote {}", p.display()))?;
    }
    Ok(ok)
}

/// Every contender on one engine: the backend's description and a point
/// per contender.
fn measure(a: &CompareArgs, s: &Setup, cfg: EngineConfig) -> Result<(String, Vec<Point>)> {
    let n = cfg.ranks;
    let mut e = Engine::new(cfg)?;
    let describe = e.describe();
    let inputs = (0..n)
        .map(|r| {
            let mut v = ringreduce::os::zeroed::<f32>(s.count, &format!("rank {r}'s input"))?;
            v.fill(1.0);
            Ok(v)
        })
        .collect::<Result<Vec<_>>>()?;
    let shape = e.load(Collective::AllReduce, &inputs, false)?;
    let mut points = Vec::new();
    for c in &s.contenders {
        let ContenderKind::Engine(choice) = &c.kind else {
            continue;
        };
        let path = e.path_name(Some(choice), &shape)?;
        let load = choice.resolve(&shape)?.load();
        // One call, counted.
        e.take_traffic()?;
        e.launch(Some(choice), &shape, ReduceOp::Sum)?;
        e.synchronize()?;
        let traffic = e.take_traffic()?;
        let us = bench::time_blocks(
            &mut e,
            c,
            &shape,
            ReduceOp::Sum,
            a.warmup,
            a.iters,
            a.blocks,
        )?;
        e.take_traffic()?;
        crate::note!("compare: N = {n} {}: {us:.1} us", c.name);
        points.push(Point {
            ranks: n,
            algo: c.name.clone(),
            path,
            load,
            traffic,
            time_us: us,
        });
    }
    Ok((describe, points))
}

/// The header and the markdown table.
fn print_table(a: &CompareArgs, d: u64, describe: Vec<String>, points: &[Point]) -> Result<()> {
    out(format!(
        "# ringreduce compare: all-reduce of D = {} per rank (float sum, out of place)",
        format_bytes(d)
    ))?;
    let mut seen = Vec::new();
    for dsc in describe {
        if !seen.contains(&dsc) {
            out(format!("# backend: {dsc}"))?;
            seen.push(dsc);
        }
    }
    out("# bytes: counted by the backend as it moved them (copies between ranks, reduces reading another rank's memory), one call")?;
    out(format!(
        "# time: median of {} blocks, each the mean of {} back-to-back calls after {} warm-up calls",
        a.blocks, a.iters, a.warmup
    ))?;
    out("")?;
    out("| N | algorithm (path) | busiest rank: sent / received | formula | other ranks (max of sent, received) | time per call |")?;
    out("|---|---|---|---|---|---|")?;
    for p in points {
        let (r, s, rcv) = p.busiest();
        let formula = match p.formula(p.ranks, d) {
            Some((fname, fval)) => format!("{fname} = {}", mib(fval)),
            None => "-".into(),
        };
        let others = match p.others() {
            Some((lo, hi)) if lo == hi => mib(lo as f64),
            Some((lo, hi)) => format!("{} .. {}", mib(lo as f64), mib(hi as f64)),
            None => "-".into(),
        };
        out(format!(
            "| {} | {} ({}) | rank {r}: {} / {} | {formula} | {others} | {:.1} us |",
            p.ranks,
            p.algo,
            p.path,
            mib(s as f64),
            mib(rcv as f64),
            p.time_us
        ))?;
    }
    out("")
}

/// Whether every point with a formula moved what it says; a line for each
/// that did not.
fn check_formulas(points: &[Point], d: u64) -> Result<bool> {
    let mut ok = true;
    for p in points {
        let Some((_, fval)) = p.formula(p.ranks, d) else {
            continue;
        };
        let (_, s, rcv) = p.busiest();
        // The ring cuts chunks in 16-byte units: a rank may move up to one
        // unit more per step than D/N.
        let slack = 16.0 * 2.0 * p.ranks as f64;
        if (s.max(rcv) as f64 - fval).abs() > slack {
            ok = false;
            out(format!(
                "# MISMATCH: N = {} {}: the busiest rank moved {} where the formula says {}",
                p.ranks,
                p.algo,
                mib(s.max(rcv) as f64),
                mib(fval)
            ))?;
        }
    }
    Ok(ok)
}

/// The parameter server's time over the ring's at each N where both ran,
/// and, once, why it need not follow the ratio of the bytes.
fn print_ratios(ranks: &[usize], points: &[Point]) -> Result<()> {
    let mut said = false;
    for &n in ranks {
        let t = |load: Load| {
            points
                .iter()
                .find(|p| p.ranks == n && p.load == Some(load))
                .map(|p| p.time_us)
        };
        if let (Some(ps), Some(ring)) = (t(Load::Root), t(Load::Ring)) {
            out(format!(
                "# N = {n}: the parameter server takes {:.2}x the ring's time (the formulas' ratio of the busiest rank's bytes: {:.2}x)",
                ps / ring.max(1e-9),
                n as f64 / 2.0
            ))?;
            said = true;
        }
    }
    if said {
        out(WHY_NOT_BYTES)?;
    }
    Ok(())
}

/// Why the measured ratio may differ from the ratio of the bytes.
const WHY_NOT_BYTES: &str = "# the byte ratio prices the busiest rank's link alone; where the ranks share one memory (host memory, or one GPU) no link is saturated, and what decides is each path's dependent steps (the ring's 2(N-1) against the PS's two rounds) and its reduces: docs/ALGORITHM.md, parts 3 and 4";

const COLOURS: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn perr<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// Two panels against N: the busiest rank's bytes (measured points, the
/// formula as a dashed line) and the time per call; `caption` (where the
/// ranks ran) under the title.
fn plot(points: &[Point], d: u64, caption: &str) -> std::result::Result<String, ReportError> {
    let mut algos: Vec<String> = Vec::new();
    for p in points {
        if !algos.contains(&p.algo) {
            algos.push(p.algo.clone());
        }
    }
    let nmax = points.iter().map(|p| p.ranks).max().unwrap_or(2) as f64;
    let nmin = points.iter().map(|p| p.ranks).min().unwrap_or(2) as f64;
    let pad = (nmax - nmin).max(1.0) * 0.1;
    let axis = Axis {
        nmin,
        nmax,
        range: (nmin - pad)..(nmax + pad),
    };
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (1200, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let (title, rest) = root.split_vertically(70);
        title
            .draw_text(
                &format!(
                    "Parameter server vs ring, measured: all-reduce of D = {} per rank",
                    format_bytes(d)
                ),
                &("sans-serif", 22).into_font().color(&BLACK),
                (200, 12),
            )
            .map_err(perr)?;
        let caption: String = caption.chars().take(190).collect();
        title
            .draw_text(
                &caption,
                &("sans-serif", 14).into_font().color(&BLACK),
                (30, 44),
            )
            .map_err(perr)?;
        let (left, right) = rest.split_horizontally(600);
        bytes_panel(&left, points, &algos, &axis, d)?;
        time_panel(&right, points, &algos, &axis)?;
        root.present().map_err(perr)?;
    }
    Ok(buf)
}

/// The plot's x axis: the rank counts measured, padded.
struct Axis {
    nmin: f64,
    nmax: f64,
    range: std::ops::Range<f64>,
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn mib_of(b: f64) -> f64 {
    b / (1u64 << 20) as f64
}

/// The busiest rank's bytes against N: measured, and the formula dashed.
fn bytes_panel(
    area: &Area<'_>,
    points: &[Point],
    algos: &[String],
    axis: &Axis,
    d: u64,
) -> std::result::Result<(), ReportError> {
    let bytes_max = points
        .iter()
        .map(|p| {
            let (_, s, r) = p.busiest();
            let f = p.formula(p.ranks, d).map_or(0.0, |f| f.1);
            mib_of(s.max(r) as f64).max(mib_of(f))
        })
        .fold(1.0, f64::max);
    let mut c = ChartBuilder::on(area)
        .caption("busiest rank's bytes sent (MiB) vs N", ("sans-serif", 17))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(axis.range.clone(), 0.0..bytes_max * 1.1)
        .map_err(perr)?;
    c.configure_mesh()
        .x_desc("ranks N")
        .y_desc("MiB")
        .x_label_formatter(&|v: &f64| format!("{v:.0}"))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(perr)?;
    for (i, algo) in algos.iter().enumerate() {
        let col = COLOURS[i % COLOURS.len()];
        let mine: Vec<&Point> = points.iter().filter(|p| &p.algo == algo).collect();
        let measured: Vec<(f64, f64)> = mine
            .iter()
            .map(|p| {
                let (_, s, r) = p.busiest();
                (p.ranks as f64, mib_of(s.max(r) as f64))
            })
            .collect();
        let label = match mine.first().and_then(|p| p.formula(2, d)) {
            Some((f, _)) => format!("{algo}: measured, formula {f}"),
            None => algo.clone(),
        };
        c.draw_series(LineSeries::new(measured.clone(), col.stroke_width(2)))
            .map_err(perr)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        c.draw_series(measured.iter().map(|&p| Circle::new(p, 4, col.filled())))
            .map_err(perr)?;
        // The formula, dashed, through many N.
        if let Some(p0) = mine.first().filter(|p| p.load.is_some()) {
            let mut x = axis.nmin;
            let mut pts = Vec::new();
            while x <= axis.nmax + 1e-9 {
                pts.push((x, mib_of(p0.formula(x as usize, d).map_or(0.0, |f| f.1))));
                x += 1.0;
            }
            for w in pts.windows(2) {
                let (a, b) = (w[0], w[1]);
                // Dashes: the first half of each unit step.
                let m = (a.0 + (b.0 - a.0) * 0.5, a.1 + (b.1 - a.1) * 0.5);
                c.draw_series(std::iter::once(PathElement::new(
                    vec![a, m],
                    col.mix(0.6).stroke_width(1),
                )))
                .map_err(perr)?;
            }
        }
    }
    legend(&mut c)
}

/// The time per call against N.
fn time_panel(
    area: &Area<'_>,
    points: &[Point],
    algos: &[String],
    axis: &Axis,
) -> std::result::Result<(), ReportError> {
    let t_max = points.iter().map(|p| p.time_us / 1e3).fold(1e-3, f64::max);
    let mut c = ChartBuilder::on(area)
        .caption("time per call (ms) vs N", ("sans-serif", 17))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(axis.range.clone(), 0.0..t_max * 1.1)
        .map_err(perr)?;
    c.configure_mesh()
        .x_desc("ranks N")
        .y_desc("ms")
        .x_label_formatter(&|v: &f64| format!("{v:.0}"))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(perr)?;
    for (i, algo) in algos.iter().enumerate() {
        let col = COLOURS[i % COLOURS.len()];
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| &p.algo == algo)
            .map(|p| (p.ranks as f64, p.time_us / 1e3))
            .collect();
        c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(perr)?
            .label(algo.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled())))
            .map_err(perr)?;
    }
    legend(&mut c)
}

fn legend<'a>(
    c: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
) -> std::result::Result<(), ReportError> {
    c.configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(perr)
}

#[cfg(test)]
mod tests;
