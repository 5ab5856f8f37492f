//! One rank per process of a job: how its calls are made to agree before
//! data moves, and its rank's part of each call.

use super::{barrier_info, desc, run_host, CallDesc, CallKind, HostCall};
use crate::element::{Element, ReduceOp};
use crate::engine::{CallInfo, Core, DeviceBuffers, Engine};
use crate::error::{Error, Result};
use crate::plan::Collective;
use crate::process::Job;
use std::sync::Arc;

/// One rank of a job: how its calls are made to agree before data moves.
#[derive(Debug)]
pub(crate) struct Agreement {
    job: Arc<Job>,
    check: bool,
    /// Calls made so far (for the messages).
    calls: std::sync::atomic::AtomicU64,
    /// Why the job's calls no longer line up, after a failed exchange.
    broken: std::sync::Mutex<Option<String>>,
}

/// Bytes of an encoded descriptor; an own error's text follows them.
const DESC_BYTES: usize = 56;

impl Agreement {
    pub(crate) fn new(job: Arc<Job>, check: bool) -> Agreement {
        Agreement {
            job,
            check,
            calls: std::sync::atomic::AtomicU64::new(0),
            broken: std::sync::Mutex::new(None),
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.job.rank()
    }

    pub(crate) fn job(&self) -> &Arc<Job> {
        &self.job
    }

    /// Before a call's data moves: every rank's descriptor and own verdict,
    /// all-gathered (unless the check is off: then this rank's own verdict
    /// alone). The same outcome on every rank: the lowest rank whose own
    /// arguments are wrong fails the call (its error for it,
    /// [`Error::PeerFailed`] for the others), else different descriptors
    /// are one [`Error::Mismatch`].
    pub(crate) fn agree(&self, core: &Core, desc: CallDesc, own: Result<()>) -> Result<()> {
        core.check_usable()?;
        let broken = || self.broken.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = broken().as_ref() {
            return Err(Error::Poisoned {
                reason: why.clone(),
            });
        }
        if !self.check {
            return own;
        }
        let me = self.rank();
        let mut payload = desc.encode();
        if let Err(e) = &own {
            payload.extend_from_slice(e.to_string().as_bytes());
        }
        let k = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let got = match self.job.allgather(
            &payload,
            &format!("the ranks' calls to agree ({desc}, call {k})"),
        ) {
            Ok(g) => g,
            Err(e) => {
                // The ranks' exchanges no longer line up: release the
                // others, and refuse the next calls.
                self.job.fail_with(&e);
                *broken() = Some(format!("the exchange of call {k} failed: {e}"));
                return Err(e);
            }
        };
        let decoded: Vec<(usize, std::result::Result<CallDesc, String>)> = got
            .iter()
            .enumerate()
            .map(|(q, b)| (q, CallDesc::decode(&b[..b.len().min(DESC_BYTES)])))
            .collect();
        let bad = got
            .iter()
            .enumerate()
            .find(|(q, b)| b.len() > DESC_BYTES && decoded.get(*q).is_some_and(|(_, d)| d.is_ok()));
        if let Some((q, b)) = bad {
            return Err(match own {
                Err(e) if q == me => e,
                _ => Error::peer_failed(
                    q,
                    &String::from_utf8_lossy(&b[DESC_BYTES..]),
                    format!("its arguments to the call rank {me} made"),
                ),
            });
        }
        desc::agree_decoded(&decoded)
    }

    /// Every rank of the job reaches this point before any goes on.
    pub(crate) fn barrier(&self, core: &Core) -> Result<CallInfo> {
        if self.check {
            self.agree(core, CallDesc::barrier(), Ok(()))?;
        } else {
            core.check_usable()?;
            self.job.barrier("Communicator::barrier")?;
        }
        Ok(barrier_info(self.job.size()))
    }
}

/// This process's rank's part of a host-slice collective.
pub(crate) fn process_host<T: Element>(
    e: &mut Engine<T>,
    a: &Agreement,
    c: HostCall,
    send: &[T],
    recv: &mut [T],
) -> Result<CallInfo> {
    let (count, own) = c.count(e.ranks(), a.rank(), send.len(), recv.len());
    a.agree(e.core(), c.desc::<T>(count), own)?;
    if c.in_place {
        run_host(e, c, &[] as &[&[T]], &mut [recv])
    } else {
        run_host(e, c, &[send], &mut [recv])
    }
}

/// A collective on device buffers of one rank of a job.
pub(crate) fn process_device<T: Element>(
    e: &mut Engine<T>,
    a: &Agreement,
    (collective, op): (Collective, ReduceOp),
    (send, recv): (&DeviceBuffers<T>, &DeviceBuffers<T>),
    count: usize,
) -> Result<CallInfo> {
    let in_place = send.id() == recv.id();
    let desc = CallDesc::host(collective, T::DTYPE, op, in_place, count).on_device();
    a.agree(e.core(), desc, Ok(()))?;
    e.collective_device(collective, send, recv, count, op)
}

/// One rank of a job's part of allocating device buffers (collective).
pub(crate) fn process_alloc<T: Element>(
    e: &mut Engine<T>,
    a: &Agreement,
    len: usize,
) -> Result<DeviceBuffers<T>> {
    let desc = CallDesc::buffers(CallKind::Alloc, T::DTYPE, len);
    a.agree(e.core(), desc, Ok(()))?;
    e.alloc(len)
}

/// One rank of a job's part of freeing device buffers (collective).
pub(crate) fn process_free<T: Element>(
    e: &mut Engine<T>,
    a: &Agreement,
    b: DeviceBuffers<T>,
) -> Result<()> {
    let desc = CallDesc::buffers(CallKind::Free, T::DTYPE, b.len());
    a.agree(e.core(), desc, Ok(()))?;
    e.free(b)
}
