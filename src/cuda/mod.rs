//! The CUDA layer: every `unsafe` line of the crate lives under this module.
//!
//! It wraps the driver API (loaded at run time by cudarc, never linked) and
//! NCCL (`nccl`, with the `nccl` feature; loaded at run time) in checked functions and RAII handles,
//! in the manner of cudarc's sys / result / safe layers:
//!
//! * `result`: the result layer, one checked function per driver call (the
//!   FFI and its safety contract in one place; cudarc's own result layer
//!   where it has the call). The modules below call the driver only
//!   through it.
//! * `driver`: loading the driver, devices, peer access, and
//!   `with_device`, which binds a device's primary context to the calling
//!   thread and hands the closure a `Ctx<'id>` whose lifetime `'id` is a
//!   *brand*: every stream, buffer, event and kernel made from it carries the
//!   same `'id`, and the closure is generic over `'id`, so two devices'
//!   brands can never unify. Launching a kernel of device 0 on a buffer of
//!   device 1, or recording device 1's event on device 0's stream, does not
//!   compile. The branded handles are also `!Send`: they stay on the thread
//!   that owns the context.
//! * `memory`: device buffers (bytes; typed data crosses only as bytes, so
//!   no bit pattern the device writes can be undefined behaviour on the
//!   host), peer tokens, host-mapped control words.
//! * `stream`: streams, events, copies, CUDA graphs.
//! * `kernels`: the PTX modules ([`KernelModule`]) and the kernel ABIs
//!   (reduce, exchange, the LL and Simple rings).
//! * `order` and `work`: stream-ordered calls (completion events any thread
//!   can hold, `DoneEvent`; another library's stream, [`RawStream`]) and
//!   kernels a caller runs on a rank's work stream (its own PTX, through
//!   the `unsafe` `WorkKernel::from_ptx`, or `compute_module`).
//! * `nccl` (the `nccl` feature): the NCCL binding; `nccl::Nccl` is what
//!   `Engine::nccl_init` takes.
//!
//! Other ranks refer to a rank's memory and events only through exported
//! tokens (`PeerBuf`, `RemoteEvent`, `PeerCtx`) which can be sent between
//! threads; ranks in other processes, through the same tokens opened from
//! CUDA IPC handles (`IpcMemHandle`, `IpcEventHandle`). A token holds a
//! weak reference to its allocation: using
//! it after the owner freed the memory is an error, not a write into freed
//! memory. Drop never panics: it ignores driver errors (there is nobody to
//! tell).
//!
//! Lifecycle rule (kept by the CUDA backend): memory is only freed or
//! replaced after every rank has drained all of its streams, so no copy or
//! kernel issued by a peer can still be using it.

#![allow(unsafe_code)]

#[cfg(feature = "profiling")]
pub(crate) mod cupti;
pub(crate) mod driver;
pub(crate) mod foreign;
pub(crate) mod kernels;
pub(crate) mod memory;
#[cfg(feature = "nccl")]
pub mod nccl;
#[cfg(feature = "profiling")]
pub(crate) mod nvtx;
pub(crate) mod order;
pub(crate) mod result;
pub(crate) mod stream;
pub(crate) mod work;

pub use crate::work::KernelModule;

pub(crate) use driver::{
    can_access_peer, driver_init_ms, keep_context_retained, with_device, Ctx, PeerCtx,
};
pub use driver::{driver, p2p_info, P2pInfo};
pub use driver::{DeviceInfo, DriverInfo};
pub use foreign::{device_args, DeviceArgs, DeviceSpan};
pub(crate) use kernels::{Kernel, EXCHANGE_MAX_BLOCKS, SIMPLE_MAX_TILES};
#[cfg(feature = "nccl")]
pub(crate) use memory::NcclRegistration;
pub(crate) use memory::{DevBuf, HostMapped, IpcMemHandle, PeerBuf};
pub(crate) use order::DoneEvent;
pub use order::RawStream;
pub(crate) use stream::{Event, Graph, IpcEventHandle, PeerCopy, RemoteEvent, Stream, TimingEvent};
pub(crate) use work::LoadedWork;

/// A failed driver call: the call and the driver's message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{call}: {message}")]
pub struct CudaError {
    /// The driver call that failed.
    pub call: &'static str,
    /// The driver's message.
    pub message: String,
}

/// A driver layer result.
pub(crate) type CuResult<T> = Result<T, CudaError>;

impl CudaError {
    /// This failure as the crate's error, on rank `rank`'s GPU `device`.
    pub(crate) fn at(self, rank: usize, device: usize) -> crate::error::Error {
        crate::error::Error::Cuda {
            rank,
            device,
            call: self.call,
            message: self.message,
            step: None,
        }
    }
}

pub(crate) fn err(call: &'static str, message: impl Into<String>) -> CudaError {
    CudaError {
        call,
        message: message.into(),
    }
}
