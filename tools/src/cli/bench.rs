//! `ringreduce bench`: the nccl-tests-style sweep (`-b -e -f -n -w -c`, the
//! same columns and bus-bandwidth factors), every contender in the same run,
//! one table per (collective, type, op), streamed as rows are measured, with
//! JSON, CSV and an SVG plot.

use super::{check_host_memory, out, Common, Kinds};
use crate::bench::{self, Contender};
use crate::report::{self, ColdStart, Header, Report};
use ringreduce::element::ReduceOp;
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::Collective;
use ringreduce::size::format_bytes;
use std::path::PathBuf;
use std::time::Instant;

pub(crate) mod model;
mod sweep;
use model::{breakdown_rows, fit_models, out_breakdown, out_models};
use sweep::sweep;

/// `--algo`'s help: every path of the algorithm registry.
fn algo_help() -> String {
    format!(
        "Contenders, comma-separated: auto (the engine's choice by size), any path ({}), nccl, \
         nccl:reg (its buffers registered, nccl-tests' -R 1), nccl:sym (as symmetric windows, -R \
         2: every path then runs on NCCL's memory), and any of them with :graph (captured into CUDA graphs, 2 calls per graph). Default: \
         auto,nccl on GPUs; auto alone on the CPU backend (which has no NCCL) or where the NCCL \
         library is not found, with a note saying so (with --nccl-lib, NCCL is always a \
         contender).",
        super::path_list(&[])
    )
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub kinds: Kinds,
    /// Path to libnccl.so.2 (overrides NCCL_HOME, the linker path and
    /// Python wheels).
    #[arg(long)]
    pub nccl_lib: Option<PathBuf>,
    /// Smallest size (bytes per rank; reduce-scatter and all-gather: the
    /// whole buffer, as nccl-tests).
    #[arg(allow_hyphen_values = true, short = 'b', long, default_value = "8")]
    pub minbytes: String,
    /// Largest size.
    #[arg(allow_hyphen_values = true, short = 'e', long, default_value = "64MiB")]
    pub maxbytes: String,
    /// Multiply the size by this factor each row.
    #[arg(short = 'f', long, default_value_t = 2.0)]
    pub stepfactor: f64,
    /// Timed iterations per block.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub iters: usize,
    /// Warm-up iterations per row (not timed).
    #[arg(short = 'w', long, default_value_t = 5)]
    pub warmup: usize,
    /// Check results (1) or not (0), as in nccl-tests.
    #[arg(short = 'c', long, default_value_t = 1)]
    pub check: u8,
    // Contenders: every path of the algorithm registry, in the help.
    #[arg(long, help = algo_help())]
    pub algo: Option<String>,
    /// Write all numbers as JSON: a path ending in .json, or a device, FIFO
    /// or /dev/stdout.
    #[arg(short = 'J', long = "json")]
    pub json: Option<PathBuf>,
    /// Write the rows as CSV: a path ending in .csv, or a device, FIFO or
    /// /dev/stdout.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw busbw and time per call vs size as SVG: a path ending in .svg,
    /// or a device, FIFO or /dev/stdout.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Size for the cold-start measurement.
    #[arg(allow_hyphen_values = true, long, default_value = "4MiB")]
    pub cold_size: String,
    /// Skip the peer-copy ceiling measurement.
    #[arg(long)]
    pub no_ceiling: bool,
    /// Fewer iterations for rows above this size (keeps long sweeps short).
    #[arg(allow_hyphen_values = true, long, default_value = "256MiB")]
    pub big: String,
    /// Timed blocks of -n calls per cell; the cell is the median block's mean.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub blocks: u16,
    /// After the sweep, time 3 isolated calls of the auto path at every size
    /// and split each rank's time (host issue, waiting for a peer, copy,
    /// reduce, the rest) from their timelines.
    #[arg(long)]
    pub breakdown: bool,
}

/// The contenders when `--algo` is not given.
const DEFAULT_ALGO: &str = "auto,nccl";

/// The arguments, checked (with the output paths and the host memory)
/// before anything runs.
struct Args {
    cfg: ringreduce::engine::EngineConfig,
    ranks: usize,
    combos: super::Combos,
    contenders: Vec<Contender>,
    /// No `--algo` and no `--nccl-lib`: NCCL only where there is one.
    by_default: bool,
    min: u64,
    max: u64,
    big: u64,
    cold: u64,
    sizes: Vec<u64>,
    skip_notes: Vec<String>,
}

fn parse_args(a: &BenchArgs) -> Result<Args> {
    let cfg = a.common.config()?;
    let ranks = cfg.ranks;
    let combos = a.kinds.parse()?;
    let contenders = bench::parse_contenders("--algo", a.algo.as_deref().unwrap_or(DEFAULT_ALGO))?;
    // The default contenders compare with NCCL where there is one; asked
    // for by name (--algo, --nccl-lib), NCCL must be there
    // (super::nccl_for_contenders, after the other arguments).
    let by_default = a.algo.is_none() && a.nccl_lib.is_none();
    // Whether this runs on the CPU backend (`--backend auto` without a GPU
    // too): the memory estimates below depend on it.
    let on_cpu = cfg.backend.cpu_reason().is_some();
    let min = super::size_arg("-b/--minbytes", &a.minbytes)?;
    let max = super::size_arg("-e/--maxbytes", &a.maxbytes)?;
    let big = super::size_arg("--big", &a.big)?;
    let cold = super::size_arg("--cold-size", &a.cold_size)?;
    let sizes = bench::sweep_sizes(min, max, a.stepfactor)?;
    if a.iters == 0 {
        return Err(Error::BadArgument("-n/--iters must be at least 1".into()));
    }
    if a.check > 1 {
        return Err(Error::BadArgument("-c/--check is 0 or 1".into()));
    }
    if cold == 0 || cold % 4 != 0 {
        return Err(Error::BadArgument(
            "--cold-size must be a positive multiple of 4 bytes".into(),
        ));
    }
    let skip_notes = skipped_notes(&combos, ranks, &sizes, (min, max))?;
    report::check_outputs(a.json.as_deref(), a.csv.as_deref(), a.plot.as_deref())
        .map_err(crate::cli::report_error)?;
    check_memory(&combos, ranks, max, cold, on_cpu)?;
    Ok(Args {
        cfg,
        ranks,
        combos,
        contenders,
        by_default,
        min,
        max,
        big,
        cold,
        sizes,
        skip_notes,
    })
}

/// The host memory of the sweep's largest row and of the cold start.
fn check_memory(
    combos: &super::Combos,
    ranks: usize,
    max: u64,
    cold: u64,
    on_cpu: bool,
) -> Result<()> {
    let largest = combos
        .each()
        .iter()
        .map(|&(coll, dtype, _)| {
            let count = bench::count_for(coll, max, dtype.size(), ranks);
            let shape = ringreduce::plan::Shape {
                collective: coll,
                ranks,
                count,
                elem_size: dtype.size(),
                in_place: false,
            };
            crate::cli::run::host_bytes(&shape, on_cpu)
        })
        .max()
        .unwrap_or(0);
    check_host_memory(
        largest,
        &format!("the sweep's largest row ({})", format_bytes(max)),
    )?;
    // The cold-start measurement runs one f32 all-reduce of --cold-size.
    let cold_shape = ringreduce::plan::Shape {
        collective: Collective::AllReduce,
        ranks,
        count: usize::try_from(cold / 4).unwrap_or(usize::MAX),
        elem_size: 4,
        in_place: false,
    };
    check_host_memory(
        crate::cli::run::host_bytes(&cold_shape, on_cpu),
        &format!(
            "the cold-start measurement (--cold-size {})",
            format_bytes(cold)
        ),
    )?;
    Ok(())
}

/// Paths that refuse a requested collective leave those cells empty; said
/// once, before measuring. `at` is where the ranks run, or `None` before
/// the engine is made: then only what a path refuses anywhere (a refusal
/// of the place follows once the engine is: one judged at a made-up place
/// named cells that were then measured).
fn refusals(x: &Args, at: Option<&ringreduce::algo::Placement>) -> Vec<String> {
    let (ranks, max) = (x.ranks, x.max);
    let mut refusals = Vec::new();
    for c in &x.contenders {
        for coll in &x.combos.collectives {
            for in_place in [false, true] {
                let shape = ringreduce::plan::Shape {
                    collective: *coll,
                    ranks,
                    count: bench::count_for(*coll, max, 4, ranks).max(1),
                    elem_size: 4,
                    in_place,
                };
                let head = format!("{} leaves its {coll} cells", c.name);
                if let Some(why) = c.refusal(&shape, at) {
                    if !refusals.iter().any(|r: &String| r.starts_with(&head)) {
                        refusals.push(format!("{head} empty: {why}"));
                    }
                }
            }
        }
    }
    refusals
}

pub fn execute(a: BenchArgs) -> Result<bool> {
    // -- every argument, the output paths and the memory, before anything runs
    let mut x = parse_args(&a)?;
    let mut refused = refusals(&x, None);
    let (nccl, default_note) = super::nccl_for_contenders(
        &mut x.contenders,
        x.by_default,
        x.cfg.backend,
        a.nccl_lib.as_deref(),
        "--algo",
    )?;
    let want_nccl = nccl.is_some();
    refused.extend(default_note);
    refused.extend(std::mem::take(&mut x.skip_notes));
    for r in &refused {
        crate::note!("note: {r}");
    }

    // -- the engine, its cold start, NCCL's, the ceiling
    let t0 = Instant::now();
    let mut e = Engine::new(x.cfg.clone())?;
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let cpu = e.backend_kind() == ringreduce::backend::BackendKind::Cpu;
    if want_nccl && cpu {
        return Err(Error::Unsupported("NCCL".into(), "cpu"));
    }
    if cpu {
        if let Some(c) = x.contenders.iter().find(|c| c.is_graph()) {
            return Err(Error::Unsupported(
                format!("{} (CUDA graphs)", c.name),
                "cpu",
            ));
        }
    }
    // The place's refusals (a path whose kernels cannot run where these
    // ranks are), known once the engine is.
    for r in refusals(&x, Some(&e.placement())) {
        if !refused.contains(&r) {
            crate::note!("note: {r}");
            refused.push(r);
        }
    }
    let mut notes = refused;
    nccl_memory(&mut e, &mut x, nccl.as_ref(), &mut notes)?;
    // One process per rank: only rank 0 reports and writes files.
    let root = e.job_spec().is_none_or(|j| j.rank == 0);
    engine_notes(&e, &x.contenders, cpu, &mut notes)?;
    let (cold_rows, nccl_version) =
        cold_starts(&mut e, &mut x, setup_ms, nccl.as_ref(), &mut notes)?;
    let ceiling = peer_ceiling(&mut e, &a, &x, &mut notes)?;
    let info = e.info().clone();
    let mut rep = Report {
        header: header(&a, &x, &info, cpu, nccl_version, ceiling, notes),
        cold_start: cold_rows,
        rows: Vec::new(),
        breakdown: Vec::new(),
    };

    // -- the sweep
    let mut e = sweep(e, &a, &x, root, &info, &mut rep)?;
    host_notes(&mut e, &x, &mut rep.header.notes)?;
    finish(
        e,
        &a,
        &x,
        Finish {
            root,
            cpu,
            ceiling,
            info,
        },
        rep,
    )
}

/// With `nccl:sym` among the contenders, the engine's buffers come from
/// NCCL's allocator (the memory symmetric windows need), for every path
/// alike, as nccl-tests' `-R 2` runs; where the engine cannot have them
/// (one process per rank), `nccl:sym` is dropped with a note.
fn nccl_memory(
    e: &mut Engine,
    x: &mut Args,
    nccl: Option<&super::cuda::Nccl>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let sym = |c: &Contender| c.nccl_buffers() == Some(ringreduce::backend::NcclBuffers::Symmetric);
    let Some(lib) = nccl.filter(|_| x.contenders.iter().any(sym)) else {
        return Ok(());
    };
    match super::cuda::nccl_memory(e, lib) {
        Ok(()) => notes.push(
            "buffers: every path runs on memory from NCCL's allocator (ncclMemAlloc), which nccl:sym's symmetric windows need (nccl-tests' -R 2)".into(),
        ),
        Err(err @ Error::Unsupported(..)) => {
            crate::note!("note: nccl:sym skipped: {err}");
            notes.push(format!("nccl:sym skipped: {err}"));
            x.contenders.retain(|c| !sym(c));
        }
        Err(err) => return Err(err),
    }
    Ok(())
}

/// The notes of the engine: its fallback, its processes, its backend,
/// a forced auto, the environment and the busbw factors.
fn engine_notes(
    e: &Engine,
    contenders: &[Contender],
    cpu: bool,
    notes: &mut Vec<String>,
) -> Result<()> {
    if let Some(n) = e.fallback_note() {
        notes.push(n.to_string());
    }
    if let Some(j) = e.job_spec() {
        notes.push(format!(
            "one process per rank: {} processes ({}); each cell is the slowest rank's time; NCCL is initialised per process (ncclGetUniqueId on rank 0, ncclCommInitRank in each)",
            j.size,
            j.origin.name()
        ));
    }
    if cpu {
        notes.push(
            "CPU backend: times are CPU wall-clock timings of host threads, not GPU timings".into(),
        );
    }
    if let Some(v) = ringreduce::algo::forced_algo()? {
        if contenders.iter().any(|c| {
            matches!(
                &c.kind,
                bench::ContenderKind::Engine(ringreduce::algo::AlgoChoice::Auto)
                    | bench::ContenderKind::EngineGraph(ringreduce::algo::AlgoChoice::Auto)
            )
        }) {
            notes.push(format!(
                "algorithm: auto, forced by RINGREDUCE_ALGO={v}: every auto cell runs it (--algo with paths compares others)"
            ));
        }
    }
    for (k, v) in ringreduce::param::reported() {
        notes.push(format!("env {k}={v}"));
    }
    notes.push("busbw = algbw * 2(N-1)/N for all-reduce, (N-1)/N for reduce-scatter and all-gather (nccl-tests); ratio columns compare algbw at equal size".into());
    Ok(())
}

/// The cold-start rows (the engine's, without the driver and contexts,
/// NCCL's) and NCCL's version; drops NCCL where it cannot run.
fn cold_starts(
    e: &mut Engine,
    x: &mut Args,
    setup_ms: f64,
    nccl: Option<&super::cuda::Nccl>,
    notes: &mut Vec<String>,
) -> Result<(Vec<ColdStart>, Option<String>)> {
    let cold = x.cold;
    let mut cold_rows: Vec<ColdStart> = vec![bench::cold_start_engine::<f32>(
        e,
        setup_ms,
        (cold / 4) as usize,
    )?];
    if let Some(b) = e.info().setup {
        let mut r = cold_rows[0].clone();
        r.algo = "auto (excl. driver+contexts)".into();
        r.setup_ms = (r.setup_ms - b.driver_ms - b.context_ms).max(0.0);
        cold_rows.push(r);
        notes.push(format!(
            "cold start: ringreduce setup includes driver start {:.1} ms and primary-context creation {:.1} ms; NCCL's comm init is measured after both exist, so the second row subtracts them",
            b.driver_ms, b.context_ms
        ));
    }
    let mut nccl_version = None;
    if let Some(lib) = &nccl {
        nccl_version = Some(format!(
            "{} ({})",
            lib.version_string()?,
            lib.path().display()
        ));
        match bench::cold_start_nccl::<f32>(e, lib, (cold / 4) as usize) {
            Ok(c) => cold_rows.push(c),
            Err(err @ Error::Unsupported(..)) => {
                crate::note!("note: NCCL skipped: {err}");
                notes.push(format!("NCCL skipped: {err}"));
                x.contenders.retain(|c| !c.is_nccl());
            }
            Err(err) => return Err(err),
        }
    }
    Ok((cold_rows, nccl_version))
}

/// The peer-copy ceiling (GB/s), unless skipped.
fn peer_ceiling(
    e: &mut Engine,
    a: &BenchArgs,
    x: &Args,
    notes: &mut Vec<String>,
) -> Result<Option<f64>> {
    let (ranks, max, big) = (x.ranks, x.max, x.big);
    Ok(if a.no_ceiling || ranks < 2 {
        None
    } else {
        let bytes = (max.max(4 << 20) / 4 * 4) as usize;
        let iters = if max >= big { 5 } else { 20 };
        let one = bench::link_ceiling::<f32>(e, bytes, iters, 1)?;
        let two = bench::link_ceiling::<f32>(e, bytes, iters, 2)?;
        notes.push(format!(
            "peer-copy ceiling at {}: {one:.1} GB/s per direction with one copy stream, {two:.1} GB/s with two; link_ceiling_gbps is the larger",
            format_bytes(bytes as u64)
        ));
        Some(one.max(two))
    })
}

/// The report's header.
fn header(
    a: &BenchArgs,
    x: &Args,
    info: &ringreduce::backend::BackendInfo,
    cpu: bool,
    nccl_version: Option<String>,
    ceiling: Option<f64>,
    notes: Vec<String>,
) -> Header {
    let ranks = x.ranks;
    Header {
            tool: "ringreduce bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            date: super::now_utc(),
            command: std::env::args_os()
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            hardware: if info.hardware.is_empty() { vec![info.describe.clone()] } else { info.hardware.clone() },
            driver: super::cuda::driver_version(),
            nccl_version,
            ranks,
            devices: info.devices(),
            rank_to_device: info.rank_to_device.clone(),
            backend: info.describe.clone(),
            timing: format!(
                "median of {} timed blocks, each the mean of -n back-to-back calls (after -w warm-up calls), wall clock between full synchronizations of every rank's streams ({})",
                a.blocks,
                if cpu { "CPU timings" } else { "GPU" }
            ),
            iters: a.iters,
            warmup: a.warmup,
            link_ceiling_gbps: ceiling,
            notes,
            models: Vec::new(),
        }
}

/// The host side's cost of a call, as notes.
fn host_notes(e: &mut Engine, x: &Args, notes: &mut Vec<String>) -> Result<()> {
    let (min, max) = (x.min, x.max);
    for bytes in [8u64, 64 << 10] {
        if bytes >= min && bytes <= max.max(8) {
            let h = bench::host_cost::<f32>(e, (bytes / 4) as usize, 50)?;
            // The launch returns once the rank threads have the call (they
            // issue it on their own); a rank thread's job is the other host
            // cost of a call.
            let rank_job = h.breakdown.as_ref().map_or(String::new(), |b| {
                format!(
                    ", a rank thread's job {:.1} us ({:.0}%)",
                    b.handler_us,
                    100.0 * b.handler_us / h.call_us.max(1e-9)
                )
            });
            notes.push(format!(
                "host side at {} ({}): an empty round trip to the rank threads {:.1} us; one call waited for alone {:.1} us, of which the calling thread's launch {:.1} us ({:.0}%){rank_job} (medians of 50)",
                format_bytes(h.size), h.path, h.handoff_us, h.call_us, h.issue_us,
                100.0 * h.issue_us / h.call_us.max(1e-9)
            ));
            if let Some(b) = h.breakdown {
                notes.push(format!(
                    "host issue per call and rank at {} (means): copies {:.1} us, kernel launches {:.1} us, event records {:.1} us, event waits {:.1} us, waiting for the peer thread's record {:.1} us, all ops {:.1} us",
                    format_bytes(h.size), b.copy_us, b.kernel_us, b.record_us, b.wait_us, b.peer_us, b.total_us
                ));
                if b.backend_us > 0.0 {
                    notes.push(format!(
                        "calling thread per call at {} (means): the backend's launch {:.1} us (the rest of the {:.1} us launch is the engine's); a rank thread's job {:.1} us, of which the driver calls {:.1} us",
                        format_bytes(h.size), b.backend_us, h.issue_us, b.handler_us, b.total_us
                    ));
                }
                if b.round_us > 0.0 {
                    notes.push(format!(
                        "hand-off per launch at {} (means): posting to every rank {:.2} us, a rank thread noticing its post {:.2} us, its work {:.2} us, the last answer {:.2} us after posting began, every answer in hand at {:.2} us (noticing the last {:.2} us; a launch returns once posted, and its answers are collected by the next call); one host clock read {:.0} ns",
                        format_bytes(h.size), b.post_us, b.pickup_us, b.handler_us, b.last_done_us, b.round_us, b.round_us - b.last_done_us, h.clock_ns
                    ));
                }
                if let Some(n) = h.nccl {
                    // The per-launch phases come from the rank-thread pool;
                    // a backend without one reports none.
                    let phases = if n.round_us > 0.0 {
                        format!(
                            "; per launch the NCCL call in a group on a rank thread {:.1} us, posting to every answer {:.1} us",
                            n.handler_us, n.round_us
                        )
                    } else {
                        String::new()
                    };
                    notes.push(format!(
                        "NCCL through the same rank threads at {}: the calling thread's launch {:.1} us, one call waited for alone {:.1} us (medians of 50){phases}",
                        format_bytes(h.size), n.issue_us, n.call_us
                    ));
                }
            }
        }
    }
    Ok(())
}

/// What the end of a bench needs of its engine.
struct Finish {
    root: bool,
    cpu: bool,
    ceiling: Option<f64>,
    info: ringreduce::backend::BackendInfo,
}

/// The link model, the fit, the breakdown, the text and the files; whether
/// every checked cell was right.
fn finish(mut e: Engine, a: &BenchArgs, x: &Args, f: Finish, mut rep: Report) -> Result<bool> {
    let Finish {
        root,
        cpu,
        ceiling,
        info,
    } = f;
    let (ranks, max, contenders) = (x.ranks, x.max, &x.contenders);
    let load = crate::theory::ring_link_load(&info.rank_to_device);
    if let (Some(c), true) = (ceiling, ranks > info.devices() && load > 0) {
        rep.header.notes.push(format!(
            "link-bound model for {ranks} ranks on {} GPUs (rank -> GPU {:?}): the busiest link direction carries {load} ring hop(s) of 2(N-1)/N*D each, so busbw <= ceiling / {load} = {:.1} GB/s",
            info.devices(),
            info.rank_to_device,
            c / load as f64
        ));
    }
    // The alpha-beta model of each engine path, fitted to its own
    // all-reduce rows (before the text, whose header shows them).
    let (fitted, misses) = fit_models(&rep, contenders);
    rep.header.models = fitted.iter().map(|(m, _)| m.clone()).collect();
    if a.breakdown && ranks >= 2 {
        let first = jobs_first(&x.combos);
        let rows = ringreduce::with_element!(first.1, T => breakdown_rows::<T>(&mut e, &x.sizes, first, &rep, a.warmup));
        rep.breakdown = rows?;
    }
    let reference = contenders
        .iter()
        .any(|c| c.name == "nccl")
        .then_some("nccl");
    super::out_raw(&rep.render_all(reference))?;
    if !fitted.is_empty() || !misses.is_empty() {
        out_models(&rep, &fitted, &misses, ranks, load.max(1))?;
    }
    if !rep.breakdown.is_empty() {
        out_breakdown(&rep.breakdown)?;
    }
    if let Some(c) = ceiling {
        out(format!(
            "# peer-copy ceiling ({}, every rank to its right neighbour at once, {}): {c:.1} GB/s per direction",
            if cpu { "CPU memcpy" } else { "cuMemcpyPeerAsync" },
            format_bytes(max.max(4 << 20))
        ))?;
    }
    let rerr = |e: report::ReportError| crate::cli::report_error(e);
    if let (Some(p), true) = (&a.json, root) {
        rep.write_json(p).map_err(rerr)?;
    }
    if let (Some(p), true) = (&a.csv, root) {
        rep.write_csv(p).map_err(rerr)?;
    }
    if let (Some(p), true) = (&a.plot, root) {
        rep.write_svg(p).map_err(rerr)?;
    }
    let wrong: u64 = rep
        .rows
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .filter_map(|m| m.as_ref().and_then(|m| m.wrong))
        .sum();
    Ok(wrong == 0)
}

/// Notes for the tables (or rows) the sweep cannot give: sizes that hold
/// less than one element per rank. A sweep that gives no row at all is an
/// error: a bench that printed no table would exit 0 having measured
/// nothing.
fn skipped_notes(
    combos: &super::Combos,
    ranks: usize,
    sizes: &[u64],
    (min, max): (u64, u64),
) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut any_row = false;
    let mut no_table = Vec::new();
    let mut seen: Vec<(Collective, ringreduce::element::DataType)> = Vec::new();
    for (coll, dtype, _) in combos.each() {
        if seen.contains(&(coll, dtype)) {
            continue; // every op of a (collective, type) has the same rows
        }
        seen.push((coll, dtype));
        let Some(s) = bench::skipped_sizes(coll, dtype.size(), ranks, sizes) else {
            any_row = true;
            continue;
        };
        let why = format!(
            "less than one {}-byte element per rank; the smallest {coll} of {} on {} is {}",
            dtype.size(),
            dtype.name(),
            ringreduce::words::counted(ranks, "rank"),
            format_bytes(s.smallest)
        );
        if s.all(sizes) {
            no_table.push(format!(
                "{coll} {} from {}",
                dtype.name(),
                format_bytes(s.smallest)
            ));
            notes.push(format!(
                "no {coll} {} table: every size of the sweep is {why}",
                dtype.name()
            ));
        } else {
            any_row = true;
            let list: Vec<String> = s.sizes.iter().map(|&b| format_bytes(b)).collect();
            notes.push(format!(
                "{coll} {}: no row for {} ({why})",
                dtype.name(),
                list.join(", ")
            ));
        }
    }
    if !any_row {
        return Err(Error::BadArgument(format!(
            "the sweep -b {} -e {} (sizes {}) gives no row: every size holds less than one element per rank on {} (rows start at {}); raise -e/--maxbytes",
            format_bytes(min),
            format_bytes(max),
            sizes.iter().map(|&b| format_bytes(b)).collect::<Vec<_>>().join(", "),
            ringreduce::words::counted(ranks, "rank"),
            no_table.join(", ")
        )));
    }
    Ok(notes)
}

/// The first (collective, type, op) of the sweep.
fn jobs_first(combos: &super::Combos) -> (Collective, ringreduce::element::DataType, ReduceOp) {
    combos.each().first().copied().unwrap_or((
        Collective::AllReduce,
        ringreduce::element::DataType::Float,
        ReduceOp::Sum,
    ))
}
