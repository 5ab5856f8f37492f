//! The fused one-shot (`oneshot:fused`): each rank reads the other ranks'
//! inputs itself, through peer access, in one step.
//!
//! One op per peer. An all-reduce and a reduce-scatter are reduce kernels
//! that read the peers' inputs (the whole buffer, or this rank's chunk of
//! each); an all-gather and a broadcast are copies this rank pulls from the
//! peers' inputs (every peer's input into its chunk; the root's input).
//!
//! Out of place the inputs are send buffers, which no collective writes, so
//! these reads need no cross-rank ordering inside the call: the engine
//! orders them on the host (a peer's input has landed when it says it began
//! the call, and nobody overwrites a send buffer while a peer may still
//! read it). No scratch and no signal between ranks.
//!
//! In place a peer's input is its receive buffer, which its owner writes.
//! Each read then waits for the peer's Begin, and what a rank writes where
//! a peer reads waits for that peer's last read: an all-reduce sums into
//! scratch and copies the sum into place once every peer has read this
//! rank's input; a reduce-scatter or an all-gather writes only the chunks
//! no peer reads, and its End waits for the peers' reads (as does the
//! broadcast's root). Every wait between ranks follows a whole op of the
//! peer's, so where ranks are processes that take turns on one GPU
//! ([`super::Placement::time_sliced`]) the CUDA backend makes them on the
//! host, after the peer's work completed: the path with the fewest such
//! hand-offs there, in place as well as out of place.

use super::{Algorithm, Path, StaticPath};
use crate::plan::{
    local_only, Buf, Collective, Label, Lane, Plan, PlanBuilder, ReduceStep, Region, Shape,
    SignalId,
};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fused;

impl Algorithm for Fused {
    fn name(&self) -> String {
        "oneshot:fused".into()
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        if let Collective::Broadcast { root } = shape.collective {
            if root >= shape.ranks {
                return Err(format!(
                    "the root {root} is not one of the {} ranks",
                    shape.ranks
                ));
            }
        }
        Ok(())
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        StaticPath::boxed(plan(shape))
    }

    fn load(&self) -> Option<super::Load> {
        Some(super::Load::Everyone)
    }

    fn cost(&self) -> Option<super::cost::Cost> {
        Some(super::cost::Cost::OneShot)
    }
}

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    (s == "oneshot:fused").then(|| Ok(Arc::new(Fused) as Arc<dyn Algorithm>))
}

/// The fused one-shot plan.
pub fn plan(shape: &Shape) -> Plan {
    let mut b = PlanBuilder::new("oneshot:fused", *shape);
    let begin = b.begin_all();
    let (n, count) = (shape.ranks, shape.count);
    if n == 1 || count == 0 {
        return local_only(b, &begin);
    }
    let in_place = shape.in_place;
    if in_place && shape.collective == Collective::AllReduce {
        b.scratch(count);
    }
    // Each rank's last op that reads a peer's input (in place: the signal
    // its peers wait for before they write where it read).
    let mut read: Vec<Option<SignalId>> = vec![None; n];
    for (r, last) in read.iter_mut().enumerate() {
        *last = match shape.collective {
            Collective::AllReduce => reduce_from_peers(&mut b, r, 0..count, &begin),
            Collective::ReduceScatter => {
                reduce_from_peers(&mut b, r, r * count..(r + 1) * count, &begin)
            }
            Collective::AllGather => {
                // Every rank's input into its chunk (in place this rank's
                // own is there already).
                let mut last = None;
                for d in usize::from(in_place)..n {
                    let from = (r + n - d) % n;
                    last = Some(pull(
                        &mut b,
                        r,
                        from,
                        from * count..(from + 1) * count,
                        &begin,
                    ));
                }
                last
            }
            Collective::Broadcast { root } if !in_place || r != root => {
                Some(pull(&mut b, r, root, 0..count, &begin))
            }
            Collective::Broadcast { .. } => None,
        };
    }
    for r in 0..n {
        // In place: the peers that read this rank's input, done reading.
        let readers: Vec<SignalId> = match shape.collective {
            _ if !in_place => vec![],
            Collective::Broadcast { root } if r != root => vec![],
            _ => (0..n).filter(|&p| p != r).filter_map(|p| read[p]).collect(),
        };
        if in_place && shape.collective == Collective::AllReduce {
            b.copy(
                r,
                Lane::Compute,
                (r, Region::new(Buf::Scratch, 0..count)),
                (r, shape.output(r)),
                readers,
                Label {
                    note: "the sum into place",
                    ..Label::default()
                },
            );
            b.end(r, vec![]);
        } else {
            b.end(r, readers);
        }
    }
    b.finish()
}

/// What rank `r` waits for before it reads rank `from`'s input: nothing out
/// of place (a send buffer), the peer's Begin in place.
fn before_reading(shape: &Shape, r: usize, from: usize, begin: &[SignalId]) -> Vec<SignalId> {
    if shape.in_place && from != r {
        vec![begin[from]]
    } else {
        vec![]
    }
}

/// Rank `r`'s output = the op over every rank's `chunk` of its input: its
/// own chunk with the nearest peer's first, then one more peer per reduce,
/// accumulating in the output (an all-reduce in place: in scratch, so that
/// the peers can still read the input). Returns the last reduce's signal
/// in place.
fn reduce_from_peers(
    b: &mut PlanBuilder,
    r: usize,
    chunk: std::ops::Range<usize>,
    begin: &[SignalId],
) -> Option<SignalId> {
    let shape = b.peek().shape;
    let n = shape.ranks;
    let out = if shape.in_place && shape.collective == Collective::AllReduce {
        Region::new(Buf::Scratch, 0..shape.count)
    } else {
        shape.output(r)
    };
    let own = shape.input(r).sub(chunk.clone());
    let mut last = None;
    for d in 1..n {
        let from = (r + n - d) % n;
        let a = if d == 1 { own.clone() } else { out.clone() };
        last = b.reduce(
            r,
            out.clone(),
            a,
            (from, shape.input(from).sub(chunk.clone())),
            ReduceStep {
                pre_a: d == 1,
                pre_b: true,
                post: d == n - 1,
            },
            before_reading(&shape, r, from, begin),
            shape.in_place && d == n - 1,
            Label {
                note: "reduce over peer access",
                ..Label::default()
            },
        );
    }
    last
}

/// Rank `r` copies rank `from`'s whole input into `dst` of its output;
/// returns the copy's signal.
fn pull(
    b: &mut PlanBuilder,
    r: usize,
    from: usize,
    dst: std::ops::Range<usize>,
    begin: &[SignalId],
) -> SignalId {
    let shape = b.peek().shape;
    let note = match shape.collective {
        Collective::Broadcast { .. } => "copy of the root's input",
        _ => "gather over peer access",
    };
    b.copy(
        r,
        Lane::Compute,
        (from, shape.input(from).sub(0..shape.count)),
        (r, Region::new(Buf::Recv, dst)),
        before_reading(&shape, r, from, begin),
        Label {
            note,
            ..Label::default()
        },
    )
}
