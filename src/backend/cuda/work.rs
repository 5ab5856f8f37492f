//! Stream-ordered calls and the work stream on the CUDA backend (see
//! [`crate::backend::ordered`] for the semantics).
//!
//! Per rank, a [`WorkState`], made on first use: the work stream (a third
//! stream beside the two lanes), the work kernels loaded so far, a pool of
//! completion events, the event the NCCL calls wait on, and the timing
//! events of the spans since the last mark.
//!
//! A ringreduce call ([`Rank::issue_after`]) wraps the plain issue of the
//! plan ([`Rank::issue`], unchanged) between two barriers made of plan-style
//! signals (an event per rank, published on the host [`SignalBoard`] once
//! recorded, so no wait is issued before its record): signal `S + r` is rank
//! r's caller stream ("its inputs are ready"), `S + N + r` rank r's last op
//! ("done with every rank's memory"), where S is the plan's signal count.
//! Nothing here blocks on the GPU.

use super::rank::Rank;
use super::CudaBackend;
use crate::backend::ordered::{
    After, Completion, SpanTag, StreamOrdered, WorkArg, WorkLaunch, WorkSpan,
};
use crate::backend::overlap::{Gate, OverlapBench};
use crate::backend::Call;
#[cfg(feature = "nccl")]
use crate::backend::NcclCall;
use crate::cuda::work::Arg;
use crate::cuda::{DoneEvent, Event, HostMapped, LoadedWork, Stream, TimingEvent};
use crate::error::{Error, Result};
use crate::sync::SignalBoard;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Completion events kept for reuse per rank; past this, events are made
/// fresh for each call and destroyed when the caller drops them.
const DONE_POOL: usize = 1024;

/// A timed span: (tag, stream name, start, end).
type Span<'id> = (SpanTag, &'static str, TimingEvent<'id>, TimingEvent<'id>);

/// A rank's work stream and what goes with it (see the module doc).
pub(super) struct WorkState<'id> {
    stream: Stream<'id>,
    kernels: HashMap<(usize, &'static str), LoadedWork<'id>>,
    done: Vec<Arc<DoneEvent>>,
    /// Recorded on the caller's stream before an NCCL call.
    #[cfg(feature = "nccl")]
    ready: Event<'id>,
    /// The gate word (32-bit word 0) and the last value a gate waited for.
    gate: Arc<HostMapped>,
    gate_seq: u32,
    base: Option<TimingEvent<'id>>,
    spans: Vec<Span<'id>>,
    spare: Vec<TimingEvent<'id>>,
}

impl<'id> Rank<'id> {
    /// Make the work state on first use.
    fn ensure_work(&mut self) -> Result<()> {
        if self.work.is_none() {
            let e = self.err();
            self.work = Some(WorkState {
                stream: self.ctx.stream().map_err(&e)?,
                kernels: HashMap::new(),
                done: Vec::new(),
                #[cfg(feature = "nccl")]
                ready: self.ctx.event().map_err(&e)?,
                gate: Arc::new(self.ctx.host_mapped(8).map_err(&e)?),
                gate_seq: 0,
                base: None,
                spans: Vec::new(),
                spare: Vec::new(),
            });
        }
        Ok(())
    }

    fn work_ref(&self) -> Result<&WorkState<'id>> {
        self.work
            .as_ref()
            .ok_or_else(|| Error::internal(format!("rank {}: no work stream", self.rank)))
    }

    /// Wait (bounded) until the work stream is idle: part of [`Rank::sync`],
    /// so memory is never freed under a work kernel. A gate still closed is
    /// opened first: a drain behind it could only time out.
    pub(super) fn sync_work(&self, limit: Duration) -> Result<()> {
        match &self.work {
            Some(w) => {
                w.gate.store_u32(0, w.gate_seq);
                self.wait_stream(&w.stream, limit, self.err())
            }
            None => Ok(()),
        }
    }

    /// A completion event nobody holds any more, or a new one.
    fn done_event(&mut self) -> Result<Arc<DoneEvent>> {
        let e = self.err();
        let w = self
            .work
            .as_mut()
            .ok_or_else(|| Error::internal("no work state"))?;
        if let Some(d) = w.done.iter().find(|d| Arc::strong_count(d) == 1) {
            return Ok(d.clone());
        }
        let d = Arc::new(self.ctx.done_event().map_err(&e)?);
        if w.done.len() < DONE_POOL {
            w.done.push(d.clone());
        }
        Ok(d)
    }

    /// A timing event recorded now on `stream` (0, 1: a lane; 2: the work
    /// stream), when `tag` asks for timing.
    fn stamp(&mut self, tag: Option<SpanTag>, stream: usize) -> Result<Option<TimingEvent<'id>>> {
        if tag.is_none() {
            return Ok(None);
        }
        let e = self.err();
        let w = self
            .work
            .as_mut()
            .ok_or_else(|| Error::internal("no work state"))?;
        let ev = match w.spare.pop() {
            Some(ev) => ev,
            None => self.ctx.timing_event().map_err(&e)?,
        };
        let s = if stream < 2 {
            &self.lanes[stream]
        } else {
            &w.stream
        };
        s.record_timing(&ev).map_err(&e)?;
        Ok(Some(ev))
    }

    fn keep_span(
        &mut self,
        tag: Option<SpanTag>,
        stream: &'static str,
        a: Option<TimingEvent<'id>>,
        b: Option<TimingEvent<'id>>,
    ) {
        if let (Some(t), Some(a), Some(b), Some(w)) = (tag, a, b, self.work.as_mut()) {
            w.spans.push((t, stream, a, b));
        }
    }

    /// This rank's event of signal `id`.
    fn own_event(&self, id: usize) -> Result<&Event<'id>> {
        self.events
            .get(id)
            .ok_or_else(|| Error::internal("event pool too small"))
    }

    /// Record `ev` on rank's caller stream of `after`; false for
    /// [`After::Nothing`].
    fn record_caller(&self, after: &After, ev: &Event<'id>) -> Result<bool> {
        let e = self.err();
        match after {
            After::Nothing => Ok(false),
            After::Work => {
                self.work_ref()?.stream.record(ev).map_err(&e)?;
                Ok(true)
            }
            After::Streams(s) => {
                let raw = s.get(self.rank).ok_or_else(|| {
                    Error::BadArgument(format!("no caller stream for rank {}", self.rank))
                })?;
                raw.record(&self.ctx, ev).map_err(&e)?;
                Ok(true)
            }
        }
    }

    /// Issue this rank's part of `call` after `after` (see the module doc);
    /// returns the rank's completion.
    pub(super) fn issue_after(
        &mut self,
        call: &Call,
        board: &SignalBoard,
        gen: u64,
        call_no: u64,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Completion> {
        self.ensure_work()?;
        let (r, n) = (self.rank, call.plan.ranks());
        let sc = call.plan.signal_count();
        let (ready, tail) = (sc, sc + n);
        let e = self.err();
        // 1. Both lanes of this rank wait for every rank's caller stream.
        if self.record_caller(after, self.own_event(ready + r)?)? {
            board.publish(ready + r, gen);
            for s in 0..n {
                if s == r {
                    let ev = self.own_event(ready + r)?;
                    for lane in &self.lanes {
                        lane.wait_local(ev).map_err(&e)?;
                    }
                    continue;
                }
                board.wait(ready + s, gen, r, &|| format!("rank {s}'s caller stream"))?;
                let ev = self
                    .remote
                    .get(s)
                    .and_then(|v| v.get(ready + s))
                    .ok_or_else(|| Error::internal("remote event missing"))?;
                for lane in &self.lanes {
                    lane.wait(ev).map_err(&e)?;
                }
            }
        }
        let start = self.stamp(tag, 0)?;
        // 2. The plan, issued exactly as by a plain launch.
        self.issue(call, board, gen, call_no)?;
        // 3. Join: the copy lane into the compute lane, then every other
        // rank's joined lanes.
        {
            let ev = self.own_event(tail + r)?;
            self.lanes[1].record(ev).map_err(&e)?;
            self.lanes[0].wait_local(ev).map_err(&e)?;
            self.lanes[0].record(ev).map_err(&e)?;
        }
        board.publish(tail + r, gen);
        for s in (0..n).filter(|&s| s != r) {
            board.wait(tail + s, gen, r, &|| format!("rank {s}'s last op"))?;
            let ev = self
                .remote
                .get(s)
                .and_then(|v| v.get(tail + s))
                .ok_or_else(|| Error::internal("remote event missing"))?;
            self.lanes[0].wait(ev).map_err(&e)?;
        }
        let done = self.done_event()?;
        self.lanes[0].record_done(&self.ctx, &done).map_err(&e)?;
        let end = self.stamp(tag, 0)?;
        self.keep_span(tag, "comm", start, end);
        Ok(Completion::event(r, done))
    }

    /// NCCL's collective after this rank's caller stream, on the compute
    /// lane; returns the rank's completion.
    #[cfg(feature = "nccl")]
    pub(super) fn nccl_after(
        &mut self,
        c: &NcclCall,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Completion> {
        self.ensure_work()?;
        let e = self.err();
        let w = self.work_ref()?;
        if self.record_caller(after, &w.ready)? {
            self.lanes[0].wait_local(&w.ready).map_err(&e)?;
        }
        let start = self.stamp(tag, 0)?;
        self.nccl_call(c)?;
        let done = self.done_event()?;
        self.lanes[0].record_done(&self.ctx, &done).map_err(&e)?;
        let end = self.stamp(tag, 0)?;
        self.keep_span(tag, "comm", start, end);
        Ok(Completion::event(self.rank, done))
    }

    /// Launch a kernel on the work stream.
    pub(super) fn work_launch(&mut self, wl: &WorkLaunch) -> Result<()> {
        self.ensure_work()?;
        let e = self.err();
        let key = wl.kernel.key();
        if !self.work_ref()?.kernels.contains_key(&key) {
            let k = self.ctx.work_kernel(&wl.kernel).map_err(&e)?;
            if let Some(w) = self.work.as_mut() {
                w.kernels.insert(key, k);
            }
        }
        let grid = wl.grid.blocks(wl.block)?;
        let start = self.stamp(wl.tag, 2)?;
        {
            let mut args = Vec::with_capacity(wl.args.len());
            for a in &wl.args {
                args.push(match *a {
                    WorkArg::Buf { id, offset, bytes } => {
                        let b = self.bufs.get(&id).ok_or_else(|| {
                            Error::Plan(format!("rank {} has no buffer {}", self.rank, id.0))
                        })?;
                        Arg::Buf(b, offset, bytes)
                    }
                    WorkArg::Rank => Arg::U32(self.rank as u32),
                    WorkArg::U32(v) => Arg::U32(v),
                    WorkArg::U64(v) => Arg::U64(v),
                    WorkArg::F32(v) => Arg::F32(v),
                });
            }
            let w = self.work_ref()?;
            let k = w
                .kernels
                .get(&key)
                .ok_or_else(|| Error::internal("work kernel cache"))?;
            w.stream
                .launch_work(k, &wl.kernel, grid, wl.block, &args)
                .map_err(&e)?;
        }
        let end = self.stamp(wl.tag, 2)?;
        self.keep_span(wl.tag, "work", start, end);
        Ok(())
    }

    /// Make the work stream wait for a completion.
    pub(super) fn work_wait(&mut self, done: &Completion) -> Result<()> {
        self.ensure_work()?;
        if let Some(ev) = done.done_event() {
            self.work_ref()?.stream.wait_done(ev).map_err(self.err())?;
        }
        Ok(())
    }

    /// Close a gate at the head of the work stream: it waits until the
    /// host stores the returned value into the returned word.
    pub(super) fn work_gate(&mut self) -> Result<(Arc<HostMapped>, u32)> {
        self.ensure_work()?;
        let e = self.err();
        let w = self
            .work
            .as_mut()
            .ok_or_else(|| Error::internal("no work state"))?;
        let next = w.gate_seq.wrapping_add(1);
        w.stream.wait_host_word(&w.gate, 0, next).map_err(&e)?;
        w.gate_seq = next;
        Ok((w.gate.clone(), next))
    }

    /// A new timing origin on the work stream; the old spans are dropped.
    pub(super) fn work_mark(&mut self) -> Result<()> {
        self.ensure_work()?;
        let e = self.err();
        let base = self.ctx.timing_event().map_err(&e)?;
        let w = self
            .work
            .as_mut()
            .ok_or_else(|| Error::internal("no work state"))?;
        w.stream.record_timing(&base).map_err(&e)?;
        for (_, _, a, b) in w.spans.drain(..) {
            w.spare.push(a);
            w.spare.push(b);
        }
        w.base = Some(base);
        Ok(())
    }

    /// The spans since the last mark, in ns from it (after a sync).
    pub(super) fn take_spans(&mut self) -> Result<Vec<WorkSpan>> {
        let e = self.err();
        let rank = self.rank;
        let Some(w) = self.work.as_mut() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(w.spans.len());
        for (tag, stream, a, b) in w.spans.drain(..) {
            if let Some(base) = &w.base {
                out.push(WorkSpan {
                    rank,
                    what: tag.what,
                    index: tag.index,
                    stream,
                    start_ns: f64::from(base.elapsed_ms(&a).map_err(&e)?) * 1e6,
                    end_ns: f64::from(base.elapsed_ms(&b).map_err(&e)?) * 1e6,
                });
            }
            w.spare.push(a);
            w.spare.push(b);
        }
        Ok(out)
    }

    /// Replace both lanes by streams of the given priority (after a drain).
    pub(super) fn set_lane_priority(&mut self, high: bool) -> Result<()> {
        self.sync()?;
        let e = self.err();
        self.lanes = [
            self.ctx.stream_with_priority(high).map_err(&e)?,
            self.ctx.stream_with_priority(high).map_err(&e)?,
        ];
        Ok(())
    }
}

impl StreamOrdered for CudaBackend {
    fn launch_after(
        &mut self,
        call: &Call,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>> {
        let n = self.front.info.ranks;
        super::front::admit(call, n, &self.front.abort)?;
        if let After::Streams(s) = after {
            if s.len() != n {
                return Err(Error::WrongBufferCount {
                    ranks: n,
                    buffers: s.len(),
                });
            }
            for (r, (raw, &dev)) in s.iter().zip(&self.front.info.rank_to_device).enumerate() {
                if raw.device() != dev {
                    return Err(Error::BadArgument(format!(
                        "rank {r} runs on GPU {dev} but its caller stream belongs to GPU {}",
                        raw.device()
                    )));
                }
            }
        }
        self.ensure_events(call.plan.signal_count() + 2 * n)?;
        self.front.gen += 1;
        self.front.calls += 1;
        let (board, gen, call_no) = (self.front.board.clone(), self.front.gen, self.front.calls);
        let call = Arc::new(call.clone());
        self.front.log.collective(&call);
        let after = Arc::new(after.clone());
        self.front.each_all(|_| {
            let (call, board, after) = (call.clone(), board.clone(), after.clone());
            Box::new(move |rk: &mut Rank<'_>| {
                // As in `launch`: a panic must also release the other ranks.
                let rank = rk.rank;
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    rk.issue_after(&call, &board, gen, call_no, &after, tag)
                }))
                .unwrap_or_else(|p| {
                    Err(Error::Worker {
                        rank,
                        message: crate::pool::panic_message(p.as_ref()),
                    })
                });
                r.inspect_err(|e| board.fail_with(gen, rank, e))
            })
        })
    }

    fn work_launch(&mut self, w: &WorkLaunch) -> Result<()> {
        let w = Arc::new(w.clone());
        self.front
            .each_all(|_| {
                let w = w.clone();
                Box::new(move |rk: &mut Rank<'_>| rk.work_launch(&w))
            })
            .map(|_| ())
    }

    fn work_wait(&mut self, done: &[Completion]) -> Result<()> {
        if done.len() != self.front.info.ranks {
            return Err(Error::WrongBufferCount {
                ranks: self.front.info.ranks,
                buffers: done.len(),
            });
        }
        let done = Arc::new(done.to_vec());
        self.front
            .each_all(|r| {
                let done = done.clone();
                Box::new(move |rk: &mut Rank<'_>| rk.work_wait(&done[r]))
            })
            .map(|_| ())
    }

    fn work_mark(&mut self) -> Result<()> {
        self.front
            .each_all(|_| Box::new(|rk: &mut Rank<'_>| rk.work_mark()))
            .map(|_| ())
    }

    fn take_spans(&mut self) -> Result<Vec<WorkSpan>> {
        self.drain()?;
        let v: Vec<Vec<WorkSpan>> = self
            .front
            .each(|_| Box::new(|rk: &mut Rank<'_>| rk.take_spans()))?;
        Ok(v.into_iter().flatten().collect())
    }

    fn set_comm_priority(&mut self, high: bool) -> Result<()> {
        self.drain()?;
        self.front
            .each_all(|_| Box::new(move |rk: &mut Rank<'_>| rk.set_lane_priority(high)))
            .map(|_| ())
    }

    fn overlap_bench(&mut self) -> Option<&mut dyn OverlapBench> {
        Some(self)
    }
}

impl OverlapBench for CudaBackend {
    #[cfg(feature = "nccl")]
    fn launch_nccl_after(
        &mut self,
        call: &NcclCall,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>> {
        let call = Arc::new(call.clone());
        let after = Arc::new(after.clone());
        self.front.each_all(|_| {
            let (c, after) = (call.clone(), after.clone());
            Box::new(move |rk: &mut Rank<'_>| rk.nccl_after(&c, &after, tag))
        })
    }

    fn work_gate(&mut self) -> Result<Gate> {
        // Every rank's outcome: a rank whose gate closed must be opened
        // again if another rank's failed.
        let got: Vec<Result<(Arc<HostMapped>, u32)>> = self
            .front
            .each_all(|_| Box::new(|rk: &mut Rank<'_>| Ok(rk.work_gate())))?;
        let mut words = Vec::new();
        let mut first_err = None;
        for g in got {
            match g {
                Ok(w) => words.push(w),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        let gate = Gate::new(words);
        match first_err {
            None => Ok(gate),
            Some(e) => {
                gate.open();
                Err(e)
            }
        }
    }
}
