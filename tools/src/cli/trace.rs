//! `ringreduce trace`: a small collective step by step (CPU, symbolic), or,
//! with `--timeline`, `--svg` or `--backend`, a timeline of real calls: every
//! plan op on every rank on one clock (GPU timestamps on CUDA, host
//! timestamps on the CPU), as Chrome trace-event JSON, an SVG picture and a
//! table, with NCCL's call beside it (`--nccl`) and the measurement's own
//! overhead.

use super::cuda::Nccl;
use super::{check_host_memory, out, out_raw, parse_count, Common, OneKind};
use crate::report;
use crate::timeline::{self, RecordOptions, Recording, Timeline};
use ringreduce::algo::AlgoChoice;
use ringreduce::backend::{BackendChoice, BackendKind};
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::Shape;
use std::path::PathBuf;

/// `--algo`'s help: every path of the algorithm registry.
fn algo_help() -> String {
    format!(
        "Algorithm to trace: ring (the default), {}, auto. With RINGREDUCE_ALGO set and no \
         --algo, the variable's path is traced (as auto, which it forces).",
        super::path_list(&["ring"])
    )
}

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// Ranks (the symbolic trace: default 4, at most 16; a real run: default
    /// one per GPU on CUDA, 4 on the CPU; more ranks than GPUs share them).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Elements per rank (NCCL's count; the symbolic trace's default is 8).
    #[arg(long, allow_hyphen_values = true)]
    pub count: Option<String>,
    /// Bytes per rank instead of --count, e.g. 64MiB (a real run's default:
    /// 4MiB).
    #[arg(long, conflicts_with = "count", allow_hyphen_values = true)]
    pub size: Option<String>,
    /// Work in place.
    #[arg(long)]
    pub in_place: bool,
    #[command(flatten)]
    pub kinds: OneKind,
    // Every path of the algorithm registry, in the help.
    #[arg(long, help = algo_help())]
    pub algo: Option<String>,
    /// Run for real on this backend and time every op (cuda: GPU
    /// timestamps; cpu: host timestamps). Implied by --timeline and --svg
    /// (then auto by default).
    #[arg(long, value_parser = crate::cli::backend_arg())]
    pub backend: Option<BackendChoice>,
    /// GPUs to use, comma-separated (default: all); with more ranks than
    /// GPUs, ranks go in blocks (4 on 0,1: 0,0,1,1); list a GPU more than
    /// once to place them by hand.
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Give up on any wait after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Timed calls (back to back, after the warm-up) in the timeline.
    #[arg(long, default_value_t = 3)]
    pub calls: usize,
    /// Untimed calls first.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Blocks of calls with timing off and on, for the measurement's overhead
    /// (0: do not measure it).
    #[arg(long, default_value_t = 5)]
    pub overhead_blocks: usize,
    /// Back-to-back calls per overhead block.
    #[arg(long, default_value_t = 20)]
    pub overhead_iters: usize,
    /// Put NCCL's call for the same size on the same clock (CUDA, one GPU
    /// per rank).
    #[arg(long)]
    pub nccl: bool,
    /// Path to libnccl.so.2 (overrides NCCL_HOME, the linker path and
    /// Python wheels).
    #[arg(long)]
    pub nccl_lib: Option<PathBuf>,
    /// Write the timeline as Chrome trace-event JSON (Perfetto,
    /// chrome://tracing): a path ending in .json, or a device, FIFO or
    /// /dev/stdout.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Draw the timeline as an SVG picture: a path ending in .svg, or a
    /// device, FIFO or /dev/stdout.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Draw the plan's idealized schedule as an SVG timeline (no run: a
    /// copy or a reduce of one element takes one unit, the two lanes run
    /// at once, nothing else costs time): a path ending in .svg, or a
    /// device, FIFO or /dev/stdout.
    #[arg(long, conflicts_with_all = ["timeline", "svg", "backend"])]
    pub ideal_svg: Option<PathBuf>,
}

/// The path asked for: `--algo`, else the ring, unless `RINGREDUCE_ALGO`
/// forces a path (then `auto`, which the variable forces: never ignored).
fn algo_of(a: &TraceArgs) -> Result<String> {
    Ok(match &a.algo {
        Some(x) => x.clone(),
        None if ringreduce::algo::forced_algo()?.is_some() => "auto".into(),
        None => "ring".into(),
    })
}

/// Most timed calls in one timeline.
const MAX_CALLS: usize = 100;

pub fn execute(a: TraceArgs) -> Result<bool> {
    let real = a.timeline.is_some() || a.svg.is_some() || a.backend.is_some();
    if real {
        return real_run(a);
    }
    if a.nccl || a.devices.is_some() || a.nccl_lib.is_some() {
        return Err(Error::BadArgument(
            "--nccl, --nccl-lib and --devices are for a real run (give --timeline, --svg or --backend)".into(),
        ));
    }
    let ranks = a.ranks.unwrap_or(4);
    if ranks == 0 {
        return Err(Error::ZeroRanks);
    }
    let (dtype, op, collective) = a.kinds.single()?;
    let choice: AlgoChoice = algo_of(&a)?.parse().map_err(Error::BadArgument)?;
    let count = match (&a.count, &a.size) {
        (None, None) => 8,
        (c, s) => parse_count(c.as_deref(), s.as_deref(), dtype)?,
    };
    let shape = Shape {
        collective,
        ranks,
        count,
        elem_size: dtype.size(),
        in_place: a.in_place,
    };
    let text = crate::trace::render(&choice, &shape, dtype, op)?;
    if let Some(p) = &a.ideal_svg {
        let t = crate::trace::ideal::timeline(&choice, &shape, dtype, op)?;
        let svg = timeline::svg::to_svg(&t).map_err(Error::Plan)?;
        report::write_output("--ideal-svg", p, svg.as_bytes()).map_err(crate::cli::report_error)?;
    }
    out_raw(&text)?;
    Ok(!text.contains("\n  FAIL"))
}

/// Everything about a real run, checked before any work.
struct Real {
    cfg: ringreduce::engine::EngineConfig,
    shape: Shape,
    op: ReduceOp,
    choice: AlgoChoice,
    nccl: Option<Nccl>,
}

fn real_run(a: TraceArgs) -> Result<bool> {
    let backend = a.backend.unwrap_or(BackendChoice::Auto);
    let (dtype, op, collective) = a.kinds.single()?;
    let choice: AlgoChoice = algo_of(&a)?.parse().map_err(Error::BadArgument)?;
    let count = parse_count(a.count.as_deref(), a.size.as_deref(), dtype)?;
    if count == 0 {
        return Err(Error::BadArgument(
            "a timeline of 0 elements times nothing: give --size or --count of at least one element".into(),
        ));
    }
    if a.calls == 0 || a.calls > MAX_CALLS {
        return Err(Error::BadArgument(format!(
            "--calls must be 1 to {MAX_CALLS} (got {})",
            a.calls
        )));
    }
    if a.overhead_blocks > 1000 || a.overhead_iters > 100_000 || a.warmup > 100_000 {
        return Err(Error::BadArgument(
            "--warmup, --overhead-blocks and --overhead-iters: at most 100000, 1000 and 100000"
                .into(),
        ));
    }
    if a.overhead_blocks > 0 && a.overhead_iters == 0 {
        return Err(Error::BadArgument(
            "--overhead-iters must be at least 1 (or --overhead-blocks 0)".into(),
        ));
    }
    report::check_files(&[
        ("--timeline", a.timeline.as_deref(), report::Format::Json),
        ("--svg", a.svg.as_deref(), report::Format::Svg),
    ])
    .map_err(crate::cli::report_error)?;
    let common = Common {
        ranks: a.ranks,
        backend,
        devices: a.devices.clone(),
        timeout: a.timeout,
    };
    let cfg = common.config()?;
    let shape = Shape {
        collective,
        ranks: cfg.ranks,
        count,
        elem_size: dtype.size(),
        in_place: a.in_place,
    };
    choice.resolve(&shape)?;
    let cuda = super::cuda::gpus();
    let on_cpu = backend == BackendChoice::Cpu || cuda.is_err();
    if a.nccl_lib.is_some() && !a.nccl {
        return Err(Error::BadArgument(
            "--nccl-lib names the library for --nccl, which is not given: add --nccl or leave --nccl-lib out".into(),
        ));
    }
    if let (BackendChoice::Cuda, Err(why)) = (backend, &cuda) {
        // The backend asked for is missing: say that, not that --nccl
        // needs it.
        return Err(Error::NoCuda(why.to_string()));
    }
    if a.nccl {
        if on_cpu {
            return Err(Error::BadArgument(format!(
                "--nccl needs the CUDA backend{}",
                match (&cuda, backend) {
                    (_, BackendChoice::Cpu) => " (this is --backend cpu)".to_string(),
                    (Err(why), _) => format!(" ({why})"),
                    (Ok(_), _) => String::new(),
                }
            )));
        }
        let gpus = match (&a.devices, &cuda) {
            (Some(d), _) => {
                let mut d = d.clone();
                d.sort_unstable();
                d.dedup();
                d.len()
            }
            (None, Ok(gpus)) => *gpus,
            (None, Err(_)) => 0,
        };
        if cfg.ranks > gpus {
            return Err(Error::BadArgument(format!(
                "--nccl needs one GPU per rank: {} ranks on {gpus} GPUs (drop --nccl for more ranks than GPUs)",
                cfg.ranks
            )));
        }
    }
    check_host_memory(
        crate::cli::run::host_bytes(&shape, on_cpu),
        "this timeline's inputs and buffers",
    )?;
    let nccl = if a.nccl {
        Some(Nccl::load(a.nccl_lib.as_deref())?)
    } else {
        None
    };
    let real = Real {
        cfg,
        shape,
        op,
        choice,
        nccl,
    };
    ringreduce::with_element!(dtype, T => run_typed::<T>(&a, real))
}

fn run_typed<T: Element>(a: &TraceArgs, r: Real) -> Result<bool> {
    let mut e = Engine::new(r.cfg)?;
    if let Some(lib) = &r.nccl {
        super::cuda::nccl_init(&mut e, lib)?;
    }
    let o = RecordOptions {
        choice: r.choice,
        collective: r.shape.collective,
        count: r.shape.count,
        in_place: r.shape.in_place,
        op: r.op,
        warmup: a.warmup,
        calls: a.calls,
        overhead: (a.overhead_blocks > 0).then_some((a.overhead_blocks, a.overhead_iters)),
        nccl: r.nccl.is_some(),
        isolated: false,
    };
    let rec = timeline::record::<T>(&mut e, &o)?;
    let kind = e.backend_kind();
    report_run(&e, &rec, a, kind)?;
    let rerr = |err: report::ReportError| crate::cli::report_error(err);
    let t = &rec.timeline;
    if let Some(p) = &a.timeline {
        let text = timeline::chrome::to_string(t).map_err(Error::Plan)?;
        report::write_output("--timeline", p, text.as_bytes()).map_err(rerr)?;
        out(format!(
            "# wrote {} (Chrome trace-event JSON: open it in https://ui.perfetto.dev or chrome://tracing)",
            p.display()
        ))?;
    }
    if let Some(p) = &a.svg {
        let svg = timeline::svg::to_svg(t).map_err(Error::Plan)?;
        report::write_output("--svg", p, svg.as_bytes()).map_err(rerr)?;
        out(format!("# wrote {}", p.display()))?;
    }
    Ok(true)
}

/// The text report of a recorded run.
fn report_run(e: &Engine, rec: &Recording, a: &TraceArgs, kind: BackendKind) -> Result<()> {
    let t = &rec.timeline;
    let mut paths: Vec<String> = t.calls.iter().map(|c| c.plan.name.clone()).collect();
    paths.dedup();
    out(format!(
        "# ringreduce trace: {} · {} · {}",
        paths.join(", "),
        t.what,
        ringreduce::words::counted(t.ranks(), "rank")
    ))?;
    if algo_of(a)?.trim().eq_ignore_ascii_case("auto") && ringreduce::algo::forced_algo()?.is_some()
    {
        out(format!("# algorithm: {}", crate::cli::auto_source()?))?;
    }
    if let Some(n) = e.fallback_note() {
        out(format!("# note: {n}"))?;
    }
    out(format!("# backend: {}", t.backend))?;
    if let Some(s) = t.timing_source() {
        out(format!("# {s}"))?;
    }
    if let Some(s) = t.nccl_timing_source() {
        out(format!("# NCCL's call: {s}"))?;
    }
    out(format!("# clock: {}", t.clock()))?;
    if kind == BackendKind::Cpu {
        out("# (CPU backend: host timestamps of the rank threads, not GPU timings)")?;
    }
    match &rec.overhead {
        Some(o) => out(format!("# {}", o.line()))?,
        None => out("# measurement overhead: not measured (--overhead-blocks 0)")?,
    }
    out(format!(
        "# {} timed call{} after {} warm-up call{}; times in us from the earliest op start:",
        a.calls,
        if a.calls == 1 { "" } else { "s" },
        a.warmup,
        if a.warmup == 1 { "" } else { "s" }
    ))?;
    for s in t.spans() {
        out(format!("#   {s}"))?;
    }
    let last = t.calls.len().saturating_sub(1);
    out(format!(
        "# ops of call {}{} (one row per op part per rank and lane):",
        last + 1,
        if t.nccl.is_empty() {
            ""
        } else {
            " and NCCL's call"
        }
    ))?;
    out_raw(&t.table(last).map_err(Error::Plan)?)?;
    let b = t.breakdown().map_err(Error::Plan)?;
    if let Some(c) = b.get(last) {
        out(format!(
            "# where call {}'s time went, per rank (us): wall = host issue + waiting for a peer + copy + reduce (not under a copy) + rest",
            last + 1
        ))?;
        for (r, s) in c.ranks.iter().enumerate() {
            if !t.local_ranks.contains(&r) {
                continue; // another process's rank: not timed here
            }
            out(format!(
                "#   rank {r}: wall {:.1} = issue {:.1} + wait {:.1} + copy {:.1} + reduce {:.1} + rest {:.1}",
                s.wall_ns / 1e3,
                s.issue_ns / 1e3,
                s.wait_ns / 1e3,
                s.copy_ns / 1e3,
                s.reduce_ns / 1e3,
                s.rest_ns / 1e3
            ))?;
        }
    }
    out_traffic(rec)?;
    out_order_check(t)
}

/// The bytes each rank moved in the last call, beside the plan's count.
fn out_traffic(rec: &Recording) -> Result<()> {
    let t = &rec.timeline;
    if let Some(c) = t.calls.last() {
        let plan = c.plan.traffic();
        out("# bytes per rank and call, counted by the backend as it moved them (the plan's count in brackets):")?;
        if t.local_ranks.len() < t.rank_to_device.len() {
            out(format!(
                "#   (one process per rank: only what rank{} {} issued is counted here)",
                if t.local_ranks.len() == 1 { "" } else { "s" },
                t.local_ranks
                    .clone()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))?;
        }
        for (r, m) in rec.traffic.iter().enumerate() {
            let p = plan.get(r).copied().unwrap_or_default();
            out(format!(
                "#   rank {r}: sent {} [{}], received {} [{}]",
                m.sent, p.sent, m.received, p.received
            ))?;
        }
    }
    Ok(())
}

/// Whether every timed op follows the plan's order (within a tolerance
/// and the clock skew), or the times that do not.
fn out_order_check(t: &Timeline) -> Result<()> {
    let slices = t.slices().map_err(Error::Plan)?;
    let flows = t.flows(&slices);
    let tol_ns = 2_000.0;
    let problems = t.check(tol_ns);
    if problems.is_empty() {
        out(format!(
            "# order check: {} op parts, each timed once per call; {} waits across ranks or lanes; every time follows the plan's order (tolerance {:.1} us + clock skew {:.1} us)",
            slices.iter().filter(|s| !s.nccl).count(),
            flows.len(),
            tol_ns / 1e3,
            t.skew_ns() / 1e3
        ))?;
    } else {
        out(format!(
            "# order check: {} times out of the plan's order beyond {:.1} us + skew {:.1} us:",
            problems.len(),
            tol_ns / 1e3,
            t.skew_ns() / 1e3
        ))?;
        for p in problems.iter().take(20) {
            out(format!("#   {p}"))?;
        }
    }
    Ok(())
}
