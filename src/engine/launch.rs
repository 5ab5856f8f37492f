//! The engine's path selection and launches: which path a call
//! takes, its next plan and scratch ([`Engine::select`], shared by every
//! launch), and the plain, lent and explicit-plan launches.

use super::*;

impl Engine {
    /// The algorithm `choice` (or the engine's default) means for `shape`.
    pub fn resolve(
        &self,
        choice: Option<&AlgoChoice>,
        shape: &Shape,
    ) -> Result<Arc<dyn crate::algo::Algorithm>> {
        choice
            .unwrap_or(&self.algo)
            .resolve_in(shape, &self.placement)
    }

    /// The name of the path a call of `shape` would take.
    pub fn path_name(&self, choice: Option<&AlgoChoice>, shape: &Shape) -> Result<String> {
        Ok(self.resolve(choice, shape)?.name())
    }

    pub(super) fn check_shape(&self, shape: &Shape) -> Result<()> {
        if shape.ranks != self.ranks {
            return Err(Error::Plan(format!(
                "a call for {} ranks on an engine of {}",
                shape.ranks, self.ranks
            )));
        }
        if let Some(root) = shape.collective.root() {
            self.check_rank(root)?;
        }
        let elems = (shape.count as u128) * (shape.ranks as u128);
        if elems * (shape.elem_size as u128) * 3 > isize::MAX as u128 {
            return Err(Error::TooLarge {
                what: "collective",
                count: shape.count as u128,
                elem_size: shape.elem_size,
                ranks: shape.ranks,
            });
        }
        Ok(())
    }

    /// Launch one collective of `shape` (asynchronously on CUDA) with
    /// `choice` (or the engine's default), on the buffers `bind`. Returns the
    /// plan that ran.
    pub(crate) fn launch_bound(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: Shape,
        dtype: DataType,
        op: ReduceOp,
        bind: Arc<Vec<Binding>>,
    ) -> Result<Arc<Plan>> {
        self.usable()?;
        self.caller_faults()?;
        let (key, plan) = self.select(choice, &shape, true)?;
        let call = self.call(&plan, dtype, op, bind);
        let r = self.backend.launch(&call);
        self.track(r)?;
        self.last = Some(key);
        Ok(plan)
    }

    /// Whether [`Engine::run_lent`] runs calls on the caller's slices here
    /// (the CPU backend in one process).
    pub(crate) fn lends(&mut self) -> bool {
        self.job.is_none() && self.backend.host_slices().is_some()
    }

    /// One call of `shape` run to completion on the caller's slices,
    /// lent to the ranks for the call (`crate::backend::HostSlices`):
    /// rank r's `Send` is `send[r]` (none in place) and its `Recv` is
    /// `recv[r]`, byte views of exactly the plan's lengths. `Ok(None)`: the
    /// backend cannot address host slices (CUDA, one process per rank);
    /// the caller then copies them through the engine's buffers.
    pub(crate) fn run_lent(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: Shape,
        dtype: DataType,
        op: ReduceOp,
        send: &[&[u8]],
        recv: &mut [&mut [u8]],
    ) -> Result<Option<Arc<Plan>>> {
        self.usable()?;
        if !self.lends() {
            return Ok(None);
        }
        // Never chained to the previous call: these are other buffers.
        let (_, plan) = self.select(choice, &shape, false)?;
        let call = self.call(&plan, dtype, op, self.default_bind.clone());
        let Some(h) = self.backend.host_slices() else {
            return Ok(None);
        };
        let r = crate::sys::lend::lend(send, recv, |s, d| h.run_lent(&call, s, d));
        self.track(r)?;
        Ok(Some(plan))
    }

    /// In a job, the faults of `RINGREDUCE_FAULT` that strike this rank's
    /// process on the caller's thread as it starts a collective (a panic,
    /// an exit; builds with fault injection only).
    fn caller_faults(&mut self) -> Result<()> {
        if let Some(job) = &self.job {
            self.calls_started += 1;
            crate::fault::at_caller(&crate::param::env_faults()?, job.rank(), self.calls_started);
        }
        Ok(())
    }

    /// Plan selection, shared by every launch: the path `choice` (or the
    /// default) takes for `shape`, its next plan (continuing the chain only
    /// when `chain` and the previous call ran this path) and its scratch.
    /// The chain mark is cleared; a launch sets it again once issued.
    pub(super) fn select(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: &Shape,
        chain: bool,
    ) -> Result<(PathKey, Arc<Plan>)> {
        let key = self.path_of(choice, shape)?;
        let continues = chain && self.last == Some(key);
        let plan = self.paths[key].2.next(continues)?;
        self.last = None;
        self.reserve_scratch(&plan)?;
        Ok((key, plan))
    }

    /// The backend's call of `plan` on `bind` (with timing on, its plan is
    /// kept for [`Engine::take_timed_calls`]).
    pub(super) fn call(
        &mut self,
        plan: &Arc<Plan>,
        dtype: DataType,
        op: ReduceOp,
        bind: Arc<Vec<Binding>>,
    ) -> Call {
        if self.timing {
            // Bounded: a caller that never takes its timelines keeps the
            // latest calls' plans only.
            if self.timed.len() >= MAX_TIMED_PLANS {
                self.timed.drain(..MAX_TIMED_PLANS / 2);
            }
            self.timed.push(plan.clone());
        }
        Call {
            plan: plan.clone(),
            dtype,
            op,
            bind,
            timing: self.timing,
        }
    }

    /// The path `choice` (or the default) takes for `shape`, created on
    /// first use.
    pub(super) fn path_of(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: &Shape,
    ) -> Result<PathKey> {
        let c = choice.unwrap_or(&self.algo);
        let ck = match c {
            AlgoChoice::Auto => 0,
            AlgoChoice::Fixed(a) => Arc::as_ptr(a) as *const () as usize,
        };
        if let Some((_, k)) = self.resolved.get(&(ck, *shape)) {
            return Ok(*k);
        }
        self.check_shape(shape)?;
        let algo = c.resolve_in(shape, &self.placement)?;
        let name = algo.name();
        let k = match self.path_index.get(&(name.clone(), *shape)) {
            Some(&k) => k,
            None => {
                self.paths.push((name.clone(), *shape, algo.path(shape)));
                let k = self.paths.len() - 1;
                self.path_index.insert((name, *shape), k);
                k
            }
        };
        // The cache holds at most a few thousand entries.
        if self.resolved.len() > 4096 {
            self.resolved.clear();
        }
        let held = match c {
            AlgoChoice::Auto => None,
            AlgoChoice::Fixed(a) => Some(a.clone()),
        };
        self.resolved.insert((ck, *shape), (held, k));
        Ok(k)
    }

    /// Launch a plan that is not a collective path (a probe, a fence).
    pub fn launch_plan(
        &mut self,
        plan: Arc<Plan>,
        dtype: DataType,
        bind: Arc<Vec<Binding>>,
    ) -> Result<()> {
        self.usable()?;
        crate::algo::checked(&plan)?;
        self.last = None;
        self.reserve_scratch(&plan)?;
        let call = self.call(&plan, dtype, ReduceOp::Sum, bind);
        let r = self.backend.launch(&call);
        self.track(r)
    }

    pub(super) fn reserve_scratch(&mut self, plan: &Plan) -> Result<()> {
        let bytes = plan.scratch_len * plan.shape.elem_size;
        if bytes > self.scratch_ok || !self.caps.contains_key(&BufId::SCRATCH) {
            self.reserve(BufId::SCRATCH, &vec![bytes; self.ranks])?;
            self.scratch_ok = self.scratch_ok.max(bytes);
        }
        // An LL kernel's slots (a no-op once they fit).
        if plan.lines_len > 0 {
            let widen = self.backend.info().lines_widen();
            let bytes = plan.lines_len * plan.shape.elem_size * widen;
            self.reserve(BufId::LL, &vec![bytes; self.ranks])?;
        }
        Ok(())
    }
}

/// The path a call ran: a fixed algorithm (`auto` resolved), or a
/// barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPath(String);

impl CallPath {
    pub(crate) fn barrier() -> CallPath {
        CallPath("barrier".into())
    }

    /// Its name, as `--algo` and `RINGREDUCE_ALGO` take it (`ring:pipe2`,
    /// `oneshot:fused`, ...), or `barrier`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CallPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for CallPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CallPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// What one collective did.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// The path that ran, e.g. `ring:pipe2`.
    pub path: CallPath,
    /// Bytes each rank sent to and received from other ranks.
    pub traffic: Vec<Traffic>,
}

impl CallInfo {
    pub(crate) fn of(plan: &Plan) -> CallInfo {
        CallInfo {
            path: CallPath(plan.name.clone()),
            traffic: plan.traffic(),
        }
    }
}

impl Engine {
    /// The shape of a call of `collective` with NCCL's `count`.
    pub fn shape<T: Element>(
        &self,
        collective: Collective,
        count: usize,
        in_place: bool,
    ) -> TypedShape<T> {
        TypedShape::of(Shape {
            collective,
            ranks: self.ranks(),
            count,
            elem_size: T::DTYPE.size(),
            in_place,
        })
    }

    /// Launch one call of `shape` on the default buffers (asynchronously on
    /// CUDA) with `choice` or the engine's default; returns its plan.
    pub fn launch<T: Element>(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: &TypedShape<T>,
        op: ReduceOp,
    ) -> Result<Arc<Plan>> {
        let bind = self.default_bind();
        self.launch_bound(choice, shape.shape(), T::DTYPE, op, bind)
    }

    /// Launch and wait.
    pub fn run<T: Element>(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: &TypedShape<T>,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let plan = self.launch(choice, shape, op)?;
        self.synchronize()?;
        Ok(CallInfo::of(&plan))
    }
}
