//! Streams, events, copies and CUDA graphs.

use super::driver::{Brand, Ctx, NotSend};
use super::memory::{DevBuf, PeerBuf};
use super::{check, err, CuResult};
use cudarc::driver::sys;
use std::marker::PhantomData;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A stream of the context branded `'id`.
pub struct Stream<'id> {
    pub(crate) s: sys::CUstream,
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        // SAFETY: the stream belongs to the current thread's context; the
        // driver defers destruction until pending work is done. Errors ignored.
        let _ = unsafe { sys::cuStreamDestroy_v2(self.s) };
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
        let _ = unsafe { sys::cuEventDestroy_v2(self.0) };
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

    pub fn export(&self) -> RemoteEvent {
        RemoteEvent {
            token: Arc::downgrade(&self.token),
            _keep: None,
        }
    }

    /// The CUDA IPC handle of this event (`cuIpcGetEventHandle`); only an
    /// event made by [`Ctx::ipc_event`] has one.
    pub fn ipc_handle(&self) -> CuResult<IpcEventHandle> {
        let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
        // SAFETY: valid out-pointer and a live event; the driver refuses an
        // event created without CU_EVENT_INTERPROCESS.
        check("cuIpcGetEventHandle", unsafe {
            sys::cuIpcGetEventHandle(&mut h, self.token.0)
        })?;
        Ok(IpcEventHandle(h.reserved.map(|c| c as u8)))
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
    pub fn elapsed_ms(&self, later: &TimingEvent<'id>) -> CuResult<f32> {
        let mut ms = 0f32;
        // SAFETY: two events of the same context, valid out-pointer.
        check("cuEventElapsedTime", unsafe {
            sys::cuEventElapsedTime_v2(&mut ms, self.e.0, later.e.0)
        })?;
        Ok(ms)
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
            let _ = sys::cuGraphExecDestroy(self.exec);
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

impl<'id> Ctx<'id> {
    /// A non-blocking stream of this context.
    pub fn stream(&self) -> CuResult<Stream<'id>> {
        let mut s = std::ptr::null_mut();
        // SAFETY: valid out-pointer; current context is self.ctx.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        let (b, t) = self.brand();
        Ok(Stream {
            s,
            _brand: b,
            _thread: t,
        })
    }

    /// A non-blocking stream of this context with the highest priority the
    /// device offers (`high`) or the default one: pending blocks of a
    /// high-priority stream's kernels are dispatched before those of
    /// default-priority streams (the overlap benchmark's collective lanes).
    pub fn stream_with_priority(&self, high: bool) -> CuResult<Stream<'id>> {
        let (mut least, mut greatest) = (0i32, 0i32);
        // SAFETY: valid out-pointers; current context is self.ctx.
        check("cuCtxGetStreamPriorityRange", unsafe {
            sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
        })?;
        let mut s = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        let priority = if high { greatest } else { least };
        // SAFETY: valid out-pointer; current context is self.ctx; the
        // priority is inside the range the driver just gave.
        check("cuStreamCreateWithPriority", unsafe {
            sys::cuStreamCreateWithPriority(&mut s, flags, priority)
        })?;
        let (b, t) = self.brand();
        Ok(Stream {
            s,
            _brand: b,
            _thread: t,
        })
    }

    /// An event without timing.
    pub fn event(&self) -> CuResult<Event<'id>> {
        let mut e = std::ptr::null_mut();
        // SAFETY: valid out-pointer; current context is self.ctx.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        })?;
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
    pub fn ipc_event(&self) -> CuResult<Event<'id>> {
        let mut e = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32
            | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: valid out-pointer; current context is self.ctx.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut e, flags)
        })?;
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
    pub fn open_ipc_event(&self, h: &IpcEventHandle) -> CuResult<RemoteEvent> {
        let raw = sys::CUipcEventHandle {
            reserved: h.0.map(|b| b as std::ffi::c_char),
        };
        let mut e = std::ptr::null_mut();
        // SAFETY: valid out-pointer; a context is current on this thread
        // (self.ctx); the handle is passed by value and checked by the driver.
        check("cuIpcOpenEventHandle", unsafe {
            sys::cuIpcOpenEventHandle(&mut e, raw)
        })?;
        let tok = Arc::new(EventToken(e));
        Ok(RemoteEvent {
            token: Arc::downgrade(&tok),
            _keep: Some(tok),
        })
    }

    /// An event with timing.
    pub fn timing_event(&self) -> CuResult<TimingEvent<'id>> {
        let mut e = std::ptr::null_mut();
        // SAFETY: valid out-pointer; current context is self.ctx.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
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
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.s)
        })
    }

    /// Whether everything issued on the stream is complete
    /// (`cuStreamQuery`), without waiting.
    pub fn is_idle(&self) -> CuResult<bool> {
        // SAFETY: valid stream of the current context.
        let r = unsafe { sys::cuStreamQuery(self.s) };
        if r == sys::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("cuStreamQuery", r).map(|_| true)
    }

    /// Wait until the stream is idle, but at most `limit`: polls
    /// `cuStreamQuery` (spinning briefly, then napping), so a stuck stream
    /// gives an error instead of a hang; asks `stop` every few milliseconds (while
    /// napping) whether to give up: a wait on the host that also watches
    /// something else (a peer process's liveness) instead of blocking in
    /// `cuStreamSynchronize`. A stop is an error saying so; the caller
    /// knows why.
    pub fn wait_idle_or(&self, limit: Duration, stop: &mut dyn FnMut() -> bool) -> CuResult<()> {
        let start = Instant::now();
        let mut asked = start;
        let mut i = 0u32;
        loop {
            // SAFETY: valid stream of the current context.
            let r = unsafe { sys::cuStreamQuery(self.s) };
            if r != sys::CUresult::CUDA_ERROR_NOT_READY {
                return check("cuStreamQuery", r);
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
            i = i.wrapping_add(1);
            if i < 2000 {
                std::hint::spin_loop();
            } else if i < 4000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// `cuEventRecord` of an event of the same context.
    pub fn record(&self, ev: &Event<'id>) -> CuResult<()> {
        // SAFETY: event and stream belong to the same context (same brand).
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(ev.token.0, self.s)
        })
    }

    /// `cuEventRecord` of a timing event of the same context.
    pub fn record_timing(&self, ev: &TimingEvent<'id>) -> CuResult<()> {
        // SAFETY: event and stream belong to the same context (same brand).
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(ev.e.0, self.s)
        })
    }

    /// `cuStreamWaitEvent` on a local event.
    pub fn wait_local(&self, ev: &Event<'id>) -> CuResult<()> {
        // SAFETY: valid stream and event.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(self.s, ev.token.0, 0)
        })
    }

    /// `cuStreamWaitEvent` on an event of any rank (any device).
    pub fn wait(&self, ev: &RemoteEvent) -> CuResult<()> {
        let tok = ev
            .token
            .upgrade()
            .ok_or_else(|| err("cuStreamWaitEvent", "the event's owner has destroyed it"))?;
        // SAFETY: the token is alive while `tok` is held; waiting on another
        // context's event is allowed.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(self.s, tok.0, 0)
        })
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
    pub fn copy_to_peer(
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
        // the destination alive during the call); the contexts are the
        // retained primary contexts the allocations were made in, and peer
        // access between them is enabled (a PeerBuf exists only then), which
        // `cuMemcpyAsync` needs for device pointers of two devices.
        check(call, unsafe {
            match how {
                PeerCopy::Peer => sys::cuMemcpyPeerAsync(dp, d.ctx, sp, src.alloc.ctx, n, self.s),
                PeerCopy::Unified => sys::cuMemcpyAsync(dp, sp, n, self.s),
            }
        })
    }

    /// `cuMemcpyPeerAsync` the other way: copy `n` bytes of the peer buffer
    /// `src` (from `src_off`) into `dst` at `dst_off` on this device.
    pub fn copy_from_peer(
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
        check(call, unsafe {
            match how {
                PeerCopy::Peer => sys::cuMemcpyPeerAsync(dp, dst.alloc.ctx, sp, s.ctx, n, self.s),
                PeerCopy::Unified => sys::cuMemcpyAsync(dp, sp, n, self.s),
            }
        })
    }

    /// `cuMemsetD8Async` of bytes `off..off + n` to `byte`.
    pub fn memset(&self, buf: &DevBuf<'id>, off: usize, n: usize, byte: u8) -> CuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let p = buf.ptr_at("cuMemsetD8Async", off, n)?;
        // SAFETY: bounds checked, a stream of the same context.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(p, byte, n, self.s)
        })
    }

    /// Start capturing this stream's work into a graph (thread-local mode:
    /// other threads' CUDA calls are unaffected).
    pub fn begin_capture(&self) -> CuResult<()> {
        self.begin_capture_mode(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    }

    /// Start a capture that streams of other threads and other devices join
    /// (they wait on an event recorded here during the capture); relaxed
    /// mode, so those threads' own driver calls are not refused.
    pub fn begin_joint_capture(&self) -> CuResult<()> {
        self.begin_capture_mode(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
    }

    fn begin_capture_mode(&self, mode: sys::CUstreamCaptureMode) -> CuResult<()> {
        // SAFETY: valid stream of the current context; `mode` is a valid
        // enumerator.
        check("cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(self.s, mode)
        })
    }

    /// End the capture and instantiate the graph.
    pub fn end_capture(&self) -> CuResult<Graph<'id>> {
        let mut graph = std::ptr::null_mut();
        // SAFETY: valid stream in capture mode; valid out-pointer.
        check("cuStreamEndCapture", unsafe {
            sys::cuStreamEndCapture(self.s, &mut graph)
        })?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: graph was just captured; valid out-pointer.
        let r = check("cuGraphInstantiate", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
        });
        if let Err(e) = r {
            // SAFETY: the graph is ours and not instantiated.
            let _ = unsafe { sys::cuGraphDestroy(graph) };
            return Err(e);
        }
        Ok(Graph {
            graph,
            exec,
            _brand: PhantomData,
            _thread: PhantomData,
        })
    }

    /// Launch a graph of the same context on this stream.
    pub fn launch_graph(&self, g: &Graph<'id>) -> CuResult<()> {
        // SAFETY: graph and stream belong to the same context (same brand).
        check("cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(g.exec, self.s)
        })
    }
}

/// The buffers of an NCCL call (offsets and sizes in bytes).
pub struct NcclOperands<'a, 'id> {
    pub send: (&'a DevBuf<'id>, usize),
    pub recv: (&'a DevBuf<'id>, usize),
    pub send_bytes: usize,
    pub recv_bytes: usize,
}

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

use super::CudaError;

impl<'id> Stream<'id> {
    /// NCCL's `collective` of `count` (NCCL's count) elements of NCCL type
    /// `dtype` with op `op` on this stream, on checked buffers. The
    /// communicator was created on this thread with this context current.
    #[allow(clippy::too_many_arguments)]
    pub fn nccl_collective(
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
