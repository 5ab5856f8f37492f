//! [`Engine<T>`]: the typed engine, for one element type at a time, on host
//! slices or on per-rank buffers that stay on the devices. It is what a
//! [`Communicator`](crate::Communicator) runs on (typed per call); use it
//! directly for what only it has (stream-ordered calls, NCCL, the plan
//! cache). Its host-slice calls take one buffer per rank of this process:
//! every rank, or in a multi-process job this rank's alone.

use super::{Core, EngineConfig};
use crate::algo::AlgoChoice;
use crate::backend::{Binding, BufId, NcclCall};
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
    core: Core,
    id: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> std::fmt::Debug for Engine<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine<{}>({})", T::DTYPE.name(), self.core.describe())
    }
}

fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn as_bytes_mut<T: Element>(v: &mut [T]) -> &mut [u8] {
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

    pub fn from_core(core: Core) -> Self {
        Engine {
            core,
            id: NEXT_ENGINE.fetch_add(1, Ordering::Relaxed),
            _t: PhantomData,
        }
    }

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

    pub fn core(&self) -> &Core {
        &self.core
    }

    pub fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    pub fn ranks(&self) -> usize {
        self.core.ranks()
    }

    /// A handle that aborts every wait of this engine from any thread (see
    /// [`Core::abort_handle`]).
    pub fn abort_handle(&self) -> crate::sync::AbortHandle {
        self.core.abort_handle()
    }

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
    fn load_shaped(&mut self, shape: &Shape, inputs: &[impl AsRef<[T]>]) -> Result<()> {
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

    // -- host slices ---------------------------------------------------------
    //
    // The host-slice calls take one buffer per rank this process runs
    // ([`Core::local_ranks`]): every rank in one process; in a multi-process
    // job, this process's rank alone (issue 32 item 6: given every rank's
    // buffers there, rank 1's result landed in `bufs[0]`). Buffer i belongs
    // to rank `local_ranks().start + i`.

    /// Error unless `buffers` buffers are one per local rank.
    fn check_buffers(&self, buffers: usize) -> Result<()> {
        let local = self.core.local_ranks();
        let n = self.ranks();
        if local.len() == n {
            if buffers != n {
                return Err(Error::WrongBufferCount { ranks: n, buffers });
            }
            return Ok(());
        }
        if buffers != local.len() {
            return Err(Error::BadArgument(format!(
                "this process runs rank {} of a job of {n} ranks: a host-slice call takes that rank's buffer alone \
                 (1 buffer, got {buffers}); the other ranks' buffers live in their own processes",
                local.start
            )));
        }
        Ok(())
    }

    /// Load `inputs` (one per local rank) into the engine's buffers; in a
    /// multi-process job `load` takes every rank's input and writes the
    /// local ones, so the other ranks' places hold this rank's, never
    /// written.
    fn load_local(
        &mut self,
        collective: Collective,
        inputs: &[&[T]],
        in_place: bool,
        count: Option<usize>,
    ) -> Result<Shape> {
        if let Some(count) = count {
            let shape = self.shape(collective, count, in_place);
            let local = self.core.local_ranks();
            let all: Vec<&[T]> = (0..self.ranks())
                .map(|r| match r.checked_sub(local.start) {
                    Some(i) if i < inputs.len() => inputs[i],
                    _ => &[],
                })
                .collect();
            self.load_shaped(&shape, &all)?;
            return Ok(shape);
        }
        let local = self.core.local_ranks();
        if local.len() == self.ranks() {
            return self.load(collective, inputs, in_place);
        }
        let first = inputs.first().copied().unwrap_or(&[]);
        let all: Vec<&[T]> = (0..self.ranks())
            .map(|r| match r.checked_sub(local.start) {
                Some(i) if i < inputs.len() => inputs[i],
                _ => first,
            })
            .collect();
        self.load(collective, &all, in_place)
    }

    /// One collective on the caller's slices (one per local rank). On a
    /// backend whose ranks can address them (the CPU backend in one
    /// process) the call runs on them, lent for the call: no copy in or
    /// out. Otherwise `inputs` are loaded into the engine's buffers and
    /// each local rank's output is copied straight into `outputs`, with no
    /// intermediate vector (issue 32 item 11).
    ///
    /// `count`: the call's count when the inputs do not all have its length
    /// (a broadcast's non-root ranks may pass empty inputs, never read).
    fn host_call(
        &mut self,
        collective: Collective,
        inputs: &[&[T]],
        in_place: bool,
        op: ReduceOp,
        outputs: &mut [&mut [T]],
        count: Option<usize>,
    ) -> Result<(Shape, CallInfo)> {
        self.check_buffers(inputs.len())?;
        if !in_place && outputs.len() == self.ranks() {
            let shape = match count {
                Some(c) => self.shape(collective, c, false),
                None => self.shape_of(collective, inputs, false)?,
            };
            let ins: Vec<&[u8]> = inputs.iter().map(|s| as_bytes(s)).collect();
            let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(|d| as_bytes_mut(d)).collect();
            let lent = self
                .core
                .run_lent(None, shape, T::DTYPE, op, &ins, &mut outs)?;
            if let Some(plan) = lent {
                return Ok((shape, CallInfo::of(&plan)));
            }
        }
        let shape = self.load_local(collective, inputs, in_place, count)?;
        let info = self.run(None, &shape, op)?;
        self.read_output_into(&shape, outputs)?;
        Ok((shape, info))
    }

    /// Copy the output of `shape`'s call of every local rank into
    /// `outputs`, in local-rank order; each destination must hold exactly
    /// that rank's output.
    fn read_output_into(&mut self, shape: &Shape, outputs: &mut [&mut [T]]) -> Result<()> {
        let size = T::DTYPE.size();
        for (r, dst) in self.core.local_ranks().zip(outputs.iter_mut()) {
            let region = shape.output(r);
            if dst.len() != region.len() {
                return Err(Error::BufferSize {
                    rank: r,
                    what: "output",
                    expected: region.len(),
                    found: dst.len(),
                });
            }
            self.core.read(
                r,
                Binding::DEFAULT.id(region.buf),
                region.range.start * size,
                as_bytes_mut(dst),
            )?;
        }
        Ok(())
    }

    fn check_out(&self, recv: &[usize], expected: usize) -> Result<()> {
        self.check_buffers(recv.len())?;
        let base = self.core.local_ranks().start;
        for (i, &found) in recv.iter().enumerate() {
            if found != expected {
                return Err(Error::BufferSize {
                    rank: base + i,
                    what: "output",
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }

    /// All-reduce: `recv[r]` becomes the reduction of every `send`; the
    /// sends are untouched. Any slices or vectors.
    pub fn all_reduce(
        &mut self,
        send: &[impl AsRef<[T]>],
        recv: &mut [impl AsMut<[T]>],
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let lens: Vec<usize> = recv.iter_mut().map(|r| r.as_mut().len()).collect();
        let count = send.first().map_or(0, |s| s.as_ref().len());
        self.check_out(&lens, count)?;
        let ins: Vec<&[T]> = send.iter().map(AsRef::as_ref).collect();
        let mut outs: Vec<&mut [T]> = recv.iter_mut().map(AsMut::as_mut).collect();
        let (_, info) = self.host_call(Collective::AllReduce, &ins, false, op, &mut outs, None)?;
        Ok(info)
    }

    /// All-reduce in place: every `bufs[r]` becomes the reduction.
    pub fn all_reduce_in_place(
        &mut self,
        bufs: &mut [impl AsMut<[T]>],
        op: ReduceOp,
    ) -> Result<CallInfo> {
        self.in_place(Collective::AllReduce, bufs, op)
    }

    /// An in-place call on the caller's buffers: each rank's input is read
    /// from its buffer (an all-gather's from its own slice), and its output
    /// written back over it, with no copy of the buffers in between.
    fn in_place(
        &mut self,
        collective: Collective,
        bufs: &mut [impl AsMut<[T]>],
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let n = self.ranks();
        self.check_buffers(bufs.len())?;
        let first = self.core.local_ranks().start;
        let mut all: Vec<&mut [T]> = bufs.iter_mut().map(AsMut::as_mut).collect();
        let len = all.first().map_or(0, |b| b.len());
        if let Some((i, b)) = all.iter().enumerate().find(|(_, b)| b.len() != len) {
            return Err(Error::BufferSize {
                rank: first + i,
                what: "in-place buffer",
                expected: len,
                found: b.len(),
            });
        }
        let splits = matches!(
            collective,
            Collective::ReduceScatter | Collective::AllGather
        );
        if splits && len % n != 0 {
            return Err(Error::BadArgument(format!(
                "in-place {collective} buffers of {len} elements do not split into {n} equal chunks"
            )));
        }
        // On a backend whose ranks can address the caller's buffers, the
        // call runs on them (each rank's `Recv` is its whole buffer).
        if all.len() == n {
            let count = if splits { len / n } else { len };
            let shape = self.shape(collective, count, true);
            let mut outs: Vec<&mut [u8]> = all.iter_mut().map(|b| as_bytes_mut(b)).collect();
            if let Some(plan) = self
                .core
                .run_lent(None, shape, T::DTYPE, op, &[], &mut outs)?
            {
                return Ok(CallInfo::of(&plan));
            }
        }
        let shape = {
            let inputs: Vec<&[T]> = match collective {
                Collective::AllGather => {
                    let c = len / n;
                    all.iter()
                        .enumerate()
                        .map(|(i, b)| b.get((first + i) * c..(first + i + 1) * c).unwrap_or(&[]))
                        .collect()
                }
                _ => all.iter().map(|b| &**b).collect(),
            };
            self.load_local(collective, &inputs, true, None)?
        };
        let info = self.run(None, &shape, op)?;
        // Each rank's output over its buffer: a reduce-scatter's at its
        // chunk, the others' over the whole buffer.
        let mut outs: Vec<&mut [T]> = Vec::with_capacity(all.len());
        for (r, b) in self.core.local_ranks().zip(all.iter_mut()) {
            let o = shape.output(r);
            let base = if collective == Collective::ReduceScatter {
                o.range.start
            } else {
                0
            };
            let end = (base + o.len()).min(b.len());
            outs.push(&mut b[base.min(end)..end]);
        }
        self.read_output_into(&shape, &mut outs)?;
        Ok(info)
    }

    /// Reduce-scatter: each `send[r]` has `ranks * c` elements; `recv[r]`
    /// (c elements) becomes chunk r of the reduction.
    pub fn reduce_scatter(
        &mut self,
        send: &[impl AsRef<[T]>],
        recv: &mut [impl AsMut<[T]>],
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let n = self.ranks();
        let total = send.first().map_or(0, |s| s.as_ref().len());
        let lens: Vec<usize> = recv.iter_mut().map(|r| r.as_mut().len()).collect();
        self.check_out(&lens, total / n.max(1))?;
        let ins: Vec<&[T]> = send.iter().map(AsRef::as_ref).collect();
        let mut outs: Vec<&mut [T]> = recv.iter_mut().map(AsMut::as_mut).collect();
        let (_, info) =
            self.host_call(Collective::ReduceScatter, &ins, false, op, &mut outs, None)?;
        Ok(info)
    }

    /// Reduce-scatter in place (NCCL's convention): each `bufs[r]` holds
    /// `ranks * c` elements; its slice r becomes chunk r of the reduction.
    pub fn reduce_scatter_in_place(
        &mut self,
        bufs: &mut [impl AsMut<[T]>],
        op: ReduceOp,
    ) -> Result<CallInfo> {
        self.in_place(Collective::ReduceScatter, bufs, op)
    }

    /// All-gather: `recv[r]` (`ranks * c` elements) becomes the
    /// concatenation of every `send` (c elements each).
    pub fn all_gather(
        &mut self,
        send: &[impl AsRef<[T]>],
        recv: &mut [impl AsMut<[T]>],
    ) -> Result<CallInfo> {
        let n = self.ranks();
        let c = send.first().map_or(0, |s| s.as_ref().len());
        let lens: Vec<usize> = recv.iter_mut().map(|r| r.as_mut().len()).collect();
        self.check_out(&lens, c * n)?;
        let ins: Vec<&[T]> = send.iter().map(AsRef::as_ref).collect();
        let mut outs: Vec<&mut [T]> = recv.iter_mut().map(AsMut::as_mut).collect();
        let (_, info) = self.host_call(
            Collective::AllGather,
            &ins,
            false,
            ReduceOp::Sum,
            &mut outs,
            None,
        )?;
        Ok(info)
    }

    /// All-gather in place (NCCL's convention): slice r of `bufs[r]` is rank
    /// r's input; every buffer becomes the concatenation.
    pub fn all_gather_in_place(&mut self, bufs: &mut [impl AsMut<[T]>]) -> Result<CallInfo> {
        self.in_place(Collective::AllGather, bufs, ReduceOp::Sum)
    }

    /// Broadcast: every `recv[r]` becomes rank `root`'s `send` (the other
    /// ranks' sends are not read; all have the same length, NCCL's count).
    pub fn broadcast(
        &mut self,
        send: &[impl AsRef<[T]>],
        recv: &mut [impl AsMut<[T]>],
        root: usize,
    ) -> Result<CallInfo> {
        self.core.check_rank(root)?;
        let lens: Vec<usize> = recv.iter_mut().map(|r| r.as_mut().len()).collect();
        let count = lens.first().copied().unwrap_or(0);
        self.check_out(&lens, count)?;
        self.check_buffers(send.len())?;
        // Only the root's input is read: every other rank's may be empty
        // (or of the call's length).
        let base = self.core.local_ranks().start;
        for (i, s) in send.iter().enumerate() {
            let found = s.as_ref().len();
            if found != count && (base + i == root || found != 0) {
                return Err(Error::BufferSize {
                    rank: base + i,
                    what: if base + i == root {
                        "the root's input"
                    } else {
                        "input (empty, or as long as the output: only the root's is read)"
                    },
                    expected: count,
                    found,
                });
            }
        }
        let ins: Vec<&[T]> = send.iter().map(AsRef::as_ref).collect();
        let mut outs: Vec<&mut [T]> = recv.iter_mut().map(AsMut::as_mut).collect();
        let (_, info) = self.host_call(
            Collective::Broadcast { root },
            &ins,
            false,
            ReduceOp::Sum,
            &mut outs,
            Some(count),
        )?;
        Ok(info)
    }

    /// Broadcast in place: every `bufs[r]` becomes `bufs[root]`.
    pub fn broadcast_in_place(
        &mut self,
        bufs: &mut [impl AsMut<[T]>],
        root: usize,
    ) -> Result<CallInfo> {
        self.core.check_rank(root)?;
        self.in_place(Collective::Broadcast { root }, bufs, ReduceOp::Sum)
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
