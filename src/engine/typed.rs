//! [`Engine<T>`]: the typed engine, for one element type at a time, on host
//! slices or on per-rank buffers that stay on the devices. It is what a
//! [`Communicator`](crate::Communicator) runs on (typed per call); use it
//! directly for what only it has (stream-ordered calls, NCCL, the plan
//! cache). Its host-slice calls take one buffer per rank of this process:
//! every rank, or in a multi-process job this rank's alone.

use super::{Core, EngineConfig};
use crate::algo::AlgoChoice;
use crate::backend::NcclCall;
use crate::backend::{Binding, BufId};
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Collective, Plan, Shape, Traffic};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod device;
pub use device::DeviceBuffers;

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

    /// Whether the call was a barrier (no algorithm ran).
    pub fn is_barrier(&self) -> bool {
        self.0 == "barrier"
    }

    /// The algorithm that ran, to run later calls on it
    /// ([`EngineConfig::algo`](crate::EngineConfig::algo)); `None` for a
    /// barrier.
    pub fn algorithm(&self) -> Option<crate::AlgoChoice> {
        if self.is_barrier() {
            return None;
        }
        self.0.parse().ok()
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
    pub(super) fn of(plan: &Plan) -> CallInfo {
        CallInfo {
            path: CallPath(plan.name.clone()),
            traffic: plan.traffic(),
        }
    }
}

static NEXT_ENGINE: AtomicU64 = AtomicU64::new(1);

/// The typed engine (see [the module doc](super)).
pub struct Engine<T: Element = f32> {
    pub(super) core: Core,
    id: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> std::fmt::Debug for Engine<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine<{}>({})", T::DTYPE.name(), self.core.describe())
    }
}

pub(super) fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

pub(super) fn as_bytes_mut<T: Element>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

/// Check one buffer per rank, all of length `len(r)`.
fn check_lengths(
    ranks: usize,
    lens: &[usize],
    what: &'static str,
    expected: impl Fn(usize) -> usize,
) -> Result<()> {
    if lens.len() != ranks {
        return Err(Error::WrongBufferCount {
            ranks,
            buffers: lens.len(),
        });
    }
    for (rank, &l) in lens.iter().enumerate() {
        if l != expected(rank) {
            return Err(Error::BufferSize {
                rank,
                what,
                expected: expected(rank),
                found: l,
            });
        }
    }
    Ok(())
}

impl<T: Element> Engine<T> {
    /// Create the engine (see [`Core::new`]).
    pub fn new(cfg: EngineConfig) -> Result<Self> {
        Ok(Self::from_core(Core::new(cfg)?))
    }

    /// The typed engine over `core`.
    pub fn from_core(core: Core) -> Self {
        Engine {
            core,
            id: NEXT_ENGINE.fetch_add(1, Ordering::Relaxed),
            _t: PhantomData,
        }
    }

    /// The untyped engine underneath.
    pub fn into_core(self) -> Core {
        self.core
    }

    /// The same engine for another element type (no new setup).
    pub fn retype<U: Element>(self) -> Engine<U> {
        Engine {
            core: self.core,
            id: self.id,
            _t: PhantomData,
        }
    }

    /// The untyped engine underneath.
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// The untyped engine underneath, mutably.
    pub fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    /// The ranks of the engine.
    pub fn ranks(&self) -> usize {
        self.core.ranks()
    }

    /// A handle that aborts every wait of this engine from any thread (see
    /// [`Core::abort_handle`]).
    pub fn abort_handle(&self) -> crate::sync::AbortHandle {
        self.core.abort_handle()
    }

    /// Wait for every rank's work to finish (see [`Core::synchronize`]).
    pub fn synchronize(&mut self) -> Result<()> {
        self.core.synchronize()
    }

    /// The shape of a call of `collective` with NCCL's `count`.
    pub fn shape(&self, collective: Collective, count: usize, in_place: bool) -> Shape {
        Shape {
            collective,
            ranks: self.ranks(),
            count,
            elem_size: T::DTYPE.size(),
            in_place,
        }
    }

    fn bind_default(&self) -> Arc<Vec<Binding>> {
        self.core.default_bind()
    }

    // -- the engine's default buffers ---------------------------------------

    /// Write each rank's input of a `collective` call into the engine's
    /// default buffers (for NCCL's in-place all-gather: into the rank's own
    /// slice of the output); returns the call's shape. Inputs are `count`
    /// elements each (reduce-scatter: `ranks * count`). `inputs` holds every
    /// rank's; only the [local ranks](Core::local_ranks) are written (in a
    /// multi-process job, each process writes its own).
    pub fn load(
        &mut self,
        collective: Collective,
        inputs: &[impl AsRef<[T]>],
        in_place: bool,
    ) -> Result<Shape> {
        let shape = self.shape_of(collective, inputs, in_place)?;
        self.load_shaped(&shape, inputs)?;
        Ok(shape)
    }

    /// Write the local ranks' `inputs` for a call of `shape` (an empty
    /// input writes nothing: a broadcast's non-root ranks).
    pub(super) fn load_shaped(&mut self, shape: &Shape, inputs: &[impl AsRef<[T]>]) -> Result<()> {
        self.reserve_for(shape)?;
        let size = T::DTYPE.size();
        let local = self.core.local_ranks();
        for (r, data) in inputs.iter().enumerate().filter(|(r, _)| local.contains(r)) {
            let input = shape.input(r);
            let id = Binding::DEFAULT.id(input.buf);
            self.core
                .write(r, id, input.range.start * size, as_bytes(data.as_ref()))?;
        }
        Ok(())
    }

    /// The shape of a call on `inputs` (one per rank, of equal lengths; a
    /// reduce-scatter's split into the rank count).
    fn shape_of(
        &self,
        collective: Collective,
        inputs: &[impl AsRef<[T]>],
        in_place: bool,
    ) -> Result<Shape> {
        let n = self.ranks();
        let lens: Vec<usize> = inputs.iter().map(|v| v.as_ref().len()).collect();
        let first = lens.first().copied().unwrap_or(0);
        check_lengths(n, &lens, "input", |_| first)?;
        let count = match collective {
            Collective::ReduceScatter => {
                if first % n != 0 {
                    return Err(Error::BadArgument(format!(
                        "reduce-scatter inputs of {first} elements do not split into {n} equal chunks"
                    )));
                }
                first / n
            }
            _ => first,
        };
        Ok(self.shape(collective, count, in_place))
    }

    /// Make the default buffers big enough for `shape`.
    pub fn reserve_for(&mut self, shape: &Shape) -> Result<()> {
        let size = T::DTYPE.size();
        let n = self.ranks();
        self.core
            .reserve(BufId::SEND, &vec![shape.send_len() * size; n])?;
        self.core
            .reserve(BufId::RECV, &vec![shape.recv_len() * size; n])
    }

    /// Overwrite what `shape`'s call will write but not read (its outputs
    /// out of place) with a pattern no result should have (all bits set:
    /// NaN for every float type), so unwritten elements show.
    pub fn poison(&mut self, shape: &Shape) -> Result<()> {
        let size = T::DTYPE.size();
        for r in self.core.local_ranks() {
            let out = shape.output(r);
            let input = shape.input(r);
            let ranges: Vec<std::ops::Range<usize>> = if !shape.in_place {
                vec![out.range.clone()]
            } else if shape.collective == Collective::AllGather {
                vec![
                    out.range.start..input.range.start,
                    input.range.end..out.range.end,
                ]
            } else {
                vec![]
            };
            for range in ranges.into_iter().filter(|r| !r.is_empty()) {
                let pattern = vec![poison_byte::<T>(); range.len() * size];
                self.core
                    .write(r, BufId::RECV, range.start * size, &pattern)?;
            }
        }
        Ok(())
    }

    /// Launch one call of `shape` on the default buffers (asynchronously on
    /// CUDA) with `choice` or the engine's default; returns its plan.
    pub fn launch(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: &Shape,
        op: ReduceOp,
    ) -> Result<Arc<Plan>> {
        let bind = self.bind_default();
        self.core.launch(choice, *shape, T::DTYPE, op, bind)
    }

    /// Launch and wait.
    pub fn run(
        &mut self,
        choice: Option<&AlgoChoice>,
        shape: &Shape,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let plan = self.launch(choice, shape, op)?;
        self.core.synchronize()?;
        Ok(CallInfo::of(&plan))
    }

    /// The output of `shape`'s call of every [local rank](Core::local_ranks)
    /// (in one process: every rank), in rank order.
    pub fn read_output(&mut self, shape: &Shape) -> Result<Vec<Vec<T>>> {
        self.core
            .local_ranks()
            .map(|r| self.read_region(r, &shape.output(r)))
            .collect()
    }

    /// The input of `shape`'s call of every local rank, as it is now.
    pub fn read_input(&mut self, shape: &Shape) -> Result<Vec<Vec<T>>> {
        self.core
            .local_ranks()
            .map(|r| self.read_region(r, &shape.input(r)))
            .collect()
    }

    fn read_region(&mut self, r: usize, region: &crate::plan::Region) -> Result<Vec<T>> {
        let size = T::DTYPE.size();
        let mut out =
            crate::sys::proc::zeroed::<T>(region.len(), &format!("rank {r}'s copy of its output"))?;
        self.core.read(
            r,
            Binding::DEFAULT.id(region.buf),
            region.range.start * size,
            as_bytes_mut(&mut out),
        )?;
        Ok(out)
    }

    /// NCCL's call for `shape` on the default buffers.
    pub fn nccl_call(&self, shape: &Shape, op: ReduceOp) -> NcclCall {
        NcclCall {
            collective: shape.collective,
            count: shape.count,
            dtype: T::DTYPE,
            op,
            in_place: shape.in_place,
            bind: self.bind_default(),
        }
    }
}

/// The poison byte for `T`: all bits set (NaN for every float type); for
/// integers 0x5A, a value far from the small exact inputs' sums.
pub(crate) fn poison_byte<T: Element>() -> u8 {
    if T::DTYPE.is_float() {
        0xFF
    } else {
        0x5A
    }
}
