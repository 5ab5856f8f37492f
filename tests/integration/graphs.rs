//! Capturing ringreduce's calls into CUDA graphs, and replaying them.

use crate::common::{engine, pass};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::engine::GRAPH_CALLS;
use ringreduce::plan::Buf;
use ringreduce::verify::{self, Inputs};
use ringreduce::{Algo, BackendChoice, Engine, Error};
use ringreduce::{AlgoChoice, EngineConfig, ReduceOp};

/// Load exact inputs, capture, replay `replays` times (with a ring call in
/// between when `interleave`), and check every rank bitwise against
/// n^(calls - 1) * sum (in place each call multiplies by n; out of place
/// every call computes the same sum).
fn replay_case(
    e: &mut Engine<f32>,
    count: usize,
    in_place: bool,
    replays: usize,
    interleave: bool,
) -> Result<String, String> {
    let n = e.ranks();
    let what = format!("n={n} count={count} in_place={in_place} interleave={interleave}");
    let data = verify::make_inputs::<f32>(Inputs::Exact, ReduceOp::Sum, n, count, 4);
    let mut reference = verify::reference(&data, ReduceOp::Sum, Inputs::Exact);
    e.load(&data, in_place)
        .map_err(|x| format!("{what}: {x}"))?;
    // The ring plan first: growing the buffers for it would drop the graph.
    let ring = e
        .plan(
            Algo::Ring {
                slices: 2,
                slots: 2,
                lanes: 1,
            },
            count,
            in_place,
        )
        .map_err(|x| x.to_string())?;
    let path = e
        .graph_capture(count, in_place)
        .map_err(|x| format!("{what}: {x}"))?;
    let mut calls = 0;
    for k in 0..replays {
        e.launch_graph().map_err(|x| format!("{what}: {x}"))?;
        calls += GRAPH_CALLS;
        if interleave && k % 2 == 0 {
            e.launch(&ring).map_err(|x| format!("{what}: {x}"))?;
            calls += 1;
        }
    }
    e.synchronize().map_err(|x| format!("{what}: {x}"))?;
    if in_place {
        reference = reference.scaled((n as f64).powi(calls as i32 - 1));
    }
    let out = e.read(Buf::Recv, count).map_err(|x| x.to_string())?;
    let v = verify::check(&out, &reference);
    ensure!(
        v.passed(),
        "{what} {path}: {} wrong, first {:?}",
        v.total_wrong(),
        v.first_wrong
    );
    Ok(path)
}

pub fn register(h: &mut Harness) {
    test_backend!(
        h,
        "graphs::capture_and_replay_small_paths",
        1,
        |b: BackendChoice| -> TestResult {
            // The auto path: fused one-shot out of place, flag in place.
            let mut cfg = EngineConfig::new(2, b);
            cfg.algo = AlgoChoice::Auto;
            let mut e = Engine::<f32>::new(cfg).map_err(|x| x.to_string())?;
            if b == BackendChoice::Cpu {
                // The CPU backend has no graphs: a clear error, not a panic.
                match e.graph_capture(1000, false) {
                    Err(Error::Unsupported(..)) => return pass(),
                    other => return Err(format!("cpu graph_capture: {other:?}")),
                }
            }
            for count in [1, 1000, 100_003, 1 << 20] {
                for in_place in [false, true] {
                    for interleave in [false, true] {
                        let path = replay_case(&mut e, count, in_place, 5, interleave)?;
                        let want = if in_place {
                            "oneshot:flag"
                        } else {
                            "oneshot:fused"
                        };
                        ensure!(
                            path == want,
                            "count={count}: captured {path}, expected {want}"
                        );
                    }
                }
            }
            // Growing the buffers drops the graph (its addresses are stale).
            e.graph_capture(1000, true).map_err(|x| x.to_string())?;
            e.reserve(1 << 22, 0).map_err(|x| x.to_string())?;
            ensure!(e.launch_graph().is_err(), "stale graph replayed");
            pass()
        }
    );

    test_backend!(
        h,
        "graphs::ring_is_refused_with_a_reason",
        1,
        |b: BackendChoice| -> TestResult {
            let mut e = engine(b, 2)?;
            let count = 16 << 20; // 64 MiB per rank: the ring
            e.reserve(count, 0).map_err(|x| x.to_string())?;
            e.fill(Buf::Send, count, 1.0).map_err(|x| x.to_string())?;
            match e.graph_capture(count, false) {
                Err(Error::Unsupported(what, _)) => {
                    ensure!(
                        b == BackendChoice::Cpu || what.contains("ring"),
                        "reason does not name the ring: {what}"
                    );
                }
                other => return Err(format!("ring capture: {other:?}")),
            }
            // The engine still works after the refused capture.
            let plan = e
                .plan(e.algo_for(count), count, false)
                .map_err(|x| x.to_string())?;
            e.launch(&plan).map_err(|x| x.to_string())?;
            e.synchronize().map_err(|x| x.to_string())?;
            let out = e.read(Buf::Recv, 4).map_err(|x| x.to_string())?;
            ensure!(out.iter().all(|v| v == &[2.0; 4]), "after refusal: {out:?}");
            pass()
        }
    );
}
