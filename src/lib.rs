//! ringreduce: a hand-written Ring AllReduce engine.
//!
//! * [`schedule`]: the pure ring schedule (chunks, per-step indices, traffic).
//! * [`plan`]: per-rank op lists with explicit cross-rank signals; the one
//!   interpreter of what an op does; the static validator.
//! * [`algo`]: the algorithms (ring, one-shots, parameter server), one file
//!   each, that build plans.
//! * [`backend`]: one small trait, one file per backend (CPU threads, CUDA
//!   GPUs), optional capabilities (NCCL, graphs, profiling) as extension
//!   traits.
//! * [`cuda`] and [`sys`]: the only places with `unsafe` code (driver API,
//!   PTX kernels, NCCL binding; shared memory and signals).
//! * [`engine`]: the reusable engine: plan cache, buffers, dispatch; the
//!   typed API ([`Engine<T>`]) and the per-rank call style.
//! * [`process`]: one rank per process: the job's store and shared control
//!   segment, and the per-process communicator ([`Comm<T>`]).
//! * [`element`] and [`verify`]: data types and ops with NCCL's semantics,
//!   inputs and checks.
//! * [`param`]: every environment variable ringreduce reads, declared once
//!   (type, range, default); no other module reads the environment.
//! * With the default `cli` feature: the command line's commands ([`cli`]),
//!   measurement ([`bench`]), reports ([`report`]) and timelines of real
//!   runs ([`timeline`]).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]
// Rank-indexed loops read like the algorithm (rank r, step s); keep them.
#![allow(clippy::needless_range_loop)]

pub mod algo;
pub mod backend;
pub mod cuda;
pub mod element;
pub mod engine;
pub mod error;
pub mod fault;
pub mod param;
pub mod plan;
pub mod pool;
pub mod process;
pub mod schedule;
pub mod size;
pub mod sync;
pub mod sys;
pub mod theory;
pub mod trace;
pub mod verify;
mod words;

#[cfg(feature = "cli")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod report;
#[cfg(feature = "cli")]
pub mod timeline;

pub use algo::AlgoChoice;
pub use backend::BackendChoice;
pub use element::{DataType, Element, ReduceOp};
pub use engine::{Engine, EngineConfig};
pub use error::{Error, Result};
pub use plan::Collective;
pub use process::Comm;
pub use sync::AbortHandle;
