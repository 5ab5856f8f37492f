//! One rank per process of a job: how its calls are made to agree before
//! data moves, and its rank's part of each call.

use super::ranks::strip_rank;
use super::{barrier_info, desc, CallDesc, HostCall};
use crate::element::Element;
use crate::engine::{CallInfo, Engine};
use crate::error::{Error, Result};
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

    /// Before a call's data moves: every rank's call number, descriptor
    /// and own verdict, all-gathered (unless the check is off: then this
    /// rank's own verdict alone). The same outcome on every rank: ranks at
    /// different calls (one of them skipped a call) or with different
    /// descriptors are one [`Error::Mismatch`]; else the lowest rank whose
    /// own arguments are wrong fails the call (its error for it,
    /// [`Error::PeerArgument`] for the others). A failed exchange (a peer
    /// failed, timed out, was aborted) refuses every later call.
    pub(crate) fn agree(&self, core: &Engine, desc: CallDesc, own: Result<()>) -> Result<()> {
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
        let k = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut payload = desc.encode();
        payload.extend_from_slice(&k.to_le_bytes());
        if let Err(e) = &own {
            payload.extend_from_slice(e.to_string().as_bytes());
        }
        let what = format!("the ranks to agree on call {k} ({desc})");
        let got = match self.job.allgather(&payload, &what).and_then(|g| {
            // Every descriptor arrived, but a rank that gave up before it
            // agreed (it timed out here) makes this agreement fail too.
            match self.job.control().agreement_fault(k + 1, &what) {
                Some(e) => Err(e),
                None => Ok(g),
            }
        }) {
            Ok(g) => {
                self.job.control().publish_agreed(k + 1);
                g
            }
            Err(e) => {
                // The ranks' exchanges no longer line up: release the
                // others, and refuse the next calls.
                self.job.fail_with(&e);
                *broken() = Some(format!("call {k} failed: {e}"));
                return Err(e);
            }
        };
        let head = DESC_BYTES + 8;
        let number = |b: &[u8]| {
            b.get(DESC_BYTES..head)
                .and_then(|x| x.try_into().ok())
                .map(u64::from_le_bytes)
        };
        // Ranks at different calls (one skipped a call) do not agree,
        // whatever they asked for: then every rank's call says its number.
        let numbers: Vec<Option<u64>> = got.iter().map(|b| number(b)).collect();
        let in_step = numbers.iter().all(|&j| j == Some(k));
        let decoded: Vec<(usize, std::result::Result<CallDesc, String>)> = got
            .iter()
            .zip(&numbers)
            .enumerate()
            .map(|(q, (b, j))| {
                let d = CallDesc::decode(&b[..b.len().min(DESC_BYTES)]);
                let d = match (d, j) {
                    (Ok(d), _) if in_step => Ok(d),
                    (Ok(d), Some(j)) => Err(format!("{d}, as its call {j}")),
                    (Ok(_), None) | (Err(_), _) => CallDesc::decode(&[]),
                };
                (q, d)
            })
            .collect();
        desc::agree_decoded(&decoded)?;
        let bad = got.iter().enumerate().find(|(_, b)| b.len() > head);
        if let Some((q, b)) = bad {
            return Err(match own {
                Err(e) if q == me => e,
                _ => Error::PeerArgument {
                    rank: q,
                    reason: strip_rank(q, &String::from_utf8_lossy(&b[head..])),
                },
            });
        }
        Ok(())
    }

    /// Every rank of the job reaches this point before any goes on.
    pub(crate) fn barrier(&self, core: &Engine) -> Result<CallInfo> {
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
    e: &mut Engine,
    a: &Agreement,
    c: HostCall,
    send: &[T],
    recv: &mut [T],
) -> Result<CallInfo> {
    let (count, own) = c.count(e.ranks(), a.rank(), send.len(), recv.len());
    a.agree(e, CallDesc::of_host::<T>(c, count), own)?;
    let send: &[&[T]] = if c.in_place { &[] } else { &[send] };
    e.host(c, send, &mut [recv])
}
