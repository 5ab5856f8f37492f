//! The CUDA layer: every `unsafe` line of the crate lives under this module.
//!
//! It wraps the driver API (loaded at run time by cudarc, never linked) in
//! checked functions and RAII handles:
//!
//! * [`with_device`] binds a device's primary context to the calling thread,
//!   once, and hands the closure a [`Ctx<'id>`] whose lifetime `'id` is a
//!   *brand*: every stream, buffer, event and kernel made from it carries the
//!   same `'id`, and the closure is generic over `'id`, so two devices' brands
//!   can never unify. Launching a kernel of device 0 on a buffer of device 1,
//!   or recording device 1's event on device 0's stream, does not compile. The
//!   branded handles are also `!Send`: they stay on the thread that owns the
//!   context.
//! * Other ranks refer to a rank's memory and events only through exported
//!   tokens ([`PeerBuf`], [`RemoteEvent`], [`PeerCtx`]) which can be sent
//!   between threads and are only ever used as the *destination* of a peer
//!   copy or the target of a stream wait. A token holds a weak reference to
//!   its allocation: using it after the owner freed the memory is an error,
//!   not a write into freed memory.
//! * Drop never panics: it ignores driver errors (there is nobody to tell).
//!
//! Lifecycle rule (kept by the CUDA backend): memory is only freed or
//! replaced after every rank has synchronized all of its streams, so no copy
//! issued by a peer can still be writing into it.

#![allow(unsafe_code)]

pub mod nccl;

use cudarc::driver::sys;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A failed driver call: the call and the driver's message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{call}: {message}")]
pub struct CudaError {
    pub call: &'static str,
    pub message: String,
}

pub type CuResult<T> = Result<T, CudaError>;

fn err(call: &'static str, message: impl Into<String>) -> CudaError {
    CudaError {
        call,
        message: message.into(),
    }
}

/// Turn a `CUresult` into a `CuResult`, with the driver's name and text.
fn check(call: &'static str, r: sys::CUresult) -> CuResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let e = cudarc::driver::result::DriverError(r);
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{r:?}"));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(err(call, format!("{name}: {text}")))
}

// ---------------------------------------------------------------------------
// Driver discovery
// ---------------------------------------------------------------------------

/// Facts about one GPU.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_mem: usize,
    pub sms: usize,
    /// Compute capability (major, minor), e.g. (9, 0) for an H200.
    pub cc: (i32, i32),
}

/// Facts about the driver and its GPUs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DriverInfo {
    /// `cuDriverGetVersion`, e.g. 13000.
    pub version: i32,
    pub devices: Vec<DeviceInfo>,
}

/// Load libcuda (if present), `cuInit`, and list the devices. Never panics:
/// with no driver installed this returns an error instead of letting cudarc
/// panic on its first call.
pub fn driver() -> CuResult<&'static DriverInfo> {
    driver_timed().0.as_ref().map_err(Clone::clone)
}

/// Milliseconds the first [`driver`] call took (loading libcuda, `cuInit`,
/// listing devices): part of any program's cold start, NCCL's included.
pub fn driver_init_ms() -> f64 {
    driver_timed().1
}

fn driver_timed() -> &'static (CuResult<DriverInfo>, f64) {
    static INFO: OnceLock<(CuResult<DriverInfo>, f64)> = OnceLock::new();
    INFO.get_or_init(|| {
        let t = std::time::Instant::now();
        let r = load_driver();
        (r, t.elapsed().as_secs_f64() * 1e3)
    })
}

fn load_driver() -> CuResult<DriverInfo> {
    // SAFETY: is_culib_present only tries to dlopen libcuda and closes it.
    if !unsafe { sys::is_culib_present() } {
        return Err(err(
            "dlopen(libcuda.so)",
            "no CUDA driver library found on this machine",
        ));
    }
    // SAFETY: the library is present, so cudarc's loader will not panic; cuInit
    // takes flags 0 and has no other preconditions.
    check("cuInit", unsafe { sys::cuInit(0) })?;
    let mut version = 0;
    // SAFETY: valid out-pointer.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version)
    })?;
    let mut count = 0;
    // SAFETY: valid out-pointer, driver initialised.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    let mut devices = Vec::new();
    for ordinal in 0..count.max(0) as usize {
        let dev = device_handle(ordinal)?;
        let mut name = [0i8; 256];
        // SAFETY: buffer of the stated length; dev is valid.
        check("cuDeviceGetName", unsafe {
            sys::cuDeviceGetName(name.as_mut_ptr().cast(), name.len() as i32, dev)
        })?;
        // SAFETY: the driver NUL-terminates within the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr().cast()) }
            .to_string_lossy()
            .into_owned();
        let mut total = 0usize;
        // SAFETY: valid out-pointer and device.
        check("cuDeviceTotalMem", unsafe {
            sys::cuDeviceTotalMem_v2(&mut total, dev)
        })?;
        let mut sms = 0;
        // SAFETY: valid out-pointer, attribute and device.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(
                &mut sms,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                dev,
            )
        })?;
        let mut cc = (0, 0);
        for (out, attr) in [
            (
                &mut cc.0,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            ),
            (
                &mut cc.1,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            ),
        ] {
            // SAFETY: valid out-pointer, attribute and device.
            check("cuDeviceGetAttribute", unsafe {
                sys::cuDeviceGetAttribute(out, attr, dev)
            })?;
        }
        devices.push(DeviceInfo {
            ordinal,
            name,
            total_mem: total,
            sms: sms.max(1) as usize,
            cc,
        });
    }
    Ok(DriverInfo { version, devices })
}

fn device_handle(ordinal: usize) -> CuResult<sys::CUdevice> {
    let mut dev = 0;
    // SAFETY: valid out-pointer; the driver validates the ordinal.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut dev, ordinal as i32)
    })?;
    Ok(dev)
}

/// Whether device `a` can access device `b`'s memory directly
/// (`cuDeviceCanAccessPeer`). A device can always access itself.
pub fn can_access_peer(a: usize, b: usize) -> CuResult<bool> {
    if a == b {
        return Ok(true);
    }
    driver()?;
    let (da, db) = (device_handle(a)?, device_handle(b)?);
    let mut can = 0;
    // SAFETY: valid out-pointer and device handles.
    check("cuDeviceCanAccessPeer", unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, da, db)
    })?;
    Ok(can != 0)
}

// ---------------------------------------------------------------------------
// Context binding and the brand
// ---------------------------------------------------------------------------

type Brand<'id> = PhantomData<fn(&'id ()) -> &'id ()>;
type NotSend = PhantomData<*const ()>;

/// A device's primary context, bound to the current thread for the lifetime
/// of a [`with_device`] closure. `'id` brands everything made from it.
pub struct Ctx<'id> {
    ordinal: usize,
    ctx: sys::CUcontext,
    sms: usize,
    cc: (i32, i32),
    _brand: Brand<'id>,
    _thread: NotSend,
}

/// Bind device `ordinal`'s primary context to this thread and run `f`.
/// The primary context is retained for the duration and released after.
pub fn with_device<R>(ordinal: usize, f: impl for<'id> FnOnce(Ctx<'id>) -> R) -> CuResult<R> {
    let info = driver()?;
    let (sms, cc) = info
        .devices
        .get(ordinal)
        .map(|d| (d.sms, d.cc))
        .ok_or_else(|| {
            err(
                "cuDeviceGet",
                format!(
                    "device {ordinal} does not exist ({} present)",
                    info.devices.len()
                ),
            )
        })?;
    let dev = device_handle(ordinal)?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointer and device.
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
    })?;
    struct Release(sys::CUdevice);
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: balances the retain above; errors are ignored in Drop.
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.0) };
        }
    }
    let _release = Release(dev);
    // SAFETY: ctx was just retained and stays alive until `_release` drops.
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
    Ok(f(Ctx {
        ordinal,
        ctx,
        sms,
        cc,
        _brand: PhantomData,
        _thread: PhantomData,
    }))
}

/// A rank's context, as other ranks see it (for enabling peer access).
#[derive(Debug, Clone, Copy)]
pub struct PeerCtx {
    ordinal: usize,
    ctx: sys::CUcontext,
}
// SAFETY: a CUcontext handle is a process-wide identifier usable from any thread.
unsafe impl Send for PeerCtx {}
// SAFETY: as above; PeerCtx only exposes the handle to driver calls.
unsafe impl Sync for PeerCtx {}

impl PeerCtx {
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

impl<'id> Ctx<'id> {
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Multiprocessor count of this device.
    pub fn sms(&self) -> usize {
        self.sms
    }

    pub fn export(&self) -> PeerCtx {
        PeerCtx {
            ordinal: self.ordinal,
            ctx: self.ctx,
        }
    }

    /// Enable direct access from this context to `peer`'s memory
    /// (`cuCtxEnablePeerAccess`). Same device: nothing to do. Already
    /// enabled: fine. Returns an error when the devices cannot access each
    /// other, so a peer copy never silently goes through host memory.
    pub fn enable_peer_access(&self, peer: &PeerCtx) -> CuResult<()> {
        if peer.ordinal == self.ordinal {
            return Ok(());
        }
        if !can_access_peer(self.ordinal, peer.ordinal)? {
            return Err(err(
                "cuDeviceCanAccessPeer",
                format!(
                    "device {} cannot access device {} directly",
                    self.ordinal, peer.ordinal
                ),
            ));
        }
        // SAFETY: this thread's current context is self.ctx; peer.ctx is a
        // retained primary context of another device.
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer.ctx, 0) };
        if r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        check("cuCtxEnablePeerAccess", r)
    }

    /// A non-blocking stream of this context.
    pub fn stream(&self) -> CuResult<Stream<'id>> {
        let mut s = std::ptr::null_mut();
        // SAFETY: valid out-pointer; current context is self.ctx.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Stream {
            s,
            _brand: PhantomData,
            _thread: PhantomData,
        })
    }

    /// An event without timing (cheapest to record and wait on).
    pub fn event(&self) -> CuResult<Event<'id>> {
        let mut e = std::ptr::null_mut();
        // SAFETY: valid out-pointer; current context is self.ctx.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        })?;
        Ok(Event {
            token: Arc::new(EventToken(e)),
            _brand: PhantomData,
            _thread: PhantomData,
        })
    }

    /// Allocate `len` elements of `T` (uninitialised device memory).
    pub fn alloc<T: Copy>(&self, len: usize) -> CuResult<DevBuf<'id, T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| err("cuMemAlloc", "size overflows"))?;
        let mut ptr = 0;
        if bytes > 0 {
            // SAFETY: valid out-pointer; current context is self.ctx.
            check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) })?;
        }
        Ok(DevBuf {
            alloc: Arc::new(Alloc {
                ptr,
                bytes,
                ctx: self.ctx,
                ordinal: self.ordinal,
            }),
            len,
            _t: PhantomData,
            _brand: PhantomData,
            _thread: PhantomData,
        })
    }

    /// Kernel `name` of `module` on this device, from a module loaded once
    /// per device and kept for the life of the process. On a GPU of the
    /// architecture the module was assembled for ahead of time, the cubin is
    /// loaded (no JIT); anywhere else, or if the driver refuses the cubin, or
    /// with `RINGREDUCE_PTX_JIT=1`, the driver JIT-compiles the PTX text.
    pub fn kernel(&self, module: &KernelModule, name: &'static str) -> CuResult<Kernel<'id>> {
        static MODULES: Mutex<Vec<(usize, usize, usize, &'static str)>> = Mutex::new(Vec::new());
        let mut mods = MODULES.lock().unwrap_or_else(|e| e.into_inner());
        let key = module.ptx.as_ptr() as usize;
        let (handle, source) = match mods
            .iter()
            .find(|(o, k, _, _)| *o == self.ordinal && *k == key)
        {
            Some((_, _, m, src)) => (*m as sys::CUmodule, *src),
            None => {
                // Keep this device's primary context alive for the life of the
                // process: the cached module belongs to it, and a later engine
                // re-binding the context then finds it (and the module) ready.
                let mut keep = std::ptr::null_mut();
                // SAFETY: valid out-pointer and device; intentionally never released.
                check("cuDevicePrimaryCtxRetain", unsafe {
                    sys::cuDevicePrimaryCtxRetain(&mut keep, device_handle(self.ordinal)?)
                })?;
                let forced_jit = std::env::var("RINGREDUCE_PTX_JIT").is_ok_and(|v| v == "1");
                let prebuilt = module
                    .cubin
                    .filter(|(_, cc, _)| *cc == self.cc && !forced_jit)
                    .and_then(|(bytes, _, label)| load_image(bytes).ok().map(|m| (m, label)));
                let (m, src) = match prebuilt {
                    Some(x) => x,
                    None => {
                        let text = std::ffi::CString::new(module.ptx)
                            .map_err(|_| err("cuModuleLoadData", "PTX contains a NUL byte"))?;
                        (load_image(text.as_bytes_with_nul())?, "PTX JIT")
                    }
                };
                mods.push((self.ordinal, key, m as usize, src));
                (m, src)
            }
        };
        let cname = std::ffi::CString::new(name)
            .map_err(|_| err("cuModuleGetFunction", "bad kernel name"))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: module is loaded in this device's primary context, which is current.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, handle, cname.as_ptr())
        })?;
        Ok(Kernel {
            f,
            sms: self.sms,
            source,
            _brand: PhantomData,
            _thread: PhantomData,
        })
    }
}

/// A hand-written PTX module, and optionally the same PTX assembled ahead of
/// time by `ptxas` (checked byte for byte by CI): (image, compute capability,
/// label).
#[derive(Debug, Clone, Copy)]
pub struct KernelModule {
    pub ptx: &'static str,
    pub cubin: Option<(&'static [u8], (i32, i32), &'static str)>,
}

/// `cuModuleLoadData` of a NUL-terminated PTX text or a cubin image, in the
/// current context.
fn load_image(image: &[u8]) -> CuResult<sys::CUmodule> {
    let is_elf = image.starts_with(b"\x7fELF");
    if !is_elf && image.last() != Some(&0) {
        return Err(err("cuModuleLoadData", "PTX text is not NUL-terminated"));
    }
    // An ELF image is parsed in place: give it 8-byte alignment
    // (include_bytes! guarantees none).
    let mut aligned = vec![0u64; image.len().div_ceil(8)];
    let ptr: *const c_void = if is_elf {
        // SAFETY: `aligned` holds at least image.len() bytes; u64 has no
        // invalid bit patterns; the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), aligned.as_mut_ptr().cast(), image.len())
        };
        aligned.as_ptr().cast()
    } else {
        image.as_ptr().cast()
    };
    let mut m = std::ptr::null_mut();
    // SAFETY: `ptr` is a NUL-terminated PTX text or an 8-byte-aligned ELF
    // cubin (the driver reads its length from the ELF header), alive for the
    // call; a context is current on this thread.
    check("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut m, ptr)
    })?;
    Ok(m)
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

struct Alloc {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: sys::CUcontext,
    ordinal: usize,
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
        // inside the owning `with_device` closure by the backend); push it in
        // case another context is current, free, pop. Errors are ignored.
        unsafe {
            let _ = sys::cuCtxPushCurrent_v2(self.ctx);
            let _ = sys::cuMemFree_v2(self.ptr);
            let mut old = std::ptr::null_mut();
            let _ = sys::cuCtxPopCurrent_v2(&mut old);
        }
    }
}

/// Device memory of `len` elements of `T` on the device branded `'id`.
pub struct DevBuf<'id, T> {
    alloc: Arc<Alloc>,
    len: usize,
    _t: PhantomData<T>,
    _brand: Brand<'id>,
    _thread: NotSend,
}

/// Another rank's buffer, usable only as the destination of a peer copy, or
/// as the source of a pull from its (never written) send buffer.
#[derive(Clone)]
pub struct PeerBuf {
    alloc: Weak<Alloc>,
    bytes: usize,
    ordinal: usize,
}

impl std::fmt::Debug for PeerBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PeerBuf(device {}, {} bytes)", self.ordinal, self.bytes)
    }
}

const PEER_COPY: &str = "cuMemcpyPeerAsync";

/// Which driver call moves peer data. The engine's design uses
/// `cuMemcpyPeerAsync`; `RINGREDUCE_COPY_API=generic` switches to
/// `cuMemcpyAsync` on the same (unified, peer-mapped) addresses, an experiment
/// to measure the host cost of the peer API itself. Read once per process.
fn generic_copy() -> bool {
    static GENERIC: OnceLock<bool> = OnceLock::new();
    *GENERIC.get_or_init(|| std::env::var("RINGREDUCE_COPY_API").is_ok_and(|v| v == "generic"))
}

/// Issue one copy of `bytes` from `src` (context `sctx`) to `dst` (context
/// `dctx`) on `stream`.
///
/// # Safety
/// Both ranges must lie in live device allocations of those contexts for the
/// duration of the copy, and `stream` must be a live stream.
unsafe fn peer_copy(
    dst: sys::CUdeviceptr,
    dctx: sys::CUcontext,
    src: sys::CUdeviceptr,
    sctx: sys::CUcontext,
    bytes: usize,
    stream: sys::CUstream,
) -> CuResult<()> {
    if generic_copy() {
        // SAFETY: the caller guarantees the ranges and the stream; with
        // unified addressing the driver infers both devices from the pointers.
        check("cuMemcpyAsync", unsafe {
            sys::cuMemcpyAsync(dst, src, bytes, stream)
        })
    } else {
        // SAFETY: as above, with the contexts named explicitly.
        check(PEER_COPY, unsafe {
            sys::cuMemcpyPeerAsync(dst, dctx, src, sctx, bytes, stream)
        })
    }
}

impl PeerBuf {
    /// The live allocation and the device address of elements
    /// `off..off + n` of `T`, or an error when the owner freed it or the range
    /// is outside it. The returned `Arc` keeps the memory alive while held.
    fn range<T>(
        &self,
        role: &str,
        off: usize,
        n: usize,
    ) -> CuResult<(Arc<Alloc>, sys::CUdeviceptr)> {
        let a = self
            .alloc
            .upgrade()
            .ok_or_else(|| err(PEER_COPY, format!("{role} buffer was freed by its owner")))?;
        let size = std::mem::size_of::<T>();
        let (start, len) = (off.saturating_mul(size), n.saturating_mul(size));
        if start.checked_add(len).is_none_or(|e| e > a.bytes) {
            return Err(err(
                PEER_COPY,
                format!(
                    "{role} range {start}..{} bytes outside buffer of {}",
                    start.saturating_add(len),
                    a.bytes
                ),
            ));
        }
        let p = a.ptr + start as u64;
        Ok((a, p))
    }
}

impl<'id, T: Copy> DevBuf<'id, T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn ptr_at(&self, call: &'static str, off: usize, n: usize) -> CuResult<sys::CUdeviceptr> {
        if off.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(err(
                call,
                format!("range {off}..{} outside buffer of {}", off + n, self.len),
            ));
        }
        Ok(self.alloc.ptr + (off * std::mem::size_of::<T>()) as u64)
    }

    /// A token other ranks use to copy into this buffer.
    pub fn export(&self) -> PeerBuf {
        PeerBuf {
            alloc: Arc::downgrade(&self.alloc),
            bytes: self.alloc.bytes,
            ordinal: self.alloc.ordinal,
        }
    }

    /// Synchronous host-to-device copy into `self[off..off + data.len()]`.
    /// The caller synchronizes the streams that use this buffer first.
    pub fn write(&mut self, off: usize, data: &[T]) -> CuResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let p = self.ptr_at("cuMemcpyHtoD", off, data.len())?;
        // SAFETY: p..p+bytes is inside this allocation (checked), data is a
        // valid host slice of that many bytes; the copy is synchronous.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(p, data.as_ptr().cast(), std::mem::size_of_val(data))
        })
    }

    /// Synchronous device-to-host copy of `self[off..off + out.len()]`.
    pub fn read(&self, off: usize, out: &mut [T]) -> CuResult<()> {
        if out.is_empty() {
            return Ok(());
        }
        let p = self.ptr_at("cuMemcpyDtoH", off, out.len())?;
        // SAFETY: bounds checked; `out` is a valid, exclusively borrowed host
        // slice; T: Copy so any bit pattern the device wrote is overwritten
        // wholesale (T is only instantiated with plain numeric types).
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), p, std::mem::size_of_val(out))
        })
    }
}

// ---------------------------------------------------------------------------
// Streams, events, kernels
// ---------------------------------------------------------------------------

/// A stream of the context branded `'id`.
pub struct Stream<'id> {
    s: sys::CUstream,
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

struct EventToken(sys::CUevent);
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

/// An event of the context branded `'id`: only that context's streams can record it.
pub struct Event<'id> {
    token: Arc<EventToken>,
    _brand: Brand<'id>,
    _thread: NotSend,
}

/// Another rank's event: any stream may wait on it.
#[derive(Clone)]
pub struct RemoteEvent {
    token: Weak<EventToken>,
}

impl Event<'_> {
    pub fn export(&self) -> RemoteEvent {
        RemoteEvent {
            token: Arc::downgrade(&self.token),
        }
    }
}

/// A reduce kernel `dst = a + b` loaded on the device branded `'id`.
pub struct Kernel<'id> {
    f: sys::CUfunction,
    sms: usize,
    source: &'static str,
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl Kernel<'_> {
    /// How the module was loaded: a prebuilt cubin's label, or `PTX JIT`.
    pub fn source(&self) -> &'static str {
        self.source
    }
}

/// The operands of [`Stream::exchange`]: (buffer, element offset) pairs.
pub struct Exchange<'a, 'id, T> {
    pub dst: (&'a DevBuf<'id, T>, usize),
    pub a: (&'a DevBuf<'id, T>, usize),
    /// The peer's receive slot (written by this rank's kernel).
    pub peer_slot: (&'a PeerBuf, usize),
    /// This rank's receive slot (written by the peer's kernel).
    pub my_slot: (&'a DevBuf<'id, T>, usize),
    /// The peer's flag array, [`EXCHANGE_MAX_BLOCKS`] u64.
    pub peer_flags: &'a PeerBuf,
    /// This rank's flag array (zeroed once at setup).
    pub my_flags: &'a DevBuf<'id, u64>,
    /// This rank's per-block call counts (zeroed once at setup); the kernel
    /// numbers its calls itself, so a CUDA graph can replay it.
    pub calls: &'a DevBuf<'id, u64>,
    pub n: usize,
}

/// Most blocks of an exchange launch, and the length of a flag array. Every
/// block of both ranks' grids must be resident at once (each spins on its
/// partner), so this stays below the SM count of any GPU the kernel runs on.
pub const EXCHANGE_MAX_BLOCKS: usize = 128;

/// Blocks of an exchange launch: a function of `n` alone, so both ranks
/// launch the same grid (about 4 float4 per thread, at most 128 blocks).
pub fn exchange_blocks(n: usize) -> usize {
    n.div_ceil(BLOCK as usize * 16)
        .clamp(1, EXCHANGE_MAX_BLOCKS)
}

/// Threads per block for the reduce kernel.
pub const BLOCK: u32 = 256;
/// Elements one thread covers per loop iteration (4 float4 loads per operand).
const PER_THREAD_ITER: usize = 16;

impl<'id> Stream<'id> {
    /// `cuStreamSynchronize`.
    pub fn synchronize(&self) -> CuResult<()> {
        // SAFETY: valid stream of the current context.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.s)
        })
    }

    /// `cuEventRecord` of an event of the same context.
    pub fn record(&self, ev: &Event<'id>) -> CuResult<()> {
        // SAFETY: event and stream belong to the same context (same brand).
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(ev.token.0, self.s)
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

    /// `cuMemcpyPeerAsync`: copy `n` elements from `src[src_off..]` (this
    /// device) into the peer buffer `dst` at element `dst_off`.
    pub fn copy_to_peer<T: Copy>(
        &self,
        dst: &PeerBuf,
        dst_off: usize,
        src: &DevBuf<'id, T>,
        src_off: usize,
        n: usize,
    ) -> CuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let sp = src.ptr_at(PEER_COPY, src_off, n)?;
        let (d, dp) = dst.range::<T>("destination", dst_off, n)?;
        // SAFETY: both ranges are inside live allocations (checked; `d`
        // keeps the destination alive during the call); the contexts are the
        // retained primary contexts the allocations were made in.
        unsafe {
            peer_copy(
                dp,
                d.ctx,
                sp,
                src.alloc.ctx,
                n * std::mem::size_of::<T>(),
                self.s,
            )
        }
    }

    /// `cuMemcpyPeerAsync` the other way: copy `n` elements of the peer
    /// buffer `src` (from element `src_off`) into `dst[dst_off..]` on this device.
    pub fn copy_from_peer<T: Copy>(
        &self,
        dst: &DevBuf<'id, T>,
        dst_off: usize,
        src: &PeerBuf,
        src_off: usize,
        n: usize,
    ) -> CuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let dp = dst.ptr_at(PEER_COPY, dst_off, n)?;
        let (s, sp) = src.range::<T>("source", src_off, n)?;
        // SAFETY: as in copy_to_peer, with the roles swapped.
        unsafe {
            peer_copy(
                dp,
                dst.alloc.ctx,
                sp,
                s.ctx,
                n * std::mem::size_of::<T>(),
                self.s,
            )
        }
    }

    /// Launch `dst[d..d+n] = a[a_off..] + b[b_off..]` (the PTX kernel).
    /// `dst` may be the same buffer as `a` only with `a_off == d`.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce<T: Copy>(
        &self,
        k: &Kernel<'id>,
        dst: &DevBuf<'id, T>,
        d: usize,
        a: &DevBuf<'id, T>,
        a_off: usize,
        b: &DevBuf<'id, T>,
        b_off: usize,
        n: usize,
    ) -> CuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let call = "cuLaunchKernel(rr_reduce_sum)";
        let pd = dst.ptr_at(call, d, n)?;
        let pa = a.ptr_at(call, a_off, n)?;
        let pb = b.ptr_at(call, b_off, n)?;
        let overlap = |x: u64, y: u64| {
            x < y + (n * std::mem::size_of::<T>()) as u64
                && y < x + (n * std::mem::size_of::<T>()) as u64
        };
        if (overlap(pd, pa) && pd != pa) || overlap(pd, pb) {
            return Err(err(call, "overlapping operands"));
        }
        self.launch_reduce(k, pd, pa, pb, n, call)
    }

    /// Launch `dst[d..d+n] = a[a_off..] + b[b_off..]` where `b` is another
    /// rank's buffer, read by the kernel through peer access (unified
    /// addresses); the caller guarantees nobody writes `b` meanwhile.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_peer<T: Copy>(
        &self,
        k: &Kernel<'id>,
        dst: &DevBuf<'id, T>,
        d: usize,
        a: &DevBuf<'id, T>,
        a_off: usize,
        b: &PeerBuf,
        b_off: usize,
        n: usize,
    ) -> CuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let call = "cuLaunchKernel(rr_reduce_sum, peer operand)";
        let pd = dst.ptr_at(call, d, n)?;
        let pa = a.ptr_at(call, a_off, n)?;
        if pd != pa
            && pd < pa + (n * std::mem::size_of::<T>()) as u64
            && pa < pd + (n * std::mem::size_of::<T>()) as u64
        {
            return Err(err(call, "overlapping operands"));
        }
        // `_keep` holds the peer allocation alive during the launch call.
        let (_keep, pb) = b.range::<T>("peer operand", b_off, n)?;
        self.launch_reduce(k, pd, pa, pb, n, call)
    }

    /// The launch shared by [`Stream::reduce`] and [`Stream::reduce_peer`].
    fn launch_reduce(
        &self,
        k: &Kernel<'id>,
        mut pd: u64,
        mut pa: u64,
        mut pb: u64,
        n: usize,
        call: &'static str,
    ) -> CuResult<()> {
        let mut count = n as u64;
        let blocks = n
            .div_ceil(PER_THREAD_ITER * BLOCK as usize)
            .clamp(1, 4 * self.sms_of(k));
        let mut params: [*mut c_void; 4] = [
            (&mut pd as *mut u64).cast(),
            (&mut pa as *mut u64).cast(),
            (&mut pb as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
        ];
        // SAFETY: the kernel takes four u64 parameters (dst, a, b, n); the
        // callers checked that dst and a lie in live allocations of this
        // context and b in a live allocation readable from it (its own, or a
        // peer's with peer access enabled) for n elements; the kernel writes
        // only dst[0..n].
        unsafe { self.launch_1d(k, blocks, &mut params, call) }
    }

    /// `cuLaunchKernel` of `k` on this stream: `blocks` blocks of [`BLOCK`]
    /// threads, no shared memory.
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, in order, each to
    /// a value of that parameter's type, and every address passed that way
    /// must stay valid for what the kernel does with it until it completes.
    unsafe fn launch_1d(
        &self,
        k: &Kernel<'id>,
        blocks: usize,
        params: &mut [*mut c_void],
        call: &'static str,
    ) -> CuResult<()> {
        // SAFETY: the kernel belongs to this stream's context (same brand);
        // the caller guarantees the parameters.
        check(call, unsafe {
            sys::cuLaunchKernel(
                k.f,
                blocks as u32,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                self.s,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Launch the one-kernel exchange of 2 ranks (`ptx/exchange_f32.ptx`):
    /// push `a[..n]` into the peer's slot, raise this call's flag in the
    /// peer's flag array, wait for the peer's flag in `my_flags`, then
    /// `dst = a + my_slot`. The peer rank launches the same kernel with the
    /// roles swapped; the kernel spins until it has, and traps after 10 s.
    /// Both ranks must launch the same sequence of exchanges (same `n`).
    pub fn exchange<T: Copy>(&self, k: &Kernel<'id>, x: &Exchange<'_, 'id, T>) -> CuResult<()> {
        let call = "cuLaunchKernel(rr_exchange_sum)";
        let n = x.n;
        let elem = std::mem::size_of::<T>();
        let mut pd = x.dst.0.ptr_at(call, x.dst.1, n)?;
        let mut pa = x.a.0.ptr_at(call, x.a.1, n)?;
        let mut pm = x.my_slot.0.ptr_at(call, x.my_slot.1, n)?;
        let blocks = exchange_blocks(n);
        let mut mf = x.my_flags.ptr_at(call, 0, blocks)?;
        let mut calls = x.calls.ptr_at(call, 0, blocks)?;
        let bytes = (n * elem) as u64;
        let overlap = |p: u64, q: u64| p < q + bytes && q < p + bytes;
        if n > 0 && ((overlap(pd, pa) && pd != pa) || overlap(pd, pm) || overlap(pa, pm)) {
            return Err(err(call, "overlapping operands"));
        }
        // The Arcs keep the peer's allocations alive during the launch call.
        let (_keep_s, mut ps) = x.peer_slot.0.range::<T>("peer slot", x.peer_slot.1, n)?;
        let (_keep_f, mut pf) = x.peer_flags.range::<u64>("peer flags", 0, blocks)?;
        let mut count = n as u64;
        let mut params: [*mut c_void; 8] = [
            (&mut pd as *mut u64).cast(),
            (&mut pa as *mut u64).cast(),
            (&mut ps as *mut u64).cast(),
            (&mut pm as *mut u64).cast(),
            (&mut pf as *mut u64).cast(),
            (&mut mf as *mut u64).cast(),
            (&mut calls as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
        ];
        // SAFETY: the kernel takes eight u64 parameters in this order; dst,
        // a and my_slot lie in live allocations of this context for n
        // elements (checked), the peer slot in a live peer allocation
        // reachable through peer access (checked, kept alive), and both flag
        // arrays and the call counts hold one u64 per block (checked). The
        // kernel writes only dst[0..n], the peer slot, its blocks' peer flags
        // and its blocks' call counts.
        unsafe { self.launch_1d(k, blocks, &mut params, call) }
    }

    /// `cuMemsetD8Async` of the whole buffer to zero bytes.
    pub fn zero<T: Copy>(&self, buf: &DevBuf<'id, T>) -> CuResult<()> {
        if buf.alloc.bytes == 0 {
            return Ok(());
        }
        // SAFETY: the whole live allocation, a stream of the same context.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(buf.alloc.ptr, 0, buf.alloc.bytes, self.s)
        })
    }

    fn sms_of(&self, k: &Kernel<'id>) -> usize {
        k.sms.max(1)
    }

    /// `cuMemsetD32Async` of `n` 32-bit words with `bits`.
    pub fn fill32<T: Copy>(&self, buf: &DevBuf<'id, T>, n: usize, bits: u32) -> CuResult<()> {
        if std::mem::size_of::<T>() != 4 {
            return Err(err("cuMemsetD32Async", "element is not 32 bits"));
        }
        if n == 0 {
            return Ok(());
        }
        let p = buf.ptr_at("cuMemsetD32Async", 0, n)?;
        // SAFETY: bounds checked, stream of the same context.
        check("cuMemsetD32Async", unsafe {
            sys::cuMemsetD32Async(p, bits, n, self.s)
        })
    }

    /// NCCL all-reduce (sum) of `count` elements on this stream. Only `f32`
    /// is bound; other element types are an error.
    pub fn nccl_all_reduce<T: Copy + 'static>(
        &self,
        nccl: &nccl::Nccl,
        comm: &nccl::Comm,
        send: &DevBuf<'id, T>,
        recv: &DevBuf<'id, T>,
        count: usize,
    ) -> Result<(), NcclCallError> {
        if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
            return Err(err("ncclAllReduce", "only f32 is bound").into());
        }
        let sp = send.ptr_at("ncclAllReduce", 0, count)?;
        let rp = recv.ptr_at("ncclAllReduce", 0, count)?;
        // SAFETY: both buffers hold `count` f32 on this device (checked), the
        // stream belongs to this device, and the communicator was created on
        // this thread with this context current.
        unsafe { nccl.all_reduce_f32_sum(sp, rp, count, comm, self.s) }?;
        Ok(())
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

impl<'id> Stream<'id> {
    /// Start capturing this stream's work into a graph (thread-local mode:
    /// other threads' CUDA calls are unaffected).
    pub fn begin_capture(&self) -> CuResult<()> {
        // SAFETY: valid stream of the current context.
        check("cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(
                self.s,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
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

/// An error from an NCCL call made through the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum NcclCallError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Nccl(#[from] nccl::NcclError),
}

impl Ctx<'_> {
    /// Create this rank's NCCL communicator (blocks until all ranks join).
    pub fn nccl_comm(
        &self,
        nccl: &nccl::Nccl,
        nranks: usize,
        id: &nccl::UniqueId,
        rank: usize,
    ) -> Result<nccl::Comm, nccl::NcclError> {
        nccl.comm_init_rank(nranks, id, rank)
    }
}
