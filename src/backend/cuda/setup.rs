//! The CUDA backend's set-up with rank threads: choose the devices, spawn
//! one rank thread per rank (each serving `serve_rank`), enable peer
//! access between every pair of GPUs, share the exchange flags, hand-off
//! events and the signal board, and record the set-up breakdown. Split out
//! of `backend/cuda/mod.rs` to keep files short; nothing here is `unsafe`.

use super::*;

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
        let mut be = CudaBackend {
            threads,
            info: BackendInfo {
                kind: Some(BackendKind::Cuda),
                ranks,
                rank_to_device: map,
                describe,
                hardware: names,
                setup: None,
            },
            board: Arc::new(SignalBoard::new(0, abort.clone(), timeout)),
            joint_board: Arc::new(SignalBoard::new(2 * ranks + 2, abort.clone(), timeout)),
            events: 0,
            gen: 0,
            calls: 0,
            abort,
            timeout,
            peers: Peers::default(),
            log: super::front::LaunchLog::new(),
            joint: false,
            pending: None,
            joint_gen: 0,
            caller_ns: 0,
            launch_phases: Default::default(),
            nccl_phases: Default::default(),
            held: HeldCalls::default(),
            held_nccl: HeldCalls::default(),
        };
        be.info
            .hardware
            .push(format!("CUDA driver API {}", info.version));
        be.connect()?;
        be.share_board()?;
        Ok(be)
    }

    /// Give every rank thread the current signal board.
    pub(super) fn share_board(&mut self) -> Result<()> {
        let board = self.board.clone();
        self.each(|_| {
            let b = board.clone();
            Box::new(move |rk: &mut Rank<'_>| {
                rk.board = Some(b);
                Ok(())
            })
        })
        .map(|_| ())
    }

    /// Setup after the threads are up: peer access between every pair of
    /// devices, the exchange flags, the abort hook, the setup breakdown.
    fn connect(&mut self) -> Result<()> {
        type Export = (
            PeerCtx,
            PeerBuf,
            RemoteEvent,
            Weak<HostMapped>,
            (f64, f64, &'static str),
        );
        let got: Vec<Export> = self.each(|_| {
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
            self.peers.handoff.push(h);
            bind_ms = bind_ms.max(b);
            kernels_ms = kernels_ms.max(k);
            if !sources.contains(&src) {
                sources.push(src);
            }
            ctxs.push(c);
            self.peers.flags.push(f);
            ctrls.push(w);
        }
        // Abort: raise every rank's abort word, which spinning exchange
        // kernels poll.
        self.abort.on_halt(move || {
            for c in ctrls.iter().filter_map(Weak::upgrade) {
                c.store_u32(0, 1);
            }
        });
        let t_peer = Instant::now();
        let mut distinct = self.info.rank_to_device.clone();
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
        self.each(|_| {
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
        self.share_peers()?;
        let b = SetupBreakdown {
            driver_ms: cuda::driver_init_ms(),
            context_ms: bind_ms,
            kernels_ms,
            peer_ms: t_peer.elapsed().as_secs_f64() * 1e3,
        };
        self.info.hardware.push(format!(
            "setup: driver load+cuInit {:.1} ms (once per process), context bind (slowest rank) {:.1} ms, kernel modules (slowest rank) {:.1} ms from {}, peer access {:.1} ms",
            b.driver_ms,
            b.context_ms,
            b.kernels_ms,
            sources.join(" + "),
            b.peer_ms
        ));
        self.info.setup = Some(b);
        Ok(())
    }
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
