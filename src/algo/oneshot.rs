//! One-shot all-reduce: every rank pushes its whole buffer into every other
//! rank's scratch, then each rank reduces all slots into its own buffer.
//!
//! Each rank sends (N-1)·D, which for N = 2 equals the ring's 2(N-1)/N·D, in
//! one copy and one kernel instead of two copies and one kernel per slice.
//! That makes it the cheapest path for small and medium messages on 2 GPUs.

use super::{local_copy_only, Algo};
use crate::plan::{Buf, Label, Lane, OpKind, Plan, PlanBuilder, Region, SignalId};

pub fn plan(ranks: usize, count: usize, in_place: bool) -> Plan {
    let mut b = PlanBuilder::new(Algo::OneShot.label(), ranks, count, in_place);
    let begin = b.begin_all();
    if ranks == 1 || count == 0 {
        return local_copy_only(b, &begin);
    }
    let n = ranks;
    let input = b.input();
    b.scratch((n - 1) * count);
    // Rank `src`'s data lands in slot (src - dst - 1) mod n of rank `dst`.
    let slot = |src: usize, dst: usize| {
        let i = (src + n - dst - 1) % n;
        i * count..(i + 1) * count
    };
    let label = |note| Label {
        note,
        ..Label::default()
    };
    // arrived[src][dst]
    let mut arrived: Vec<Vec<Option<SignalId>>> = vec![vec![None; n]; n];
    let mut last_out: Vec<Option<SignalId>> = vec![None; n];
    for r in 0..n {
        for d in 1..n {
            let to = (r + d) % n;
            let mut waits = vec![begin[to]];
            if d == 1 {
                waits.push(begin[r]);
            }
            arrived[r][to] = b.push(
                r,
                Lane::Copy,
                OpKind::Copy {
                    to,
                    src: Region::new(input, 0..count),
                    dst: Region::new(Buf::Scratch, slot(r, to)),
                },
                waits,
                true,
                label("push"),
            );
            last_out[r] = arrived[r][to];
        }
    }
    for r in 0..n {
        for d in 1..n {
            let from = (r + n - d) % n;
            let mut waits: Vec<SignalId> = arrived[from][r].into_iter().collect();
            let a = if d == 1 {
                if b.input() == Buf::Recv {
                    // In place: our own pushes read recv before we overwrite it.
                    waits.extend(last_out[r]);
                }
                input
            } else {
                Buf::Recv
            };
            b.push(
                r,
                Lane::Compute,
                OpKind::Reduce {
                    dst: Region::new(Buf::Recv, 0..count),
                    a: Region::new(a, 0..count),
                    b: Region::new(Buf::Scratch, slot(from, r)),
                },
                waits,
                false,
                label("reduce"),
            );
        }
        b.end(r, last_out[r].into_iter().collect());
    }
    b.finish()
}
