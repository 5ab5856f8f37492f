//! The resident one-shot (`oneshot:resident`), 2 ranks: the flag one-shot's
//! exchange ([`super::flag`]), issued without a launch. Each rank's GPU runs
//! one exchange kernel that stays resident and serves calls from a ring of
//! descriptors in host-mapped memory; a call is one 64-byte descriptor
//! written by the rank thread. The plan is the flag plan with its exchanges
//! marked [`crate::plan::Exchange::resident`]; the data flow, the scratch
//! halves and the hand-shake are the flag one-shot's.
//!
//! What it costs: the kernel holds its blocks (a few SMs) and polls host
//! memory over PCIe while the engine is between resident calls. The CUDA
//! backend stops it before anything else touches the rank's streams (any
//! other collective, an NCCL call, a load, a synchronize), so it only stays
//! up across an unbroken run of resident calls. It is not the default:
//! `auto` keeps launching.

use super::oneshot::ChainPath;
use super::{Algorithm, Path};
use crate::plan::{Plan, Shape};
use std::sync::Arc;

/// The largest call it takes: 16 blocks of the exchange grid. Every block
/// polls host memory while idle, so the grid is kept small.
pub const RESIDENT_MAX_BYTES: usize = 256 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident;

impl Algorithm for Resident {
    fn name(&self) -> String {
        "oneshot:resident".into()
    }

    fn supports(&self, shape: &Shape) -> Result<(), String> {
        super::flag::two_rank_all_reduce("oneshot:resident", shape)?;
        let bytes = shape.count.saturating_mul(shape.elem_size);
        if bytes > RESIDENT_MAX_BYTES {
            return Err(format!(
                "it takes calls of at most {} (every block of its grid polls host memory while \
                 idle); use oneshot:flag or auto for {}",
                crate::size::format_bytes(RESIDENT_MAX_BYTES as u64),
                crate::size::format_bytes(bytes as u64)
            ));
        }
        Ok(())
    }

    fn path(&self, shape: &Shape) -> Box<dyn Path> {
        Box::new(ChainPath::new(*shape, plan))
    }

    fn load(&self) -> Option<super::Load> {
        Some(super::Load::Everyone)
    }
}

pub fn parse(s: &str) -> Option<Result<Arc<dyn Algorithm>, String>> {
    (s == "oneshot:resident").then(|| Ok(Arc::new(Resident) as Arc<dyn Algorithm>))
}

/// The resident plan on scratch half `parity` (see [`super::flag::plan`]).
pub fn plan(shape: &Shape, parity: usize, fenced: bool) -> Plan {
    super::flag::build("oneshot:resident", shape, parity, fenced, true)
}
