//! The transport contract, on both CPU transports: one body per behaviour,
//! written for the ranks a process runs ([`Backend::local_ranks`]), runs
//! once over [`Threads`] (every rank local) and once per rank over [`Shm`]
//! (a job of threads that each join as one rank, as in
//! `process::tests::threads_as_a_job`), the job met once through a store
//! directory and once through a caller's key-value store.

use super::*;
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, Binding, HostRead, HostWrite};
use crate::element::{DataType, ReduceOp};
use crate::error::WaitKind;
use crate::fault::FaultPlan;
use crate::plan::{Plan, Shape};
use crate::process::{Job, JobSpec};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

type Body = fn(&mut dyn Backend) -> Result<()>;

fn temp_store(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "rr-transport-{what}-{}-{}",
        std::process::id(),
        crate::process::unique_suffix()
    ))
}

/// Run `body` over both transports with `n` ranks.
fn on_each_transport(n: usize, what: &str, body: Body) {
    let mut be = CpuBackend::new(n, T, FaultPlan::default()).unwrap();
    body(&mut be).unwrap_or_else(|e| panic!("threads: {e}"));
    let dir = temp_store(what);
    on_shm(n, "shm", body, |r| JobSpec::new(r, n, &dir));
    // The same job met through a caller's key-value store, no directory.
    let kv: std::sync::Arc<dyn crate::process::KeyValue> =
        std::sync::Arc::new(crate::process::LocalKeyValue::default());
    on_shm(n, "shm (key-value bootstrap)", body, |r| {
        JobSpec::with_key_value(r, n, kv.clone())
    });
}

/// `body` on `n` threads, each one rank of a [`Shm`] job of `spec(r)`.
fn on_shm(n: usize, name: &str, body: Body, spec: impl Fn(usize) -> JobSpec) {
    let hs: Vec<_> = (0..n)
        .map(|r| {
            let spec = spec(r);
            std::thread::spawn(move || -> Result<()> {
                let job = Job::join(&spec, T)?;
                let mut be = CpuBackend::process(job, T, FaultPlan::default())?;
                body(&mut be)
            })
        })
        .collect();
    for (r, h) in hs.into_iter().enumerate() {
        h.join()
            .unwrap_or_else(|_| panic!("{name} rank {r} panicked"))
            .unwrap_or_else(|e| panic!("{name} rank {r}: {e}"));
    }
}

fn ring(n: usize, count: usize) -> Arc<Plan> {
    Arc::new(crate::algo::ring::plan(
        &Shape::all_reduce(n, count, 4, false),
        2,
        2,
    ))
}

/// Reserve the engine's three buffers for `plan`, write rank r's input
/// (`r + 1 + i`), run it, and check every local rank's sum.
fn all_reduce(be: &mut dyn Backend, plan: Arc<Plan>) -> Result<()> {
    let n = be.info().ranks;
    let count = plan.shape.count;
    let scratch = plan.scratch_len * 4;
    be.reserve(BufId::SEND, &vec![count * 4; n])?;
    be.reserve(BufId::RECV, &vec![count * 4; n])?;
    be.reserve(BufId::SCRATCH, &vec![scratch; n])?;
    let input = |r: usize| -> Vec<f32> { (0..count).map(|i| (r + 1 + i % 7) as f32).collect() };
    let inputs: Vec<Vec<f32>> = be.local_ranks().map(input).collect();
    let writes: Vec<HostWrite<'_>> = be
        .local_ranks()
        .zip(&inputs)
        .map(|(rank, v)| HostWrite {
            rank,
            id: BufId::SEND,
            offset: 0,
            data: bytemuck::cast_slice(v),
        })
        .collect();
    be.write(&writes)?;
    be.launch(&crate::backend::Call {
        plan,
        dtype: DataType::Float,
        op: ReduceOp::Sum,
        bind: Arc::new(vec![Binding::DEFAULT; n]),
        timing: false,
    })?;
    be.synchronize()?;
    let want: Vec<f32> = (0..count)
        .map(|i| (0..n).map(|r| (r + 1 + i % 7) as f32).sum())
        .collect();
    for r in be.local_ranks() {
        let mut got = vec![0f32; count];
        be.read(&mut [HostRead {
            rank: r,
            id: BufId::RECV,
            offset: 0,
            out: bytemuck::cast_slice_mut(&mut got),
        }])?;
        assert_eq!(got, want, "rank {r}");
    }
    Ok(())
}

/// A rank's copy into its peer's buffer, then its signal: the peer that
/// waited on the signal sees the bytes (the ring reduces them).
#[test]
fn a_write_then_a_signal_is_visible_to_the_peer() {
    on_each_transport(3, "visible", |be| {
        let n = be.info().ranks;
        all_reduce(be, ring(n, 1000))
    });
}

/// A reserve that grows a buffer gives it a new name: every peer re-opens
/// it, and the next call reaches the new memory.
#[test]
fn a_grown_buffer_is_reopened_by_every_peer() {
    on_each_transport(2, "grown", |be| {
        let n = be.info().ranks;
        all_reduce(be, ring(n, 64))?;
        all_reduce(be, ring(n, 50_000))?;
        // A smaller call keeps the grown buffers (nothing re-opened).
        all_reduce(be, ring(n, 10))
    });
}

/// Stream-ordered calls and profiling work over every transport; host
/// slices are lent only within one process.
#[test]
fn every_capability_works_or_refuses_with_a_reason() {
    on_each_transport(2, "caps", |be| {
        let n = be.info().ranks;
        all_reduce(be, ring(n, 16))?;
        let ordered = be.ordered()?;
        ordered.work_mark()?;
        assert!(ordered.take_spans()?.is_empty());
        assert!(be.profiling().is_some());
        let issued = be.profiling().map(|p| p.take_issue_profile());
        let profile = issued.unwrap_or_else(|| Ok(Vec::new()))?;
        for r in be.local_ranks() {
            assert_eq!(profile[r].calls, 1, "rank {r}");
        }
        let lends = be.host_slices().is_some();
        assert_eq!(lends, be.local_ranks().len() == n);
        Ok(())
    });
}

/// Check that an abort wakes a waiter on `t`'s board well within its bound.
fn abort_wakes_a_waiter<X: Transport>(t: &mut X) {
    let board = t.board(1, "the test").unwrap();
    let abort = t.abort().clone();
    let waiter = std::thread::spawn(move || {
        let t0 = Instant::now();
        let r = board.wait(0, 1, 0, &|| "a signal nobody publishes".into());
        (r, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    abort.abort();
    let (r, took) = waiter.join().unwrap();
    match r {
        Err(Error::Aborted { wait, .. }) => assert_eq!(wait, WaitKind::Host),
        other => panic!("{}: {other:?}", t.name()),
    }
    assert!(took < Duration::from_secs(2), "{}: {took:?}", t.name());
}

#[test]
fn abort_wakes_a_waiter_within_its_bound() {
    abort_wakes_a_waiter(&mut Threads::new(2, T).unwrap());
    let dir = temp_store("abort");
    let job = Job::join(&JobSpec::new(0, 1, &dir), T).unwrap();
    abort_wakes_a_waiter(&mut Shm::new(job, T));
}

/// A buffer larger than the machine holds is an error on every transport,
/// before any memory is asked for (an overcommitting kernel would grant
/// it and kill the process as it fills).
fn a_buffer_beyond_the_machine_is_refused<L: Transport>(t: &mut L) {
    let huge = usize::MAX / 2;
    match t.alloc(0, "huge", huge) {
        Err(Error::OutOfMemory { is_free: false, .. }) => {}
        Err(other) => panic!("{}: {other}", t.name()),
        Ok(_) => panic!("{}: a buffer of {huge} bytes was made", t.name()),
    }
}

#[test]
fn a_buffer_beyond_the_machine_is_refused_on_every_transport() {
    a_buffer_beyond_the_machine_is_refused(&mut Threads::new(2, T).unwrap());
    let dir = temp_store("huge");
    let job = Job::join(&JobSpec::new(0, 1, &dir), T).unwrap();
    a_buffer_beyond_the_machine_is_refused(&mut Shm::new(job, T));
}

/// The job's board is fixed: a plan needing more signals is refused,
/// naming the plan; the threads' board grows.
#[test]
fn a_board_too_small_is_refused_or_grown() {
    let mut t = Threads::new(2, T).unwrap();
    assert!(t.board(100, "p").unwrap().len() >= 100);
    let dir = temp_store("board");
    let job = Job::join(&JobSpec::new(0, 1, &dir), T).unwrap();
    let mut s = Shm::new(job, T);
    let have = s.board(0, "p").unwrap().len();
    let e = s.board(have + 1, "ring:big").unwrap_err().to_string();
    assert!(e.contains("ring:big needs"), "{e}");
    assert!(t.lend().is_ok());
    let why = s.lend().unwrap_err();
    assert!(why.contains("cannot be lent to another process"), "{why}");
}

fn rec(name: &str, handle: &str) -> Record {
    Record {
        name: name.into(),
        bytes: 8,
        handle: handle.into(),
    }
}

#[test]
fn records_round_trip_and_bad_ones_are_refused() {
    let r = Record {
        name: "buf-r1-b0-p7-3".into(),
        bytes: 4096,
        handle: "/proc/7/fd/9".into(),
    };
    assert_eq!(Record::parse(1, &r.encode()).unwrap(), r);
    assert!(Record::parse(2, b"name\nnot-a-number\nh").is_err());
    assert!(Record::parse(2, b"just a name").is_err());
}

/// The pure bookkeeping of a reserve: which peers' buffers to (re)open.
#[test]
fn only_new_or_grown_peer_buffers_are_opened() {
    let id = BufId(1);
    let mut names = Names::default();
    let local = 1..2;
    // First reserve: every peer's buffer is new.
    let all = vec![rec("a0", "h0"), rec("a1", ""), rec("a2", "h2")];
    assert_eq!(names.to_open(id, &local, &all).unwrap(), vec![0, 2]);
    names.insert(0, id, "a0".into(), 8);
    names.insert(2, id, "a2".into(), 8);
    // Nothing grew: nothing to open (and no handle needed).
    let same = vec![rec("a0", ""), rec("a1", ""), rec("a2", "")];
    assert!(names.to_open(id, &local, &same).unwrap().is_empty());
    // Rank 2 grew: only it.
    let grew = vec![rec("a0", ""), rec("a1", ""), rec("b2", "h2")];
    assert_eq!(names.to_open(id, &local, &grew).unwrap(), vec![2]);
    // A new name without a handle cannot be opened.
    let bad = vec![rec("c0", ""), rec("a1", ""), rec("a2", "")];
    assert!(names.to_open(id, &local, &bad).is_err());
    // Another buffer id is its own.
    assert_eq!(names.to_open(BufId(2), &local, &all).unwrap(), vec![0, 2]);
    // In one process every rank is local: nothing is ever opened.
    assert!(names.to_open(id, &(0..3), &grew).unwrap().is_empty());
}

/// A copy sent as puts of at most `max` bytes: the pieces tile the copy in
/// order, each at most `max`, only the last carries the signal, and an
/// empty copy is one (empty) piece so that its signal still goes.
#[test]
fn a_long_copy_is_sent_as_pieces_in_order_with_the_signal_last() {
    for (len, max) in [
        (0, 4),
        (1, 4),
        (4, 4),
        (5, 4),
        (17, 4),
        (4096, 1000),
        (10, 0),
    ] {
        let p: Vec<_> = pieces(len, max).collect();
        assert!(!p.is_empty(), "{len}/{max}");
        assert_eq!(p[0].0, 0);
        assert_eq!(p.last().map(|x| x.1), Some(len), "{len}/{max}: {p:?}");
        for w in p.windows(2) {
            assert_eq!(w[0].1, w[1].0, "{len}/{max}: {p:?}");
        }
        for (i, &(a, b, last)) in p.iter().enumerate() {
            assert!(b - a <= max.max(1), "{len}/{max}: {p:?}");
            assert_eq!(last, i + 1 == p.len());
            assert!(b > a || len == 0);
        }
    }
}
