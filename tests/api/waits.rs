//! The waits and the failures (issue 32, items 1-4 and 7), through the
//! public API: every wait is bounded, abortable and ends with the same
//! typed error on every rank of a call.
//!
//! Each body runs under a watchdog ([`watchdog`]): if the bug it guards
//! against comes back and the call hangs, the test fails after
//! [`WATCHDOG`] instead of hanging the run, and ends the test binary (a
//! hang can hold rayon's global pool, which every later test uses).

use crate::common::{comm_with, engine_with, pass, Ctx};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::fault::{Fault, FaultPlan, FaultSpec};
use ringreduce::process::JobSpec;
use ringreduce::{BackendChoice, Communicator, EngineConfig, Error, ReduceOp};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a body may take before the watchdog fails it.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Run `body` on its own thread; its result, or a failure once it has run
/// for `WATCHDOG`. A hang ends the whole test binary (exit 1), after
/// saying which test hung: what it held (rank threads, rayon's workers)
/// would hang the tests after it.
fn watchdog(name: &str, body: impl FnOnce() -> TestResult + Send + 'static) -> TestResult {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name(format!("watched {name}"))
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
                .unwrap_or_else(|_| Err("the test body panicked".into()));
            let _ = tx.send(r);
        })
        .map_err(|e| format!("spawning the watched thread: {e}"))?;
    match rx.recv_timeout(WATCHDOG) {
        Ok(r) => {
            let _ = t.join();
            r
        }
        Err(_) => {
            println!(
                "test {name} ... FAILED: HANG, still running after {WATCHDOG:?} (the watchdog ends the test binary)"
            );
            std::process::exit(1);
        }
    }
}

/// Register `name[cpu]` and `name[cuda]` with the body under the watchdog.
fn watched(
    h: &mut Harness,
    name: &'static str,
    gpus: usize,
    body: fn(BackendChoice) -> TestResult,
) {
    test_backend!(h, name, gpus, move |b: BackendChoice| {
        watchdog(name, move || body(b))
    });
}

/// 4 MiB of f32 per rank, as in the issue.
const BIG: usize = 1 << 20;

/// Every collective on a fresh 2-rank communicator of `BIG` elements per
/// rank (timeout 5 s), results checked: what each caller below runs.
fn every_collective(b: BackendChoice, seed: i32) -> Result<(), String> {
    let mut e = comm_with(b, 2, Duration::from_secs(5), FaultPlan::none())?;
    let send: Vec<Vec<f32>> = (0..2).map(|r| vec![(seed + r) as f32; BIG]).collect();
    let sum = (2 * seed + 1) as f32;
    let mut recv = vec![vec![0.0f32; BIG]; 2];
    e.all_reduce(&send, &mut recv, ReduceOp::Sum)
        .ctx("all_reduce")?;
    ensure!(
        recv.iter().all(|v| v.iter().all(|&x| x == sum)),
        "all_reduce: wrong result"
    );
    let mut chunk = vec![vec![0.0f32; BIG / 2]; 2];
    e.reduce_scatter(&send, &mut chunk, ReduceOp::Sum)
        .ctx("reduce_scatter")?;
    ensure!(
        chunk.iter().all(|v| v.iter().all(|&x| x == sum)),
        "reduce_scatter: wrong result"
    );
    let half: Vec<Vec<f32>> = send.iter().map(|s| s[..BIG / 2].to_vec()).collect();
    let mut all = vec![vec![0.0f32; BIG]; 2];
    e.all_gather(&half, &mut all).ctx("all_gather")?;
    for v in &all {
        ensure!(
            v[..BIG / 2].iter().all(|&x| x == seed as f32)
                && v[BIG / 2..].iter().all(|&x| x == (seed + 1) as f32),
            "all_gather: wrong result"
        );
    }
    let mut buf = send.clone();
    e.all_reduce_in_place(&mut buf, ReduceOp::Max)
        .ctx("all_reduce_in_place")?;
    ensure!(
        buf.iter()
            .all(|v| v.iter().all(|&x| x == (seed + 1) as f32)),
        "all_reduce_in_place: wrong result"
    );
    Ok(())
}

/// Item 1: callers that are themselves workers of rayon's global pool.
fn from_rayon(b: BackendChoice) -> TestResult {
    // The case: two engines from `rayon::join`.
    let (x, y) = rayon::join(|| every_collective(b, 1), || every_collective(b, 3));
    x.ctx("first engine under rayon::join")?;
    y.ctx("second engine under rayon::join")?;
    // Every worker of the global pool inside a call at once (on any
    // machine, whatever its core count): nobody is left to run rayon
    // work, so the engine must not need any. On CUDA at most 4 engines at
    // once: 16 engines of 2 ranks on one H200 (16 workers there) put 32
    // spin-waiting exchange kernels (oneshot:flag, in place) on one GPU,
    // more than it holds resident at once, and one timed out waiting for
    // a partner that could not be scheduled
    // (results/2026-12-01-h200x1-s10-waits/2026-12-01-h200x1-s10-waits.log.xz):
    // a limit of spinning kernels, not of the host waits this test is about.
    let workers = match b {
        BackendChoice::Cuda => rayon::current_num_threads().min(4),
        _ => rayon::current_num_threads(),
    };
    let all_in = std::sync::Barrier::new(workers);
    let results: Vec<Result<(), String>> = rayon::broadcast(|ctx| {
        if ctx.index() >= workers {
            return Ok(());
        }
        all_in.wait();
        every_collective(b, ctx.index() as i32)
    });
    for (i, r) in results.into_iter().enumerate() {
        r.ctx(format!("worker {i} of {workers} (rayon::broadcast)"))?;
    }
    // `rayon::scope` on a pool of one thread (RAYON_NUM_THREADS=1).
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| format!("a one-thread pool: {e}"))?;
    let mut r = Ok(());
    one.install(|| rayon::scope(|s| s.spawn(|_| r = every_collective(b, 5))));
    r.ctx("inside rayon::scope on a one-thread pool")?;
    pass()
}

/// Issue 41 item 6: per-rank handles called from a rayon pool with fewer
/// threads than ranks cannot all be waiting at once: every rank fails
/// after one timeout (not two), and the error says why.
fn per_rank_handles_on_a_small_rayon_pool(b: BackendChoice) -> TestResult {
    use rayon::prelude::*;
    let timeout = Duration::from_secs(1);
    let mut ranks = ranks_of(b, 4, timeout)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .map_err(|e| format!("a pool of 2 threads: {e}"))?;
    let t0 = Instant::now();
    let got: Vec<Result<(), Error>> = pool.install(|| {
        ranks
            .par_iter_mut()
            .with_max_len(1)
            .map(|h| {
                let mut x = vec![1.0f32; 16];
                h.all_reduce_in_place(&mut x, ReduceOp::Sum).map(|_| ())
            })
            .collect()
    });
    let took = t0.elapsed();
    ensure!(
        took < 2 * timeout,
        "LIBRARY BUG (issue 41 item 6): the ranks failed after {took:?}, the timeout is {timeout:?}"
    );
    for (r, res) in got.iter().enumerate() {
        match res {
            Err(e @ Error::Timeout { .. }) => ensure!(
                e.to_string().contains("rayon pool of 2 threads"),
                "rank {r}'s timeout must say why: {e}"
            ),
            other => return Err(format!("rank {r} on a pool of 2 threads: {other:?}")),
        }
    }
    pass()
}

/// Item 1: the other callers: plain threads and tokio's blocking pool.
fn from_threads_and_tokio(b: BackendChoice) -> TestResult {
    let (x, y) = std::thread::scope(|s| {
        let a = s.spawn(|| every_collective(b, 1));
        let c = s.spawn(|| every_collective(b, 2));
        (a.join(), c.join())
    });
    x.map_err(|_| "thread panicked".to_string())?
        .ctx("plain thread 1")?;
    y.map_err(|_| "thread panicked".to_string())?
        .ctx("plain thread 2")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(2)
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let r = rt.block_on(async move {
        let a = tokio::task::spawn_blocking(move || every_collective(b, 4));
        let c = tokio::task::spawn_blocking(move || every_collective(b, 6));
        (a.await, c.await)
    });
    r.0.map_err(|e| format!("spawn_blocking: {e}"))?
        .ctx("tokio spawn_blocking 1")?;
    r.1.map_err(|e| format!("spawn_blocking: {e}"))?
        .ctx("tokio spawn_blocking 2")?;
    pass()
}

/// One per-rank call from every rank in `callers`, each starting after
/// its delay; every caller's outcome, in the order given.
fn per_rank_calls(
    ranks: &mut [Communicator],
    callers: &[(usize, Duration, ReduceOp, usize)],
) -> Vec<Result<Vec<i32>, Error>> {
    let mut handles: Vec<Option<&mut Communicator>> = ranks.iter_mut().map(Some).collect();
    std::thread::scope(|s| {
        let t: Vec<_> = callers
            .iter()
            .map(|&(r, delay, op, len)| {
                let h = handles[r].take().expect("one call per rank");
                s.spawn(move || {
                    std::thread::sleep(delay);
                    let mut out = vec![0; len];
                    h.all_reduce(&vec![h.rank() as i32 + 1; len], &mut out, op)
                        .map(|_| out)
                })
            })
            .collect();
        t.into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(Error::BadArgument("thread panicked".into())))
            })
            .collect()
    })
}

/// Every rank calls an all-reduce of 4 elements; all must succeed.
fn all_call(ranks: &mut [Communicator]) -> Result<(), String> {
    let n = ranks.len();
    let callers: Vec<_> = (0..n)
        .map(|r| (r, Duration::ZERO, ReduceOp::Sum, 4))
        .collect();
    let want = vec![(1..=n as i32).sum::<i32>(); 4];
    for (r, o) in per_rank_calls(ranks, &callers).into_iter().enumerate() {
        let o = o.ctx(format!("rank {r}"))?;
        ensure!(o == want, "rank {r}: {o:?}");
    }
    Ok(())
}

fn ranks_of(b: BackendChoice, n: usize, timeout: Duration) -> Result<Vec<Communicator>, String> {
    let mut cfg = EngineConfig::new(n, b);
    cfg.timeout = timeout;
    Communicator::per_rank(cfg).ctx(format!("{n} per-rank handles"))
}

/// Item 2: an abort while ranks wait for peers that never come.
fn abort_wakes_the_rendezvous(b: BackendChoice) -> TestResult {
    let timeout = Duration::from_secs(10);
    let mut ranks = ranks_of(b, 3, timeout)?;
    let handle = ranks[0].abort_handle();
    let aborter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        handle.abort();
    });
    let t0 = Instant::now();
    let got = per_rank_calls(
        &mut ranks,
        &[
            (0, Duration::ZERO, ReduceOp::Sum, 4),
            (1, Duration::ZERO, ReduceOp::Sum, 4),
        ],
    );
    let took = t0.elapsed();
    aborter.join().map_err(|_| "the aborter panicked")?;
    for (r, res) in got.iter().enumerate() {
        ensure!(
            matches!(res, Err(Error::Aborted { rank, .. }) if *rank == r),
            "LIBRARY BUG (issue 32 item 2): rank {r} waiting for rank 2 after an abort: {res:?}"
        );
    }
    ensure!(
        took < Duration::from_secs(3),
        "LIBRARY BUG (issue 32 item 2): the aborted ranks waited {took:?} (timeout {timeout:?})"
    );
    // Every later call: the engine must be rebuilt (fatal), on every rank.
    for h in &mut ranks {
        let mut o = vec![0; 4];
        let r = h.all_reduce(&[1; 4], &mut o, ReduceOp::Sum);
        ensure!(
            r.as_ref().is_err_and(Error::is_fatal),
            "rank {} after the abort: {r:?}",
            h.rank()
        );
    }
    pass()
}

/// Item 2, one rank per process: an abort wakes the buffer reservation's wait of a first
/// call whose peer never calls, and the peer is told at once.
fn abort_wakes_the_reservation() -> TestResult {
    let dir = std::env::temp_dir().join(format!(
        "rr-waits-comm-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let peer_dir = dir.clone();
    let peer = std::thread::spawn(move || -> Result<Error, String> {
        let mut cfg = EngineConfig::job(JobSpec::new(1, 2, &peer_dir), BackendChoice::Cpu);
        cfg.timeout = Duration::from_secs(10);
        let mut c = Communicator::join(cfg).ctx("rank 1 joins")?;
        // Rank 1 calls only once rank 0 gave up: its call must name rank 0
        // as failed, at once.
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "rank 0 never finished")?;
        let t0 = Instant::now();
        let mut recv = vec![0.0f32; 1 << 16];
        let e = c
            .all_reduce(&vec![1.0; 1 << 16], &mut recv, ReduceOp::Sum)
            .err()
            .ok_or("rank 1's call passed without rank 0")?;
        ensure!(
            t0.elapsed() < Duration::from_secs(2),
            "rank 1 waited {:?} for its aborted peer: {e}",
            t0.elapsed()
        );
        Ok(e)
    });
    let mut cfg = EngineConfig::job(JobSpec::new(0, 2, &dir), BackendChoice::Cpu);
    cfg.timeout = Duration::from_secs(10);
    let mut c = Communicator::join(cfg).ctx("rank 0 joins")?;
    let handle = c.abort_handle();
    let aborter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        handle.abort();
    });
    let t0 = Instant::now();
    let mut recv = vec![0.0f32; 1 << 16];
    let r = c.all_reduce(&vec![1.0; 1 << 16], &mut recv, ReduceOp::Sum);
    let took = t0.elapsed();
    aborter.join().map_err(|_| "the aborter panicked")?;
    let _ = done_tx.send(());
    ensure!(
        matches!(&r, Err(Error::Aborted { rank: 0, .. })),
        "LIBRARY BUG (issue 32 item 2): rank 0's first call after an abort: {r:?}"
    );
    ensure!(
        took < Duration::from_secs(3),
        "LIBRARY BUG (issue 32 item 2): the reservation waited {took:?} after the abort: {r:?}"
    );
    let r2 = c.all_reduce(&[1.0; 4], &mut [0.0; 4], ReduceOp::Sum);
    ensure!(
        r2.as_ref().is_err_and(Error::is_fatal),
        "a call after the abort: {r2:?}"
    );
    let e = peer.join().map_err(|_| "rank 1 panicked".to_string())??;
    ensure!(
        matches!(e, Error::PeerFailed { rank: 0, .. }) && e.rank() == Some(0),
        "rank 1 must be told rank 0 failed (aborted): {e:?}"
    );
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
    pass()
}

/// Item 3: different arguments are a `Mismatch` for every rank, at once,
/// naming what each asked for; a rank that comes later meets the same
/// call and gets the same error; the next call works.
fn mismatch_is_told_to_every_rank(b: BackendChoice) -> TestResult {
    let timeout = Duration::from_secs(10);
    let mut ranks = ranks_of(b, 3, timeout)?;
    let ms = Duration::from_millis;
    for (what, second) in [
        ("another op", (1, ms(100), ReduceOp::Max, 4)),
        ("another length", (1, ms(100), ReduceOp::Sum, 5)),
    ] {
        let t0 = Instant::now();
        let got = per_rank_calls(
            &mut ranks,
            &[
                (0, Duration::ZERO, ReduceOp::Sum, 4),
                second,
                (2, ms(300), ReduceOp::Sum, 4),
            ],
        );
        let took = t0.elapsed();
        for (r, res) in got.iter().enumerate() {
            match res {
                Err(e @ Error::Mismatch { rank: 1, asked, .. }) => {
                    ensure!(
                        asked.iter().any(|(q, _)| *q == 0) && asked.iter().any(|(q, _)| *q == 1),
                        "{what}: the mismatch must say what ranks 0 and 1 asked for: {e}"
                    );
                    ensure!(e.rank() == Some(1), "{what}: rank() {:?}", e.rank());
                }
                other => {
                    return Err(format!(
                        "LIBRARY BUG (issue 32 item 3): {what}: rank {r} got {other:?}, expected the Mismatch naming rank 1"
                    ))
                }
            }
        }
        ensure!(
            took < Duration::from_secs(3),
            "LIBRARY BUG (issue 32 item 3): {what}: the mismatch took {took:?} to reach every rank (timeout {timeout:?})"
        );
        all_call(&mut ranks).ctx(format!("every rank calls again after {what}"))?;
    }
    pass()
}

/// Item 4: a call that outlasts the timeout (slow, but no wait longer than
/// it) gives every rank its result; a rank that never comes is the only
/// one named.
fn slow_calls_agree(b: BackendChoice) -> TestResult {
    let timeout = Duration::from_secs(1);
    // Every rank sleeps 400 ms before each of its first 4 ops in call 1:
    // the call takes at least 1.6 s, each of its waits well under 1 s.
    let faults = FaultPlan(
        (0..2)
            .flat_map(|rank| {
                (0..4).map(move |op| FaultSpec {
                    rank,
                    op,
                    call: Some(1),
                    fault: Fault::Delay { ms: 400 },
                })
            })
            .collect(),
    );
    let mut cfg = EngineConfig::new(2, b).with_faults(faults);
    cfg.timeout = timeout;
    cfg.algo = crate::common::algo("ring");
    let mut ranks = Communicator::per_rank(cfg).ctx("engine")?;
    let t0 = Instant::now();
    let got = per_rank_calls(
        &mut ranks,
        &[
            (0, Duration::ZERO, ReduceOp::Sum, 4),
            (1, Duration::ZERO, ReduceOp::Sum, 4),
        ],
    );
    let took = t0.elapsed();
    ensure!(
        took > timeout,
        "the slow call took only {took:?}: the test does not test what it says"
    );
    for (r, res) in got.iter().enumerate() {
        match res {
            Ok(o) if *o == vec![3; 4] => {}
            other => {
                return Err(format!(
                    "LIBRARY BUG (issue 32 item 4): rank {r} of a call that outlasted the timeout ({took:?}): {other:?}; every rank must get the result"
                ))
            }
        }
    }
    // Rank 2 of three never calls: each waiter names rank 2, never itself.
    let mut ranks = ranks_of(b, 3, timeout)?;
    let got = per_rank_calls(
        &mut ranks,
        &[
            (0, Duration::ZERO, ReduceOp::Sum, 4),
            (1, Duration::from_millis(300), ReduceOp::Sum, 4),
        ],
    );
    for (r, res) in got.iter().enumerate() {
        match res {
            Err(e @ Error::Timeout { rank, .. }) if *rank == r => {
                let t = e.to_string();
                ensure!(
                    t.contains("for rank 2 to join"),
                    "LIBRARY BUG (issue 32 item 4): rank {r} must name only rank 2 as missing: {t}"
                );
                ensure!(e.is_fatal(), "a timeout is fatal (issue 41 item 4): {e}");
            }
            other => return Err(format!("rank {r} without rank 2: {other:?}")),
        }
    }
    // After a timeout every later call is refused on every rank (issue 41
    // item 1: never a late rank matched with another call); rank 2's first
    // call is the call the others gave up on, and fails with it.
    let callers: Vec<_> = (0..3)
        .map(|r| (r, Duration::ZERO, ReduceOp::Sum, 4))
        .collect();
    for (r, res) in per_rank_calls(&mut ranks, &callers).iter().enumerate() {
        let late = matches!(res, Err(e @ Error::Timeout { .. }) if e.to_string().contains("rank 2 came too late"));
        ensure!(
            matches!(res, Err(Error::Poisoned { .. })) || (r == 2 && late),
            "rank {r} after the timeout: {res:?}"
        );
    }
    pass()
}

/// Item 7: failures keep their type across the per-rank boundary.
fn failures_keep_their_type(b: BackendChoice) -> TestResult {
    // A rank thread that panics mid-call: that rank gets its own error,
    // every other rank `PeerFailed` naming it; `rank()` is the failed rank.
    let faults = FaultPlan(vec![FaultSpec {
        rank: 1,
        op: 2,
        call: Some(1),
        fault: Fault::Panic,
    }]);
    let mut cfg = EngineConfig::new(3, b).with_faults(faults.clone());
    cfg.timeout = Duration::from_secs(10);
    cfg.algo = crate::common::algo("ring");
    let mut ranks = Communicator::per_rank(cfg).ctx("engine")?;
    let t0 = Instant::now();
    let callers: Vec<_> = (0..3)
        .map(|r| (r, Duration::ZERO, ReduceOp::Sum, 1000))
        .collect();
    let got = per_rank_calls(&mut ranks, &callers);
    ensure!(
        t0.elapsed() < Duration::from_secs(5),
        "the failure took {:?} to reach every rank",
        t0.elapsed()
    );
    for (r, res) in got.iter().enumerate() {
        let e = match res {
            Err(e) => e,
            Ok(_) => {
                return Err(format!(
                    "rank {r}: the call with a panicking rank 1 succeeded"
                ))
            }
        };
        ensure!(
            e.rank() == Some(1),
            "LIBRARY BUG (issue 32 item 7): rank {r}'s error names rank {:?}, not the failed rank 1: {e}",
            e.rank()
        );
        if r != 1 {
            ensure!(
                matches!(e, Error::PeerFailed { rank: 1, .. }),
                "LIBRARY BUG (issue 32 item 7): rank {r} must get PeerFailed naming rank 1: {e:?}"
            );
        }
        ensure!(
            e.is_fatal(),
            "a rank that panicked inside a call is fatal (issue 41 item 4): {e}"
        );
    }
    // Every later call is refused on every rank, as is_fatal said.
    let callers: Vec<_> = (0..3)
        .map(|r| (r, Duration::ZERO, ReduceOp::Sum, 4))
        .collect();
    for (r, res) in per_rank_calls(&mut ranks, &callers).iter().enumerate() {
        ensure!(
            matches!(res, Err(Error::Poisoned { .. })),
            "rank {r} after the panic: {res:?}"
        );
    }
    // The same with every rank from one caller: the root cause names rank 1.
    let mut e = comm_with(b, 3, Duration::from_secs(10), faults)?;
    let mut bufs = vec![vec![1.0f32; 1000]; 3];
    let err = e
        .all_reduce_in_place(&mut bufs, ReduceOp::Sum)
        .err()
        .ok_or("the call with a panicking rank 1 succeeded")?;
    ensure!(
        err.rank() == Some(1) && err.root().rank() == Some(1),
        "the error of every rank from one caller must name rank 1: {err:?}"
    );
    // Poisoned stays Poisoned (fatal) on every rank.
    let mut ranks = ranks_of(b, 2, Duration::from_secs(10))?;
    ranks[1].abort_handle().abort();
    for h in &mut ranks {
        let mut o = vec![0; 4];
        let r = h.all_reduce(&[1; 4], &mut o, ReduceOp::Sum);
        ensure!(
            matches!(&r, Err(e @ Error::Poisoned { .. }) if e.is_fatal()),
            "LIBRARY BUG (issue 32 item 7): rank {} after an abort: {r:?}",
            h.rank()
        );
    }
    // A rank number out of range is said so, typed.
    let mut e = engine_with(b, 2, Duration::from_secs(10), FaultPlan::none())?;
    let buf = e.alloc(16).ctx("alloc")?;
    let r = e.write_buffer(&buf, 7, &[1.0; 16]);
    ensure!(
        matches!(
            r,
            Err(Error::RankOutOfRange {
                rank: 7,
                ranks: 2,
                ..
            })
        ),
        "LIBRARY BUG (issue 32 item 7): write_buffer to rank 7 of 2: {r:?}"
    );
    let r = e.read_buffer(&buf, 2);
    ensure!(
        matches!(
            r,
            Err(Error::RankOutOfRange {
                rank: 2,
                ranks: 2,
                ..
            })
        ),
        "read_buffer of rank 2 of 2: {r:?}"
    );
    pass()
}

pub fn register(h: &mut Harness) {
    watched(h, "waits::collectives_from_rayon_workers", 1, from_rayon);
    watched(
        h,
        "waits::per_rank_handles_on_a_small_rayon_pool",
        1,
        per_rank_handles_on_a_small_rayon_pool,
    );
    watched(
        h,
        "waits::collectives_from_threads_and_tokio",
        1,
        from_threads_and_tokio,
    );
    watched(
        h,
        "waits::abort_wakes_the_per_rank_rendezvous",
        1,
        abort_wakes_the_rendezvous,
    );
    h.add("waits::abort_wakes_the_comm_reservation[cpu]", || {
        watchdog(
            "waits::abort_wakes_the_comm_reservation",
            abort_wakes_the_reservation,
        )
    });
    watched(
        h,
        "waits::mismatch_is_told_to_every_rank",
        1,
        mismatch_is_told_to_every_rank,
    );
    watched(h, "waits::slow_calls_agree", 1, slow_calls_agree);
    watched(
        h,
        "waits::failures_keep_their_type",
        1,
        failures_keep_their_type,
    );
}
