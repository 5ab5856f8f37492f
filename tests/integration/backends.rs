//! The all-reduce specification, run on every backend.

use crate::common::{engine, pass};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::plan::Buf;
use ringreduce::verify::{self, Inputs};
use ringreduce::{Algo, BackendChoice, Engine, ReduceOp};

const SMALL_COUNTS: [usize; 7] = [0, 1, 3, 4, 5, 1023, 1_000_003];

fn algos() -> Vec<Algo> {
    vec![
        Algo::RING,
        Algo::Ring {
            slices: 1,
            slots: 1,
            lanes: 1,
        },
        Algo::Ring {
            slices: 4,
            slots: 2,
            lanes: 1,
        },
        Algo::Ring {
            slices: 4,
            slots: 2,
            lanes: 2,
        },
        Algo::ONESHOT,
        Algo::ONESHOT_PULL,
        Algo::OneShotPull { slices: 3 },
        Algo::OneShotFused,
        Algo::OneShotFlag,
        Algo::OneShot {
            slices: 4,
            chain: false,
        },
        Algo::ParameterServer,
    ]
}

/// Load, poison the output, run `algo`, and check every rank bitwise (exact
/// inputs) or within tolerance (random inputs); out of place, also that the
/// send buffers are untouched.
fn run_case(
    e: &mut Engine<f32>,
    algo: Algo,
    count: usize,
    in_place: bool,
    inputs: Inputs,
    seed: u64,
) -> Result<(), String> {
    let n = e.ranks();
    let what = format!(
        "{} n={n} count={count} in_place={in_place} inputs={inputs:?}",
        algo.label()
    );
    let data = verify::make_inputs::<f32>(inputs, ReduceOp::Sum, n, count, seed);
    let reference = verify::reference(&data, ReduceOp::Sum, inputs);
    e.load(&data, in_place)
        .map_err(|x| format!("{what}: {x}"))?;
    if !in_place {
        e.fill(Buf::Recv, count, f32::NAN)
            .map_err(|x| x.to_string())?;
    }
    let plan = e.plan(algo, count, in_place).map_err(|x| x.to_string())?;
    e.launch(&plan).map_err(|x| format!("{what}: {x}"))?;
    e.synchronize().map_err(|x| format!("{what}: {x}"))?;
    let out = e.read(Buf::Recv, count).map_err(|x| x.to_string())?;
    let v = verify::check(&out, &reference);
    ensure!(
        v.passed(),
        "{what}: {} wrong per rank {:?}, first {:?}",
        v.total_wrong(),
        v.wrong,
        v.first_wrong
    );
    if !in_place {
        let send = e.read(Buf::Send, count).map_err(|x| x.to_string())?;
        for (r, (s, d)) in send.iter().zip(&data).enumerate() {
            ensure!(
                s.iter().zip(d).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{what}: rank {r} send buffer modified"
            );
        }
    }
    Ok(())
}

fn ranks_range(b: BackendChoice) -> Vec<usize> {
    match b {
        BackendChoice::Cpu => (1..=8).collect(),
        _ => (1..=8).collect(),
    }
}

pub fn register(h: &mut Harness) {
    test_backend!(
        h,
        "backends::exact_all_algos_counts_ranks",
        1,
        |b: BackendChoice| -> TestResult {
            for n in ranks_range(b) {
                let mut e = engine(b, n)?;
                for &count in &SMALL_COUNTS {
                    for algo in algos() {
                        // PS and one-shot move (N-1)*D per rank: keep the big count to the ring.
                        if count > 100_000 && n > 4 && algo != Algo::RING {
                            continue;
                        }
                        for in_place in [false, true] {
                            run_case(&mut e, algo, count, in_place, Inputs::Exact, 1)?;
                        }
                    }
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::random_floats_within_tolerance",
        1,
        |b: BackendChoice| -> TestResult {
            for n in [2, 3, 5, 8] {
                let mut e = engine(b, n)?;
                for count in [4, 1023, 1_000_003] {
                    for in_place in [false, true] {
                        run_case(
                            &mut e,
                            Algo::Ring {
                                slices: 2,
                                slots: 2,
                                lanes: 1,
                            },
                            count,
                            in_place,
                            Inputs::Random,
                            42,
                        )?;
                    }
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::auto_path_64Mi_elements",
        1,
        |b: BackendChoice| -> TestResult {
            // 64 Mi floats = 256 MiB per rank. On the CPU only 2 ranks, to keep CI fast.
            let count = 64 << 20;
            let ns: Vec<usize> = if b == BackendChoice::Cpu {
                vec![2]
            } else {
                vec![2, 3, 8]
            };
            for n in ns {
                let mut e = engine(b, n)?;
                let algo = ringreduce::algo::choose(n, count * 4);
                for in_place in [false, true] {
                    run_case(&mut e, algo, count, in_place, Inputs::Exact, 3)?;
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::engine_reuse_grow_and_shrink",
        1,
        |b: BackendChoice| -> TestResult {
            let mut e = engine(b, 3)?;
            for (i, count) in [10usize, 100_000, 7, 0, 300_001, 16]
                .into_iter()
                .enumerate()
            {
                for algo in [
                    Algo::RING,
                    Algo::ONESHOT,
                    Algo::ONESHOT_PULL,
                    Algo::Ring {
                        slices: 3,
                        slots: 2,
                        lanes: 1,
                    },
                ] {
                    run_case(&mut e, algo, count, i % 2 == 0, Inputs::Exact, i as u64)?;
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::back_to_back_calls_without_sync",
        1,
        |b: BackendChoice| -> TestResult {
            // Many launches before one synchronize: chained one-shot calls (no
            // start fence, alternating scratch halves), interleaved with other
            // paths and sizes that break and restart the chain.
            for n in [2, 3] {
                let mut e = engine(b, n)?;
                for (count, algo) in [
                    (1000, Algo::ONESHOT),
                    (4096, Algo::ONESHOT),
                    (
                        1000,
                        Algo::Ring {
                            slices: 2,
                            slots: 2,
                            lanes: 1,
                        },
                    ),
                    (1000, Algo::ONESHOT),
                    (1000, Algo::ONESHOT_PULL),
                    (1000, Algo::ONESHOT),
                    (999, Algo::ONESHOT_PULL),
                    (999, Algo::OneShotFused),
                    (999, Algo::ONESHOT),
                    (999, Algo::OneShotFlag),
                    (1_000_003, Algo::OneShotFlag),
                    (5, Algo::OneShotFlag),
                    (5, Algo::ONESHOT),
                    (4096, Algo::OneShotFlag),
                ] {
                    let data =
                        verify::make_inputs::<f32>(Inputs::Exact, ReduceOp::Sum, n, count, 5);
                    let reference = verify::reference(&data, ReduceOp::Sum, Inputs::Exact);
                    e.load(&data, false).map_err(|x| x.to_string())?;
                    let plan = e.plan(algo, count, false).map_err(|x| x.to_string())?;
                    for _ in 0..7 {
                        e.launch(&plan).map_err(|x| x.to_string())?;
                    }
                    e.synchronize().map_err(|x| x.to_string())?;
                    let out = e.read(Buf::Recv, count).map_err(|x| x.to_string())?;
                    let v = verify::check(&out, &reference);
                    ensure!(
                        v.passed(),
                        "n={n} count={count} {}: {:?}",
                        algo.label(),
                        v.first_wrong
                    );
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::back_to_back_in_place_calls",
        1,
        |b: BackendChoice| -> TestResult {
            // In place, each call multiplies the buffers by n: after k calls
            // without a synchronize every rank holds n^(k-1) * sum, exactly
            // (small integers). Sizes change between bursts, so the flag
            // kernel's grid (and its per-block flags) changes too.
            for n in [2, 3] {
                let mut e = engine(b, n)?;
                for (count, algo) in [
                    (1000, Algo::OneShotFlag),
                    (100_000, Algo::OneShotFlag),
                    (3, Algo::OneShotFlag),
                    (1000, Algo::ONESHOT),
                    (1000, Algo::OneShotFlag),
                    (1_000_003, Algo::OneShotFlag),
                ] {
                    let calls = 5u32;
                    let data =
                        verify::make_inputs::<f32>(Inputs::Exact, ReduceOp::Sum, n, count, 9);
                    let reference = verify::reference(&data, ReduceOp::Sum, Inputs::Exact)
                        .scaled((n as f64).powi(calls as i32 - 1));
                    e.load(&data, true).map_err(|x| x.to_string())?;
                    let plan = e.plan(algo, count, true).map_err(|x| x.to_string())?;
                    for _ in 0..calls {
                        e.launch(&plan).map_err(|x| x.to_string())?;
                    }
                    e.synchronize().map_err(|x| x.to_string())?;
                    let out = e.read(Buf::Recv, count).map_err(|x| x.to_string())?;
                    let v = verify::check(&out, &reference);
                    ensure!(
                        v.passed(),
                        "n={n} count={count} {} x{calls} in place: {:?}",
                        algo.label(),
                        v.first_wrong
                    );
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::host_api_in_and_out_of_place",
        1,
        |b: BackendChoice| -> TestResult {
            let mut e = engine(b, 4)?;
            let send: Vec<Vec<f32>> = (0..4)
                .map(|r| (0..1001).map(|i| (r * 1000 + i) as f32).collect())
                .collect();
            let mut recv = vec![vec![0.0f32; 1001]; 4];
            let info = e.all_reduce(&send, &mut recv).map_err(|x| x.to_string())?;
            let want: Vec<f32> = (0..1001).map(|i| (6000 + 4 * i) as f32).collect();
            ensure!(recv.iter().all(|v| *v == want), "out of place wrong");
            ensure!(
                info.traffic.iter().all(|t| t.sent > 0),
                "traffic not counted"
            );
            let mut bufs = send.clone();
            e.all_reduce_in_place(&mut bufs)
                .map_err(|x| x.to_string())?;
            ensure!(bufs.iter().all(|v| *v == want), "in place wrong");
            pass()
        }
    );

    test_backend!(
        h,
        "backends::traffic_matches_formulas",
        1,
        |b: BackendChoice| -> TestResult {
            let mut e = engine(b, 4)?;
            let count = 1 << 16;
            let bytes = (count * 4) as u64;
            let ring = e
                .plan(Algo::RING, count, false)
                .map_err(|x| x.to_string())?;
            for t in ring.traffic(4) {
                ensure!(
                    t.sent == 2 * 3 * bytes / 4 && t.received == t.sent,
                    "ring traffic {t:?}"
                );
            }
            let ps = e
                .plan(Algo::ParameterServer, count, false)
                .map_err(|x| x.to_string())?;
            let t = ps.traffic(4);
            ensure!(
                t[0].received == 3 * bytes && t[0].sent == 3 * bytes,
                "ps root traffic {:?}",
                t[0]
            );
            pass()
        }
    );
}
