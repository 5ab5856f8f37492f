//! `ringreduce overlap`: a synthetic backward pass whose gradient buckets
//! are all-reduced as soon as each is produced, while the next ones are
//! computed: the pipeline of the article's last section ("通信与计算重叠"),
//! as PyTorch DDP runs it. Contenders in the same run: ringreduce's ring,
//! ringreduce auto, NCCL.
//!
//! Per kernel kind and bucket size, per contender, three measurements,
//! interleaved step by step (so drift of the machine hits them alike):
//!
//! * compute alone: every bucket's kernel back to back on the work stream;
//! * communication alone: every bucket's all-reduce back to back (each
//!   stream-ordered after the work stream, which is idle);
//! * the overlapped step: kernel b, then bucket b's all-reduce ordered after
//!   it, then kernel b+1, ... all issued at once: the collective of bucket b
//!   runs while kernel b+1 computes. ringreduce uses its stream-ordered call
//!   ([`ringreduce::backend::ordered`]); NCCL's `ncclAllReduce` goes on a
//!   separate stream that waits for the kernel's event, the way DDP does.
//!
//! Times come from GPU events around every kernel and call (the host clock
//! on the CPU backend), per rank: a phase lasts from its first kernel's (or
//! call's) start to its last end, the slowest rank counts. Reported:
//! compute, comm, step, the overlap efficiency `(compute + comm - step) /
//! min(compute, comm)`, and the slowdown of the compute kernels under the
//! concurrent collective: `sum of kernel durations overlapped / alone - 1`.
//! Every bucket of every step is checked bit for bit on the device (the
//! `rr_grad_check` kernel), and the buckets of each contender's last step
//! once more on the host.
//!
//! The kernels are hand-written PTX (`ptx/compute.ptx`: the FLOP and byte
//! counts, and the expected times on an H200, are argued in its header).

use super::{check_host_memory, out, Common};
use crate::bench::{median, parse_contenders, Contender, ContenderKind};
use rayon::prelude::*;
use ringreduce::backend::ordered::{
    After, Completion, Grid, SpanTag, WorkArg, WorkLaunch, WorkSpan,
};
use ringreduce::backend::ordered::{Builtin, WorkKernel};
use ringreduce::backend::overlap::Gate;
use ringreduce::backend::{BackendKind, Binding, BufId, NcclCall};
use ringreduce::element::{DataType, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::{Collective, Shape};
use ringreduce::size::format_bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod host;
mod print;
mod step;
use host::grad_sum;
pub use print::timeline_svg;
use print::{print_config, print_targets};
use step::*;

/// FP32 FMA rate of one H200 (132 SMs x 128 FMA/clock x 1.98 GHz x 2).
pub const H200_FLOPS: f64 = 67e12;
/// HBM3e bandwidth of one H200.
pub const H200_HBM: f64 = 4.8e12;
/// The FMA kernel's multiplier and addend: its chains converge to 1.
const FMA_M: f32 = 0.999;
const FMA_C: f32 = 0.001;
/// Threads per block of the work kernels.
const BLOCK: u32 = 256;

#[derive(clap::Args, Debug, Clone)]
pub struct OverlapArgs {
    #[command(flatten)]
    pub common: Common,
    /// Gradient buckets per step.
    #[arg(long)]
    pub buckets: Option<usize>,
    /// Bytes per bucket, comma-separated for several runs (PyTorch DDP's
    /// default bucket is 25 MiB; a multiple of 16 bytes). Default: 25MiB on
    /// CUDA, 64KiB on the CPU.
    #[arg(long, allow_hyphen_values = true)]
    pub bucket_size: Option<String>,
    /// The compute kernels: fma (compute-bound), mem (memory-bound), or
    /// both, comma-separated.
    #[arg(long, default_value = "fma,mem")]
    pub kernel: String,
    /// Contenders, comma-separated: ring, auto, any ringreduce path, nccl.
    /// Default: ring,auto,nccl on GPUs; ring,auto on the CPU backend (which
    /// has no NCCL) or where the NCCL library is not found, with a note
    /// (with --nccl-lib, NCCL is always a contender).
    #[arg(long)]
    pub contenders: Option<String>,
    /// Timed steps per measurement (the median is reported).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Untimed (but checked) steps first.
    #[arg(long)]
    pub warmup: Option<usize>,
    /// FMAs per element of the fma kernel (a multiple of 32). Default: 512
    /// on CUDA (~100 us per 25 MiB bucket on an H200), 64 on the CPU.
    #[arg(long)]
    pub fmas: Option<u32>,
    /// Passes of the mem kernel over its work arrays: (12 * passes + 4)
    /// bytes of HBM traffic per bucket element. Default: 4 on CUDA, 1 on
    /// the CPU.
    #[arg(long)]
    pub passes: Option<u32>,
    /// Priority of the collectives' streams (ringreduce's lanes and NCCL's
    /// stream alike): high or default.
    #[arg(long, default_value = "high")]
    pub comm_priority: String,
    /// Hold each timed phase behind a gate on the work streams until all of
    /// it is issued (on), as when the host runs far ahead of the GPUs in
    /// training, so host issue gaps do not enter the times; or let the GPUs
    /// start as the host issues (off).
    #[arg(long, default_value = "on")]
    pub gate: String,
    /// Host-side check of every contender's last overlapped step, besides
    /// the device check of every step: last or none.
    #[arg(long, default_value = "last")]
    pub host_check: String,
    /// Write the numbers as JSON: a path ending in .json, or a device, FIFO
    /// or /dev/stdout.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the spans of each contender's last overlapped step as JSON (a
    /// path ending in .json), and the picture next to it (same name, .svg);
    /// a device, FIFO or /dev/stdout gets the JSON alone.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Path to libnccl.so.2 (overrides NCCL_HOME, the linker path).
    #[arg(long)]
    pub nccl_lib: Option<PathBuf>,
}

/// The contenders when `--contenders` is not given.
const DEFAULT_CONTENDERS: &str = "ring,auto,nccl";

/// The two synthetic layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum KernelKind {
    Fma,
    Mem,
}

impl KernelKind {
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Fma => "fma",
            KernelKind::Mem => "mem",
        }
    }

    fn parse_list(s: &str) -> Result<Vec<KernelKind>> {
        let mut v = Vec::new();
        let items = ringreduce::words::list_items(s)
            .map_err(|e| Error::BadArgument(format!("--kernel: {e}")))?;
        for p in items {
            let k = match p.to_ascii_lowercase().as_str() {
                "fma" | "compute" => KernelKind::Fma,
                "mem" | "memory" => KernelKind::Mem,
                other => {
                    return Err(Error::BadArgument(format!(
                        "unknown kernel {other:?} (fma, mem)"
                    )))
                }
            };
            if !v.contains(&k) {
                v.push(k);
            }
        }
        if v.is_empty() {
            return Err(Error::BadArgument("--kernel needs fma, mem or both".into()));
        }
        Ok(v)
    }
}

/// Everything the run needs, validated.
#[derive(Debug, Clone)]
struct Settings {
    buckets: usize,
    sizes: Vec<u64>,
    kernels: Vec<KernelKind>,
    contenders: Vec<Contender>,
    steps: usize,
    warmup: usize,
    fma_iters: u32,
    passes: u32,
    high: bool,
    host_check: bool,
    gate: bool,
}

/// One configuration's buffers on every rank.
struct Bufs {
    buckets: Vec<BufId>,
    bind: Vec<Arc<Vec<Binding>>>,
    x: Option<BufId>,
    y: Option<BufId>,
    ctr: BufId,
}

/// The measured numbers of one contender in one configuration.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Row {
    pub contender: String,
    pub path: String,
    pub compute_us: f64,
    pub comm_us: f64,
    pub step_us: f64,
    /// max(compute, comm): a perfect overlap.
    pub ideal_us: f64,
    pub efficiency: f64,
    pub kernels_alone_us: f64,
    pub kernels_overlapped_us: f64,
    pub slowdown: f64,
    /// Bucket checks on the device (buckets x ranks x checked steps).
    pub bucket_checks: u64,
    pub elements_checked: u64,
    pub wrong: u64,
    pub host_checked_elements: u64,
    pub host_wrong: u64,
    pub samples: Samples,
}

/// Every timed step's values.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Samples {
    pub compute_us: Vec<f64>,
    pub comm_us: Vec<f64>,
    pub step_us: Vec<f64>,
    pub kernels_alone_us: Vec<f64>,
    pub kernels_overlapped_us: Vec<f64>,
}

/// One kernel kind at one bucket size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConfigResult {
    pub kernel: &'static str,
    pub bucket_bytes: u64,
    pub bucket_elems: usize,
    pub buckets: usize,
    pub fmas_per_element: u32,
    pub passes: u32,
    pub flop_per_bucket: f64,
    pub hbm_bytes_per_bucket: f64,
    /// The kernel's time per bucket on an H200 by the roofline model.
    pub model_us_per_bucket: f64,
    /// The best overlap efficiency a pipeline of this many buckets can
    /// reach: (buckets - 1) / buckets (docs/PERFORMANCE.md, "Overlap").
    pub max_efficiency: f64,
    pub rows: Vec<Row>,
}

/// The spans of one contender's last overlapped step.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TimelineRun {
    pub contender: String,
    pub spans: Vec<WorkSpan>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TimelineConfig {
    pub kernel: &'static str,
    pub bucket_bytes: u64,
    pub runs: Vec<TimelineRun>,
}

/// The whole run, as `--json` writes it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OverlapReport {
    pub tool: &'static str,
    pub version: &'static str,
    pub date: String,
    pub command: String,
    pub backend: String,
    pub hardware: Vec<String>,
    pub ranks: usize,
    pub nccl_version: Option<String>,
    pub comm_priority: &'static str,
    /// Whether each timed phase was issued behind a closed gate.
    pub gate: bool,
    pub buckets: usize,
    pub steps: usize,
    pub warmup: usize,
    pub notes: Vec<String>,
    pub configs: Vec<ConfigResult>,
    #[serde(skip)]
    pub timeline: Vec<TimelineConfig>,
}

impl OverlapReport {
    /// Bucket checks run, every contender and configuration.
    pub fn checks(&self) -> u64 {
        self.configs
            .iter()
            .flat_map(|c| &c.rows)
            .map(|r| r.bucket_checks)
            .sum()
    }

    /// Total wrong elements, device and host checks.
    pub fn wrong(&self) -> u64 {
        self.configs
            .iter()
            .flat_map(|c| &c.rows)
            .map(|r| r.wrong + r.host_wrong)
            .sum()
    }
}

fn opt_or<T: Copy>(v: Option<T>, cuda: T, cpu: T, is_cpu: bool) -> T {
    v.unwrap_or(if is_cpu { cpu } else { cuda })
}

/// Validate the arguments (before any engine exists).
fn settings(a: &OverlapArgs, cpu: bool) -> Result<Settings> {
    let buckets = opt_or(a.buckets, 8, 4, cpu);
    if buckets == 0 || buckets > 4096 {
        return Err(Error::BadArgument(format!(
            "--buckets must be 1..=4096 (got {buckets})"
        )));
    }
    let sizes_text =
        a.bucket_size
            .clone()
            .unwrap_or_else(|| if cpu { "64KiB".into() } else { "25MiB".into() });
    let mut sizes = Vec::new();
    let items = ringreduce::words::list_items(&sizes_text)
        .map_err(|e| Error::BadArgument(format!("--bucket-size: {e}")))?;
    for s in items {
        let b = super::size_arg("--bucket-size", s)?;
        if b == 0 || b % 16 != 0 {
            return Err(Error::BadArgument(format!(
                "--bucket-size {s:?}: a bucket is a positive multiple of 16 bytes (4 floats)"
            )));
        }
        sizes.push(b);
    }
    if sizes.is_empty() {
        return Err(Error::BadArgument(
            "--bucket-size needs at least one size".into(),
        ));
    }
    let kernels = KernelKind::parse_list(&a.kernel)?;
    let contenders = parse_contenders(
        "--contenders",
        a.contenders.as_deref().unwrap_or(DEFAULT_CONTENDERS),
    )?;
    for c in &contenders {
        if !matches!(
            c.kind,
            ContenderKind::Engine(_) | ContenderKind::Nccl(ringreduce::backend::NcclBuffers::Plain)
        ) {
            return Err(Error::BadArgument(format!(
                "{}: the overlap benchmark takes ringreduce paths and nccl (no graphs, no registered buffers)",
                c.name
            )));
        }
    }
    let steps = opt_or(a.steps, 10, 2, cpu);
    let warmup = opt_or(a.warmup, 2, 1, cpu);
    if steps == 0 {
        return Err(Error::BadArgument("--steps must be at least 1".into()));
    }
    let fmas = opt_or(a.fmas, 512, 64, cpu);
    if fmas % 32 != 0 {
        return Err(Error::BadArgument(format!(
            "--fmas must be a multiple of 32 (the kernel does 32 per loop trip; got {fmas})"
        )));
    }
    let passes = opt_or(a.passes, 4, 1, cpu);
    let high = match a.comm_priority.trim().to_ascii_lowercase().as_str() {
        "high" => true,
        "default" | "normal" => false,
        other => {
            return Err(Error::BadArgument(format!(
                "--comm-priority {other:?}: high or default"
            )))
        }
    };
    let gate = match a.gate.trim().to_ascii_lowercase().as_str() {
        "on" => true,
        "off" => false,
        other => return Err(Error::BadArgument(format!("--gate {other:?}: on or off"))),
    };
    let host_check = match a.host_check.trim().to_ascii_lowercase().as_str() {
        "last" => true,
        "none" => false,
        other => {
            return Err(Error::BadArgument(format!(
                "--host-check {other:?}: last or none"
            )))
        }
    };
    Ok(Settings {
        buckets,
        sizes,
        kernels,
        contenders,
        steps,
        warmup,
        fma_iters: fmas / 32,
        passes,
        high,
        host_check,
        gate,
    })
}

/// (FLOP, HBM bytes, model microseconds on an H200) of one bucket's kernel.
pub fn model(kind: KernelKind, n: usize, fma_iters: u32, passes: u32) -> (f64, f64, f64) {
    let n = n as f64;
    match kind {
        KernelKind::Fma => {
            let flop = 64.0 * f64::from(fma_iters) * n;
            (flop, 4.0 * n, flop / H200_FLOPS * 1e6)
        }
        KernelKind::Mem => {
            let bytes = (12.0 * f64::from(passes) + 4.0) * n;
            (2.0 * f64::from(passes) * n, bytes, bytes / H200_HBM * 1e6)
        }
    }
}

pub fn execute(a: OverlapArgs) -> Result<bool> {
    let rep = run(&a)?;
    let wrong = rep.wrong() + u64::from(rep.checks() == 0);
    if let Some(p) = &a.json {
        let mut s = serde_json::to_string_pretty(&rep).map_err(crate::cli::report_error)?;
        s.push('\n');
        write_file("--json", p, s.as_bytes())?;
        crate::note!("wrote {}", p.display());
    }
    if let Some(p) = &a.timeline {
        let mut s =
            serde_json::to_string_pretty(&rep.timeline).map_err(crate::cli::report_error)?;
        s.push('\n');
        write_file("--timeline", p, s.as_bytes())?;
        match timeline_svg_path(p) {
            Some(svg) => {
                write_file("--timeline (its .svg)", &svg, timeline_svg(&rep).as_bytes())?;
                crate::note!("wrote {} and {}", p.display(), svg.display());
            }
            None => crate::note!("wrote {} (not a file: no SVG next to it)", p.display()),
        }
    }
    Ok(wrong == 0)
}

fn write_file(flag: &'static str, p: &Path, data: &[u8]) -> Result<()> {
    crate::report::write_output(flag, p, data).map_err(crate::cli::report_error)
}

/// Where `--timeline`'s picture goes: next to the JSON, same name, `.svg`;
/// none when the JSON is written through (a device, FIFO or `/dev/stdout`:
/// `/dev/stdout.svg` is no place for a file).
fn timeline_svg_path(timeline: &Path) -> Option<PathBuf> {
    (!crate::report::is_written_through(timeline)).then(|| timeline.with_extension("svg"))
}

/// Run the benchmark and print its tables; the report for `--json`.
pub fn run(a: &OverlapArgs) -> Result<OverlapReport> {
    let cfg = a.common.config()?;
    if let Some(spec) = &cfg.process {
        // Every rank refuses alike and at once: no rank waits for another.
        return Err(Error::BadArgument(format!(
            "overlap runs every rank in one process (rank {} of a job of {} here, under launch or mpirun): it queues each rank's gradient kernels and all-reduces on that process's streams and reads every rank's buckets back, which ranks in separate processes cannot; run `ringreduce overlap --ranks {}` without launch or mpirun",
            spec.rank, spec.size, spec.size
        )));
    }
    let cpu_wanted =
        cfg.backend == ringreduce::backend::BackendChoice::Cpu || crate::cli::cuda::gpus().is_err();
    let p = settings(a, cpu_wanted)?;
    let svg = a.timeline.as_deref().and_then(timeline_svg_path);
    // Each path under the flag that names it (the SVG is --timeline's, with
    // its extension replaced).
    use crate::report::Format;
    crate::report::check_files(&[
        ("--json", a.json.as_deref(), Format::Json),
        ("--timeline", a.timeline.as_deref(), Format::Json),
        ("--timeline (its .svg)", svg.as_deref(), Format::Svg),
    ])
    .map_err(crate::cli::report_error)?;
    let ranks = cfg.ranks;
    let mut p = p;
    refuse_buckets(&p, ranks)?;
    let by_default = a.contenders.is_none() && a.nccl_lib.is_none();
    let (nccl, nccl_note) = super::nccl_for_contenders(
        &mut p.contenders,
        by_default,
        cfg.backend,
        a.nccl_lib.as_deref(),
        "--contenders",
    )?;
    if p.contenders.is_empty() {
        return Err(Error::BadArgument(
            "--contenders: no contender is left to measure".into(),
        ));
    }
    let largest = p.sizes.iter().copied().max().unwrap_or(0) as u128;
    if cpu_wanted {
        let per_rank = largest * p.buckets as u128 * (2 + 2 * u128::from(p.passes));
        check_host_memory(per_rank * ranks as u128, "the overlap benchmark's buffers")?;
    }
    let mut core = Engine::new(cfg)?;
    let cpu = core.backend_kind() == BackendKind::Cpu;
    let mut notes = engine_notes(&core, cpu);
    let mut contenders = p.contenders.clone();
    let mut nccl_version = None;
    if let Some(n) = nccl_note {
        crate::note!("note: {n}");
        notes.push(n);
    }
    if let Some(lib) = &nccl {
        nccl_version = Some(format!(
            "{} ({})",
            lib.version_string()?,
            lib.path().display()
        ));
        match crate::cli::cuda::nccl_init(&mut core, lib) {
            Ok(()) => {}
            Err(e @ Error::Unsupported(..)) if by_default => {
                let n = format!("nccl left out of the default contenders: {e}");
                crate::note!("note: {n}");
                notes.push(n);
                contenders.retain(|c| !c.is_nccl());
            }
            Err(e) => return Err(e),
        }
    }
    core.set_comm_priority(p.high)?;
    // The CPU runs every kernel and call when issued: nothing to hold back.
    p.gate &= !cpu;
    if p.gate {
        match core.work_gate() {
            Ok(g) => g.open(),
            Err(e) => {
                crate::note!("note: no gate: {e}");
                notes.push(format!("the work-stream gate is unavailable ({e}); host issue gaps are part of the times"));
                p.gate = false;
            }
        }
    }
    let info = core.info().clone();
    say_setup(
        ranks,
        &p,
        cpu,
        &info.describe,
        nccl_version.as_deref(),
        &notes,
    )?;
    let mut rep = OverlapReport {
        tool: "ringreduce overlap",
        version: env!("CARGO_PKG_VERSION"),
        date: super::now_utc(),
        command: std::env::args_os()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" "),
        backend: info.describe.clone(),
        hardware: info.hardware.clone(),
        ranks,
        nccl_version,
        comm_priority: if p.high { "high" } else { "default" },
        gate: p.gate,
        buckets: p.buckets,
        steps: p.steps,
        warmup: p.warmup,
        notes,
        configs: Vec::new(),
        timeline: Vec::new(),
    };
    for &kind in &p.kernels {
        for &size in &p.sizes {
            let (cfg_result, tl) = run_config(&mut core, &p, &contenders, kind, size as usize)?;
            print_config(&cfg_result, &p, ranks, cpu)?;
            rep.configs.push(cfg_result);
            rep.timeline.push(tl);
        }
    }
    print_targets(&rep)?;
    say_check(&rep, cpu)?;
    Ok(rep)
}

/// Every contender must take every bucket: refused before anything runs.
fn refuse_buckets(p: &Settings, ranks: usize) -> Result<()> {
    for c in &p.contenders {
        for &size in &p.sizes {
            let shape = Shape::all_reduce(ranks, (size / 4) as usize, 4, true);
            if let Some(why) = c.refusal(&shape, None) {
                return Err(Error::BadArgument(format!(
                    "--contenders {}: it cannot all-reduce a {} bucket in place on {}: {why}",
                    c.name,
                    format_bytes(size),
                    ringreduce::words::counted(ranks, "rank")
                )));
            }
        }
    }
    Ok(())
}

/// The engine's notes: its fallback, the CPU's, the environment.
fn engine_notes(core: &Engine, cpu: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(n) = core.fallback_note() {
        notes.push(n.to_string());
    }
    if cpu {
        notes.push("CPU backend: the work kernels run on the host and every call completes when issued, so nothing overlaps; the run checks results and order, its times are not a measurement".into());
    }
    for (k, v) in ringreduce::param::reported() {
        notes.push(format!("env {k}={v}"));
    }
    notes
}

/// The lines before the tables: the run, the backend, NCCL, the notes.
fn say_setup(
    ranks: usize,
    p: &Settings,
    cpu: bool,
    describe: &str,
    nccl_version: Option<&str>,
    notes: &[String],
) -> Result<()> {
    out(format!(
        "ringreduce overlap: {}, {} per step, {} (median) after {} warm-up; collectives' streams: {}; {}",
        ringreduce::words::counted(ranks, "rank"),
        ringreduce::words::counted(p.buckets, "bucket"),
        ringreduce::words::counted(p.steps, "timed step"),
        p.warmup,
        if cpu {
            "no priorities on the CPU"
        } else if p.high {
            "high priority"
        } else {
            "default priority"
        },
        if cpu {
            "no gate (the CPU runs each kernel and call when issued)"
        } else if p.gate {
            "each phase issued behind a gate, then released"
        } else {
            "no gate (the GPUs start as the host issues)"
        }
    ))?;
    out(format!("backend   : {describe}"))?;
    if let Some(v) = nccl_version {
        out(format!("nccl      : {v}"))?;
    }
    for n in notes {
        out(format!("note      : {n}"))?;
    }
    Ok(())
}

/// The check's line: a check that checked nothing is not a pass.
fn say_check(rep: &OverlapReport, cpu: bool) -> Result<()> {
    let wrong = rep.wrong();
    let checks = rep.checks();
    // A check that checked nothing is not a pass.
    out(format!(
        "check     : {} ({checks} bucket checks by rr_grad_check{}, every bucket of every step; {} elements of the last steps checked again on the host; {wrong} wrong)",
        match (wrong, checks) {
            (0, 0) => "NOTHING CHECKED",
            (0, _) => "PASS",
            _ => "FAIL",
        },
        if cpu { " (run by the host on the CPU backend)" } else { " on the GPUs" },
        rep.configs.iter().flat_map(|c| &c.rows).map(|r| r.host_checked_elements).sum::<u64>()
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests;
