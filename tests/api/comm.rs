//! The one communicator (issue 32 items 5, 6 and 8), through the public
//! API: the same calls in every mode, every rank's call agreed on before
//! data moves, every result in its own rank's buffer.
//!
//! One rank per process is tested here with the ranks as threads of this
//! test (they meet through a store and share memory exactly as processes
//! do; the CPU backend only: CUDA IPC needs real processes), and in
//! `tests/mp` with real processes.

use crate::common::Shape;
use crate::common::{pass, rank_counts, Ctx, TEST_TIMEOUT};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::communicator::Mode;
use ringreduce::{
    bf16, AbortHandle, BackendChoice, CallInfo, Communicator, EngineConfig, Error, JobSpec,
    ReduceOp,
};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A store directory for a job of threads.
fn store(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "rr-comm-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// Run `body` on every rank of a job of `n` ranks, one rank per
/// "process" (a thread of this test here), on the CPU backend; every
/// rank's result in rank order.
fn job_of_threads<R: Send>(
    name: &str,
    n: usize,
    check_calls: bool,
    body: &(dyn Fn(usize, Communicator) -> Result<R, String> + Sync),
) -> Result<Vec<R>, String> {
    let dir = store(name);
    let out = std::thread::scope(|s| {
        let t: Vec<_> = (0..n)
            .map(|r| {
                let dir = dir.clone();
                s.spawn(move || {
                    let mut cfg = EngineConfig::job(JobSpec::new(r, n, &dir), BackendChoice::Cpu);
                    cfg.timeout = Duration::from_secs(20);
                    cfg.check_calls = check_calls;
                    let c = Communicator::join(cfg).ctx(format!("rank {r} joins"))?;
                    body(r, c).map_err(|e| format!("rank {r}: {e}"))
                })
            })
            .collect();
        t.into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("a rank panicked".into())))
            .collect::<Result<Vec<R>, String>>()
    });
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// `n` per-rank handles on backend `b`, each given to `body` on a thread
/// of its own; every rank's result in rank order.
fn per_rank<R: Send>(
    b: BackendChoice,
    n: usize,
    body: &(dyn Fn(usize, Communicator) -> Result<R, String> + Sync),
) -> Result<Vec<R>, String> {
    let mut cfg = EngineConfig::new(n, b);
    cfg.timeout = TEST_TIMEOUT;
    let ranks = Communicator::per_rank(cfg).ctx(format!("{n} per-rank handles"))?;
    ensure!(ranks.len() == n, "{} handles for {n} ranks", ranks.len());
    std::thread::scope(|s| {
        let t: Vec<_> = ranks
            .into_iter()
            .enumerate()
            .map(|(r, c)| s.spawn(move || body(r, c).map_err(|e| format!("rank {r}: {e}"))))
            .collect();
        t.into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("a rank panicked".into())))
            .collect()
    })
}

/// Ranks of the tests on backend `b`: 3 on the CPU, on CUDA the GPUs' (at
/// least 2).
fn ranks_on(b: BackendChoice) -> usize {
    match b {
        BackendChoice::Cuda => rank_counts(b)[0].max(2),
        _ => 3,
    }
}

/// What a call must report: a path, and every rank's traffic.
fn reported(what: &str, info: &CallInfo, n: usize) -> Result<(), String> {
    ensure!(
        !info.path.as_str().is_empty() && info.traffic.len() == n,
        "{what}: CallInfo {info:?} (expected a path and {n} ranks' traffic)"
    );
    Ok(())
}

/// Item 8: one body, written once against `Communicator`, for every mode:
/// every collective in and out of place, broadcast, barrier, device
/// buffers, several element types on one communicator, every result
/// checked exactly in the buffer of its own rank.
fn exercise<S: Shape>(c: &mut Communicator<S>) -> Result<(), String> {
    let n = c.size();
    let local: Vec<usize> = c.local_ranks().collect();
    ensure!(
        local.len() == if c.mode() == Mode::AllRanks { n } else { 1 },
        "{:?}: local ranks {local:?} of {n}",
        c.mode()
    );
    let sum_r = (n * (n - 1) / 2) as f64;
    let per =
        |f: &dyn Fn(usize) -> Vec<f64>| -> Vec<Vec<f64>> { local.iter().map(|&r| f(r)).collect() };
    fn to<T: ringreduce::Element>(v: &[Vec<f64>]) -> Vec<Vec<T>> {
        v.iter()
            .map(|b| b.iter().map(|&x| T::from_f64(x)).collect())
            .collect()
    }
    fn from<T: ringreduce::Element>(v: &[Vec<T>]) -> Vec<Vec<f64>> {
        v.iter()
            .map(|b| b.iter().map(|&x| x.to_f64()).collect())
            .collect()
    }
    let c5 = 5usize;
    // f32 all-reduce, out of place.
    let send = per(&|r| (0..c5).map(|i| (r * 10 + i) as f64).collect());
    let mut recv = vec![vec![0.0f32; c5]; local.len()];
    let info = c
        .all_reduce(
            S::send(&to::<f32>(&send)),
            S::recv(&mut recv),
            ReduceOp::Sum,
        )
        .ctx("all_reduce f32")?;
    reported("all_reduce", &info, n)?;
    let want = per(&|_| (0..c5).map(|i| 10.0 * sum_r + (n * i) as f64).collect());
    ensure!(from(&recv) == want, "all_reduce f32: {recv:?}");
    // i64 all-reduce in place, max: the same communicator, another type.
    let mut buf = to::<i64>(&per(&|r| (0..c5).map(|i| (r * 100 + i) as f64).collect()));
    let info = c
        .all_reduce_in_place(S::recv(&mut buf), ReduceOp::Max)
        .ctx("all_reduce_in_place i64")?;
    reported("all_reduce_in_place", &info, n)?;
    let want = per(&|_| (0..c5).map(|i| ((n - 1) * 100 + i) as f64).collect());
    ensure!(from(&buf) == want, "all_reduce_in_place i64: {buf:?}");
    // f64 reduce-scatter: rank r gets chunk r.
    let send = to::<f64>(&per(&|r| (0..n * c5).map(|j| (r + j) as f64).collect()));
    let mut recv = vec![vec![0.0f64; c5]; local.len()];
    let info = c
        .reduce_scatter(S::send(&send), S::recv(&mut recv), ReduceOp::Sum)
        .ctx("reduce_scatter f64")?;
    reported("reduce_scatter", &info, n)?;
    let want = per(&|r| (0..c5).map(|i| sum_r + (n * (r * c5 + i)) as f64).collect());
    ensure!(recv == want, "reduce_scatter f64: {recv:?}");
    // i32 reduce-scatter in place: slice r of rank r's buffer.
    let mut buf = to::<i32>(&per(&|r| (0..n * c5).map(|j| (r + j) as f64).collect()));
    c.reduce_scatter_in_place(S::recv(&mut buf), ReduceOp::Sum)
        .ctx("reduce_scatter_in_place i32")?;
    for (i, &r) in local.iter().enumerate() {
        let got: Vec<f64> = buf[i][r * c5..(r + 1) * c5]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let want: Vec<f64> = (r * c5..(r + 1) * c5)
            .map(|j| sum_r + (n * j) as f64)
            .collect();
        ensure!(
            got == want,
            "reduce_scatter_in_place i32, rank {r}: {got:?}"
        );
    }
    // u8 all-gather, out of place and in place.
    let send = to::<u8>(&per(&|r| (0..c5).map(|i| (r * c5 + i) as f64).collect()));
    let mut recv = vec![vec![0u8; n * c5]; local.len()];
    let info = c
        .all_gather(S::send(&send), S::recv(&mut recv))
        .ctx("all_gather u8")?;
    reported("all_gather", &info, n)?;
    let all: Vec<f64> = (0..n * c5).map(|j| j as f64).collect();
    ensure!(
        from(&recv) == vec![all.clone(); local.len()],
        "all_gather u8: {recv:?}"
    );
    let mut buf = to::<i64>(&per(&|r| {
        (0..n * c5)
            .map(|j| if j / c5 == r { j as f64 } else { 999.0 })
            .collect()
    }));
    c.all_gather_in_place(S::recv(&mut buf))
        .ctx("all_gather_in_place i64")?;
    ensure!(
        from(&buf) == vec![all; local.len()],
        "all_gather_in_place i64: {buf:?}"
    );
    // f32 broadcast from the last rank, out of place; u32 in place from 0.
    let root = n - 1;
    let send = to::<f32>(&per(&|r| (0..c5).map(|i| (r * 1000 + i) as f64).collect()));
    let mut recv = vec![vec![-1.0f32; c5]; local.len()];
    let info = c
        .broadcast(S::send(&send), S::recv(&mut recv), root)
        .ctx("broadcast f32")?;
    reported("broadcast", &info, n)?;
    ensure!(
        info.path.as_str().starts_with("bcast"),
        "broadcast ran {}",
        info.path
    );
    let want = per(&|_| (0..c5).map(|i| (root * 1000 + i) as f64).collect());
    ensure!(from(&recv) == want, "broadcast f32: {recv:?}");
    let mut buf = to::<u32>(&per(&|r| (0..c5).map(|i| (r * 7 + i) as f64).collect()));
    c.broadcast_in_place(S::recv(&mut buf), 0)
        .ctx("broadcast_in_place u32")?;
    let want = per(&|_| (0..c5).map(|i| i as f64).collect());
    ensure!(from(&buf) == want, "broadcast_in_place u32: {buf:?}");
    // bf16 (named at the crate root), exact small integers.
    let mut buf: Vec<Vec<bf16>> = to(&per(&|r| vec![(r + 1) as f64; 3]));
    c.all_reduce_in_place(S::recv(&mut buf), ReduceOp::Sum)
        .ctx("all_reduce_in_place bf16")?;
    let want = per(&|_| vec![(n * (n + 1) / 2) as f64; 3]);
    ensure!(from(&buf) == want, "bf16: {buf:?}");
    // A barrier is a call too.
    let info = c.barrier().ctx("barrier")?;
    ensure!(info.path == "barrier", "barrier: {info:?}");
    // Device buffers stay with the communicator between calls.
    let b = c.alloc::<i32>(6).ctx("alloc")?;
    let data = to::<i32>(&per(&|r| vec![(r + 1) as f64; 6]));
    c.write_buffer(&b, S::send(&data)).ctx("write_buffer")?;
    let info = c
        .all_reduce_device(&b, &b, 6, ReduceOp::Sum)
        .ctx("all_reduce_device")?;
    reported("all_reduce_device", &info, n)?;
    let mut out = vec![vec![0i32; 6]; local.len()];
    c.read_buffer(&b, S::recv(&mut out)).ctx("read_buffer")?;
    ensure!(
        from(&out) == per(&|_| vec![(n * (n + 1) / 2) as f64; 6]),
        "all_reduce_device: {out:?}"
    );
    c.free(b).ctx("free")?;
    Ok(())
}

/// Item 8: the same body runs in every mode.
fn same_calls_in_every_mode(b: BackendChoice) -> TestResult {
    let n = ranks_on(b);
    let mut cfg = EngineConfig::new(n, b);
    cfg.timeout = TEST_TIMEOUT;
    let mut all = Communicator::new(cfg).ctx("a communicator of every rank")?;
    ensure!(all.mode() == Mode::AllRanks, "mode {:?}", all.mode());
    exercise(&mut all).ctx("every rank from one caller")?;
    // The same engine, split into per-rank handles.
    let ranks = all.into_ranks().ctx("into_ranks")?;
    ensure!(ranks.len() == n, "{} handles", ranks.len());
    let done: Vec<()> = std::thread::scope(|s| {
        let t: Vec<_> = ranks
            .into_iter()
            .map(|mut c| {
                s.spawn(move || {
                    if c.mode() != Mode::PerRank {
                        return Err(format!("mode {:?}", c.mode()));
                    }
                    exercise(&mut c)
                })
            })
            .collect();
        t.into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect::<Result<Vec<()>, String>>()
    })
    .ctx("one handle per rank thread (into_ranks)")?;
    ensure!(done.len() == n, "ranks");
    per_rank(b, n, &|_, mut c| exercise(&mut c)).ctx("Communicator::per_rank")?;
    if b == BackendChoice::Cpu {
        job_of_threads("every-mode", n, true, &|_, mut c| {
            ensure!(c.mode() == Mode::Process, "mode {:?}", c.mode());
            exercise(&mut c)
        })
        .ctx("one rank per process")?;
    }
    pass()
}

/// One rank's part of a case of mismatched calls: rank 1 asks for
/// something else. Returns the call's outcome and whether the rank's
/// output buffer is as it was.
type Case = fn(usize, &mut Communicator) -> (Result<CallInfo, Error>, bool);

fn cases() -> Vec<(&'static str, Case)> {
    fn op(r: usize, c: &mut Communicator) -> (Result<CallInfo, Error>, bool) {
        let mut out = vec![-1.0f32; 4];
        let op = if r == 1 { ReduceOp::Max } else { ReduceOp::Sum };
        let res = c.all_reduce(&[r as f32 + 1.0; 4], &mut out, op);
        (res, out == [-1.0; 4])
    }
    fn count(r: usize, c: &mut Communicator) -> (Result<CallInfo, Error>, bool) {
        let len = if r == 1 { 5 } else { 4 };
        let mut out = vec![-1.0f32; len];
        let res = c.all_reduce(&vec![1.0f32; len], &mut out, ReduceOp::Sum);
        (res, out.iter().all(|&x| x == -1.0))
    }
    fn collective(r: usize, c: &mut Communicator) -> (Result<CallInfo, Error>, bool) {
        if r == 1 {
            let mut out = vec![-1.0f32; 4 * c.size()];
            let res = c.all_gather(&[1.0f32; 4], &mut out);
            (res, out.iter().all(|&x| x == -1.0))
        } else {
            op(0, c)
        }
    }
    fn dtype(r: usize, c: &mut Communicator) -> (Result<CallInfo, Error>, bool) {
        if r == 1 {
            let mut out = vec![-1i32; 4];
            let res = c.all_reduce(&[1i32; 4], &mut out, ReduceOp::Sum);
            (res, out == [-1; 4])
        } else {
            op(0, c)
        }
    }
    fn root(r: usize, c: &mut Communicator) -> (Result<CallInfo, Error>, bool) {
        let mut out = vec![-1.0f32; 4];
        let res = c.broadcast(&[r as f32; 4], &mut out, usize::from(r == 1));
        (res, out == [-1.0; 4])
    }
    fn place(r: usize, c: &mut Communicator) -> (Result<CallInfo, Error>, bool) {
        if r == 1 {
            let mut buf = vec![7.0f32; 4];
            let res = c.all_reduce_in_place(&mut buf, ReduceOp::Sum);
            (res, buf == [7.0; 4])
        } else {
            op(0, c)
        }
    }
    vec![
        ("another op (sum against max)", op as Case),
        ("another count", count),
        (
            "another collective (all-reduce against all-gather)",
            collective,
        ),
        ("another element type (float against int32)", dtype),
        ("another root", root),
        ("another place", place),
    ]
}

/// Every rank's outcome of a mismatch case must be the one Mismatch,
/// naming what ranks 0 and 1 asked for (different things), with the
/// buffers untouched.
fn one_mismatch(what: &str, got: &[(Result<CallInfo, Error>, bool)]) -> Result<(), String> {
    for (r, (res, untouched)) in got.iter().enumerate() {
        match res {
            Err(e @ Error::Mismatch { rank: 1, asked, .. }) => {
                let of = |q| asked.iter().find(|(x, _)| *x == q).map(|(_, a)| a);
                ensure!(
                    matches!((of(0), of(1)), (Some(a), Some(b)) if a != b),
                    "{what}: the mismatch must say what ranks 0 and 1 asked for: {e}"
                );
            }
            other => {
                return Err(format!(
                    "LIBRARY BUG (issue 32 item 5): {what}: rank {r} got {other:?}; every rank must get the one Mismatch naming rank 1"
                ))
            }
        }
        ensure!(
            *untouched,
            "{what}: rank {r}'s buffer changed in a call that failed"
        );
    }
    Ok(())
}

/// An all-reduce every rank agrees on, after a failed call: it works.
fn agreed(r: usize, c: &mut Communicator) -> Result<(), String> {
    let n = c.size();
    let mut out = vec![0.0f32; 4];
    c.all_reduce(&[r as f32 + 1.0; 4], &mut out, ReduceOp::Sum)
        .ctx("the next call, agreed")?;
    let want = (n * (n + 1) / 2) as f32;
    ensure!(out == [want; 4], "the next call: {out:?}");
    Ok(())
}

/// Item 5, one handle per rank: ranks that ask for different calls all
/// get one Mismatch, at once (rank 2 comes later and meets it too).
fn per_rank_mismatch(b: BackendChoice) -> TestResult {
    let n = ranks_on(b).max(3);
    for (what, case) in cases() {
        let t0 = Instant::now();
        let got = per_rank(b, n, &|r, mut c| {
            std::thread::sleep(Duration::from_millis([0, 100, 300][r.min(2)]));
            let out = case(r, &mut c);
            agreed(r, &mut c)?;
            Ok(out)
        })?;
        ensure!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: took {:?} (timeout {TEST_TIMEOUT:?})",
            t0.elapsed()
        );
        one_mismatch(what, &got)?;
    }
    pass()
}

/// Item 5, one rank per process (ranks as threads here; tests/mp with
/// processes): every mismatch is one typed error on every rank, within
/// a fraction of the timeout, before any data moved; the next call works.
/// It was `Ok` with wrong data on every rank.
fn process_mismatch() -> TestResult {
    for (what, case) in cases() {
        let t0 = Instant::now();
        let got = job_of_threads("mismatch", 2, true, &|r, mut c| {
            let out = case(r, &mut c);
            agreed(r, &mut c)?;
            Ok(out)
        })?;
        ensure!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: took {:?}",
            t0.elapsed()
        );
        one_mismatch(what, &got)?;
    }
    // A rank's own bad argument: its own error for it, PeerArgument naming
    // it for the other, at once; then the ranks go on.
    let got = job_of_threads("own", 2, true, &|r, mut c| {
        let mut out = vec![0.0f32; if r == 1 { 3 } else { 4 }];
        let res = c.all_reduce(&[1.0f32; 4], &mut out, ReduceOp::Sum);
        agreed(r, &mut c)?;
        Ok(res)
    })?;
    ensure!(
        matches!(&got[1], Err(Error::BufferSize { rank: 1, .. }))
            && matches!(&got[0], Err(Error::PeerArgument { rank: 1, .. })),
        "a bad output length on rank 1: {got:?}"
    );
    // Without the check (EngineConfig::check_calls = false), agreed calls
    // work as before.
    job_of_threads("unchecked", 2, false, &|r, mut c| {
        agreed(r, &mut c)?;
        c.barrier().ctx("barrier")?;
        agreed(r, &mut c)
    })?;
    pass()
}

/// Issue 41 item 4: memory that cannot be had on one rank of a job fails
/// the call on every rank alike and is not fatal (the rank's own
/// `OutOfMemory`, `PeerArgument` naming it on the others, at once), as
/// with every rank in one process; the next call says the same, never
/// `Poisoned`.
fn memory_that_cannot_be_had_fails_every_rank_alike() -> TestResult {
    use ringreduce::fault::{Fault, FaultPlan, FaultSpec};
    let dir = store("oom");
    let t0 = Instant::now();
    let got: Vec<Vec<Result<(), Error>>> = std::thread::scope(|s| {
        let t: Vec<_> = (0..2)
            .map(|r| {
                let dir = dir.clone();
                s.spawn(move || -> Result<Vec<Result<(), Error>>, String> {
                    let cfg = EngineConfig::job(JobSpec::new(r, 2, &dir), BackendChoice::Cpu)
                        .timeout(Duration::from_secs(20))
                        .with_faults(FaultPlan(vec![FaultSpec {
                            rank: 1,
                            op: 0,
                            call: None,
                            fault: Fault::AllocFail,
                        }]));
                    let mut c = Communicator::join(cfg).ctx(format!("rank {r} joins"))?;
                    Ok((0..2)
                        .map(|_| {
                            let mut x = vec![1.0f32; 1024];
                            c.all_reduce_in_place(&mut x, ReduceOp::Sum).map(|_| ())
                        })
                        .collect())
                })
            })
            .collect();
        t.into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("a rank panicked".into())))
            .collect::<Result<Vec<_>, String>>()
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    ensure!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    for call in 0..2 {
        let (r0, r1) = (&got[0][call], &got[1][call]);
        ensure!(
            matches!(r1, Err(e @ Error::OutOfMemory { .. }) if !e.is_fatal())
                && matches!(r0, Err(Error::PeerArgument { rank: 1, .. })),
            "call {call}: rank 0 {r0:?}, rank 1 {r1:?}"
        );
    }
    pass()
}

/// Item 6: in a job, every result lands in its own rank's buffer, for
/// every element type of one communicator (a rank's handle takes its own
/// buffer alone, by its type).
fn results_land_in_their_ranks_buffers() -> TestResult {
    let got = job_of_threads("own-buffer", 2, true, &|r, mut c| {
        // Two element types on one communicator, each result rank r's.
        let mut x = vec![(r + 1) as f32; 2];
        c.all_reduce_in_place(&mut x, ReduceOp::Sum).ctx("f32")?;
        ensure!(x == [3.0; 2], "f32: {x:?}");
        let mut y = vec![if r == 0 { 100i64 } else { 200 }; 2];
        c.all_reduce_in_place(&mut y, ReduceOp::Sum).ctx("i64")?;
        ensure!(y == [300; 2], "i64: {y:?}");
        let mut chunk = vec![0i64; 2];
        c.reduce_scatter(&[r as i64, r as i64, 10, 10], &mut chunk, ReduceOp::Sum)
            .ctx("reduce_scatter")?;
        let want = if r == 0 { 1 } else { 20 };
        ensure!(chunk == [want; 2], "reduce_scatter: {chunk:?}");
        Ok(())
    })?;
    ensure!(got.len() == 2, "ranks");
    pass()
}

/// Item 8: the constructors say what they take: outside a job
/// `from_env` says how to start one (it takes no rank count); a rank
/// count of 0 is refused where it is one.
fn constructors_say_what_they_take() -> TestResult {
    match Communicator::from_env(BackendChoice::Cpu) {
        Err(Error::BadArgument(m)) => ensure!(
            m.contains("ringreduce launch") && m.contains("mpirun"),
            "from_env outside a job: {m}"
        ),
        other => return Err(format!("from_env outside a job: {other:?}")),
    }
    let r = Communicator::new(EngineConfig::cpu(0));
    ensure!(matches!(r, Err(Error::ZeroRanks)), "0 ranks: {r:?}");
    // A job's rank count is the job's.
    let cfg = EngineConfig::job(JobSpec::new(1, 4, store("spec")), BackendChoice::Cpu);
    ensure!(cfg.ranks == 4, "EngineConfig::job: {} ranks", cfg.ranks);
    // A per-rank handle does not give its shared engine away (it cannot
    // split again: `into_ranks` is a method of every rank's communicator
    // only, and a list of buffers given to a handle of one rank does not
    // compile, issue 41 item 8).
    let mut ranks = Communicator::per_rank(EngineConfig::cpu(2)).ctx("per_rank")?;
    let first = ranks.pop().ok_or("no handles")?;
    ensure!(
        matches!(first.into_engine(), Err(Error::BadArgument(_))),
        "into_engine of a per-rank handle"
    );
    // Each constructor refuses the other's configuration, saying which
    // one to call.
    let job = EngineConfig::job(JobSpec::new(0, 2, store("ctor")), BackendChoice::Cpu);
    match Communicator::new(job) {
        Err(Error::BadArgument(m)) => ensure!(m.contains("Communicator::join"), "{m}"),
        other => return Err(format!("Communicator::new of a job's rank: {other:?}")),
    }
    match Communicator::join(EngineConfig::cpu(2)) {
        Err(Error::BadArgument(m)) => ensure!(
            m.contains("Communicator::new") && m.contains("Communicator::per_rank"),
            "{m}"
        ),
        other => return Err(format!("Communicator::join without a job: {other:?}")),
    }
    // A communicator of one rank from one caller takes a list of one.
    let mut one = Communicator::new(EngineConfig::cpu(1)).ctx("one rank")?;
    let mut bufs = vec![vec![2.0f32; 3]];
    one.all_reduce_in_place(&mut bufs, ReduceOp::Sum)
        .ctx("one rank")?;
    ensure!(bufs == [[2.0; 3]], "one rank: {bufs:?}");
    pass()
}

/// Item 8: every mode has an abort handle (at the crate root) that makes
/// later calls fatal.
fn abort_in_every_mode(b: BackendChoice) -> TestResult {
    let n = ranks_on(b);
    let mut cfg = EngineConfig::new(n, b);
    cfg.timeout = TEST_TIMEOUT;
    let mut all = Communicator::new(cfg.clone()).ctx("communicator")?;
    let h: AbortHandle = all.abort_handle();
    h.abort();
    let mut bufs = vec![vec![1.0f32; 4]; n];
    let r = all.all_reduce_in_place(&mut bufs, ReduceOp::Sum);
    ensure!(
        r.as_ref().is_err_and(Error::is_fatal),
        "every rank, aborted: {r:?}"
    );
    let r = all.barrier();
    ensure!(
        r.as_ref().is_err_and(Error::is_fatal),
        "barrier, aborted: {r:?}"
    );
    let aborted = std::sync::Barrier::new(n);
    let got = per_rank(b, n, &|r, mut c| {
        if r == 0 {
            c.abort_handle().abort();
        }
        aborted.wait();
        let mut x = vec![1.0f32; 4];
        Ok(c.all_reduce_in_place(&mut x, ReduceOp::Sum))
    })?;
    for (r, res) in got.iter().enumerate() {
        ensure!(
            res.as_ref().is_err_and(Error::is_fatal),
            "per-rank handle {r} after an abort: {res:?}"
        );
    }
    if b == BackendChoice::Cpu {
        let got = job_of_threads("abort", 2, true, &|r, mut c| {
            if r == 0 {
                c.abort_handle().abort();
            }
            let mut x = vec![1.0f32; 4];
            Ok(c.all_reduce_in_place(&mut x, ReduceOp::Sum))
        })?;
        ensure!(
            got[0].as_ref().is_err_and(Error::is_fatal)
                && matches!(&got[1], Err(Error::PeerFailed { rank: 0, .. })),
            "a job whose rank 0 aborted: {got:?}"
        );
    }
    pass()
}

/// The study views through the communicator: with timing on, every call
/// comes back with the plan that ran and one time per op part of every
/// local rank, in order, each ending after it starts; with timing off,
/// nothing; a per-rank handle refuses by name.
fn timed_calls_come_with_their_plans(b: BackendChoice) -> TestResult {
    let n = ranks_on(b);
    let mut cfg = EngineConfig::new(n, b);
    cfg.timeout = TEST_TIMEOUT;
    let mut c = Communicator::new(cfg).ctx("a communicator")?;
    let send: Vec<Vec<f32>> = (0..n).map(|r| vec![r as f32; 1024]).collect();
    let mut recv = vec![vec![0f32; 1024]; n];
    c.all_reduce(&send, &mut recv, ReduceOp::Sum)
        .ctx("untimed")?;
    c.set_timing(true).ctx("timing on")?;
    let mut paths = Vec::new();
    for _ in 0..2 {
        paths.push(
            c.all_reduce(&send, &mut recv, ReduceOp::Sum)
                .ctx("timed")?
                .path,
        );
    }
    let mut g = vec![vec![0f32; 1024 * n]; n];
    paths.push(c.all_gather(&send, &mut g).ctx("timed all-gather")?.path);
    c.set_timing(false).ctx("timing off")?;
    c.all_reduce(&send, &mut recv, ReduceOp::Sum)
        .ctx("untimed after")?;
    let calls = c.take_timed_calls().ctx("take")?;
    let names: Vec<&str> = calls.iter().map(|(p, _)| p.name.as_str()).collect();
    let paths: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    ensure!(names == paths, "timed calls {names:?}, launched {paths:?}");
    for (plan, t) in &calls {
        ensure!(t.plan == plan.name, "{} timed as {}", plan.name, t.plan);
        let parts: usize = plan
            .ops
            .iter()
            .enumerate()
            .map(|(r, ops)| {
                ops.iter()
                    .map(|op| ringreduce::plan::interp::parts(r, op).len())
                    .sum::<usize>()
            })
            .sum();
        ensure!(
            t.ops.len() == parts,
            "{}: {} times for {parts} op parts",
            plan.name,
            t.ops.len()
        );
        ensure!(
            t.ops
                .iter()
                .all(|o| o.end_ns >= o.start_ns && o.op < plan.ops[o.rank].len()),
            "{}: a time out of order or of no op",
            plan.name
        );
    }
    ensure!(
        c.take_timed_calls().ctx("take again")?.is_empty(),
        "taken twice"
    );
    let mut ranks = c.into_ranks().ctx("into_ranks")?;
    let e = ranks[0]
        .set_timing(true)
        .expect_err("a per-rank handle times nothing");
    ensure!(e.to_string().contains("per-rank handle"), "{e}");
    pass()
}

pub fn register(h: &mut Harness) {
    test_backend!(
        h,
        "comm::timed_calls_come_with_their_plans",
        1,
        timed_calls_come_with_their_plans
    );
    h.add(
        "comm::memory_that_cannot_be_had_fails_every_rank_alike[cpu]",
        memory_that_cannot_be_had_fails_every_rank_alike,
    );
    test_backend!(
        h,
        "comm::same_calls_in_every_mode",
        1,
        same_calls_in_every_mode
    );
    test_backend!(
        h,
        "comm::per_rank_mismatch_is_one_error_on_every_rank",
        1,
        per_rank_mismatch
    );
    h.add(
        "comm::process_ranks_agree_before_data_moves[cpu]",
        process_mismatch,
    );
    h.add(
        "comm::results_land_in_their_ranks_buffers[cpu]",
        results_land_in_their_ranks_buffers,
    );
    h.add(
        "comm::constructors_say_what_they_take",
        constructors_say_what_they_take,
    );
    test_backend!(h, "comm::abort_in_every_mode", 1, abort_in_every_mode);
}
