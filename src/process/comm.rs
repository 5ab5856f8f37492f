//! [`Comm<T>`]: the per-process communicator from before
//! [`Communicator`](crate::Communicator), kept for migration: one process
//! is one rank, fixed to one element type. It is a thin wrapper: its calls
//! run through the same code as a [`Communicator`](crate::Communicator)
//! of one rank per process (the calls' agreement included).
//!
//! Migration:
//!
//! | old | new |
//! | --- | --- |
//! | `Comm::<T>::from_env(EngineConfig::cpu(0))` | `Communicator::from_env(BackendChoice::Cpu)` |
//! | `Comm::<T>::new(rank, size, store, cfg)` | `Communicator::new(EngineConfig::job(JobSpec::new(rank, size, store), backend))` |
//! | `comm.all_reduce(&send, &mut recv, op)` | the same, any element type per call |
//! | `comm.into_engine().retype::<U>()` | `comm.all_reduce::<U>(..)` (or `comm.into_engine::<U>()`) |
//! | `comm.barrier()` returns `()` | returns [`CallInfo`] |
//!
//! ```no_run
//! use ringreduce::{BackendChoice, Communicator, ReduceOp};
//! // Started by `ringreduce launch -n 4 -- ./my-program` or `mpirun -np 4`:
//! let mut comm = Communicator::from_env(BackendChoice::Cpu).unwrap();
//! let mut x = vec![comm.rank() as f32; 1024];
//! comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
//! ```

#![allow(deprecated)]

use super::JobSpec;
use crate::backend::BufId;
use crate::communicator::{self, Agreement, HostCall};
use crate::element::{Element, ReduceOp};
use crate::engine::{CallInfo, DeviceBuffers, Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::plan::Collective;
use std::path::{Path, PathBuf};

/// One rank of a multi-process job, for one element type (see the
/// `process::comm` module doc in the source).
#[deprecated(
    since = "0.1.0",
    note = "use ringreduce::Communicator::from_env(backend) or Communicator::new(EngineConfig::job(..)) (issue 32 item 8; README, 'Migrating')"
)]
pub struct Comm<T: Element = f32> {
    engine: Engine<T>,
    agree: Agreement,
}

impl<T: Element> std::fmt::Debug for Comm<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Comm<{}>(rank {} of {})",
            T::DTYPE.name(),
            self.rank(),
            self.size()
        )
    }
}

impl<T: Element> Comm<T> {
    /// The communicator of the job this process was started in
    /// ([`JobSpec::from_env`]: `ringreduce launch`, `mpirun`, PMI). `cfg`
    /// gives the backend, the devices, the timeout; its rank count is
    /// ignored (the job's is taken): [`crate::Communicator::from_env`] takes
    /// none.
    pub fn from_env(cfg: EngineConfig) -> Result<Comm<T>> {
        let spec = JobSpec::from_env()?.ok_or_else(|| {
            Error::BadArgument(
                "not started as a rank of a job (no RINGREDUCE_RANK, OMPI_COMM_WORLD_RANK or PMI_RANK); use `ringreduce launch` or mpirun".into(),
            )
        })?;
        Self::with_spec(spec, cfg)
    }

    /// Rank `rank` of `size`, meeting the others at the store directory
    /// `store` (rank 0 creates it; it must not exist yet).
    pub fn new(
        rank: usize,
        size: usize,
        store: impl Into<PathBuf>,
        cfg: EngineConfig,
    ) -> Result<Comm<T>> {
        Self::with_spec(JobSpec::new(rank, size, store), cfg)
    }

    /// The communicator of `spec`'s rank.
    pub fn with_spec(spec: JobSpec, mut cfg: EngineConfig) -> Result<Comm<T>> {
        cfg.ranks = spec.size;
        cfg.process = Some(spec);
        let check = cfg.check_calls;
        let engine = Engine::<T>::new(cfg)?;
        let job = engine
            .core()
            .job()
            .cloned()
            .ok_or_else(|| Error::internal("a process engine without a job"))?;
        Ok(Comm {
            engine,
            agree: Agreement::new(job, check),
        })
    }

    pub fn rank(&self) -> usize {
        self.agree.rank()
    }

    pub fn size(&self) -> usize {
        self.agree.job().size()
    }

    /// The store directory the ranks met at.
    pub fn store_path(&self) -> &Path {
        // A `Comm` always meets through a store directory (`Comm::new`).
        self.agree.job().store_path().unwrap_or(Path::new(""))
    }

    /// The engine underneath (this rank's view of the job). Its host-slice
    /// calls take this rank's buffer only.
    pub fn engine(&self) -> &Engine<T> {
        &self.engine
    }

    pub fn engine_mut(&mut self) -> &mut Engine<T> {
        &mut self.engine
    }

    pub fn into_engine(self) -> Engine<T> {
        self.engine
    }

    /// A handle that aborts this rank's communicator from any thread (see
    /// [`crate::Communicator::abort_handle`]).
    pub fn abort_handle(&self) -> crate::sync::AbortHandle {
        self.engine.abort_handle()
    }

    /// Every rank reaches this point before any goes on.
    pub fn barrier(&self) -> Result<CallInfo> {
        self.agree.barrier(self.engine.core())
    }

    /// Wait for this rank's work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.engine.synchronize()
    }

    fn host(&mut self, c: HostCall, send: &[T], recv: &mut [T]) -> Result<CallInfo> {
        communicator::process_host(&mut self.engine, &self.agree, c, send, recv)
    }

    /// All-reduce: `recv` becomes the reduction of every rank's `send`
    /// (same length on every rank).
    pub fn all_reduce(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        self.host(HostCall::new(Collective::AllReduce, false, op), send, recv)
    }

    /// All-reduce in place.
    pub fn all_reduce_in_place(&mut self, buf: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        self.host(HostCall::new(Collective::AllReduce, true, op), &[], buf)
    }

    /// Reduce-scatter: `send` holds `size * c` elements; `recv` (c
    /// elements) becomes this rank's chunk of the reduction.
    pub fn reduce_scatter(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        self.host(
            HostCall::new(Collective::ReduceScatter, false, op),
            send,
            recv,
        )
    }

    /// Reduce-scatter in place (NCCL's convention): `buf` holds `size * c`
    /// elements; its slice `rank` becomes this rank's chunk.
    pub fn reduce_scatter_in_place(&mut self, buf: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        self.host(HostCall::new(Collective::ReduceScatter, true, op), &[], buf)
    }

    /// All-gather: `recv` (`size * c` elements) becomes the concatenation
    /// of every rank's `send` (c elements).
    pub fn all_gather(&mut self, send: &[T], recv: &mut [T]) -> Result<CallInfo> {
        let c = HostCall::new(Collective::AllGather, false, ReduceOp::Sum);
        self.host(c, send, recv)
    }

    /// All-gather in place (NCCL's convention): slice `rank` of `buf` is
    /// this rank's input; `buf` becomes the concatenation.
    pub fn all_gather_in_place(&mut self, buf: &mut [T]) -> Result<CallInfo> {
        let c = HostCall::new(Collective::AllGather, true, ReduceOp::Sum);
        self.host(c, &[], buf)
    }

    // -- device buffers -----------------------------------------------------

    /// A buffer of `len` elements on this rank's device (collective: every
    /// rank allocates one).
    pub fn alloc(&mut self, len: usize) -> Result<DeviceBuffers<T>> {
        communicator::process_alloc(&mut self.engine, &self.agree, len)
    }

    /// Free a buffer (collective).
    pub fn free(&mut self, b: DeviceBuffers<T>) -> Result<()> {
        communicator::process_free(&mut self.engine, &self.agree, b)
    }

    /// Write `data` to the start of this rank's part of `b`.
    pub fn write_buffer(&mut self, b: &DeviceBuffers<T>, data: &[T]) -> Result<()> {
        let r = self.rank();
        self.engine.write_buffer(b, r, data)
    }

    /// This rank's part of `b`.
    pub fn read_buffer(&mut self, b: &DeviceBuffers<T>) -> Result<Vec<T>> {
        let r = self.rank();
        self.engine.read_buffer(b, r)
    }

    /// A collective on device buffers (`send` and `recv` the same buffer:
    /// in place); `count` is NCCL's. Waits for this rank's part.
    pub fn collective_device(
        &mut self,
        collective: Collective,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let (e, a) = (&mut self.engine, &self.agree);
        communicator::process_device(e, a, (collective, op), (send, recv), count)
    }

    /// All-reduce of `count` elements on device buffers.
    pub fn all_reduce_device(
        &mut self,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        self.collective_device(Collective::AllReduce, send, recv, count, op)
    }

    /// The buffer id behind `b` (for tools).
    pub fn buffer_id(b: &DeviceBuffers<T>) -> BufId {
        b.id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Three ranks as threads of this test (the communicator does not care
    /// whether its peers are threads or processes: they meet in the store
    /// and share memory through its files).
    #[test]
    fn ranks_as_threads_agree_on_every_collective() {
        let dir = std::env::temp_dir().join(format!(
            "rr-comm-{}-{}",
            std::process::id(),
            super::super::unique_suffix()
        ));
        let n = 3;
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let dir = dir.clone();
                std::thread::spawn(move || -> Result<()> {
                    let mut cfg = EngineConfig::cpu(n);
                    cfg.timeout = Duration::from_secs(20);
                    let mut c = Comm::<f32>::new(r, n, &dir, cfg)?;
                    assert_eq!((c.rank(), c.size()), (r, n));
                    // all-reduce, out of place and in place, several sizes
                    // (so buffers grow and are re-shared).
                    for len in [1usize, 1000, 70_000] {
                        let send: Vec<f32> = (0..len).map(|i| (i % 7) as f32 + r as f32).collect();
                        let mut recv = vec![0.0; len];
                        c.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
                        for (i, &x) in recv.iter().enumerate() {
                            assert_eq!(x, 3.0 * (i % 7) as f32 + 3.0, "len {len} element {i}");
                        }
                        let mut buf = send.clone();
                        c.all_reduce_in_place(&mut buf, ReduceOp::Max)?;
                        assert!(buf
                            .iter()
                            .enumerate()
                            .all(|(i, &x)| x == (i % 7) as f32 + 2.0));
                    }
                    // reduce-scatter and all-gather.
                    let send: Vec<f32> = (0..n * 4).map(|i| i as f32).collect();
                    let mut mine = vec![0.0; 4];
                    c.reduce_scatter(&send, &mut mine, ReduceOp::Sum)?;
                    assert_eq!(
                        mine,
                        (0..4).map(|i| 3.0 * (r * 4 + i) as f32).collect::<Vec<_>>()
                    );
                    let mut all = vec![0.0; n * 2];
                    c.all_gather(&[r as f32, 10.0 + r as f32], &mut all)?;
                    assert_eq!(all, vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
                    let mut ip = vec![r as f32; n * 2];
                    c.all_gather_in_place(&mut ip)?;
                    assert_eq!(ip, vec![0.0, 0.0, 1.0, 1.0, 2.0, 2.0]);
                    // Device buffers stay in the rank's memory between calls.
                    let b = c.alloc(64)?;
                    c.write_buffer(&b, &[1.0 + r as f32; 64])?;
                    c.all_reduce_device(&b, &b, 64, ReduceOp::Sum)?;
                    assert_eq!(c.read_buffer(&b)?, vec![6.0; 64]);
                    c.free(b)?;
                    // A peer's buffers are not this process's to touch.
                    let other = (r + 1) % n;
                    let e = c
                        .engine_mut()
                        .core_mut()
                        .write(other, BufId::RECV, 0, &[0; 4]);
                    assert!(e.is_err());
                    c.barrier()?;
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join().expect("rank thread").expect("rank");
        }
        assert!(!dir.exists(), "rank 0 removed the store");
    }
}
