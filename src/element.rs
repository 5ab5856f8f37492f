//! Element types and reduction operations.
//!
//! The engine is generic over the element type; adding a dtype means adding an
//! [`Element`] impl here and a PTX kernel for the CUDA backend.

use std::fmt::Debug;

/// A reduction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReduceOp {
    #[default]
    Sum,
}

impl ReduceOp {
    /// Name as nccl-tests prints it.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
        }
    }
}

/// An element type the engine can reduce.
pub trait Element: Copy + Send + Sync + Default + PartialEq + PartialOrd + Debug + 'static {
    /// Name as nccl-tests prints it (`float`).
    const NAME: &'static str;
    /// Size in bytes.
    const SIZE: usize = std::mem::size_of::<Self>();
    /// Apply `op`.
    fn reduce(op: ReduceOp, a: Self, b: Self) -> Self;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    /// Raw bits, for bitwise comparison.
    fn bits(self) -> u64;
}

impl Element for f32 {
    const NAME: &'static str = "float";
    #[inline]
    fn reduce(op: ReduceOp, a: f32, b: f32) -> f32 {
        match op {
            ReduceOp::Sum => a + b,
        }
    }
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
