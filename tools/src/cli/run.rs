//! `ringreduce run`: one collective, verified, with its timings and traffic.

use super::{check_host_memory, out, parse_count, Common, OneKind};
use crate::verify::{self, Inputs};
use ringreduce::algo::AlgoChoice;
use ringreduce::backend::BackendKind;
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::{Engine, TypedShape};
use ringreduce::error::{Error, Result};
use ringreduce::plan::{Collective, Shape};
use ringreduce::size::format_bytes;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub kinds: OneKind,
    /// Elements per rank (NCCL's count: reduce-scatter's output, all-gather's
    /// input).
    #[arg(long, conflicts_with = "size", allow_hyphen_values = true)]
    pub count: Option<String>,
    /// Bytes per rank, e.g. 4MiB, 100MB, 1GiB+12 (default 4MiB).
    #[arg(long, allow_hyphen_values = true)]
    pub size: Option<String>,
    /// Work in place (the input buffer is the output).
    #[arg(long)]
    pub in_place: bool,
    /// Random seed for the inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Inputs: random (tolerance check where the result depends on the
    /// order) or exact (small integers: bitwise check).
    #[arg(long, default_value = "random")]
    pub inputs: String,
    // Every path of the algorithm registry, in the help.
    #[arg(long, help = algo_help())]
    pub algo: Option<String>,
    /// Timed repetitions for the steady-state median.
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
}

/// `--algo`'s help: every path of the algorithm registry.
pub fn algo_help() -> String {
    format!(
        "Algorithm: ring (the default: the path this tool teaches), {}, or auto (the engine's \
         choice by size). With RINGREDUCE_ALGO set and no --algo, the variable's path runs (as \
         auto, which it forces).",
        super::path_list(&["ring"])
    )
}

/// Host bytes a checked call of `shape` needs: inputs, their copy in the
/// reference, the outputs read back, the send buffers read back, and the
/// CPU backend's own buffers.
pub fn host_bytes(shape: &Shape, kind_cpu: bool) -> u128 {
    let e = shape.elem_size as u128;
    let n = shape.ranks as u128;
    let input = shape.input(0).len() as u128 * e;
    let output = shape.output(0).len() as u128 * e;
    let reference = output * (1 + 8 / e.max(1));
    let mut total = n * (2 * input + output) + reference;
    if kind_cpu {
        total += n * (shape.send_len() as u128 + shape.recv_len() as u128) * e + n * input;
    }
    total
}

/// The path asked for: `--algo`, else the ring, unless `RINGREDUCE_ALGO`
/// forces a path (it forces what auto picks, and a plain run honours it
/// rather than ignore it).
fn algo_of(a: &RunArgs) -> Result<String> {
    Ok(match &a.algo {
        Some(x) => x.clone(),
        None if ringreduce::algo::forced_algo()?.is_some() => "auto".into(),
        None => "ring".into(),
    })
}

pub fn execute(a: RunArgs) -> Result<bool> {
    let (dtype, op, collective) = a.kinds.single()?;
    let count = parse_count(a.count.as_deref(), a.size.as_deref(), dtype)?;
    let algo = algo_of(&a)?;
    let choice: AlgoChoice = algo.parse().map_err(Error::BadArgument)?;
    let inputs: Inputs = a.inputs.parse().map_err(Error::BadArgument)?;
    if a.iters == 0 {
        return Err(Error::BadArgument("--iters must be at least 1".into()));
    }
    let mut cfg = a.common.config()?;
    cfg.algo = choice;
    let shape = Shape {
        collective,
        ranks: cfg.ranks,
        count,
        elem_size: dtype.size(),
        in_place: a.in_place,
    };
    let cpu = cfg.backend.cpu_reason().is_some();
    check_host_memory(
        host_bytes(&shape, cpu),
        "this run (inputs, reference, outputs)",
    )?;
    // Fail early on a fixed path that cannot run this call.
    cfg.algo.resolve(&shape)?;
    ringreduce::with_element!(dtype, T => run_typed::<T>(&a, cfg, shape, op, inputs))
}

fn run_typed<T: Element>(
    a: &RunArgs,
    cfg: ringreduce::engine::EngineConfig,
    shape: Shape,
    op: ReduceOp,
    kind: Inputs,
) -> Result<bool> {
    let ranks = cfg.ranks;
    let t0 = Instant::now();
    let mut engine = Engine::new(cfg)?;
    let setup = t0.elapsed();
    print_call::<T>(&engine, &shape, op)?;
    let per_rank_input = shape.input(0).len();
    let inputs = verify::make_inputs::<T>(kind, op, ranks, per_rank_input, a.seed)?;
    let sh = engine.load(shape.collective, &inputs, shape.in_place)?;
    engine.poison(&sh)?;
    let path = engine.path_name(None, &sh)?;
    let algo = algo_of(a)?;
    let how = match (a.algo.is_some(), algo.trim().to_ascii_lowercase().as_str()) {
        (_, "auto") => format!(" ({})", crate::cli::auto_source()?),
        (false, "ring") => " (the default; --algo auto lets the engine choose by size)".to_string(),
        _ => String::new(),
    };
    out(format!("algorithm : {path}{how}"))?;
    // In a job, the bytes the first call sent to other nodes (the network
    // transport counts them; zero on one machine).
    let multi = engine.job_spec().is_some();
    if multi {
        engine.take_traffic()?;
    }
    let t1 = Instant::now();
    let info = engine.run(None, &sh, op)?;
    let first = t1.elapsed();
    let network = if multi {
        let me = engine.local_ranks().start;
        let mine = engine.take_traffic()?.get(me).map_or(0, |t| t.network);
        let all = engine.gather(&mine.to_le_bytes(), "the network bytes")?;
        all.iter()
            .map(|b| u64::from_le_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
            .collect()
    } else {
        Vec::new()
    };
    let verdict = check_call(&mut engine, &sh, &shape, &inputs, op, kind)?;
    let verdict = crate::bench::gather_verdict(&engine, verdict)?;
    print_timings(a, &mut engine, &sh, &shape, op, setup, first)?;
    print_traffic(&info.traffic, &shape)?;
    print_network(&network, &path, &shape, engine.per_node())?;
    print_check(&verdict, &shape, T::DTYPE)
}

/// The first lines: the call, the note of a fallback, the backend.
fn print_call<T: Element>(engine: &Engine, shape: &Shape, op: ReduceOp) -> Result<()> {
    let dtype = T::DTYPE;
    let ranks = shape.ranks;
    out(format!(
        "ringreduce run: {}{}, {} x {} ({} per rank), {}, {}, {}",
        ringreduce::words::counted(ranks, "rank"),
        if engine.job_spec().is_some() {
            " (one process per rank)"
        } else {
            ""
        },
        shape.count,
        dtype.name(),
        format_bytes(shape.bytes()),
        if shape.in_place {
            "in place"
        } else {
            "out of place"
        },
        shape.collective,
        op.name()
    ))?;
    if let Some(note) = engine.fallback_note() {
        out(format!("note      : {note}"))?;
    }
    out(format!("backend   : {}", engine.describe()))?;
    Ok(())
}

/// The call's verdict on this process's ranks: the outputs against the
/// reference, and the inputs untouched out of place.
fn check_call<T: Element>(
    engine: &mut Engine,
    sh: &TypedShape<T>,
    shape: &Shape,
    inputs: &[Vec<T>],
    op: ReduceOp,
    kind: Inputs,
) -> Result<verify::Verdict> {
    // One process per rank: each checks its own rank, rank 0 reports all.
    let got = engine.read_output(sh)?;
    let base = engine.local_ranks().start;
    let mut verdict = match shape.collective {
        Collective::AllReduce => {
            verify::check(&got, &verify::reference(inputs, op, kind)).at_rank(base)
        }
        Collective::ReduceScatter => {
            let refs = verify::reference_reduce_scatter(inputs, op, kind);
            let mut v = verify::Verdict {
                bitwise: refs.iter().all(|r| r.bitwise),
                ..verify::Verdict::default()
            };
            for (i, g) in got.iter().enumerate() {
                let r = base + i;
                let part = verify::check(std::slice::from_ref(g), &refs[r]);
                v.wrong.push(part.total_wrong());
                v.max_abs_err = v.max_abs_err.max(part.max_abs_err);
                if v.first_wrong.is_none() {
                    v.first_wrong = part.first_wrong.map(|(_, i, g, w)| (r, i, g, w));
                }
            }
            v
        }
        Collective::AllGather => {
            verify::check(&got, &verify::reference_all_gather(inputs)).at_rank(base)
        }
        Collective::Broadcast { root } => {
            verify::check(&got, &verify::reference_broadcast(inputs, root)).at_rank(base)
        }
    };
    if !shape.in_place {
        let send = engine.read_input(sh)?;
        for (i, s) in send.iter().enumerate() {
            let r = base + i;
            let changed = verify::changed(s, &inputs[r]);
            if changed > 0 {
                out(format!(
                    "rank {r}: input buffer modified in {changed} elements"
                ))?;
                if let Some(w) = verdict.wrong.get_mut(i) {
                    *w += changed;
                }
            }
        }
    }
    Ok(verdict)
}

/// The steady state's calls, then the setup, first-call and steady times.
fn print_timings<T: Element>(
    a: &RunArgs,
    engine: &mut Engine,
    sh: &TypedShape<T>,
    shape: &Shape,
    op: ReduceOp,
    setup: std::time::Duration,
    first: std::time::Duration,
) -> Result<()> {
    let ranks = shape.ranks;
    // Steady state: repeated calls, each synchronized on every rank.
    let mut times = Vec::with_capacity(a.iters);
    for _ in 0..a.iters {
        let t = Instant::now();
        engine.launch(None, sh, op)?;
        engine.synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let core = &engine;
    let steady =
        core.max_over_processes(times[times.len() / 2], "gathering the steady-state times")?;
    let first = std::time::Duration::from_secs_f64(
        core.max_over_processes(first.as_secs_f64(), "gathering the first-call times")?,
    );
    let multi = core.job_spec().is_some();
    let bytes = shape.bytes() as f64;
    let algbw = bytes / (steady * 1e-6) / 1e9;
    let busbw = algbw * shape.collective.bus_factor(ranks);
    let kind_cpu = engine.backend_kind() == BackendKind::Cpu;
    out(format!(
        "setup     : {:.2} ms ({}{})",
        setup.as_secs_f64() * 1e3,
        if multi {
            "joining the job, shared control segment"
        } else {
            "threads"
        },
        if kind_cpu {
            ""
        } else if multi {
            ", context, kernel modules, streams, CUDA IPC of the flags"
        } else {
            ", contexts, kernel modules, streams, peer access"
        }
    ))?;
    for h in engine
        .info()
        .hardware
        .iter()
        .filter(|h| h.starts_with("setup:"))
    {
        out(format!("            {h}"))?;
    }
    out(format!(
        "first call: {:.3} ms (includes plan build and event creation)",
        first.as_secs_f64() * 1e3
    ))?;
    out(format!(
        "steady    : {steady:.1} us per call (median of {}, {} timing{}); algbw {algbw:.2} GB/s, busbw {busbw:.2} GB/s",
        a.iters,
        if kind_cpu { "CPU wall-clock" } else { "all rank streams synchronized" },
        if multi { "; the slowest process's median" } else { "" }
    ))?;
    Ok(())
}

/// The busiest rank's bytes beside the formulas.
fn print_traffic(traffic: &[ringreduce::plan::Traffic], shape: &Shape) -> Result<()> {
    let ranks = shape.ranks;
    let max_sent = traffic.iter().map(|x| x.sent).max().unwrap_or(0);
    let max_recv = traffic.iter().map(|x| x.received).max().unwrap_or(0);
    let d = (shape.count * shape.elem_size) as u64;
    let formula = match shape.collective {
        Collective::AllReduce => format!(
            "ring formula 2(N-1)/N*D = {:.0} B; PS root (N-1)*D = {} B",
            ringreduce::schedule::ring_bytes_formula(ranks, d as usize),
            ranks.saturating_sub(1) as u64 * d
        ),
        _ => format!(
            "ring formula (N-1)/N*total = {} B",
            ranks.saturating_sub(1) as u64 * d
        ),
    };
    out(format!(
        "traffic   : max per rank sent {max_sent} B, received {max_recv} B; {formula}"
    ))?;
    Ok(())
}

/// The bytes each rank sent to other nodes in the first call (the network
/// transport's count), beside the hierarchical path's formula; nothing when
/// no byte left a node. `per_node`: the job's ranks per node; a plan whose
/// G is not it crosses nodes where its formula assumes it does not, and
/// the line says so instead of printing a formula that does not apply.
fn print_network(sent: &[u64], path: &str, shape: &Shape, per_node: Option<usize>) -> Result<()> {
    let mpi_rails = path.starts_with("hier:") && path.ends_with(":mpi");
    if mpi_rails && per_node.is_some() && sent.iter().all(|&b| b == 0) {
        return out(
            "network   : every byte between nodes went through the rails' MPI collective (MPI_Iallreduce; MPI_Iallgather for the 8-bit integers and the 16- and 8-bit floats), whose algorithm MPI picks (not counted here)",
        );
    }
    if sent.iter().all(|&b| b == 0) {
        return Ok(());
    }
    let d = (shape.count * shape.elem_size) as f64;
    let n = shape.ranks;
    let formula = match path
        .strip_prefix("hier:")
        .and_then(|g| g.parse::<usize>().ok())
    {
        Some(g) if g > 0 && n % g == 0 && per_node.is_some_and(|p| p != g) => {
            let p = per_node.unwrap_or(0);
            let instead = if p > 1 && n % p == 0 {
                format!("hier:{p}")
            } else {
                "the ring".to_string()
            };
            format!(
                "; the hier formula does not apply: the plan groups G = {g} ranks per node, this job has {p} per node (set RINGREDUCE_RANKS_PER_NODE={g}, or take {instead})"
            )
        }
        Some(g) if g > 0 && n % g == 0 => {
            let k = n / g;
            format!(
                "; hier formula 2(K-1)/K*D/G = {:.0} B (K = {k} nodes of G = {g} ranks)",
                2.0 * (k as f64 - 1.0) / k as f64 * d / g as f64
            )
        }
        _ => String::new(),
    };
    out(format!(
        "network   : bytes sent to other nodes per rank {sent:?} (measured, first call){formula}"
    ))?;
    Ok(())
}

/// The verdict's line; whether the call was right.
fn print_check(
    verdict: &verify::Verdict,
    shape: &Shape,
    dtype: ringreduce::element::DataType,
) -> Result<bool> {
    let ranks = shape.ranks;
    let wrong = verdict.total_wrong();
    let how = if verdict.bitwise {
        "bitwise vs the exact result".to_string()
    } else {
        format!("within the summation-order bound of {}", dtype.name())
    };
    let elements = shape.output(0).len() * ranks;
    if wrong == 0 && elements == 0 {
        // Nothing was compared: not a PASS, but what was asked ran.
        out("check     : nothing to compare (0 elements); the call completed without an error")?;
        Ok(true)
    } else if wrong == 0 {
        out(format!(
            "check     : PASS (0 wrong of {} on {}, {how}; max abs err {:.3e})",
            ringreduce::words::counted(elements, "element"),
            ringreduce::words::counted(ranks, "rank"),
            verdict.max_abs_err
        ))?;
        Ok(true)
    } else {
        out(format!(
            "check     : FAIL ({wrong} wrong; per rank {:?}; {how})",
            verdict.wrong
        ))?;
        if let Some((r, i, g, w)) = verdict.first_wrong {
            out(format!(
                "            first: rank {r} element {i}: got {g}, expected {w}"
            ))?;
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests;
