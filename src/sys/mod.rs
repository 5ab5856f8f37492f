//! Operating-system primitives of the multi-process mode: shared-memory
//! mappings ([`shm`]) and processes and signals ([`proc`]); one
//! file-system call for the output files ([`fs`]); another runtime's host
//! buffers as slices for one call ([`foreign`]); and, with the `mpi`
//! feature, the MPI calls of the network transport (`mpi`).
//!
//! With [`crate::cuda`], this is the only place with `unsafe` code. Each
//! `unsafe` block says why it is sound (`// SAFETY:`), and everything it
//! exports is a safe function but [`foreign::host_slices`], whose contract
//! (memory another runtime owns, alive and unshared for the call) only its
//! caller can keep. Why a second module rather than putting this
//! under `src/cuda/`: none of it is CUDA, and the CPU backend (which CI
//! runs) depends on it, also in a build without a GPU.
//!
//! # The trust boundary of shared memory
//!
//! A [`shm::Mapping`] is a nameless shared segment (a `memfd`, exported as
//! a handle only the user's processes can open, see [`shm`]) mapped
//! `MAP_SHARED` into every rank process of the job. Rust cannot see the
//! other processes, so the safe API rests on a protocol the whole crate
//! keeps, the same way `memmap2`'s `MmapMut` rests
//! on nobody else writing the file:
//!
//! * control words (signals, barriers, mailboxes, the failure record) are
//!   only ever accessed as [`AtomicU64`](std::sync::atomic::AtomicU64) by
//!   every process ([`shm::Mapping::words`]), so they cannot race;
//! * buffer bytes ([`shm::Mapping::bytes_mut`]) are written by at most one
//!   process at a time and never read while written: the plan's signals
//!   order every access to them, exactly as they order the GPU's accesses
//!   to peer memory (the plan validator checks that ordering);
//! * segments are never truncated while mapped (a shorter one would turn
//!   an access into `SIGBUS`): a buffer that grows is a new segment;
//! * a collective of the network library reduces buffer bytes in place
//!   (`mpi`'s `Mpi::allreduce_mapped`, the rail of `hier:G:mpi`) only while
//!   this process holds them exclusively; if its wait fails, the library
//!   may write them later, so the segment is kept mapped for good
//!   ([`shm::Mapping::keep_mapped`]) and the failed call's engine refuses
//!   every later call.

#![allow(unsafe_code)]

pub mod foreign;
pub mod fs;
pub mod lend;
/// The `mpi` feature's own MPI binding.
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod proc;
pub mod shm;
