//! Plans that are not collectives: the fence between chained calls and the
//! peer-copy probe that measures the link ceiling. They live here, with the
//! algorithms, so that nothing outside `src/algo/` builds plans.

use crate::plan::{Buf, Label, Lane, Plan, PlanBuilder, Region, Shape, SignalId};

/// Every rank's compute lane waits until every other rank's has reached this
/// point (a Begin each, and an End waiting for all of them). Issued before
/// replaying captured chained calls that do not continue a chain.
pub(crate) fn fence(ranks: usize) -> Plan {
    let mut b = PlanBuilder::new("fence", Shape::all_reduce(ranks, 0, 1, true));
    let begin = b.begin_all();
    for r in 0..ranks {
        b.end(r, begin.clone());
    }
    let mut p = b.finish();
    p.probe = true;
    p
}

/// Ranks 0 and 1 copy `count` elements of their send buffer into each
/// other's scratch at the same time, so both directions of their link are
/// busy; with `streams == 2` each copy is split in halves on two streams
/// (two copy engines). Other ranks stay idle.
pub fn peer_copy(ranks: usize, count: usize, elem_size: usize, streams: usize) -> Plan {
    peer_copy_pair(ranks, count, elem_size, streams, (0, 1))
}

/// [`peer_copy`] between ranks `pair.0` and `pair.1` (for example rank 0
/// and the first rank on another GPU, when several ranks share a GPU).
/// A pair that is not two distinct ranks below `ranks` copies nothing.
pub fn peer_copy_pair(
    ranks: usize,
    count: usize,
    elem_size: usize,
    streams: usize,
    pair: (usize, usize),
) -> Plan {
    let shape = Shape::all_reduce(ranks, count, elem_size, false);
    let mut b = PlanBuilder::new("peer-copy", shape);
    b.scratch(count);
    let begin = b.begin_all();
    let parts = crate::schedule::slices(0..count, streams.clamp(1, 2), elem_size);
    let ends = [pair.0, pair.1];
    let valid = pair.0 != pair.1 && pair.0 < ranks && pair.1 < ranks;
    let mut sig: Vec<Vec<SignalId>> = vec![Vec::new(); 2];
    if valid {
        for (i, &r) in ends.iter().enumerate() {
            let to = ends[1 - i];
            for (k, part) in parts.iter().enumerate() {
                let lane = if k == 0 { Lane::Copy } else { Lane::Compute };
                sig[i].push(b.copy(
                    r,
                    lane,
                    (r, Region::new(Buf::Send, part.clone())),
                    (to, Region::new(Buf::Scratch, part.clone())),
                    vec![begin[r], begin[to]],
                    Label::default(),
                ));
            }
        }
    }
    for r in 0..ranks {
        let waits = match ends.iter().position(|&e| e == r) {
            Some(_) if valid => sig[0].iter().chain(&sig[1]).copied().collect(),
            _ => vec![],
        };
        b.end(r, waits);
    }
    let mut p = b.finish();
    p.probe = true;
    p
}

/// Rank `from` copies `count` elements of its send buffer into rank `to`'s
/// scratch on its copy lane, alone: one direction of one link, one copy
/// engine (`from == to`: a copy within the rank's device). Every other rank
/// stays idle.
pub fn peer_copy_one_way(
    ranks: usize,
    count: usize,
    elem_size: usize,
    from: usize,
    to: usize,
) -> Plan {
    let shape = Shape::all_reduce(ranks, count, elem_size, false);
    let mut b = PlanBuilder::new("peer-copy:one-way", shape);
    b.scratch(count);
    let begin = b.begin_all();
    let mut done = Vec::new();
    if from < ranks && to < ranks {
        done.push(b.copy(
            from,
            Lane::Copy,
            (from, Region::new(Buf::Send, 0..count)),
            (to, Region::new(Buf::Scratch, 0..count)),
            vec![begin[from], begin[to]],
            Label::default(),
        ));
    }
    for r in 0..ranks {
        let waits = if r == from || r == to {
            done.clone()
        } else {
            vec![]
        };
        b.end(r, waits);
    }
    let mut p = b.finish();
    p.probe = true;
    p
}

#[cfg(test)]
mod tests;
