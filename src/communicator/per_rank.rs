//! The per-rank style's calls: one handle per rank, each called from its
//! rank's thread; a call runs once every rank made it.

use super::{run_host, unbox, CallDesc, HostCall, Slot};
use crate::element::Element;
use crate::engine::ranks::{Payload, RankHandle};
use crate::engine::CallInfo;
use crate::error::{Error, Result};

/// Rank `h`'s part of a host-slice collective of the per-rank style.
pub(crate) fn rank_host<T: Element>(
    h: &RankHandle,
    c: HostCall,
    send: &[T],
    recv: &mut [T],
) -> Result<CallInfo> {
    let n = h.ranks();
    let (count, own) = c.count(n, h.rank(), send.len(), recv.len());
    let input: Vec<T> = if c.in_place {
        recv.to_vec()
    } else {
        send.to_vec()
    };
    let out_len = recv.len();
    let got = h.call(
        c.desc::<T>(count),
        own,
        Box::new(input),
        move |slot, parts| {
            let mut inputs = parts
                .into_iter()
                .map(unbox::<Vec<T>>)
                .collect::<Result<Vec<_>>>()?;
            slot.with::<T, _>(|e| {
                let (info, outs) = if c.in_place {
                    let info = run_host(e, c, &[] as &[&[T]], &mut inputs)?;
                    (info, inputs)
                } else {
                    let mut outs = vec![vec![T::default(); out_len]; n];
                    let info = run_host(e, c, &inputs, &mut outs)?;
                    (info, outs)
                };
                Ok(outs
                    .into_iter()
                    .map(|o| Box::new((o, info.clone())) as Payload)
                    .collect())
            })
        },
    )?;
    let (out, info) = unbox::<(Vec<T>, CallInfo)>(got)?;
    if out.len() != recv.len() {
        return Err(Error::BufferSize {
            rank: h.rank(),
            what: "output",
            expected: out.len(),
            found: recv.len(),
        });
    }
    recv.copy_from_slice(&out);
    Ok(info)
}

/// A step of every rank of the per-rank style that runs `f` once, on the
/// engine, with every rank's `part` (they must be equal).
pub(super) fn rank_step<P, R>(
    h: &RankHandle,
    desc: CallDesc,
    part: P,
    f: impl FnOnce(&mut Slot, P) -> Result<R>,
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
