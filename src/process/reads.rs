//! Peer reads of a send buffer, across processes.
//!
//! A plan brackets every access to a rank's memory between that rank's
//! Begin and End, except reads of its *send* buffer: no collective writes
//! one, so the pull paths (`oneshot:fused`) read the peers' inputs with no
//! cross-rank wait at all. In one process that is safe because every rank's
//! input is written, and every rank drained, before any rank starts a call.
//! Across processes each rank writes its own input whenever it gets there,
//! so both orders are enforced here, on the host, from counters in the
//! control segment:
//!
//! * before issuing a call that reads peer p's send buffer, wait until p
//!   started that call (p's input for it is written: host writes are
//!   synchronous and come before p's launch);
//! * before overwriting a buffer that a peer read in call `g`, wait until
//!   that peer drained call `g`.
//!
//! Only the pull paths wait at launch, and only for the peers they read;
//! the ring and the push one-shots never do.

use super::Control;
use crate::error::Result;
use crate::plan::interp::{effects, Effect};
use crate::plan::{Buf, Plan};
use crate::plan::{BufId, Call};
use std::collections::HashMap;

/// One plan's entry: the plan (held), the ranks that read rank `me`'s send
/// buffer, the ranks whose send buffer `me` reads.
type PlanReaders = (std::sync::Arc<Plan>, Vec<usize>, Vec<usize>);

/// Which peers read this rank's send buffer in which call.
#[derive(Debug, Default)]
pub struct PeerReads {
    /// Per plan (by address): the ranks that read rank `me`'s send buffer,
    /// and the ranks whose send buffer `me` reads.
    /// Keyed by the plan's address; each entry holds the plan, so that no
    /// other plan can take that address while the entry lives (a probe's
    /// plan, freed, once gave its address to the next call's plan).
    readers: HashMap<usize, PlanReaders>,
    /// Per buffer: the last call in which each reader read it.
    pending: HashMap<BufId, Vec<(usize, u64)>>,
}

/// The ranks other than `me` whose ops read `me`'s send buffer in `plan`.
pub(crate) fn send_readers(plan: &Plan, me: usize) -> Vec<usize> {
    let mut v = Vec::new();
    for (r, ops) in plan.ops.iter().enumerate().filter(|(r, _)| *r != me) {
        let reads = ops.iter().any(|op| {
            effects(r, &op.kind).iter().any(|e| match *e {
                Effect::Copy { from, src, .. } => from == me && src.buf == Buf::Send,
                Effect::Reduce { b_rank, b, .. } => b_rank == me && b.buf == Buf::Send,
            })
        });
        if reads {
            v.push(r);
        }
    }
    v
}

impl PeerReads {
    /// Call `gen` of this rank `me` starts: say so, note who will read this
    /// rank's input in it, and wait (bounded) until the peers whose input
    /// this rank reads started it too.
    pub fn begin(&mut self, call: &Call, me: usize, gen: u64, control: &Control) -> Result<()> {
        control.publish_begun(gen);
        if self.readers.len() > 4096 {
            self.readers.clear();
        }
        let key = std::sync::Arc::as_ptr(&call.plan) as usize;
        let (_, readers, sources) = self.readers.entry(key).or_insert_with(|| {
            let n = call.plan.ranks();
            let sources = (0..n)
                .filter(|&p| p != me && send_readers(&call.plan, p).contains(&me))
                .collect();
            (call.plan.clone(), send_readers(&call.plan, me), sources)
        });
        if call.plan.shape.in_place {
            return Ok(());
        }
        for &p in sources.iter() {
            control.wait_begun(p, gen)?;
        }
        if readers.is_empty() {
            return Ok(());
        }
        let Some(b) = call.bind.get(me) else {
            return Ok(());
        };
        let v = self.pending.entry(b.send).or_default();
        for &r in readers.iter() {
            match v.iter_mut().find(|(x, _)| *x == r) {
                Some(e) => e.1 = gen,
                None => v.push((r, gen)),
            }
        }
        Ok(())
    }

    /// Before buffer `id` is overwritten: wait (bounded) until every peer
    /// that read it has drained the call in which it did.
    pub(crate) fn before_write(&mut self, id: BufId, control: &Control) -> Result<()> {
        if let Some(v) = self.pending.remove(&id) {
            for (r, gen) in v {
                control.wait_drained(r, gen, &format!("buffer {}", id.0))?;
            }
        }
        Ok(())
    }

    /// Forget buffer `id` (released or reallocated after a barrier).
    pub fn forget(&mut self, id: BufId) {
        self.pending.remove(&id);
    }
}

#[cfg(test)]
mod tests;
