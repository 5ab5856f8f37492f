//! The CUDA backend's front end, written once over either peer exchange
//! ([`super::exchange`]): [`Backend`] for [`CudaBackend`], the launch log of
//! timed calls, a call's admission, the devices to use and a device's
//! memory. What differs between the exchanges (reserve, release, drain,
//! events, the order of host accesses against peers in other processes) is
//! asked of [`super::exchange::PeerExchange`].

use super::rank::Rank;
use super::{probe, Cmd, CudaBackend, Deferred, IssueCmd};
use crate::backend::ordered::StreamOrdered;
use crate::backend::{
    check_call, check_local, Backend, BackendInfo, BufId, Call, DeviceMemory, GraphBackend,
    HostRead, HostWrite, Profiling,
};
#[cfg(feature = "nccl")]
use crate::backend::{NcclBackend, NcclCall};
use crate::cuda::{self, DriverInfo};
use crate::error::{Error, Result};
use crate::sync::AbortHandle;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The caller's side of the timelines: the host clock's zero and, for each
/// timed collective and NCCL call since the last take, its name and launch
/// time (host ns since the zero). The GPU side (events per op) is the rank's.
#[derive(Debug)]
pub(crate) struct LaunchLog {
    epoch: Instant,
    timed: Vec<(String, f64)>,
    #[cfg(feature = "nccl")]
    nccl_timing: bool,
    #[cfg(feature = "nccl")]
    nccl_timed: Vec<(String, f64)>,
}

impl LaunchLog {
    pub fn new() -> Self {
        LaunchLog {
            epoch: Instant::now(),
            timed: Vec::new(),
            #[cfg(feature = "nccl")]
            nccl_timing: false,
            #[cfg(feature = "nccl")]
            nccl_timed: Vec::new(),
        }
    }

    /// The host clock's zero the ranks place their GPU times against.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    fn now_ns(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1e9
    }

    /// Note a collective call at its launch, if it is timed.
    pub fn collective(&mut self, call: &Call) {
        if call.timing {
            let t = self.now_ns();
            self.timed.push((call.plan.name.clone(), t));
        }
    }

    /// Time NCCL calls from now on (or stop).
    #[cfg(feature = "nccl")]
    pub fn set_nccl_timing(&mut self, on: bool) {
        self.nccl_timing = on;
    }

    /// Note an NCCL call at its launch; whether it is timed.
    #[cfg(feature = "nccl")]
    pub fn nccl(&mut self, call: &NcclCall) -> bool {
        if self.nccl_timing {
            let t = self.now_ns();
            self.nccl_timed
                .push((format!("nccl {}", call.collective.name()), t));
        }
        self.nccl_timing
    }

    /// The timed collective calls since the last take.
    pub fn take(&mut self) -> Vec<(String, f64)> {
        std::mem::take(&mut self.timed)
    }

    /// The timed NCCL calls since the last take.
    #[cfg(feature = "nccl")]
    pub fn take_nccl(&mut self) -> Vec<(String, f64)> {
        std::mem::take(&mut self.nccl_timed)
    }
}

/// Whether `call` may be launched on `ranks` ranks of an engine whose abort
/// handle is `abort`: its shape, and that the engine was not aborted.
pub(super) fn admit(call: &Call, ranks: usize, abort: &AbortHandle) -> Result<()> {
    check_call(call, ranks)?;
    if abort.is_aborted() {
        return Err(Error::Poisoned {
            reason: "the engine was aborted".into(),
        });
    }
    Ok(())
}

/// The most signals any of `calls`' plans uses (what a capture's board
/// must hold).
pub(super) fn most_signals(calls: &[Call]) -> usize {
    calls
        .iter()
        .map(|c| c.plan.signal_count())
        .max()
        .unwrap_or(0)
}

/// GPU `device`'s free and total memory, in bytes.
pub(super) fn device_memory(device: usize) -> Result<DeviceMemory> {
    let (free, total) = cuda::with_device(device, |ctx| ctx.mem_info())
        .and_then(|r| r)
        .map_err(|e| Error::CudaSetup {
            call: e.call,
            message: e.message,
        })?;
    Ok(DeviceMemory {
        device,
        free: free as u64,
        total: total as u64,
    })
}

/// The driver's facts and the GPUs to use: those `requested` (each must be
/// present), or every GPU when none are.
pub(super) fn devices(requested: Option<&Vec<usize>>) -> Result<(&'static DriverInfo, Vec<usize>)> {
    let info = probe().map_err(Error::NoCuda)?;
    let avail: Vec<usize> = info.devices.iter().map(|d| d.ordinal).collect();
    let devs = match requested {
        Some(d) if !d.is_empty() => {
            if let Some(bad) = d.iter().find(|x| !avail.contains(x)) {
                return Err(Error::NoCuda(format!(
                    "GPU {bad} requested but only {} present",
                    avail.len()
                )));
            }
            d.clone()
        }
        _ => avail,
    };
    Ok((info, devs))
}

impl Backend for CudaBackend {
    fn info(&self) -> &BackendInfo {
        &self.front.info
    }

    /// Collective over the job (see [`super::exchange::PeerExchange::reserve`]).
    fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        self.link.reserve(&mut self.front, id, bytes)
    }

    /// Collective over the job (see [`super::exchange::PeerExchange::release`]).
    fn release(&mut self, id: BufId) -> Result<()> {
        self.link.release(&mut self.front, id)
    }

    fn device_buf(&self, rank: usize, id: BufId) -> Result<crate::cuda::PeerBuf> {
        check_local(rank, self.front.local.clone(), "copy into")?;
        self.front
            .peers
            .bufs
            .get(rank)
            .and_then(|m| m.get(&id))
            .cloned()
            .ok_or_else(|| Error::Plan(format!("rank {rank} has no buffer {}", id.0)))
    }

    fn copy_in_landed(
        &mut self,
        rank: usize,
        id: BufId,
        span: &crate::cuda::DeviceSpan,
        stream: &crate::cuda::RawStream,
    ) -> Result<()> {
        check_local(rank, self.front.local.clone(), "copy into")?;
        // As `write`: this rank's previous calls are done, and every peer
        // that read the buffer drained the call in which it did.
        self.drain()?;
        self.link.before_write(id)?;
        let buf = self.device_buf(rank, id)?;
        let e = super::cuda_err(rank, stream.device());
        stream.copy_into_engine(&buf, 0, span).map_err(&e)?;
        stream.synchronize().map_err(&e)
    }

    fn write(&mut self, writes: &[HostWrite<'_>]) -> Result<()> {
        let local = self.front.local.clone();
        for w in writes {
            check_local(w.rank, local.clone(), "write into")?;
        }
        // Other ranks may still be reading these buffers: this rank's
        // previous calls are done once its streams are idle (the plans
        // order every peer access to its memory before its End, except
        // peer reads of a send buffer, which the exchange waits for).
        self.drain()?;
        let mut ids: Vec<BufId> = writes.iter().map(|w| w.id).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            self.link.before_write(id)?;
        }
        // Peers read a rank's send buffer as soon as it says it began its
        // next call: each write returns once its bytes landed.
        for round in rounds(writes.iter().map(|w| w.data.len())) {
            // Each rank thread writes its own parts of the round.
            let mut parts: Vec<Vec<(BufId, usize, Vec<u8>)>> = vec![Vec::new(); local.len()];
            for w in round.iter().map(|&k| &writes[k]) {
                parts[w.rank - local.start].push((w.id, w.offset, w.data.to_vec()));
            }
            let parts = Arc::new(parts);
            self.front.each_idle(|i| {
                let parts = parts.clone();
                Box::new(move |rk: &mut Rank<'_>| {
                    for (id, offset, data) in &parts[i] {
                        rk.write(*id, *offset, data)?;
                    }
                    Ok(())
                })
            })?;
        }
        Ok(())
    }

    fn read(&mut self, reads: &mut [HostRead<'_>]) -> Result<()> {
        let local = self.front.local.clone();
        for r in reads.iter() {
            check_local(r.rank, local.clone(), "read")?;
        }
        self.drain()?;
        for round in rounds(reads.iter().map(|r| r.out.len())) {
            // Each rank thread reads its own parts of the round (read k of
            // the call is answered as (k, bytes)).
            let mut asks: Vec<Vec<(usize, BufId, usize, usize)>> = vec![Vec::new(); local.len()];
            for k in round {
                let r = &reads[k];
                asks[r.rank - local.start].push((k, r.id, r.offset, r.out.len()));
            }
            let asks = Arc::new(asks);
            let got: Vec<Vec<(usize, Vec<u8>)>> = self.front.each_idle(|i| {
                let asks = asks.clone();
                Box::new(move |rk: &mut Rank<'_>| {
                    asks[i]
                        .iter()
                        .map(|&(k, id, offset, len)| Ok((k, rk.read(id, offset, len)?)))
                        .collect()
                })
            })?;
            for (k, data) in got.into_iter().flatten() {
                reads[k].out.copy_from_slice(&data);
            }
        }
        Ok(())
    }

    fn launch(&mut self, call: &Call) -> Result<()> {
        let t_entry = Instant::now();
        admit(call, self.front.info.ranks, &self.front.abort)?;
        self.ensure_events(call.plan.signal_count())?;
        self.front.gen += 1;
        self.front.calls += 1;
        let (gen, call_no) = (self.front.gen, self.front.calls);
        self.link.begin(&self.front, call, gen)?;
        self.front.log.collective(call);
        let (key, sent) = self.front.held.key(call);
        let cmds: Vec<Cmd> = self
            .front
            .local
            .clone()
            .map(|_| {
                Cmd::Issue(IssueCmd {
                    key,
                    call: sent.clone(),
                    gen,
                    call_no,
                })
            })
            .collect();
        let r = self.front.post(cmds, Deferred::Collective);
        self.link.issued(gen);
        self.front.caller_ns += t_entry.elapsed().as_nanos() as u64;
        r
    }

    fn synchronize(&mut self) -> Result<()> {
        self.drain()
    }

    fn abort_handle(&self) -> AbortHandle {
        self.front.abort.clone()
    }

    /// The local ranks' GPUs (one query per GPU, however many ranks share
    /// it); `None` for ranks of other processes (not known here).
    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>> {
        let mut seen: HashMap<usize, DeviceMemory> = HashMap::new();
        let mut out = Vec::new();
        for (r, &d) in self.front.info.rank_to_device.iter().enumerate() {
            if !self.front.local.contains(&r) {
                out.push(None);
                continue;
            }
            let m = match seen.get(&d) {
                Some(&m) => m,
                None => {
                    let m = device_memory(d)?;
                    seen.insert(d, m);
                    m
                }
            };
            out.push(Some(m));
        }
        Ok(out)
    }

    fn ping(&mut self) -> Result<()> {
        self.front
            .each(|_| Box::new(|_: &mut Rank<'_>| Ok(())))
            .map(|_| ())
    }

    fn local_ranks(&self) -> std::ops::Range<usize> {
        self.front.local.clone()
    }

    #[cfg(feature = "nccl")]
    fn nccl(&mut self) -> Option<&mut dyn NcclBackend> {
        Some(self)
    }

    fn graphs(&mut self) -> Option<&mut dyn GraphBackend> {
        Some(self)
    }

    fn profiling(&mut self) -> Option<&mut dyn Profiling> {
        Some(self)
    }

    /// Where the exchange allows it ([`super::exchange::PeerExchange::ordered`]; between
    /// processes it is refused with the reason).
    fn ordered(&mut self) -> Result<&mut dyn StreamOrdered> {
        self.link.ordered()?;
        Ok(self)
    }
}

/// Host copies of at most this many bytes go together, one round of the
/// rank threads for all of them (a round is a hand-off to every rank
/// thread and back); a larger one goes in a round of its own, so that one
/// rank's pageable copy has the GPU's copy path to itself. Four rank
/// threads' copies of 1-16 MiB into one GPU at once took 1.4-1.6x the time
/// of the same copies one at a time
/// (`docs/results/2026-12-07-h100x1-host-rounds/`).
pub(super) const BATCHED_COPY_MAX: usize = 64 << 10;

/// The rounds in which host copies of these lengths are made, as indices
/// into them, in order: runs of copies of at most [`BATCHED_COPY_MAX`]
/// bytes together, each larger copy alone.
pub(super) fn rounds(lens: impl Iterator<Item = usize>) -> Vec<Vec<usize>> {
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut small: Vec<usize> = Vec::new();
    for (k, len) in lens.enumerate() {
        if len <= BATCHED_COPY_MAX {
            small.push(k);
        } else {
            if !small.is_empty() {
                rounds.push(std::mem::take(&mut small));
            }
            rounds.push(vec![k]);
        }
    }
    if !small.is_empty() {
        rounds.push(small);
    }
    rounds
}
