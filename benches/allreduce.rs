//! Criterion: ring vs parameter server on the CPU backend (and on CUDA when a
//! GPU is present). `iter_custom` times `iters` back-to-back collectives
//! between two full synchronizations of every rank, so on a GPU the time is
//! device time, not launch time.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ringreduce::engine::TypedShape;
use ringreduce::{AlgoChoice, BackendChoice, Collective, Engine, EngineConfig, ReduceOp};
use std::time::{Duration, Instant};

fn time_iters(e: &mut Engine, algo: &AlgoChoice, shape: &TypedShape<f32>, iters: u64) -> Duration {
    // Errors cannot be returned from a bench closure; a failed call makes the
    // measurement meaningless, so report it loudly and time nothing.
    if let Err(err) = e.synchronize() {
        eprintln!("synchronize failed: {err}");
        return Duration::ZERO;
    }
    let t0 = Instant::now();
    for _ in 0..iters {
        if let Err(err) = e.launch(Some(algo), shape, ReduceOp::Sum) {
            eprintln!("launch failed: {err}");
            return Duration::ZERO;
        }
    }
    if let Err(err) = e.synchronize() {
        eprintln!("synchronize failed: {err}");
    }
    t0.elapsed()
}

fn bench_backend(
    c: &mut Criterion,
    backend: BackendChoice,
    label: &str,
    ranks: usize,
    sizes: &[usize],
) {
    let mut engine = match Engine::new(EngineConfig::new(ranks, backend)) {
        Ok(e) => e,
        Err(err) => {
            eprintln!("skipping {label}: {err}");
            return;
        }
    };
    let mut g = c.benchmark_group(format!("allreduce/{label}/{ranks}ranks"));
    g.sample_size(10).measurement_time(Duration::from_secs(2));
    for &count in sizes {
        // Small integers: every sum is exact, whatever the order.
        let inputs: Vec<Vec<f32>> = (0..ranks)
            .map(|r| (0..count).map(|i| ((r * 7 + i) % 251) as f32).collect())
            .collect();
        let shape = match engine.load(Collective::AllReduce, &inputs, false) {
            Ok(s) => s,
            Err(err) => {
                eprintln!("skipping {count}: {err}");
                continue;
            }
        };
        g.throughput(Throughput::Bytes((count * 4) as u64));
        for name in ["ring", "ring:pipe4", "ps"] {
            let algo: AlgoChoice = match name.parse() {
                Ok(a) => a,
                Err(err) => {
                    eprintln!("skipping {name}: {err}");
                    continue;
                }
            };
            g.bench_with_input(BenchmarkId::new(name, count * 4), &count, |b, _| {
                b.iter_custom(|iters| time_iters(&mut engine, &algo, &shape, iters))
            });
        }
    }
    g.finish();
}

fn allreduce(c: &mut Criterion) {
    bench_backend(
        c,
        BackendChoice::Cpu,
        "cpu",
        4,
        &[1 << 10, 1 << 16, 1 << 20],
    );
    if ringreduce::backend::cuda::probe().is_ok() {
        bench_backend(
            c,
            BackendChoice::Cuda,
            "cuda",
            2,
            &[1 << 10, 1 << 20, 1 << 26],
        );
    } else {
        eprintln!("no CUDA driver: CUDA benches skipped");
    }
}

criterion_group!(benches, allreduce);
criterion_main!(benches);
