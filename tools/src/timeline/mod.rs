//! Timelines of real runs: what every plan op did on every rank, and when.
//!
//! The backends time every op part of a call launched with timing on
//! ([`CallTimeline`]: GPU events on CUDA, host timestamps on the CPU); this
//! module puts those times next to the [`Plan`] that ran and derives, without
//! knowing any algorithm by name:
//!
//! * [`Timeline::slices`]: one slice per op part per rank per timed call,
//!   labelled from the op ([`ringreduce::plan::Label`]: phase, step, chunk,
//!   slice), with its bytes and GB/s; NCCL's calls as one slice per rank;
//! * [`Timeline::flows`]: every cross-rank or cross-lane wait, from the op
//!   part that records the signal to the op part that waits for it (the
//!   exchange kernels' flags included);
//! * [`Timeline::check`]: one slice per op part, and times in the plan's
//!   order (in-lane order; a signal's producer ends before its consumer
//!   starts, within the clocks' skew);
//! * [`Timeline::breakdown`]: where each rank's time went (host issue,
//!   waiting for a peer, copy, reduce, the rest);
//! * the outputs: Chrome trace-event JSON ([`chrome`]), an SVG picture
//!   ([`svg`]) and a text table ([`Timeline::table`]).
//!
//! [`record`](fn@record) runs calls on an engine and collects all of it.

pub mod chrome;
pub mod record;
pub mod svg;
#[cfg(test)]
mod tests;

use ringreduce::backend::{BackendKind, CallTimeline};
use ringreduce::plan::interp::{self, Effect};
use ringreduce::plan::{Lane, OpKind, Plan, LANES};
use ringreduce::schedule::Phase;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

pub use record::{record, Overhead, RecordOptions, Recording};

/// How an idealized schedule's clock begins (`trace --ideal-svg`): the
/// pictures say it is not a measurement.
pub const IDEAL_CLOCK: &str = "an idealized schedule, not a measurement";

/// The track of NCCL's slices (after the plan's lanes).
pub const NCCL_TRACK: usize = LANES;

/// The track of the copies between nodes (a plan built for nodes, or a job
/// over several machines): the network hops, drawn apart from the lane
/// that issued them.
pub const NETWORK_TRACK: usize = LANES + 1;

/// The tracks of a rank's plan ops, in drawing order: the lanes, then the
/// network.
pub const OP_TRACKS: [usize; LANES + 1] = [0, 1, NETWORK_TRACK];

/// One timed call: the plan that ran and its times.
#[derive(Debug, Clone)]
pub struct TimedCall {
    pub plan: Arc<Plan>,
    pub times: CallTimeline,
}

/// The timed calls of one run, NCCL's among them, and what they ran on.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub calls: Vec<TimedCall>,
    /// NCCL's calls: one op (op 0) per rank each.
    pub nccl: Vec<CallTimeline>,
    pub kind: BackendKind,
    /// The backend in words.
    pub backend: String,
    /// Device of each rank.
    pub rank_to_device: Vec<usize>,
    /// What ran, for titles: e.g. `all-reduce of 64MiB float sum, out of place`.
    pub what: String,
    /// Extra lines for the outputs (the measurement overhead, ...).
    pub notes: Vec<String>,
    /// The ranks this process timed: every rank in one process, its own
    /// in a multi-process job (the others' ops are not in this timeline).
    pub local_ranks: std::ops::Range<usize>,
    /// The job's node size when it runs over several machines (every G
    /// consecutive ranks a node); a plan built for nodes
    /// ([`Plan::per_node`]) says its own.
    pub per_node: Option<usize>,
}

/// What an op part does, for colours and the breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Category {
    /// A copy (copy engine, or an exchange kernel's push on the CPU).
    Copy,
    /// A reduce or exchange kernel.
    Reduce,
    /// Begin and End: ordering points with no work.
    Marker,
    /// An NCCL call.
    Nccl,
}

/// One op part of one rank in one timed call (or one rank's NCCL call).
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// Index of the call in [`Timeline::calls`] (or [`Timeline::nccl`]).
    pub call: usize,
    pub nccl: bool,
    pub rank: usize,
    /// Where it is drawn: the lane's index, [`NETWORK_TRACK`] for a copy
    /// between nodes, or [`NCCL_TRACK`].
    pub track: usize,
    /// The plan lane that issued it (in-lane order is on this lane; NCCL's
    /// slices: [`NCCL_TRACK`]).
    pub lane: usize,
    pub op: usize,
    pub part: usize,
    /// Nanoseconds from the timeline's zero (the earliest start).
    pub start_ns: f64,
    pub end_ns: f64,
    /// Short label, e.g. `copy RS1 c3.0`.
    pub name: String,
    /// The op's kind (`copy`, `reduce`, `exchange`, `begin`, `end`, `nccl`).
    pub kind: &'static str,
    pub category: Category,
    pub phase: Option<Phase>,
    pub step: usize,
    pub chunk: usize,
    pub slice: usize,
    pub note: &'static str,
    /// Bytes the part moves or produces (a copy's size, a reduce's output).
    pub bytes: u64,
    /// The other rank of a copy or of a reduce reading another rank's memory.
    pub peer: Option<usize>,
    /// The plan's name (`nccl` for NCCL).
    pub path: String,
}

impl Slice {
    pub fn dur_ns(&self) -> f64 {
        self.end_ns - self.start_ns
    }

    /// Bytes per nanosecond = GB/s (none for an empty or instant part).
    pub fn gbps(&self) -> Option<f64> {
        let d = self.dur_ns();
        (self.bytes > 0 && d > 0.0).then(|| self.bytes as f64 / d)
    }

    /// `reduce-scatter`, `all-gather`, or empty.
    pub fn phase_name(&self) -> &'static str {
        self.phase.map_or("", Phase::label)
    }
}

/// A wait across ranks or lanes: slice `from` records the signal, slice
/// `to` waits for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub from: usize,
    pub to: usize,
    pub signal: usize,
    /// How the signal is realised (`event`, `flag`, ...).
    pub kind: String,
}

/// The name of a lane's track.
pub fn track_name(track: usize) -> &'static str {
    match track {
        0 => Lane::Compute.name(),
        1 => Lane::Copy.name(),
        NETWORK_TRACK => "network",
        _ => "nccl",
    }
}

fn phase_short(p: Phase) -> &'static str {
    match p {
        Phase::ReduceScatter => "RS",
        Phase::AllGather => "AG",
    }
}

/// Where rank `rank`'s time in one call went (nanoseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Split {
    /// From the launch to the rank's last op's end.
    pub wall_ns: f64,
    /// From the launch to the rank's first op's start: handing the call to
    /// the rank thread and issuing until the device starts.
    pub issue_ns: f64,
    /// Nothing runs on the rank and a lane waits for another rank's signal.
    pub wait_ns: f64,
    /// A copy runs (overlapping reduces count here).
    pub copy_ns: f64,
    /// A reduce or exchange kernel runs and no copy does.
    pub reduce_ns: f64,
    /// The remainder: gaps without a wait for another rank (in-rank
    /// ordering, event latency, Begin/End).
    pub rest_ns: f64,
}

impl Split {
    /// The mean of several splits.
    pub fn mean(v: &[Split]) -> Split {
        let n = v.len().max(1) as f64;
        let s = |f: fn(&Split) -> f64| v.iter().map(f).sum::<f64>() / n;
        Split {
            wall_ns: s(|x| x.wall_ns),
            issue_ns: s(|x| x.issue_ns),
            wait_ns: s(|x| x.wait_ns),
            copy_ns: s(|x| x.copy_ns),
            reduce_ns: s(|x| x.reduce_ns),
            rest_ns: s(|x| x.rest_ns),
        }
    }
}

/// One call's splits: per rank.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSplit {
    pub call: usize,
    pub ranks: Vec<Split>,
}

impl Timeline {
    /// Ranks of the run.
    pub fn ranks(&self) -> usize {
        self.rank_to_device
            .len()
            .max(self.calls.iter().map(|c| c.plan.ranks()).max().unwrap_or(0))
    }

    /// The earliest start of any op (the outputs' time zero), ns on the
    /// backend's clock.
    pub fn zero_ns(&self) -> f64 {
        self.calls
            .iter()
            .map(|c| &c.times)
            .chain(&self.nccl)
            .flat_map(|t| t.ops.iter().map(|o| o.start_ns))
            .fold(f64::INFINITY, f64::min)
            .min(f64::MAX)
    }

    /// The largest skew between two ranks' clocks of any call (ns).
    pub fn skew_ns(&self) -> f64 {
        self.calls
            .iter()
            .map(|c| &c.times)
            .chain(&self.nccl)
            .map(|t| t.skew_ns)
            .fold(0.0, f64::max)
    }

    /// Whether the timeline is an idealized schedule (`trace
    /// --ideal-svg`), not a measurement: its clock says so.
    pub fn is_ideal(&self) -> bool {
        self.calls
            .first()
            .is_some_and(|c| c.times.clock.starts_with(IDEAL_CLOCK))
    }

    /// How the clock was read and aligned (the first call's words).
    /// Which source timed the ops (`timing source: ...`, the CUDA
    /// backend's first part of [`Timeline::clock`]); `None` where the clock
    /// does not say (the CPU backend's host timestamps).
    pub fn timing_source(&self) -> Option<String> {
        let c = self.clock();
        let first = c.split("; ").next()?;
        first
            .starts_with("timing source:")
            .then(|| first.to_string())
    }

    /// Which source timed NCCL's calls (their clock's first part), where
    /// there are any: the same words as [`Timeline::timing_source`].
    pub fn nccl_timing_source(&self) -> Option<String> {
        let c = &self.nccl.first()?.clock;
        let first = c.split("; ").next()?;
        first
            .starts_with("timing source:")
            .then(|| first.to_string())
    }

    pub fn clock(&self) -> String {
        self.calls
            .iter()
            .map(|c| &c.times)
            .chain(&self.nccl)
            .map(|t| t.clock.clone())
            .next()
            .unwrap_or_else(|| "no timed calls".into())
    }

    /// Every slice: the calls' op parts (call by call, rank by rank, in the
    /// order the backend reported them), then NCCL's. Errors when a time
    /// names an op part the plan does not have.
    pub fn slices(&self) -> Result<Vec<Slice>, String> {
        let zero = self.zero_ns();
        let mut out = Vec::new();
        for (k, c) in self.calls.iter().enumerate() {
            let plan = &c.plan;
            let elem = plan.shape.elem_size as u64;
            for t in &c.times.ops {
                let op = plan
                    .ops
                    .get(t.rank)
                    .and_then(|o| o.get(t.op))
                    .ok_or_else(|| {
                        format!(
                            "call {k} ({}): rank {} has no op {}",
                            plan.name, t.rank, t.op
                        )
                    })?;
                let parts = interp::parts(t.rank, op);
                let part = parts.get(t.part).ok_or_else(|| {
                    format!(
                        "call {k} ({}): rank {} op {} has no part {}",
                        plan.name, t.rank, t.op, t.part
                    )
                })?;
                let node = plan.per_node.or(self.per_node).filter(|&g| g > 0);
                let between_nodes = match (part.effect, node) {
                    (Some(Effect::Copy { from, to, .. }), Some(g)) => from / g != to / g,
                    _ => false,
                };
                let (bytes, peer) = match part.effect {
                    Some(Effect::Copy { from, src, to, .. }) => (
                        src.len() as u64 * elem,
                        Some(if from == t.rank { to } else { from }),
                    ),
                    Some(Effect::Reduce {
                        rank, dst, b_rank, ..
                    }) => (dst.len() as u64 * elem, (b_rank != rank).then_some(b_rank)),
                    None => (0, None),
                };
                let category = match (&op.kind, part.effect) {
                    (OpKind::Begin | OpKind::End, _) => Category::Marker,
                    (OpKind::Copy { .. }, _) => Category::Copy,
                    _ => Category::Reduce,
                };
                // A kernel's step is labelled with its own place in the
                // schedule (an exchange's steps carry the op's note).
                let l = if part.label.phase.is_some() {
                    part.label
                } else {
                    &op.label
                };
                let mut kind_name = op.kind.name().to_string();
                if parts.len() > 1 {
                    let _ = write!(
                        kind_name,
                        " {}",
                        match part.effect {
                            // A kernel's step that takes what a peer put
                            // into this rank's slot.
                            Some(Effect::Copy { from, to, .. }) if from == to => "receive",
                            Some(Effect::Copy { .. }) => "push",
                            Some(Effect::Reduce { .. }) => "reduce",
                            None => "part",
                        }
                    );
                }
                let name = match l.phase {
                    Some(p) => format!(
                        "{kind_name} {}{} c{}.{}",
                        phase_short(p),
                        l.step,
                        l.chunk,
                        l.slice
                    ),
                    None if !l.note.is_empty() && l.note != op.kind.name() => {
                        format!("{kind_name} ({})", l.note)
                    }
                    None => kind_name,
                };
                out.push(Slice {
                    call: k,
                    nccl: false,
                    rank: t.rank,
                    track: if between_nodes {
                        NETWORK_TRACK
                    } else {
                        op.lane as usize
                    },
                    lane: op.lane as usize,
                    op: t.op,
                    part: t.part,
                    start_ns: t.start_ns - zero,
                    end_ns: t.end_ns - zero,
                    name,
                    kind: op.kind.name(),
                    category,
                    phase: l.phase,
                    step: l.step,
                    chunk: l.chunk,
                    slice: l.slice,
                    note: l.note,
                    bytes,
                    peer,
                    path: plan.name.clone(),
                });
            }
        }
        for (k, c) in self.nccl.iter().enumerate() {
            for t in &c.ops {
                out.push(Slice {
                    call: k,
                    nccl: true,
                    rank: t.rank,
                    track: NCCL_TRACK,
                    lane: NCCL_TRACK,
                    op: 0,
                    part: 0,
                    start_ns: t.start_ns - zero,
                    end_ns: t.end_ns - zero,
                    name: c.plan.clone(),
                    kind: "nccl",
                    category: Category::Nccl,
                    phase: None,
                    step: 0,
                    chunk: 0,
                    slice: 0,
                    note: "",
                    bytes: 0,
                    peer: None,
                    path: "nccl".into(),
                });
            }
        }
        Ok(out)
    }

    /// Every wait across ranks or lanes, between `slices` (as returned by
    /// [`Timeline::slices`]). A wait whose producer or consumer was not
    /// timed is left out.
    pub fn flows(&self, slices: &[Slice]) -> Vec<Flow> {
        let mut at: HashMap<(usize, usize, usize, usize), usize> = HashMap::new();
        for (i, s) in slices.iter().enumerate() {
            if !s.nccl {
                at.insert((s.call, s.rank, s.op, s.part), i);
            }
        }
        let mut out = Vec::new();
        for (k, c) in self.calls.iter().enumerate() {
            let plan = &c.plan;
            // Who records each signal: (rank, op, part).
            let mut producer: HashMap<usize, (usize, usize, usize)> = HashMap::new();
            for (r, ops) in plan.ops.iter().enumerate() {
                for (i, op) in ops.iter().enumerate() {
                    for (p, part) in interp::parts(r, op).iter().enumerate() {
                        if let Some(s) = part.signal {
                            producer.insert(s.0, (r, i, p));
                        }
                    }
                }
            }
            for (r, ops) in plan.ops.iter().enumerate() {
                for (i, op) in ops.iter().enumerate() {
                    for (p, part) in interp::parts(r, op).iter().enumerate() {
                        for w in part.waits {
                            let Some(&(pr, pi, pp)) = producer.get(&w.0) else {
                                continue;
                            };
                            let plane = plan.ops[pr][pi].lane;
                            if pr == r && plane == op.lane {
                                continue; // in-lane order, no wait
                            }
                            let (Some(&from), Some(&to)) =
                                (at.get(&(k, pr, pi, pp)), at.get(&(k, r, i, p)))
                            else {
                                continue;
                            };
                            let kind = plan
                                .signals
                                .get(w.0)
                                .map_or("signal".into(), |s| format!("{:?}", s.kind))
                                .to_ascii_lowercase();
                            out.push(Flow {
                                from,
                                to,
                                signal: w.0,
                                kind,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Problems with the timeline: a plan op part timed other than once per
    /// timed call, a negative duration, times out of the plan's order
    /// (in-lane order; a signal's producer ending after its consumer
    /// starts, or after it ends where the consumer is a kernel's step timed
    /// by the kernel's own clock, whose span holds its wait) by more than
    /// `tol_ns` plus the clocks' skew. Waits into or out of an op whose
    /// parts were timed as one interval (an exchange kernel on the GPU)
    /// cannot be checked and are skipped.
    pub fn check(&self, tol_ns: f64) -> Vec<String> {
        let mut problems = Vec::new();
        let slices = match self.slices() {
            Ok(s) => s,
            Err(e) => return vec![e],
        };
        let mut seen: HashMap<(usize, usize, usize, usize), usize> = HashMap::new();
        for (i, s) in slices.iter().enumerate() {
            if s.nccl {
                continue;
            }
            if seen.insert((s.call, s.rank, s.op, s.part), i).is_some() {
                problems.push(format!(
                    "call {} rank {} op {} part {} timed twice",
                    s.call, s.rank, s.op, s.part
                ));
            }
            if s.dur_ns().is_nan() || s.dur_ns() < 0.0 {
                problems.push(format!(
                    "call {} rank {} op {} part {}: negative duration {} ns",
                    s.call,
                    s.rank,
                    s.op,
                    s.part,
                    s.dur_ns()
                ));
            }
        }
        for (k, c) in self.calls.iter().enumerate() {
            let plan = &c.plan;
            for (r, ops) in plan.ops.iter().enumerate() {
                if !self.local_ranks.contains(&r) {
                    continue; // another process's rank: not timed here
                }
                // In-lane order: each op starts after the previous op of its
                // lane ended; an op's parts start in order.
                let mut last_end: [Option<(usize, f64)>; LANES] = [None; LANES];
                for (i, op) in ops.iter().enumerate() {
                    let n = interp::parts(r, op).len();
                    let mut prev_start: Option<f64> = None;
                    for p in 0..n {
                        let Some(&si) = seen.get(&(k, r, i, p)) else {
                            problems.push(format!(
                                "call {k} ({}): rank {r} op {i} part {p} was not timed",
                                plan.name
                            ));
                            continue;
                        };
                        let s = &slices[si];
                        if p == 0 {
                            if let Some((j, end)) = last_end[op.lane as usize] {
                                if s.start_ns + tol_ns < end {
                                    problems.push(format!(
                                        "call {k} ({}): rank {r} op {i} starts {:.3} us before op {j} of its {} lane ends",
                                        plan.name,
                                        (end - s.start_ns) / 1e3,
                                        op.lane.name()
                                    ));
                                }
                            }
                        }
                        if let Some(ps) = prev_start {
                            if s.start_ns + tol_ns < ps {
                                problems.push(format!(
                                    "call {k} ({}): rank {r} op {i} part {p} starts before part {}",
                                    plan.name,
                                    p - 1
                                ));
                            }
                        }
                        prev_start = Some(s.start_ns);
                        last_end[op.lane as usize] = Some((i, s.end_ns));
                    }
                }
            }
        }
        for f in self.flows(&slices) {
            let (a, b) = (&slices[f.from], &slices[f.to]);
            if self.parts_merged(a) || self.parts_merged(b) {
                continue;
            }
            let tol = tol_ns + self.calls[a.call].times.skew_ns;
            // A kernel's step, timed by the kernel's own clock, spans its
            // wait for the flag: it cannot end before the part it waited
            // for. Any other op starts after it.
            let in_kernel = self.calls[b.call]
                .plan
                .ops
                .get(b.rank)
                .and_then(|ops| ops.get(b.op))
                .is_some_and(|op| matches!(op.kind, OpKind::Kernel(_)));
            let (at, when) = if in_kernel {
                (b.end_ns, "ends")
            } else {
                (b.start_ns, "starts")
            };
            if a.end_ns > at + tol {
                problems.push(format!(
                    "call {}: rank {} op {} ({}) waits for rank {} op {} ({}) through signal {} but {when} {:.3} us before it ends",
                    a.call,
                    b.rank,
                    b.op,
                    b.name,
                    a.rank,
                    a.op,
                    a.name,
                    f.signal,
                    (a.end_ns - at) / 1e3
                ));
            }
        }
        problems
    }

    /// Whether the parts of `s`'s op were timed as one interval.
    fn parts_merged(&self, s: &Slice) -> bool {
        let Some(c) = self.calls.get(s.call) else {
            return false;
        };
        let times: Vec<(f64, f64)> = c
            .times
            .ops
            .iter()
            .filter(|t| t.rank == s.rank && t.op == s.op)
            .map(|t| (t.start_ns, t.end_ns))
            .collect();
        times.len() > 1 && times.iter().all(|t| *t == times[0])
    }

    /// Where each rank's time went in each timed call (see [`Split`]).
    pub fn breakdown(&self) -> Result<Vec<CallSplit>, String> {
        let slices = self.slices()?;
        let zero = self.zero_ns();
        let mut out = Vec::new();
        for (k, c) in self.calls.iter().enumerate() {
            let plan = &c.plan;
            let launch = c.times.launch_ns - zero;
            let mut ranks = Vec::new();
            for r in 0..plan.ranks() {
                let mine: Vec<&Slice> = slices
                    .iter()
                    .filter(|s| !s.nccl && s.call == k && s.rank == r)
                    .collect();
                ranks.push(split_rank(plan, r, &mine, launch));
            }
            out.push(CallSplit { call: k, ranks });
        }
        Ok(out)
    }

    /// The per-op table of call `call`: rank, lane, op, label, start, duration,
    /// GB/s, ordered by rank, lane and start.
    pub fn table(&self, call: usize) -> Result<String, String> {
        let slices = self.slices()?;
        let mut rows: Vec<&Slice> = slices
            .iter()
            .filter(|s| (s.call == call && !s.nccl) || (s.nccl && call + 1 == self.calls.len()))
            .collect();
        rows.sort_by(|a, b| {
            (a.nccl, a.rank, a.track)
                .cmp(&(b.nccl, b.rank, b.track))
                .then(a.start_ns.total_cmp(&b.start_ns))
        });
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:>4} {:<7} {:>3} {:<24} {:<14} {:>4} {:>5} {:>5} {:>11} {:>10} {:>10} {:>8}",
            "rank",
            "lane",
            "op",
            "what",
            "phase",
            "step",
            "chunk",
            "slice",
            "start(us)",
            "dur(us)",
            "bytes",
            "GB/s"
        );
        for s in rows {
            let gbps = s.gbps().map_or("-".into(), |g| format!("{g:.1}"));
            let (phase, step, chunk, slice) = match s.phase {
                Some(p) => (
                    p.label().to_string(),
                    s.step.to_string(),
                    s.chunk.to_string(),
                    s.slice.to_string(),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let what = &s.name;
            let _ = writeln!(
                t,
                "{:>4} {:<7} {:>3} {:<24} {:<14} {:>4} {:>5} {:>5} {:>11.2} {:>10.2} {:>10} {:>8}",
                s.rank,
                track_name(s.track),
                if s.nccl { "-".into() } else { s.op.to_string() },
                truncate(what, 24),
                phase,
                step,
                chunk,
                slice,
                s.start_ns / 1e3,
                s.dur_ns() / 1e3,
                if s.bytes > 0 {
                    ringreduce::size::format_bytes(s.bytes)
                } else {
                    "-".into()
                },
                gbps
            );
        }
        Ok(t)
    }

    /// Each call's span (first start to last end, µs from zero), engine
    /// calls then NCCL's, as lines.
    pub fn spans(&self) -> Vec<String> {
        let zero = self.zero_ns();
        let span = |t: &CallTimeline| {
            let a = t
                .ops
                .iter()
                .map(|o| o.start_ns)
                .fold(f64::INFINITY, f64::min)
                - zero;
            let b = t
                .ops
                .iter()
                .map(|o| o.end_ns)
                .fold(f64::NEG_INFINITY, f64::max)
                - zero;
            (a, b)
        };
        let mut v = Vec::new();
        for (k, c) in self.calls.iter().enumerate() {
            let (a, b) = span(&c.times);
            v.push(format!(
                "call {} ({}): {:.1} .. {:.1} us = {:.1} us (launched at {:.1} us)",
                k + 1,
                c.plan.name,
                a / 1e3,
                b / 1e3,
                (b - a) / 1e3,
                (c.times.launch_ns - zero) / 1e3
            ));
        }
        for (k, t) in self.nccl.iter().enumerate() {
            let (a, b) = span(t);
            v.push(format!(
                "NCCL call {} ({}): {:.1} .. {:.1} us = {:.1} us",
                k + 1,
                t.plan,
                a / 1e3,
                b / 1e3,
                (b - a) / 1e3
            ));
        }
        v
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

/// Whether `t` lies in one of the intervals.
fn inside(v: &[(f64, f64)], t: f64) -> bool {
    v.iter().any(|&(a, b)| a <= t && t < b)
}

/// The split of one rank's slices of one call (see [`Split`]).
fn split_rank(plan: &Plan, r: usize, mine: &[&Slice], launch: f64) -> Split {
    if mine.is_empty() {
        return Split::default();
    }
    let first = mine
        .iter()
        .map(|s| s.start_ns)
        .fold(f64::INFINITY, f64::min);
    let last = mine
        .iter()
        .map(|s| s.end_ns)
        .fold(f64::NEG_INFINITY, f64::max);
    let start = launch.min(first);
    let issue = first - start;
    let of = |c: Category| -> Vec<(f64, f64)> {
        mine.iter()
            .filter(|s| s.category == c)
            .map(|s| (s.start_ns, s.end_ns))
            .collect()
    };
    let copies = of(Category::Copy);
    let reduces = of(Category::Reduce);
    // Gaps on a lane before an op part that waits for another rank.
    let mut waits = Vec::new();
    for lane in 0..LANES {
        let mut on: Vec<&&Slice> = mine.iter().filter(|s| s.lane == lane).collect();
        on.sort_by_key(|s| (s.op, s.part));
        let mut prev = first;
        for s in on {
            let waits_peer = plan
                .ops
                .get(r)
                .and_then(|o| o.get(s.op))
                .map(|op| {
                    interp::parts(r, op).get(s.part).is_some_and(|p| {
                        p.waits
                            .iter()
                            .any(|w| plan.signals.get(w.0).is_some_and(|g| g.owner != r))
                    })
                })
                .unwrap_or(false);
            if waits_peer && s.start_ns > prev {
                waits.push((prev, s.start_ns));
            }
            prev = prev.max(s.end_ns);
        }
    }
    // Sweep the elementary intervals between all boundaries.
    let mut points: Vec<f64> = vec![first, last];
    for v in [&copies, &reduces, &waits] {
        for &(a, b) in v.iter() {
            points.push(a.clamp(first, last));
            points.push(b.clamp(first, last));
        }
    }
    points.sort_by(f64::total_cmp);
    points.dedup();
    let (mut copy, mut reduce, mut wait, mut rest) = (0.0, 0.0, 0.0, 0.0);
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let mid = 0.5 * (a + b);
        let d = b - a;
        if inside(&copies, mid) {
            copy += d;
        } else if inside(&reduces, mid) {
            reduce += d;
        } else if inside(&waits, mid) {
            wait += d;
        } else {
            rest += d;
        }
    }
    Split {
        wall_ns: last - start,
        issue_ns: issue,
        wait_ns: wait,
        copy_ns: copy,
        reduce_ns: reduce,
        rest_ns: rest,
    }
}
