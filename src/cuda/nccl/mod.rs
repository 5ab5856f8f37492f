//! A small, hand-written runtime binding of NCCL.
//!
//! The library is opened with `libloading` at run time (never linked), so the crate builds
//! and runs its CPU paths on machines without NCCL. Layers:
//!
//! * `discover`: finding `libnccl.so.2` (`--nccl-lib`, `$NCCL_HOME`, the dynamic linker's
//!   path, Python wheels); a failed search lists every candidate tried
//!   ([`NcclError::NotFound`]).
//! * `binding`: the loaded library ([`Nccl`]), its resolved entry points, communicators
//!   (`Comm`), `UniqueId` and [`NcclError`]. Every symbol is resolved once at load into a
//!   plain function pointer; the library is never closed; a `Comm` is driven only by the
//!   library that made it and is `Send + !Sync`.
//! * `types`: values and checks that need neither the library nor a GPU: [`Version`],
//!   [`ResultCode`], the `datatype` and `redop` values and their names.
//!
//! The crate's engine drives it (`Engine::nccl_init`, the `nccl` contender); what is public
//! here is loading it and its errors.
//!
//! Bound: `ncclGetVersion`, `ncclGetUniqueId`, `ncclCommInitRank`, `ncclCommDestroy` (on
//! drop), `ncclCommAbort`, `ncclCommGetAsyncError`, `ncclGetErrorString`, `ncclGetLastError`,
//! `ncclGroupStart`, `ncclGroupEnd`, `ncclAllReduce`, `ncclReduceScatter`,
//! `ncclAllGather`, and for registered and symmetric buffers `ncclCommRegister`,
//! `ncclCommDeregister` (2.19+), `ncclCommWindowRegister`, `ncclCommWindowDeregister`,
//! `ncclMemAlloc` and `ncclMemFree` (2.27+). Entry points older NCCLs lack (all but the
//! first eight) are optional: using an absent one is [`NcclError::Unavailable`], naming the
//! NCCL version.
//!
//! Datatypes and reduction operations are the plain `ncclDataType_t` / `ncclRedOp_t` values
//! (`i32`); collectives check them against the loaded version before calling NCCL.

mod binding;
mod discover;
mod error;
mod types;

#[cfg(test)]
mod testutil;

pub(crate) use binding::{Comm, NcclMem, Registered, Registration, UniqueId};
pub use binding::{Nccl, NcclError};
pub use types::{ResultCode, Version};
