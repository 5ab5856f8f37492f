//! The CPU backend with one rank per process: the CI stand-in for CUDA IPC.
//!
//! Layering, the same as on the GPU:
//!
//! * buffers: each process allocates its rank's buffers as nameless shared
//!   segments ([`Mapping::create_exported`], labelled
//!   `buf-r<rank>-b<id>-p<pid>-<n>`); a reserve is a collective step (every
//!   rank idle, each allocates what grew, the labels and handles are
//!   all-gathered, every rank maps its peers' new buffers, then the owner
//!   closes the handle: the mappings stay, and no name is left anywhere
//!   for a killed job to leave behind);
//! * ordering: the plan's signals on the job's shared board (atomic
//!   counters in the control segment), published when an op completed;
//! * execution: this process's rank runs its ops through the same
//!   interpreter as the threads of [`super::cpu`] ([`super::cpu::execute`]):
//!   a peer copy is a `memcpy` into the peer's mapping, a peer read (the
//!   pull paths) reads the peer's mapping.
//!
//! Why shared memory and not messages: the rank code and every path,
//! including those that read a peer's memory (`oneshot:fused`, the
//! parameter server), run unchanged, and the structure (export, publish in
//! the store, open in the peer, re-open when a buffer grows) is CUDA IPC's,
//! so CI tests the same protocol the GPU uses. A signal costs an atomic
//! store, not a message.
//!
//! A call returns when this rank's ops are done; other ranks may still be in
//! it (as GPU streams may be): the plans' fences make that safe.

use super::cpu::{execute, CpuMem, Run, Storage};
use super::{
    check_call, Backend, BackendInfo, BackendKind, BufId, Call, CallTimeline, DeviceMemory,
    IssueProfile, Profiling,
};
use crate::error::{Error, Result};
use crate::fault::FaultPlan;
use crate::process::reads::PeerReads;
use crate::process::Job;
use crate::sync::{AbortHandle, SignalBoard};
use crate::sys::shm::Mapping;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The CPU backend of one rank of a multi-process job.
pub struct CpuProcessBackend {
    job: Arc<Job>,
    me: usize,
    mem: CpuMem,
    /// The store name of each mapped buffer: (rank, id) -> (file, bytes).
    names: HashMap<(usize, BufId), (String, usize)>,
    board: Arc<SignalBoard>,
    gen: u64,
    abort: AbortHandle,
    faults: FaultPlan,
    info: BackendInfo,
    epoch: Instant,
    timelines: Vec<CallTimeline>,
    profile: IssueProfile,
    /// Peers reading this rank's send buffers (see [`crate::process::reads`]).
    reads: PeerReads,
}

/// Segments this process created (their names' unique part).
static SEGMENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn bad_entry(rank: usize, text: &str) -> Error {
    Error::internal(format!(
        "rank {rank} published a bad buffer entry {text:?} (expected name, bytes and handle)"
    ))
}

fn io(path: &std::path::Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Io {
        path: path.display().to_string(),
        source: e,
    }
}

impl CpuProcessBackend {
    pub fn new(job: Arc<Job>, timeout: Duration, faults: FaultPlan) -> Result<Self> {
        let (me, n) = (job.rank(), job.size());
        let abort = AbortHandle::new();
        job.control().watch_abort(abort.clone());
        let board = Arc::new(job.signal_board(abort.clone(), timeout));
        let info = BackendInfo {
            kind: Some(BackendKind::Cpu),
            ranks: n,
            rank_to_device: vec![0; n],
            describe: format!(
                "cpu: rank {me} of {n} processes ({}), buffers in shared memory (nameless memfd segments), the job's key files under {}",
                job.spec().origin.name(),
                job.store_path().display()
            ),
            hardware: vec![format!(
                "CPU: {} hardware threads",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            )],
            setup: None,
        };
        Ok(CpuProcessBackend {
            me,
            mem: CpuMem::new(n)?,
            names: HashMap::new(),
            board,
            gen: 0,
            abort,
            faults,
            info,
            epoch: Instant::now(),
            timelines: Vec::new(),
            profile: IssueProfile::default(),
            reads: PeerReads::default(),
            job,
        })
    }

    fn local(&self, rank: usize, what: &str) -> Result<()> {
        if rank != self.me {
            return Err(Error::BadArgument(format!(
                "{what} rank {rank}'s buffer: it lives in rank {rank}'s process (this process is rank {})",
                self.me
            )));
        }
        Ok(())
    }

    /// Tell every rank that this one failed (they are waiting for it in a
    /// collective step), and return the error.
    fn failed(&self, e: Error) -> Error {
        self.board.fail_with(self.gen, self.me, &e);
        e
    }

    fn insert(&self, rank: usize, id: BufId, m: Mapping, bytes: usize) {
        let mut map = self.mem.ranks[rank]
            .bufs
            .write()
            .unwrap_or_else(|e| e.into_inner());
        map.insert(id, (Arc::new(Mutex::new(Storage::Shared(m))), bytes));
    }

    fn reserve_inner(&mut self, id: BufId, want: usize) -> Result<()> {
        let me = self.me;
        let mut fresh = None;
        let have = self.names.get(&(me, id)).map(|x| x.1);
        if have.is_none_or(|h| h < want) {
            if self.faults.alloc_fails(me) {
                return Err(Error::Worker {
                    rank: me,
                    message: format!("injected allocation failure of {want} bytes"),
                });
            }
            // Unique in this process for its whole life (a name a peer
            // mapped is never reused, whichever backend made it).
            let n = SEGMENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("buf-r{me}-b{}-p{}-{n}", id.0, std::process::id());
            let (m, export) = Mapping::create_exported(&name, want)
                .map_err(io(&std::path::PathBuf::from(format!("memfd:{name}"))))?;
            self.insert(me, id, m, want);
            self.names.insert((me, id), (name.clone(), want));
            fresh = Some(export);
        }
        // Each rank publishes its buffer's unique name, size and handle (the
        // handle only while `fresh` holds it open: peers that already mapped
        // this name skip it).
        let (name, bytes) = self.names[&(me, id)].clone();
        let handle = fresh
            .as_ref()
            .map_or_else(String::new, |e| e.path().display().to_string());
        let all = self.job.allgather(
            format!("{name}\n{bytes}\n{handle}").as_bytes(),
            &format!("reserve of buffer {}", id.0),
        )?;
        for (r, entry) in all.iter().enumerate().filter(|(r, _)| *r != me) {
            let text = String::from_utf8_lossy(entry);
            let mut parts = text.splitn(3, '\n');
            let (n, b, h) = match (parts.next(), parts.next(), parts.next()) {
                (Some(n), Some(b), Some(h)) => match b.parse::<usize>() {
                    Ok(b) => (n.to_string(), b, h.to_string()),
                    Err(_) => return Err(bad_entry(r, &text)),
                },
                _ => return Err(bad_entry(r, &text)),
            };
            if self.names.get(&(r, id)).is_some_and(|x| x.0 == n) {
                continue;
            }
            if h.is_empty() {
                return Err(bad_entry(r, &text));
            }
            let path = std::path::PathBuf::from(h);
            let m = Mapping::open(&path, b).map_err(io(&path))?;
            self.insert(r, id, m, b);
            self.names.insert((r, id), (n, b));
        }
        self.job.barrier(&format!(
            "reserve of buffer {} (every rank mapped it)",
            id.0
        ))?;
        // Every peer mapped it: the handle can go, the memory stays.
        drop(fresh);
        Ok(())
    }
}

impl Backend for CpuProcessBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    /// Collective: every rank of the job calls it with the same `bytes`.
    fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        let want = bytes.get(self.me).copied().unwrap_or(0);
        self.job
            .barrier(&format!("reserve of buffer {} (every rank idle)", id.0))?;
        self.reads.forget(id);
        self.reserve_inner(id, want).map_err(|e| self.failed(e))
    }

    /// Collective, like [`Backend::reserve`].
    fn release(&mut self, id: BufId) -> Result<()> {
        self.job
            .barrier(&format!("release of buffer {} (every rank idle)", id.0))?;
        for (r, m) in self.mem.ranks.iter().enumerate() {
            m.bufs
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            self.names.remove(&(r, id));
        }
        self.reads.forget(id);
        Ok(())
    }

    fn write(&mut self, rank: usize, id: BufId, offset: usize, data: &[u8]) -> Result<()> {
        self.local(rank, "write into")?;
        let (w, len) = self.mem.get(rank, id)?;
        self.reads.before_write(id, self.job.control())?;
        if offset + data.len() > len {
            return Err(Error::BufferSize {
                rank,
                what: "buffer",
                expected: len,
                found: offset + data.len(),
            });
        }
        let mut g = w.lock().unwrap_or_else(|e| e.into_inner());
        let Storage::Shared(m) = &mut *g else {
            return Err(Error::internal("a process rank's buffer on the heap"));
        };
        self.mem
            .copy(&mut m.bytes_mut()[offset..offset + data.len()], data);
        Ok(())
    }

    fn read(&mut self, rank: usize, id: BufId, offset: usize, out: &mut [u8]) -> Result<()> {
        self.local(rank, "read")?;
        let (w, len) = self.mem.get(rank, id)?;
        if offset + out.len() > len {
            return Err(Error::BufferSize {
                rank,
                what: "buffer",
                expected: len,
                found: offset + out.len(),
            });
        }
        let mut g = w.lock().unwrap_or_else(|e| e.into_inner());
        let Storage::Shared(m) = &mut *g else {
            return Err(Error::internal("a process rank's buffer on the heap"));
        };
        self.mem
            .copy(out, &m.bytes_mut()[offset..offset + out.len()]);
        Ok(())
    }

    fn launch(&mut self, call: &Call) -> Result<()> {
        check_call(call, self.info.ranks)?;
        if self.abort.is_aborted() {
            return Err(Error::Poisoned {
                reason: "the engine was aborted".into(),
            });
        }
        if call.plan.signal_count() > self.board.len() {
            return Err(Error::Plan(format!(
                "{} needs {} signals; the job's shared board holds {}",
                call.plan.name,
                call.plan.signal_count(),
                self.board.len()
            )));
        }
        self.gen += 1;
        let run = Run {
            call: call.clone(),
            board: self.board.clone(),
            gen: self.gen,
            call_no: self.gen,
            faults: self.faults.clone(),
            epoch: self.epoch,
        };
        let me = self.me;
        let t0 = Instant::now();
        let launch_ns = t0.duration_since(self.epoch).as_secs_f64() * 1e9;
        if let Err(e) = self.reads.begin(call, me, self.gen, self.job.control()) {
            return Err(self.failed(e));
        }
        let r =
            catch_unwind(AssertUnwindSafe(|| execute(&self.mem, me, &run))).unwrap_or_else(|p| {
                Err(Error::Worker {
                    rank: me,
                    message: crate::pool::panic_message(p.as_ref()),
                })
            });
        self.profile.calls += 1;
        self.profile.total_ns += t0.elapsed().as_nanos() as u64;
        match r {
            Ok(ops) => {
                // This rank's ops are done: it reads no peer's input any more.
                self.job.control().publish_drained(self.gen);
                if call.timing {
                    self.timelines.push(CallTimeline {
                        plan: call.plan.name.clone(),
                        clock: format!("host timestamps of rank {me}'s process (CPU backend, one rank per process; other processes' clocks are not aligned with it)"),
                        launch_ns,
                        skew_ns: 0.0,
                        ops,
                    });
                }
                Ok(())
            }
            Err(e) => {
                self.board.fail_with(self.gen, me, &e);
                Err(e)
            }
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>> {
        let (free, total) = super::cpu::host_memory().unwrap_or((0, 0));
        // Only this rank's own memory is known (and checked) here.
        Ok((0..self.info.ranks)
            .map(|r| {
                (r == self.me).then_some(DeviceMemory {
                    device: r,
                    free,
                    total,
                })
            })
            .collect())
    }

    fn ping(&mut self) -> Result<()> {
        Ok(())
    }

    fn local_ranks(&self) -> std::ops::Range<usize> {
        self.me..self.me + 1
    }

    fn profiling(&mut self) -> Option<&mut dyn Profiling> {
        Some(self)
    }
}

impl Profiling for CpuProcessBackend {
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        let mut v = vec![IssueProfile::default(); self.info.ranks];
        v[self.me] = std::mem::take(&mut self.profile);
        Ok(v)
    }

    fn take_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        Ok(std::mem::take(&mut self.timelines))
    }

    fn set_nccl_timing(&mut self, _on: bool) {}

    fn take_nccl_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        Ok(Vec::new())
    }

    /// What this process's rank moved (its own copies and reduces).
    fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>> {
        Ok(self.mem.take_traffic())
    }
}
