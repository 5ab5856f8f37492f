//! Device memory the engine did not allocate (a torch tensor, anything
//! speaking `__cuda_array_interface__` or DLPack): [`DeviceSpan`], made
//! only by its `unsafe` constructor, and the copies between it and an
//! engine buffer issued on the caller's [`RawStream`], so that they are
//! ordered with the caller's own work on that stream (no host wait).

use super::memory::PeerBuf;
use super::order::{DoneEvent, Primary, RawStream};
use super::result;
use super::{err, CuResult};
use cudarc::driver::sys;
use std::sync::Arc;

/// A range of device memory of another library's, on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSpan {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    device: usize,
}

impl DeviceSpan {
    /// `bytes` bytes of device memory at `ptr` on GPU `device`.
    ///
    /// Checked with the driver (`cuPointerGetAttribute`): a non-empty range
    /// must lie inside one device allocation of GPU `device` (a host
    /// address, a made-up number, memory of another GPU or a range that runs
    /// past its allocation is refused with the reason).
    ///
    /// # Safety
    /// The memory stays allocated, and is not reused for anything else,
    /// until every copy issued from or into this span on a stream has
    /// completed (a torch tensor kept alive by the caller, or freed only
    /// through torch's allocator on the stream the copies ran on); no work
    /// that is not ordered with those copies writes it meanwhile.
    pub unsafe fn from_raw(ptr: u64, bytes: usize, device: usize) -> CuResult<DeviceSpan> {
        let span = DeviceSpan { ptr, bytes, device };
        if bytes == 0 {
            return Ok(span);
        }
        super::driver()?;
        let primary = Primary::retain(device)?;
        let call = "cuPointerGetAttribute";
        let (start, size, ordinal) = primary.with(call, || result::pointer_range(ptr))?;
        if ordinal != device as i64 {
            return Err(err(
                call,
                format!("the memory at {ptr:#x} belongs to GPU {ordinal}, not GPU {device}"),
            ));
        }
        let end = ptr.checked_add(bytes as u64);
        if ptr < start || end.is_none_or(|e| e > start.saturating_add(size)) {
            return Err(err(
                call,
                format!(
                    "{bytes} bytes at {ptr:#x} run past their allocation ({size} bytes at {start:#x})"
                ),
            ));
        }
        Ok(span)
    }

    /// A span that only the tests' checks look at (never copied).
    #[cfg(test)]
    pub(crate) fn unchecked_for_tests(ptr: u64, bytes: usize, device: usize) -> DeviceSpan {
        DeviceSpan { ptr, bytes, device }
    }

    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The GPU it is on.
    pub fn device(&self) -> usize {
        self.device
    }

    /// Bytes `range` of this span (a part of checked memory is checked
    /// memory, under the same contract); `None` when the range does not lie
    /// inside it.
    pub fn sub(&self, range: std::ops::Range<usize>) -> Option<DeviceSpan> {
        if range.start > range.end || range.end > self.bytes {
            return None;
        }
        Some(DeviceSpan {
            ptr: self.ptr + range.start as u64,
            bytes: range.end - range.start,
            device: self.device,
        })
    }
}

/// The device memory and streams of one call, as another runtime
/// described them (see [`device_args`]).
#[derive(Debug)]
pub struct DeviceArgs {
    /// Rank r's input (empty for an in-place call).
    pub sends: Vec<DeviceSpan>,
    /// Rank r's output (in place: its buffer).
    pub recvs: Vec<DeviceSpan>,
    /// Rank r's stream.
    pub streams: Arc<Vec<RawStream>>,
}

/// One call's spans (`(address, bytes, device)` per rank) and streams
/// (`(handle, device)` per rank) from another runtime, checked one by one
/// ([`DeviceSpan::from_raw`], [`RawStream::from_raw`]); a refusal is an
/// [`Error::BadArgument`](crate::Error::BadArgument) naming the rank.
///
/// # Safety
/// Every span keeps [`DeviceSpan::from_raw`]'s contract and every stream
/// [`RawStream::from_raw`]'s (memory and streams that a live tensor of the
/// caller's and its runtime own, kept alive as those contracts say).
pub unsafe fn device_args(
    sends: &[(u64, usize, usize)],
    recvs: &[(u64, usize, usize)],
    streams: &[(usize, usize)],
) -> crate::Result<DeviceArgs> {
    let bad = |r: usize, what: &str, e: super::CudaError| {
        crate::Error::BadArgument(format!("rank {r}: the {what}: {e}"))
    };
    let spans = |list: &[(u64, usize, usize)], what: &str| {
        list.iter()
            .enumerate()
            .map(|(r, &(p, n, d))| {
                // SAFETY: the caller's contract, span by span.
                unsafe { DeviceSpan::from_raw(p, n, d) }.map_err(|e| bad(r, what, e))
            })
            .collect::<crate::Result<Vec<_>>>()
    };
    let (sends, recvs) = (spans(sends, "input")?, spans(recvs, "output")?);
    let streams = streams
        .iter()
        .enumerate()
        .map(|(r, &(s, d))| {
            // SAFETY: the caller's contract, stream by stream.
            unsafe { RawStream::from_raw(s as *mut std::ffi::c_void, d) }
                .map_err(|e| bad(r, "stream", e))
        })
        .collect::<crate::Result<Vec<_>>>()?;
    Ok(DeviceArgs {
        sends,
        recvs,
        streams: Arc::new(streams),
    })
}

impl RawStream {
    fn same_device(&self, call: &'static str, span: &DeviceSpan) -> CuResult<()> {
        if span.device != self.primary.ordinal {
            return Err(err(
                call,
                format!(
                    "memory of GPU {} copied on a stream of GPU {}",
                    span.device, self.primary.ordinal
                ),
            ));
        }
        Ok(())
    }

    /// Copy all of `src` into engine buffer `dst` from byte `dst_off`, on
    /// this stream (`cuMemcpyAsync`; returns once queued). The engine
    /// buffer must be on the stream's device: the engine frees it only after
    /// waiting for an event recorded behind the copy
    /// ([`RawStream::record_done`]).
    pub(crate) fn copy_into_engine(
        &self,
        dst: &PeerBuf,
        dst_off: usize,
        src: &DeviceSpan,
    ) -> CuResult<()> {
        let call = "cuMemcpyAsync";
        self.same_device(call, src)?;
        if src.bytes == 0 {
            return Ok(());
        }
        let (keep, dp) = dst.range(call, dst_off, src.bytes)?;
        if keep.ordinal != self.primary.ordinal {
            return Err(err(call, "an engine buffer of another GPU"));
        }
        let (s, sp, n) = (self.s, src.ptr, src.bytes);
        self.primary.with(call, || {
            // SAFETY: the destination lies in a live engine allocation of
            // this stream's device (checked; `keep` holds it during the call,
            // the engine waits for the copy before it frees it); the source
            // lies in a live allocation of the same device (DeviceSpan's
            // contract, its range checked at construction); the stream is
            // live (RawStream's contract) and its context is pushed.
            unsafe { result::memcpy_async(dp, sp, n, s) }
        })
    }

    /// Copy engine buffer `src` from byte `src_off` into all of `dst`, on
    /// this stream (as [`RawStream::copy_into_engine`], the other way).
    pub(crate) fn copy_from_engine(
        &self,
        dst: &DeviceSpan,
        src: &PeerBuf,
        src_off: usize,
    ) -> CuResult<()> {
        let call = "cuMemcpyAsync";
        self.same_device(call, dst)?;
        if dst.bytes == 0 {
            return Ok(());
        }
        let (keep, sp) = src.range(call, src_off, dst.bytes)?;
        if keep.ordinal != self.primary.ordinal {
            return Err(err(call, "an engine buffer of another GPU"));
        }
        let (s, dp, n) = (self.s, dst.ptr, dst.bytes);
        self.primary.with(call, || {
            // SAFETY: as in copy_into_engine, the roles swapped.
            unsafe { result::memcpy_async(dp, sp, n, s) }
        })
    }

    /// Wait on this thread until the work queued on this stream so far has
    /// run (`cuStreamSynchronize`: this stream only, not the device).
    pub fn synchronize(&self) -> CuResult<()> {
        let s = self.s;
        self.primary.with("cuStreamSynchronize", || {
            // SAFETY: a live stream (RawStream's contract) with its
            // context pushed.
            unsafe { result::stream_synchronize(s) }
        })
    }

    /// Record a completion event on this stream: it fires once the work
    /// queued on the stream so far has run. The event must be of the
    /// stream's device.
    pub(crate) fn record_done(&self, ev: &DoneEvent) -> CuResult<()> {
        if ev.primary.ordinal != self.primary.ordinal {
            return Err(err(
                "cuEventRecord",
                format!(
                    "an event of GPU {} on a stream of GPU {}",
                    ev.primary.ordinal, self.primary.ordinal
                ),
            ));
        }
        let (e, s) = (ev.ev, self.s);
        self.primary.with("cuEventRecord", || {
            // SAFETY: a live event and a live stream (RawStream's contract)
            // of the same primary context, which is pushed.
            unsafe { result::event_record(e, s) }
        })
    }
}

impl DoneEvent {
    /// A completion event of GPU `device`, made from any thread.
    pub(crate) fn on_device(device: usize) -> CuResult<DoneEvent> {
        super::driver()?;
        let primary = Primary::retain(device)?;
        let ev = primary.with("cuEventCreate", || {
            result::event_create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
        })?;
        Ok(DoneEvent { ev, primary })
    }
}
