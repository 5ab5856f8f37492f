//! The result layer's streams and what runs on them: events, graphs,
//! modules and kernel launches (see the parent module for the rules).

use super::named;
use crate::cuda::{check, CuResult};
use cudarc::driver::result as cdr;
use cudarc::driver::sys;
use std::ffi::{c_void, CString};

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
