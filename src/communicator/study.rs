//! The communicator's study views: timing its calls and taking each timed
//! call's plan and times (what `trace --timeline` draws, for programs and
//! the Python package).

use super::{Communicator, EngineCell, Inner};
use crate::error::{Error, Result};

impl<S: super::CallShape> Communicator<S> {
    /// The engine underneath, for the study views (every rank from one
    /// caller, or this process's rank); per-rank handles refuse with the
    /// reason.
    fn study_engine(&mut self, what: &str) -> Result<&mut EngineCell> {
        match &mut self.inner {
            Inner::AllRanks(slot) | Inner::Process { engine: slot, .. } => Ok(slot),
            Inner::PerRank(_) => Err(Error::BadArgument(format!(
                "{what} is not available on a per-rank handle: ask the communicator that runs every rank, before into_ranks"
            ))),
        }
    }

    /// Time every op of the calls that follow (`on`), or stop. Timed calls
    /// are slower (the timeline's cost: docs/DESIGN.md).
    pub fn set_timing(&mut self, on: bool) -> Result<()> {
        self.study_engine("timing")?.with(|e| e.set_timing(on))
    }

    /// The calls timed since the last take, each with the plan that ran
    /// and every op's times on this process's ranks (the CPU: host
    /// timestamps; CUDA: the timeline's source, CUPTI or events), oldest
    /// first. Waits for the calls to end.
    pub fn take_timed_calls(
        &mut self,
    ) -> Result<
        Vec<(
            std::sync::Arc<crate::plan::Plan>,
            crate::backend::CallTimeline,
        )>,
    > {
        self.study_engine("a timeline")?.with(|e| {
            e.synchronize()?;
            e.take_timed_calls()
        })
    }
}
