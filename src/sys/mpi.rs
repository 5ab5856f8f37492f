//! ringreduce's own MPI binding (the `mpi` feature): the dozen calls the
//! bootstrap and the network transport make, over a C shim
//! (`src/sys/mpi_shim.c`) built with the system's `mpicc` by `build.rs`.
//!
//! Why not the `mpi` crate (rsmpi): it generates its bindings with bindgen,
//! which needs libclang and a long build at every clean build (this project
//! builds on 2 shared cores), and it brings a large API of which a dozen
//! calls are used. MPI's handles differ between implementations (pointers
//! in Open MPI, integers in MPICH) and its constants are macros, so a
//! Rust-only binding would be tied to one MPI; the shim is compiled against
//! whatever `mpi.h` the machine has and shows Rust only ints, byte pointers
//! and an opaque request pointer. Every call returns MPI's error code,
//! turned here into [`Error::Mpi`] naming the rank, the peer and the call.
//!
//! MPI is initialised once per process with `MPI_THREAD_MULTIPLE` (rank
//! threads send, the receiving thread probes, the backend's thread runs the
//! collectives); a library that gives less is refused. Every wait polls a
//! non-blocking call, so it is bounded by the job's timeout and ends early
//! when the job fails ([`Mpi::wait`]).

use super::shm::Mapping;
use crate::error::{Error, Result, WaitKind};
use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod ffi {
    use super::*;
    extern "C" {
        pub fn rr_mpi_initialized(flag: *mut c_int) -> c_int;
        pub fn rr_mpi_finalized(flag: *mut c_int) -> c_int;
        pub fn rr_mpi_init(provided: *mut c_int, world: *mut c_int) -> c_int;
        pub fn rr_mpi_thread_multiple() -> c_int;
        pub fn rr_mpi_finalize() -> c_int;
        pub fn rr_comm_rank(c: c_int, rank: *mut c_int) -> c_int;
        pub fn rr_comm_size(c: c_int, size: *mut c_int) -> c_int;
        pub fn rr_comm_split_shared(c: c_int, key: c_int, out: *mut c_int) -> c_int;
        pub fn rr_comm_split(c: c_int, color: c_int, key: c_int, out: *mut c_int) -> c_int;
        pub fn rr_isend(
            c: c_int,
            buf: *const c_void,
            bytes: c_int,
            dest: c_int,
            tag: c_int,
            req: *mut *mut c_void,
        ) -> c_int;
        pub fn rr_ibarrier(c: c_int, req: *mut *mut c_void) -> c_int;
        pub fn rr_iallreduce(
            c: c_int,
            buf: *mut c_void,
            count: c_int,
            ty: c_int,
            op: c_int,
            req: *mut *mut c_void,
        ) -> c_int;
        pub fn rr_iallgather(
            c: c_int,
            send: *const c_void,
            bytes: c_int,
            recv: *mut c_void,
            req: *mut *mut c_void,
        ) -> c_int;
        pub fn rr_iallgatherv(
            c: c_int,
            send: *const c_void,
            bytes: c_int,
            recv: *mut c_void,
            counts: *const c_int,
            displs: *const c_int,
            req: *mut *mut c_void,
        ) -> c_int;
        pub fn rr_test(req: *mut c_void, done: *mut c_int) -> c_int;
        pub fn rr_request_drop(req: *mut c_void, collective: c_int);
        pub fn rr_iprobe(
            c: c_int,
            flag: *mut c_int,
            source: *mut c_int,
            tag: *mut c_int,
            bytes: *mut c_int,
        ) -> c_int;
        pub fn rr_irecv(
            c: c_int,
            buf: *mut c_void,
            bytes: c_int,
            source: c_int,
            tag: c_int,
            req: *mut *mut c_void,
        ) -> c_int;
        pub fn rr_error_string(code: c_int, buf: *mut c_char, cap: c_int) -> c_int;
    }
}

/// What ends a wait of a point-to-point request: its deadline (after
/// `timeout`), `stop`'s error, and what the errors call it.
pub(crate) struct Bound<'a> {
    /// When the wait gives up.
    pub deadline: Instant,
    /// The job's timeout, named in the error.
    pub timeout: Duration,
    /// Asked between polls (once the wait has lasted a millisecond, then
    /// every millisecond): its error ends the wait (the job failed, the
    /// engine was aborted).
    pub stop: &'a dyn Fn() -> Result<()>,
    /// What the wait is for, in its error.
    pub what: &'a dyn Fn() -> String,
}

impl<'a> Bound<'a> {
    /// A wait of at most `timeout` from now.
    pub fn after(
        timeout: Duration,
        stop: &'a dyn Fn() -> Result<()>,
        what: &'a dyn Fn() -> String,
    ) -> Self {
        Bound {
            deadline: Instant::now() + timeout,
            timeout,
            stop,
            what,
        }
    }
}
/// The element types [`Mpi::allreduce`] takes (the shim's codes; 0 and 1,
/// the 8-bit integers, are not taken: Open MPI 4.1 saturates their sums).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MpiType {
    I32 = 2,
    U32 = 3,
    I64 = 4,
    U64 = 5,
    F32 = 6,
    F64 = 7,
}

impl MpiType {
    fn size(self) -> usize {
        match self {
            MpiType::I32 | MpiType::U32 | MpiType::F32 => 4,
            MpiType::I64 | MpiType::U64 | MpiType::F64 => 8,
        }
    }
}

/// The reductions [`Mpi::allreduce`] takes (the shim's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MpiOp {
    Sum = 0,
    Prod = 1,
    Max = 2,
    Min = 3,
}

/// How often a wait of [`Mpi::wait`] asks its `stop` (the job's health).
const STOP_EVERY: Duration = Duration::from_millis(1);

/// A communicator: an index into the shim's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Comm(c_int);

/// The process's MPI: initialised once, the world communicator.
#[derive(Debug)]
pub(crate) struct Mpi {
    pub world: Comm,
    pub rank: usize,
    pub size: usize,
}

/// MPI's text for error code `code`.
fn error_text(code: c_int) -> String {
    let mut buf = [0 as c_char; 512];
    // SAFETY: the shim writes at most `cap - 1` bytes and a NUL into `buf`,
    // which is `cap` bytes long.
    let e = unsafe { ffi::rr_error_string(code, buf.as_mut_ptr(), buf.len() as c_int) };
    if e != 0 {
        return format!("MPI error {code}");
    }
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    format!("{} (MPI error {code})", String::from_utf8_lossy(&bytes))
}

/// A call's status as a result.
fn check(code: c_int, rank: usize, peer: Option<usize>, call: &'static str) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(Error::Mpi {
        rank,
        peer,
        call,
        message: error_text(code),
    })
}

/// A size MPI can carry in one message (`int` bytes).
/// Refused before the call, so it names no peer (`peer: None`): an error
/// that names one is MPI's own, about the link to that peer.
fn int_len(n: usize, rank: usize, peer: Option<usize>, call: &'static str) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| Error::Mpi {
        rank,
        peer: None,
        call,
        message: format!(
            "{n} bytes{} do not fit one MPI message (at most {} bytes)",
            peer.map_or(String::new(), |p| format!(" for rank {p}")),
            c_int::MAX
        ),
    })
}

/// A pending non-blocking call. Its buffers are owned by the caller of
/// [`Mpi::wait`], which keeps them alive until the call completed or, on a
/// timeout, leaks them (MPI may still write them).
pub(crate) struct Request {
    ptr: *mut c_void,
    collective: bool,
}

// SAFETY: MPI is initialised with `MPI_THREAD_MULTIPLE` (`init` refuses
// less), under which a request may be tested, waited on or freed from any
// thread, as long as no two threads use it at once; a `Request` is owned
// (not `Sync`, not `Clone`), so only its one owner uses it.
unsafe impl Send for Request {}

fn drop_request(req: Request) {
    // SAFETY: a live request from the shim, not used after this.
    unsafe { ffi::rr_request_drop(req.ptr, c_int::from(req.collective)) };
}

/// A send [`Mpi::isend`] started. Dropped before it completed, it is
/// cancelled and its message leaked (MPI may still read it).
pub(crate) struct PendingSend {
    req: Option<Request>,
    msg: Vec<u8>,
    rank: usize,
    dest: usize,
}

impl PendingSend {
    /// Whether the send completed (`MPI_Test`); an error ends it.
    pub fn done(&mut self) -> Result<bool> {
        let Some(req) = &self.req else {
            return Ok(true);
        };
        let mut done: c_int = 0;
        // SAFETY: a live request (freed by the shim only when `done` comes
        // back 1, after which it is taken out and not used again).
        let e = unsafe { ffi::rr_test(req.ptr, &mut done) };
        if let Err(err) = check(e, self.rank, Some(self.dest), "MPI_Isend") {
            if let Some(r) = self.req.take() {
                drop_request(r);
                std::mem::forget(std::mem::take(&mut self.msg));
            }
            return Err(err);
        }
        if done != 0 {
            self.req = None;
        }
        Ok(done != 0)
    }
}

impl Drop for PendingSend {
    fn drop(&mut self) {
        if let Some(r) = self.req.take() {
            drop_request(r);
            std::mem::forget(std::mem::take(&mut self.msg));
        }
    }
}

/// Whether MPI is initialised in this process (by this library or by the
/// program).
pub(crate) fn initialized() -> bool {
    let mut f: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time; `f` is a valid
    // int to write.
    let e = unsafe { ffi::rr_mpi_initialized(&mut f) };
    e == 0 && f != 0
}

static MPI: OnceLock<std::result::Result<Mpi, String>> = OnceLock::new();

fn init_error(rank: usize, why: &str) -> Error {
    Error::Mpi {
        rank,
        peer: None,
        call: "MPI_Init_thread",
        message: why.to_string(),
    }
}

/// `MPI_Init_thread` and the world's rank and size (once per process).
fn init() -> std::result::Result<Mpi, String> {
    if initialized() {
        return Err(
            "MPI was already initialised by the program: ringreduce initialises it itself (with MPI_THREAD_MULTIPLE)".into(),
        );
    }
    let (mut provided, mut world): (c_int, c_int) = (0, 0);
    // SAFETY: called once per process (the OnceLock), before any other MPI
    // call of this library; both pointers are valid ints.
    let e = unsafe { ffi::rr_mpi_init(&mut provided, &mut world) };
    check(e, 0, None, "MPI_Init_thread").map_err(|e| e.to_string())?;
    // SAFETY: returns a constant.
    if provided < unsafe { ffi::rr_mpi_thread_multiple() } {
        return Err(format!(
            "the MPI library gives thread level {provided}, not MPI_THREAD_MULTIPLE: the network transport sends from rank threads while another thread receives"
        ));
    }
    let world = Comm(world);
    let (rank, size) = comm_rank_size(world, 0).map_err(|e| e.to_string())?;
    Ok(Mpi { world, rank, size })
}

impl Mpi {
    /// The process's MPI, initialised on the first call with
    /// `MPI_THREAD_MULTIPLE`. `MPI_Init_thread` waits for every process of
    /// the job (Open MPI's modex); it runs on a thread of its own and is
    /// waited for at most `timeout`: a rank that never starts ends this
    /// one's wait with [`Error::Timeout`] rather than a hang (the thread is
    /// left in MPI, and the process is expected to end).
    pub fn get(rank: usize, timeout: Duration) -> Result<&'static Mpi> {
        if let Some(m) = MPI.get() {
            return m.as_ref().map_err(|why| init_error(rank, why));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("ringreduce-mpi-init".into())
            .spawn(move || {
                let r = MPI.get_or_init(init);
                let _ = tx.send(r.is_ok());
            })
            .map_err(|e| init_error(rank, &format!("could not start a thread: {e}")))?;
        match rx.recv_timeout(timeout) {
            Ok(_) => MPI
                .get()
                .ok_or_else(|| init_error(rank, "no result"))?
                .as_ref()
                .map_err(|why| init_error(rank, why)),
            Err(_) => Err(Error::Timeout {
                rank,
                what:
                    "every rank of the job in MPI_Init_thread (a rank that never started, or one \
                       whose binary was built without the `mpi` feature: such a binary refuses \
                       at once where RINGREDUCE_RANKS_PER_NODE or RINGREDUCE_MPI=1 asks for MPI, \
                       and otherwise joins no MPI job; every rank must run the same build)"
                        .into(),
                seconds: timeout.as_secs_f64(),
                wait: WaitKind::Host,
            }),
        }
    }

    /// The communicator of the ranks that share memory with this one
    /// (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), keyed by world rank.
    pub(crate) fn split_shared(&self) -> Result<Comm> {
        let mut out: c_int = 0;
        // SAFETY: the world communicator is valid after init; `out` is a
        // valid int. Collective over the world.
        let e = unsafe { ffi::rr_comm_split_shared(self.world.0, self.rank as c_int, &mut out) };
        check(
            e,
            self.rank,
            None,
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)",
        )?;
        Ok(Comm(out))
    }

    /// `MPI_Comm_split(comm, color, key)`.
    pub fn split(&self, comm: Comm, color: usize, key: usize) -> Result<Comm> {
        let mut out: c_int = 0;
        let color = int_len(color, self.rank, None, "MPI_Comm_split")?;
        let key = int_len(key, self.rank, None, "MPI_Comm_split")?;
        // SAFETY: `comm` came from this binding; `out` is a valid int.
        let e = unsafe { ffi::rr_comm_split(comm.0, color, key, &mut out) };
        check(e, self.rank, None, "MPI_Comm_split")?;
        Ok(Comm(out))
    }

    /// (rank, size) in `comm`.
    pub(crate) fn rank_size(&self, comm: Comm) -> Result<(usize, usize)> {
        comm_rank_size(comm, self.rank)
    }

    /// Send `msg` to `dest` with `tag` on `comm` (`MPI_Isend`, then
    /// [`Mpi::wait`], bounded the same way). The message is owned here:
    /// if the wait fails it is leaked, since MPI may still read it; once
    /// sent it is handed back (its memory reused for the next).
    pub fn send(
        &self,
        comm: Comm,
        msg: Vec<u8>,
        dest: usize,
        tag: i32,
        b: &Bound<'_>,
    ) -> Result<Vec<u8>> {
        let n = int_len(msg.len(), self.rank, Some(dest), "MPI_Isend")?;
        let mut req = std::ptr::null_mut();
        // SAFETY: `msg` is valid for `n` bytes and stays alive and
        // unchanged until the request completes (below), or is leaked.
        let e =
            unsafe { ffi::rr_isend(comm.0, msg.as_ptr().cast(), n, dest as c_int, tag, &mut req) };
        check(e, self.rank, Some(dest), "MPI_Isend")?;
        self.finish(req, msg, b, "MPI_Isend", dest)
    }

    /// Wait for the point-to-point request `req` on `buf`'s memory as
    /// [`Mpi::wait`] does; `buf` back once it completed, leaked on an
    /// error (MPI may still read or write it).
    fn finish(
        &self,
        req: *mut c_void,
        buf: Vec<u8>,
        b: &Bound,
        call: &'static str,
        peer: usize,
    ) -> Result<Vec<u8>> {
        let req = Request {
            ptr: req,
            collective: false,
        };
        match self.wait(req, b, call, Some(peer)) {
            Ok(()) => Ok(buf),
            Err(e) => {
                std::mem::forget(buf);
                Err(e)
            }
        }
    }

    /// Wait for `req` by polling `MPI_Test`, at most until `b.deadline`;
    /// `b.stop` is asked between polls, every [`STOP_EVERY`] from the wait's
    /// start, and ends the wait with its error (the job failed, the engine
    /// was aborted). `call`, `peer` and `what` name the wait for the
    /// errors. On an error the request is cancelled (a
    /// point-to-point one) or left behind (a collective): the caller must
    /// then leak the buffers.
    pub fn wait(
        &self,
        req: Request,
        b: &Bound<'_>,
        call: &'static str,
        peer: Option<usize>,
    ) -> Result<()> {
        self.wait_patiently(req, b, (call, peer), 64)
    }

    /// [`Mpi::wait`], yielding between the first `patience` polls and
    /// napping 50 us between the later ones (a collective inside a call
    /// polls without naps: MPI makes progress only while it is polled).
    fn wait_patiently(
        &self,
        req: Request,
        b: &Bound<'_>,
        (call, peer): (&'static str, Option<usize>),
        patience: u32,
    ) -> Result<()> {
        let mut spins = 0u32;
        // `stop` reads the job's health (its control segment, the
        // launcher's abort record on disk, whether each peer's process is
        // alive): a few system calls and a file read, asked once a wait has
        // lasted a millisecond and every millisecond after, not at every
        // poll (nor at each wait's first: a call of a few KiB makes
        // several waits of tens of microseconds).
        let mut asked = Instant::now();
        loop {
            let mut done: c_int = 0;
            // SAFETY: `req.ptr` is a live request from the shim (freed by
            // the shim only when `done` comes back 1, after which it is not
            // used again).
            let e = unsafe { ffi::rr_test(req.ptr, &mut done) };
            if let Err(err) = check(e, self.rank, peer, call) {
                self.drop_request(req);
                return Err(err);
            }
            if done != 0 {
                return Ok(());
            }
            let now = Instant::now();
            let due = now.duration_since(asked) >= STOP_EVERY;
            if due {
                asked = now;
            }
            let halt = if due { (b.stop)() } else { Ok(()) }.and_then(|()| {
                if now > b.deadline {
                    Err(Error::Timeout {
                        rank: self.rank,
                        what: format!("{} ({call})", (b.what)()),
                        seconds: b.timeout.as_secs_f64(),
                        wait: WaitKind::Host,
                    })
                } else {
                    Ok(())
                }
            });
            if let Err(err) = halt {
                self.drop_request(req);
                return Err(err);
            }
            spins = spins.saturating_add(1);
            if spins < patience {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn drop_request(&self, req: Request) {
        drop_request(req);
    }

    /// Start sending `msg` to `dest` with `tag` on `comm` and return at
    /// once (`MPI_Isend`): [`PendingSend::done`] tells when it completed.
    /// For small messages nobody waits for (the heartbeats).
    pub(crate) fn isend(
        &self,
        comm: Comm,
        msg: Vec<u8>,
        dest: usize,
        tag: i32,
    ) -> Result<PendingSend> {
        let n = int_len(msg.len(), self.rank, Some(dest), "MPI_Isend")?;
        let mut req = std::ptr::null_mut();
        // SAFETY: `msg` is valid for `n` bytes; the PendingSend owns it and
        // keeps it alive and unchanged until the request completed, or
        // leaks it (dropped early).
        let e =
            unsafe { ffi::rr_isend(comm.0, msg.as_ptr().cast(), n, dest as c_int, tag, &mut req) };
        check(e, self.rank, Some(dest), "MPI_Isend")?;
        Ok(PendingSend {
            req: Some(Request {
                ptr: req,
                collective: false,
            }),
            msg,
            rank: self.rank,
            dest,
        })
    }

    /// A message waiting on `comm` from any rank: (source, tag, bytes).
    pub(crate) fn iprobe(&self, comm: Comm) -> Result<Option<(usize, i32, usize)>> {
        let (mut flag, mut src, mut tag, mut bytes): (c_int, c_int, c_int, c_int) = (0, 0, 0, 0);
        // SAFETY: four valid ints to write.
        let e = unsafe { ffi::rr_iprobe(comm.0, &mut flag, &mut src, &mut tag, &mut bytes) };
        check(e, self.rank, None, "MPI_Iprobe")?;
        if flag == 0 {
            return Ok(None);
        }
        Ok(Some((src.max(0) as usize, tag, bytes.max(0) as usize)))
    }

    /// Receive the message [`Mpi::iprobe`] found from `source` with `tag`
    /// into `buf` (its exact size), waiting as [`Mpi::wait`] does: at most
    /// until `deadline`, and ended by `stop`. A probed message may still
    /// be on its way (a large one comes by rendezvous) and its sender may
    /// die before it all arrives, so the receive is never a blocking one.
    /// On an error the buffer is leaked (MPI may still write it).
    pub fn recv(
        &self,
        comm: Comm,
        mut buf: Vec<u8>,
        source: usize,
        tag: i32,
        b: &Bound<'_>,
    ) -> Result<Vec<u8>> {
        let n = int_len(buf.len(), self.rank, Some(source), "MPI_Irecv")?;
        let mut req = std::ptr::null_mut();
        // SAFETY: `buf` is valid for writes of `n` bytes, and its heap
        // memory stays alive and in place until the request completes
        // (below), or is leaked with it.
        let e = unsafe {
            ffi::rr_irecv(
                comm.0,
                buf.as_mut_ptr().cast(),
                n,
                source as c_int,
                tag,
                &mut req,
            )
        };
        check(e, self.rank, Some(source), "MPI_Irecv")?;
        self.finish(req, buf, b, "MPI_Irecv", source)
    }

    /// Every rank's `mine` on `comm`, in rank order (the lengths by
    /// [`Mpi::allgather_equal`], then `MPI_Iallgatherv`), each wait bounded
    /// as in [`Mpi::wait`].
    pub(crate) fn allgather(&self, comm: Comm, mine: &[u8], b: &Bound<'_>) -> Result<Vec<Vec<u8>>> {
        let me = int_len(mine.len(), self.rank, None, "MPI_Iallgather")?;
        // Every rank's length first (ints of this machine's byte order).
        let lens = self.allgather_equal(comm, &me.to_ne_bytes(), b)?;
        let lens: Box<[c_int]> = lens
            .chunks_exact(std::mem::size_of::<c_int>())
            .map(|b| {
                let mut int = [0u8; std::mem::size_of::<c_int>()];
                int.copy_from_slice(b);
                c_int::from_ne_bytes(int)
            })
            .collect();
        let size = lens.len();
        let mut displs: Box<[c_int]> = vec![0; size].into_boxed_slice();
        let mut total: usize = 0;
        for (d, &l) in displs.iter_mut().zip(lens.iter()) {
            *d = int_len(total, self.rank, None, "MPI_Iallgatherv")?;
            total += l.max(0) as usize;
        }
        let send: Box<[u8]> = mine.into();
        let mut recv: Box<[u8]> = vec![0; total].into_boxed_slice();
        let mut req = std::ptr::null_mut();
        // SAFETY: every buffer is sized as the counts say and alive until
        // the request completes (or leaked below).
        let e = unsafe {
            ffi::rr_iallgatherv(
                comm.0,
                send.as_ptr().cast(),
                me,
                recv.as_mut_ptr().cast(),
                lens.as_ptr(),
                displs.as_ptr(),
                &mut req,
            )
        };
        check(e, self.rank, None, "MPI_Iallgatherv")?;
        let req = Request {
            ptr: req,
            collective: true,
        };
        if let Err(e) = self.wait(req, b, "MPI_Iallgatherv", None) {
            std::mem::forget(send);
            std::mem::forget(recv);
            std::mem::forget(lens);
            std::mem::forget(displs);
            return Err(e);
        }
        Ok(lens
            .iter()
            .zip(displs.iter())
            .map(|(&l, &d)| recv[d as usize..d as usize + l.max(0) as usize].to_vec())
            .collect())
    }

    /// Every rank's `mine` on `comm` when all are the same length, one
    /// after another in rank order (one `MPI_Iallgather`), bounded as in
    /// [`Mpi::wait`] but polled without naps, like a collective inside a
    /// call ([`Mpi::allreduce`]). At most `c_int::MAX` bytes each. The
    /// buffers are owned here while MPI holds them; on an error they are
    /// leaked (MPI may still write them).
    pub(crate) fn allgather_equal(
        &self,
        comm: Comm,
        mine: &[u8],
        b: &Bound<'_>,
    ) -> Result<Vec<u8>> {
        let (_, size) = self.rank_size(comm)?;
        let bytes = int_len(mine.len(), self.rank, None, "MPI_Iallgather")?;
        let send: Box<[u8]> = mine.into();
        let mut recv: Vec<u8> = vec![0; mine.len() * size];
        let mut req = std::ptr::null_mut();
        // SAFETY: `send` holds `bytes` bytes and `recv` `size` times as
        // many, both owned here and untouched until the request completes
        // (or leaked below).
        let e = unsafe {
            ffi::rr_iallgather(
                comm.0,
                send.as_ptr().cast(),
                bytes,
                recv.as_mut_ptr().cast(),
                &mut req,
            )
        };
        check(e, self.rank, None, "MPI_Iallgather")?;
        let req = Request {
            ptr: req,
            collective: true,
        };
        if let Err(e) = self.wait_patiently(req, b, ("MPI_Iallgather", None), u32::MAX) {
            std::mem::forget(send);
            std::mem::forget(recv);
            return Err(e);
        }
        Ok(recv)
    }

    /// `MPI_Iallreduce` in place on `data` over `comm`, bounded as in
    /// [`Mpi::wait`] but polled without naps: elements of `ty` reduced with
    /// `op`, in calls of at most `c_int::MAX` elements each. The buffer is
    /// owned here while MPI holds it and returned with the result; on an
    /// error it is leaked (MPI may still write it).
    pub fn allreduce(
        &self,
        comm: Comm,
        mut data: Vec<u8>,
        ty_op: (MpiType, MpiOp),
        b: &Bound<'_>,
    ) -> Result<Vec<u8>> {
        // SAFETY: on an error `data` is leaked below: its memory stays
        // valid, and is never reused, for good.
        match unsafe { self.allreduce_in_place(comm, &mut data, ty_op, b) } {
            Ok(()) => Ok(data),
            Err(e) => {
                std::mem::forget(data);
                Err(e)
            }
        }
    }

    /// [`Mpi::allreduce`] on bytes `range` of the shared mapping `m`, in
    /// place: no copy in or out. `&mut` makes the bytes this process's
    /// alone for the call; on an error `m` is kept mapped for good
    /// ([`Mapping::keep_mapped`]), since MPI may still write it.
    pub(crate) fn allreduce_mapped(
        &self,
        comm: Comm,
        m: &mut Mapping,
        range: std::ops::Range<usize>,
        ty_op: (MpiType, MpiOp),
        b: &Bound<'_>,
    ) -> Result<()> {
        let len = m.bytes_mut().len();
        let data = m.bytes_mut().get_mut(range.clone()).ok_or_else(|| {
            Error::internal(format!(
                "an all-reduce of bytes {range:?} of a {len}-byte mapping"
            ))
        })?;
        // SAFETY: on an error the mapping is kept mapped below: its memory
        // stays valid, and is never reused, for good.
        let r = unsafe { self.allreduce_in_place(comm, data, ty_op, b) };
        if r.is_err() {
            m.keep_mapped();
        }
        r
    }

    /// `MPI_Iallreduce` in place on `data` (see [`Mpi::allreduce`]).
    ///
    /// # Safety
    ///
    /// If this returns an error, MPI may still write `data` at any time
    /// after: the caller must keep its memory valid and never let it be
    /// reused (leak it) for the rest of the process.
    unsafe fn allreduce_in_place(
        &self,
        comm: Comm,
        data: &mut [u8],
        (ty, op): (MpiType, MpiOp),
        b: &Bound<'_>,
    ) -> Result<()> {
        let size = ty.size();
        if data.len() % size != 0 {
            return Err(Error::internal(format!(
                "an all-reduce of {} bytes of {size}-byte elements",
                data.len()
            )));
        }
        for piece in data.chunks_mut(size * c_int::MAX as usize) {
            let count = (piece.len() / size) as c_int;
            let mut req = std::ptr::null_mut();
            // SAFETY: `piece` holds `count` elements of `ty` (its length is
            // a multiple of the size), alive and untouched until the
            // request completed; on an error the caller keeps it valid.
            let e = unsafe {
                ffi::rr_iallreduce(
                    comm.0,
                    piece.as_mut_ptr().cast(),
                    count,
                    ty as c_int,
                    op as c_int,
                    &mut req,
                )
            };
            check(e, self.rank, None, "MPI_Iallreduce")?;
            let req = Request {
                ptr: req,
                collective: true,
            };
            self.wait_patiently(req, b, ("MPI_Iallreduce", None), u32::MAX)?;
        }
        Ok(())
    }

    /// `MPI_Ibarrier` on `comm`, bounded as in [`Mpi::wait`].
    pub fn barrier(&self, comm: Comm, b: &Bound<'_>) -> Result<()> {
        let mut req = std::ptr::null_mut();
        // SAFETY: `req` receives the shim's request.
        let e = unsafe { ffi::rr_ibarrier(comm.0, &mut req) };
        check(e, self.rank, None, "MPI_Ibarrier")?;
        let req = Request {
            ptr: req,
            collective: true,
        };
        self.wait(req, b, "MPI_Ibarrier", None)
    }

    /// `MPI_Finalize`, once, if MPI is initialised and not yet finalised.
    pub(crate) fn finalize(&self) -> Result<()> {
        let mut f: c_int = 0;
        // SAFETY: valid int; MPI_Finalized may be called at any time.
        let e = unsafe { ffi::rr_mpi_finalized(&mut f) };
        check(e, self.rank, None, "MPI_Finalized")?;
        if f != 0 {
            return Ok(());
        }
        // SAFETY: MPI is initialised (this value exists) and not finalised;
        // the caller has stopped every thread that makes MPI calls.
        let e = unsafe { ffi::rr_mpi_finalize() };
        check(e, self.rank, None, "MPI_Finalize")
    }
}

fn comm_rank_size(comm: Comm, me: usize) -> Result<(usize, usize)> {
    let (mut r, mut s): (c_int, c_int) = (0, 0);
    // SAFETY: `comm` came from this binding; two valid ints.
    let e = unsafe { ffi::rr_comm_rank(comm.0, &mut r) };
    check(e, me, None, "MPI_Comm_rank")?;
    // SAFETY: as above.
    let e = unsafe { ffi::rr_comm_size(comm.0, &mut s) };
    check(e, me, None, "MPI_Comm_size")?;
    Ok((r.max(0) as usize, s.max(0) as usize))
}
