//! Injected faults on every backend: a rank that panics, stalls or fails a
//! driver call in the middle of a collective, a failed allocation, an abort
//! from another thread. Every one must end the call with an error naming the
//! rank and the step, within the engine's timeout (never a hang or a process
//! abort), leave the send buffers as they were, and leave the engine usable
//! (or say that it must be rebuilt).

use crate::common::{algo, checked, contender, engine, engine_with, pass, rank_counts, Ctx};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::backend::op_desc;
use ringreduce::engine::TypedShape;
use ringreduce::fault::{Fault, FaultPlan, FaultSpec};
use ringreduce::plan::{OpKind, Plan, Shape};
use ringreduce::{AlgoChoice, BackendChoice, Collective, Engine, Error, ReduceOp};
use ringreduce_tools::bench;
use ringreduce_tools::verify::{self, Inputs};
use std::time::{Duration, Instant};

/// The engines of these tests give up on any wait after this long.
const TIMEOUT: Duration = Duration::from_secs(2);

/// How much longer than the timeout a failed call may take to return
/// (every rank gives up, the backend drains).
fn margin(b: BackendChoice) -> Duration {
    match b {
        BackendChoice::Cuda => Duration::from_secs(10),
        _ => Duration::from_secs(3),
    }
}

/// Ranks of the fault tests: 3 on the CPU; the GPU count (at least 2) on
/// CUDA.
fn fault_ranks(b: BackendChoice) -> usize {
    match b {
        BackendChoice::Cuda => rank_counts(b)[0].max(2),
        _ => 3,
    }
}

/// A fault on rank 1 before its op `op`, in call 1 only.
fn on_rank1(fault: Fault, op: usize) -> FaultPlan {
    FaultPlan(vec![FaultSpec {
        rank: 1,
        op,
        call: Some(1),
        fault,
    }])
}

/// The description of rank `r`'s op `i` in the first call of `path` at
/// `shape`, as errors name it.
fn step_of(path: &str, shape: &Shape, r: usize, i: usize) -> Result<String, String> {
    let plan = ringreduce::algo::plan_of(&algo(path), shape).ctx("plan_of")?;
    Ok(op_desc(&plan, r, i))
}

/// A call that was meant to fail.
struct Faulty {
    result: Result<(), Error>,
    took: Duration,
    inputs: Vec<Vec<f32>>,
    shape: TypedShape<f32>,
}

/// Load exact inputs, poison, run one out-of-place all-reduce of `path`;
/// returns the call's outcome, how long it took, the inputs and the shape.
fn faulty_call(e: &mut Engine, path: &str, count: usize) -> Result<Faulty, String> {
    let n = e.ranks();
    let op = ReduceOp::Sum;
    let inputs = verify::make_inputs::<f32>(Inputs::Exact, op, n, count, 7).expect("inputs");
    let expect = bench::expected(Collective::AllReduce, &inputs, op, Inputs::Exact);
    let shape = e.shape(Collective::AllReduce, count, false);
    let t0 = Instant::now();
    let r = bench::checked_call(
        e,
        &contender(&algo(path)),
        Collective::AllReduce,
        false,
        op,
        &inputs,
        &expect,
    );
    let took = t0.elapsed();
    Ok(Faulty {
        result: r.map(|_| ()),
        took,
        inputs,
        shape,
    })
}

/// The send buffers read back equal the inputs.
fn sends_unchanged(
    e: &mut Engine,
    shape: &TypedShape<f32>,
    inputs: &[Vec<f32>],
) -> Result<(), String> {
    let send = e
        .read_input(shape)
        .ctx("reading the send buffers back after the fault")?;
    for (r, (s, i)) in send.iter().zip(inputs).enumerate() {
        let changed = verify::changed(s, i);
        ensure!(
            changed == 0,
            "rank {r}'s send buffer changed in {changed} elements"
        );
    }
    Ok(())
}

/// One fault on rank 1 at op 2 of a `ring` all-reduce, call 1.
fn mid_collective(b: BackendChoice, fault: Fault) -> TestResult {
    mid_collective_of(b, fault, "ring", |_| 2)
}

/// One fault on rank 1 at op `op(plan)` of a `path` all-reduce, call 1.
fn mid_collective_of(
    b: BackendChoice,
    fault: Fault,
    path: &str,
    op: impl Fn(&Plan) -> usize,
) -> TestResult {
    let n = fault_ranks(b);
    let count = 1000;
    let op = {
        let shape = Shape::all_reduce(n, count, 4, false);
        op(&ringreduce::algo::plan_of(&algo(path), &shape).ctx("plan_of")?)
    };
    let mut e = engine_with(b, n, TIMEOUT, on_rank1(fault, op))?;
    let step = step_of(
        path,
        &e.shape::<f32>(Collective::AllReduce, count, false),
        1,
        op,
    )?;
    ensure!(
        step.contains(path),
        "the op description must name the path: {step}"
    );
    let Faulty {
        result: r,
        took,
        inputs,
        shape,
    } = faulty_call(&mut e, path, count)?;
    let err = match r {
        Ok(()) => return Err(format!("{fault:?} on rank 1 at {step}: the call succeeded")),
        Err(err) => err,
    };
    let text = err.to_string();
    ensure!(
        text.contains("rank 1") && text.contains(&step),
        "{fault:?}: the error must name rank 1 and the step ({step}): {text}"
    );
    ensure!(
        took <= TIMEOUT + margin(b),
        "{fault:?}: the call took {took:?} to fail (timeout {TIMEOUT:?})"
    );
    if fault != Fault::Stall {
        // A failed rank releases the others at once: no waiting for the timeout.
        ensure!(
            took < TIMEOUT,
            "{fault:?}: the failure took {took:?}; a failed rank must release the other ranks of the call at once (sync.rs){}",
            if b == BackendChoice::Cuda && fault == Fault::Panic {
                " -- LIBRARY BUG (CUDA): a rank thread that panics in Rank::issue unwinds past the SignalBoard::fail of CudaBackend::launch, so its peers wait for the timeout"
            } else {
                ""
            }
        );
    }
    // One error, the stalled, failed or panicked rank's own (issue 41
    // item 5: the cause, never the ranks that noticed it, never a list).
    // (A rank thread's failure on the CPU is a Worker error; on CUDA an
    // injected failure is the driver call's Cuda error.)
    ensure!(
        matches!(&err, Error::Worker { rank: 1, .. })
            || (b == BackendChoice::Cuda && matches!(&err, Error::Cuda { rank: 1, .. })),
        "{fault:?}: the call's error must be rank 1's own: {err:?}"
    );
    ensure!(
        err.is_fatal(),
        "{fault:?}: a failure after data moved is fatal (issue 41 item 4): {err}"
    );
    match sends_unchanged(&mut e, &shape, &inputs) {
        Ok(()) => {}
        // An engine that must be rebuilt cannot even be read back (CUDA);
        // the CPU reads host memory directly.
        Err(t) if t.contains("must be rebuilt") => {}
        Err(t) => return Err(t),
    }
    // After the fault every call is refused (Error::is_fatal said so), in
    // and out of place.
    for in_place in [false, true] {
        let next = checked::<f32>(
            &mut e,
            &algo(path),
            Collective::AllReduce,
            count,
            in_place,
            ReduceOp::Sum,
            Inputs::Exact,
            8,
        );
        ensure!(
            next.as_ref().is_err_and(|t| t.contains("must be rebuilt")),
            "the call after {fault:?} (in place: {in_place}) must be refused: {next:?}"
        );
    }
    // A new engine in the same process works.
    let mut fresh = engine(b, n)?;
    checked::<f32>(
        &mut fresh,
        &AlgoChoice::Auto,
        Collective::AllReduce,
        count,
        false,
        ReduceOp::Sum,
        Inputs::Exact,
        10,
    )
    .ctx("a new engine after the fault")?;
    pass()
}

pub fn register(h: &mut Harness) {
    test_backend!(h, "faults::panic_mid_collective", 1, |b: BackendChoice| {
        mid_collective(b, Fault::Panic)
    });
    test_backend!(h, "faults::stall_mid_collective", 1, |b: BackendChoice| {
        mid_collective(b, Fault::Stall)
    });
    test_backend!(h, "faults::fail_mid_collective", 1, |b: BackendChoice| {
        mid_collective(b, Fault::Fail)
    });
    // The LL ring's kernel is one op (its steps wait on flags inside it):
    // a rank failing there releases the others at once (on a GPU their
    // kernels see the abort word) and is named.
    let kernel = |p: &Plan| {
        p.ops[1]
            .iter()
            .position(|o| matches!(o.kind, OpKind::Kernel(_)))
            .unwrap_or(0)
    };
    test_backend!(h, "faults::fail_in_an_ll_ring_kernel", 1, move |b| {
        mid_collective_of(b, Fault::Fail, "ring:ll", kernel)
    });
    test_backend!(h, "faults::stall_in_an_ll_ring_kernel", 1, move |b| {
        mid_collective_of(b, Fault::Stall, "ring:ll", kernel)
    });
    // The two-rank exchange kernel the same way (CUDA only: the CPU
    // variants of these tests run three ranks).
    crate::common::cuda_only(h, "faults::fail_in_an_exchange_kernel", 1, move || {
        mid_collective_of(BackendChoice::Cuda, Fault::Fail, "oneshot:flag", kernel)
    });
    // The LL one-shot (two ranks, the LL ring's kernel as one step).
    crate::common::cuda_only(h, "faults::fail_in_an_ll_one_shot_kernel", 1, move || {
        mid_collective_of(BackendChoice::Cuda, Fault::Fail, "oneshot:ll", kernel)
    });
    crate::common::cuda_only(h, "faults::stall_in_an_ll_one_shot_kernel", 1, move || {
        mid_collective_of(BackendChoice::Cuda, Fault::Stall, "oneshot:ll", kernel)
    });

    test_backend!(
        h,
        "faults::a_rank_timeout_is_not_a_stuck_thread",
        1,
        |b: BackendChoice| -> TestResult {
            // LIBRARY BUG (see the report): a stalled rank makes every rank
            // of the call return Error::Timeout from its own bounded wait
            // (sync::SignalBoard::wait / stall), all within the timeout. The
            // rank pool (pool.rs, RankThreads::run_all and ::run) marks itself
            // broken on ANY Err(Error::Timeout) reply, as if the thread had
            // not answered within the pool's deadline, so every later call
            // fails with "the engine must be rebuilt: rank N's thread stopped
            // answering", although every thread answered.
            let n = fault_ranks(b);
            let mut e = engine_with(b, n, TIMEOUT, on_rank1(Fault::Stall, 2))?;
            let Faulty {
                result: r, took, ..
            } = faulty_call(&mut e, "ring", 1000)?;
            ensure!(r.is_err(), "the stalled call succeeded");
            ensure!(
                took <= TIMEOUT + margin(b),
                "every rank answered late: {took:?}"
            );
            let next = checked::<f32>(
                &mut e,
                &algo("ring"),
                Collective::AllReduce,
                1000,
                false,
                ReduceOp::Sum,
                Inputs::Exact,
                2,
            );
            if let Err(text) = next {
                ensure!(
                    !text.contains("stopped answering"),
                    "LIBRARY BUG: every rank answered within {took:?}, yet the engine claims a thread stopped answering: {text}"
                );
            }
            pass()
        }
    );

    test_backend!(
        h,
        "faults::call_1_only_means_the_first_engine_call",
        1,
        |b: BackendChoice| -> TestResult {
            // `call: Some(k)` is the engine's call number k, whatever the
            // path and size of the calls before it. A failure poisons the
            // engine (issue 41), so the fault that fires only once is a
            // delay: calls 2.. must not be slowed again; and a failure
            // injected for call 4 fires in the 4th call, after three of
            // other paths and sizes.
            let n = fault_ranks(b);
            let delay = FaultPlan(vec![FaultSpec {
                rank: 1,
                op: 0,
                call: Some(1),
                fault: Fault::Delay { ms: 400 },
            }]);
            let mut e = engine_with(b, n, TIMEOUT, delay)?;
            let calls = [
                ("ring", 10),
                ("ring:pipe5", 100_000),
                ("ps", 1000),
                ("oneshot", 1000),
                ("ring:pipe2", 300_000),
                ("ring", 10),
            ];
            for (i, (path, count)) in calls.into_iter().enumerate() {
                let t0 = Instant::now();
                checked::<f32>(
                    &mut e,
                    &algo(path),
                    Collective::AllReduce,
                    count,
                    false,
                    ReduceOp::Sum,
                    Inputs::Exact,
                    i as u64,
                )
                .ctx(format!("engine call {}", i + 1))?;
                let took = t0.elapsed();
                ensure!(
                    (took >= Duration::from_millis(400)) == (i == 0),
                    "LIBRARY BUG: a delay injected for call 1 took effect in engine call {} ({took:?})",
                    i + 1
                );
            }
            let fail = FaultPlan(vec![FaultSpec {
                rank: 1,
                op: 0,
                call: Some(4),
                fault: Fault::Fail,
            }]);
            let mut e = engine_with(b, n, TIMEOUT, fail)?;
            for (i, (path, count)) in calls.into_iter().take(4).enumerate() {
                let r = checked::<f32>(
                    &mut e,
                    &algo(path),
                    Collective::AllReduce,
                    count,
                    false,
                    ReduceOp::Sum,
                    Inputs::Exact,
                    i as u64,
                );
                ensure!(
                    r.is_err() == (i == 3),
                    "a failure injected for call 4, engine call {}: {r:?}",
                    i + 1
                );
            }
            pass()
        }
    );

    test_backend!(
        h,
        "faults::alloc_fail_names_the_rank",
        1,
        |b: BackendChoice| -> TestResult {
            let n = fault_ranks(b);
            let plan = FaultPlan(vec![FaultSpec {
                rank: 1,
                op: 0,
                call: None,
                fault: Fault::AllocFail,
            }]);
            let mut e = engine_with(b, n, TIMEOUT, plan)?;
            let r = checked::<f32>(
                &mut e,
                &AlgoChoice::Auto,
                Collective::AllReduce,
                1000,
                false,
                ReduceOp::Sum,
                Inputs::Exact,
                1,
            );
            match r {
                Ok(()) => return Err("the call succeeded although rank 1 cannot allocate".into()),
                Err(text) => ensure!(
                    text.contains("rank 1"),
                    "the allocation error must name rank 1: {text}"
                ),
            }
            match e.alloc::<f32>(4096) {
                Ok(_) => return Err("alloc succeeded although rank 1 cannot allocate".into()),
                Err(err) => {
                    ensure!(
                        err.rank() == Some(1) || err.to_string().contains("rank 1"),
                        "alloc: the error must name rank 1: {err}"
                    );
                }
            }
            let mut fresh = engine(b, n)?;
            checked::<f32>(
                &mut fresh,
                &AlgoChoice::Auto,
                Collective::AllReduce,
                1000,
                false,
                ReduceOp::Sum,
                Inputs::Exact,
                2,
            )
            .ctx("a new engine after the allocation failure")?;
            pass()
        }
    );

    test_backend!(
        h,
        "faults::abort_from_another_thread",
        1,
        |b: BackendChoice| -> TestResult {
            // A long timeout, a stalled rank, an abort 300 ms in: the call
            // ends at once with an Aborted error, and the engine is done.
            let n = fault_ranks(b);
            let long = Duration::from_secs(30);
            let mut e = engine_with(b, n, long, on_rank1(Fault::Stall, 2))?;
            let handle = e.abort_handle();
            ensure!(!handle.is_aborted(), "aborted before the abort");
            let aborter = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                handle.abort();
            });
            let Faulty {
                result: r, took, ..
            } = faulty_call(&mut e, "ring", 1000)?;
            aborter
                .join()
                .map_err(|_| "the aborting thread panicked".to_string())?;
            let err = match r {
                Ok(()) => return Err("the stalled call succeeded".into()),
                Err(err) => err,
            };
            let aborted = |x: &Error| matches!(x, Error::Aborted { .. });
            ensure!(
                aborted(&err) || matches!(&err, Error::Ranks(v) if v.iter().any(aborted)),
                "expected an Aborted error, got {err:?}"
            );
            ensure!(err.to_string().contains("aborted"), "{err}");
            ensure!(
                took < Duration::from_secs(10),
                "the aborted call took {took:?} (timeout {long:?})"
            );
            ensure!(
                e.abort_handle().is_aborted(),
                "the handle does not report the abort"
            );
            // Every later call says the engine must be rebuilt.
            let r = checked::<f32>(
                &mut e,
                &AlgoChoice::Auto,
                Collective::AllReduce,
                10,
                false,
                ReduceOp::Sum,
                Inputs::Exact,
                1,
            );
            ensure!(
                r.as_ref().is_err_and(|t| t.contains("must be rebuilt")),
                "a call after the abort: {r:?}"
            );
            let r = e.load(Collective::AllReduce, &vec![vec![1.0f32; 4]; n], true);
            ensure!(
                matches!(r, Err(Error::Poisoned { .. })),
                "a load after the abort: {r:?}"
            );
            ensure!(r.is_err_and(|x| x.is_fatal()), "Poisoned must be fatal");
            // A new engine works.
            let mut fresh = engine(b, n)?;
            checked::<f32>(
                &mut fresh,
                &AlgoChoice::Auto,
                Collective::AllReduce,
                1000,
                false,
                ReduceOp::Sum,
                Inputs::Exact,
                2,
            )
            .ctx("a new engine after the abort")?;
            pass()
        }
    );

    crate::common::cuda_only(
        h,
        "faults::flag_exchange_gives_up_after_the_deadline",
        1,
        || {
            for path in ["oneshot:flag", "ring:flag"] {
                // Rank 1 stalls before issuing its first exchange kernel (the flag
                // one-shot's exchange, the flag ring's first hand-shake): rank 0's
                // kernel, spinning on rank 1's flag in GPU memory, must give up
                // after the deadline (not `trap`, which would kill the context), the
                // error must name the exchange, the engine must say it is to be
                // rebuilt, and a new one must work.
                let b = BackendChoice::Cuda;
                let count = 4096;
                let shape = Shape::all_reduce(2, count, 4, false);
                let plan = ringreduce::algo::plan_of(&algo(path), &shape).ctx("plan_of")?;
                let op = plan.ops[1]
                    .iter()
                    .position(|o| matches!(o.kind, OpKind::Kernel(_)))
                    .ok_or("no exchange op on rank 1")?;
                let mut e = engine_with(b, 2, TIMEOUT, on_rank1(Fault::Stall, op))?;
                let Faulty {
                    result: r,
                    took,
                    inputs,
                    shape,
                } = faulty_call(&mut e, path, count)?;
                let err = match r {
                    Ok(()) => {
                        return Err(
                            "the call succeeded although rank 1 never launched its exchange".into(),
                        )
                    }
                    Err(err) => err,
                };
                let text = err.to_string();
                ensure!(
                    text.contains("exchange"),
                    "the error must name the exchange: {text}"
                );
                ensure!(
                    took <= TIMEOUT + margin(b),
                    "the call took {took:?} to fail"
                );
                let bug = |t: String| {
                    if t.contains("stopped answering") {
                        format!(
                            "LIBRARY BUG (see faults::a_rank_timeout_is_not_a_stuck_thread): {t}"
                        )
                    } else {
                        t
                    }
                };
                // Rank 0's kernel gave up on the GPU; the backend reports that when it
                // next drains the ranks (once), naming the exchange, then resets the
                // flags so the ranks are in step again.
                let t0 = std::time::Instant::now();
                if let Err(err) = e.synchronize() {
                    let t = bug(err.to_string());
                    ensure!(
                        t.contains("exchange") && !t.contains("LIBRARY BUG"),
                        "the drain after the fault: {t}"
                    );
                }
                ensure!(
                    t0.elapsed() <= TIMEOUT + margin(b),
                    "draining after the fault took {:?}",
                    t0.elapsed()
                );
                sends_unchanged(&mut e, &shape, &inputs).map_err(bug)?;
                // A call that failed after data started to move is fatal:
                // this engine must be rebuilt. The GPU is not lost (the
                // kernel gave up instead of trapping, which would end the
                // process's context): a new engine in this process runs
                // every path.
                let again = checked::<f32>(
                    &mut e,
                    &algo(path),
                    Collective::AllReduce,
                    count,
                    false,
                    ReduceOp::Sum,
                    Inputs::Exact,
                    3,
                );
                ensure!(
                    again.as_ref().is_err_and(|t| t.contains("must be rebuilt")),
                    "a call on the engine after {path}'s exchange gave up: {again:?}"
                );
                let mut e = engine_with(b, 2, TIMEOUT, FaultPlan::none())?;
                for after in [
                    "oneshot:flag",
                    "oneshot:flag",
                    "ring",
                    "ring:flag",
                    "oneshot:fused",
                ] {
                    checked::<f32>(
                        &mut e,
                        &algo(after),
                        Collective::AllReduce,
                        count,
                        false,
                        ReduceOp::Sum,
                        Inputs::Exact,
                        3,
                    )
                    .map_err(bug)
                    .ctx(format!(
                        "{after} on a new engine after {path}'s exchange gave up"
                    ))?;
                }
                checked::<f32>(
                    &mut e,
                    &algo("oneshot:flag"),
                    Collective::AllReduce,
                    count,
                    true,
                    ReduceOp::Sum,
                    Inputs::Exact,
                    4,
                )
                .ctx(format!(
                    "oneshot:flag in place on a new engine after {path}'s exchange gave up"
                ))?;
            }
            pass()
        },
    );
}
