//! The calls a CUDA rank thread keeps and the typed replies it sends back:
//! the plumbing between the calling thread and the rank threads, the same
//! over both peer exchanges (rank threads of one process, one rank per
//! process).

use super::rank::Rank;
use super::{Cmd, RankFn, Reply};
use crate::backend::Call;
#[cfg(feature = "nccl")]
use crate::backend::NcclCall;
use crate::error::{Error, Result};
use std::sync::Arc;

/// A call the rank threads keep: which calls are the same one.
pub(super) trait Keep: Clone {
    fn same(&self, other: &Self) -> bool;
}

impl Keep for Call {
    /// Same plan, buffers, type, op and timing.
    fn same(&self, o: &Call) -> bool {
        Arc::ptr_eq(&self.plan, &o.plan)
            && Arc::ptr_eq(&self.bind, &o.bind)
            && self.dtype == o.dtype
            && self.op == o.op
            && self.timing == o.timing
    }
}

#[cfg(feature = "nccl")]
impl Keep for NcclCall {
    fn same(&self, o: &NcclCall) -> bool {
        Arc::ptr_eq(&self.bind, &o.bind)
            && self.collective == o.collective
            && self.count == o.count
            && self.dtype == o.dtype
            && self.op == o.op
            && self.in_place == o.in_place
            && self.buffers == o.buffers
    }
}

pub(super) fn erase<R: Send + 'static>(w: RankFn<R>) -> Cmd {
    Cmd::Run(Box::new(move |rk: &mut Rank<'_>| {
        w(rk).map(|r| Box::new(r) as Reply)
    }))
}

/// The calling thread's copy of the calls its rank threads hold, by key.
pub(super) struct HeldCalls<T> {
    calls: Vec<Arc<T>>,
    next: usize,
}

impl<T> Default for HeldCalls<T> {
    fn default() -> Self {
        HeldCalls {
            calls: Vec::new(),
            next: 0,
        }
    }
}

impl<T: Keep> HeldCalls<T> {
    /// How many calls the ranks keep; older ones are replaced in turn.
    pub(super) const MAX: usize = 16;

    /// The key of `call`, and the call to send with it when the ranks do not
    /// hold it yet.
    pub fn key(&mut self, call: &T) -> (usize, Option<Arc<T>>) {
        if let Some(k) = self.calls.iter().position(|c| c.same(call)) {
            return (k, None);
        }
        let c = Arc::new(call.clone());
        let k = if self.calls.len() < Self::MAX {
            self.calls.push(c.clone());
            self.calls.len() - 1
        } else {
            let k = self.next;
            self.next = (k + 1) % Self::MAX;
            self.calls[k] = c.clone();
            k
        };
        (k, Some(c))
    }
}

/// Every rank's reply unerased, or the errors of every rank that failed
/// (one error as itself, several together).
pub(super) fn gather<R: 'static>(replies: Vec<Result<Reply>>) -> Result<Vec<R>> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for r in replies {
        match r.and_then(unerase::<R>) {
            Ok(v) => out.push(v),
            Err(e) => errors.push(e),
        }
    }
    match errors.len() {
        0 => Ok(out),
        1 => Err(errors.remove(0)),
        _ => Err(Error::Ranks(errors)),
    }
}

/// Two errors as one [`Error::Ranks`], `first` first (nested lists
/// flattened).
pub(super) fn both(first: Error, then: Error) -> Error {
    let mut v = Vec::new();
    for e in [first, then] {
        match e {
            Error::Ranks(inner) => v.extend(inner),
            e => v.push(e),
        }
    }
    Error::Ranks(v)
}

pub(super) fn unerase<R: 'static>(r: Reply) -> Result<R> {
    r.downcast::<R>()
        .map(|b| *b)
        .map_err(|_| Error::internal("rank thread replied with the wrong type"))
}
