//! What a launcher of rank processes needs from the job's store (`ringreduce
//! launch` is one; a user's own launcher could be another): create the
//! store the ranks join (`RINGREDUCE_STORE`), give the run up when a rank
//! dies, remove the store at the end, and clean up after runs that were
//! killed. The store's protocol itself (keys, joins, waits) stays private.

use super::store::Store;
use crate::error::Result;
use std::path::Path;
use std::time::Duration;

pub use super::store::{default_base, sweep_cuda_ipc_files, sweep_stale};

/// A job's store, held by the launcher that created it.
#[derive(Debug)]
pub struct LaunchStore(Store);

impl LaunchStore {
    /// Create the store of run `run` of `size` ranks in `dir`, which must
    /// not exist or be empty; every wait on it is bounded by `timeout`.
    pub fn create(dir: &Path, run: &str, size: usize, timeout: Duration) -> Result<LaunchStore> {
        Store::create(dir, run, size, timeout).map(LaunchStore)
    }

    /// Give up the run: every rank's next check sees `why` (the first
    /// reason written wins).
    pub fn abort(&self, why: &str) {
        self.0.abort(why);
    }

    /// Give up the run because rank `rank` ended badly (`why`: how, e.g.
    /// "exited with status 101"): every other rank's error names it
    /// ([`Error::PeerFailed`](crate::Error::PeerFailed)).
    pub fn abort_for(&self, rank: usize, why: &str) {
        self.0.abort_for(rank, why);
    }

    /// Remove the store and everything in it.
    pub fn remove(&self) {
        self.0.remove();
    }
}
