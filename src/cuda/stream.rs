//! Streams, events, copies and CUDA graphs.

use super::driver::{Brand, Ctx, NotSend};
use super::memory::{Alloc, DevBuf, PeerBuf};
use super::result;
use super::{err, CuResult};
use crate::sync::Backoff;
use cudarc::driver::sys;
use std::marker::PhantomData;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A stream of the context branded `'id`.
pub struct Stream<'id> {
    pub(crate) s: sys::CUstream,
    /// Kernels, copies and memsets issued on it so far (what CUPTI writes
    /// an activity record of): the timeline's order tie counts an op's
    /// calls with it.
    issued: std::cell::Cell<u64>,
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        // SAFETY: the stream belongs to the current thread's context; the
        // driver defers destruction until pending work is done. Errors ignored.
        let _ = unsafe { result::stream_destroy(self.s) };
    }
}

pub(crate) struct EventToken(sys::CUevent);
// SAFETY: an event handle may be waited on from any thread/context.
unsafe impl Send for EventToken {}
// SAFETY: as above.
unsafe impl Sync for EventToken {}
impl Drop for EventToken {
    fn drop(&mut self) {
        // SAFETY: destroying an event with pending waits is allowed; the
        // driver keeps what it needs. Errors ignored.
        let _ = unsafe { result::event_destroy(self.0) };
    }
}

/// An event of the context branded `'id` (no timing: cheapest to record
/// and wait on); only that context's streams can record it.
pub struct Event<'id> {
    token: Arc<EventToken>,
    _brand: Brand<'id>,
    _thread: NotSend,
}

/// Another rank's event: any stream may wait on it. An event of another
/// process, opened through CUDA IPC, is held open (`keep`) until the last
/// clone is dropped.
#[derive(Clone)]
pub struct RemoteEvent {
    token: Weak<EventToken>,
    /// Held only to keep an opened IPC event alive.
    _keep: Option<Arc<EventToken>>,
}

impl std::fmt::Debug for RemoteEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.token.strong_count() > 0 {
            "RemoteEvent"
        } else {
            "RemoteEvent(destroyed)"
        })
    }
}

impl Event<'_> {
    /// The driver handle, for the stream-ordered calls of [`super::order`].
    pub(crate) fn handle(&self) -> sys::CUevent {
        self.token.0
    }

    pub(crate) fn export(&self) -> RemoteEvent {
        RemoteEvent {
            token: Arc::downgrade(&self.token),
            _keep: None,
        }
    }

    /// The CUDA IPC handle of this event (`cuIpcGetEventHandle`); only an
    /// event made by [`Ctx::ipc_event`] has one.
    pub(crate) fn ipc_handle(&self) -> CuResult<IpcEventHandle> {
        // SAFETY: a live event (held by `self`); the driver refuses an
        // event created without CU_EVENT_INTERPROCESS.
        let h = unsafe { result::ipc_get_event_handle(self.token.0) }?;
        Ok(IpcEventHandle(h))
    }
}

/// The 64 bytes that name an interprocess event to another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcEventHandle(pub [u8; 64]);

/// An event with timing, for timelines.
pub struct TimingEvent<'id> {
    e: EventToken,
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl<'id> TimingEvent<'id> {
    /// Milliseconds from `self` to `later` (both recorded and complete).
    pub(crate) fn elapsed_ms(&self, later: &TimingEvent<'id>) -> CuResult<f32> {
        // SAFETY: two live timing events of the same context (same brand),
        // which is current.
        unsafe { result::event_elapsed_ms(self.e.0, later.e.0) }
    }
}

/// A CUDA graph captured on a stream of the context branded `'id`, ready to
/// launch (`CUgraphExec`). Destroyed on drop.
pub struct Graph<'id> {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        // SAFETY: both handles were created by end_capture and are owned here;
        // the driver defers destruction of a graph still executing. Errors ignored.
        unsafe {
            let _ = result::graph_exec_destroy(self.exec);
            let _ = result::graph_destroy(self.graph);
        }
    }
}

impl<'id> Ctx<'id> {
    /// A non-blocking stream of this context.
    pub fn stream(&self) -> CuResult<Stream<'id>> {
        // The current context is self.ctx.
        let s = result::stream_create()?;
        let (b, t) = self.brand();
        Ok(Stream {
            s,
            issued: std::cell::Cell::new(0),
            _brand: b,
            _thread: t,
        })
    }

    /// A non-blocking stream of this context with the highest priority the
    /// device offers (`high`) or the default one: pending blocks of a
    /// high-priority stream's kernels are dispatched before those of
    /// default-priority streams (the overlap benchmark's collective lanes).
    pub(crate) fn stream_with_priority(&self, high: bool) -> CuResult<Stream<'id>> {
        // The current context is self.ctx; the priority is inside the range
        // the driver gives.
        let (least, greatest) = result::stream_priority_range()?;
        let s = result::stream_create_with_priority(if high { greatest } else { least })?;
        let (b, t) = self.brand();
        Ok(Stream {
            s,
            issued: std::cell::Cell::new(0),
            _brand: b,
            _thread: t,
        })
    }

    /// An event without timing.
    pub fn event(&self) -> CuResult<Event<'id>> {
        // The current context is self.ctx.
        let e = result::event_create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        let (b, t) = self.brand();
        Ok(Event {
            token: Arc::new(EventToken(e)),
            _brand: b,
            _thread: t,
        })
    }

    /// An event without timing that other processes can wait on
    /// (`CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`): record and wait
    /// cost the same as [`Ctx::event`]'s; its handle is
    /// [`Event::ipc_handle`].
    pub(crate) fn ipc_event(&self) -> CuResult<Event<'id>> {
        // The current context is self.ctx.
        let e = result::ipc_event_create()?;
        let (b, t) = self.brand();
        Ok(Event {
            token: Arc::new(EventToken(e)),
            _brand: b,
            _thread: t,
        })
    }

    /// Open another process's interprocess event (`cuIpcOpenEventHandle`)
    /// in this context; streams of this context may then wait on it. The
    /// token holds it open; it is destroyed when the last clone is dropped.
    pub(crate) fn open_ipc_event(&self, h: &IpcEventHandle) -> CuResult<RemoteEvent> {
        // A context is current on this thread (self.ctx).
        let e = result::ipc_open_event_handle(&h.0)?;
        let tok = Arc::new(EventToken(e));
        Ok(RemoteEvent {
            token: Arc::downgrade(&tok),
            _keep: Some(tok),
        })
    }

    /// An event with timing.
    pub(crate) fn timing_event(&self) -> CuResult<TimingEvent<'id>> {
        // The current context is self.ctx.
        let e = result::event_create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        let (b, t) = self.brand();
        Ok(TimingEvent {
            e: EventToken(e),
            _brand: b,
            _thread: t,
        })
    }
}

impl<'id> Stream<'id> {
    /// `cuStreamSynchronize`.
    pub fn synchronize(&self) -> CuResult<()> {
        // SAFETY: valid stream of the current context.
        unsafe { result::stream_synchronize(self.s) }
    }

    /// Whether everything issued on the stream is complete
    /// (`cuStreamQuery`), without waiting.
    pub(crate) fn is_idle(&self) -> CuResult<bool> {
        // SAFETY: valid stream of the current context.
        unsafe { result::stream_query(self.s) }
    }

    /// Wait until the stream is idle, but at most `limit`: polls
    /// `cuStreamQuery` (spinning briefly, then napping), so a stuck stream
    /// gives an error instead of a hang; asks `stop` every few milliseconds (while
    /// napping) whether to give up: a wait on the host that also watches
    /// something else (a peer process's liveness) instead of blocking in
    /// `cuStreamSynchronize`. A stop is an error saying so; the caller
    /// knows why.
    pub(crate) fn wait_idle_or(
        &self,
        limit: Duration,
        stop: &mut dyn FnMut() -> bool,
    ) -> CuResult<()> {
        let start = Instant::now();
        let mut asked = start;
        let mut pause = Backoff::new(2000, 4000, Duration::from_micros(50));
        loop {
            // SAFETY: valid stream of the current context.
            if unsafe { result::stream_query(self.s) }? {
                return Ok(());
            }
            if asked.elapsed() > Duration::from_millis(10) {
                asked = Instant::now();
                if stop() {
                    return Err(err(
                        "cuStreamQuery",
                        "the wait for the stream was stopped (its work may never end)",
                    ));
                }
            }
            if start.elapsed() > limit {
                return Err(err(
                    "cuStreamQuery",
                    format!(
                        "the stream is still busy after {:.1} s",
                        limit.as_secs_f64()
                    ),
                ));
            }
            pause.snooze();
        }
    }

    /// `cuEventRecord` of an event of the same context.
    pub fn record(&self, ev: &Event<'id>) -> CuResult<()> {
        // SAFETY: event and stream belong to the same context (same brand).
        unsafe { result::event_record(ev.token.0, self.s) }
    }

    /// `cuEventRecord` of a timing event of the same context.
    pub(crate) fn record_timing(&self, ev: &TimingEvent<'id>) -> CuResult<()> {
        // SAFETY: event and stream belong to the same context (same brand).
        unsafe { result::event_record(ev.e.0, self.s) }
    }

    /// `cuStreamWaitEvent` on a local event.
    pub(crate) fn wait_local(&self, ev: &Event<'id>) -> CuResult<()> {
        // SAFETY: valid stream and event.
        unsafe { result::stream_wait_event(self.s, ev.token.0) }
    }

    /// `cuStreamWaitEvent` on an event of any rank (any device).
    pub fn wait(&self, ev: &RemoteEvent) -> CuResult<()> {
        let tok = ev
            .token
            .upgrade()
            .ok_or_else(|| err("cuStreamWaitEvent", "the event's owner has destroyed it"))?;
        // SAFETY: the token is alive while `tok` is held; waiting on another
        // context's event is allowed.
        unsafe { result::stream_wait_event(self.s, tok.0) }
    }

    /// `cuMemcpyPeerAsync`: copy `n` bytes from `src` at `src_off` (this
    /// device) into the peer buffer `dst` at `dst_off`.
    ///
    /// With `how == PeerCopy::Unified` the same copy is issued as
    /// `cuMemcpyAsync` (unified addressing infers both devices; the copy
    /// engine does the same peer transfer). The driver refuses
    /// `cuMemcpyPeerAsync` in a stream capture
    /// (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, measured on 2 x H200), so a
    /// captured ring uses `Unified`.
    pub(crate) fn copy_to_peer(
        &self,
        dst: &PeerBuf,
        dst_off: usize,
        src: &DevBuf<'id>,
        src_off: usize,
        n: usize,
        how: PeerCopy,
    ) -> CuResult<()> {
        let call = how.call();
        if n == 0 {
            return Ok(());
        }
        let sp = src.ptr_at(call, src_off, n)?;
        let (d, dp) = dst.range(call, dst_off, n)?;
        // SAFETY: both ranges are inside live allocations (checked; `d` keeps
        // the destination alive during the call); peer access between them
        // is enabled (a PeerBuf exists only then).
        unsafe { self.copy(how, (dp, &d), (sp, &src.alloc), n) }
    }

    /// `cuMemcpyPeerAsync` the other way: copy `n` bytes of the peer buffer
    /// `src` (from `src_off`) into `dst` at `dst_off` on this device.
    pub(crate) fn copy_from_peer(
        &self,
        dst: &DevBuf<'id>,
        dst_off: usize,
        src: &PeerBuf,
        src_off: usize,
        n: usize,
        how: PeerCopy,
    ) -> CuResult<()> {
        let call = how.call();
        if n == 0 {
            return Ok(());
        }
        let dp = dst.ptr_at(call, dst_off, n)?;
        let (s, sp) = src.range(call, src_off, n)?;
        // SAFETY: as in copy_to_peer, with the roles swapped.
        unsafe { self.copy(how, (dp, &dst.alloc), (sp, &s), n) }
    }

    /// A peer copy of `n` bytes from `src` to `dst`, each an address and the
    /// allocation it lies in, issued `how`.
    ///
    /// # Safety
    /// Both ranges lie in the named live allocations, kept alive for the
    /// call; the contexts are the retained primary contexts the allocations
    /// were made in, and peer access between them is enabled, which
    /// `cuMemcpyAsync` needs for device pointers of two devices.
    unsafe fn copy(
        &self,
        how: PeerCopy,
        dst: (sys::CUdeviceptr, &Alloc),
        src: (sys::CUdeviceptr, &Alloc),
        n: usize,
    ) -> CuResult<()> {
        let r = match how {
            // SAFETY: the caller's contract; a live stream of this context.
            PeerCopy::Peer => unsafe {
                result::memcpy_peer_async(dst.0, dst.1.ctx, src.0, src.1.ctx, n, self.s)
            },
            // SAFETY: as above.
            PeerCopy::Unified => unsafe { result::memcpy_async(dst.0, src.0, n, self.s) },
        };
        self.count(r)
    }

    /// Count an issued kernel, copy or memset (`r`: the issuing call's
    /// outcome; a refused call issued nothing).
    pub(super) fn count(&self, r: CuResult<()>) -> CuResult<()> {
        if r.is_ok() {
            self.issued.set(self.issued.get() + 1);
        }
        r
    }

    /// The kernels, copies and memsets issued on this stream so far (what
    /// CUPTI's order tie counts).
    #[cfg(feature = "profiling")]
    pub fn issued(&self) -> u64 {
        self.issued.get()
    }

    /// The raw handle (CUPTI's stream id is looked up from it).
    #[cfg(feature = "profiling")]
    pub fn raw(&self) -> sys::CUstream {
        self.s
    }

    /// `cuMemsetD8Async` of bytes `off..off + n` to `byte`.
    pub(crate) fn memset(&self, buf: &DevBuf<'id>, off: usize, n: usize, byte: u8) -> CuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let p = buf.ptr_at("cuMemsetD8Async", off, n)?;
        // SAFETY: bounds checked, a stream of the same context.
        self.count(unsafe { result::memset_d8_async(p, byte, n, self.s) })
    }

    /// Start capturing this stream's work into a graph (thread-local mode:
    /// other threads' CUDA calls are unaffected).
    pub(crate) fn begin_capture(&self) -> CuResult<()> {
        self.begin_capture_mode(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    }

    /// Start a capture that streams of other threads and other devices join
    /// (they wait on an event recorded here during the capture); relaxed
    /// mode, so those threads' own driver calls are not refused.
    pub(crate) fn begin_joint_capture(&self) -> CuResult<()> {
        self.begin_capture_mode(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
    }

    fn begin_capture_mode(&self, mode: sys::CUstreamCaptureMode) -> CuResult<()> {
        // SAFETY: valid stream of the current context; `mode` is a valid
        // enumerator.
        unsafe { result::stream_begin_capture(self.s, mode) }
    }

    /// End the capture and instantiate the graph.
    pub(crate) fn end_capture(&self) -> CuResult<Graph<'id>> {
        // SAFETY: valid stream of the current context, in capture mode.
        let graph = unsafe { result::stream_end_capture(self.s) }?;
        // SAFETY: the graph was just captured.
        let exec = match unsafe { result::graph_instantiate(graph) } {
            Ok(exec) => exec,
            Err(e) => {
                // SAFETY: the graph is ours and not instantiated.
                let _ = unsafe { result::graph_destroy(graph) };
                return Err(e);
            }
        };
        Ok(Graph {
            graph,
            exec,
            _brand: PhantomData,
            _thread: PhantomData,
        })
    }

    /// Launch a graph of the same context on this stream.
    pub(crate) fn launch_graph(&self, g: &Graph<'id>) -> CuResult<()> {
        // SAFETY: graph and stream belong to the same context (same brand).
        unsafe { result::graph_launch(g.exec, self.s) }
    }
}

#[cfg(feature = "nccl")]
/// The buffers of an NCCL call (offsets and sizes in bytes).
pub struct NcclOperands<'a, 'id> {
    pub send: (&'a DevBuf<'id>, usize),
    pub recv: (&'a DevBuf<'id>, usize),
    pub send_bytes: usize,
    pub recv_bytes: usize,
}

#[cfg(feature = "nccl")]
/// An error of an NCCL call made through the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum NcclCallError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Nccl(#[from] super::nccl::NcclError),
    /// A collective ringreduce does not call NCCL for.
    #[error("{0} is not bound: ringreduce calls NCCL for all-reduce, reduce-scatter and all-gather only")]
    NotBound(&'static str),
}

#[cfg(feature = "nccl")]
use super::CudaError;

#[cfg(feature = "nccl")]
impl<'id> Stream<'id> {
    /// NCCL's `collective` of `count` (NCCL's count) elements of NCCL type
    /// `dtype` with op `op` on this stream, on checked buffers. The
    /// communicator was created on this thread with this context current.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn nccl_collective(
        &self,
        lib: &super::nccl::Nccl,
        comm: &super::nccl::Comm,
        collective: crate::plan::Collective,
        count: usize,
        dtype: i32,
        op: i32,
        x: &NcclOperands<'_, 'id>,
    ) -> Result<(), NcclCallError> {
        const CALL: &str = "nccl";
        let send = x.send.0.ptr_at(CALL, x.send.1, x.send_bytes)?;
        let recv = x.recv.0.ptr_at(CALL, x.recv.1, x.recv_bytes)?;
        use crate::plan::Collective as C;
        // Each call below: both ranges lie in live allocations of this
        // stream's device (checked above, for as many bytes as NCCL touches
        // for `count`), the stream is live, and the engine drains every
        // stream before freeing either buffer.
        match collective {
            // SAFETY: see above.
            C::AllReduce => unsafe { lib.all_reduce(send, recv, count, dtype, op, comm, self.s) },
            // SAFETY: see above.
            C::ReduceScatter => unsafe {
                lib.reduce_scatter(send, recv, count, dtype, op, comm, self.s)
            },
            // SAFETY: see above.
            C::AllGather => unsafe { lib.all_gather(send, recv, count, dtype, comm, self.s) },
            C::Broadcast { .. } => return Err(NcclCallError::NotBound("ncclBroadcast")),
        }?;
        Ok(())
    }
}

/// How a peer copy is issued (see [`Stream::copy_to_peer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerCopy {
    /// `cuMemcpyPeerAsync` with both contexts named: the engine's copy.
    Peer,
    /// `cuMemcpyAsync` on unified addresses: the same transfer, and the form
    /// a stream capture accepts.
    Unified,
}

impl PeerCopy {
    fn call(self) -> &'static str {
        match self {
            PeerCopy::Peer => "cuMemcpyPeerAsync",
            PeerCopy::Unified => "cuMemcpyAsync",
        }
    }
}
