//! ringreduce: a hand-written Ring AllReduce engine.
//!
//! * [`schedule`]: the pure ring schedule (chunks, per-step indices, traffic).
//! * [`plan`] and [`algo`]: algorithms (ring, parameter server, one-shot) as
//!   per-rank op lists with explicit cross-rank signals, statically validated.
//! * [`backend`]: one trait, one file per backend (CPU threads, CUDA GPUs).
//! * [`cuda`]: the only place with `unsafe` code (driver API, PTX, NCCL).
//! * [`engine`]: the reusable all-reduce engine.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]
// Rank-indexed loops read like the algorithm (rank r, step s); keep them.
#![allow(clippy::needless_range_loop)]

pub mod algo;
pub mod backend;
pub mod bench;
pub mod cuda;
pub mod element;
pub mod engine;
pub mod error;
pub mod plan;
pub mod pool;
pub mod report;
pub mod schedule;
pub mod size;
pub mod sync;
pub mod theory;
pub mod trace;
pub mod verify;

pub use algo::{Algo, AlgoChoice};
pub use backend::BackendChoice;
pub use element::{DataType, Element, ReduceOp};
pub use engine::{Engine, EngineConfig};
pub use error::{Error, Result};
