//! The traffic layer: the bytes each op moved between ranks (and over the
//! network), counted for the calls issued directly.

use super::super::lower::{DriverOp, Lowered};
use super::super::Rank;
use crate::plan::Traffic;

/// Make the rank's counts cover `ranks` ranks.
pub(super) fn cover(rank: &mut Rank, ranks: usize) {
    if rank.instr.traffic.len() < ranks {
        rank.instr.traffic.resize(ranks, Traffic::default());
    }
}

/// Count what `low` moved: sent by its source rank, received by its
/// destination, and for a send to another node, over the network.
pub(super) fn count(rank: &mut Rank, low: &Lowered) {
    let Some((from, to, bytes)) = low.moved else {
        return;
    };
    let t = &mut rank.instr.traffic;
    if let Some(x) = t.get_mut(from) {
        x.sent += bytes as u64;
        if matches!(low.work, DriverOp::Send { .. }) {
            x.network += bytes as u64;
        }
    }
    if let Some(x) = t.get_mut(to) {
        x.received += bytes as u64;
    }
}
