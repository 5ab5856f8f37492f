//! Peer exchanges: how a CUDA rank reaches its peers.
//!
//! The CUDA backend ([`super::CudaBackend`]) is one front end ([`Front`]:
//! its rank threads, the calls they keep, the launch log) and every
//! capability, beside a [`PeerExchange`] it holds (a boxed trait object:
//! the backend is one type whichever way its ranks meet), the way the CPU
//! backend is one engine over a [`crate::transport::Transport`]:
//!
//! | exchange | ranks | a peer's buffers and flags | a peer's events | the host board |
//! |---|---|---|---|---|
//! | [`InProcess`](threads::InProcess) | rank threads of one process | device pointers, peer access enabled at set-up | event tokens handed between threads | a board in this process, grown with the events |
//! | [`Ipc`](ipc::Ipc) | one rank per process ([`crate::process`]) | CUDA IPC memory handles, all-gathered through the job and opened | interprocess events, all-gathered and opened | the job's control segment (fixed size) |
//!
//! The model is NCCL's `ncclTransport` table (a connect step at set-up and a
//! data path per transport). Here the data path is the same for both: the
//! rank's issue path takes the opened [`crate::cuda::PeerBuf`]s and
//! [`crate::cuda::RemoteEvent`]s whichever way they were opened. What
//! differs, and is all an exchange implements:
//!
//! * **Reaching the peers' memory, flags and events**: set-up (each
//!   exchange's constructor of [`super::CudaBackend`]),
//!   [`PeerExchange::ensure_events`], [`PeerExchange::reserve`] and
//!   [`PeerExchange::release`]. Between processes these are collective over
//!   the job (all-gather the handles, barrier before anything is closed or
//!   freed: an exported allocation is never freed while a peer has it
//!   open); in one process the calling thread hands the tokens over.
//! * **Peers' health and teardown**: [`PeerExchange::drain`] (bounded; in
//!   one process every rank together, between processes this rank with the
//!   job's health looked at while it waits), [`PeerExchange::teardown`]
//!   (drain every GPU before anything is freed; a leaked rank frees
//!   nothing). Between processes a failure is also recorded on the job's
//!   board for the peers waiting for this rank (`Front::failed`).
//! * **Ordering host accesses against peers in other processes**:
//!   [`PeerExchange::begin`], [`PeerExchange::before_write`] (see
//!   [`crate::process::reads`]; every host write lands before it returns).
//! * **Capability answers**: [`PeerExchange::ordered`] and
//!   [`PeerExchange::joint_graphs`] refuse with the reason what the
//!   exchange cannot do; [`PeerExchange::timelines`] says what the ranks'
//!   clocks are (one process or one per process).
//!
//! Every method is called from the backend's calling thread only, between
//! calls, and every wait is bounded by the engine's timeout.

mod ipc;
mod threads;

use super::rank::activity::RankTiming;
use super::Front;
use crate::backend::{BufId, Call, CallTimeline};
#[cfg(feature = "nccl")]
use crate::cuda::nccl;
use crate::error::Result;

/// How a CUDA rank reaches its peers (see the module doc). The backend
/// holds its exchange beside its [`Front`] (the rank threads and what they
/// share) and hands the front to each method that runs work on the rank
/// threads or keeps the peers' tokens ([`super::Peers`]) up to date; an
/// exchange never calls back into the backend.
pub(crate) trait PeerExchange: Send + 'static {
    /// Grow every local rank's events to cover `signals` signals and hand
    /// each rank its peers' events and the board.
    fn ensure_events(&mut self, front: &mut Front, signals: usize) -> Result<()>;

    /// Wait (bounded) until the local ranks' streams are idle.
    fn drain(&mut self, front: &mut Front) -> Result<()>;

    /// Make every local rank's buffer `id` at least `bytes[rank]` bytes and
    /// hand every rank the peers' tokens. Collective over the job.
    fn reserve(&mut self, front: &mut Front, id: BufId, bytes: &[usize]) -> Result<()>;

    /// Free buffer `id` on every local rank once no peer holds it.
    /// Collective over the job.
    fn release(&mut self, front: &mut Front, id: BufId) -> Result<()>;

    /// The backend is dropped: drain, then let memory go only where no GPU
    /// and no peer may still use it.
    fn teardown(&mut self, front: &mut Front);

    /// Call `gen` starts: say so, and wait (bounded) for peers whose input
    /// it reads.
    fn begin(&mut self, _front: &Front, _call: &Call, _gen: u64) -> Result<()> {
        Ok(())
    }

    /// Call `gen` was handed to the rank threads.
    fn issued(&mut self, _gen: u64) {}

    /// Before the host overwrites buffer `id`: wait (bounded) until every
    /// peer that read it drained the call in which it did.
    fn before_write(&mut self, _id: BufId) -> Result<()> {
        Ok(())
    }

    /// The NCCL unique id every rank initializes its communicator with.
    #[cfg(feature = "nccl")]
    fn nccl_id(&mut self, front: &Front, lib: &nccl::Nccl) -> Result<nccl::UniqueId>;

    /// Whether stream-ordered calls work over this exchange; the reason if
    /// not.
    fn ordered(&self) -> Result<()>;

    /// Whether a plan ordered by host-published events (`plan`) can be
    /// captured as one joint graph across the ranks; the reason if not.
    fn joint_graphs(&self, plan: &str) -> Result<()>;

    /// The timed calls' timelines from every local rank's timings (call k
    /// is entry k of each rank's list), with what the clocks are; `nccl`:
    /// the NCCL calls' (one op each).
    fn timelines(
        &self,
        calls: Vec<(String, f64)>,
        per_rank: Vec<RankTiming>,
        nccl: bool,
    ) -> Vec<CallTimeline>;
}

#[cfg(test)]
mod tests;
