//! Collectives on another library's device memory (a torch CUDA tensor),
//! ordered on that library's streams: no host staging, no host wait.
//!
//! Design: each rank's tensor is copied device to device into the engine's
//! own buffer *on the caller's stream* (so the copy runs after the
//! producer), the collective is ordered after those streams
//! ([`After::Streams`]), each caller stream is made to wait for the call's
//! completion (`Completion::order_before`) and the result is copied back
//! on it. One on-device copy in and one out per rank and call; the calling
//! thread never waits for the GPU. The engine's buffers are kept between
//! calls (the staging of [`Staging`]); an event recorded on each caller
//! stream behind the copy out guards them: a later call on another stream
//! waits for it on the GPU, and the buffers are freed (grown, or the engine
//! closed) only after the host waited for it.
//!
//! Why not lend the tensors' memory to the plan (true zero-copy): the
//! plans read and write peers' buffers directly, which needs every rank's
//! memory reachable from every other rank's context (peer access, and for
//! torch's expandable segments an explicit `cuMemSetAccess` per mapping),
//! and the engine's paths (graphs, the exchange kernel's flags, the
//! per-process exchange) assume buffers it allocated. The copies cost
//! device bandwidth, not host time, and keep every path valid.

use super::{Engine, HostCall};
use crate::backend::ordered::After;
use crate::backend::{Binding, BufId};
use crate::cuda::{CudaError, DeviceSpan, DoneEvent, RawStream};
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Collective, Plan, Shape};
use std::sync::Arc;
use std::time::Duration;

/// The engine's buffers the caller's tensors are copied through, and the
/// events that guard them (see the module doc).
#[derive(Default)]
pub(crate) struct Staging {
    /// (buffer, bytes per rank) of the inputs of out-of-place calls.
    send: Option<(BufId, usize)>,
    /// (buffer, bytes per rank) of the outputs (and in-place buffers).
    recv: Option<(BufId, usize)>,
    /// Per rank: recorded on the caller's stream after its last copy out.
    pending: Vec<Option<DoneEvent>>,
    timeout: Duration,
}

impl Staging {
    /// Wait (on this thread, at most the engine's timeout each) until no
    /// copy of the caller's streams uses the buffers any more.
    fn quiesce(&self) -> Result<()> {
        for (r, ev) in self.pending.iter().enumerate() {
            if let Some(ev) = ev {
                match ev.wait_for(self.timeout) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(Error::Timeout {
                            rank: r,
                            what: "the copy out of a call on a caller's stream".into(),
                            seconds: self.timeout.as_secs_f64(),
                            wait: crate::error::WaitKind::Completion,
                        })
                    }
                    Err(e) => return Err(e.at(r, ev.device())),
                }
            }
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // The engine's memory is freed after this (`Engine` declares the
        // staging first): no copy of a caller's stream may still use it.
        let _ = self.quiesce();
    }
}

/// Refuse rank `r`'s input or output on another GPU than its stream.
fn on_stream_device(
    r: usize,
    send: Option<&DeviceSpan>,
    recv: Option<&DeviceSpan>,
    stream: &RawStream,
) -> Result<()> {
    for (what, span) in [("input", send), ("output", recv)] {
        if let Some(span) = span.filter(|s| !s.is_empty()) {
            if span.device() != stream.device() {
                return Err(Error::BadArgument(format!(
                    "rank {r}: the {what} is on GPU {} but its stream belongs to GPU {}",
                    span.device(),
                    stream.device()
                )));
            }
        }
    }
    Ok(())
}

/// Refuse a rank whose stream (hence its tensors) is on another GPU than
/// the rank runs on.
fn on_rank_devices(
    core: &Engine,
    ranks: std::ops::Range<usize>,
    streams: &[RawStream],
) -> Result<()> {
    let devs = &core.info().rank_to_device;
    for (r, st) in ranks.zip(streams) {
        if let Some(&d) = devs.get(r) {
            if d != st.device() {
                return Err(Error::BadArgument(format!(
                    "rank {r} runs on GPU {d} but its tensors and stream are on GPU {}",
                    st.device()
                )));
            }
        }
    }
    Ok(())
}

/// Refuse outputs that share memory with each other or with an input
/// (their copies out would race): every rank needs its own buffers.
fn disjoint(sends: &[DeviceSpan], recvs: &[DeviceSpan]) -> Result<()> {
    let overlap = |a: &DeviceSpan, b: &DeviceSpan| {
        let (a0, b0) = (a.ptr(), b.ptr());
        let (a1, b1) = (
            a0.saturating_add(a.len() as u64),
            b0.saturating_add(b.len() as u64),
        );
        !a.is_empty() && !b.is_empty() && a.device() == b.device() && a0 < b1 && b0 < a1
    };
    for (i, a) in recvs.iter().enumerate() {
        for (j, b) in recvs.iter().enumerate().skip(i + 1) {
            if overlap(a, b) {
                return Err(Error::BadArgument(format!(
                    "the outputs of ranks {i} and {j} share memory: every rank needs its own output buffer"
                )));
            }
        }
        for (j, s) in sends.iter().enumerate() {
            if overlap(a, s) {
                return Err(Error::BadArgument(format!(
                    "the output of rank {i} overlaps the input of rank {j}: out of place, inputs and outputs must not share memory (call the in-place form instead)"
                )));
            }
        }
    }
    Ok(())
}

/// NCCL's count of a call on per-rank buffers of these byte lengths
/// (`sends` empty: in place), checked: one buffer per rank, a whole number
/// of elements each, and the rules every host call follows
/// ([`HostCall::count`]).
pub(crate) fn count_of(
    collective: Collective,
    ranks: usize,
    elem: usize,
    sends: &[usize],
    recvs: &[usize],
) -> Result<usize> {
    let in_place = sends.is_empty();
    for (list, checked) in [(recvs, true), (sends, !in_place)] {
        if checked && list.len() != ranks {
            return Err(Error::WrongBufferCount {
                ranks,
                buffers: list.len(),
            });
        }
    }
    let elems = |what: &str, list: &[usize]| -> Result<Vec<usize>> {
        list.iter()
            .enumerate()
            .map(|(r, &b)| match b % elem {
                0 => Ok(b / elem),
                _ => Err(Error::BadArgument(format!(
                    "rank {r}: the {what} of {b} bytes is not a whole number of {elem}-byte elements"
                ))),
            })
            .collect()
    };
    let (recvs, sends) = (elems("output", recvs)?, elems("input", sends)?);
    // The op does not enter the count.
    HostCall::new(collective, in_place, ReduceOp::Sum).count_all(ranks, 0, &sends, &recvs)
}

impl Engine {
    /// Engine buffer `have` grown to at least `bytes` per rank.
    fn staged(&mut self, have: Option<(BufId, usize)>, bytes: usize) -> Result<(BufId, usize)> {
        if let Some((id, b)) = have {
            if b >= bytes {
                return Ok((id, b));
            }
            self.staging.quiesce()?;
            self.free_id(id)?;
        }
        let bytes = bytes.max(1).next_power_of_two();
        let id = self.alloc_id(&vec![bytes; self.ranks])?;
        Ok((id, bytes))
    }

    /// The staging buffers of a call of `shape`, grown when too small:
    /// the receive buffer and the send buffer (the same one in place);
    /// completion slots for `ranks` ranks.
    fn stage(&mut self, shape: &Shape, ranks: usize) -> Result<((BufId, usize), (BufId, usize))> {
        let elem = shape.elem_size;
        self.staging.timeout = self.timeout;
        let recv = self.staged(self.staging.recv, shape.recv_len() * elem)?;
        self.staging.recv = Some(recv);
        let send = if shape.in_place {
            recv
        } else {
            let s = self.staged(self.staging.send, shape.send_len() * elem)?;
            self.staging.send = Some(s);
            s
        };
        self.staging.pending.resize_with(ranks, || None);
        Ok((recv, send))
    }

    /// A collective on another library's device memory, ordered on its
    /// streams (see the module doc): rank r's input `sends[r]` (empty for
    /// an in-place call), its output `recvs[r]` (in place: the buffer),
    /// `streams[r]` the stream that produces the input and consumes the
    /// output. Returns once queued; the outputs are valid for work queued
    /// on `streams[r]` after the return. The CUDA backend; a job's rank
    /// (one rank per process) passes its own buffer and stream (the copy
    /// in waits for its stream, the call for its completion).
    pub fn collective_on_device(
        &mut self,
        collective: Collective,
        dtype: DataType,
        op: ReduceOp,
        sends: &[DeviceSpan],
        recvs: &[DeviceSpan],
        streams: &Arc<Vec<RawStream>>,
    ) -> Result<Arc<Plan>> {
        self.usable()?;
        let n = self.ranks;
        if self.local_ranks() != (0..n) {
            // A job's rank: this rank's buffer and stream only.
            if let ([recv], [stream]) = (recvs, streams.as_slice()) {
                if sends.len() <= 1 {
                    return self.collective_on_own_device(
                        collective,
                        dtype,
                        op,
                        sends.first(),
                        recv,
                        stream,
                    );
                }
            }
            return Err(Error::WrongBufferCount {
                ranks: 1,
                buffers: recvs.len().max(streams.len()),
            });
        }
        if streams.len() != n {
            return Err(Error::WrongBufferCount {
                ranks: n,
                buffers: streams.len(),
            });
        }
        on_rank_devices(self, 0..n, streams)?;
        let in_place = sends.is_empty();
        let lens = |l: &[DeviceSpan]| l.iter().map(DeviceSpan::len).collect::<Vec<_>>();
        let elem = dtype.size();
        let count = count_of(collective, n, elem, &lens(sends), &lens(recvs))?;
        for (r, s) in streams.iter().enumerate() {
            on_stream_device(r, sends.get(r), recvs.get(r), s)?;
        }
        disjoint(sends, recvs)?;
        let shape = Shape {
            collective,
            ranks: n,
            count,
            elem_size: elem,
            in_place,
        };
        let (recv, send) = self.stage(&shape, n)?;
        // 1. Copy in, on each caller stream (after the previous copy out of
        // these buffers, wherever it ran).
        for (r, st) in streams.iter().enumerate() {
            let e = |x: CudaError| x.at(r, st.device());
            if let Some(ev) = &self.staging.pending[r] {
                st.wait_done(ev).map_err(e)?;
            }
            let (id, span) = if in_place {
                (recv.0, &recvs[r])
            } else {
                (send.0, &sends[r])
            };
            let buf = self.backend.device_buf(r, id)?;
            st.copy_into_engine(&buf, 0, span).map_err(e)?;
        }
        // 2. The call, after every caller stream.
        let bind = Binding::every_rank(send.0, recv.0, n);
        let after = After::Streams(streams.clone());
        let (plan, done) = self.launch_after(None, shape, dtype, op, bind, &after, None)?;
        // 3. Each caller stream waits for the call, then copies out.
        for (r, st) in streams.iter().enumerate() {
            let d = done
                .get(r)
                .ok_or_else(|| Error::internal("a completion per rank"))?;
            d.order_before(st)?;
            self.copy_out(r, recv.0, &recvs[r], st)?;
        }
        Ok(plan)
    }
}

impl Engine {
    /// [`Engine::collective_on_device`] for a job's rank (one rank per
    /// process: the CUDA IPC exchange, which has no stream-ordered calls):
    /// `send` (None: in place) and `recv` are this rank's, `stream` its
    /// caller's stream. The copy in is ordered like a host write (after
    /// this rank's calls and any peer still reading the buffer) and this
    /// thread waits until it landed (`stream` synchronized: the producer
    /// and the copy); the collective runs and this thread waits for it;
    /// the copy out is queued on `stream` (no wait). Every rank of the job
    /// makes the same call (the caller agrees on it first).
    ///
    /// When processes share a GPU ([`crate::algo::Placement::time_sliced`])
    /// an in-place call runs out of place between the staging buffers (the
    /// data is copied in and out anyway), so that `auto` can take a path
    /// with no wait between ranks on the GPU.
    pub(crate) fn collective_on_own_device(
        &mut self,
        collective: Collective,
        dtype: DataType,
        op: ReduceOp,
        send: Option<&DeviceSpan>,
        recv: &DeviceSpan,
        stream: &RawStream,
    ) -> Result<Arc<Plan>> {
        self.usable()?;
        let n = self.ranks;
        let local = self.local_ranks();
        if local.len() != 1 {
            return Err(Error::internal(
                "collective_on_own_device runs one local rank",
            ));
        }
        let me = local.start;
        on_rank_devices(self, me..me + 1, std::slice::from_ref(stream))?;
        let in_place = send.is_none();
        let elem = dtype.size();
        let sends = send.map_or_else(Vec::new, |s| vec![s.len(); n]);
        let count = count_of(collective, n, elem, &sends, &vec![recv.len(); n])?;
        let own_send: Vec<DeviceSpan> = send.into_iter().copied().collect();
        disjoint(&own_send, std::slice::from_ref(recv))?;
        on_stream_device(me, send, Some(recv), stream)?;
        // The spans the staging buffers are copied from and into, and
        // whether the engine's call is in place.
        let (send, recv, in_place) = if in_place && self.placement.time_sliced {
            let chunk = |r: usize| {
                recv.sub(r * count * elem..(r + 1) * count * elem)
                    .ok_or_else(|| Error::internal("a rank's chunk of an in-place buffer"))
            };
            match collective {
                Collective::AllGather => (Some(chunk(me)?), *recv, false),
                Collective::ReduceScatter => (Some(*recv), chunk(me)?, false),
                _ => (Some(*recv), *recv, false),
            }
        } else {
            (send.copied(), *recv, in_place)
        };
        let shape = Shape {
            collective,
            ranks: n,
            count,
            elem_size: elem,
            in_place,
        };
        let (recv_buf, send_buf) = self.stage(&shape, me + 1)?;
        let e = |x: CudaError| x.at(me, stream.device());
        if let Some(ev) = &self.staging.pending[me] {
            stream.wait_done(ev).map_err(e)?;
        }
        let (id, span) = match &send {
            Some(s) => (send_buf.0, s),
            None => (recv_buf.0, &recv),
        };
        self.last = None;
        let r = self.backend.copy_in_landed(me, id, span, stream);
        self.track(r)?;
        let bind = Binding::every_rank(send_buf.0, recv_buf.0, n);
        let plan = self.launch_bound(None, shape, dtype, op, bind)?;
        self.synchronize()?;
        self.copy_out(me, recv_buf.0, &recv, stream)?;
        Ok(plan)
    }

    /// Rank `r`'s output: the engine's staging buffer `id` copied into
    /// `span` on the caller's `stream`, then the staging marked busy until
    /// that copy is done (the next call's copy in waits for it).
    fn copy_out(
        &mut self,
        r: usize,
        id: BufId,
        span: &DeviceSpan,
        stream: &RawStream,
    ) -> Result<()> {
        let e = |x: CudaError| x.at(r, stream.device());
        let buf = self.backend.device_buf(r, id)?;
        stream.copy_from_engine(span, &buf, 0).map_err(e)?;
        if self.staging.pending[r].is_none() {
            self.staging.pending[r] = Some(DoneEvent::on_device(stream.device()).map_err(e)?);
        }
        if let Some(ev) = &self.staging.pending[r] {
            stream.record_done(ev).map_err(e)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
