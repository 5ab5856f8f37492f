//! The driver's result layer: one function per driver call the crate makes,
//! taking plain typed arguments and returning [`CuResult`], with the FFI
//! call, its `# Safety` contract and its `// SAFETY:` comment here and
//! nowhere else (the model is cudarc's sys / result / safe layers).
//!
//! Where cudarc's own result layer (`cudarc::driver::result`) has the call
//! with the same semantics, it is used and only its error is named here
//! ([`named`]); the calls it lacks (context push and pop, peer access, IPC
//! handles, stream queries and value waits, `cuMemcpyAsync`, a launch with a
//! packed parameter buffer, ...) are written here the same way. Each error
//! names the driver call as the checked wrappers always did
//! (`cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory`).
//!
//! A function is `unsafe` when a handle or address it takes must be live
//! (the driver cannot tell a freed handle from a valid one); one whose
//! arguments the driver checks, or that the type system vouches for
//! ([`Device`] is made only by [`device_get`]), is safe. The wrappers in
//! `driver`, `memory`, `stream`, `order`, `kernels` and `work` call these and
//! say at each `unsafe` call why its handles are live. The file follows the
//! driver's API: the driver and devices, contexts, memory and copies, peer
//! access and IPC, then streams and what runs on them (events, graphs,
//! modules, kernel launches).

use super::{err, CuResult, CudaError};
use cudarc::driver::result as cdr;
use cudarc::driver::sys;
use std::ffi::{c_void, CStr, CString};

/// Turn a `CUresult` into a `CuResult`, with the driver's name and text.
fn check(call: &'static str, r: sys::CUresult) -> CuResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(describe(call, r))
}

/// The error of a failed driver call: the call, the driver's name for the
/// result and its text.
fn describe(call: &'static str, r: sys::CUresult) -> CudaError {
    let e = cudarc::driver::result::DriverError(r);
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{r:?}"));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    err(call, format!("{name}: {text}"))
}

/// Name cudarc's error after the driver call that failed.
fn named<T>(call: &'static str, r: Result<T, cdr::DriverError>) -> CuResult<T> {
    r.map_err(|e| describe(call, e.0))
}

/// A device handle the driver gave for an ordinal ([`device_get`]): the
/// only way to make one, so the calls taking it need no `unsafe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Device(sys::CUdevice);

// ---------------------------------------------------------------- driver

/// Whether libcuda can be loaded (cudarc panics on its first call when it
/// cannot, so this comes before any other call).
pub(crate) fn culib_present() -> bool {
    // SAFETY: is_culib_present only tries to dlopen libcuda and closes it.
    unsafe { sys::is_culib_present() }
}

/// `cuInit(0)`. Call only after [`culib_present`] said yes.
pub(crate) fn init() -> CuResult<()> {
    named("cuInit", cdr::init())
}

/// `cuDriverGetVersion`, e.g. 13000.
pub(crate) fn driver_version() -> CuResult<i32> {
    let mut version = 0;
    // SAFETY: valid out-pointer.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version)
    })?;
    Ok(version)
}

/// `cuDeviceGetCount`.
pub(crate) fn device_count() -> CuResult<i32> {
    named("cuDeviceGetCount", cdr::device::get_count())
}

/// `cuDeviceGet`: the handle of device `ordinal` (the driver checks it).
pub(crate) fn device_get(ordinal: usize) -> CuResult<Device> {
    named("cuDeviceGet", cdr::device::get(ordinal as i32)).map(Device)
}

/// Read a NUL-terminated string the driver writes into a buffer of `N`
/// bytes.
fn driver_string<const N: usize>(
    call: &'static str,
    fill: impl FnOnce(*mut std::ffi::c_char, i32) -> sys::CUresult,
) -> CuResult<String> {
    let mut buf = [0u8; N];
    check(call, fill(buf.as_mut_ptr().cast(), N as i32))?;
    // The driver NUL-terminates within the buffer; a full buffer without one
    // is read whole instead of trusted.
    Ok(match CStr::from_bytes_until_nul(&buf) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&buf).into_owned(),
    })
}

/// `cuDeviceGetName` (up to 255 bytes; cudarc's reads 127 and panics on a
/// missing NUL).
pub(crate) fn device_name(dev: Device) -> CuResult<String> {
    driver_string::<256>("cuDeviceGetName", |p, len| {
        // SAFETY: `p` is a writable buffer of `len` bytes; dev is valid.
        unsafe { sys::cuDeviceGetName(p, len, dev.0) }
    })
}

/// `cuDeviceGetPCIBusId`, e.g. `0000:19:00.0`.
pub(crate) fn device_pci_bus_id(dev: Device) -> CuResult<String> {
    driver_string::<32>("cuDeviceGetPCIBusId", |p, len| {
        // SAFETY: `p` is a writable buffer of `len` bytes; dev is valid.
        unsafe { sys::cuDeviceGetPCIBusId(p, len, dev.0) }
    })
}

/// `cuDeviceTotalMem`.
pub(crate) fn device_total_mem(dev: Device) -> CuResult<usize> {
    // SAFETY: `dev` came from cuDeviceGet (the `Device` type).
    named("cuDeviceTotalMem", unsafe { cdr::device::total_mem(dev.0) })
}

/// `cuDeviceGetAttribute`.
pub(crate) fn device_attribute(dev: Device, attr: sys::CUdevice_attribute) -> CuResult<i32> {
    // SAFETY: `dev` came from cuDeviceGet (the `Device` type).
    named("cuDeviceGetAttribute", unsafe {
        cdr::device::get_attribute(dev.0, attr)
    })
}

/// `cuDeviceCanAccessPeer`: whether `a` can access `b`'s memory.
pub(crate) fn device_can_access_peer(a: Device, b: Device) -> CuResult<bool> {
    let mut can = 0;
    // SAFETY: valid out-pointer and device handles.
    check("cuDeviceCanAccessPeer", unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, a.0, b.0)
    })?;
    Ok(can != 0)
}

/// `cuDeviceGetP2PAttribute` of the link from `a` to `b`.
pub(crate) fn device_p2p_attribute(
    attr: sys::CUdevice_P2PAttribute,
    a: Device,
    b: Device,
) -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: valid out-pointer, attribute and two device handles.
    check("cuDeviceGetP2PAttribute", unsafe {
        sys::cuDeviceGetP2PAttribute(&mut v, attr, a.0, b.0)
    })?;
    Ok(v)
}

// -------------------------------------------------------------- contexts

/// `cuDevicePrimaryCtxRetain`: the device's primary context, with one more
/// reference (a reference never released is leaked, which is safe).
pub(crate) fn primary_ctx_retain(dev: Device) -> CuResult<sys::CUcontext> {
    // SAFETY: `dev` came from cuDeviceGet (the `Device` type).
    named("cuDevicePrimaryCtxRetain", unsafe {
        cdr::primary_ctx::retain(dev.0)
    })
}

/// `cuDevicePrimaryCtxRelease`.
///
/// # Safety
/// Balances one [`primary_ctx_retain`] of the caller: the last release
/// destroys the context, so releasing a reference someone else holds leaves
/// their handles dangling.
pub(crate) unsafe fn primary_ctx_release(dev: Device) -> CuResult<()> {
    // SAFETY: the caller balances its own retain.
    named("cuDevicePrimaryCtxRelease", unsafe {
        cdr::primary_ctx::release(dev.0)
    })
}

/// `cuCtxSetCurrent`: bind `ctx` to the calling thread.
///
/// # Safety
/// `ctx` is a live context (retained by the caller while it is current).
pub(crate) unsafe fn ctx_set_current(ctx: sys::CUcontext) -> CuResult<()> {
    // SAFETY: the caller guarantees a live context.
    named("cuCtxSetCurrent", unsafe { cdr::ctx::set_current(ctx) })
}

/// `cuCtxPushCurrent`: make `ctx` current on this thread until
/// [`ctx_pop`].
///
/// # Safety
/// `ctx` is a live context, kept alive until the matching [`ctx_pop`].
pub(crate) unsafe fn ctx_push(ctx: sys::CUcontext) -> CuResult<()> {
    // SAFETY: the caller guarantees a live context.
    check("cuCtxPushCurrent", unsafe { sys::cuCtxPushCurrent_v2(ctx) })
}

/// `cuCtxPopCurrent`: undo this thread's last [`ctx_push`], restoring the
/// context that was current before it.
///
/// # Safety
/// Pops only a context this caller pushed (a thread's own binding popped
/// from under it is gone for the code that relies on it).
pub(crate) unsafe fn ctx_pop() -> CuResult<sys::CUcontext> {
    let mut old = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the caller pushed what this pops.
    check("cuCtxPopCurrent", unsafe {
        sys::cuCtxPopCurrent_v2(&mut old)
    })?;
    Ok(old)
}

/// `cuCtxEnablePeerAccess` from the current context to `peer`'s memory;
/// access already enabled counts as success.
///
/// # Safety
/// A context is current on this thread and `peer` is a live context.
pub(crate) unsafe fn ctx_enable_peer_access(peer: sys::CUcontext) -> CuResult<()> {
    // SAFETY: the caller guarantees both contexts.
    let r = unsafe { sys::cuCtxEnablePeerAccess(peer, 0) };
    if r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        return Ok(());
    }
    check("cuCtxEnablePeerAccess", r)
}

/// `cuMemGetInfo`: (free, total) bytes of the current context's device.
pub(crate) fn mem_get_info() -> CuResult<(usize, usize)> {
    named("cuMemGetInfo", cdr::mem_get_info())
}

// ---------------------------------------------------------------- memory

/// `cuMemAlloc` of `bytes` (> 0) in the current context, uninitialised
/// (the crate handles device memory as bytes only, which any content is).
pub(crate) fn mem_alloc(bytes: usize) -> CuResult<sys::CUdeviceptr> {
    // SAFETY: no precondition beyond a current context, which the driver
    // checks; the memory is handed out as bytes.
    named("cuMemAlloc", unsafe { cdr::malloc_sync(bytes) })
}

/// `cuMemFree`.
///
/// # Safety
/// `ptr` came from [`mem_alloc`] in the current context, is freed once, and
/// no work that uses it is pending.
pub(crate) unsafe fn mem_free(ptr: sys::CUdeviceptr) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuMemFree", unsafe { cdr::memory_free(ptr) })
}

/// What the driver knows of a device address (`cuPointerGetAttribute`):
/// the start and size of the device allocation it lies in, and its GPU's
/// ordinal. An address that is not device memory of a context of this
/// process (host memory, a made-up number) is an error.
pub(crate) fn pointer_range(ptr: sys::CUdeviceptr) -> CuResult<(sys::CUdeviceptr, u64, i64)> {
    use sys::CUpointer_attribute as A;
    let call = "cuPointerGetAttribute";
    let mut kind: u32 = 0;
    // SAFETY: the driver only looks `ptr` up in its tables (any value is
    // allowed); the out-pointer is a live u32, the attribute's type.
    check(call, unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr,
        )
    })?;
    if kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
        return Err(super::err(
            call,
            format!("the memory at {ptr:#x} is not device memory (memory type {kind})"),
        ));
    }
    let mut start: sys::CUdeviceptr = 0;
    // SAFETY: as above; the out-pointer is a live CUdeviceptr.
    check(call, unsafe {
        sys::cuPointerGetAttribute(
            (&mut start as *mut sys::CUdeviceptr).cast(),
            A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            ptr,
        )
    })?;
    let mut size: usize = 0;
    // SAFETY: as above; the out-pointer is a live size_t.
    check(call, unsafe {
        sys::cuPointerGetAttribute(
            (&mut size as *mut usize).cast(),
            A::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
            ptr,
        )
    })?;
    let mut ordinal: i32 = -1;
    // SAFETY: as above; the out-pointer is a live int.
    check(call, unsafe {
        sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    })?;
    Ok((start, size as u64, i64::from(ordinal)))
}

/// `cuMemHostAlloc`: pinned host memory of `bytes` with `flags`.
pub(crate) fn mem_host_alloc(bytes: usize, flags: u32) -> CuResult<*mut c_void> {
    // SAFETY: no precondition beyond a current context, which the driver
    // checks; the caller initialises the memory before reading it.
    named("cuMemHostAlloc", unsafe { cdr::malloc_host(bytes, flags) })
}

/// `cuMemFreeHost`.
///
/// # Safety
/// `host` came from [`mem_host_alloc`], is freed once, and nothing (host or
/// device) uses it any more.
pub(crate) unsafe fn mem_free_host(host: *mut c_void) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuMemFreeHost", unsafe { cdr::free_host(host) })
}

/// `cuMemHostGetDevicePointer`: the device address of mapped host memory.
///
/// # Safety
/// `host` is live memory from [`mem_host_alloc`] with
/// `CU_MEMHOSTALLOC_DEVICEMAP`.
pub(crate) unsafe fn mem_host_device_pointer(host: *mut c_void) -> CuResult<sys::CUdeviceptr> {
    let mut dev = 0;
    // SAFETY: valid out-pointer; the caller's contract for `host`.
    check("cuMemHostGetDevicePointer", unsafe {
        sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0)
    })?;
    Ok(dev)
}

/// Synchronous `cuMemcpyHtoD` of `src` to `dst`.
///
/// # Safety
/// `dst..dst + src.len()` lies in a live allocation of the current context.
pub(crate) unsafe fn memcpy_htod(dst: sys::CUdeviceptr, src: &[u8]) -> CuResult<()> {
    // SAFETY: `src` is a valid host slice; the caller's contract for `dst`.
    named("cuMemcpyHtoD", unsafe { cdr::memcpy_htod_sync(dst, src) })
}

/// Synchronous `cuMemcpyDtoH` of `dst.len()` bytes from `src`.
///
/// # Safety
/// `src..src + dst.len()` lies in a live allocation of the current context.
pub(crate) unsafe fn memcpy_dtoh(dst: &mut [u8], src: sys::CUdeviceptr) -> CuResult<()> {
    // SAFETY: `dst` is an exclusively borrowed host byte slice (any bytes
    // are valid); the caller's contract for `src`.
    named("cuMemcpyDtoH", unsafe { cdr::memcpy_dtoh_sync(dst, src) })
}

/// `cuMemcpyPeerAsync` of `n` bytes from `src` (in `src_ctx`) to `dst` (in
/// `dst_ctx`) on `stream`.
///
/// # Safety
/// Both ranges lie in allocations of their (live) contexts that stay alive
/// until the copy completes; `stream` is a live stream of the current
/// context.
pub(crate) unsafe fn memcpy_peer_async(
    dst: sys::CUdeviceptr,
    dst_ctx: sys::CUcontext,
    src: sys::CUdeviceptr,
    src_ctx: sys::CUcontext,
    n: usize,
    stream: sys::CUstream,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuMemcpyPeerAsync", unsafe {
        cdr::memcpy_peer_async(dst_ctx, dst, src_ctx, src, n, stream)
    })
}

/// `cuMemcpyAsync` of `n` bytes between unified addresses (the driver infers
/// both devices).
///
/// # Safety
/// As [`memcpy_peer_async`], and peer access between the two devices is
/// enabled.
pub(crate) unsafe fn memcpy_async(
    dst: sys::CUdeviceptr,
    src: sys::CUdeviceptr,
    n: usize,
    stream: sys::CUstream,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    check("cuMemcpyAsync", unsafe {
        sys::cuMemcpyAsync(dst, src, n, stream)
    })
}

/// `cuMemsetD8Async` of `n` bytes at `ptr` to `byte`.
///
/// # Safety
/// `ptr..ptr + n` lies in a live allocation of the current context, alive
/// until the stream has run the set; `stream` is a live stream of it.
pub(crate) unsafe fn memset_d8_async(
    ptr: sys::CUdeviceptr,
    byte: u8,
    n: usize,
    stream: sys::CUstream,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuMemsetD8Async", unsafe {
        cdr::memset_d8_async(ptr, byte, n, stream)
    })
}

/// `cuIpcGetMemHandle`: the 64 bytes that name the allocation at `ptr` to
/// another process.
///
/// # Safety
/// `ptr` is the base of a live [`mem_alloc`] allocation of the current
/// context.
pub(crate) unsafe fn ipc_get_mem_handle(ptr: sys::CUdeviceptr) -> CuResult<[u8; 64]> {
    let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: valid out-pointer; the caller's contract for `ptr`.
    check("cuIpcGetMemHandle", unsafe {
        sys::cuIpcGetMemHandle(&mut h, ptr)
    })?;
    Ok(h.reserved.map(|c| c as u8))
}

/// `cuIpcOpenMemHandle` (peer access enabled lazily): map another process's
/// allocation into the current context.
pub(crate) fn ipc_open_mem_handle(handle: &[u8; 64]) -> CuResult<sys::CUdeviceptr> {
    let raw = sys::CUipcMemHandle {
        reserved: handle.map(|b| b as std::ffi::c_char),
    };
    let mut ptr = 0;
    // SAFETY: valid out-pointer; the handle is passed by value and the
    // driver checks that it names a live allocation of another process (and
    // that a context is current).
    check("cuIpcOpenMemHandle", unsafe {
        sys::cuIpcOpenMemHandle_v2(
            &mut ptr,
            raw,
            sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
        )
    })?;
    Ok(ptr)
}

/// `cuIpcCloseMemHandle`.
///
/// # Safety
/// `ptr` came from [`ipc_open_mem_handle`] in the current context, is closed
/// once, and no work that uses it is pending.
pub(crate) unsafe fn ipc_close_mem_handle(ptr: sys::CUdeviceptr) -> CuResult<()> {
    // SAFETY: the caller's contract.
    check("cuIpcCloseMemHandle", unsafe {
        sys::cuIpcCloseMemHandle(ptr)
    })
}

// --------------------------------------------------------------- streams

/// `cuStreamCreate`, non-blocking, in the current context.
pub(crate) fn stream_create() -> CuResult<sys::CUstream> {
    named(
        "cuStreamCreate",
        cdr::stream::create(cdr::stream::StreamKind::NonBlocking),
    )
}

/// `cuCtxGetStreamPriorityRange` of the current context: (least, greatest).
pub(crate) fn stream_priority_range() -> CuResult<(i32, i32)> {
    named(
        "cuCtxGetStreamPriorityRange",
        cdr::stream::get_priority_range(),
    )
}

/// `cuStreamCreateWithPriority`, non-blocking, in the current context.
pub(crate) fn stream_create_with_priority(priority: i32) -> CuResult<sys::CUstream> {
    named(
        "cuStreamCreateWithPriority",
        cdr::stream::create_with_priority(cdr::stream::StreamKind::NonBlocking, priority),
    )
}

/// `cuStreamDestroy` (the driver defers it until pending work is done).
///
/// # Safety
/// `s` is a live stream of the current context, destroyed once.
pub(crate) unsafe fn stream_destroy(s: sys::CUstream) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuStreamDestroy", unsafe { cdr::stream::destroy(s) })
}

/// `cuStreamSynchronize` (`s` null: the current context's null stream).
///
/// # Safety
/// `s` is null or a live stream of the current context.
pub(crate) unsafe fn stream_synchronize(s: sys::CUstream) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuStreamSynchronize", unsafe {
        cdr::stream::synchronize(s)
    })
}

/// `cuStreamQuery`: whether everything issued on `s` is complete (never
/// blocks).
///
/// # Safety
/// `s` is a live stream of the current context.
pub(crate) unsafe fn stream_query(s: sys::CUstream) -> CuResult<bool> {
    // SAFETY: the caller's contract.
    let r = unsafe { sys::cuStreamQuery(s) };
    if r == sys::CUresult::CUDA_ERROR_NOT_READY {
        return Ok(false);
    }
    check("cuStreamQuery", r).map(|_| true)
}

/// `cuStreamWaitEvent`: `s` waits (on the GPU) for `ev`'s last record.
///
/// # Safety
/// `s` is a live stream whose context is current (or pushed), `ev` a live
/// event of any context.
pub(crate) unsafe fn stream_wait_event(s: sys::CUstream, ev: sys::CUevent) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuStreamWaitEvent", unsafe {
        cdr::stream::wait_event(s, ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
    })
}

/// `cuStreamWaitValue32` with `GEQ`: `s` stops until the 32-bit word at
/// `addr` is `>= value`.
///
/// # Safety
/// `s` is a live stream of the current context; `addr` is a 4-byte aligned
/// device address of memory that stays alive until the wait is over.
pub(crate) unsafe fn stream_wait_value32_geq(
    s: sys::CUstream,
    addr: sys::CUdeviceptr,
    value: u32,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    check("cuStreamWaitValue32", unsafe {
        sys::cuStreamWaitValue32_v2(
            s,
            addr,
            value,
            sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
        )
    })
}

/// `cuStreamGetCtx`: the context `s` belongs to.
///
/// # Safety
/// `s` is a live stream (an invalid handle is undefined behaviour before the
/// driver can check anything).
pub(crate) unsafe fn stream_get_ctx(s: sys::CUstream) -> CuResult<sys::CUcontext> {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the caller's contract for `s`.
    check("cuStreamGetCtx", unsafe {
        sys::cuStreamGetCtx(s, &mut ctx)
    })?;
    Ok(ctx)
}

/// `cuStreamBeginCapture` in `mode`.
///
/// # Safety
/// `s` is a live stream of the current context.
pub(crate) unsafe fn stream_begin_capture(
    s: sys::CUstream,
    mode: sys::CUstreamCaptureMode,
) -> CuResult<()> {
    // SAFETY: the caller's contract; `mode` is a valid enumerator.
    named("cuStreamBeginCapture", unsafe {
        cdr::stream::begin_capture(s, mode)
    })
}

/// `cuStreamEndCapture`: the captured graph (owned by the caller).
///
/// # Safety
/// `s` is a live stream of the current context, capturing.
pub(crate) unsafe fn stream_end_capture(s: sys::CUstream) -> CuResult<sys::CUgraph> {
    // SAFETY: the caller's contract.
    named("cuStreamEndCapture", unsafe { cdr::stream::end_capture(s) })
}

// ---------------------------------------------------------------- events

/// `cuEventCreate` with one flag, in the current context.
pub(crate) fn event_create(flags: sys::CUevent_flags) -> CuResult<sys::CUevent> {
    named("cuEventCreate", cdr::event::create(flags))
}

/// `cuEventCreate` of an event other processes can wait on
/// (`CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`: two flags, which
/// cudarc's `event::create` cannot take).
pub(crate) fn ipc_event_create() -> CuResult<sys::CUevent> {
    let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32
        | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    let mut e = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the flags and that a
    // context is current.
    check("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut e, flags)
    })?;
    Ok(e)
}

/// `cuEventDestroy` (allowed with pending waits: the driver keeps what it
/// needs).
///
/// # Safety
/// `ev` is a live event, destroyed once; its context is alive.
pub(crate) unsafe fn event_destroy(ev: sys::CUevent) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuEventDestroy", unsafe { cdr::event::destroy(ev) })
}

/// `cuEventRecord` of `ev` on `s`.
///
/// # Safety
/// `ev` and `s` are live and belong to the same context, which is current.
pub(crate) unsafe fn event_record(ev: sys::CUevent, s: sys::CUstream) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuEventRecord", unsafe { cdr::event::record(ev, s) })
}

/// `cuEventQuery`: whether the work before `ev`'s last record is complete
/// (never blocks; an event never recorded counts as complete).
///
/// # Safety
/// `ev` is a live event whose context is current (or pushed).
pub(crate) unsafe fn event_query(ev: sys::CUevent) -> CuResult<bool> {
    // SAFETY: the caller's contract.
    match unsafe { cdr::event::query(ev) } {
        Ok(()) => Ok(true),
        Err(cdr::DriverError(sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
        Err(e) => named("cuEventQuery", Err(e)),
    }
}

/// `cuEventElapsedTime`: milliseconds from `start` to `end`.
///
/// # Safety
/// Two live timing events of the current context.
pub(crate) unsafe fn event_elapsed_ms(start: sys::CUevent, end: sys::CUevent) -> CuResult<f32> {
    // SAFETY: the caller's contract.
    named("cuEventElapsedTime", unsafe {
        cdr::event::elapsed(start, end)
    })
}

/// `cuIpcGetEventHandle`: the 64 bytes that name `ev` to another process
/// (the driver refuses an event made without `CU_EVENT_INTERPROCESS`).
///
/// # Safety
/// `ev` is a live event.
pub(crate) unsafe fn ipc_get_event_handle(ev: sys::CUevent) -> CuResult<[u8; 64]> {
    let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
    // SAFETY: valid out-pointer; the caller's contract for `ev`.
    check("cuIpcGetEventHandle", unsafe {
        sys::cuIpcGetEventHandle(&mut h, ev)
    })?;
    Ok(h.reserved.map(|c| c as u8))
}

/// `cuIpcOpenEventHandle`: open another process's event in the current
/// context (destroy it with [`event_destroy`]).
pub(crate) fn ipc_open_event_handle(handle: &[u8; 64]) -> CuResult<sys::CUevent> {
    let raw = sys::CUipcEventHandle {
        reserved: handle.map(|b| b as std::ffi::c_char),
    };
    let mut e = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the handle is passed by value and checked
    // by the driver (as is the current context).
    check("cuIpcOpenEventHandle", unsafe {
        sys::cuIpcOpenEventHandle(&mut e, raw)
    })?;
    Ok(e)
}

// ---------------------------------------------------------------- graphs

/// `cuGraphInstantiate` (no flags).
///
/// # Safety
/// `graph` is a live graph.
pub(crate) unsafe fn graph_instantiate(graph: sys::CUgraph) -> CuResult<sys::CUgraphExec> {
    // SAFETY: the caller's contract.
    named("cuGraphInstantiate", unsafe {
        cdr::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0))
    })
}

/// `cuGraphDestroy`.
///
/// # Safety
/// `graph` is a live graph, destroyed once.
pub(crate) unsafe fn graph_destroy(graph: sys::CUgraph) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuGraphDestroy", unsafe { cdr::graph::destroy(graph) })
}

/// `cuGraphExecDestroy` (deferred by the driver while it executes).
///
/// # Safety
/// `exec` is a live executable graph, destroyed once.
pub(crate) unsafe fn graph_exec_destroy(exec: sys::CUgraphExec) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuGraphExecDestroy", unsafe {
        cdr::graph::exec_destroy(exec)
    })
}

/// `cuGraphLaunch` of `exec` on `s`.
///
/// # Safety
/// `exec` and `s` are live and belong to the current context; what the
/// graph's nodes touch is alive until it completes.
pub(crate) unsafe fn graph_launch(exec: sys::CUgraphExec, s: sys::CUstream) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named("cuGraphLaunch", unsafe { cdr::graph::launch(exec, s) })
}

// ------------------------------------------------------ modules, launches

/// `cuModuleLoadData` of a PTX text or cubin image in the current context.
///
/// # Safety
/// `image` is a NUL-terminated PTX text or an 8-byte-aligned ELF cubin,
/// alive for the call.
pub(crate) unsafe fn module_load_data(image: *const c_void) -> CuResult<sys::CUmodule> {
    // SAFETY: the caller's contract.
    named("cuModuleLoadData", unsafe { cdr::module::load_data(image) })
}

/// `cuModuleGetFunction`.
///
/// # Safety
/// `module` is loaded (never unloaded) in the current context.
pub(crate) unsafe fn module_get_function(
    module: sys::CUmodule,
    name: CString,
) -> CuResult<sys::CUfunction> {
    // SAFETY: the caller's contract.
    named("cuModuleGetFunction", unsafe {
        cdr::module::get_function(module, name)
    })
}

/// `cuLaunchKernel` of `f` on a 1-D grid with one pointer per parameter
/// (`params`) and no dynamic shared memory; the error names `call`.
///
/// # Safety
/// `f` and `s` belong to the current context; `params` holds one pointer per
/// declared parameter, each to a value of the parameter's type; every
/// address passed as a parameter stays valid for what the kernel does with
/// it until it completes.
pub(crate) unsafe fn launch_kernel(
    f: sys::CUfunction,
    grid: u32,
    block: u32,
    s: sys::CUstream,
    params: &mut [*mut c_void],
    call: &'static str,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    named(call, unsafe {
        cdr::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, s, params)
    })
}

/// `cuLaunchKernel` of `f` on a 1-D grid with the parameters packed in one
/// buffer (`CU_LAUNCH_PARAM_BUFFER_POINTER`, which cudarc's launch cannot
/// pass) and no dynamic shared memory; the error names `call`.
///
/// # Safety
/// `f` and `s` belong to the current context; `args` are the kernel's
/// parameters in order, every one a 64-bit value (so the packed layout has no
/// padding), and every address passed that way stays valid for what the
/// kernel does with it until it completes.
pub(crate) unsafe fn launch_kernel_packed(
    f: sys::CUfunction,
    grid: u32,
    block: u32,
    s: sys::CUstream,
    args: &[u64],
    call: &'static str,
) -> CuResult<()> {
    let mut size: usize = std::mem::size_of_val(args);
    let mut extra: [*mut c_void; 5] = [
        sys::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT as usize as *mut c_void,
        args.as_ptr() as *mut c_void,
        sys::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT as usize as *mut c_void,
        (&mut size as *mut usize).cast(),
        sys::CU_LAUNCH_PARAM_END_AS_INT as usize as *mut c_void,
    ];
    // SAFETY: `extra` is the driver's END-terminated list naming a buffer of
    // `size` bytes that lives across the call (the driver copies it before
    // returning); the caller's contract for the rest.
    check(call, unsafe {
        sys::cuLaunchKernel(
            f,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            s,
            std::ptr::null_mut(),
            extra.as_mut_ptr(),
        )
    })
}

#[cfg(test)]
mod tests;
