//! The in-process exchange: one host thread per rank in this process. A
//! rank reaches a peer's buffers and exchange flags by device pointer (peer
//! access enabled between every pair of GPUs at set-up), its events by
//! tokens handed between threads, and orders host waits on a
//! [`SignalBoard`] of this process. Set-up: choose the devices, spawn one rank thread per
//! rank (each serving `serve_rank`), enable peer access, share the exchange
//! flags, hand-off events and the signal board, and record the set-up
//! breakdown. Nothing here is `unsafe`.

use super::super::front::devices;
use super::super::rank::activity::RankTiming;
use super::super::rank::Rank;
use super::super::{
    cuda_err, exchange_gave_up, serve_rank, Cmd, CudaBackend, CudaOptions, Front, Reply,
};
use super::PeerExchange;
use crate::backend::{BackendInfo, BackendKind, BufId, CallTimeline, SetupBreakdown};
#[cfg(feature = "nccl")]
use crate::cuda::nccl;
use crate::cuda::{self, HostMapped, PeerBuf, PeerCtx, RemoteEvent};
use crate::error::{Error, Result};
use crate::pool::{Inbox, RankThreads};
use crate::sync::{AbortHandle, SignalBoard};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Rank threads of one process (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct InProcess;

impl CudaBackend {
    /// Spawn one rank thread per rank, each bound to its GPU, and connect
    /// them.
    pub fn new(opts: &CudaOptions) -> Result<Self> {
        let ranks = opts.ranks;
        if ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        let (info, devs) = devices(opts.devices.as_ref())?;
        let map = crate::backend::placement(ranks, &devs);
        let m = map.clone();
        let (timeout, faults) = (opts.timeout, opts.faults.clone());
        let mut threads =
            RankThreads::spawn(ranks, "cuda", move |rank, inbox: Inbox<Cmd, Reply>| {
                serve_rank(rank, m[rank], timeout, &faults, inbox);
            })?;
        threads.set_deadline(Some(timeout + crate::pool::GRACE));
        let names: Vec<String> = info.devices.iter().map(|d| d.name.clone()).collect();
        let mut distinct = map.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let describe = format!(
            "cuda: {} ({} ranks on {} GPUs: {}); driver API {}",
            distinct
                .iter()
                .map(|&i| format!("GPU{i} {}", names.get(i).map_or("?", String::as_str)))
                .collect::<Vec<_>>()
                .join(", "),
            ranks,
            distinct.len(),
            map.iter()
                .enumerate()
                .map(|(r, g)| format!("{r}->GPU{g}"))
                .collect::<Vec<_>>()
                .join(" "),
            info.version
        );
        let abort = AbortHandle::new();
        let facts = BackendInfo {
            kind: Some(BackendKind::Cuda),
            ranks,
            rank_to_device: map,
            describe,
            hardware: names,
            setup: None,
        };
        let board = Arc::new(SignalBoard::new(0, abort.clone(), timeout));
        let mut front = Front::assemble(threads, facts, 0..ranks, board, abort, timeout, None);
        front
            .info
            .hardware
            .push(format!("CUDA driver API {}", info.version));
        let connected = InProcess::connect(&mut front).and_then(|()| front.share_board());
        CudaBackend::join(front, Box::new(InProcess), connected)
    }
}

impl InProcess {
    /// Setup after the threads are up: peer access between every pair of
    /// devices, the exchange flags, the abort hook, the setup breakdown.
    fn connect(front: &mut Front) -> Result<()> {
        type Export = (
            PeerCtx,
            PeerBuf,
            RemoteEvent,
            Weak<HostMapped>,
            (f64, f64, &'static str),
        );
        let got: Vec<Export> = front.each(|_| {
            Box::new(|rk: &mut Rank<'_>| {
                Ok((
                    rk.ctx.export(),
                    rk.flags_token(),
                    rk.handoff_token(),
                    Arc::downgrade(&rk.ctrl),
                    rk.setup_ms,
                ))
            })
        })?;
        let mut bind_ms: f64 = 0.0;
        let mut kernels_ms: f64 = 0.0;
        let mut sources: Vec<&'static str> = Vec::new();
        let mut ctxs = Vec::new();
        let mut ctrls = Vec::new();
        for (c, f, h, w, (b, k, src)) in got {
            front.peers.handoff.push(h);
            bind_ms = bind_ms.max(b);
            kernels_ms = kernels_ms.max(k);
            if !sources.contains(&src) {
                sources.push(src);
            }
            ctxs.push(c);
            front.peers.flags.push(f);
            ctrls.push(w);
        }
        // Abort: raise every rank's abort word, which spinning exchange
        // kernels poll.
        front.abort.on_halt(move || {
            for c in ctrls.iter().filter_map(Weak::upgrade) {
                c.store_u32(0, 1);
            }
        });
        let t_peer = Instant::now();
        let mut distinct = front.info.rank_to_device.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for &a in &distinct {
            for &b in &distinct {
                if a != b && !cuda::can_access_peer(a, b).unwrap_or(false) {
                    return Err(Error::CudaSetup {
                        call: "cuDeviceCanAccessPeer",
                        message: format!(
                            "GPU {a} cannot access GPU {b} directly; peer copies would go through host memory, which this engine refuses to do silently"
                        ),
                    });
                }
            }
        }
        let all = Arc::new(ctxs);
        front.each(|_| {
            let all = all.clone();
            Box::new(move |rk: &mut Rank<'_>| {
                for p in all.iter() {
                    rk.ctx
                        .enable_peer_access(p)
                        .map_err(cuda_err(rk.rank, rk.device))?;
                }
                Ok(())
            })
        })?;
        front.share_peers()?;
        let b = SetupBreakdown {
            driver_ms: cuda::driver_init_ms(),
            context_ms: bind_ms,
            kernels_ms,
            peer_ms: t_peer.elapsed().as_secs_f64() * 1e3,
        };
        front.info.hardware.push(format!(
            "setup: driver load+cuInit {:.1} ms (once per process), context bind (slowest rank) {:.1} ms, kernel modules (slowest rank) {:.1} ms from {}, peer access {:.1} ms",
            b.driver_ms,
            b.context_ms,
            b.kernels_ms,
            sources.join(" + "),
            b.peer_ms
        ));
        front.info.setup = Some(b);
        Ok(())
    }
}

impl PeerExchange for InProcess {
    fn ensure_events(&mut self, front: &mut Front, n: usize) -> Result<()> {
        let Some(want) = super::super::peers::events_to_grow(n, front.events, None)? else {
            return Ok(());
        };
        let remote: Vec<Vec<RemoteEvent>> =
            front.each(|_| Box::new(move |rk: &mut Rank<'_>| rk.grow_events(want)))?;
        let remote = Arc::new(remote);
        front.each(|_| {
            let r = remote.clone();
            Box::new(move |rk: &mut Rank<'_>| {
                rk.remote = r;
                Ok(())
            })
        })?;
        front.board = Arc::new(SignalBoard::new(want, front.abort.clone(), front.timeout));
        front.gen = 0;
        front.events = want;
        front.share_board()
    }

    /// Drain every rank (bounded); errors of every rank.
    fn drain(&mut self, front: &mut Front) -> Result<()> {
        let r = front.each_all(|_| Box::new(|rk: &mut Rank<'_>| rk.sync()));
        if let Err(e) = &r {
            if exchange_gave_up(e) {
                // An exchange kernel gave up: its peer may still run. Drain
                // again, then restart both ranks' call numbering.
                let again = front.each_all(|_| Box::new(|rk: &mut Rank<'_>| rk.sync()));
                if let Err(e2) = again.and_then(|_| {
                    front.each_all(|_| Box::new(|rk: &mut Rank<'_>| rk.reset_exchange()))
                }) {
                    return Err(Error::Poisoned {
                        reason: format!("a GPU could not be drained after a fault: {e2}"),
                    });
                }
            }
        }
        r.map(|_| ())
    }

    fn reserve(&mut self, front: &mut Front, id: BufId, bytes: &[usize]) -> Result<()> {
        self.drain(front)?;
        let bytes = bytes.to_vec();
        let got: Vec<(PeerBuf, bool)> = front.each_all(|r| {
            let b = bytes.get(r).copied().unwrap_or(0);
            Box::new(move |rk: &mut Rank<'_>| rk.reserve(id, b))
        })?;
        if got.iter().any(|(_, moved)| *moved) {
            // A joint graph (on rank 0) holds every rank's addresses.
            front.drop_graphs()?;
        }
        let tokens: Vec<PeerBuf> = got.into_iter().map(|(t, _)| t).collect();
        if front.peers.bufs.len() < tokens.len() {
            front.peers.bufs.resize(tokens.len(), HashMap::new());
        }
        for (r, t) in tokens.into_iter().enumerate() {
            front.peers.bufs[r].insert(id, t);
        }
        front.share_peers()
    }

    fn release(&mut self, front: &mut Front, id: BufId) -> Result<()> {
        self.drain(front)?;
        front.drop_graphs()?;
        front.each(|_| Box::new(move |rk: &mut Rank<'_>| rk.release(id)))?;
        for m in &mut front.peers.bufs {
            m.remove(&id);
        }
        front.share_peers()
    }

    fn teardown(&mut self, front: &mut Front) {
        // Drain every rank before any rank frees memory a peer may still
        // use. If a GPU does not drain, abort its spins and try again; if it
        // still does not, leak the memory instead of freeing it under a
        // running kernel.
        let drained = self.drain(front);
        // Graphs first: a joint graph on rank 0 refers to every rank's
        // kernels and memory.
        let _ = front.drop_graphs();
        if drained.is_err() {
            front.abort.abort();
            if self.drain(front).is_err() {
                let _ = front.each(|_| {
                    Box::new(|rk: &mut Rank<'_>| {
                        rk.leak();
                        Ok(())
                    })
                });
                if front.threads.broken().is_some() {
                    // A rank thread is stuck in a driver call: release
                    // nothing of the driver's from this thread (see the
                    // IPC exchange's teardown).
                    std::mem::forget(std::mem::take(&mut front.peers));
                    std::mem::forget(std::mem::take(&mut front.held));
                    #[cfg(feature = "nccl")]
                    std::mem::forget(std::mem::take(&mut front.held_nccl));
                }
            }
        }
    }

    #[cfg(feature = "nccl")]
    fn nccl_id(&mut self, _front: &Front, lib: &nccl::Nccl) -> Result<nccl::UniqueId> {
        Ok(lib.unique_id()?)
    }

    fn ordered(&self) -> Result<()> {
        Ok(())
    }

    fn joint_graphs(&self, _plan: &str) -> Result<()> {
        Ok(())
    }

    fn timelines(
        &self,
        calls: Vec<(String, f64)>,
        per_rank: Vec<RankTiming>,
        _nccl: bool,
    ) -> Vec<CallTimeline> {
        super::super::capabilities::assemble(calls, per_rank)
    }
}
