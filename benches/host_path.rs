//! Criterion: the host-slice path on the CPU backend (issue 32 item 11).
//!
//! 3 ranks x 16 MiB of f32, summed. Every contender produces every rank's
//! output, so each does the same work a collective must:
//!
//! * `plain_loop`: a plain summing loop writing each rank's output
//!   (`recv[r][i] = send[0][i] + send[1][i] + send[2][i]` for every r), on
//!   one thread — the yardstick of issue 32 ("within 2x").
//! * `plain_loop_one_output`: the same sum written once (the 7 ms).
//! * `host_slices/<path>`: `Communicator::all_reduce` on the caller's slices.
//! * `engine_buffers/<path>`: the same call on the engine's own buffers,
//!   inputs loaded once (no host copies): what the algorithm itself costs.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ringreduce::{AlgoChoice, Collective, Communicator, EngineConfig, ReduceOp};
use std::time::Duration;

const RANKS: usize = 3;
const COUNT: usize = 4 << 20; // 16 MiB of f32 per rank

fn host_path(c: &mut Criterion) {
    let send: Vec<Vec<f32>> = (0..RANKS)
        .map(|r| (0..COUNT).map(|i| ((i + r) % 7) as f32).collect())
        .collect();
    let mut recv = vec![vec![0.0f32; COUNT]; RANKS];
    let mut g = c.benchmark_group(format!("host_path/cpu/{RANKS}ranks/16MiB"));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes((COUNT * 4) as u64));
    g.bench_function("plain_loop", |b| {
        b.iter(|| {
            for out in recv.iter_mut() {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = send[0][i] + send[1][i] + send[2][i];
                }
            }
        })
    });
    g.bench_function("plain_loop_one_output", |b| {
        b.iter(|| {
            for (i, o) in recv[0].iter_mut().enumerate() {
                *o = send[0][i] + send[1][i] + send[2][i];
            }
        })
    });
    for path in ["auto", "ring", "oneshot:fused"] {
        let algo: AlgoChoice = match path.parse() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("skipping {path}: {e}");
                continue;
            }
        };
        let mut cfg = EngineConfig::cpu(RANKS);
        cfg.algo = algo.clone();
        let mut comm = match Communicator::new(cfg) {
            Ok(c) => c,
            Err(err) => {
                eprintln!("skipping {path}: {err}");
                continue;
            }
        };
        g.bench_with_input(BenchmarkId::new("host_slices", path), &path, |b, _| {
            b.iter(|| {
                if let Err(err) = comm.all_reduce(&send, &mut recv, ReduceOp::Sum) {
                    eprintln!("all_reduce failed: {err}");
                }
            })
        });
        let mut e = match comm.into_engine() {
            Ok(e) => e,
            Err(err) => {
                eprintln!("skipping {path} on the engine's buffers: {err}");
                continue;
            }
        };
        let shape = match e.load(Collective::AllReduce, &send, false) {
            Ok(s) => s,
            Err(err) => {
                eprintln!("skipping {path} on the engine's buffers: {err}");
                continue;
            }
        };
        g.bench_with_input(BenchmarkId::new("engine_buffers", path), &path, |b, _| {
            b.iter(|| {
                if let Err(err) = e.run::<f32>(Some(&algo), &shape, ReduceOp::Sum) {
                    eprintln!("run failed: {err}");
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, host_path);
criterion_main!(benches);
