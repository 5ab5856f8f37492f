//! Broadcast: the root's buffer to every rank, pipelined along the ring.
//!
//! The ranks form a chain in ring order from the root: `root, root + 1,
//! ..., root + N - 1` (mod N). The buffer is cut into `slices` pieces;
//! each rank but the last forwards each piece to the next rank as soon as
//! the piece has arrived, so with K pieces a broadcast of D bytes takes
//! N - 1 + K - 1 hops of D / K bytes (one copy-engine copy each), and
//! every rank sends and receives D at most (the root sends D, the last
//! rank only receives).
//!
//! Per hop i (rank `chain[i]` to `chain[i + 1]`), per slice k: a copy on
//! the sender's copy lane of slice k (from the root's input at hop 0, from
//! the sender's output after) into the receiver's output; it waits for
//! the copy of hop i - 1 that brought slice k into the sender. The first
//! copy a rank issues waits for its own and the receiver's `Begin`. Out
//! of place the root copies its input into its own output on its compute
//! lane, beside the pushes. In place the root's input is its output, and
//! every other rank's buffer is overwritten; no rank but the root reads
//! its input.
//!
//! `bcast` sends the buffer whole (one slice), `bcast:pipeK` cuts it into
//! K slices; `auto` picks by size ([`slices_for`]).

use super::{Algorithm, Path, StaticPath};
use crate::plan::{local_only, Collective, Label, Lane, Plan, PlanBuilder, Shape, SignalId};
use crate::schedule;
use std::sync::Arc;

/// The pipelined chain broadcast with `slices` pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bcast {
    pub slices: usize,
}

impl Algorithm for Bcast {
    fn name(&self) -> String {
        match self.slices {
            0 | 1 => "bcast".into(),
            k => format!("bcast:pipe{k}"),
        }
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        match shape.collective {
            Collective::Broadcast { root } if root < shape.ranks => Ok(()),
            Collective::Broadcast { root } => Err(format!(
                "the root {root} is not one of the {} ranks",
                shape.ranks
            )),
            c => Err(format!(
                "bcast implements broadcast only; {c} runs on the ring or auto"
            )),
        }
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        StaticPath::boxed(plan(shape, self.slices))
    }
}

/// `bcast`, `bcast:pipeK`.
pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    let bcast = |slices| -> Arc<dyn Algorithm> { Arc::new(Bcast { slices }) };
    match s {
        "bcast" | "broadcast" => Some(Ok(bcast(1))),
        _ => s.strip_prefix("bcast:pipe").map(|k| {
            k.parse::<usize>()
                .ok()
                .filter(|k| (1..=64).contains(k))
                .map(bcast)
                .ok_or_else(|| format!("bad slice count in {s:?} (bcast:pipeK with K in 1..=64)"))
        }),
    }
}

/// Slices of at least this many bytes: below, a hop's fixed cost (a copy's
/// launch and hand-off, docs/lab/perf-notes.md) outweighs the overlap.
pub const MIN_SLICE_BYTES: usize = 512 << 10;

/// At most this many slices.
pub const MAX_SLICES: usize = 8;

/// The slices `auto` cuts a broadcast of `bytes` per rank on `ranks` ranks
/// into: one for two ranks (nothing to forward) or small buffers, else as
/// many slices of at least [`MIN_SLICE_BYTES`] as fit, at most
/// [`MAX_SLICES`]. Not yet tuned on a GPU.
pub(crate) fn slices_for(bytes: usize, ranks: usize) -> usize {
    if ranks <= 2 {
        return 1;
    }
    (bytes / MIN_SLICE_BYTES).clamp(1, MAX_SLICES)
}

/// The broadcast plan for `shape` (a [`Collective::Broadcast`]) in
/// `slices` pieces.
pub fn plan(shape: &Shape, slices: usize) -> Plan {
    let slices = slices.max(1);
    let mut b = PlanBuilder::new(Bcast { slices }.name(), *shape);
    let n = shape.ranks;
    let begin = b.begin_all();
    let root = shape.collective.root().unwrap_or(0) % n.max(1);
    if n == 1 || shape.count == 0 {
        return local_only(b, &begin);
    }
    let chain: Vec<usize> = (0..n).map(|i| (root + i) % n).collect();
    let pieces = schedule::slices(0..shape.count, slices, shape.elem_size);
    let label = |note, step, slice| Label {
        note,
        step,
        slice,
        ..Label::default()
    };
    let mut end: Vec<Vec<SignalId>> = vec![Vec::new(); n];
    if !shape.in_place {
        // The root's own output, beside its pushes.
        let own = b.copy(
            root,
            Lane::Compute,
            (root, shape.input(root)),
            (root, shape.output(root)),
            vec![begin[root]],
            label("own copy", 0, 0),
        );
        end[root].push(own);
    }
    // arrived[k]: the copy that brought slice k into the current sender.
    let mut arrived: Vec<Option<SignalId>> = vec![None; pieces.len()];
    for hop in 0..n - 1 {
        let (from, to) = (chain[hop], chain[hop + 1]);
        let mut last = None;
        for (k, piece) in pieces.iter().enumerate() {
            let src = if hop == 0 {
                shape.input(root).sub(piece.clone())
            } else {
                shape.output(from).sub(piece.clone())
            };
            let dst = shape.output(to).sub(piece.clone());
            let mut waits: Vec<SignalId> = arrived[k].into_iter().collect();
            if k == 0 {
                waits.extend([begin[from], begin[to]]);
            }
            let sig = b.copy(
                from,
                Lane::Copy,
                (from, src),
                (to, dst),
                waits,
                label("forward", hop, k),
            );
            arrived[k] = Some(sig);
            last = Some(sig);
        }
        // The sender's End: its copies read its memory; the receiver's:
        // the copies into it (in order on the sender's copy lane).
        end[from].extend(last);
        end[to].extend(last);
    }
    for (r, waits) in end.into_iter().enumerate() {
        b.end(r, waits);
    }
    b.finish()
}
