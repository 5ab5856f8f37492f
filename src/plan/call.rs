//! A plan bound to buffers: what a backend runs for one collective call
//! (the plan, the element type and op, and which of every rank's buffers
//! the plan's `Send` and `Recv` are).

use super::Plan;
use crate::element::{DataType, ReduceOp};
use std::sync::Arc;

/// A buffer that every rank has, by id. The engine owns ids 0 to 3 (the
/// default send, receive and scratch buffers, and a device backend's LL
/// lines); user buffers get higher ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

impl BufId {
    /// The engine's default send buffers.
    pub const SEND: BufId = BufId(0);
    /// The engine's default receive buffers.
    pub const RECV: BufId = BufId(1);
    /// The plans' scratch.
    pub const SCRATCH: BufId = BufId(2);
    /// The LL slots ([`super::Buf::Lines`]).
    pub const LL: BufId = BufId(3);
}

/// What a plan's `Send` and `Recv` mean for one rank in one call (its
/// `Scratch` and `Lines` are always [`BufId::SCRATCH`] and [`BufId::LL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Binding {
    /// The buffer the plan's `Send` is.
    pub send: BufId,
    /// The buffer the plan's `Recv` is.
    pub recv: BufId,
}

impl Binding {
    /// The engine's default buffers.
    pub const DEFAULT: Binding = Binding {
        send: BufId::SEND,
        recv: BufId::RECV,
    };

    /// `send` and `recv` for every one of `ranks` ranks.
    pub(crate) fn every_rank(
        send: BufId,
        recv: BufId,
        ranks: usize,
    ) -> std::sync::Arc<Vec<Binding>> {
        std::sync::Arc::new(vec![Binding { send, recv }; ranks])
    }

    /// The buffer id of a plan buffer.
    pub fn id(&self, b: super::Buf) -> BufId {
        match b {
            super::Buf::Send => self.send,
            super::Buf::Recv => self.recv,
            super::Buf::Scratch => BufId::SCRATCH,
            super::Buf::Lines => BufId::LL,
        }
    }
}

/// One collective call for a backend: a plan, the element type and reduce
/// op, and which buffers the plan's `Send`/`Recv` are on each rank.
#[derive(Debug, Clone)]
pub struct Call {
    /// The plan.
    pub plan: Arc<Plan>,
    /// The element type.
    pub dtype: DataType,
    /// The reduction.
    pub op: ReduceOp,
    /// Each rank's buffers.
    pub bind: Arc<Vec<Binding>>,
    /// Record when every op starts and ends on its lane (see
    /// `backend::Profiling::take_timeline`).
    pub timing: bool,
}
