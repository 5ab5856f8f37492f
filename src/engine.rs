//! The engine: created once for N ranks on a backend, then reused.
//!
//! ```
//! use ringreduce::{Engine, EngineConfig};
//! let mut e = Engine::<f32>::new(EngineConfig::cpu(3)).unwrap();
//! let mut bufs = vec![vec![1.0f32; 10], vec![2.0; 10], vec![3.0; 10]];
//! e.all_reduce_in_place(&mut bufs).unwrap();
//! assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 6.0)));
//! ```

use crate::algo::{self, Algo, AlgoChoice};
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::{self, CudaBackend, CudaOptions};
use crate::backend::{Backend, BackendChoice, BackendKind};
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Buf, Plan, Traffic};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Upper bound on ranks: each rank is a host thread with its own buffers.
pub const MAX_RANKS: usize = 1024;

/// How to build an engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub ranks: usize,
    pub backend: BackendChoice,
    pub algo: AlgoChoice,
    pub op: ReduceOp,
    pub cuda: CudaOptions,
}

impl EngineConfig {
    pub fn new(ranks: usize, backend: BackendChoice) -> Self {
        EngineConfig {
            ranks,
            backend,
            algo: AlgoChoice::Fixed(Algo::RING),
            op: ReduceOp::Sum,
            cuda: CudaOptions::default(),
        }
    }
    pub fn cpu(ranks: usize) -> Self {
        Self::new(ranks, BackendChoice::Cpu)
    }
}

/// What one collective did.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// The algorithm and path that ran, e.g. `ring:pipe4`.
    pub algo: String,
    /// Bytes each rank sent to and received from other ranks.
    pub traffic: Vec<Traffic>,
}

/// A reusable all-reduce engine for a fixed number of ranks.
pub struct Engine<T: Element> {
    backend: Box<dyn Backend<T>>,
    ranks: usize,
    algo: AlgoChoice,
    plans: HashMap<(Algo, usize, bool), Arc<Plan>>,
    count_cap: usize,
    scratch_cap: usize,
    setup: Duration,
    fallback_note: Option<String>,
    /// The last call, when it was a chained one-shot: (algorithm, count,
    /// scratch half).
    chain: Option<(Algo, usize, usize)>,
    /// One-shot variants by (algorithm, count, in_place, parity, fenced).
    oneshots: HashMap<(Algo, usize, bool, usize, bool), Arc<Plan>>,
    /// The calls captured into ringreduce's CUDA graphs, if any.
    graph: Option<CapturedGraph>,
    /// Whether NCCL graphs are captured (on the current buffers).
    nccl_graph: bool,
}

/// All-reduces captured per CUDA graph, for ringreduce and for NCCL alike:
/// two, so that the flag one-shot's scratch halves alternate inside a graph
/// and every replay continues the chain where the previous one left it.
pub const GRAPH_CALLS: usize = 2;

#[derive(Debug, Clone)]
struct CapturedGraph {
    count: usize,
    /// Flag one-shot calls (parity 1, then 0), which continue a chain.
    chained: bool,
}

impl<T: Element> Engine<T> {
    /// Create the engine: rank threads, buffers, (on CUDA) contexts, streams,
    /// PTX module and peer access. The time this takes is [`Engine::setup_time`].
    pub fn new(cfg: EngineConfig) -> Result<Self> {
        if cfg.ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        if cfg.ranks > MAX_RANKS {
            return Err(Error::BadArgument(format!(
                "{} ranks requested; at most {MAX_RANKS} (one host thread each)",
                cfg.ranks
            )));
        }
        let t0 = Instant::now();
        let mut fallback_note = None;
        let backend: Box<dyn Backend<T>> = match cfg.backend {
            BackendChoice::Cpu => Box::new(CpuBackend::<T>::new(cfg.ranks, cfg.op)?),
            BackendChoice::Cuda => Box::new(CudaBackend::<T>::new(cfg.ranks, cfg.op, &cfg.cuda)?),
            BackendChoice::Auto => match cuda::probe() {
                Ok(_) => Box::new(CudaBackend::<T>::new(cfg.ranks, cfg.op, &cfg.cuda)?),
                Err(why) => {
                    fallback_note = Some(format!("auto: CUDA unavailable ({why}); using cpu"));
                    Box::new(CpuBackend::<T>::new(cfg.ranks, cfg.op)?)
                }
            },
        };
        Ok(Engine {
            backend,
            ranks: cfg.ranks,
            algo: cfg.algo,
            plans: HashMap::new(),
            count_cap: 0,
            scratch_cap: 0,
            setup: t0.elapsed(),
            fallback_note,
            chain: None,
            oneshots: HashMap::new(),
            graph: None,
            nccl_graph: false,
        })
    }

    pub fn ranks(&self) -> usize {
        self.ranks
    }
    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }
    pub fn describe(&self) -> String {
        self.backend.describe()
    }
    pub fn hardware(&self) -> Vec<String> {
        self.backend.hardware()
    }
    pub fn rank_to_device(&self) -> Vec<usize> {
        self.backend.rank_to_device()
    }
    /// Why `auto` fell back to the CPU, if it did.
    pub fn fallback_note(&self) -> Option<&str> {
        self.fallback_note.as_deref()
    }
    /// Per-rank host issue profile since the last call, then reset (CUDA only).
    pub fn take_issue_profile(&mut self) -> Result<Vec<crate::backend::IssueProfile>> {
        self.backend.take_issue_profile()
    }

    /// Where the backend's setup time went (CUDA only).
    pub fn setup_breakdown(&self) -> Option<crate::backend::SetupBreakdown> {
        self.backend.setup_breakdown()
    }

    /// Wall time spent in [`Engine::new`].
    pub fn setup_time(&self) -> Duration {
        self.setup
    }
    pub fn backend_mut(&mut self) -> &mut dyn Backend<T> {
        self.backend.as_mut()
    }

    /// The algorithm used for `count` elements under the configured choice.
    pub fn algo_for(&self, count: usize) -> Algo {
        self.resolve(self.algo, count)
    }

    /// The algorithm `choice` means for `count` elements: `Auto` picks by size
    /// ([`algo::choose`]) unless the environment variable `RINGREDUCE_ALGO`
    /// forces a path (like `NCCL_ALGO` does for NCCL).
    pub fn resolve(&self, choice: AlgoChoice, count: usize) -> Algo {
        match choice {
            AlgoChoice::Fixed(a) => a,
            AlgoChoice::Auto => {
                algo::forced().unwrap_or_else(|| algo::choose(self.ranks, count * size_of::<T>()))
            }
        }
    }

    /// Build (or fetch from the cache) the plan for `algo`, and make sure
    /// buffers are large enough for it.
    pub fn plan(&mut self, algo: Algo, count: usize, in_place: bool) -> Result<Arc<Plan>> {
        check_fits::<T>(count, self.ranks)?;
        let key = (algo, count, in_place);
        let plan = match self.plans.get(&key) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(algo.plan(self.ranks, count, size_of::<T>(), in_place));
                if self.plans.len() > 64 {
                    self.plans.clear();
                }
                self.plans.insert(key, p.clone());
                p
            }
        };
        self.reserve(count, plan.scratch_len)?;
        Ok(plan)
    }

    /// Grow every rank's buffers to hold `count` elements and `scratch` scratch.
    pub fn reserve(&mut self, count: usize, scratch: usize) -> Result<()> {
        if count > self.count_cap || scratch > self.scratch_cap {
            self.chain = None;
            // Captured graphs hold the old buffers' addresses.
            self.graph = None;
            self.nccl_graph = false;
            check_fits::<T>(count.max(scratch), self.ranks)?;
            let (c, s) = (count.max(self.count_cap), scratch.max(self.scratch_cap));
            self.backend.reserve(c, s)?;
            self.count_cap = c;
            self.scratch_cap = s;
        }
        Ok(())
    }

    /// Write per-rank inputs: into `send` (out of place) or `recv` (in place).
    pub fn load(&mut self, inputs: &[Vec<T>], in_place: bool) -> Result<usize> {
        let count = check_buffers(self.ranks, inputs)?;
        self.reserve(count, 0)?;
        let data: Vec<&[T]> = inputs.iter().map(Vec::as_slice).collect();
        let buf = if in_place { Buf::Recv } else { Buf::Send };
        self.chain = None;
        self.backend.write(buf, &data)?;
        Ok(count)
    }

    /// Launch `plan` (asynchronous on CUDA).
    ///
    /// A chained one-shot plan is swapped for its variant: the first call of a
    /// chain is fenced, later calls of the same size alternate scratch halves
    /// without the start fence (see [`crate::algo::oneshot`]).
    pub fn launch(&mut self, plan: &Arc<Plan>) -> Result<()> {
        let algo = match plan.algo {
            Some(
                a @ (Algo::OneShot {
                    slices: 1,
                    chain: true,
                }
                | Algo::OneShotFlag),
            ) if plan.ranks > 1 && plan.count > 0 => a,
            _ => {
                self.chain = None;
                return self.backend.launch(plan);
            }
        };
        // A chain continues only with the same algorithm (the flag plan's
        // slots are 16-byte aligned, so its layout differs) and size.
        let (parity, fenced) = match self.chain {
            Some((a, count, half)) if a == algo && count == plan.count => (1 - half, false),
            Some((_, _, half)) => (1 - half, true),
            None => (0, true),
        };
        let variant = self.chain_variant(algo, plan.count, plan.in_place, parity, fenced);
        self.reserve(plan.count, variant.scratch_len)?;
        // Set the chain only once the launch went through.
        self.chain = None;
        self.backend.launch(&variant)?;
        self.chain = Some((algo, plan.count, parity));
        Ok(())
    }

    /// The chained one-shot plan of `algo` with the given scratch half and fence.
    fn chain_variant(
        &mut self,
        algo: Algo,
        count: usize,
        in_place: bool,
        parity: usize,
        fenced: bool,
    ) -> Arc<Plan> {
        let key = (algo, count, in_place, parity, fenced);
        if let Some(p) = self.oneshots.get(&key) {
            return p.clone();
        }
        let n = self.ranks;
        let p = Arc::new(if algo == Algo::OneShotFlag {
            crate::algo::oneshot::flag_plan(n, count, size_of::<T>(), in_place, parity, fenced)
        } else {
            crate::algo::oneshot::plan(n, count, size_of::<T>(), in_place, 1, parity, fenced)
        });
        if self.oneshots.len() > 64 {
            self.oneshots.clear();
        }
        self.oneshots.insert(key, p.clone());
        p
    }

    /// Capture [`GRAPH_CALLS`] all-reduces of `count` elements on this
    /// engine's path into one CUDA graph per rank (CUDA only); returns the
    /// path. Only paths without events between streams or GPUs can be
    /// captured: the fused one-shot out of place (one kernel, reading the
    /// peer's never-written send buffer) and the flag one-shot in place (one
    /// exchange kernel that numbers its calls on the GPU), both for 2 ranks.
    /// The ring orders its steps with events across GPUs; replaying those
    /// from per-GPU graphs could wait on a stale record, so it is refused.
    pub fn graph_capture(&mut self, count: usize, in_place: bool) -> Result<String> {
        self.graph = None;
        let algo = self.algo_for(count);
        let plan = self.plan(algo, count, in_place)?;
        let chained = plan.algo == Some(Algo::OneShotFlag) && plan.ranks > 1 && plan.count > 0;
        let plans: Vec<Arc<Plan>> = if chained {
            // Halves 1 then 0, unfenced: launch_graph fences before a replay
            // that does not follow a call on half 0 of this size.
            vec![
                self.chain_variant(Algo::OneShotFlag, count, in_place, 1, false),
                self.chain_variant(Algo::OneShotFlag, count, in_place, 0, false),
            ]
        } else {
            vec![plan.clone(); GRAPH_CALLS]
        };
        for p in &plans {
            self.reserve(count, p.scratch_len)?;
        }
        self.chain = None;
        self.backend.graph_capture(&plans)?;
        self.graph = Some(CapturedGraph { count, chained });
        Ok(plans[0].name.clone())
    }

    /// Replay the graphs of [`Engine::graph_capture`]: [`GRAPH_CALLS`]
    /// all-reduces on every rank, asynchronously.
    pub fn launch_graph(&mut self) -> Result<()> {
        let g = self.graph.clone().ok_or_else(|| {
            Error::Plan("no ringreduce graph captured (or the buffers grew since)".into())
        })?;
        let continues = self.chain == Some((Algo::OneShotFlag, g.count, 0));
        if g.chained && !continues {
            // Every rank's stream waits for every other rank's: then the
            // graph's first push (half 1) cannot meet a pending read.
            let fence = Arc::new(crate::algo::fence_plan(self.ranks));
            self.backend.launch(&fence)?;
        }
        self.chain = None;
        self.backend.launch_graph()?;
        if g.chained {
            self.chain = Some((Algo::OneShotFlag, g.count, 0));
        }
        Ok(())
    }

    /// Launch NCCL's all-reduce on the same buffers (CUDA backend only).
    pub fn launch_nccl(&mut self, count: usize, in_place: bool) -> Result<()> {
        self.chain = None;
        self.backend.launch_nccl(count, in_place)
    }

    /// Capture [`GRAPH_CALLS`] NCCL all-reduces per rank into a CUDA graph
    /// (CUDA only).
    pub fn nccl_graph_capture(&mut self, count: usize, in_place: bool) -> Result<()> {
        self.chain = None;
        self.nccl_graph = false;
        self.reserve(count, 0)?;
        self.backend
            .nccl_graph_capture(count, in_place, GRAPH_CALLS)?;
        self.nccl_graph = true;
        Ok(())
    }

    /// Replay the captured NCCL graph on every rank ([`GRAPH_CALLS`] calls).
    pub fn launch_nccl_graph(&mut self) -> Result<()> {
        if !self.nccl_graph {
            return Err(Error::Plan(
                "no NCCL graph captured (or the buffers grew since)".into(),
            ));
        }
        self.chain = None;
        self.backend.launch_nccl_graph()
    }

    /// Fill the first `count` elements of every rank's `buf` with `value`.
    pub fn fill(&mut self, buf: Buf, count: usize, value: T) -> Result<()> {
        self.chain = None;
        self.backend.fill(buf, count, value)
    }

    /// Wait for all launched work on every rank.
    pub fn synchronize(&mut self) -> Result<()> {
        self.backend.synchronize()
    }

    /// Read the first `count` elements of every rank's buffer.
    pub fn read(&mut self, buf: Buf, count: usize) -> Result<Vec<Vec<T>>> {
        self.backend.read(buf, count)
    }

    /// Run one collective on what [`Engine::load`] wrote, and wait for it.
    pub fn run_loaded(&mut self, count: usize, in_place: bool) -> Result<CallInfo> {
        let algo = self.algo_for(count);
        let plan = self.plan(algo, count, in_place)?;
        self.launch(&plan)?;
        self.synchronize()?;
        Ok(CallInfo {
            algo: plan.name.clone(),
            traffic: plan.traffic(size_of::<T>()),
        })
    }

    /// All-reduce in place: every `bufs[r]` becomes the element-wise sum.
    pub fn all_reduce_in_place(&mut self, bufs: &mut [Vec<T>]) -> Result<CallInfo> {
        let count = self.load(bufs, true)?;
        let info = self.run_loaded(count, true)?;
        for (dst, src) in bufs.iter_mut().zip(self.read(Buf::Recv, count)?) {
            *dst = src;
        }
        Ok(info)
    }

    /// All-reduce out of place: `recv[r]` becomes the sum of all `send`;
    /// `send` is untouched.
    pub fn all_reduce(&mut self, send: &[Vec<T>], recv: &mut [Vec<T>]) -> Result<CallInfo> {
        if recv.len() != send.len() {
            return Err(Error::WrongBufferCount {
                ranks: send.len(),
                buffers: recv.len(),
            });
        }
        for (rank, (s, r)) in send.iter().zip(recv.iter()).enumerate() {
            if s.len() != r.len() {
                return Err(Error::SendRecvMismatch {
                    rank,
                    send: s.len(),
                    recv: r.len(),
                });
            }
        }
        let count = self.load(send, false)?;
        let info = self.run_loaded(count, false)?;
        for (dst, src) in recv.iter_mut().zip(self.read(Buf::Recv, count)?) {
            *dst = src;
        }
        Ok(info)
    }
}

/// Check that there is one buffer per rank and all have the same length.
pub fn check_buffers<T>(ranks: usize, bufs: &[Vec<T>]) -> Result<usize> {
    if bufs.len() != ranks {
        return Err(Error::WrongBufferCount {
            ranks,
            buffers: bufs.len(),
        });
    }
    let expected = bufs.first().map_or(0, Vec::len);
    for (rank, b) in bufs.iter().enumerate() {
        if b.len() != expected {
            return Err(Error::LengthMismatch {
                rank,
                expected,
                found: b.len(),
            });
        }
    }
    Ok(expected)
}

/// Reject counts whose byte size overflows or cannot be addressed.
pub fn check_fits<T: Element>(count: usize, ranks: usize) -> Result<()> {
    let bytes = (count as u128) * (size_of::<T>() as u128) * (ranks as u128) * 3;
    if bytes > isize::MAX as u128 {
        return Err(Error::TooLarge {
            what: "all-reduce",
            count: count as u128,
            elem_size: size_of::<T>(),
            ranks,
            detail: "send, receive and scratch buffers exceed the address space".into(),
        });
    }
    Ok(())
}
