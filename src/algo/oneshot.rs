//! One-shot all-reduce: every rank pushes its whole buffer into every other
//! rank's scratch, then each rank reduces all slots into its own buffer.
//!
//! Each rank sends (N-1)·D, which for N = 2 equals the ring's 2(N-1)/N·D, in
//! one copy and one kernel instead of a copy and a kernel per ring step. That
//! makes it the cheapest path for small and medium messages on 2 GPUs. With
//! `slices > 1` the buffer is pushed in slices and each slice is reduced as
//! soon as it has landed, so the reduce overlaps the rest of the copy.
//!
//! Unsliced, everything runs on the compute lane: a rank's own push and its reduce are
//! ordered by the stream itself, so a call needs no event between its own
//! streams. That saves three driver calls per rank, which matters because at
//! small sizes the host issuing the call is most of its time (`bench` prints
//! the host share).
//!
//! # Chained calls
//! A fenced push waits for the receiver's Begin: the receiver's previous
//! reads of its scratch are then done. Back-to-back unsliced calls of the same
//! size can drop that cross-GPU wait by alternating scratch halves: the push
//! of call k+1 into half h is issued on the sender's stream after the
//! sender's reduce of call k, which waited for the receiver's push of call k,
//! which the receiver issued after its own reduce of call k-1, the last
//! reader of half h. The engine fences the first call of every chain (after
//! any other collective, a different size, a load or an NCCL call), and the
//! tests check sequences of calls for races with [`Plan::validate_sequence`].

use super::{local_copy_only, Algo};
use crate::plan::{Buf, Label, Lane, OpKind, Plan, PlanBuilder, Region, SignalId};
use crate::schedule;

/// Build the one-shot plan. Unsliced plans have two scratch halves; `parity`
/// picks the half this call writes. `fenced` makes every push wait for the
/// receiver's Begin (the generic rule); an unfenced call relies instead on the
/// previous one-shot call of the same size having used the other half (see
/// the module doc). Sliced plans are always fenced and use one half.
pub fn plan(
    ranks: usize,
    count: usize,
    elem_size: usize,
    in_place: bool,
    slices: usize,
    parity: usize,
    fenced: bool,
) -> Plan {
    build(
        ranks, count, elem_size, in_place, slices, parity, fenced, false,
    )
}

/// The flag one-shot (`oneshot:flag`) for 2 ranks: the unsliced chained
/// plan above, with scratch slots on 16-byte boundaries, marked so that the
/// CUDA backend runs each rank's push and reduce as one kernel
/// (`ptx/exchange_f32.ptx`): the push becomes stores into the peer's scratch
/// and the signal a flag the kernel raises there, the wait a spin on the
/// peer's flag inside the kernel. The plan (and so its validation, and the
/// CPU backend) is the event-ordered one; the kernel keeps the same order:
/// each rank's reduce starts only after the other rank's push of this call.
/// In place too: each kernel reads only its own rank's buffer. Other rank
/// counts get the chained push plan ([`Algo::ONESHOT`]).
pub fn flag_plan(
    ranks: usize,
    count: usize,
    elem_size: usize,
    in_place: bool,
    parity: usize,
    fenced: bool,
) -> Plan {
    build(
        ranks,
        count,
        elem_size,
        in_place,
        1,
        parity,
        fenced,
        ranks == 2,
    )
}

#[allow(clippy::too_many_arguments)]
fn build(
    ranks: usize,
    count: usize,
    elem_size: usize,
    in_place: bool,
    slices: usize,
    parity: usize,
    fenced: bool,
    flag: bool,
) -> Plan {
    let slices = slices.max(1);
    let (parity, fenced, halves) = if slices == 1 {
        (parity % 2, fenced, 2)
    } else {
        (0, true, 1)
    };
    let algo = if flag {
        Algo::OneShotFlag
    } else {
        Algo::OneShot {
            slices,
            chain: slices == 1,
        }
    };
    let mut b = PlanBuilder::new(algo.label(), ranks, count, in_place);
    b.set_algo(algo);
    if !fenced {
        b.unfenced();
    }
    let begin = b.begin_all();
    if ranks == 1 || count == 0 {
        return local_copy_only(b, &begin);
    }
    let n = ranks;
    let input = b.input();
    // Slot stride: the flag plan starts every slot on a 16-byte boundary, so
    // the exchange kernel's vector path applies at any count.
    let stride = if flag {
        let unit = (16 / elem_size.clamp(1, 16)).max(1);
        count.div_ceil(unit) * unit
    } else {
        count
    };
    b.scratch(halves * (n - 1) * stride);
    let parts = schedule::slices(0..count, slices, elem_size);
    // Sliced: pushes on the copy lane so reduces overlap later slices' copies.
    let push_lane = if parts.len() > 1 {
        Lane::Copy
    } else {
        Lane::Compute
    };
    // Rank `src`'s data lands in slot (src - dst - 1) mod n of rank `dst`,
    // in scratch half `parity`.
    let slot = |src: usize, dst: usize| (parity * (n - 1) + (src + n - dst - 1) % n) * stride;
    let label = |note, slice| Label {
        note,
        slice,
        ..Label::default()
    };
    // arrived[src][dst][k], sent_last[r][k] = r's last push of slice k.
    let mut arrived: Vec<Vec<Vec<Option<SignalId>>>> = vec![vec![vec![None; parts.len()]; n]; n];
    let mut sent_last: Vec<Vec<Option<SignalId>>> = vec![vec![None; parts.len()]; n];
    let mut last_out: Vec<Option<SignalId>> = vec![None; n];
    for r in 0..n {
        for (k, part) in parts.iter().enumerate() {
            for d in 1..n {
                let to = (r + d) % n;
                let mut waits = vec![];
                if k == 0 && fenced {
                    waits.push(begin[to]);
                    if d == 1 {
                        waits.push(begin[r]);
                    }
                }
                let off = slot(r, to) + part.start;
                let sig = b.copy(
                    r,
                    push_lane,
                    to,
                    Region::new(input, part.clone()),
                    Region::new(Buf::Scratch, off..off + part.len()),
                    waits,
                    label("push", k),
                );
                arrived[r][to][k] = sig;
                sent_last[r][k] = sig;
                last_out[r] = sig;
            }
        }
    }
    for r in 0..n {
        for (k, part) in parts.iter().enumerate() {
            for d in 1..n {
                let from = (r + n - d) % n;
                let mut waits: Vec<SignalId> = arrived[from][r][k].into_iter().collect();
                let a = if d == 1 {
                    if input == Buf::Recv {
                        // In place: our own pushes of this slice read recv
                        // before we overwrite it.
                        waits.extend(sent_last[r][k]);
                    }
                    input
                } else {
                    Buf::Recv
                };
                let off = slot(from, r) + part.start;
                reduce_slice(&mut b, r, part, a, off, waits, label("reduce", k));
            }
        }
        b.end(r, last_out[r].into_iter().collect());
    }
    b.finish()
}

/// On rank `r`, compute lane: `recv[part] = a[part] + scratch[off..]`.
fn reduce_slice(
    b: &mut PlanBuilder,
    r: usize,
    part: &std::ops::Range<usize>,
    a: Buf,
    off: usize,
    waits: Vec<SignalId>,
    label: Label,
) {
    b.push(
        r,
        Lane::Compute,
        OpKind::Reduce {
            dst: Region::new(Buf::Recv, part.clone()),
            a: Region::new(a, part.clone()),
            b: Region::new(Buf::Scratch, off..off + part.len()),
        },
        waits,
        false,
        label,
    );
}

/// One-shot by *pulling*: out of place, every rank copies every other rank's
/// send buffer into its own scratch and reduces. A send buffer is never
/// written by a collective, so the pull needs no event between ranks: no
/// cross-GPU wait, no thread waiting for another. Unsliced, everything runs on
/// the compute stream; with `slices > 1` the pulls run on the copy stream
/// (after the rank's own Begin, a local event) and each slice is reduced as
/// soon as it has landed. In place the inputs are overwritten by their
/// owners, so this falls back to the chained push plan above.
pub fn pull_plan(
    ranks: usize,
    count: usize,
    elem_size: usize,
    in_place: bool,
    slices: usize,
) -> Plan {
    if in_place {
        return plan(ranks, count, elem_size, true, 1, 0, true);
    }
    let algo = Algo::OneShotPull {
        slices: slices.max(1),
    };
    let mut b = PlanBuilder::new(algo.label(), ranks, count, false);
    b.set_algo(algo);
    let begin = b.begin_all();
    if ranks == 1 || count == 0 {
        return local_copy_only(b, &begin);
    }
    let n = ranks;
    b.scratch((n - 1) * count);
    let parts = schedule::slices(0..count, slices.max(1), elem_size);
    let pull_lane = if parts.len() > 1 {
        Lane::Copy
    } else {
        Lane::Compute
    };
    let label = |note, slice| Label {
        note,
        slice,
        ..Label::default()
    };
    for r in 0..n {
        let mut last_pull = None;
        for (k, part) in parts.iter().enumerate() {
            for d in 1..n {
                let from = (r + n - d) % n;
                let off = (d - 1) * count + part.start;
                // The copy lane starts after this rank's previous work (its
                // Begin): the scratch it writes was last read there.
                let waits = if k == 0 && d == 1 {
                    vec![begin[r]]
                } else {
                    vec![]
                };
                let pulled = b.pull(
                    r,
                    pull_lane,
                    from,
                    Region::new(Buf::Send, part.clone()),
                    Region::new(Buf::Scratch, off..off + part.len()),
                    waits,
                    label("pull", k),
                );
                last_pull = pulled;
                let a = if d == 1 { Buf::Send } else { Buf::Recv };
                let waits = pulled.into_iter().collect();
                reduce_slice(&mut b, r, part, a, off, waits, label("reduce", k));
            }
        }
        b.end(r, last_pull.into_iter().collect());
    }
    b.finish()
}

/// One-shot with the pull *fused into the reduce kernel*: out of place, each
/// rank launches the reduce kernel with the other ranks' send buffers as the
/// `b` operand, read through peer access. One kernel launch per peer and no
/// copy call, no scratch, no event. In place the peer overwrites the buffer
/// such a kernel would read, so it uses the flag one-shot ([`flag_plan`]:
/// one exchange kernel per rank for 2 ranks, the chained push plan for more).
pub fn fused_plan(ranks: usize, count: usize, elem_size: usize, in_place: bool) -> Plan {
    if in_place {
        return flag_plan(ranks, count, elem_size, true, 0, true);
    }
    let mut b = PlanBuilder::new(Algo::OneShotFused.label(), ranks, count, false);
    b.set_algo(Algo::OneShotFused);
    let begin = b.begin_all();
    if ranks == 1 || count == 0 {
        return local_copy_only(b, &begin);
    }
    let n = ranks;
    for r in 0..n {
        for d in 1..n {
            let from = (r + n - d) % n;
            let a = if d == 1 { Buf::Send } else { Buf::Recv };
            b.push(
                r,
                Lane::Compute,
                OpKind::ReducePeer {
                    dst: Region::new(Buf::Recv, 0..count),
                    a: Region::new(a, 0..count),
                    from,
                    b: Region::new(Buf::Send, 0..count),
                },
                vec![],
                false,
                Label {
                    note: "reduce over peer access",
                    ..Label::default()
                },
            );
        }
        b.end(r, vec![]);
    }
    b.finish()
}
