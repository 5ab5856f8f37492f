//! Measurement: timing collectives the same way for every contender (the
//! engine's paths, NCCL, both replayed from CUDA graphs), checking them, the
//! link ceiling, cold starts and the host cost of a call.
//!
//! Timing method (the same for every contender): after `warmup` untimed
//! calls and a synchronize of every rank's streams, `iters` calls are
//! launched back to back and every rank's streams are synchronized again;
//! the block's time is the wall time divided by the calls (nccl-tests' mean);
//! a cell is the median of `blocks` such blocks, so one stall of the machine
//! cannot spoil a row.

use crate::report::{ColdStart, Measurement, Row};
use crate::verify::{self, Inputs, Verdict};
use ringreduce::algo::{probe, AlgoChoice, Placement};
use ringreduce::backend::{Binding, BufId, NcclBuffers, NcclCall};
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::TypedShape;
use ringreduce::engine::{Engine, GRAPH_CALLS};
use ringreduce::error::{Error, Result};
use ringreduce::plan::{Collective, Shape};
use std::sync::Arc;
use std::time::Instant;

mod expect;
mod host_cost;
pub use expect::{
    check_outputs, check_outputs_at, compare_outputs, compare_outputs_at, expected,
    expected_in_place, expected_on_cpu, gather_verdict, Expect,
};
pub use host_cost::{host_cost, HostCost, IssueBreakdown, NcclHostCost};

/// What runs in one bench column.
#[derive(Debug, Clone, PartialEq)]
pub enum ContenderKind {
    /// The engine with a path choice (`auto` = picked by size).
    Engine(AlgoChoice),
    /// The same, captured into CUDA graphs ([`GRAPH_CALLS`] calls each),
    /// replayed.
    EngineGraph(AlgoChoice),
    /// NCCL on the same buffers (`nccl`; registered: `nccl:reg`; as
    /// symmetric windows: `nccl:sym`).
    Nccl(NcclBuffers),
    /// NCCL captured likewise.
    NcclGraph(NcclBuffers),
}

/// A named contender.
#[derive(Debug, Clone, PartialEq)]
pub struct Contender {
    pub name: String,
    pub kind: ContenderKind,
}

impl Contender {
    /// `auto`, any algorithm name, `nccl`, `nccl:reg`, `nccl:sym`, and any
    /// of them with `:graph`.
    pub fn parse(s: &str) -> Result<Contender> {
        let name = s.trim().to_ascii_lowercase();
        let (base, graph) = match name.strip_suffix(":graph") {
            Some(b) => (b, true),
            None => (name.as_str(), false),
        };
        let nccl = match base {
            "nccl" => Some(NcclBuffers::Plain),
            "nccl:reg" => Some(NcclBuffers::Registered),
            "nccl:sym" => Some(NcclBuffers::Symmetric),
            _ => None,
        };
        let kind = match (nccl, graph) {
            (Some(b), false) => ContenderKind::Nccl(b),
            (Some(b), true) => ContenderKind::NcclGraph(b),
            (None, _) if base.starts_with("nccl") => {
                return Err(Error::BadArgument(format!(
                    "unknown NCCL contender {name:?}: nccl, nccl:reg (registered buffers) or nccl:sym (symmetric windows), each also with :graph"
                )))
            }
            (None, g) => {
                let c: AlgoChoice = base.parse().map_err(Error::BadArgument)?;
                if g {
                    ContenderKind::EngineGraph(c)
                } else {
                    ContenderKind::Engine(c)
                }
            }
        };
        Ok(Contender { name, kind })
    }

    /// Why this contender cannot run `shape` (an algorithm that refuses
    /// the collective or the rank count) where the ranks are (`at`: the
    /// place too; `None`: anywhere), or `None`.
    pub fn refusal(&self, shape: &Shape, at: Option<&Placement>) -> Option<String> {
        match &self.kind {
            ContenderKind::Engine(c) | ContenderKind::EngineGraph(c) => match at {
                Some(at) => c.resolve_in(shape, at).err().map(|e| e.to_string()),
                None => c.resolve(shape).err().map(|e| e.to_string()),
            },
            ContenderKind::Nccl(_) | ContenderKind::NcclGraph(_) => None,
        }
    }

    /// Collectives per launch: [`GRAPH_CALLS`] for a graph replay, else 1.
    pub fn calls_per_launch(&self) -> usize {
        match self.kind {
            ContenderKind::NcclGraph(_) | ContenderKind::EngineGraph(_) => GRAPH_CALLS,
            _ => 1,
        }
    }

    pub fn is_nccl(&self) -> bool {
        matches!(
            self.kind,
            ContenderKind::Nccl(_) | ContenderKind::NcclGraph(_)
        )
    }

    /// How NCCL knows the buffers, for an NCCL contender.
    pub fn nccl_buffers(&self) -> Option<NcclBuffers> {
        match self.kind {
            ContenderKind::Nccl(b) | ContenderKind::NcclGraph(b) => Some(b),
            _ => None,
        }
    }

    pub fn is_graph(&self) -> bool {
        matches!(
            self.kind,
            ContenderKind::NcclGraph(_) | ContenderKind::EngineGraph(_)
        )
    }
}

/// A comma-separated list of contenders, given to `flag` (errors name it).
pub fn parse_contenders(flag: &str, list: &str) -> Result<Vec<Contender>> {
    let mut v: Vec<Contender> = Vec::new();
    let items = ringreduce::words::list_items(list)
        .map_err(|e| Error::BadArgument(format!("{flag} {list:?} names no contender: {e}")))?;
    for s in items {
        let c = Contender::parse(s).map_err(|e| match e {
            Error::BadArgument(m) => Error::BadArgument(format!("{flag}: {m}")),
            e => e,
        })?;
        if !v.iter().any(|x| x.name == c.name) {
            v.push(c);
        }
    }
    Ok(v)
}

/// Get `c` ready for calls of `shape` (capture its graph); returns the path
/// the engine takes, if it is the engine.
pub fn prepare<T: Element>(
    e: &mut Engine,
    c: &Contender,
    shape: &TypedShape<T>,
    op: ReduceOp,
) -> Result<Option<String>> {
    match &c.kind {
        ContenderKind::Engine(choice) => Ok(Some(e.path_name(Some(choice), shape)?)),
        ContenderKind::EngineGraph(choice) => {
            let bind = Arc::new(vec![Binding::DEFAULT; e.ranks()]);
            let path = e.graph_capture(Some(choice), shape.shape(), T::DTYPE, op, bind)?;
            Ok(Some(path))
        }
        ContenderKind::Nccl(_) => Ok(None),
        ContenderKind::NcclGraph(b) => {
            e.nccl_graph_capture(&nccl_call(e, shape, op, *b))?;
            Ok(None)
        }
    }
}

/// NCCL's call for `shape` on the engine's buffers, known to NCCL as `buffers` says.
fn nccl_call<T: Element>(
    e: &Engine,
    shape: &TypedShape<T>,
    op: ReduceOp,
    buffers: NcclBuffers,
) -> NcclCall {
    NcclCall {
        buffers,
        ..e.nccl_call(shape, op)
    }
}

/// Launch one call (or one graph replay) of `c` (no synchronize).
pub fn launch<T: Element>(
    e: &mut Engine,
    c: &Contender,
    shape: &TypedShape<T>,
    op: ReduceOp,
) -> Result<()> {
    match &c.kind {
        ContenderKind::Engine(choice) => e.launch(Some(choice), shape, op).map(|_| ()),
        ContenderKind::EngineGraph(_) => e.graph_replay(),
        ContenderKind::Nccl(b) => e.launch_nccl(&nccl_call(e, shape, op, *b)),
        ContenderKind::NcclGraph(_) => e.launch_nccl_graph(),
    }
}

/// Mean microseconds per collective over `iters` back-to-back launches
/// after `warmup`.
pub fn time_calls<T: Element>(
    e: &mut Engine,
    c: &Contender,
    shape: &TypedShape<T>,
    op: ReduceOp,
    warmup: usize,
    iters: usize,
) -> Result<f64> {
    for _ in 0..warmup {
        launch(e, c, shape, op)?;
    }
    e.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..iters.max(1) {
        launch(e, c, shape, op)?;
    }
    e.synchronize()?;
    let calls = iters.max(1) * c.calls_per_launch();
    Ok(t0.elapsed().as_secs_f64() * 1e6 / calls as f64)
}

/// The median of `v` (the upper one of an even count); 0 for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Microseconds per call: the median over `blocks` timed blocks.
#[allow(clippy::too_many_arguments)]
pub fn time_blocks<T: Element>(
    e: &mut Engine,
    c: &Contender,
    shape: &TypedShape<T>,
    op: ReduceOp,
    warmup: usize,
    iters: usize,
    blocks: usize,
) -> Result<f64> {
    let mut v = Vec::with_capacity(blocks.max(1));
    for b in 0..blocks.max(1) {
        let w = if b == 0 { warmup } else { 0 };
        v.push(time_calls(e, c, shape, op, w, iters)?);
    }
    Ok(median(v))
}

/// One checked call (or graph replay) of `c`: load `inputs`, poison the
/// output, run, read every rank's output; returns (#wrong including changed
/// inputs, the outputs). A graph in place runs its calls on their own
/// results, and is checked against the same calls on the host. In a
/// multi-process job each process checks its own rank and the counts and
/// verdict are every rank's (the outputs are this process's).
#[allow(clippy::too_many_arguments)]
pub fn checked_call<T: Element>(
    e: &mut Engine,
    c: &Contender,
    collective: Collective,
    in_place: bool,
    op: ReduceOp,
    inputs: &[Vec<T>],
    expect: &Expect<T>,
) -> Result<(u64, Verdict, Vec<Vec<T>>)> {
    let shape = e.load(collective, inputs, in_place)?;
    e.poison(&shape)?;
    let path = prepare(e, c, &shape, op)?;
    launch(e, c, &shape, op)?;
    e.synchronize()?;
    let out = e.read_output(&shape)?;
    let base = e.local_ranks().start;
    let calls = c.calls_per_launch();
    let v = if in_place && calls > 1 {
        let want = match &path {
            // The ring's in-place reduce-scatter keeps partial sums in the
            // other chunks of the buffer (docs/ALGORITHM.md), which the next
            // call of a replay reads: the same plan on the CPU backend says
            // what that gives.
            Some(p) if collective == Collective::ReduceScatter && inputs.len() > 2 => {
                expected_on_cpu(p, collective, inputs, op, calls)?
            }
            _ => expected_in_place(collective, inputs, op, calls),
        };
        check_outputs_at(&out, &want, base)
    } else {
        check_outputs_at(&out, expect, base)
    };
    let mut wrong = v.total_wrong();
    if !in_place {
        let send = e.read_input(&shape)?;
        wrong += send
            .iter()
            .zip(inputs.get(base..).unwrap_or(&[]))
            .map(|(s, i)| verify::changed(s, i))
            .sum::<u64>();
    }
    if e.job_spec().is_some() {
        let changed = wrong - v.total_wrong();
        let v = gather_verdict(e, v)?;
        let changed = e.sum_over_processes(changed, "gathering changed inputs")?;
        return Ok((v.total_wrong() + changed, v, out));
    }
    Ok((wrong, v, out))
}

/// What a sweep leaves out for one (collective, element size): the sizes
/// that hold less than one element per rank give no row (nccl-tests rounds
/// a size down to whole elements per rank the same way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The sizes of the sweep that give no row, in sweep order.
    pub sizes: Vec<u64>,
    /// The smallest size that gives a row: one element per rank.
    pub smallest: u64,
}

impl Skipped {
    /// Every size of the sweep was skipped: no table at all.
    pub fn all(&self, sweep: &[u64]) -> bool {
        self.sizes.len() == sweep.len()
    }
}

/// The sizes of `sweep` that give no row for `collective` on `ranks` ranks
/// of `elem`-byte elements ([`count_for`] is 0), or `None` when every size
/// gives one.
pub fn skipped_sizes(
    collective: Collective,
    elem: usize,
    ranks: usize,
    sweep: &[u64],
) -> Option<Skipped> {
    let sizes: Vec<u64> = sweep
        .iter()
        .copied()
        .filter(|&b| count_for(collective, b, elem, ranks) == 0)
        .collect();
    let smallest = match collective {
        Collective::AllReduce => elem as u64,
        _ => elem as u64 * ranks.max(1) as u64,
    };
    (!sizes.is_empty()).then_some(Skipped { sizes, smallest })
}

/// The sizes of a sweep: `min`, `min*f`, ... up to `max` (bytes).
pub fn sweep_sizes(min: u64, max: u64, factor: f64) -> Result<Vec<u64>> {
    if min == 0 {
        return Err(Error::BadArgument(
            "-b/--minbytes must be at least 1 byte (0 never grows)".into(),
        ));
    }
    if min > max {
        return Err(Error::BadArgument(format!(
            "minbytes {min} > maxbytes {max}"
        )));
    }
    if !factor.is_finite() || factor <= 1.0 {
        return Err(Error::BadArgument(format!(
            "-f/--stepfactor must be > 1 (got {factor})"
        )));
    }
    let mut v = Vec::new();
    let mut s = min as f64;
    while s <= max as f64 + 0.5 {
        let b = s.round() as u64;
        if v.last() != Some(&b) {
            v.push(b);
        }
        s *= factor;
        if v.len() > 10_000 {
            return Err(Error::BadArgument(
                "the sweep has more than 10000 sizes; raise -f".into(),
            ));
        }
    }
    Ok(v)
}

/// The NCCL count of a row of `bytes` bytes (nccl-tests: reduce-scatter
/// and all-gather sizes are the whole buffer, so the count per rank is
/// `bytes / (size * ranks)`); 0 when the row is too small.
pub fn count_for(collective: Collective, bytes: u64, elem: usize, ranks: usize) -> usize {
    let e = elem as u64;
    match collective {
        Collective::AllReduce => (bytes / e) as usize,
        _ => (bytes / (e * ranks.max(1) as u64)) as usize,
    }
}

/// Measure one row: out of place and in place, for contender `c`.
#[allow(clippy::too_many_arguments)]
pub fn measure_row<T: Element>(
    e: &mut Engine,
    c: &Contender,
    collective: Collective,
    count: usize,
    op: ReduceOp,
    timing: (usize, usize, usize),
    check: bool,
    seed: u64,
) -> Result<Row> {
    let (warmup, iters, blocks) = timing;
    let n = e.ranks();
    let shape0 = e.shape::<T>(collective, count, false);
    let per_rank = shape0.input(0).len();
    let kind = if check { Inputs::Exact } else { Inputs::Random };
    let inputs = verify::make_inputs::<T>(kind, op, n, per_rank, seed)?;
    let expect = if check {
        Some(expected(collective, &inputs, op, kind))
    } else {
        None
    };
    let mut paths: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    for in_place in [false, true] {
        let shape = e.load(collective, &inputs, in_place)?;
        // A path that refuses this shape (see `Contender::refusal`, which
        // the sweep reports once): an empty cell.
        if c.refusal(&shape, Some(&e.placement())).is_some() {
            cells.push(None);
            continue;
        }
        match prepare(e, c, &shape, op) {
            Ok(Some(p)) => {
                if !paths.contains(&p) {
                    paths.push(p);
                }
            }
            Ok(None) => {}
            // This size's path cannot be captured or run: an empty cell.
            Err(Error::Unsupported(..)) => {
                cells.push(None);
                continue;
            }
            // A graph capture the driver refused: say why, leave the cell
            // empty, and go on if every GPU still drains.
            Err(err) if c.is_graph() => {
                crate::note!(
                    "note: {} at {} ({}): graph capture failed: {err}",
                    c.name,
                    shape.bytes(),
                    if in_place { "in place" } else { "out of place" }
                );
                e.synchronize()?;
                cells.push(None);
                continue;
            }
            Err(err) => return Err(err),
        }
        let us = time_blocks(e, c, &shape, op, warmup, iters, blocks)?;
        // One process per rank: the slowest rank's time.
        let us = e.max_over_processes(us, "gathering the times")?;
        let wrong = match &expect {
            Some(x) => Some(checked_call(e, c, collective, in_place, op, &inputs, x)?.0),
            None => None,
        };
        cells.push(Some(Measurement::new(
            collective,
            shape.bytes(),
            n,
            us,
            wrong,
        )));
    }
    let ip = cells.pop().flatten();
    let oop = cells.pop().flatten();
    Ok(Row {
        algo: c.name.clone(),
        path: (!paths.is_empty()).then(|| paths.join("/")),
        ranks: n,
        collective,
        size: shape0.bytes(),
        count: shape0.bytes() / T::DTYPE.size() as u64,
        dtype: T::DTYPE,
        redop: collective.reduces().then_some(op),
        out_of_place: oop,
        in_place: ip,
    })
}

/// Peer-copy ceiling: rank 0 and the first rank on another device (rank 1
/// when every rank has its own) copy `bytes` into each other at once (both
/// link directions busy), on `streams` streams; GB/s per direction.
pub fn link_ceiling<T: Element>(
    e: &mut Engine,
    bytes: usize,
    iters: usize,
    streams: usize,
) -> Result<f64> {
    let n = e.ranks();
    let count = bytes / T::DTYPE.size();
    if n < 2 || count == 0 {
        return Ok(0.0);
    }
    // Rank 0 and the first rank on another device: with several ranks per
    // GPU, ranks 0 and 1 may share one (blocks), and their copy would not
    // cross a link.
    let map = &e.info().rank_to_device;
    let other = (1..n).find(|&r| map.get(r) != map.first()).unwrap_or(1);
    let plan = Arc::new(probe::peer_copy_pair(
        n,
        count,
        T::DTYPE.size(),
        streams,
        (0, other),
    ));
    let size = T::DTYPE.size();
    e.reserve(BufId::SEND, &vec![count * size; n])?;
    let bind = Arc::new(vec![Binding::DEFAULT; n]);
    for _ in 0..2 {
        e.launch_plan(plan.clone(), T::DTYPE, bind.clone())?;
    }
    e.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..iters.max(1) {
        e.launch_plan(plan.clone(), T::DTYPE, bind.clone())?;
    }
    e.synchronize()?;
    let us = t0.elapsed().as_secs_f64() * 1e6 / iters.max(1) as f64;
    let us = e.max_over_processes(us, "gathering the ceiling's time")?;
    Ok((count * size) as f64 / (us * 1e-6) / 1e9)
}

/// Cold start of the engine just built: its setup, the first all-reduce of
/// `count` elements, then the steady state (median of 20).
pub fn cold_start_engine<T: Element>(
    e: &mut Engine,
    setup_ms: f64,
    count: usize,
) -> Result<ColdStart> {
    let inputs = verify::make_inputs::<T>(Inputs::Random, ReduceOp::Sum, e.ranks(), count, 1)?;
    let t0 = Instant::now();
    let shape = e.load(Collective::AllReduce, &inputs, false)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    e.run(None, &shape, ReduceOp::Sum)?;
    let first_ms = t1.elapsed().as_secs_f64() * 1e3;
    let steady = median_call_us(e, &shape, None)?;
    Ok(ColdStart {
        algo: "auto".into(),
        size: shape.bytes(),
        setup_ms: setup_ms + load_ms,
        first_call_ms: first_ms,
        steady_us: steady,
    })
}

/// Median microseconds of 20 synchronized calls (engine, or NCCL when
/// `nccl` is given).
fn median_call_us<T: Element>(
    e: &mut Engine,
    shape: &TypedShape<T>,
    nccl: Option<()>,
) -> Result<f64> {
    let mut v = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        match nccl {
            Some(()) => {
                let call = e.nccl_call(shape, ReduceOp::Sum);
                e.launch_nccl(&call)?;
            }
            None => {
                e.launch(None, shape, ReduceOp::Sum)?;
            }
        }
        e.synchronize()?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(v))
}

/// Cold start of NCCL on the engine's rank threads: communicator init, the
/// first all-reduce, then the steady state.
pub fn cold_start_nccl<T: Element>(
    e: &mut Engine,
    nccl: &crate::cli::cuda::Nccl,
    count: usize,
) -> Result<ColdStart> {
    let inputs = verify::make_inputs::<T>(Inputs::Random, ReduceOp::Sum, e.ranks(), count, 1)?;
    let shape = e.load(Collective::AllReduce, &inputs, false)?;
    e.synchronize()?;
    let t0 = Instant::now();
    crate::cli::cuda::nccl_init(e, nccl)?;
    let init_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    let call = e.nccl_call(&shape, ReduceOp::Sum);
    e.launch_nccl(&call)?;
    e.synchronize()?;
    let first_ms = t1.elapsed().as_secs_f64() * 1e3;
    let steady = median_call_us(e, &shape, Some(()))?;
    Ok(ColdStart {
        algo: "nccl".into(),
        size: shape.bytes(),
        setup_ms: init_ms,
        first_call_ms: first_ms,
        steady_us: steady,
    })
}

#[cfg(test)]
mod tests;
