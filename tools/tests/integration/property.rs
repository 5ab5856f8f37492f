//! Issue 41's property, checked on random scripts in every mode: random
//! per-rank delays around the timeout, panics, dropped handles, aborts and
//! bad arguments, across thousands of calls. Every call is either right on
//! every rank (bitwise, exact-valued inputs) or an error on every rank;
//! the errors of one call agree (one kind, or the failed rank's own error
//! and `PeerFailed`/`PeerArgument` naming it on the others); and
//! `Error::is_fatal` says exactly whether the rank's next call is refused
//! (`Error::Poisoned`).
//!
//! The scripts are drawn from a fixed seed (`RR_PROPERTY_SEED` picks
//! another, `RR_PROPERTY_SCRIPTS` how many per mode), so a failure
//! reproduces.

use crate::common::{Ctx, Shape};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::fault::{Fault, FaultPlan, FaultSpec};
use ringreduce::{BackendChoice, Communicator, EngineConfig, Error, ErrorKind, JobSpec, ReduceOp};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Every wait's limit in the scripts (delays are drawn around it); the
/// ranks of a job meet within it too, so the process mode's is longer.
fn timeout_of(mode: &str) -> Duration {
    match mode {
        "process" => Duration::from_millis(800),
        _ => Duration::from_millis(300),
    }
}

/// splitmix64: small, seeded, good enough for drawing scripts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p` per mille.
    fn per_mille(&mut self, p: u64) -> bool {
        self.below(1000) < p
    }
}

/// What happens to one rank at the start of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    None,
    /// The rank comes this late, in thousandths of the timeout.
    Delay(u64),
    /// The rank's thread panics (its handle unwinds).
    Panic,
    /// The rank drops its handle and stops.
    Drop,
    /// The rank raises the abort handle, then calls.
    Abort,
    /// The rank calls with an output of the wrong length.
    BadLength,
}

#[derive(Debug, Clone, Copy)]
enum Coll {
    AllReduce,
    ReduceScatter,
    AllGather,
    Broadcast(usize),
}

#[derive(Debug, Clone)]
struct CallSpec {
    coll: Coll,
    count: usize,
    in_place: bool,
    events: Vec<Event>,
}

fn draw_script(rng: &mut Rng, n: usize, calls: usize) -> Vec<CallSpec> {
    (0..calls)
        .map(|_| {
            let coll = match rng.below(4) {
                0 => Coll::ReduceScatter,
                1 => Coll::AllGather,
                2 => Coll::Broadcast(rng.below(n as u64) as usize),
                _ => Coll::AllReduce,
            };
            let events = (0..n)
                .map(|_| {
                    let x = rng.below(1000);
                    match x {
                        0..=14 => Event::Delay([130, 670, 930, 1100, 1500][rng.below(5) as usize]),
                        15..=18 => Event::Panic,
                        19..=22 => Event::Drop,
                        23..=26 => Event::Abort,
                        27..=36 => Event::BadLength,
                        _ => Event::None,
                    }
                })
                .collect();
            CallSpec {
                coll,
                count: 1 + rng.below(40) as usize,
                in_place: rng.per_mille(400),
                events,
            }
        })
        .collect()
}

/// Rank `r`'s exact-valued input of call `k` (small integers: every sum
/// is exact in f32).
fn input(r: usize, k: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((r + 1) * (k % 5 + 1) + i % 7) as f32)
        .collect()
}

/// The lengths of a rank's (send, recv) for a call, and the expected
/// output of rank `r`.
fn shape(spec: &CallSpec, n: usize) -> (usize, usize) {
    let c = spec.count;
    match spec.coll {
        Coll::AllReduce | Coll::Broadcast(_) => (c, c),
        Coll::ReduceScatter => (c * n, c),
        Coll::AllGather => (c, c * n),
    }
}

fn expected(spec: &CallSpec, k: usize, n: usize, r: usize) -> Vec<f32> {
    let c = spec.count;
    let (send_len, _) = shape(spec, n);
    let sum = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|i| (0..n).map(|q| input(q, k, len)[i]).sum())
            .collect()
    };
    match spec.coll {
        Coll::AllReduce => sum(c),
        Coll::Broadcast(root) => input(root, k, c),
        Coll::ReduceScatter => sum(send_len)[r * c..(r + 1) * c].to_vec(),
        Coll::AllGather => (0..n).flat_map(|q| input(q, k, c)).collect(),
    }
}

/// One call on `comm` for its local ranks; `bad`: the local rank whose
/// output has the wrong length. The outputs, in local-rank order.
fn one_call<S: Shape>(
    comm: &mut Communicator<S>,
    spec: &CallSpec,
    k: usize,
    bad: Option<usize>,
) -> Result<Vec<Vec<f32>>, Error> {
    let n = comm.size();
    let local: Vec<usize> = comm.local_ranks().collect();
    let (send_len, recv_len) = shape(spec, n);
    let sends: Vec<Vec<f32>> = local.iter().map(|&r| input(r, k, send_len)).collect();
    let mut recvs: Vec<Vec<f32>> = local
        .iter()
        .map(|&r| {
            let len = recv_len + usize::from(bad == Some(r));
            if spec.in_place {
                // NCCL's in-place conventions: the input where the output
                // is, or the output's own slice of it.
                match spec.coll {
                    Coll::AllReduce | Coll::Broadcast(_) => {
                        let mut v = input(r, k, len);
                        v.resize(len, 0.0);
                        v
                    }
                    Coll::ReduceScatter => {
                        let mut v = input(r, k, send_len);
                        v.resize(send_len + usize::from(bad == Some(r)), 0.0);
                        v
                    }
                    Coll::AllGather => {
                        let mut v = vec![-1.0; len];
                        let c = spec.count;
                        v[r * c..(r + 1) * c].copy_from_slice(&input(r, k, c));
                        v
                    }
                }
            } else {
                vec![-1.0; len]
            }
        })
        .collect();
    let (send, recv) = (S::send(&sends), S::recv(&mut recvs));
    match (spec.coll, spec.in_place) {
        (Coll::AllReduce, false) => comm.all_reduce(send, recv, ReduceOp::Sum),
        (Coll::AllReduce, true) => comm.all_reduce_in_place(recv, ReduceOp::Sum),
        (Coll::ReduceScatter, false) => comm.reduce_scatter(send, recv, ReduceOp::Sum),
        (Coll::ReduceScatter, true) => comm.reduce_scatter_in_place(recv, ReduceOp::Sum),
        (Coll::AllGather, false) => comm.all_gather(send, recv),
        (Coll::AllGather, true) => comm.all_gather_in_place(recv),
        (Coll::Broadcast(root), false) => comm.broadcast(send, recv, root),
        (Coll::Broadcast(root), true) => comm.broadcast_in_place(recv, root),
    }?;
    // In-place reduce-scatter: the rank's own slice holds the result.
    if let (Coll::ReduceScatter, true) = (spec.coll, spec.in_place) {
        let c = spec.count;
        return Ok(local
            .iter()
            .zip(recvs)
            .map(|(&r, v)| v[r * c..(r + 1) * c].to_vec())
            .collect());
    }
    Ok(recvs)
}

/// What one rank saw of each call: `None` once it stopped (dropped its
/// handle or panicked).
type Walk = Vec<Option<Result<Vec<f32>, Error>>>;

/// What each rank saw of each call.
type Outcomes = Vec<Walk>;

/// One rank's walk through the script on its own handle (per-rank and
/// process modes).
fn walk(r: usize, mut comm: Communicator, script: &[CallSpec], timeout: Duration) -> Walk {
    let mut out = Vec::new();
    for (k, spec) in script.iter().enumerate() {
        match spec.events[r] {
            Event::Delay(m) => std::thread::sleep(timeout * m as u32 / 1000),
            Event::Panic => {
                // The handle unwinds with the thread; the caller sees the
                // panic as the end of this rank's outcomes.
                // (resume_unwind: no panic message, the same unwinding.)
                let _keep = &comm;
                std::panic::resume_unwind(Box::new(PropertyPanic(out)));
            }
            Event::Drop => {
                drop(comm);
                return out;
            }
            Event::Abort => comm.abort_handle().abort(),
            _ => {}
        }
        let bad = (spec.events[r] == Event::BadLength).then_some(r);
        out.push(Some(
            one_call(&mut comm, spec, k, bad).map(|mut v| v.remove(0)),
        ));
    }
    out
}

/// The outcomes a panicking rank saw before it panicked.
struct PropertyPanic(Walk);

fn join_walks(handles: Vec<std::thread::ScopedJoinHandle<'_, Walk>>) -> Outcomes {
    handles
        .into_iter()
        .map(|h| match h.join() {
            Ok(v) => v,
            Err(p) => match p.downcast::<PropertyPanic>() {
                Ok(pp) => pp.0,
                Err(_) => vec![Some(Err(Error::internal(
                    "a rank thread panicked unexpectedly",
                )))],
            },
        })
        .collect()
}

fn run_per_rank(n: usize, script: &[CallSpec], timeout: Duration) -> Result<Outcomes, String> {
    let mut cfg = EngineConfig::cpu(n);
    cfg.timeout = timeout;
    let handles = Communicator::per_rank(cfg).ctx("per-rank handles")?;
    Ok(std::thread::scope(|s| {
        let t: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(r, c)| s.spawn(move || walk(r, c, script, timeout)))
            .collect();
        join_walks(t)
    }))
}

fn run_process(
    n: usize,
    script: &[CallSpec],
    seed: u64,
    timeout: Duration,
) -> Result<Outcomes, String> {
    let dir = std::env::temp_dir().join(format!("rr-prop-{}-{seed}", std::process::id()));
    let out = std::thread::scope(|s| {
        let t: Vec<_> = (0..n)
            .map(|r| {
                let dir = dir.clone();
                s.spawn(move || {
                    let mut cfg = EngineConfig::job(JobSpec::new(r, n, &dir), BackendChoice::Cpu);
                    cfg.timeout = timeout;
                    match Communicator::join(cfg) {
                        Ok(c) => walk(r, c, script, timeout),
                        Err(e) => vec![Some(Err(e))],
                    }
                })
            })
            .collect();
        join_walks(t)
    });
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// Every rank from one caller: the events become injected faults (a delay
/// or a panic of rank r's thread in call k), an abort from a timer thread,
/// and a bad output length; a dropped handle is the whole communicator.
fn run_all_ranks(n: usize, script: &[CallSpec], timeout: Duration) -> Result<Outcomes, String> {
    let mut faults = Vec::new();
    for (k, spec) in script.iter().enumerate() {
        for (r, e) in spec.events.iter().enumerate() {
            let fault = match *e {
                Event::Delay(m) => Fault::Delay {
                    ms: (timeout.as_millis() as u64 * m / 1000) as u32,
                },
                Event::Panic => Fault::Panic,
                Event::Drop => Fault::Fail,
                _ => continue,
            };
            faults.push(FaultSpec {
                rank: r,
                op: 0,
                call: Some(k as u64 + 1),
                fault,
            });
        }
    }
    let mut cfg = EngineConfig::cpu(n).with_faults(FaultPlan(faults));
    cfg.timeout = timeout;
    let mut comm = Communicator::new(cfg).ctx("all-ranks communicator")?;
    let mut out: Outcomes = vec![Vec::new(); n];
    for (k, spec) in script.iter().enumerate() {
        let bad = spec.events.iter().position(|e| *e == Event::BadLength);
        let abort = spec.events.contains(&Event::Abort).then(|| {
            let h = comm.abort_handle();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                h.abort();
            })
        });
        let res = one_call(&mut comm, spec, k, bad);
        if let Some(t) = abort {
            let _ = t.join();
        }
        for r in 0..n {
            out[r].push(Some(match &res {
                Ok(v) => Ok(v[r].clone()),
                Err(e) => Err(e.clone()),
            }));
        }
    }
    Ok(out)
}

/// Counts of what a mode's scripts did.
#[derive(Default, Debug)]
struct Tally {
    calls: usize,
    right: usize,
    errors: BTreeMap<String, usize>,
}

/// Whether the errors of one call agree: one kind on every rank, or the
/// failed rank's own error with every other rank naming it.
fn agree(errors: &[(usize, &Error)]) -> Result<(), String> {
    let kinds: Vec<ErrorKind> = errors.iter().map(|(_, e)| e.kind()).collect();
    if kinds.iter().all(|k| *k == kinds[0]) {
        // Every PeerFailed / PeerArgument names the same rank.
        let named: Vec<Option<usize>> = errors
            .iter()
            .filter(|(_, e)| matches!(e.kind(), ErrorKind::PeerFailed | ErrorKind::PeerArgument))
            .map(|(_, e)| e.rank())
            .collect();
        ensure!(
            named.windows(2).all(|w| w[0] == w[1]),
            "the ranks name different failed ranks: {errors:?}"
        );
        return Ok(());
    }
    // The culprit's own error, the others naming it.
    let others: Vec<&(usize, &Error)> = errors
        .iter()
        .filter(|(_, e)| matches!(e.kind(), ErrorKind::PeerFailed | ErrorKind::PeerArgument))
        .collect();
    let own: Vec<&(usize, &Error)> = errors
        .iter()
        .filter(|(_, e)| !matches!(e.kind(), ErrorKind::PeerFailed | ErrorKind::PeerArgument))
        .collect();
    ensure!(
        own.len() == 1,
        "the ranks' errors of one call disagree: {errors:?}"
    );
    let culprit = own[0].0;
    ensure!(
        others.iter().all(|(_, e)| e.rank() == Some(culprit)),
        "the other ranks must name rank {culprit}, whose own error is {:?}: {errors:?}",
        own[0].1
    );
    ensure!(
        others
            .iter()
            .all(|(_, e)| e.is_fatal() == own[0].1.is_fatal()),
        "the ranks' errors of one call differ in fatality: {errors:?}"
    );
    Ok(())
}

/// Check one script's outcomes.
fn check(script: &[CallSpec], out: &Outcomes, tally: &mut Tally) -> Result<(), String> {
    let n = out.len();
    for (k, spec) in script.iter().enumerate() {
        let got: Vec<(usize, &Result<Vec<f32>, Error>)> = (0..n)
            .filter_map(|r| out[r].get(k).and_then(Option::as_ref).map(|x| (r, x)))
            .collect();
        if got.is_empty() {
            continue;
        }
        tally.calls += got.len();
        let ok = got.iter().filter(|(_, x)| x.is_ok()).count();
        let errors: Vec<(usize, &Error)> = got
            .iter()
            .filter_map(|(r, x)| x.as_ref().err().map(|e| (*r, e)))
            .collect();
        ensure!(
            ok == 0 || errors.is_empty(),
            "call {k} ({spec:?}) was right on some ranks and failed on others: {got:?}"
        );
        for (r, x) in &got {
            if let Ok(v) = x {
                let want = expected(spec, k, n, *r);
                ensure!(
                    *v == want,
                    "WRONG RESULT: rank {r}, call {k} ({spec:?}): got {v:?}, want {want:?}"
                );
                tally.right += 1;
            }
        }
        if !errors.is_empty() {
            agree(&errors).map_err(|e| format!("call {k} ({spec:?}): {e}"))?;
        }
        for (r, e) in &errors {
            *tally.errors.entry(format!("{:?}", e.kind())).or_default() += 1;
            // is_fatal says exactly whether this rank's next call is
            // refused (unless an abort was raised around this call or the
            // next: every rank from one caller is aborted by a timer
            // thread, which may fire after its call returned).
            let aborted_next = script[k..]
                .iter()
                .take(2)
                .any(|s| s.events.contains(&Event::Abort));
            if let (Some(Some(next)), false) = (out[*r].get(k + 1), aborted_next) {
                let poisoned = matches!(next, Err(Error::Poisoned { .. }));
                ensure!(
                    e.is_fatal() == poisoned,
                    "rank {r}, call {k}: is_fatal() is {} for {e:?}, but the next call gave {next:?}",
                    e.is_fatal()
                );
            }
        }
    }
    Ok(())
}

fn seed() -> u64 {
    std::env::var("RR_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(41)
}

fn scripts() -> usize {
    std::env::var("RR_PROPERTY_SCRIPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn property(mode: &str) -> TestResult {
    let mut rng = Rng(seed() ^ mode.len() as u64);
    let mut tally = Tally::default();
    let t0 = Instant::now();
    for i in 0..scripts() {
        let n = 2 + rng.below(3) as usize;
        let calls = 8 + rng.below(24) as usize;
        let script = draw_script(&mut rng, n, calls);
        let timeout = timeout_of(mode);
        let out = match mode {
            "all-ranks" => run_all_ranks(n, &script, timeout)?,
            "per-rank" => run_per_rank(n, &script, timeout)?,
            _ => run_process(n, &script, rng.next(), timeout)?,
        };
        check(&script, &out, &mut tally)
            .map_err(|e| format!("{mode}, script {i} of {n} ranks (seed {}): {e}", seed()))?;
    }
    println!(
        "    {mode}: {} rank-calls in {:.1} s: {} right, errors {:?}; 0 wrong",
        tally.calls,
        t0.elapsed().as_secs_f64(),
        tally.right,
        tally.errors
    );
    ensure!(
        tally.right > 0,
        "{mode}: no call succeeded: the scripts test nothing"
    );
    crate::common::pass()
}

pub fn register(h: &mut Harness) {
    for mode in ["all-ranks", "per-rank", "process"] {
        h.add(
            format!("property::never_a_wrong_answer[{mode}]"),
            move || property(mode),
        );
    }
}
