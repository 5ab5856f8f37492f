//! [`Comm<T>`]: the per-process communicator. One process is one rank; the
//! collective calls take this rank's buffers only (host slices, or device
//! buffers that stay on its GPU), like NCCL's.
//!
//! Every rank of the job must make the same calls in the same order with
//! the same sizes (as with NCCL): reserving buffers, choosing plans and
//! numbering calls are collective. After a failed call the communicator is
//! unusable (every rank's next call fails, naming the first failure).
//!
//! ```no_run
//! use ringreduce::{Comm, EngineConfig, ReduceOp};
//! // Started by `ringreduce launch -n 4 -- ./my-program` or `mpirun -np 4`:
//! let mut comm = Comm::<f32>::from_env(EngineConfig::cpu(0)).unwrap();
//! let mut x = vec![comm.rank() as f32; 1024];
//! comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
//! ```

use super::{Job, JobSpec};
use crate::backend::{Binding, BufId};
use crate::element::{Element, ReduceOp};
use crate::engine::{CallInfo, DeviceBuffers, Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::plan::{Collective, Shape};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One rank of a multi-process job (see [the module doc](crate::process)).
pub struct Comm<T: Element = f32> {
    engine: Engine<T>,
    job: Arc<Job>,
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
    /// gives the backend, the devices, the timeout; its rank count is taken
    /// from the job.
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
        let engine = Engine::<T>::new(cfg)?;
        let job = engine
            .core()
            .job()
            .cloned()
            .ok_or_else(|| Error::Plan("a process engine without a job".into()))?;
        Ok(Comm { engine, job })
    }

    pub fn rank(&self) -> usize {
        self.job.rank()
    }

    pub fn size(&self) -> usize {
        self.job.size()
    }

    /// The store directory the ranks met at.
    pub fn store_path(&self) -> &Path {
        self.job.store_path()
    }

    /// The engine underneath (this rank's view of the job), for the tools
    /// that work on engines (the command line's benchmarks).
    pub fn engine(&self) -> &Engine<T> {
        &self.engine
    }

    pub fn engine_mut(&mut self) -> &mut Engine<T> {
        &mut self.engine
    }

    pub fn into_engine(self) -> Engine<T> {
        self.engine
    }

    /// A handle that aborts this rank's communicator from any thread: every
    /// wait of it (a collective's steps, the buffer reservation's barriers
    /// and exchanges, [`Comm::barrier`]) ends with [`Error::Aborted`], the
    /// other ranks are told this rank failed, and later calls fail with
    /// [`Error::Poisoned`].
    pub fn abort_handle(&self) -> crate::sync::AbortHandle {
        self.engine.abort_handle()
    }

    /// Every rank reaches this point before any goes on.
    pub fn barrier(&self) -> Result<()> {
        self.job.barrier("Comm::barrier")
    }

    /// Wait for this rank's work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.engine.synchronize()
    }

    fn shape(&self, collective: Collective, count: usize, in_place: bool) -> Shape {
        self.engine.shape(collective, count, in_place)
    }

    /// Load `input` as this rank's input of `shape`, run, and copy its
    /// output into `out` (at `out_at` elements).
    fn host_call(
        &mut self,
        shape: Shape,
        input: &[T],
        op: ReduceOp,
        out: &mut [T],
        out_at: usize,
    ) -> Result<CallInfo> {
        let r = self.rank();
        let size = T::DTYPE.size();
        self.engine.reserve_for(&shape)?;
        let region = shape.input(r);
        let id = Binding::DEFAULT.id(region.buf);
        self.engine.core_mut().write(
            r,
            id,
            region.range.start * size,
            bytemuck::cast_slice(input),
        )?;
        let info = self.engine.run(None, &shape, op)?;
        let o = shape.output(r);
        let dst = &mut out[out_at..out_at + o.len()];
        self.engine.core_mut().read(
            r,
            Binding::DEFAULT.id(o.buf),
            o.range.start * size,
            bytemuck::cast_slice_mut(dst),
        )?;
        Ok(info)
    }

    fn expect(what: &'static str, expected: usize, found: usize, rank: usize) -> Result<()> {
        if expected != found {
            return Err(Error::BufferSize {
                rank,
                what,
                expected,
                found,
            });
        }
        Ok(())
    }

    /// All-reduce: `recv` becomes the reduction of every rank's `send`
    /// (same length on every rank).
    pub fn all_reduce(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        Self::expect("output", send.len(), recv.len(), self.rank())?;
        let shape = self.shape(Collective::AllReduce, send.len(), false);
        self.host_call(shape, send, op, recv, 0)
    }

    /// All-reduce in place.
    pub fn all_reduce_in_place(&mut self, buf: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        let shape = self.shape(Collective::AllReduce, buf.len(), true);
        let input = buf.to_vec();
        self.host_call(shape, &input, op, buf, 0)
    }

    /// Reduce-scatter: `send` holds `size * c` elements; `recv` (c
    /// elements) becomes this rank's chunk of the reduction.
    pub fn reduce_scatter(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        let c = recv.len();
        Self::expect("input", c * self.size(), send.len(), self.rank())?;
        let shape = self.shape(Collective::ReduceScatter, c, false);
        self.host_call(shape, send, op, recv, 0)
    }

    /// Reduce-scatter in place (NCCL's convention): `buf` holds `size * c`
    /// elements; its slice `rank` becomes this rank's chunk.
    pub fn reduce_scatter_in_place(&mut self, buf: &mut [T], op: ReduceOp) -> Result<CallInfo> {
        let n = self.size();
        if buf.len() % n != 0 {
            return Err(Error::BadArgument(format!(
                "in-place reduce-scatter buffers of {} elements do not split into {n} chunks",
                buf.len()
            )));
        }
        let c = buf.len() / n;
        let shape = self.shape(Collective::ReduceScatter, c, true);
        let input = buf.to_vec();
        let at = self.rank() * c;
        self.host_call(shape, &input, op, buf, at)
    }

    /// All-gather: `recv` (`size * c` elements) becomes the concatenation
    /// of every rank's `send` (c elements).
    pub fn all_gather(&mut self, send: &[T], recv: &mut [T]) -> Result<CallInfo> {
        Self::expect("output", send.len() * self.size(), recv.len(), self.rank())?;
        let shape = self.shape(Collective::AllGather, send.len(), false);
        self.host_call(shape, send, ReduceOp::Sum, recv, 0)
    }

    /// All-gather in place (NCCL's convention): slice `rank` of `buf` is
    /// this rank's input; `buf` becomes the concatenation.
    pub fn all_gather_in_place(&mut self, buf: &mut [T]) -> Result<CallInfo> {
        let n = self.size();
        if buf.len() % n != 0 {
            return Err(Error::BadArgument(format!(
                "in-place all-gather buffers of {} elements do not split into {n} slices",
                buf.len()
            )));
        }
        let c = buf.len() / n;
        let shape = self.shape(Collective::AllGather, c, true);
        let r = self.rank();
        let input = buf[r * c..(r + 1) * c].to_vec();
        self.host_call(shape, &input, ReduceOp::Sum, buf, 0)
    }

    // -- device buffers -----------------------------------------------------

    /// A buffer of `len` elements on this rank's device (collective: every
    /// rank allocates one).
    pub fn alloc(&mut self, len: usize) -> Result<DeviceBuffers<T>> {
        self.engine.alloc(len)
    }

    /// Free a buffer (collective).
    pub fn free(&mut self, b: DeviceBuffers<T>) -> Result<()> {
        self.engine.free(b)
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
        self.engine
            .collective_device(collective, send, recv, count, op)
    }

    /// All-reduce of `count` elements on device buffers.
    pub fn all_reduce_device(
        &mut self,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        self.engine.all_reduce_device(send, recv, count, op)
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
