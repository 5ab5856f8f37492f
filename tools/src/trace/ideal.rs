//! An idealized schedule of a plan: when each op would start and end if a
//! copy or a reduce of `e` elements took `e` time units, a rank's two lanes
//! ran at once (two CUDA streams: the copy engine and the SMs), and nothing
//! else cost time (no launch, no hand-off). Every wait is the plan's own, so
//! the schedule shows what the plan lets overlap, not what a GPU measured:
//! the trace's slice x time view of `ring:pipeK`.

use ringreduce::plan::{Lane, Op, OpKind, Plan, LANES};

/// Start and end of one op, in elements moved or reduced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: f64,
    pub end: f64,
}

/// How long `op` takes in the idealized schedule: the elements it moves or
/// reduces (a kernel: the sum of its steps); begin and end take no time.
fn cost(op: &Op) -> f64 {
    match &op.kind {
        OpKind::Copy { dst, .. } => dst.len() as f64,
        OpKind::Reduce { dst, .. } => dst.len() as f64,
        OpKind::Kernel(k) => k.steps.iter().map(cost).sum(),
        OpKind::Begin | OpKind::End => 0.0,
    }
}

fn lane_index(l: Lane) -> usize {
    l as usize
}

/// Every op's span, `spans[r][i]` for rank r's op i; `None` if the plan's
/// waits cannot all be met (a validated plan always can).
pub fn schedule(plan: &Plan) -> Option<Vec<Vec<Span>>> {
    let n = plan.ops.len();
    let mut spans: Vec<Vec<Option<Span>>> = plan.ops.iter().map(|o| vec![None; o.len()]).collect();
    let mut signal_end: Vec<Option<f64>> = vec![None; plan.signals.len()];
    // Per rank and lane: the index of the next op of that lane, and when
    // the lane is free.
    let lanes: Vec<Vec<Vec<usize>>> = plan
        .ops
        .iter()
        .map(|ops| {
            let mut by_lane = vec![Vec::new(); LANES];
            for (i, op) in ops.iter().enumerate() {
                by_lane[lane_index(op.lane)].push(i);
            }
            by_lane
        })
        .collect();
    let mut next = vec![vec![0usize; LANES]; n];
    let mut free = vec![vec![0.0f64; LANES]; n];
    let total: usize = plan.ops.iter().map(Vec::len).sum();
    let mut done = 0;
    while done < total {
        let before = done;
        for r in 0..n {
            for l in 0..LANES {
                while let Some(&i) = lanes[r][l].get(next[r][l]) {
                    let op = &plan.ops[r][i];
                    let mut start = free[r][l];
                    let mut ready = true;
                    for s in &op.waits {
                        match signal_end.get(s.0).copied().flatten() {
                            Some(t) => start = start.max(t),
                            None => ready = false,
                        }
                    }
                    if !ready {
                        break;
                    }
                    let end = start + cost(op);
                    spans[r][i] = Some(Span { start, end });
                    if let Some(s) = op.signal {
                        *signal_end.get_mut(s.0)? = Some(end);
                    }
                    free[r][l] = end;
                    next[r][l] += 1;
                    done += 1;
                }
            }
        }
        if done == before {
            return None;
        }
    }
    spans
        .into_iter()
        .map(|v| v.into_iter().collect::<Option<Vec<_>>>())
        .collect()
}

/// When the last op of any rank ends.
pub fn makespan(spans: &[Vec<Span>]) -> f64 {
    spans.iter().flatten().map(|s| s.end).fold(0.0, f64::max)
}

/// Nanoseconds one unit of the schedule is drawn as in [`timeline`].
const UNIT_NS: f64 = 1000.0;

/// The idealized schedule of `choice`'s plan for `shape` as a timeline of
/// one call (one unit drawn as 1 us, on one clock), for the timeline's SVG:
/// every op a labelled box on its rank's lane, the waits as arrows, and the
/// schedule's assumptions written under the picture.
pub fn timeline(
    choice: &ringreduce::algo::AlgoChoice,
    shape: &ringreduce::plan::Shape,
    dtype: ringreduce::element::DataType,
    op: ringreduce::element::ReduceOp,
) -> ringreduce::error::Result<crate::timeline::Timeline> {
    use ringreduce::backend::{BackendKind, CallTimeline, OpTime};
    use ringreduce::error::Error;
    let plan = ringreduce::algo::plan_of(choice, shape)?;
    let spans =
        schedule(&plan).ok_or_else(|| Error::Plan("the plan's waits cannot all be met".into()))?;
    let mut ops = Vec::new();
    for (rank, rs) in spans.iter().enumerate() {
        for (i, s) in rs.iter().enumerate() {
            ops.push(OpTime {
                rank,
                op: i,
                part: 0,
                start_ns: s.start * UNIT_NS,
                end_ns: s.end * UNIT_NS,
            });
        }
    }
    let n = shape.ranks;
    let end = makespan(&spans);
    Ok(crate::timeline::Timeline {
        calls: vec![crate::timeline::TimedCall {
            times: CallTimeline {
                plan: plan.name.clone(),
                clock: format!(
                    "{}: one unit (drawn as 1 us) per element copied or reduced",
                    crate::timeline::IDEAL_CLOCK
                ),
                launch_ns: 0.0,
                skew_ns: 0.0,
                ops,
            },
            plan: std::sync::Arc::new(plan),
        }],
        nccl: Vec::new(),
        kind: BackendKind::Cpu,
        backend: format!("idealized: {n} ranks, each with a copy lane and a compute lane running at once"),
        rank_to_device: vec![0; n],
        what: format!(
            "{} of {} {} {}, {}: idealized schedule",
            shape.collective,
            shape.count,
            dtype.name(),
            op.name(),
            if shape.in_place { "in place" } else { "out of place" }
        ),
        notes: vec![
            format!(
                "Idealized: a copy or a reduce of e elements takes e units, a rank's copy lane and compute lane run at once, and every wait is the plan's; nothing else (launch, hand-off) costs time. The call ends at {end} units."
            ),
            "Read it for what the plan lets overlap; a GPU adds a hand-off after every copy (ringreduce theory's alpha).".into(),
        ],
        local_ranks: 0..n,
        per_node: None,
    })
}

#[cfg(test)]
mod tests;
