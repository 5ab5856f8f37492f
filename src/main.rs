//! The `ringreduce` command line.

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use ringreduce::bench::{self, Contender};
use ringreduce::cuda::nccl::Nccl;
use ringreduce::plan::Buf;
use ringreduce::report::{Header, Report};
use ringreduce::size::{format_bytes, parse_size};
use ringreduce::verify::{self, Inputs};
use ringreduce::{AlgoChoice, BackendChoice, Engine, EngineConfig, Error, ReduceOp, Result};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "ringreduce",
    version,
    about = "A hand-written Ring AllReduce engine (CPU and CUDA backends), checked against NCCL"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one all-reduce and verify it against a CPU reference.
    Run(RunArgs),
    /// Print a small ring all-reduce step by step.
    Trace(TraceArgs),
    /// Parameter Server vs Ring: per-node traffic and the alpha-beta time model.
    Theory(TheoryArgs),
    /// Feed the same inputs to ringreduce and NCCL and compare every output.
    Check(CheckArgs),
    /// nccl-tests-style sweep: ring vs NCCL vs parameter server.
    Bench(BenchArgs),
}

#[derive(Args, Clone)]
struct Common {
    /// Number of ranks (default: 4 on the CPU, one per GPU on CUDA).
    #[arg(long)]
    ranks: Option<usize>,
    /// Backend: auto picks CUDA when a driver and a GPU are present.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// GPUs to use, comma-separated (default: all); ranks map round-robin.
    #[arg(long, value_delimiter = ',')]
    devices: Option<Vec<usize>>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Elements per rank.
    #[arg(long, conflicts_with = "size")]
    count: Option<String>,
    /// Bytes per rank, e.g. 4MiB, 100MB, 1GiB+12 (default 4MiB).
    #[arg(long)]
    size: Option<String>,
    /// Reduce in place (the input buffer is the output).
    #[arg(long)]
    in_place: bool,
    /// Random seed for the inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Inputs: random floats (tolerance check) or small integers (bitwise check).
    #[arg(long, default_value_t = Inputs::Random)]
    inputs: Inputs,
    /// Algorithm: auto (by size; RINGREDUCE_ALGO=... forces a path), ring, ring:pipeK,
    /// ring:pipeKx2, oneshot, oneshot:fenced, oneshot:pipeK, oneshot:pull, oneshot:pullK,
    /// oneshot:fused, oneshot:flag, ps.
    #[arg(long, default_value = "auto")]
    algo: String,
    /// Timed repetitions for the steady-state median.
    #[arg(long, default_value_t = 10)]
    iters: usize,
}

#[derive(Args)]
struct TraceArgs {
    #[arg(long, default_value_t = 4)]
    ranks: usize,
    #[arg(long, default_value_t = 8)]
    count: usize,
    /// Algorithm to trace: ring, ring:pipeK, ps, oneshot, oneshot:pull, oneshot:fused,
    /// oneshot:flag.
    #[arg(long, default_value = "ring")]
    algo: String,
}

#[derive(Args)]
struct TheoryArgs {
    /// Data per rank D (decimal MB as in the seed: 100MB = 1e8 bytes).
    #[arg(long, default_value = "100MB")]
    size: String,
    /// Rank counts to tabulate.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64")]
    ranks: Vec<usize>,
    /// Per-message latency alpha (microseconds) for the time model.
    #[arg(long, default_value_t = 10.0)]
    alpha_us: f64,
    /// Per-link bandwidth (GB/s, each direction) for the time model.
    #[arg(long, default_value_t = 25.0)]
    link_gbps: f64,
}

#[derive(Args)]
struct NcclArgs {
    /// Path to libnccl.so.2 (overrides NCCL_HOME, the linker path and Python wheels).
    #[arg(long)]
    nccl_lib: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    nccl: NcclArgs,
    /// Sizes per rank to check, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4KiB,4MiB,256MiB,1GiB+12"
    )]
    sizes: Vec<String>,
    /// Inputs: random floats or exact small integers.
    #[arg(long, default_value_t = Inputs::Random)]
    inputs: Inputs,
    /// ringreduce paths to compare with NCCL, comma-separated.
    #[arg(long, default_value = "ring")]
    algo: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    nccl: NcclArgs,
    /// Smallest size (bytes per rank).
    #[arg(short = 'b', long, default_value = "8")]
    minbytes: String,
    /// Largest size.
    #[arg(short = 'e', long, default_value = "64MiB")]
    maxbytes: String,
    /// Multiply the size by this factor each row.
    #[arg(short = 'f', long, default_value_t = 2.0)]
    stepfactor: f64,
    /// Timed iterations per row.
    #[arg(short = 'n', long, default_value_t = 20)]
    iters: usize,
    /// Warm-up iterations per row (not timed).
    #[arg(short = 'w', long, default_value_t = 5)]
    warmup: usize,
    /// Check results (1) or not (0), as in nccl-tests.
    #[arg(short = 'c', long, default_value_t = 1)]
    check: u8,
    /// Algorithms, comma-separated: ring (auto path), ring:pipeK, ring:pipeKx2, ring:naive,
    /// oneshot, oneshot:fenced, oneshot:pipeK, oneshot:pull, oneshot:pullK, oneshot:fused,
    /// oneshot:flag, ps, nccl, nccl:graph (NCCL replayed from a CUDA graph, 2 calls per graph),
    /// ring:graph (the auto path likewise, where it can be captured).
    #[arg(long, default_value = "ring,nccl,ps")]
    algo: String,
    /// Write all numbers as JSON.
    #[arg(short = 'J', long = "json")]
    json: Option<PathBuf>,
    /// Write the rows as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Draw busbw vs size as SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Size for the cold-start measurement.
    #[arg(long, default_value = "4MiB")]
    cold_size: String,
    /// Skip the peer-copy ceiling measurement.
    #[arg(long)]
    no_ceiling: bool,
    /// Reduce the iteration count for rows above this size (keeps long sweeps short).
    #[arg(long, default_value = "256MiB")]
    big: String,
    /// Timed blocks of -n calls per cell; the cell is the median block's mean
    /// (1 = nccl-tests' single mean; more resists one-off stalls of the machine).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    blocks: u16,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Trace(a) => cmd_trace(a),
        Cmd::Theory(a) => cmd_theory(a),
        Cmd::Check(a) => cmd_check(a),
        Cmd::Bench(a) => cmd_bench(a),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn config(c: &Common, algo: AlgoChoice) -> Result<EngineConfig> {
    let ranks = match c.ranks {
        Some(n) => n,
        None => match c.backend {
            BackendChoice::Cpu => 4,
            _ => match ringreduce::backend::cuda::probe() {
                Ok(info) => c.devices.as_ref().map_or(info.devices.len(), Vec::len),
                Err(_) => 4,
            },
        },
    };
    let mut cfg = EngineConfig::new(ranks, c.backend);
    cfg.algo = algo;
    cfg.cuda.devices = c.devices.clone();
    Ok(cfg)
}

fn parse_count(count: &Option<String>, size: &Option<String>) -> Result<usize> {
    let elems = match (count, size) {
        (Some(c), _) => {
            let v = parse_size(c)?;
            usize::try_from(v).map_err(|_| Error::BadSize {
                input: c.clone(),
                reason: "too large for this machine".into(),
            })?
        }
        (None, s) => {
            let b = parse_size(s.as_deref().unwrap_or("4MiB"))?;
            if b % 4 != 0 {
                return Err(Error::BadSize {
                    input: s.clone().unwrap_or_default(),
                    reason: "not a whole number of float elements (4 bytes)".into(),
                });
            }
            usize::try_from(b / 4).map_err(|_| Error::BadSize {
                input: s.clone().unwrap_or_default(),
                reason: "too large for this machine".into(),
            })?
        }
    };
    Ok(elems)
}

fn cmd_run(a: RunArgs) -> Result<bool> {
    let count = parse_count(&a.count, &a.size)?;
    let choice: AlgoChoice = a.algo.parse().map_err(Error::BadArgument)?;
    let cfg = config(&a.common, choice)?;
    ringreduce::engine::check_fits::<f32>(count, cfg.ranks)?;
    let ranks = cfg.ranks;
    let t0 = Instant::now();
    let mut engine = Engine::<f32>::new(cfg)?;
    let setup = t0.elapsed();
    let bytes = count * 4;
    println!(
        "ringreduce run: {ranks} ranks, {count} x float ({} per rank), {}, sum",
        format_bytes(bytes as u64),
        if a.in_place {
            "in place"
        } else {
            "out of place"
        }
    );
    if let Some(note) = engine.fallback_note() {
        println!("note      : {note}");
    }
    println!("backend   : {}", engine.describe());
    let inputs = verify::make_inputs::<f32>(a.inputs, ReduceOp::Sum, ranks, count, a.seed);
    let reference = verify::reference(&inputs, ReduceOp::Sum, a.inputs);
    engine.load(&inputs, a.in_place)?;
    if !a.in_place {
        engine.fill(Buf::Recv, count, f32::NAN)?;
    }
    let algo = engine.algo_for(count);
    let plan = engine.plan(algo, count, a.in_place)?;
    println!("algorithm : {} (choose with --algo)", plan.name);
    let t1 = Instant::now();
    engine.launch(&plan)?;
    engine.synchronize()?;
    let first = t1.elapsed();
    let out = engine.read(Buf::Recv, count)?;
    let mut verdict = verify::check(&out, &reference);
    if !a.in_place {
        let send = engine.read(Buf::Send, count)?;
        for (r, (s, i)) in send.iter().zip(&inputs).enumerate() {
            let changed = s
                .iter()
                .zip(i)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
            if changed > 0 {
                println!("rank {r}: send buffer modified in {changed} elements");
                verdict.wrong[r] += changed as u64;
            }
        }
    }
    // Steady state: repeated calls, each synchronized on every rank.
    let c = Contender::Engine {
        name: "ring".into(),
        choice,
    };
    let steady = bench::median_call_us(&mut engine, &c, Some(&plan), count, a.in_place, a.iters)?;
    let algbw = bytes as f64 / (steady * 1e-6) / 1e9;
    let busbw = algbw * ringreduce::report::busbw_factor(ranks);
    let kind = engine.backend_kind().name();
    println!(
        "setup     : {:.2} ms (threads{})",
        setup.as_secs_f64() * 1e3,
        if kind == "cuda" {
            ", contexts, PTX load, streams, events, peer access"
        } else {
            ""
        }
    );
    for h in engine.hardware().iter().filter(|h| h.starts_with("setup:")) {
        println!("            {h}");
    }
    println!(
        "first call: {:.3} ms (includes plan build and event creation)",
        first.as_secs_f64() * 1e3
    );
    println!(
        "steady    : {:.1} us per call (median of {}, {} timing); algbw {:.2} GB/s, busbw {:.2} GB/s",
        steady,
        a.iters.max(1),
        if kind == "cuda" { "all rank streams synchronized" } else { "CPU wall-clock" },
        algbw,
        busbw
    );
    let t = plan.traffic(4);
    let formula = ringreduce::schedule::ring_bytes_formula(ranks, bytes);
    let max_sent = t.iter().map(|x| x.sent).max().unwrap_or(0);
    let max_recv = t.iter().map(|x| x.received).max().unwrap_or(0);
    println!(
        "traffic   : max per rank sent {} B, received {} B; ring formula 2(N-1)/N*D = {:.0} B; PS root (N-1)*D = {} B",
        max_sent,
        max_recv,
        formula,
        (ranks.saturating_sub(1) * bytes)
    );
    let wrong = verdict.total_wrong();
    let how = if verdict.bitwise {
        "bitwise vs exact sum"
    } else {
        "within (N-1)*2^-23*sum|x| of the f64 sum"
    };
    if wrong == 0 {
        println!(
            "check     : PASS (0 wrong of {} elements on {ranks} ranks, {how}; max abs err {:.3e})",
            count * ranks,
            verdict.max_abs_err
        );
        Ok(true)
    } else {
        println!(
            "check     : FAIL ({wrong} wrong; per rank {:?}; {how})",
            verdict.wrong
        );
        if let Some((r, i, g, w)) = verdict.first_wrong {
            println!("            first: rank {r} element {i}: got {g}, expected {w}");
        }
        Ok(false)
    }
}

fn cmd_trace(a: TraceArgs) -> Result<bool> {
    if a.ranks == 0 {
        return Err(Error::ZeroRanks);
    }
    if a.ranks > 16 || a.count > 4096 {
        return Err(Error::BadArgument(
            "trace is for small examples: at most 16 ranks and 4096 elements".into(),
        ));
    }
    let algo = match a.algo.parse::<AlgoChoice>().map_err(Error::BadArgument)? {
        AlgoChoice::Fixed(x) => x,
        AlgoChoice::Auto => ringreduce::algo::choose(a.ranks, a.count * 4),
    };
    print!(
        "{}",
        ringreduce::trace::render_algo(algo, a.ranks, a.count)?
    );
    Ok(true)
}

fn cmd_theory(a: TheoryArgs) -> Result<bool> {
    let d = parse_size(&a.size)?;
    if a.ranks.is_empty() || a.ranks.contains(&0) {
        return Err(Error::BadArgument(
            "--ranks needs positive rank counts".into(),
        ));
    }
    if a.link_gbps.is_nan() || a.link_gbps <= 0.0 || a.alpha_us.is_nan() || a.alpha_us < 0.0 {
        return Err(Error::BadArgument(
            "--link-gbps must be > 0 and --alpha-us >= 0".into(),
        ));
    }
    let model = ringreduce::theory::AlphaBeta {
        alpha_us: a.alpha_us,
        link_gbps: a.link_gbps,
    };
    print!(
        "{}",
        ringreduce::theory::render(d as f64, &a.size, &a.ranks, &model)
    );
    Ok(true)
}

fn load_nccl(args: &NcclArgs) -> Result<Nccl> {
    let lib = Nccl::load(args.nccl_lib.as_deref())?;
    Ok(lib)
}

fn cmd_check(a: CheckArgs) -> Result<bool> {
    let cfg = config(&a.common, AlgoChoice::Auto)?;
    let ranks = cfg.ranks;
    let contenders = bench::parse_contenders(&a.algo)?;
    let sizes: Vec<u64> = a
        .sizes
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<_>>()?;
    let nccl = load_nccl(&a.nccl)?;
    println!(
        "NCCL {} from {}",
        nccl.version_string()?,
        nccl.path().display()
    );
    let mut engine = Engine::<f32>::new(cfg)?;
    println!("backend: {}", engine.describe());
    engine.backend_mut().nccl_init(&nccl)?;
    let exact = a.inputs == Inputs::Exact || ranks <= 2;
    println!(
        "comparison: {}",
        if exact {
            "bitwise (2 ranks: a+b is the same in any order; or exact-valued inputs)"
        } else {
            "tolerance (N-1)*2^-23*sum|x| per element (summation order differs)"
        }
    );
    println!(
        "{:>12} {:>12} {:>8} {:>14} {:>22} {:>12} {:>12} {:>6}",
        "size",
        "count",
        "place",
        "ring path",
        "#wrong per rank",
        "max |r-n|",
        "max |n-ref|",
        "result"
    );
    let mut all_ok = true;
    for &size in &sizes {
        if size % 4 != 0 {
            return Err(Error::BadSize {
                input: format_bytes(size),
                reason: "not a whole number of floats".into(),
            });
        }
        let count = (size / 4) as usize;
        let inputs = verify::make_inputs::<f32>(a.inputs, ReduceOp::Sum, ranks, count, a.seed);
        let reference = verify::reference(&inputs, ReduceOp::Sum, a.inputs);
        for in_place in [false, true] {
            let (nw, nccl_out) = bench::checked_call(
                &mut engine,
                &Contender::Nccl,
                count,
                in_place,
                &inputs,
                &reference,
            )?;
            let nv = verify::check(&nccl_out, &reference);
            for c in &contenders {
                let (rw, ring_out) =
                    bench::checked_call(&mut engine, c, count, in_place, &inputs, &reference)?;
                let v = verify::compare(&ring_out, &nccl_out, &reference);
                let path = match c {
                    Contender::Engine { choice, .. } => {
                        bench::plan_for(&mut engine, *choice, count, in_place)?
                            .name
                            .clone()
                    }
                    c => c.name().into(),
                };
                let ok = v.passed() && rw == 0 && nw == 0;
                all_ok &= ok;
                println!(
                    "{:>12} {:>12} {:>8} {:>14} {:>22} {:>12.3e} {:>12.3e} {:>6}",
                    format_bytes(size),
                    count,
                    if in_place { "in" } else { "out" },
                    path,
                    format!("{:?}", v.wrong),
                    v.max_abs_err,
                    nv.max_abs_err,
                    if ok { "OK" } else { "FAIL" }
                );
            }
        }
    }
    println!(
        "{}",
        if all_ok {
            "PASS: ringreduce matches NCCL"
        } else {
            "FAIL"
        }
    );
    Ok(all_ok)
}

fn cmd_bench(a: BenchArgs) -> Result<bool> {
    let mut contenders = bench::parse_contenders(&a.algo)?;
    let min = parse_size(&a.minbytes)?;
    let max = parse_size(&a.maxbytes)?;
    let big = parse_size(&a.big)?;
    let cold = parse_size(&a.cold_size)?;
    let sizes: Vec<u64> = bench::sweep_sizes(min, max, a.stepfactor)?
        .into_iter()
        .map(|s| s / 4 * 4)
        .filter(|&s| s > 0)
        .collect();
    if a.iters == 0 {
        return Err(Error::BadArgument("-n/--iters must be at least 1".into()));
    }
    let cfg = config(&a.common, AlgoChoice::Auto)?;
    let ranks = cfg.ranks;
    let want_nccl = contenders
        .iter()
        .any(|c| matches!(c, Contender::Nccl | Contender::NcclGraph));
    let nccl = if want_nccl {
        Some(load_nccl(&a.nccl)?)
    } else {
        None
    };

    let t0 = Instant::now();
    let mut engine = Engine::<f32>::new(cfg)?;
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let kind = engine.backend_kind().name();
    if want_nccl && kind != "cuda" {
        return Err(Error::Unsupported("NCCL".into(), "cpu"));
    }
    let mut notes = Vec::new();
    if let Some(n) = engine.fallback_note() {
        notes.push(n.to_string());
    }
    if kind == "cpu" {
        notes.push(
            "CPU backend: times are CPU wall-clock timings of host threads, not GPU timings".into(),
        );
    }
    for (k, v) in std::env::vars() {
        if k.starts_with("NCCL_") || k.starts_with("RINGREDUCE_") {
            notes.push(format!("env {k}={v}"));
        }
    }
    notes.push("busbw = algbw * 2(N-1)/N (nccl-tests); ratio columns compare algbw at equal size, equal to the busbw ratio".into());

    // Cold start first, on the fresh engine.
    let cold_count = (cold / 4) as usize;
    let mut cold_rows = vec![bench::cold_start_engine(
        &mut engine,
        setup_ms,
        cold_count,
        1,
    )?];
    if let Some(b) = engine.setup_breakdown() {
        // The same measurement without the process-wide driver start and the
        // primary contexts, which NCCL's init below finds already created.
        let mut r = cold_rows[0].clone();
        r.algo = "ring (excl. driver+contexts)".into();
        r.setup_ms = (r.setup_ms - b.driver_ms - b.context_ms).max(0.0);
        cold_rows.push(r);
        notes.push(format!(
            "cold start: ringreduce setup includes driver start {:.1} ms and primary-context creation {:.1} ms; NCCL's comm init is measured after both exist, so the second ring row subtracts them",
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
        match bench::cold_start_nccl(&mut engine, lib, cold_count, 1) {
            Ok(c) => cold_rows.push(c),
            Err(e @ Error::Unsupported(..)) => {
                // e.g. more ranks than GPUs: NCCL needs one GPU per rank.
                eprintln!("note: NCCL skipped: {e}");
                notes.push(format!("NCCL skipped: {e}"));
                contenders.retain(|c| !matches!(c, Contender::Nccl | Contender::NcclGraph));
            }
            Err(e) => return Err(e),
        }
    }
    // The ceiling: one copy stream per direction, and two (two copy engines).
    let ceilings = if a.no_ceiling || ranks < 2 {
        None
    } else {
        let count = (max / 4).max(1 << 20) as usize;
        let iters = if max >= big { 5 } else { 20 };
        Some((
            bench::link_ceiling(&mut engine, count, iters, 1)?,
            bench::link_ceiling(&mut engine, count, iters, 2)?,
        ))
    };
    let ceiling = ceilings.map(|(one, two)| one.max(two));
    if let Some((one, two)) = ceilings {
        notes.push(format!(
            "peer-copy ceiling at {}: {one:.1} GB/s per direction with one copy stream, {two:.1} GB/s with two; link_ceiling_gbps is the larger",
            format_bytes(max.max(4 << 20))
        ));
    }
    let mut report = Report {
        header: Header {
            tool: "ringreduce bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            date: now_utc(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            hardware: engine.hardware(),
            driver: ringreduce::cuda::driver().ok().map(|d| format!("CUDA driver API {}", d.version)),
            nccl_version,
            ranks,
            devices: {
                let mut d = engine.rank_to_device();
                d.sort_unstable();
                d.dedup();
                d.len()
            },
            rank_to_device: engine.rank_to_device(),
            backend: engine.describe(),
            timing: format!(
                "median of {} timed blocks, each the mean of -n back-to-back calls (after -w warm-up calls), wall clock between full synchronizations of every rank's streams ({})",
                a.blocks as usize,
                if kind == "cuda" { "GPU" } else { "CPU timings" }
            ),
            iters: a.iters,
            warmup: a.warmup,
            link_ceiling_gbps: ceiling,
            notes,
        },
        cold_start: cold_rows,
        rows: Vec::new(),
    };
    if report.header.hardware.is_empty() {
        report.header.hardware.push(engine.describe());
    }

    let total = sizes.len() * contenders.len();
    let pb = if std::io::stderr().is_terminal() && total > 8 {
        let pb = ProgressBar::new(total as u64);
        pb.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}<{eta}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Some(pb)
    } else {
        None
    };
    for &size in &sizes {
        let count = (size / 4) as usize;
        let (iters, warmup) = if size > big {
            (a.iters.clamp(1, 5), a.warmup.min(2))
        } else {
            (a.iters, a.warmup)
        };
        for c in &contenders {
            if let Some(pb) = &pb {
                pb.set_message(format!("{} {}", c.name(), format_bytes(size)));
            }
            let row = bench::measure_row(
                &mut engine,
                c,
                count,
                warmup,
                iters,
                a.blocks as usize,
                a.check != 0,
                7,
            )?;
            if *c == Contender::EngineGraph
                && row.out_of_place.is_none()
                && !report
                    .header
                    .notes
                    .iter()
                    .any(|n| n.starts_with("ring:graph"))
            {
                report.header.notes.push(if kind == "cuda" {
                    format!(
                        "ring:graph: from {} the path cannot be captured into per-GPU CUDA graphs (it orders steps with events across GPUs); those cells are empty",
                        format_bytes(size)
                    )
                } else {
                    "ring:graph: the CPU backend has no CUDA graphs; those cells are empty".into()
                });
            }
            report.rows.push(row);
            if let Some(pb) = &pb {
                pb.inc(1);
            }
        }
    }
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    // Host-side share of a small call (medians of 50).
    let mut host = Vec::new();
    for bytes in [8u64, 64 << 10] {
        if bytes >= min && bytes <= max.max(8) {
            host.push(bench::host_cost(&mut engine, (bytes / 4) as usize, 50)?);
        }
    }
    for h in &host {
        report.header.notes.push(format!(
            "host side at {} ({}): hand-off to rank threads {:.1} us, issue (hand-off + driver calls) {:.1} us, whole call {:.1} us -> host share {:.0}% (medians of 50)",
            format_bytes(h.size),
            h.path,
            h.handoff_us,
            h.issue_us,
            h.call_us,
            100.0 * h.issue_us / h.call_us.max(1e-9)
        ));
        if let Some([copy, kernel, record, wait, peer, total]) = h.breakdown {
            report.header.notes.push(format!(
                "host issue per call and rank at {} (means): cuMemcpyPeerAsync {copy:.1} us, cuLaunchKernel {kernel:.1} us, cuEventRecord {record:.1} us, cuStreamWaitEvent {wait:.1} us, waiting for the peer thread's record {peer:.1} us, all ops {total:.1} us",
                format_bytes(h.size)
            ));
        }
    }
    if let (Some(c), true) = (
        ceiling,
        report.header.devices == 2 && ranks > 2 && ranks % 2 == 0,
    ) {
        // Round-robin on 2 GPUs: every ring hop crosses the link, so each
        // direction carries N/2 * 2(N-1)/N * D = (N-1) * D.
        report.header.notes.push(format!(
            "link-bound model for {ranks} ranks on 2 GPUs: every ring hop crosses NVLink, each direction carries (N-1)*D, so busbw <= ceiling * 2/N = {:.1} GB/s",
            c * 2.0 / ranks as f64
        ));
    }
    let reference = if contenders.contains(&Contender::Nccl) {
        Some("nccl")
    } else {
        None
    };
    print!("{}", report.render_all(reference));
    if let Some(c) = ceiling {
        println!(
            "# peer-copy ceiling ({}, every rank to its right neighbour at once, {}): {:.1} GB/s per direction",
            if kind == "cuda" { "cuMemcpyPeerAsync" } else { "CPU memcpy" },
            format_bytes(max.max(4 << 20)),
            c
        );
    }
    if let Some(p) = &a.json {
        report.write_json(p).map_err(|e| io_err(p, e))?;
    }
    if let Some(p) = &a.csv {
        report.write_csv(p).map_err(|e| io_err(p, e))?;
    }
    if let Some(p) = &a.plot {
        report
            .write_svg(p)
            .map_err(|e| Error::Report(format!("{}: {e}", p.display())))?;
    }
    let wrong: u64 = report
        .rows
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .filter_map(|m| m.as_ref().and_then(|m| m.wrong))
        .sum();
    Ok(wrong == 0)
}

fn io_err(p: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io {
        path: p.display().to_string(),
        source: e,
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS UTC` (no date crate needed).
fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
