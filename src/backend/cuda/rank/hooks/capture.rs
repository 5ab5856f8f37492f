//! The capture layer: a per-GPU graph takes only compute-lane work without
//! events (one stream, nothing another rank waits on or records).

use super::super::issue::StepAt;
use super::super::lower::{DriverOp, Lowered, Wait};
use crate::error::{Error, Result};
use crate::plan::Lane;

/// Refuse op `at` in a per-GPU capture if it cannot be captured there.
pub(super) fn check(
    low: &Lowered,
    mut waits: impl Iterator<Item = Wait>,
    at: &StepAt,
) -> Result<()> {
    let why = if low.lane != Lane::Compute {
        "runs on a second stream"
    } else if waits.next().is_some() {
        "waits on an event"
    } else if low.record.is_some() {
        "records an event"
    } else if matches!(low.work, DriverOp::Send { .. }) {
        "sends to another node"
    } else {
        return Ok(());
    };
    Err(Error::Unsupported(
        format!(
            "CUDA graph capture of {} ({} {why})",
            at.plan.name,
            at.desc()
        ),
        "cuda",
    ))
}
