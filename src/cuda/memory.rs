//! Device memory (in bytes), the tokens other ranks use to reach it, and
//! host-mapped control words. Across processes, a buffer is exported as a
//! CUDA IPC handle ([`DevBuf::ipc_handle`]) and opened in the peer process
//! as a [`PeerBuf`] that keeps the mapping alive ([`Ctx::open_ipc`]).

use super::driver::{Brand, Ctx, NotSend};
use super::result;
use super::{err, CuResult};
use cudarc::driver::sys;
use std::sync::{Arc, Weak};

pub(crate) struct Alloc {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) bytes: usize,
    pub(crate) ctx: sys::CUcontext,
    pub(crate) ordinal: usize,
    /// How the memory goes at the end.
    release: Release,
    /// Whether the allocation is an NCCL symmetric window now (NCCL's host
    /// calls must never see a buffer registered so twice).
    #[cfg(feature = "nccl")]
    window: std::sync::atomic::AtomicBool,
}

/// How an allocation's memory goes when its last token does.
enum Release {
    /// `cuMemFree`: the driver's allocation ([`Ctx::alloc`]).
    Free,
    /// `cuIpcCloseMemHandle`: a mapping of another process's allocation
    /// ([`Ctx::open_ipc`]), closed, not freed.
    IpcClose,
    /// `ncclMemFree`: NCCL's allocation ([`Ctx::alloc_nccl`]), dropped once.
    #[cfg(feature = "nccl")]
    Nccl(Option<super::nccl::NcclMem>),
}
// SAFETY: the allocation is a device address plus its context; freeing it
// from another thread pushes that context first (see Drop).
unsafe impl Send for Alloc {}
// SAFETY: shared access only reads the address.
unsafe impl Sync for Alloc {}

impl Drop for Alloc {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        // SAFETY: the context is still retained (allocations are dropped
        // inside the owning `with_device` closure by the backend, after every
        // rank drained its streams); push it in case another context is
        // current, free (or, for an IPC mapping, close) the allocation made
        // or opened in it once, pop what was pushed. Errors are ignored.
        unsafe {
            let _ = result::ctx_push(self.ctx);
            let _ = match &mut self.release {
                Release::Free => result::mem_free(self.ptr),
                Release::IpcClose => result::ipc_close_mem_handle(self.ptr),
                #[cfg(feature = "nccl")]
                Release::Nccl(mem) => {
                    drop(mem.take());
                    Ok(())
                }
            };
            let _ = result::ctx_pop();
        }
    }
}

/// Device memory of `len` bytes on the device branded `'id`.
pub struct DevBuf<'id> {
    pub(crate) alloc: Arc<Alloc>,
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl<'id> Ctx<'id> {
    /// Allocate `bytes` bytes of device memory (uninitialised).
    pub fn alloc(&self, bytes: usize) -> CuResult<DevBuf<'id>> {
        let mut ptr = 0;
        if bytes > 0 {
            // The current context is self.ctx.
            ptr = result::mem_alloc(bytes)?;
        }
        let (b, t) = self.brand();
        Ok(DevBuf {
            alloc: Arc::new(Alloc {
                ptr,
                bytes,
                ctx: self.ctx,
                ordinal: self.ordinal,
                release: Release::Free,
                #[cfg(feature = "nccl")]
                window: Default::default(),
            }),
            _brand: b,
            _thread: t,
        })
    }

    /// `bytes` (at least 1) from NCCL's allocator (`ncclMemAlloc`) on this
    /// context's device, the memory an NCCL symmetric window needs; freed
    /// with `ncclMemFree` when the last token goes (the backend drains every
    /// rank first).
    #[cfg(feature = "nccl")]
    pub(crate) fn alloc_nccl(
        &self,
        lib: &super::nccl::Nccl,
        bytes: usize,
    ) -> Result<DevBuf<'id>, super::nccl::NcclError> {
        // The current context is self.ctx: ncclMemAlloc allocates on its
        // device.
        let mem = lib.mem_alloc(bytes)?;
        let (b, t) = self.brand();
        Ok(DevBuf {
            alloc: Arc::new(Alloc {
                ptr: mem.ptr(),
                bytes: mem.len(),
                ctx: self.ctx,
                ordinal: self.ordinal,
                release: Release::Nccl(Some(mem)),
                window: Default::default(),
            }),
            _brand: b,
            _thread: t,
        })
    }

    /// `len` bytes of pinned host memory mapped into this device's address
    /// space, zeroed.
    pub(crate) fn host_mapped(&self, bytes: usize) -> CuResult<HostMapped> {
        let bytes = bytes.max(8).next_multiple_of(8);
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // The current context is self.ctx.
        let host = result::mem_host_alloc(bytes, flags)?;
        // Owned from here: freed on drop if the next call fails.
        let mut m = HostMapped {
            host: host.cast(),
            words: bytes / 8,
            dev: 0,
            ctx: self.ctx,
        };
        // SAFETY: `host` was just allocated with DEVICEMAP.
        m.dev = unsafe { result::mem_host_device_pointer(host) }?;
        for i in 0..m.words {
            m.store_u64(i, 0);
        }
        Ok(m)
    }
}

impl<'id> DevBuf<'id> {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.alloc.bytes
    }

    /// The device address of bytes `off..off + n`, checked.
    pub(crate) fn ptr_at(
        &self,
        call: &'static str,
        off: usize,
        n: usize,
    ) -> CuResult<sys::CUdeviceptr> {
        if off.checked_add(n).is_none_or(|end| end > self.alloc.bytes) {
            return Err(err(
                call,
                format!(
                    "bytes {off}..{} outside a buffer of {}",
                    off.saturating_add(n),
                    self.alloc.bytes
                ),
            ));
        }
        Ok(self.alloc.ptr + off as u64)
    }

    /// A token other ranks use to reach this buffer.
    pub(crate) fn export(&self) -> PeerBuf {
        PeerBuf {
            alloc: Arc::downgrade(&self.alloc),
            bytes: self.alloc.bytes,
            ordinal: self.alloc.ordinal,
            keep: None,
        }
    }

    /// The CUDA IPC handle of this buffer (`cuIpcGetMemHandle`), for
    /// another process to open with [`Ctx::open_ipc`]; `None` for an empty
    /// buffer (there is no allocation to share).
    pub(crate) fn ipc_handle(&self) -> CuResult<Option<IpcMemHandle>> {
        if self.alloc.bytes == 0 {
            return Ok(None);
        }
        // SAFETY: `ptr` is the base of a live cuMemAlloc allocation of this
        // thread's current context.
        let h = unsafe { result::ipc_get_mem_handle(self.alloc.ptr) }?;
        Ok(Some(IpcMemHandle(h)))
    }

    /// Host-to-device copy into bytes `off..off + data.len()` that returns
    /// once the bytes are in device memory. The caller has drained the
    /// streams that use this buffer.
    ///
    /// `cuMemcpyHtoD` from pageable memory returns once the data is staged
    /// for DMA, and "the DMA to final destination may not have completed"
    /// (the driver API's synchronization rules). The copy goes through the
    /// legacy default stream, and the engine's streams are non-blocking:
    /// nothing orders their work after that DMA, not even in this context.
    /// So the copy is followed by a synchronize of the default stream.
    /// Found twice: two rank processes on one H200, whose `oneshot:fused`
    /// read the tail of a peer's input before it landed
    /// (`results/2026-12-01-h200x1-s10/2026-12-01-h200x1-s10.log.xz`), and
    /// two rank threads of one process on one H100, 26880 of 524288
    /// elements wrong at 1 MiB (`results/2026-12-06-h200x1-host-ordered/`).
    pub fn write(&mut self, off: usize, data: &[u8]) -> CuResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let p = self.ptr_at("cuMemcpyHtoD", off, data.len())?;
        // SAFETY: p..p+len is inside this allocation (checked), data is a
        // valid host slice of that many bytes.
        unsafe { result::memcpy_htod(p, data) }?;
        // SAFETY: the null stream is a valid stream of the current context
        // (the one the copy above was issued to).
        unsafe { result::stream_synchronize(std::ptr::null_mut()) }
    }

    /// Synchronous device-to-host copy of bytes `off..off + out.len()`.
    /// Bytes carry no validity invariant, so any device content is fine.
    pub fn read(&self, off: usize, out: &mut [u8]) -> CuResult<()> {
        if out.is_empty() {
            return Ok(());
        }
        let p = self.ptr_at("cuMemcpyDtoH", off, out.len())?;
        // SAFETY: bounds checked; `out` is a valid, exclusively borrowed host
        // byte slice.
        unsafe { result::memcpy_dtoh(out, p) }
    }
}

/// The 64 bytes that name a device allocation to another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcMemHandle(pub [u8; 64]);

impl<'id> Ctx<'id> {
    /// Open another process's buffer of `bytes` bytes (on device
    /// `ordinal`) from its IPC handle, mapped into this context
    /// (`cuIpcOpenMemHandle`, peer access enabled lazily), or an empty
    /// token for `None`. The returned token keeps the mapping open; it is
    /// closed when the last clone is dropped (the backend drains every rank
    /// of the job first).
    pub(crate) fn open_ipc(
        &self,
        handle: Option<&IpcMemHandle>,
        bytes: usize,
        ordinal: usize,
    ) -> CuResult<PeerBuf> {
        let Some(h) = handle else {
            let a = Arc::new(Alloc {
                ptr: 0,
                bytes: 0,
                ctx: self.ctx,
                ordinal,
                release: Release::Free,
                #[cfg(feature = "nccl")]
                window: Default::default(),
            });
            return Ok(PeerBuf {
                alloc: Arc::downgrade(&a),
                bytes: 0,
                ordinal,
                keep: Some(a),
            });
        };
        // A context is current on this thread (self.ctx).
        let ptr = result::ipc_open_mem_handle(&h.0)?;
        let a = Arc::new(Alloc {
            ptr,
            bytes,
            ctx: self.ctx,
            ordinal,
            release: Release::IpcClose,
            #[cfg(feature = "nccl")]
            window: Default::default(),
        });
        Ok(PeerBuf {
            alloc: Arc::downgrade(&a),
            bytes,
            ordinal,
            keep: Some(a),
        })
    }
}

/// Another rank's buffer: the destination of a peer copy, the source of a
/// pull, or an operand a kernel reads through peer access. A token of a
/// buffer in this process refers to it weakly (its owner frees it); a token
/// of another process's buffer, opened through CUDA IPC, holds the mapping
/// (`keep`) until the last clone is dropped.
#[derive(Clone)]
pub struct PeerBuf {
    alloc: Weak<Alloc>,
    bytes: usize,
    ordinal: usize,
    keep: Option<Arc<Alloc>>,
}

impl std::fmt::Debug for PeerBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PeerBuf(device {}, {} bytes{})",
            self.ordinal,
            self.bytes,
            if self.keep.is_some() { ", IPC" } else { "" }
        )
    }
}

impl PeerBuf {
    /// The live allocation and the device address of bytes `off..off + n`,
    /// or an error when the owner freed it or the range is outside it. The
    /// returned `Arc` keeps the memory alive while held.
    pub(crate) fn range(
        &self,
        call: &'static str,
        off: usize,
        n: usize,
    ) -> CuResult<(Arc<Alloc>, sys::CUdeviceptr)> {
        let a = self
            .alloc
            .upgrade()
            .ok_or_else(|| err(call, "the peer's buffer was freed by its owner"))?;
        if off.checked_add(n).is_none_or(|e| e > a.bytes) {
            return Err(err(
                call,
                format!(
                    "peer bytes {off}..{} outside a buffer of {}",
                    off.saturating_add(n),
                    a.bytes
                ),
            ));
        }
        let p = a.ptr + off as u64;
        Ok((a, p))
    }
}

/// Pinned host memory mapped into a device's address space: 64-bit words
/// that the host reads and writes with volatile accesses while kernels read
/// and write them over PCIe (the exchange kernel's abort word and status).
/// Shareable between threads: every access is a whole, aligned, volatile
/// word.
pub struct HostMapped {
    host: *mut u64,
    words: usize,
    dev: sys::CUdeviceptr,
    ctx: sys::CUcontext,
}
// SAFETY: the memory is process-wide pinned host memory; all accesses are
// volatile word accesses (see the methods), and freeing pushes its context.
unsafe impl Send for HostMapped {}
// SAFETY: as above; concurrent volatile word accesses to pinned memory are
// what it is for (the device accesses it concurrently too).
unsafe impl Sync for HostMapped {}

impl HostMapped {
    /// The device address of word `i`, checked.
    pub(crate) fn device_ptr(&self, i: usize) -> CuResult<sys::CUdeviceptr> {
        if i >= self.words {
            return Err(err("host-mapped", format!("word {i} of {}", self.words)));
        }
        Ok(self.dev + 8 * i as u64)
    }

    /// Its size in 8-byte words.
    pub fn words(&self) -> usize {
        self.words
    }

    /// Volatile read of word `i` (0 out of range).
    pub(crate) fn load_u64(&self, i: usize) -> u64 {
        if i >= self.words {
            return 0;
        }
        // SAFETY: in bounds of a live pinned allocation, 8-byte aligned.
        unsafe { std::ptr::read_volatile(self.host.add(i)) }
    }

    /// Volatile write of word `i` (ignored when out of range).
    pub(crate) fn store_u64(&self, i: usize, v: u64) {
        if i < self.words {
            // SAFETY: in bounds of a live pinned allocation, 8-byte aligned.
            unsafe { std::ptr::write_volatile(self.host.add(i), v) }
        }
    }
}

impl HostMapped {
    /// Volatile read of the 32-bit word at byte `4 * i` (0 out of range).
    pub(crate) fn load_u32(&self, i: usize) -> u32 {
        if i >= 2 * self.words {
            return 0;
        }
        // SAFETY: in bounds of a live pinned allocation, 4-byte aligned.
        unsafe { std::ptr::read_volatile(self.host.cast::<u32>().add(i)) }
    }

    /// Volatile write of the 32-bit word at byte `4 * i` (ignored out of
    /// range).
    pub(crate) fn store_u32(&self, i: usize, v: u32) {
        if i < 2 * self.words {
            // SAFETY: in bounds of a live pinned allocation, 4-byte aligned.
            unsafe { std::ptr::write_volatile(self.host.cast::<u32>().add(i), v) }
        }
    }
}

impl Drop for HostMapped {
    fn drop(&mut self) {
        // SAFETY: the pointer came from cuMemHostAlloc and is freed once; the
        // context that allocated it is pushed around the free. Errors ignored.
        unsafe {
            let _ = result::ctx_push(self.ctx);
            let _ = result::mem_free_host(self.host.cast());
            let _ = result::ctx_pop();
        }
    }
}

/// A buffer registered with an NCCL communicator ([`DevBuf::nccl_register`]):
/// it keeps the allocation, so the memory outlives the registration, which
/// [`NcclRegistration::deregister`] undoes (or the communicator's end).
#[cfg(feature = "nccl")]
pub(crate) struct NcclRegistration {
    reg: super::nccl::Registered,
    alloc: Arc<Alloc>,
}

#[cfg(feature = "nccl")]
impl<'id> DevBuf<'id> {
    /// Registers the whole buffer with `comm` (`kind`: NCCL's buffer
    /// registration or a symmetric window). A window is collective: every
    /// rank of `comm` must register its buffer likewise (NCCL waits until
    /// they all have), on memory from [`Ctx::alloc_nccl`] (else NCCL refuses
    /// it); a buffer that is a window already is refused.
    pub(crate) fn nccl_register(
        &self,
        comm: &super::nccl::Comm,
        kind: super::nccl::Registration,
    ) -> Result<NcclRegistration, super::nccl::NcclError> {
        use std::sync::atomic::Ordering;
        let window = kind == super::nccl::Registration::Symmetric;
        if window && self.alloc.window.swap(true, Ordering::AcqRel) {
            return Err(super::nccl::NcclError::Invalid {
                call: kind.call(),
                reason: "the buffer is a symmetric window already".into(),
            });
        }
        // SAFETY: the range is this one live allocation, on the device of
        // the communicator made on this rank's thread (a `DevBuf` never
        // leaves its device's thread), and `NcclRegistration` keeps it
        // allocated until the registration is undone; a window is made at
        // most once per buffer (the flag above).
        let r = unsafe { comm.register(kind, self.alloc.ptr, self.alloc.bytes) };
        match r {
            Ok(reg) => Ok(NcclRegistration {
                reg,
                alloc: self.alloc.clone(),
            }),
            Err(e) => {
                if window {
                    self.alloc.window.store(false, Ordering::Release);
                }
                Err(e)
            }
        }
    }
}

#[cfg(feature = "nccl")]
impl NcclRegistration {
    /// How it was registered.
    pub(crate) fn kind(&self) -> super::nccl::Registration {
        self.reg.kind()
    }

    /// Undoes the registration with the communicator that made it (another
    /// is refused). The caller drained the streams of the NCCL calls on the
    /// buffer, as before freeing it.
    pub(crate) fn deregister(self, comm: &super::nccl::Comm) -> Result<(), super::nccl::NcclError> {
        let window = self.reg.kind() == super::nccl::Registration::Symmetric;
        // SAFETY: no NCCL call on the buffer still runs (this function's
        // contract with its caller, the one a buffer's free has too); a
        // registration of another communicator is refused by `deregister`.
        let r = unsafe { comm.deregister(self.reg) };
        if window && r.is_ok() {
            self.alloc
                .window
                .store(false, std::sync::atomic::Ordering::Release);
        }
        r
    }
}
