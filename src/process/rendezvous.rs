//! A job bootstrapped through the caller's key-value store instead of a
//! store directory: what `torch.distributed` hands a process group (its
//! `Store`), or any other set/get service the ranks share.
//!
//! Only the join goes through it. Rank 0 creates the job's control segment
//! and sets one key, `CONTROL_KEY`, to the run's id and the segment's
//! handle (`/proc/<pid>/fd/<n>`, open until every rank mapped it); every
//! other rank gets that key (waiting at most the job's timeout) and maps
//! the segment. From then on everything a store directory would carry
//! lives in the segment: who runs (each rank's process and state), the
//! failure record, the small all-gathers (the NCCL id among them). So the
//! ranks share one machine, as every job of shared-memory ranks does, and
//! no directory is created or left behind.

use crate::error::Result;
use std::sync::Arc;
use std::time::Duration;

/// The key rank 0 sets: `<run id>\n<control segment handle>`.
pub(crate) const CONTROL_KEY: &str = "ringreduce/control";

/// A key-value store the ranks of a job share (the caller's).
pub trait KeyValue: Send + Sync {
    /// Set `key` to `value`, visible to every rank.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;
    /// `key`'s value once a rank set it, waiting at most `timeout`;
    /// `None` when it did not come in time (the job then times out naming
    /// the rank and the key), an error when the store itself failed.
    fn get(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>>;
    /// What the store is, for messages (`torch.distributed Store`, ...).
    fn describe(&self) -> String;
}

/// The caller's store, as a [`JobSpec`](super::JobSpec) holds it: shared,
/// and equal only to itself.
#[derive(Clone)]
pub struct SharedKeyValue(pub Arc<dyn KeyValue>);

impl std::fmt::Debug for SharedKeyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedKeyValue({})", self.0.describe())
    }
}

impl PartialEq for SharedKeyValue {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedKeyValue {}

/// What rank 0 sets under `CONTROL_KEY`.
pub(crate) fn encode(run: &str, handle: &std::path::Path) -> Vec<u8> {
    let mut v = run.as_bytes().to_vec();
    v.push(b'\n');
    v.extend_from_slice(handle.as_os_str().as_encoded_bytes());
    v
}

/// The run id and the handle from `CONTROL_KEY`'s value; `None` when it
/// is not what rank 0 of a ringreduce job sets.
pub(crate) fn decode(v: &[u8]) -> Option<(String, std::path::PathBuf)> {
    use std::os::unix::ffi::OsStringExt;
    let nl = v.iter().position(|&b| b == b'\n')?;
    let run = std::str::from_utf8(&v[..nl]).ok()?;
    let handle = &v[nl + 1..];
    if run.is_empty() || handle.is_empty() || !handle.starts_with(b"/") {
        return None;
    }
    let path = std::path::PathBuf::from(std::ffi::OsString::from_vec(handle.to_vec()));
    Some((run.to_string(), path))
}

/// A key-value store in this process (threads as ranks, for tests and for
/// programs that run a job's ranks as threads of one process).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct LocalKeyValue {
    map: std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>,
    changed: std::sync::Condvar,
}

#[cfg(test)]
impl KeyValue for LocalKeyValue {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(key.to_string(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }

    fn get(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = m.get(key) {
                return Ok(Some(v.clone()));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            m = self
                .changed
                .wait_timeout(m, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn describe(&self) -> String {
        "a key-value store in this process".into()
    }
}

#[cfg(test)]
mod tests;
