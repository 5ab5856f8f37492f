//! ringreduce: a hand-written Ring AllReduce engine (Reduce-Scatter, then
//! All-Gather), with a CPU backend (threads) and a CUDA backend (copy
//! engines and hand-written PTX), checked against NCCL.
//!
//! ```
//! use ringreduce::{Communicator, EngineConfig, ReduceOp};
//!
//! // Three ranks on the CPU backend (EngineConfig::cuda(..) for GPUs),
//! // every rank from this caller: one buffer per rank.
//! let mut comm = Communicator::new(EngineConfig::cpu(3))?;
//! let mut bufs = vec![vec![1.0f32; 10], vec![2.0; 10], vec![3.0; 10]];
//! comm.all_reduce_in_place(&mut bufs, ReduceOp::Sum)?;
//! assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 6.0)));
//! # Ok::<(), ringreduce::Error>(())
//! ```
//!
//! This is the library alone. The measurement tools built on it (the
//! `ringreduce` command line: bench, reports and plots, timelines of real
//! calls, the overlap benchmark, compare, soak) are a crate of their own in
//! the same workspace, `ringreduce-tools` (`tools/`), the way nccl-tests
//! lives apart from NCCL: they use only what is public here, and a library
//! user gets none of their dependencies.
//!
//! What a user names is at the root: [`Communicator`], the one
//! communicator (every rank from one caller, one handle per rank thread,
//! or one rank per process under `ringreduce launch` or `mpirun`; the same
//! methods, generic in the element type) with its [`EngineConfig`] and
//! [`JobSpec`]; [`AbortHandle`], [`CallInfo`], the element types and ops
//! ([`DataType`], [`Element`], [`ReduceOp`], [`bf16`], [`f16`](struct@f16)),
//! [`Collective`], [`AlgoChoice`], [`BackendChoice`] and [`Error`]; and
//! [`Engine`], the engine underneath (untyped: each call takes its element
//! type), for stream-ordered calls and NCCL.
//!
//! To study the algorithm:
//!
//! * [`schedule`]: the pure ring schedule (chunks, per-step indices, traffic).
//! * [`plan`]: per-rank op lists with explicit cross-rank signals; the one
//!   interpreter of what an op does; the static validator.
//! * [`algo`]: the algorithms (ring, one-shots, parameter server,
//!   broadcast), one file each, that build plans ([`algo::plan_of`]: the
//!   plan a call would run); [`algo::cost`] states what each costs. The
//!   tools' `trace` prints a plan step by step and `theory` prices it.
//!
//! The layers below:
//!
//! * [`communicator`]: [`Communicator`], the calls' descriptors, their
//!   agreement across ranks, and the per-rank call style's rendezvous.
//! * [`engine`]: the reusable engine ([`engine::Engine`]): plan cache,
//!   buffers, dispatch; each call typed by its parameter, the engine's own
//!   buffers by the [`engine::TypedShape`] a load returns.
//! * [`backend`]: the small trait the engine drives, its optional
//!   capabilities (NCCL, graphs, profiling, stream-ordered calls in
//!   [`backend::ordered`]) and the types they take. The backends themselves
//!   (one CPU backend, the CUDA backend) are private.
//! * `transport` (private): how a rank reaches its peers' buffers, signals
//!   and the job's host board. The CPU backend runs over either CPU
//!   transport: `Threads` (every rank a thread of this process) or `Shm`
//!   (one rank per process, buffers in memfd segments the peers map, the
//!   board in the job's control segment). CONTRIBUTING.md says how to add
//!   one.
//! * [`process`]: one rank per process: [`process::JobSpec`] (the job's
//!   store and shared control segment are private).
//! * `cuda` (with the `cuda` feature): what a user of the CUDA backend names
//!   (another library's stream for stream-ordered calls, a completion's
//!   event, a kernel module for the work stream, loading NCCL). The checked
//!   driver layer, the PTX kernels and the NCCL binding behind it are
//!   private; with the private `sys` module they are the only places with
//!   `unsafe` code.
//! * [`element`]: data types and ops with NCCL's semantics (the tools
//!   hold the inputs, references and checks).
//! * For programs around the library (a launcher, a benchmark): [`param`]
//!   (every environment variable, declared once), [`size`] (byte sizes as
//!   people write them), [`words`] (counted nouns, comma lists), [`os`]
//!   (signals and process groups, writable paths, host memory) and
//!   [`process::launch`] (the store a launcher creates).
//!
//! # Features
//!
//! * `cuda` (default): the CUDA backend (cudarc, the driver loaded at run
//!   time, never linked). Without it the library is CPU-only, with a
//!   handful of dependencies: [`BackendChoice::Cuda`] is [`Error::NoCuda`]
//!   ("built without the cuda feature"), `auto` runs on the CPU, and the
//!   items that exist only with CUDA (`cuda`, `backend::cuda::probe`,
//!   `After::Streams`, `Completion::done_event` and `::order_before`) are
//!   absent.
//! * `nccl` (implies `cuda`; the tools turn it on): NCCL on the engine's
//!   own buffers, the yardstick the tools compare against: the binding and
//!   its loader (`cuda::nccl`, libnccl loaded at run time by our own
//!   binding), `Engine::nccl_init`, `launch_nccl`, `nccl_graph_capture`,
//!   `launch_nccl_graph`, `take_nccl_timeline`, `launch_nccl_after`,
//!   `Engine::nccl_call` and `backend::NcclCall`. Without it the library
//!   holds no NCCL code and these items are absent.
//! * `profiling` (implies `cuda`; the tools turn it on): CUPTI's activity
//!   records as the timelines' source (`RINGREDUCE_CUPTI`; libcupti loaded
//!   at run time) and NVTX ranges per call and ring step while an NVTX
//!   tool listens. Without it the timelines come from CUDA events between
//!   the ops (their source line says why: "built without the profiling
//!   feature") and no CUPTI or NVTX code is built.
//! * `serde`: `serde::Serialize` on the library's plain data types.
//! * `mpi`: under `mpirun`/`srun`, ranks bootstrap through MPI (a world
//!   and a node communicator; `RINGREDUCE_RANKS_PER_NODE` makes several
//!   nodes of one machine) and both backends reach other nodes' ranks with
//!   MPI point-to-point (the CUDA backend through host memory;
//!   docs/SCALE-OUT.md). Needs an MPI's `mpicc` at build time; off by
//!   default.
//!
//! Every environment variable ringreduce reads is declared once, with its
//! type and range, in [`param`] (`ringreduce env` lists them).

#![deny(unsafe_op_in_unsafe_fn)]
// Every public item says what it is (CI's clippy denies the warning).
#![warn(missing_docs)]
#![deny(unsafe_code)]
// Rank-indexed loops read like the algorithm (rank r, step s); keep them.
#![allow(clippy::needless_range_loop)]

pub mod algo;
pub mod backend;
pub mod communicator;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod element;
pub mod engine;
pub mod error;
pub mod fault;
pub mod os;
pub mod param;
pub mod plan;
pub(crate) mod pool;
pub mod process;
pub mod schedule;
pub mod settings;
pub mod size;
pub(crate) mod sync;
pub(crate) mod sys;
pub(crate) mod transport;
pub mod words;
pub(crate) mod work;

pub use algo::AlgoChoice;
pub use backend::BackendChoice;
pub use communicator::{CallShape, Communicator, EveryRank, OneRank, RecvBufs, SendBufs};
pub use element::{bf16, f16, DataType, Element, ReduceOp};
pub use engine::{CallInfo, CallPath, DeviceBuffers, Engine, EngineConfig};
pub use error::{Error, ErrorKind, Result, WaitKind};
pub use plan::Collective;
pub use process::{JobSpec, KeyValue};
pub use sync::AbortHandle;
/// Another runtime's memory (a Python buffer) for one call: its host
/// buffers as slices (`sys::foreign`, the one `unsafe` entry for them).
pub mod foreign {
    pub use crate::sys::foreign::{check, host_slices, HostSpan, Slices};
}
