//! Plans: what each rank does in one collective call.
//!
//! An algorithm ([`crate::algo`]) builds a [`Plan`] with a `PlanBuilder`;
//! the validator ([`Plan::validate`]), the trace, the timeline, the CPU
//! backend and the CUDA backend all read that plan and nothing else.
//!
//! * [`ir`]: the data (ops, lanes, signals, buffers, shapes).
//! * [`builder`]: how algorithms make plans.
//! * [`interp`]: the one definition of what an op does to memory, applied to
//!   pluggable memory (symbolic here, real buffers in the CPU backend).
//! * [`validate`]: the static checks.

pub mod builder;
pub mod call;
pub mod interp;
pub mod ir;
pub mod validate;

/// Most ranks an engine runs and a job may have (one host thread each;
/// plans grow with the square of the rank count).
pub const MAX_RANKS: usize = 256;

pub(crate) use builder::local_only;
pub(crate) use builder::PlanBuilder;
pub use call::{Binding, BufId, Call};
pub use ir::{
    Buf, Collective, Group, Kernel, KernelKind, Label, Lane, Op, OpKind, Plan, ReduceStep, Region,
    Shape, Signal, SignalId, SignalKind, Traffic, LANES,
};
