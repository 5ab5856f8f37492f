//! Measurement: timing collectives the same way for every algorithm, the
//! NCCL side by side, the link ceiling, cold starts, and the `bench` sweep.
//!
//! Timing method (the same for ring, one-shot, PS and NCCL): after `warmup`
//! untimed calls and a synchronize of every rank's streams, `iters` calls are
//! launched back to back and every rank's streams are synchronized again; the
//! row's time is the wall time divided by `iters` (the mean, as nccl-tests
//! reports). Each call is one plain call from the caller through the rank
//! threads, for NCCL as for ringreduce.

use crate::algo::{Algo, AlgoChoice};
use crate::cuda::nccl::Nccl;
use crate::element::{Element, ReduceOp};
use crate::engine::{Engine, GRAPH_CALLS};
use crate::error::{Error, Result};
use crate::plan::{Buf, Label, Lane, Plan, PlanBuilder, Region};
use crate::report::{ColdStart, Measurement, Row};
use crate::verify::{self, Inputs};
use std::sync::Arc;
use std::time::Instant;

/// What to run in one bench column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contender {
    /// The ringreduce engine with a path choice (auto = picked by size).
    Engine { name: String, choice: AlgoChoice },
    /// NCCL's all-reduce on the same buffers.
    Nccl,
    /// NCCL's all-reduce captured into a CUDA graph per rank
    /// ([`GRAPH_CALLS`] calls per graph), replayed.
    NcclGraph,
    /// ringreduce's auto path captured likewise (`ring:graph`); sizes whose
    /// path cannot be captured (the ring) are left empty, with a note.
    EngineGraph,
}

impl Contender {
    pub fn name(&self) -> &str {
        match self {
            Contender::Engine { name, .. } => name,
            Contender::Nccl => "nccl",
            Contender::NcclGraph => "nccl:graph",
            Contender::EngineGraph => "ring:graph",
        }
    }

    /// All-reduces per launch: [`GRAPH_CALLS`] for a graph replay, else 1.
    pub fn calls_per_launch(&self) -> usize {
        match self {
            Contender::NcclGraph | Contender::EngineGraph => GRAPH_CALLS,
            _ => 1,
        }
    }

    /// Parse `ring`, `ring:pipeK`, `ring:naive`, `oneshot`, `ps`, `nccl`.
    pub fn parse(s: &str) -> Result<Contender> {
        let s = s.trim().to_ascii_lowercase();
        if s == "nccl" {
            return Ok(Contender::Nccl);
        }
        if s == "nccl:graph" {
            return Ok(Contender::NcclGraph);
        }
        if s == "ring:graph" {
            return Ok(Contender::EngineGraph);
        }
        let choice = match s.as_str() {
            "ring" => AlgoChoice::Auto,
            "ring:naive" | "naive" => AlgoChoice::Fixed(Algo::Ring {
                slices: 1,
                slots: 1,
                lanes: 1,
            }),
            other => other.parse::<AlgoChoice>().map_err(Error::BadArgument)?,
        };
        Ok(Contender::Engine { name: s, choice })
    }
}

/// Parse a comma-separated list of contenders.
pub fn parse_contenders(list: &str) -> Result<Vec<Contender>> {
    let v: Vec<Contender> = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Contender::parse)
        .collect::<Result<_>>()?;
    if v.is_empty() {
        return Err(Error::BadArgument(
            "--algo needs at least one algorithm".into(),
        ));
    }
    Ok(v)
}

/// The plan a contender uses for `count` elements.
pub fn plan_for<T: Element>(
    engine: &mut Engine<T>,
    choice: AlgoChoice,
    count: usize,
    in_place: bool,
) -> Result<Arc<Plan>> {
    let algo = engine.resolve(choice, count);
    engine.plan(algo, count, in_place)
}

/// Launch one call of `c` (no synchronize).
pub fn launch<T: Element>(
    engine: &mut Engine<T>,
    c: &Contender,
    plan: Option<&Arc<Plan>>,
    count: usize,
    in_place: bool,
) -> Result<()> {
    match (c, plan) {
        (Contender::Nccl, _) => engine.launch_nccl(count, in_place),
        (Contender::NcclGraph, _) => engine.launch_nccl_graph(),
        (Contender::EngineGraph, _) => engine.launch_graph(),
        (_, Some(p)) => engine.launch(p),
        (_, None) => Err(Error::Plan("no plan".into())),
    }
}

/// Mean microseconds per call over `iters` back-to-back calls after `warmup`.
pub fn time_calls<T: Element>(
    engine: &mut Engine<T>,
    c: &Contender,
    plan: Option<&Arc<Plan>>,
    count: usize,
    in_place: bool,
    warmup: usize,
    iters: usize,
) -> Result<f64> {
    for _ in 0..warmup {
        launch(engine, c, plan, count, in_place)?;
    }
    engine.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..iters.max(1) {
        launch(engine, c, plan, count, in_place)?;
    }
    engine.synchronize()?;
    let calls = iters.max(1) * c.calls_per_launch();
    Ok(t0.elapsed().as_secs_f64() * 1e6 / calls as f64)
}

/// Microseconds per call: the median over `blocks` timed blocks of the mean
/// of `iters` back-to-back calls (after `warmup` calls). One block is the
/// nccl-tests method; the median of a few makes a row immune to one stall of
/// the machine (a descheduled host thread costs milliseconds, which a mean
/// of 20 calls of 10 us cannot absorb). Every contender is timed this way.
#[allow(clippy::too_many_arguments)]
pub fn time_blocks<T: Element>(
    engine: &mut Engine<T>,
    c: &Contender,
    plan: Option<&Arc<Plan>>,
    count: usize,
    in_place: bool,
    warmup: usize,
    iters: usize,
    blocks: usize,
) -> Result<f64> {
    let mut v = Vec::with_capacity(blocks.max(1));
    for b in 0..blocks.max(1) {
        let w = if b == 0 { warmup } else { 0 };
        v.push(time_calls(engine, c, plan, count, in_place, w, iters)?);
    }
    Ok(median(v))
}

/// The median of `v` (the upper one of an even count); `v` is not empty.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median microseconds of `iters` calls, each synchronized on every rank.
pub fn median_call_us<T: Element>(
    engine: &mut Engine<T>,
    c: &Contender,
    plan: Option<&Arc<Plan>>,
    count: usize,
    in_place: bool,
    iters: usize,
) -> Result<f64> {
    let mut v = Vec::with_capacity(iters);
    for _ in 0..iters.max(1) {
        let t0 = Instant::now();
        launch(engine, c, plan, count, in_place)?;
        engine.synchronize()?;
        v.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(v))
}

/// Run one checked call of `c` on exact-valued inputs; returns #wrong.
pub fn checked_call<T: Element>(
    engine: &mut Engine<T>,
    c: &Contender,
    count: usize,
    in_place: bool,
    inputs: &[Vec<T>],
    reference: &verify::Reference<T>,
) -> Result<(u64, Vec<Vec<T>>)> {
    engine.load(inputs, in_place)?;
    // Poison the output so unwritten elements are caught.
    engine.fill(
        Buf::Recv,
        if in_place { 0 } else { count },
        T::from_f64(f64::NAN),
    )?;
    let plan = match c {
        Contender::Engine { choice, .. } => Some(plan_for(engine, *choice, count, in_place)?),
        Contender::Nccl => None,
        Contender::NcclGraph => {
            engine.nccl_graph_capture(count, in_place)?;
            None
        }
        Contender::EngineGraph => {
            engine.graph_capture(count, in_place)?;
            None
        }
    };
    launch(engine, c, plan.as_ref(), count, in_place)?;
    engine.synchronize()?;
    let out = engine.read(Buf::Recv, count)?;
    // In place, each of a graph's calls multiplies the buffers by n.
    let calls = c.calls_per_launch();
    let v = if in_place && calls > 1 {
        let scale = (engine.ranks() as f64).powi(calls as i32 - 1);
        verify::check(&out, &reference.scaled(scale))
    } else {
        verify::check(&out, reference)
    };
    let mut wrong = v.total_wrong();
    if !in_place {
        let send = engine.read(Buf::Send, count)?;
        wrong += send
            .iter()
            .zip(inputs)
            .map(|(s, i)| verify::changed(s, i))
            .sum::<u64>();
    }
    Ok((wrong, out))
}

/// Peer-copy ceiling: ranks 0 and 1 (on different GPUs whenever there are
/// two) copy `count` elements of their send buffer into each other's scratch
/// at the same time, so both link directions are busy. Returns GB/s per
/// direction. Other ranks stay idle.
/// With `lanes == 2` each copy is split in halves on two copy streams.
pub fn link_ceiling<T: Element>(
    engine: &mut Engine<T>,
    count: usize,
    iters: usize,
    lanes: usize,
) -> Result<f64> {
    let n = engine.ranks();
    if n < 2 || count == 0 {
        return Ok(0.0);
    }
    let mut b = PlanBuilder::new("peer-copy", n, count, false);
    b.scratch(count);
    let begin = b.begin_all();
    let parts = crate::schedule::slices(0..count, lanes.clamp(1, 2), size_of::<T>());
    let mut sig: Vec<Vec<crate::plan::SignalId>> = vec![Vec::new(); 2];
    for r in 0..2 {
        let to = 1 - r;
        for (k, part) in parts.iter().enumerate() {
            let lane = if k == 0 { Lane::Copy } else { Lane::Copy2 };
            sig[r].extend(b.copy(
                r,
                lane,
                to,
                Region::new(Buf::Send, part.clone()),
                Region::new(Buf::Scratch, part.clone()),
                vec![begin[r], begin[to]],
                Label::default(),
            ));
        }
    }
    for r in 0..n {
        let waits = if r < 2 {
            sig[r].iter().chain(&sig[1 - r]).copied().collect()
        } else {
            vec![]
        };
        b.end(r, waits);
    }
    let plan = Arc::new(b.finish());
    engine.reserve(count, count)?;
    let c = Contender::Engine {
        name: "peer-copy".into(),
        choice: AlgoChoice::Auto,
    };
    let us = time_calls(engine, &c, Some(&plan), count, false, 2, iters)?;
    Ok((count * size_of::<T>()) as f64 / (us * 1e-6) / 1e9)
}

/// Measure one row: out-of-place and in-place for contender `c`.
#[allow(clippy::too_many_arguments)]
pub fn measure_row<T: Element>(
    engine: &mut Engine<T>,
    c: &Contender,
    count: usize,
    warmup: usize,
    iters: usize,
    blocks: usize,
    check: bool,
    seed: u64,
) -> Result<Row> {
    let n = engine.ranks();
    let size = (count * size_of::<T>()) as u64;
    // The path of each place; shown as `oop/ip` when they differ.
    let mut paths: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    let inputs = if check {
        verify::make_inputs::<T>(Inputs::Exact, ReduceOp::Sum, n, count, seed)
    } else {
        verify::make_inputs::<T>(Inputs::Random, ReduceOp::Sum, n, count.min(1 << 16), seed)
            .into_iter()
            .map(|mut v| {
                let base = v.clone();
                while v.len() < count {
                    let k = (count - v.len()).min(base.len());
                    v.extend_from_slice(&base[..k]);
                }
                v
            })
            .collect()
    };
    let reference = if check {
        Some(verify::reference(&inputs, ReduceOp::Sum, Inputs::Exact))
    } else {
        None
    };
    for in_place in [false, true] {
        engine.load(&inputs, in_place)?;
        let plan = match c {
            Contender::Engine { choice, .. } => {
                let p = plan_for(engine, *choice, count, in_place)?;
                if !paths.contains(&p.name) {
                    paths.push(p.name.clone());
                }
                Some(p)
            }
            Contender::Nccl => None,
            Contender::NcclGraph => {
                engine.nccl_graph_capture(count, in_place)?;
                None
            }
            Contender::EngineGraph => match engine.graph_capture(count, in_place) {
                Ok(path) => {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                    None
                }
                // This size's path cannot be captured: an empty cell.
                Err(Error::Unsupported(..)) => {
                    cells.push(None);
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        let us = time_blocks(
            engine,
            c,
            plan.as_ref(),
            count,
            in_place,
            warmup,
            iters,
            blocks,
        )?;
        let wrong = match &reference {
            Some(r) => Some(checked_call(engine, c, count, in_place, &inputs, r)?.0),
            None => None,
        };
        cells.push(Some(Measurement::new(size, n, us, wrong)));
    }
    let ip = cells.pop().flatten();
    let oop = cells.pop().flatten();
    Ok(Row {
        algo: c.name().to_string(),
        path: (!paths.is_empty()).then(|| paths.join("/")),
        ranks: n,
        size,
        count: count as u64,
        dtype: T::DTYPE.name().into(),
        redop: "sum".into(),
        out_of_place: oop,
        in_place: ip,
    })
}

/// Cold start of the engine that was just built: its setup time, the first
/// collective of `count` elements, then the steady state (median of 20).
pub fn cold_start_engine<T: Element>(
    engine: &mut Engine<T>,
    setup_ms: f64,
    count: usize,
    seed: u64,
) -> Result<ColdStart> {
    let inputs =
        verify::make_inputs::<T>(Inputs::Random, ReduceOp::Sum, engine.ranks(), count, seed);
    let t0 = Instant::now();
    engine.load(&inputs, false)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let c = Contender::Engine {
        name: "ring".into(),
        choice: AlgoChoice::Auto,
    };
    let t1 = Instant::now();
    let plan = plan_for(engine, AlgoChoice::Auto, count, false)?;
    launch(engine, &c, Some(&plan), count, false)?;
    engine.synchronize()?;
    let first_ms = t1.elapsed().as_secs_f64() * 1e3;
    let steady = median_call_us(engine, &c, Some(&plan), count, false, 20)?;
    Ok(ColdStart {
        algo: "ring".into(),
        size: (count * size_of::<T>()) as u64,
        setup_ms: setup_ms + load_ms,
        first_call_ms: first_ms,
        steady_us: steady,
    })
}

/// Cold start of NCCL on the engine's rank threads: communicator init, the
/// first all-reduce, then the steady state (median of 20).
pub fn cold_start_nccl<T: Element>(
    engine: &mut Engine<T>,
    nccl: &Nccl,
    count: usize,
    seed: u64,
) -> Result<ColdStart> {
    let inputs =
        verify::make_inputs::<T>(Inputs::Random, ReduceOp::Sum, engine.ranks(), count, seed);
    engine.load(&inputs, false)?;
    engine.synchronize()?;
    let t0 = Instant::now();
    engine.backend_mut().nccl_init(nccl)?;
    let init_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    launch(engine, &Contender::Nccl, None, count, false)?;
    engine.synchronize()?;
    let first_ms = t1.elapsed().as_secs_f64() * 1e3;
    let steady = median_call_us(engine, &Contender::Nccl, None, count, false, 20)?;
    Ok(ColdStart {
        algo: "nccl".into(),
        size: (count * size_of::<T>()) as u64,
        setup_ms: init_ms,
        first_call_ms: first_ms,
        steady_us: steady,
    })
}

/// The sizes of a sweep: `min`, `min*f`, ... up to `max` (bytes).
pub fn sweep_sizes(min: u64, max: u64, factor: f64) -> Result<Vec<u64>> {
    if min > max {
        return Err(Error::BadArgument(format!(
            "minbytes {min} > maxbytes {max}"
        )));
    }
    if factor.is_nan() || factor <= 1.0 {
        return Err(Error::BadArgument(format!(
            "stepfactor must be > 1 (got {factor})"
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
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(sweep_sizes(8, 64, 2.0).unwrap(), vec![8, 16, 32, 64]);
        assert!(sweep_sizes(8, 4, 2.0).is_err());
        assert!(sweep_sizes(8, 64, 1.0).is_err());
    }

    #[test]
    fn contenders() {
        let v = parse_contenders("ring,ps,nccl,ring:pipe4").unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(v[2], Contender::Nccl);
        assert!(parse_contenders("ring,tree").is_err());
        assert!(parse_contenders("").is_err());
    }
}

/// Host-side cost of one small call, in microseconds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostCost {
    pub size: u64,
    pub path: String,
    /// Caller -> every rank thread -> caller, doing nothing.
    pub handoff_us: f64,
    /// Issuing one collective on every rank (hand-off, driver calls for
    /// copies, kernels, event records and waits), without waiting for the GPU.
    pub issue_us: f64,
    /// One full call: issue plus completion on every rank's streams.
    pub call_us: f64,
    /// Where a rank thread's issue time goes, per call, mean over ranks (us):
    /// copies, kernel launches, event records, event waits, waiting for the
    /// peer thread's record, everything (CUDA only).
    pub breakdown: Option<[f64; 6]>,
}

/// Measure [`HostCost`] for the auto path at `count` elements.
pub fn host_cost<T: Element>(
    engine: &mut Engine<T>,
    count: usize,
    iters: usize,
) -> Result<HostCost> {
    let iters = iters.max(1);
    let plan = plan_for(engine, AlgoChoice::Auto, count, false)?;
    let profiling = engine.take_issue_profile().is_ok();
    let mut ping = Vec::with_capacity(iters);
    let mut issue = Vec::with_capacity(iters);
    let mut call = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        engine.backend_mut().ping()?;
        ping.push(t.elapsed().as_secs_f64() * 1e6);
        engine.synchronize()?;
        let t = Instant::now();
        engine.launch(&plan)?;
        issue.push(t.elapsed().as_secs_f64() * 1e6);
        engine.synchronize()?;
        let t = Instant::now();
        engine.launch(&plan)?;
        engine.synchronize()?;
        call.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let breakdown = if profiling {
        let prof = engine.take_issue_profile()?;
        let calls: u64 = prof.iter().map(|p| p.calls).sum::<u64>().max(1);
        let us = |f: fn(&crate::backend::IssueProfile) -> u64| {
            prof.iter().map(f).sum::<u64>() as f64 / calls as f64 / 1e3
        };
        Some([
            us(|p| p.copy_ns),
            us(|p| p.kernel_ns),
            us(|p| p.record_ns),
            us(|p| p.wait_ns),
            us(|p| p.peer_ns),
            us(|p| p.total_ns),
        ])
    } else {
        None
    };
    Ok(HostCost {
        size: (count * size_of::<T>()) as u64,
        path: plan.name.clone(),
        handoff_us: median(ping),
        issue_us: median(issue),
        call_us: median(call),
        breakdown,
    })
}
