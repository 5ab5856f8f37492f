//! Capturing ringreduce's calls into CUDA graphs and replaying them (CUDA
//! only; the CPU backend has no graphs and says so).

use crate::common::{algo, checked, cuda_only, engine, pass, Ctx};
use crate::ensure;
use crate::harness::Harness;
use ringreduce::backend::Binding;
use ringreduce::engine::GRAPH_CALLS;
use ringreduce::{AlgoChoice, BackendChoice, Collective, Element, Engine, Error, ReduceOp};
use ringreduce_tools::verify::{self, Inputs};
use std::sync::Arc;

fn bind(e: &Engine) -> Arc<Vec<Binding>> {
    Arc::new(vec![Binding::DEFAULT; e.ranks()])
}

/// Capture `auto` for an all-reduce of `count` on 2 ranks, replay it
/// `replays` times with other calls on the same buffers in between, and check
/// every rank bitwise: out of place every call computes the same sum; in
/// place each call multiplies the buffers by 2. Returns the captured path.
fn replay_case(
    e: &mut Engine,
    count: usize,
    in_place: bool,
    replays: usize,
) -> Result<String, String> {
    replay_path(e, &AlgoChoice::Auto, count, in_place, replays)
}

/// [`replay_case`] for any path.
fn replay_path(
    e: &mut Engine,
    choice: &AlgoChoice,
    count: usize,
    in_place: bool,
    replays: usize,
) -> Result<String, String> {
    let n = e.ranks();
    let op = ReduceOp::Sum;
    let what = format!("{choice} on {n} ranks: count={count} in_place={in_place}");
    let inputs = verify::make_inputs::<f32>(Inputs::Exact, op, n, count, 4).expect("inputs");
    let reference = verify::reference(&inputs, op, Inputs::Exact);
    let shape = e
        .load(Collective::AllReduce, &inputs, in_place)
        .ctx(&what)?;
    // The other paths once first: growing the scratch for them later would
    // (rightly) make the graph stale.
    for p in ["ring", "oneshot"] {
        e.run(Some(&algo(p)), &shape, op)
            .ctx(format!("{what}: {p}"))?;
    }
    let shape = e
        .load(Collective::AllReduce, &inputs, in_place)
        .ctx(&what)?;
    e.poison(&shape).ctx("poison")?;
    let b = bind(e);
    let path = e
        .graph_capture(Some(choice), shape.shape(), f32::DTYPE, op, b)
        .ctx(format!("{what}: capture"))?;
    let mut calls = 0usize;
    for k in 0..replays {
        e.graph_replay().ctx(format!("{what}: replay {k}"))?;
        calls += GRAPH_CALLS;
        match k % 3 {
            0 => {
                e.launch(Some(&algo("ring")), &shape, op)
                    .ctx(format!("{what}: ring between replays"))?;
                calls += 1;
            }
            1 => {
                e.launch(Some(&algo("oneshot")), &shape, op)
                    .ctx(format!("{what}: oneshot between replays"))?;
                calls += 1;
            }
            _ => {}
        }
    }
    e.synchronize().ctx(format!("{what}: synchronize"))?;
    let expect = if in_place {
        reference.scaled((n as f64).powi(calls as i32 - 1))
    } else {
        reference
    };
    let out = e.read_output(&shape).ctx("read")?;
    let v = verify::check(&out, &expect);
    ensure!(
        v.passed(),
        "{what} {path}: {} wrong after {calls} calls, first {:?}",
        v.total_wrong(),
        v.first_wrong
    );
    if !in_place {
        ensure!(
            e.read_input(&shape).ctx("read input")? == inputs,
            "{what}: a send buffer changed"
        );
    }
    Ok(path)
}

pub fn register(h: &mut Harness) {
    h.add("graphs::cpu_has_no_graphs[cpu]", || {
        // The CPU backend has no graphs: Unsupported, never a panic, for
        // every path, and the engine still works after.
        let mut e = engine(BackendChoice::Cpu, 2)?;
        let shape = e
            .load(Collective::AllReduce, &vec![vec![1.0f32; 4096]; 2], false)
            .ctx("load")?;
        for p in [
            "auto",
            "oneshot:fused",
            "ring",
            "ring:pipe2",
            "oneshot",
            "ps",
        ] {
            let b = bind(&e);
            let r = e.graph_capture(Some(&algo(p)), shape.shape(), f32::DTYPE, ReduceOp::Sum, b);
            match r {
                Err(Error::Unsupported(what, "cpu")) => {
                    ensure!(
                        what.contains("CUDA graphs"),
                        "{p}: the refusal must say what is missing: {what}"
                    );
                }
                other => return Err(format!("CPU graph capture of {p}: {other:?}")),
            }
        }
        let r = e.graph_replay();
        ensure!(r.is_err(), "a replay without a capture succeeded");
        checked::<f32>(
            &mut e,
            &AlgoChoice::Auto,
            Collective::AllReduce,
            8,
            false,
            ReduceOp::Sum,
            Inputs::Exact,
            1,
        )?;
        pass()
    });

    cuda_only(h, "graphs::capture_and_replay_auto_2_ranks", 1, || {
        let mut e = engine(BackendChoice::Cuda, 2)?;
        for count in [1, 1000, 100_003, 1 << 20] {
            for in_place in [false, true] {
                let path = replay_case(&mut e, count, in_place, 5)?;
                let want = if in_place {
                    "oneshot:flag"
                } else {
                    "oneshot:fused"
                };
                ensure!(
                    path == want,
                    "count={count} in_place={in_place}: captured {path}, expected {want}"
                );
            }
        }
        pass()
    });

    cuda_only(
        h,
        "graphs::event_ordered_paths_replay_as_one_graph",
        1,
        || {
            // Paths ordered by events across GPUs (the ring, the pipelined ring,
            // the copy-engine one-shot, the parameter server) are captured into
            // one graph across every GPU; replays interleaved with plain calls
            // stay bitwise right, in and out of place.
            let mut e = engine(BackendChoice::Cuda, 2)?;
            for p in ["ring", "ring:pipe2", "ring:pipe4", "oneshot", "ps"] {
                for count in [1, 1000, 100_003, 1 << 20] {
                    for in_place in [false, true] {
                        let path = replay_path(&mut e, &algo(p), count, in_place, 5)?;
                        ensure!(path == p, "{p}: captured {path}");
                    }
                }
            }
            // The engine still works after.
            checked::<f32>(
                &mut e,
                &AlgoChoice::Auto,
                Collective::AllReduce,
                4096,
                true,
                ReduceOp::Sum,
                Inputs::Exact,
                3,
            )?;
            pass()
        },
    );

    cuda_only(
        h,
        "graphs::reduce_scatter_and_all_gather_replay_checked",
        1,
        || {
            // Reduce-scatter and all-gather graphs (GRAPH_CALLS calls per
            // replay), in and out of place, on 2 and 4 ranks, checked the
            // way bench checks them (regression: bench reported an in-place
            // reduce-scatter graph wrong because its expectation assumed one
            // call; a 2-call replay reduces the buffer it left).
            use ringreduce_tools::bench::{checked_call, expected, parse_contenders};
            for n in [2, 4] {
                let mut e = engine(BackendChoice::Cuda, n)?;
                for c in
                    parse_contenders("--algo", "ring:graph,ring:pipe2:graph").ctx("contenders")?
                {
                    for collective in [Collective::ReduceScatter, Collective::AllGather] {
                        for in_place in [false, true] {
                            let per = if collective == Collective::ReduceScatter {
                                1003 * n
                            } else {
                                1003
                            };
                            let inputs =
                                verify::make_inputs::<i32>(Inputs::Exact, ReduceOp::Sum, n, per, 9)
                                    .expect("inputs");
                            let want = expected(collective, &inputs, ReduceOp::Sum, Inputs::Exact);
                            let what =
                                format!("{} {collective:?} n={n} in_place={in_place}", c.name);
                            let (wrong, _, _) = checked_call(
                                &mut e,
                                &c,
                                collective,
                                in_place,
                                ReduceOp::Sum,
                                &inputs,
                                &want,
                            )
                            .ctx(&what)?;
                            ensure!(wrong == 0, "{what}: {wrong} wrong");
                        }
                    }
                }
            }
            pass()
        },
    );

    cuda_only(h, "graphs::ring_graph_on_more_ranks_than_gpus", 1, || {
        // 4 ranks on however many GPUs there are (several ranks per GPU):
        // the joint graph spans every rank.
        let mut e = engine(BackendChoice::Cuda, 4)?;
        for p in ["ring", "ring:pipe2"] {
            for in_place in [false, true] {
                let path = replay_path(&mut e, &algo(p), 100_003, in_place, 2)?;
                ensure!(path == p, "{p}: captured {path}");
            }
        }
        pass()
    });

    cuda_only(
        h,
        "graphs::replay_after_reallocation_is_an_error",
        1,
        || {
            let mut e = engine(BackendChoice::Cuda, 2)?;
            let inputs = verify::make_inputs::<f32>(Inputs::Exact, ReduceOp::Sum, 2, 1000, 1)
                .expect("inputs");
            let shape = e.load(Collective::AllReduce, &inputs, true).ctx("load")?;
            let b = bind(&e);
            e.graph_capture(None, shape.shape(), f32::DTYPE, ReduceOp::Sum, b)
                .ctx("capture")?;
            e.graph_replay().ctx("replay")?;
            e.synchronize().ctx("sync")?;
            // A bigger load reallocates the buffers the graph points into.
            let big = verify::make_inputs::<f32>(Inputs::Exact, ReduceOp::Sum, 2, 4 << 20, 2)
                .expect("inputs");
            e.load(Collective::AllReduce, &big, true)
                .ctx("bigger load")?;
            let r = e.graph_replay();
            ensure!(r.is_err(), "a graph replayed on freed buffers");
            ensure!(
                r.is_err_and(|x| x.to_string().contains("stale")),
                "the error must say the graph is stale"
            );
            // Capture again at the new size: it works.
            let shape = e.load(Collective::AllReduce, &inputs, false).ctx("load")?;
            let b = bind(&e);
            e.graph_capture(None, shape.shape(), f32::DTYPE, ReduceOp::Sum, b)
                .ctx("capture again")?;
            e.graph_replay().ctx("replay again")?;
            e.synchronize().ctx("sync")?;
            let out = e.read_output(&shape).ctx("read")?;
            let v = verify::check(
                &out,
                &verify::reference(&inputs, ReduceOp::Sum, Inputs::Exact),
            );
            ensure!(v.passed(), "after capturing again: {:?}", v.first_wrong);
            pass()
        },
    );
}
