//! [`Communicator`]: the one communicator, in every way ranks are run.
//!
//! One type, the same methods, whatever runs the ranks; its type parameter
//! says what each call takes:
//!
//! * **every rank from one caller** ([`Communicator::new`] with
//!   [`EngineConfig::cpu`]/[`EngineConfig::cuda`]): a
//!   `Communicator<EveryRank>`, each call takes one buffer per rank, in
//!   rank order ([`Mode::AllRanks`]);
//! * **one handle per rank thread** ([`Communicator::per_rank`], or
//!   [`Communicator::into_ranks`]): each rank's thread calls its
//!   `Communicator` with its own buffer; the call runs when every rank has
//!   called ([`Mode::PerRank`]);
//! * **one rank per process** ([`Communicator::from_env`] under
//!   `ringreduce launch` or `mpirun`, or [`Communicator::join`] with
//!   [`EngineConfig::job`]): each process calls with its rank's buffer
//!   ([`Mode::Process`]).
//!
//! Every call is generic in the element type
//! (`comm.all_reduce::<f32>(..)`, usually inferred from the buffers) and
//! returns a [`CallInfo`]: all-reduce, reduce-scatter, all-gather and
//! broadcast, each out of place and in place, and a barrier; the
//! collectives also run on device buffers ([`Communicator::alloc`]).
//! [`Communicator::abort_handle`] ends every wait from any thread.
//!
//! # Every rank must ask for the same call
//!
//! Each call carries its number and a descriptor (`CallDesc`: the
//! collective and its root, the element type, the op, the count, the
//! place) that the ranks compare before any data moves: ranks that ask for
//! different calls, or are at different calls, all get one
//! [`Error::Mismatch`] at once, naming what each asked for, and their
//! buffers are untouched. A rank whose own arguments are wrong (an output
//! of the wrong length) fails the call with its error; the others get
//! [`Error::PeerArgument`] naming it, and the communicator stays usable.
//! The per-rank style numbers its calls across ranks (every rank's k-th
//! call is call k: a rank late for a call the others gave up on gets that
//! call's failure) and compares descriptors as ranks arrive. One rank per
//! process all-gathers the numbers and descriptors through the job's
//! control segment, one extra small exchange per call
//! ([`EngineConfig::check_calls`], on by default; docs/lab/perf-notes.md has
//! its measured cost). Every rank from one caller has nothing to compare.
//!
//! # One error per call
//!
//! A failed call returns one error, the same in every mode: the cause,
//! not the ranks that noticed it ([`Error`]). A failure after data started
//! to move (a rank failed, died, panicked, dropped its handle or timed out;
//! an abort) is fatal ([`Error::is_fatal`]): every later call of the
//! communicator is [`Error::Poisoned`]. What was found before anything
//! moved (arguments, a mismatch, a plan refused) leaves it usable.
//!
//! ```
//! use ringreduce::{Communicator, EngineConfig, ReduceOp};
//! // Three ranks from this thread: one buffer per rank.
//! let mut comm = Communicator::new(EngineConfig::cpu(3))?;
//! let mut bufs = vec![vec![1.0f32; 10], vec![2.0; 10], vec![3.0; 10]];
//! let info = comm.all_reduce_in_place(&mut bufs, ReduceOp::Sum)?;
//! assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 6.0)));
//! println!("{} moved {:?}", info.path, info.traffic);
//! // Another element type, same communicator.
//! let mut ints = vec![vec![7i64; 2]; 3];
//! comm.broadcast_in_place(&mut ints, 0)?;
//! # Ok::<(), ringreduce::Error>(())
//! ```

pub mod desc;
mod per_process;
mod per_rank;
pub(crate) mod ranks;
mod study;

pub(crate) use desc::{CallDesc, CallKind};
pub(crate) use per_process::{process_host, Agreement};
pub(crate) use per_rank::rank_host;
use per_rank::rank_step;

use crate::backend::BackendChoice;
use crate::element::{Element, ReduceOp};
use crate::engine::{CallInfo, DeviceBuffers, Engine, EngineConfig, HostCall};
use crate::error::{Error, Result};
use crate::plan::{Collective, Traffic};
use crate::sync::AbortHandle;
use ranks::{Payload, RankHandle};

/// How a communicator runs its ranks (see [the module doc](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Every rank from one caller: one buffer per rank per call.
    AllRanks,
    /// One handle per rank, each called from its rank's thread.
    PerRank,
    /// One rank per process of a job.
    Process,
}

/// The engine a communicator calls, lent to each call ([`EngineCell::with`]).
pub(crate) struct EngineCell(Option<Engine>);

impl EngineCell {
    pub(crate) fn new(e: Engine) -> EngineCell {
        EngineCell(Some(e))
    }

    fn gone() -> Error {
        Error::Poisoned {
            reason: "a call panicked inside the engine".into(),
        }
    }

    /// Run `f` on the engine. It is out of the cell while `f` runs, so a
    /// panic inside leaves the cell empty: later calls are refused
    /// ([`Error::Poisoned`]) instead of running on an engine in an unknown
    /// state.
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut Engine) -> Result<R>) -> Result<R> {
        let mut e = self.0.take().ok_or_else(Self::gone)?;
        let r = f(&mut e);
        self.0 = Some(e);
        r
    }

    fn engine(&self) -> Result<&Engine> {
        self.0.as_ref().ok_or_else(Self::gone)
    }

    fn take(&mut self) -> Result<Engine> {
        self.0.take().ok_or_else(Self::gone)
    }
}

fn unbox<X: 'static>(p: Payload) -> Result<X> {
    p.downcast::<X>()
        .map(|b| *b)
        .map_err(|_| Error::internal("a rank's part of a call has another type"))
}

/// What a barrier reports.
fn barrier_info(ranks: usize) -> CallInfo {
    CallInfo {
        path: crate::engine::CallPath::barrier(),
        traffic: vec![Traffic::default(); ranks],
    }
}

// -- the communicator ------------------------------------------------------------

enum Inner {
    AllRanks(EngineCell),
    PerRank(RankHandle),
    Process {
        engine: EngineCell,
        agree: Agreement,
    },
}

/// What the calls of a [`Communicator`] take, told apart in its type: a
/// handle of one rank ([`OneRank`], the default) takes that rank's buffer,
/// a communicator of every rank ([`EveryRank`]) one buffer per rank.
pub trait CallShape: sealed::Sealed + Send + 'static {}

/// A handle of one rank (one thread per rank, or one process per rank):
/// each call takes that rank's buffer (a slice, `Vec` or array), and
/// [`Communicator::rank`] is its rank.
#[derive(Debug, Clone, Copy)]
pub struct OneRank;

/// Every rank from one caller: each call takes one buffer per rank, in
/// rank order (a slice, `Vec` or array of `Vec`s or slices), even for one
/// rank.
#[derive(Debug, Clone, Copy)]
pub struct EveryRank;

impl CallShape for OneRank {}
impl CallShape for EveryRank {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::OneRank {}
    impl Sealed for super::EveryRank {}
}

// -- the buffers of a call -------------------------------------------------------

/// Input buffers of a call of a communicator of shape `S`.
///
/// A handle of one rank (`Communicator`, [`OneRank`]) takes that rank's
/// buffer: a slice, a `Vec` or an array. A communicator of every rank
/// (`Communicator<EveryRank>`) takes one buffer per rank: a slice, `Vec` or
/// array of `Vec`s or of slices, in rank order, even for one rank. Each
/// shape accepts only its own buffers, so a flat `Vec` given to a
/// communicator of every rank, or a list of buffers given to one rank's
/// handle, does not compile. The element type follows from the buffers
/// (`comm.all_reduce(&send, &mut recv, op)` with `Vec<f32>`s is a call on
/// `f32`).
pub trait SendBufs<S: CallShape, T: Element> {
    /// The buffers, in rank order.
    fn bufs(&self) -> Vec<&[T]>;
}

/// Output (or in-place) buffers of a call of a communicator of shape `S`
/// (the same shapes as [`SendBufs`]).
pub trait RecvBufs<S: CallShape, T: Element> {
    /// The buffers, in rank order.
    fn bufs_mut(&mut self) -> Vec<&mut [T]>;
}

// One rank's buffer.

impl<T: Element> SendBufs<OneRank, T> for [T] {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self]
    }
}

impl<T: Element> SendBufs<OneRank, T> for Vec<T> {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self.as_slice()]
    }
}

impl<T: Element, const N: usize> SendBufs<OneRank, T> for [T; N] {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self.as_slice()]
    }
}

impl<T: Element> RecvBufs<OneRank, T> for [T] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self]
    }
}

impl<T: Element> RecvBufs<OneRank, T> for Vec<T> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self.as_mut_slice()]
    }
}

impl<T: Element, const N: usize> RecvBufs<OneRank, T> for [T; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self.as_mut_slice()]
    }
}

// One buffer per rank: any list of anything that reads (writes) as a
// slice.

impl<T: Element, B: AsRef<[T]>> SendBufs<EveryRank, T> for [B] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<T: Element, B: AsRef<[T]>> SendBufs<EveryRank, T> for Vec<B> {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<T: Element, B: AsRef<[T]>, const N: usize> SendBufs<EveryRank, T> for [B; N] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<T: Element, B: AsMut<[T]>> RecvBufs<EveryRank, T> for [B] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(AsMut::as_mut).collect()
    }
}

impl<T: Element, B: AsMut<[T]>> RecvBufs<EveryRank, T> for Vec<B> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(AsMut::as_mut).collect()
    }
}

impl<T: Element, B: AsMut<[T]>, const N: usize> RecvBufs<EveryRank, T> for [B; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(AsMut::as_mut).collect()
    }
}

/// The communicator (see [the module doc](self)): `Communicator` (a handle
/// of one rank) or `Communicator<EveryRank>` (every rank from one caller).
pub struct Communicator<S: CallShape = OneRank> {
    inner: Inner,
    shape: std::marker::PhantomData<fn() -> S>,
    /// Why every later call is refused: an earlier call's error was fatal
    /// ([`Error::is_fatal`]), in every mode alike.
    broken: Option<String>,
    ranks: usize,
    local: std::ops::Range<usize>,
    abort: AbortHandle,
    describe: String,
    kind: crate::backend::BackendKind,
}

impl<S: CallShape> std::fmt::Debug for Communicator<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator({:?}, ranks {:?} of {}, {})",
            self.mode(),
            self.local,
            self.ranks,
            self.describe
        )
    }
}

impl<S: CallShape> Communicator<S> {
    /// The communicator of `engine` (one rank of a job, or every rank).
    fn of_engine(engine: Engine, check: bool) -> Communicator<S> {
        let ranks = engine.ranks();
        let local = engine.local_ranks();
        let abort = engine.abort_handle();
        let describe = engine.describe();
        let kind = engine.backend_kind();
        let inner = match engine.job().cloned() {
            Some(job) => Inner::Process {
                engine: EngineCell::new(engine),
                agree: Agreement::new(job, check),
            },
            None => Inner::AllRanks(EngineCell::new(engine)),
        };
        Communicator {
            inner,
            shape: std::marker::PhantomData,
            broken: None,
            ranks,
            local,
            abort,
            describe,
            kind,
        }
    }
}

impl Communicator<EveryRank> {
    /// A communicator of every rank of `cfg`, all in this process, called
    /// from one caller with one buffer per rank ([`EngineConfig::cpu`],
    /// [`EngineConfig::cuda`]). A job's rank is [`Communicator::join`].
    pub fn new(cfg: EngineConfig) -> Result<Communicator<EveryRank>> {
        if cfg.process.is_some() {
            return Err(Error::BadArgument(
                "this configuration names a job, whose process runs one rank: join it with Communicator::join(cfg) (or Communicator::from_env(backend)), whose calls take that rank's buffer".into(),
            ));
        }
        let check = cfg.check_calls;
        Ok(Communicator::of_engine(Engine::new(cfg)?, check))
    }

    /// Split into one handle per rank ([`Communicator::per_rank`]), to move
    /// to the ranks' threads.
    pub fn into_ranks(self) -> Result<Vec<Communicator>> {
        let Inner::AllRanks(mut slot) = self.inner else {
            return Err(Error::internal(
                "a communicator of every rank runs no job and no per-rank rendezvous",
            ));
        };
        let engine = slot.take()?;
        let (ranks, abort, describe, kind) = (self.ranks, self.abort, self.describe, self.kind);
        Ok(ranks::handles(engine)
            .into_iter()
            .map(|h| Communicator {
                broken: None,
                shape: std::marker::PhantomData,
                local: h.rank()..h.rank() + 1,
                inner: Inner::PerRank(h),
                ranks,
                abort: abort.clone(),
                describe: describe.clone(),
                kind,
            })
            .collect())
    }
}

impl Communicator<OneRank> {
    /// One handle per rank of `cfg` (all in this process), to move to the
    /// ranks' threads: each calls with its own rank's buffer, and a call
    /// runs when every rank made it.
    pub fn per_rank(cfg: EngineConfig) -> Result<Vec<Communicator>> {
        Communicator::new(cfg)?.into_ranks()
    }

    /// This process's rank of the job `cfg` names ([`EngineConfig::job`],
    /// [`EngineConfig::job_from_env`]): it joins the job (every rank must)
    /// and each call takes this rank's buffer.
    pub fn join(cfg: EngineConfig) -> Result<Communicator> {
        if cfg.process.is_none() {
            return Err(Error::BadArgument(
                "this configuration names no job: every rank runs in this process, so use Communicator::new(cfg) (one buffer per rank per call) or Communicator::per_rank(cfg) (one handle per rank thread)".into(),
            ));
        }
        let check = cfg.check_calls;
        Ok(Communicator::of_engine(Engine::new(cfg)?, check))
    }

    /// This process's rank of the job it was started in (`ringreduce
    /// launch`, `mpirun`, PMI), on `backend`; the rank count is the job's.
    /// For other settings (timeout, devices, ...):
    /// `Communicator::join(EngineConfig::job_from_env(backend)?)` with them
    /// set.
    pub fn from_env(backend: BackendChoice) -> Result<Communicator> {
        Communicator::join(EngineConfig::job_from_env(backend)?)
    }

    /// This handle's rank.
    pub fn rank(&self) -> usize {
        self.local.start
    }
}

impl<S: CallShape> Communicator<S> {
    /// How this communicator runs its ranks.
    pub fn mode(&self) -> Mode {
        match self.inner {
            Inner::AllRanks(_) => Mode::AllRanks,
            Inner::PerRank(_) => Mode::PerRank,
            Inner::Process { .. } => Mode::Process,
        }
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.ranks
    }

    /// The ranks this handle calls for, whose buffers each call takes in
    /// order: every rank ([`Mode::AllRanks`]) or one.
    pub fn local_ranks(&self) -> std::ops::Range<usize> {
        self.local.clone()
    }

    /// The backend, in words.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// The backend the ranks run on.
    pub fn backend_kind(&self) -> crate::backend::BackendKind {
        self.kind
    }

    /// A handle that aborts this communicator from any thread: every wait
    /// of every rank's call ends with [`Error::Aborted`], and later calls
    /// fail with [`Error::Poisoned`]. In a job the other processes are told
    /// this rank failed ([`Error::PeerFailed`]).
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// The engine underneath, for what only it has (stream-ordered calls,
    /// NCCL, the engine's own buffers and plans). Not for a per-rank
    /// handle. The host-slice collectives are the communicator's alone.
    pub fn into_engine(self) -> Result<Engine> {
        match self.inner {
            Inner::AllRanks(mut slot)
            | Inner::Process {
                engine: mut slot, ..
            } => slot.take(),
            Inner::PerRank(_) => Err(Error::BadArgument(
                "a per-rank handle shares its engine with the other ranks' handles".into(),
            )),
        }
    }

    /// Run one call of this handle: refused once an earlier call failed
    /// fatally, and a fatal error refuses every later one, so that
    /// [`Error::is_fatal`] says exactly whether the next call is
    /// [`Error::Poisoned`], in every mode.
    fn checked<R>(&mut self, f: impl FnOnce(&mut Self) -> Result<R>) -> Result<R> {
        if let Some(reason) = &self.broken {
            return Err(Error::Poisoned {
                reason: reason.clone(),
            });
        }
        // Refused before its arguments are looked at: an aborted
        // communicator says so whatever the call. (A per-rank handle asks
        // the rendezvous: a rank behind the others still meets the calls
        // that were under way when the abort came, and their outcome.)
        if self.abort.is_aborted() && self.mode() != Mode::PerRank {
            self.broken = Some("the communicator was aborted".into());
            return Err(Error::Poisoned {
                reason: "the communicator was aborted".into(),
            });
        }
        let r = f(self);
        if let Err(e) = &r {
            if e.is_fatal() {
                self.broken = Some(match e.root() {
                    Error::Poisoned { reason } => reason.clone(),
                    _ => format!("an earlier call failed: {e}"),
                });
            }
        }
        r
    }

    /// One host-slice collective.
    fn host<T: Element>(
        &mut self,
        c: HostCall,
        send: Vec<&[T]>,
        recv: Vec<&mut [T]>,
    ) -> Result<CallInfo> {
        self.checked(|me| me.host_unchecked(c, send, recv))
    }

    fn host_unchecked<T: Element>(
        &mut self,
        c: HostCall,
        send: Vec<&[T]>,
        mut recv: Vec<&mut [T]>,
    ) -> Result<CallInfo> {
        let one = |n: usize, what| {
            if n == 1 {
                Ok(())
            } else {
                Err(Error::BadArgument(format!(
                    "a handle of one rank takes that rank's {what} alone (1 buffer, got {n})"
                )))
            }
        };
        match &mut self.inner {
            Inner::AllRanks(slot) => slot.with(|e| e.host(c, &send, &mut recv)),
            Inner::PerRank(h) => {
                one(recv.len(), "buffer")?;
                if !c.in_place {
                    one(send.len(), "input")?;
                }
                let send = send.first().copied().unwrap_or(&[]);
                rank_host(h, c, send, &mut *recv[0])
            }
            Inner::Process { engine, agree } => {
                one(recv.len(), "buffer")?;
                if !c.in_place {
                    one(send.len(), "input")?;
                }
                let send = send.first().copied().unwrap_or(&[]);
                engine.with(|e| process_host(e, agree, c, send, &mut *recv[0]))
            }
        }
    }

    /// All-reduce: every `recv` becomes the reduction (`op`) of every rank's
    /// `send`; the sends are untouched.
    pub fn all_reduce<T: Element>(
        &mut self,
        send: &(impl SendBufs<S, T> + ?Sized),
        recv: &mut (impl RecvBufs<S, T> + ?Sized),
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::AllReduce, false, op);
        self.host(c, send.bufs(), recv.bufs_mut())
    }

    /// All-reduce in place: every buffer becomes the reduction.
    pub fn all_reduce_in_place<T: Element>(
        &mut self,
        bufs: &mut (impl RecvBufs<S, T> + ?Sized),
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::AllReduce, true, op);
        self.host(c, Vec::new(), bufs.bufs_mut())
    }

    /// Reduce-scatter: each `send` holds `size * c` elements; rank r's
    /// `recv` (c elements) becomes chunk r of the reduction.
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &(impl SendBufs<S, T> + ?Sized),
        recv: &mut (impl RecvBufs<S, T> + ?Sized),
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::ReduceScatter, false, op);
        self.host(c, send.bufs(), recv.bufs_mut())
    }

    /// Reduce-scatter in place (NCCL's convention): each buffer holds
    /// `size * c` elements; rank r's slice r becomes chunk r of the
    /// reduction (the rest of the buffer may hold partial results).
    pub fn reduce_scatter_in_place<T: Element>(
        &mut self,
        bufs: &mut (impl RecvBufs<S, T> + ?Sized),
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::ReduceScatter, true, op);
        self.host(c, Vec::new(), bufs.bufs_mut())
    }

    /// All-gather: every `recv` (`size * c` elements) becomes the
    /// concatenation of every rank's `send` (c elements).
    pub fn all_gather<T: Element>(
        &mut self,
        send: &(impl SendBufs<S, T> + ?Sized),
        recv: &mut (impl RecvBufs<S, T> + ?Sized),
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::AllGather, false, ReduceOp::Sum);
        self.host(c, send.bufs(), recv.bufs_mut())
    }

    /// All-gather in place (NCCL's convention): slice r of rank r's buffer
    /// is its input; every buffer becomes the concatenation.
    pub fn all_gather_in_place<T: Element>(
        &mut self,
        bufs: &mut (impl RecvBufs<S, T> + ?Sized),
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::AllGather, true, ReduceOp::Sum);
        self.host(c, Vec::new(), bufs.bufs_mut())
    }

    /// Broadcast: every `recv` becomes rank `root`'s `send`. Only the
    /// root's `send` is read (as long as `recv`); another rank's may be
    /// empty.
    pub fn broadcast<T: Element>(
        &mut self,
        send: &(impl SendBufs<S, T> + ?Sized),
        recv: &mut (impl RecvBufs<S, T> + ?Sized),
        root: usize,
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::Broadcast { root }, false, ReduceOp::Sum);
        self.host(c, send.bufs(), recv.bufs_mut())
    }

    /// Broadcast in place: every buffer becomes rank `root`'s.
    pub fn broadcast_in_place<T: Element>(
        &mut self,
        bufs: &mut (impl RecvBufs<S, T> + ?Sized),
        root: usize,
    ) -> Result<CallInfo> {
        let c = HostCall::new(Collective::Broadcast { root }, true, ReduceOp::Sum);
        self.host(c, Vec::new(), bufs.bufs_mut())
    }

    /// Every rank reaches this point before any goes on (every rank from
    /// one caller: this caller's work is done).
    pub fn barrier(&mut self) -> Result<CallInfo> {
        self.checked(|me| {
            let n = me.ranks;
            match &mut me.inner {
                Inner::AllRanks(slot) => slot.with(|e| {
                    e.check_usable()?;
                    e.synchronize()?;
                    Ok(barrier_info(n))
                }),
                Inner::PerRank(h) => {
                    let got = h.call(CallDesc::barrier(), Ok(()), Box::new(()), |_, parts| {
                        Ok(parts.into_iter().map(|_| Box::new(()) as Payload).collect())
                    });
                    got.map(|_| barrier_info(n))
                }
                Inner::Process { engine, agree } => {
                    let core_ok = engine.engine()?;
                    agree.barrier(core_ok)
                }
            }
        })
    }

    // -- device buffers ------------------------------------------------------

    /// A buffer of `len` elements of `T` on every rank's device (on the
    /// CPU backend, in host memory), kept between calls. Collective: every
    /// rank allocates.
    pub fn alloc<T: Element>(&mut self, len: usize) -> Result<DeviceBuffers<T>> {
        let desc = CallDesc::buffers(CallKind::Alloc, T::DTYPE, len);
        let b = self.agreed(desc, len, |e| e.alloc(len).map(SharedBuffers))?;
        Ok(b.0)
    }

    /// Free buffers of this communicator (collective).
    pub fn free<T: Element>(&mut self, b: DeviceBuffers<T>) -> Result<()> {
        let desc = CallDesc::buffers(CallKind::Free, T::DTYPE, b.len());
        let id = b.id().0;
        self.agreed(desc, id, move |e| e.free(b))
    }

    /// One collective step on the engine, in every mode: every rank from
    /// one caller runs `f` at once; with a handle per rank, `f` runs once
    /// every rank asked for `desc` with an equal `part` (one of them runs
    /// it for all); a rank process runs it once the job agreed on `desc`.
    fn agreed<P, R>(
        &mut self,
        desc: CallDesc,
        part: P,
        f: impl FnOnce(&mut Engine) -> Result<R>,
    ) -> Result<R>
    where
        P: PartialEq + std::fmt::Debug + Send + 'static,
        R: Clone + Send + 'static,
    {
        self.checked(|me| match &mut me.inner {
            Inner::AllRanks(slot) => slot.with(f),
            Inner::PerRank(h) => rank_step(h, desc, part, |slot, _| slot.with(f)),
            Inner::Process { engine, agree } => engine.with(|e| {
                agree.agree(e, desc, Ok(()))?;
                f(e)
            }),
        })
    }

    /// Write `data` (one slice per local rank, at most `b.len()` elements
    /// each) to the start of each local rank's part of `b`.
    pub fn write_buffer<T: Element>(
        &mut self,
        b: &DeviceBuffers<T>,
        data: &(impl SendBufs<S, T> + ?Sized),
    ) -> Result<()> {
        self.checked(|me| {
            let data = data.bufs();
            me.check_local(data.len())?;
            let base = me.local.start;
            me.on_engine(|e| {
                for (i, d) in data.iter().enumerate() {
                    e.write_buffer(b, base + i, d)?;
                }
                Ok(())
            })
        })
    }

    /// Read the start of each local rank's part of `b` into `out` (one
    /// slice per local rank, at most `b.len()` elements each).
    pub fn read_buffer<T: Element>(
        &mut self,
        b: &DeviceBuffers<T>,
        out: &mut (impl RecvBufs<S, T> + ?Sized),
    ) -> Result<()> {
        self.checked(|me| {
            let mut out = out.bufs_mut();
            me.check_local(out.len())?;
            let base = me.local.start;
            me.on_engine(|e| {
                for (i, o) in out.iter_mut().enumerate() {
                    let got = e.read_buffer(b, base + i)?;
                    if o.len() > got.len() {
                        return Err(Error::BufferSize {
                            rank: base + i,
                            what: "read of a device buffer",
                            expected: got.len(),
                            found: o.len(),
                        });
                    }
                    o.copy_from_slice(&got[..o.len()]);
                }
                Ok(())
            })
        })
    }

    /// A collective on device buffers (`send` and `recv` the same buffers:
    /// in place); `count` is NCCL's. Waits for completion.
    pub fn collective_device<T: Element>(
        &mut self,
        collective: Collective,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let in_place = send.id() == recv.id();
        let desc = CallDesc::host(collective, T::DTYPE, op, in_place, count).on_device();
        self.agreed(desc, (send.id().0, recv.id().0), |e| {
            e.collective_device(collective, send, recv, count, op)
        })
    }

    /// A collective on another library's device memory (a torch CUDA
    /// tensor), ordered on its streams with no host wait: see
    /// [`Engine::collective_on_device`](crate::engine::Engine::collective_on_device)
    /// (rank r's input `sends[r]`, empty for in place; its output
    /// `recvs[r]`; `streams[r]` its producer's and consumer's stream). The
    /// CUDA backend; every rank run from this handle (stream-ordered, no
    /// host wait), or one rank per process (the IPC exchange refuses
    /// stream-ordered calls: the copy in waits for `streams[0]`, the call
    /// for its completion).
    #[cfg(feature = "cuda")]
    pub fn collective_on_device<T: Element>(
        &mut self,
        collective: Collective,
        op: ReduceOp,
        sends: &[crate::cuda::DeviceSpan],
        recvs: &[crate::cuda::DeviceSpan],
        streams: &std::sync::Arc<Vec<crate::cuda::RawStream>>,
    ) -> Result<CallInfo> {
        if let Inner::PerRank(_) = self.inner {
            return Err(Error::Unsupported(
                "calls on another library's device memory from one handle per rank".into(),
                "this communicator",
            ));
        }
        let in_place = sends.is_empty();
        let count = recvs.first().map_or(0, |r| r.len()) / T::DTYPE.size();
        let desc = CallDesc::host(collective, T::DTYPE, op, in_place, count).on_device();
        self.agreed(desc, (), |e| {
            e.collective_on_device(collective, T::DTYPE, op, sends, recvs, streams)
                .map(|plan| CallInfo::of(&plan))
        })
    }

    /// All-reduce of `count` elements on device buffers.
    pub fn all_reduce_device<T: Element>(
        &mut self,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        self.collective_device(Collective::AllReduce, send, recv, count, op)
    }

    fn check_local(&self, buffers: usize) -> Result<()> {
        if buffers != self.local.len() {
            return Err(Error::BadArgument(format!(
                "one buffer per rank this handle calls for ({}: ranks {:?}), got {buffers}",
                self.local.len(),
                self.local
            )));
        }
        Ok(())
    }

    /// Run a rank-local step on the engine.
    fn on_engine<R>(&mut self, f: impl FnOnce(&mut Engine) -> Result<R>) -> Result<R> {
        match &mut self.inner {
            Inner::AllRanks(slot) | Inner::Process { engine: slot, .. } => slot.with(f),
            Inner::PerRank(h) => h.with_engine(|slot| slot.with(f)),
        }
    }
}

/// A buffer handle every rank of the per-rank style gets a copy of.
struct SharedBuffers<T>(DeviceBuffers<T>);

impl<T> Clone for SharedBuffers<T> {
    fn clone(&self) -> Self {
        SharedBuffers(self.0.duplicate())
    }
}
