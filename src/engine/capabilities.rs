//! The engine's optional capabilities: CUDA graphs, NCCL, profiling (the
//! engine dispatches them only through the backend's capability traits).

use super::*;

impl Engine {
    // -- CUDA graphs -------------------------------------------------------

    /// Capture [`GRAPH_CALLS`] calls of `shape` on `choice`'s path into CUDA
    /// graphs (one per GPU for plans ordered inside kernels, else one across
    /// every GPU); returns the path. The path decides the plans.
    pub fn graph_capture(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: Shape,
        dtype: DataType,
        op: ReduceOp,
        bind: Arc<Vec<Binding>>,
    ) -> Result<String> {
        self.usable()?;
        self.graph_backend()?;
        self.check_shape(&shape)?;
        self.graph = None;
        let key = self.path_of(choice, &shape)?;
        let plans = self.paths[key].2.graph_plans(GRAPH_CALLS)?;
        // Device-ordered plans become one graph per GPU; the backend
        // captures any other plan into one graph across every GPU.
        for p in &plans {
            self.reserve_scratch(p)?;
        }
        self.last = None;
        let calls: Vec<Call> = plans
            .iter()
            .map(|p| Call {
                plan: p.clone(),
                dtype,
                op,
                bind: bind.clone(),
                timing: false,
            })
            .collect();
        let r = self.graph_backend()?.capture(&calls);
        self.track(r)?;
        self.graph = Some(Captured {
            key,
            generation: self.generation,
        });
        Ok(self.paths[key].0.clone())
    }

    /// Replay the captured graph: [`GRAPH_CALLS`] calls on every rank.
    pub fn graph_replay(&mut self) -> Result<()> {
        self.usable()?;
        let g = self
            .graph
            .clone()
            .ok_or_else(|| Error::BadArgument("no ringreduce graph captured".into()))?;
        if g.generation != self.generation {
            return Err(Error::BadArgument(
                "the captured graph is stale: the buffers it refers to were reallocated since; capture again".into(),
            ));
        }
        let continues = self.last == Some(g.key);
        let fence = match self.paths.get_mut(g.key) {
            Some(p) => p.2.before_replay(continues)?,
            None => None,
        };
        self.last = None;
        if let Some(f) = fence {
            let bind = Arc::new(vec![Binding::DEFAULT; self.ranks]);
            let call = Call {
                plan: f,
                dtype: DataType::Uint8,
                op: ReduceOp::Sum,
                bind,
                timing: false,
            };
            let r = self.backend.launch(&call);
            self.track(r)?;
        }
        let r = self.graph_backend()?.replay();
        self.track(r)?;
        self.last = Some(g.key);
        Ok(())
    }

    fn graph_backend(&mut self) -> Result<&mut dyn crate::backend::GraphBackend> {
        let kind = self.backend_kind().name();
        self.backend
            .graphs()
            .ok_or_else(|| Error::Unsupported("CUDA graphs".into(), kind))
    }

    // -- profiling ---------------------------------------------------------

    /// The backend's profiling, or why not (`what`: the thing asked for).
    fn profiling(&mut self, what: &str) -> Result<&mut dyn crate::backend::Profiling> {
        let kind = self.backend_kind().name();
        self.backend
            .profiling()
            .ok_or_else(|| Error::Unsupported(what.into(), kind))
    }

    /// Per-rank host issue profile since the last call, then reset.
    pub fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        self.profiling("profiling")?.take_issue_profile()
    }

    /// The timelines of the calls launched with timing on, since the last
    /// take.
    pub fn take_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        self.profiling("timelines")?.take_timeline()
    }

    /// The timed calls since the last take, each with the plan that ran
    /// (its ops label the times: rank, op, part), oldest first. Takes the
    /// timelines ([`Engine::take_timeline`]) too.
    pub fn take_timed_calls(&mut self) -> Result<Vec<(Arc<Plan>, CallTimeline)>> {
        let times = self.take_timeline()?;
        let mut plans = std::mem::take(&mut self.timed).into_iter();
        let mut out = Vec::with_capacity(times.len());
        for t in times {
            // A call that failed before it was timed left a plan and no
            // times: skip to the plan of this timeline.
            let plan = plans.by_ref().find(|p| p.name == t.plan).ok_or_else(|| {
                Error::internal(format!(
                    "a timeline of {} without the plan of a timed call",
                    t.plan
                ))
            })?;
            out.push((plan, t));
        }
        Ok(out)
    }

    /// Bytes each rank sent to and received from other ranks since the last
    /// take, as the backend counted them while it moved them.
    pub fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>> {
        self.profiling("traffic counters")?.take_traffic()
    }
}

/// NCCL on the engine's buffers: only the CUDA backend built with the
/// `nccl` feature has it; elsewhere every call below is refused by name.
impl Engine {
    pub(super) fn nccl_backend(&mut self) -> Result<&mut dyn crate::backend::NcclBackend> {
        let kind = self.backend_kind().name();
        let what = if cfg!(feature = "nccl") || kind != "cuda" {
            "NCCL"
        } else {
            "NCCL (built without the nccl feature)"
        };
        self.backend
            .nccl()
            .ok_or_else(|| Error::Unsupported(what.into(), kind))
    }

    /// Create NCCL communicators on the engine's ranks (one GPU per rank).
    #[cfg(feature = "nccl")]
    pub fn nccl_init(&mut self, lib: &crate::cuda::nccl::Nccl) -> Result<()> {
        let r = self.nccl_backend()?.nccl_init(lib);
        self.track(r)?;
        self.nccl_ready = true;
        Ok(())
    }

    /// Allocate the engine's buffers with NCCL's allocator (`ncclMemAlloc`,
    /// NCCL 2.27+) from here on, the memory NCCL's symmetric kernels need
    /// ([`crate::backend::NcclBuffers::Symmetric`]); every path runs on them
    /// alike. Only before the engine's first buffer, and only with every
    /// rank in this process (CUDA IPC cannot share NCCL's memory).
    #[cfg(feature = "nccl")]
    pub fn nccl_memory(&mut self, lib: &crate::cuda::nccl::Nccl) -> Result<()> {
        if !self.caps.is_empty() {
            return Err(Error::BadArgument(
                "NCCL's memory must be chosen before the engine's first buffer".into(),
            ));
        }
        if self.job_spec().is_some() {
            return Err(Error::Unsupported(
                "NCCL's memory (ncclMemAlloc) with one process per rank: CUDA IPC cannot share it"
                    .into(),
                self.backend_kind().name(),
            ));
        }
        let r = self.nccl_backend()?.nccl_memory(lib);
        self.track(r)
    }

    /// Whether NCCL communicators are set up on the ranks.
    pub fn nccl_ready(&self) -> bool {
        self.nccl_ready
    }

    /// Launch NCCL's collective on the same buffers.
    pub fn launch_nccl(&mut self, call: &NcclCall) -> Result<()> {
        self.usable()?;
        self.last = None;
        let r = self.nccl_backend()?.launch_nccl(call);
        self.track(r)
    }

    /// Capture [`GRAPH_CALLS`] NCCL calls per rank into a CUDA graph.
    pub fn nccl_graph_capture(&mut self, call: &NcclCall) -> Result<()> {
        self.usable()?;
        self.last = None;
        self.nccl_graph = None;
        let r = self.nccl_backend()?.nccl_graph_capture(call, GRAPH_CALLS);
        self.track(r)?;
        self.nccl_graph = Some(self.generation);
        Ok(())
    }

    /// Replay the captured NCCL graph.
    pub fn launch_nccl_graph(&mut self) -> Result<()> {
        self.usable()?;
        if self.nccl_graph != Some(self.generation) {
            return Err(Error::BadArgument(
                "no NCCL graph captured against the current buffers".into(),
            ));
        }
        self.last = None;
        let r = self.nccl_backend()?.launch_nccl_graph();
        self.track(r)
    }

    /// The timings of the NCCL calls made with timing on, since the last
    /// take (one op per rank each), on the same clock as
    /// [`Engine::take_timeline`]; none on a backend without NCCL (no NCCL
    /// call could be made there).
    pub fn take_nccl_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        match self.backend.nccl() {
            Some(n) => n.take_nccl_timeline(),
            None => Ok(Vec::new()),
        }
    }
}

impl Engine {
    /// NCCL's call for `shape` on the default buffers.
    pub fn nccl_call<T: Element>(&self, shape: &TypedShape<T>, op: ReduceOp) -> NcclCall {
        NcclCall {
            collective: shape.collective,
            count: shape.count,
            dtype: T::DTYPE,
            op,
            in_place: shape.in_place,
            bind: self.default_bind(),
            buffers: crate::backend::NcclBuffers::Plain,
        }
    }
}
