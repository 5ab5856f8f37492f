//! Stream-ordered calls at the driver level: the completion event a caller
//! can hold on any thread ([`DoneEvent`]), and another library's stream
//! ([`RawStream`], the one `unsafe` constructor of the feature).
//!
//! Both are plain handles that cross threads, unlike the branded handles of
//! a rank thread. Each holds a reference on its device's *primary* context
//! (`cuDevicePrimaryCtxRetain`, released on drop), so the context outlives
//! it however long the caller keeps it, and each pushes that context around
//! its own driver calls, so they work from a thread that has no context
//! bound (the caller's).

use super::driver::Ctx;
use super::memory::HostMapped;
use super::result::{self, Device};
use super::stream::{Event, Stream};
use super::{err, CuResult, CudaError};
use crate::sync::Backoff;
use cudarc::driver::sys;
use std::time::{Duration, Instant};

/// A retained primary context; released on drop.
pub(super) struct Primary {
    pub(super) ctx: sys::CUcontext,
    dev: Device,
    pub(super) ordinal: usize,
}

impl Primary {
    pub(super) fn retain(ordinal: usize) -> CuResult<Primary> {
        let dev = result::device_get(ordinal)?;
        let ctx = result::primary_ctx_retain(dev)?;
        Ok(Primary { ctx, dev, ordinal })
    }

    /// Run `f` with this context current on the calling thread (pushed,
    /// then popped: the thread's own binding is restored).
    pub(super) fn with<R>(
        &self,
        call: &'static str,
        f: impl FnOnce() -> CuResult<R>,
    ) -> CuResult<R> {
        // SAFETY: the context is retained by `self`, so it is alive until
        // the pop below.
        unsafe { result::ctx_push(self.ctx) }.map_err(|e| CudaError { call, ..e })?;
        let r = f();
        // SAFETY: pops exactly the context pushed above.
        let _ = unsafe { result::ctx_pop() };
        r
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `Primary::retain`; errors ignored.
        let _ = unsafe { result::primary_ctx_release(self.dev) };
    }
}

/// The completion of a stream-ordered call on one rank: an event recorded
/// after the call's last op. Any thread may query it, wait for it with a
/// timeout, or make a stream wait for it; it is never re-recorded while
/// anyone but its pool holds it (the backend reuses an event only once the
/// caller has dropped every clone of its `Arc`).
pub(crate) struct DoneEvent {
    pub(super) ev: sys::CUevent,
    // Declared after `ev`: dropped (released) after the event is destroyed.
    pub(super) primary: Primary,
}

// SAFETY: an event handle may be queried, waited on and destroyed from any
// thread; every call made through it pushes its retained context first.
unsafe impl Send for DoneEvent {}
// SAFETY: as above; `&DoneEvent` only exposes those thread-safe calls.
unsafe impl Sync for DoneEvent {}

impl std::fmt::Debug for DoneEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DoneEvent(device {})", self.primary.ordinal)
    }
}

impl Drop for DoneEvent {
    fn drop(&mut self) {
        // Destroying an event with pending waits is allowed (the driver keeps
        // what it needs). Errors ignored.
        let ev = self.ev;
        let _ = self.primary.with("cuEventDestroy", || {
            // SAFETY: the event is ours and destroyed once, in its context.
            let _ = unsafe { result::event_destroy(ev) };
            Ok(())
        });
    }
}

impl<'id> Ctx<'id> {
    /// A completion event of this device (no timing: cheapest to record).
    pub(crate) fn done_event(&self) -> CuResult<DoneEvent> {
        let primary = Primary::retain(self.ordinal)?;
        // This thread's current context is the device's primary context
        // (`with_device` binds it).
        let ev = result::event_create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        Ok(DoneEvent { ev, primary })
    }
}

impl DoneEvent {
    /// The device the event belongs to.
    pub fn device(&self) -> usize {
        self.primary.ordinal
    }

    /// Whether the work before the event's last record has completed
    /// (`cuEventQuery`; never blocks). An event never recorded counts as
    /// complete.
    pub fn query(&self) -> CuResult<bool> {
        let ev = self.ev;
        self.primary.with("cuEventQuery", || {
            // SAFETY: a live event of the pushed context.
            unsafe { result::event_query(ev) }
        })
    }

    /// Wait until [`DoneEvent::query`] says complete, at most `limit`
    /// (spinning briefly, then napping): `Ok(true)` once complete,
    /// `Ok(false)` when it was not complete within `limit`, an error when
    /// the driver failed.
    pub fn wait_for(&self, limit: Duration) -> CuResult<bool> {
        let start = Instant::now();
        let mut pause = Backoff::new(200, 400, Duration::from_micros(50));
        loop {
            if self.query()? {
                return Ok(true);
            }
            if start.elapsed() > limit {
                return Ok(false);
            }
            pause.snooze();
        }
    }
}

impl<'id> Stream<'id> {
    /// Record a completion event on this stream. `ctx` is this stream's
    /// context: the event must belong to the same device.
    pub(crate) fn record_done(&self, ctx: &Ctx<'id>, ev: &DoneEvent) -> CuResult<()> {
        if ev.primary.ordinal != ctx.ordinal {
            return Err(err(
                "cuEventRecord",
                format!(
                    "an event of device {} on a stream of device {}",
                    ev.primary.ordinal, ctx.ordinal
                ),
            ));
        }
        // SAFETY: a live event of this stream's context (same primary
        // context of the same device, checked), a live stream.
        unsafe { result::event_record(ev.ev, self.s) }
    }

    /// Stop this stream until the host stores a value `>= value` into the
    /// 32-bit word `i` of the host-mapped block `m`
    /// (`cuStreamWaitValue32`, GEQ): a gate the host opens, so that work
    /// issued behind it starts all at once. Uses no SM while it waits. `m`
    /// must outlive the wait (the caller keeps it until the stream drained).
    pub(crate) fn wait_host_word(&self, m: &HostMapped, i: usize, value: u32) -> CuResult<()> {
        let addr = m.device_ptr(i / 2)? + 4 * (i % 2) as u64;
        // SAFETY: a live stream of the current context; `addr` is a 4-byte
        // aligned device address of live host-mapped memory (checked in
        // bounds), which the caller keeps alive until the wait is over.
        unsafe { result::stream_wait_value32_geq(self.s, addr, value) }
    }

    /// Make this stream wait (on the GPU) for a completion event of any
    /// device.
    pub(crate) fn wait_done(&self, ev: &DoneEvent) -> CuResult<()> {
        // SAFETY: a live stream of the current context and a live event;
        // waiting on another context's event is allowed.
        unsafe { result::stream_wait_event(self.s, ev.ev) }
    }
}

/// A CUDA stream that another library created (a `cudaStream_t` of the
/// runtime API is the same handle), to order a collective after the work
/// queued on it. Made only by the `unsafe` [`RawStream::from_raw`], whose
/// contract is what makes using it from the engine's rank thread sound.
pub struct RawStream {
    pub(super) s: sys::CUstream,
    pub(super) primary: Primary,
}

// SAFETY: a stream handle may be used from any thread with its context
// current; the rank thread has it current (same primary context, checked at
// construction), the caller's calls push it.
unsafe impl Send for RawStream {}
// SAFETY: as above; recording and waiting are thread-safe driver calls.
unsafe impl Sync for RawStream {}

impl std::fmt::Debug for RawStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawStream(device {})", self.primary.ordinal)
    }
}

impl RawStream {
    /// Wrap another library's stream of GPU `device` (its ordinal, as the
    /// driver counts them).
    ///
    /// The legacy default stream (handle 0, or `CU_STREAM_LEGACY`, 1) is
    /// accepted as the legacy default stream of `device`'s primary context
    /// (what torch's default stream is); the per-thread default stream (2)
    /// is refused: it is a different stream on the engine's rank threads.
    ///
    /// # Safety
    /// * `stream` is the legacy default stream or a live stream created in
    ///   `device`'s primary context (what the CUDA runtime uses; checked
    ///   with `cuStreamGetCtx`, but an invalid handle is undefined
    ///   behaviour before any check can run).
    /// * It stays alive (not destroyed) until this `RawStream` is dropped
    ///   *and* the completion event of every call ordered after it has
    ///   fired.
    /// * The work queued on it before an ordered call only touches memory
    ///   the caller owns; the engine's buffers that the call uses are
    ///   written there only before the call (the engine reads them after
    ///   the stream's work) and after its completion.
    pub unsafe fn from_raw(stream: *mut std::ffi::c_void, device: usize) -> CuResult<RawStream> {
        if stream as usize == 2 {
            return Err(err(
                "cuStreamGetCtx",
                "the per-thread default stream cannot order a call (it is another stream on each thread): pass the legacy default stream (0) or a stream created with cuStreamCreate / cudaStreamCreate",
            ));
        }
        super::driver()?;
        let primary = Primary::retain(device)?;
        let s: sys::CUstream = stream.cast();
        if (stream as usize) <= 1 {
            return Ok(RawStream { s, primary });
        }
        // SAFETY: the caller guarantees a live stream.
        let ctx = unsafe { result::stream_get_ctx(s) }?;
        if ctx != primary.ctx {
            return Err(err(
                "cuStreamGetCtx",
                format!("the stream does not belong to device {device}'s primary context"),
            ));
        }
        Ok(RawStream { s, primary })
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> usize {
        self.primary.ordinal
    }

    /// Record `ev` (an event of the rank thread's context `ctx`) on this
    /// stream: the engine's "the caller's work so far is done" marker.
    pub(crate) fn record(&self, ctx: &Ctx<'_>, ev: &Event<'_>) -> CuResult<()> {
        if ctx.ordinal != self.primary.ordinal {
            return Err(err(
                "cuEventRecord",
                format!(
                    "a stream of device {} ordering a call of a rank on device {}",
                    self.primary.ordinal, ctx.ordinal
                ),
            ));
        }
        // SAFETY: `ctx` is current on this thread and is the stream's
        // context (same device's primary context: checked here and at
        // construction), the event belongs to it, the stream is live (the
        // from_raw contract).
        unsafe { result::event_record(ev.handle(), self.s) }
    }

    /// Make this stream wait (on the GPU) for a completion event: the
    /// caller's later work on it runs after the call.
    pub(crate) fn wait_done(&self, ev: &DoneEvent) -> CuResult<()> {
        let (s, e) = (self.s, ev.ev);
        self.primary.with("cuStreamWaitEvent", || {
            // SAFETY: a live stream (the from_raw contract) with its context
            // pushed, a live event.
            unsafe { result::stream_wait_event(s, e) }
        })
    }
}
