//! Recording a timeline on an engine: warm-up, the measurement's own
//! overhead (the same calls with timing off and on), the timed calls, and
//! NCCL's call on the same clock.

use super::{TimedCall, Timeline};
use crate::bench::median;
use crate::verify::{self, Inputs};
use ringreduce::algo::AlgoChoice;
use ringreduce::backend::CallTimeline;
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::{Collective, Traffic};
use std::time::Instant;

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub choice: AlgoChoice,
    pub collective: Collective,
    /// NCCL's count (see [`ringreduce::plan::Shape`]).
    pub count: usize,
    pub in_place: bool,
    pub op: ReduceOp,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls, back to back, for the timeline.
    pub calls: usize,
    /// Measure the overhead: `(blocks, calls per block)` with timing off and
    /// on, alternating.
    pub overhead: Option<(usize, usize)>,
    /// Time NCCL's call for the same size too (NCCL must be initialised on
    /// the engine).
    pub nccl: bool,
    /// Synchronize after each timed call, so each runs on idle devices (for
    /// attributing one call's time); otherwise the calls run back to back.
    pub isolated: bool,
}

/// The same calls timed with the timeline off and on (µs per call: the
/// median over blocks of each block's mean of back-to-back calls).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Overhead {
    pub off_us: f64,
    pub on_us: f64,
    pub blocks: usize,
    pub iters: usize,
}

impl Overhead {
    /// How much slower a call is with timing on, in percent.
    pub fn percent(&self) -> f64 {
        if self.off_us > 0.0 {
            100.0 * (self.on_us / self.off_us - 1.0)
        } else {
            0.0
        }
    }

    /// One line for humans.
    pub fn line(&self) -> String {
        format!(
            "measurement overhead: {:.2} us per call with timing off, {:.2} us with timing on ({:+.1}%; median of {} alternating blocks of {} back-to-back calls each)",
            self.off_us,
            self.on_us,
            self.percent(),
            self.blocks,
            self.iters
        )
    }
}

/// A recorded run.
#[derive(Debug, Clone)]
pub struct Recording {
    pub timeline: Timeline,
    pub overhead: Option<Overhead>,
    /// Bytes each rank sent and received per timed call, as the backend
    /// counted them.
    pub traffic: Vec<Traffic>,
}

/// Microseconds per call of `iters` back-to-back calls (synchronized before
/// and after), with timing `on`; a timed block's timelines are dropped.
fn block<T: Element>(
    e: &mut Engine,
    o: &RecordOptions,
    shape: &ringreduce::engine::TypedShape<T>,
    iters: usize,
    on: bool,
) -> Result<f64> {
    e.set_timing(on)?;
    e.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..iters {
        e.launch(Some(&o.choice), shape, o.op)?;
    }
    e.synchronize()?;
    let us = t0.elapsed().as_secs_f64() * 1e6 / iters.max(1) as f64;
    e.set_timing(false)?;
    if on {
        e.take_timeline()?;
    }
    Ok(us)
}

/// `--overhead`: the median time per call of blocks with timing off and
/// on, interleaved (`None` unless asked for with blocks and calls).
fn measure_overhead<T: Element>(
    e: &mut Engine,
    o: &RecordOptions,
    shape: &ringreduce::engine::TypedShape<T>,
) -> Result<Option<Overhead>> {
    Ok(match o.overhead {
        Some((blocks, iters)) if blocks > 0 && iters > 0 => {
            let (mut off, mut on) = (Vec::new(), Vec::new());
            for _ in 0..blocks {
                off.push(block(e, o, shape, iters, false)?);
                on.push(block(e, o, shape, iters, true)?);
            }
            Some(Overhead {
                off_us: median(off),
                on_us: median(on),
                blocks,
                iters,
            })
        }
        _ => None,
    })
}

/// NCCL's timeline of the same call: two untimed calls, then one timed.
fn nccl_timeline<T: Element>(
    e: &mut Engine,
    shape: &ringreduce::engine::TypedShape<T>,
    op: ReduceOp,
) -> Result<Vec<CallTimeline>> {
    let call = e.nccl_call(shape, op);
    for _ in 0..2 {
        e.launch_nccl(&call)?;
    }
    e.synchronize()?;
    e.set_timing(true)?;
    let r = e.launch_nccl(&call).and_then(|_| e.synchronize());
    let off = e.set_timing(false);
    r?;
    off?;
    e.take_nccl_timeline()
}

/// Run `o` on `e` and collect its timeline.
pub fn record<T: Element>(e: &mut Engine, o: &RecordOptions) -> Result<Recording> {
    if o.calls == 0 {
        return Err(Error::BadArgument("--calls must be at least 1".into()));
    }
    let n = e.ranks();
    let shape0 = e.shape::<T>(o.collective, o.count, o.in_place);
    let per_rank = shape0.input(0).len();
    let inputs = verify::make_inputs::<T>(Inputs::Random, o.op, n, per_rank, 11)?;
    let shape = e.load(o.collective, &inputs, o.in_place)?;
    e.set_timing(false)?;
    // Forget anything timed or counted before.
    e.take_timeline()?;
    e.take_nccl_timeline()?;
    for _ in 0..o.warmup {
        e.launch(Some(&o.choice), &shape, o.op)?;
    }
    e.synchronize()?;
    let overhead = measure_overhead(e, o, &shape)?;
    e.take_traffic()?;
    e.set_timing(true)?;
    let mut plans = Vec::with_capacity(o.calls);
    let launched = (|| -> Result<()> {
        for _ in 0..o.calls {
            plans.push(e.launch(Some(&o.choice), &shape, o.op)?);
            if o.isolated {
                e.synchronize()?;
            }
        }
        e.synchronize()
    })();
    let off = e.set_timing(false);
    launched?;
    off?;
    let times = e.take_timeline()?;
    let moved = e.take_traffic()?;
    if times.len() != plans.len() {
        return Err(Error::Plan(format!(
            "{} calls timed but {} launched",
            times.len(),
            plans.len()
        )));
    }
    let calls: Vec<TimedCall> = plans
        .into_iter()
        .zip(times)
        .map(|(plan, times)| TimedCall { plan, times })
        .collect();
    let per_call = o.calls as u64;
    let traffic = moved
        .iter()
        .map(|t| Traffic {
            sent: t.sent / per_call,
            received: t.received / per_call,
            network: t.network / per_call,
        })
        .collect();
    let nccl = if o.nccl {
        nccl_timeline(e, &shape, o.op)?
    } else {
        Vec::new()
    };
    let info = e.info().clone();
    let what = format!(
        "{} of {} {} {}, {}",
        o.collective,
        ringreduce::size::format_bytes(shape.bytes()),
        T::DTYPE.name(),
        if o.collective.reduces() {
            o.op.name()
        } else {
            ""
        },
        if o.in_place {
            "in place"
        } else {
            "out of place"
        }
    )
    .replace("  ", " ");
    let mut notes = Vec::new();
    if let Some(ov) = &overhead {
        notes.push(ov.line());
    }
    Ok(Recording {
        timeline: Timeline {
            calls,
            nccl,
            kind: e.backend_kind(),
            backend: info.describe,
            rank_to_device: info.rank_to_device,
            what,
            notes,
            local_ranks: e.local_ranks(),
            per_node: e.per_node(),
        },
        overhead,
        traffic,
    })
}
