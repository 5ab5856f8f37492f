//! The per-rank style's calls: one handle per rank, each called from its
//! rank's thread; a call runs once every rank made it.

use super::ranks::{Payload, RankHandle};
use super::{unbox, CallDesc, EngineCell, HostCall};
use crate::element::Element;
use crate::engine::CallInfo;
use crate::error::{Error, Result};
use crate::sys::lend::{Loan, LoanGuard};

/// Rank `h`'s part of a host-slice collective of the per-rank style: its
/// slices are lent for the call ([`crate::sys::lend`]), and the rank that
/// runs the call reads and writes every rank's slices in place, as every
/// rank from one caller does: no copy and no allocation per call. The
/// loans end before this returns, whatever happened to the call.
pub(crate) fn rank_host<T: Element>(
    h: &RankHandle,
    c: HostCall,
    send: &[T],
    recv: &mut [T],
) -> Result<CallInfo> {
    let n = h.ranks();
    let (count, own) = c.count(n, h.rank(), send.len(), recv.len());
    let send: &[T] = if c.in_place { &[] } else { send };
    let ins: [&[u8]; 1] = [bytemuck::cast_slice(send)];
    let mut outs: [&mut [u8]; 1] = [bytemuck::cast_slice_mut(recv)];
    crate::sys::lend::lend(&ins, &mut outs, |ins, outs| {
        let loans = (ins[0].clone(), outs[0].clone());
        let got = h.call(
            CallDesc::of_host::<T>(c, count),
            own,
            Box::new(loans),
            move |slot, parts| {
                let loans = parts
                    .into_iter()
                    .map(unbox::<(Loan, Loan)>)
                    .collect::<Result<Vec<_>>>()?;
                let info = run_on_loans::<T>(slot, c, &loans)?;
                Ok((0..n).map(|_| Box::new(info.clone()) as Payload).collect())
            },
        )?;
        unbox::<CallInfo>(got)
    })
}

/// Run a host-slice call on every rank's lent slices (rank order), held
/// for the whole call.
fn run_on_loans<T: Element>(
    slot: &mut EngineCell,
    c: HostCall,
    loans: &[(Loan, Loan)],
) -> Result<CallInfo> {
    let ended = || Error::internal("a rank's lent buffer ended while its call ran");
    fn typed<T: Element>(b: &[u8]) -> Result<&[T]> {
        bytemuck::try_cast_slice(b).map_err(|e| Error::internal(format!("a lent buffer: {e}")))
    }
    let ins: Vec<LoanGuard<'_>> = loans.iter().map(|l| l.0.lock()).collect();
    let mut outs: Vec<LoanGuard<'_>> = loans.iter().map(|l| l.1.lock()).collect();
    let send: Vec<&[T]> = if c.in_place {
        Vec::new()
    } else {
        ins.iter()
            .map(|g| g.bytes().ok_or_else(ended).and_then(typed::<T>))
            .collect::<Result<_>>()?
    };
    let mut recv: Vec<&mut [T]> = outs
        .iter_mut()
        .map(|g| {
            let b = g.bytes_mut().ok_or_else(ended)?;
            bytemuck::try_cast_slice_mut(b)
                .map_err(|e| Error::internal(format!("a lent buffer: {e}")))
        })
        .collect::<Result<_>>()?;
    slot.with(|e| e.host(c, &send, &mut recv))
}

/// A step of every rank of the per-rank style that runs `f` once, on the
/// engine, with every rank's `part` (they must be equal).
pub(super) fn rank_step<P, R>(
    h: &RankHandle,
    desc: CallDesc,
    part: P,
    f: impl FnOnce(&mut EngineCell, P) -> Result<R>,
) -> Result<R>
where
    P: PartialEq + std::fmt::Debug + Send + 'static,
    R: Clone + Send + 'static,
{
    let n = h.ranks();
    let got = h.call(desc, Ok(()), Box::new(part), move |slot, parts| {
        let parts = parts
            .into_iter()
            .map(unbox::<P>)
            .collect::<Result<Vec<P>>>()?;
        if let Some(q) = parts.iter().position(|p| p != &parts[0]) {
            return Err(Error::Mismatch {
                rank: q,
                asked: parts
                    .iter()
                    .enumerate()
                    .map(|(r, p)| (r, format!("{desc} on {p:?}")))
                    .collect(),
            });
        }
        let first = parts
            .into_iter()
            .next()
            .ok_or_else(|| Error::internal("a call of the per-rank style without ranks"))?;
        let r = f(slot, first)?;
        Ok((0..n).map(|_| Box::new(r.clone()) as Payload).collect())
    })?;
    unbox::<R>(got)
}
