//! What each way of calling costs: 4 ranks, f32 sum, out of place, 8 B
//! (the cost of a call itself), 1 MiB and 16 MiB per rank, on the CPU
//! backend (the default) or, with `--backend cuda`, on the CUDA backend
//! (the ranks share the GPUs there are; the host slices are copied in and
//! out by the engine).
//!
//! * `plain_loop`: a hand-written loop on one thread that does the work a
//!   collective must: rank 0's output is the sum of the four inputs, and
//!   the other outputs are copies of it;
//! * `all_ranks`: one `Communicator` of every rank, one call with every
//!   rank's buffers;
//! * `per_rank`: one handle per rank (`Communicator::per_rank`), each
//!   called from a thread of its own, as NCCL is used; a sample is the
//!   same number of calls on every thread, from the first start to the
//!   last end.
//!
//! The contenders run in interleaved rounds (the machine's memory
//! bandwidth drifts between runs), and the medians and their ratios are
//! printed. Targets: per-rank within 1.3x of all-ranks at both sizes, and
//! all-ranks within 3x of the plain loop at 1 MiB.
//!
//! ```text
//! cargo bench --bench call_styles [-- ROUNDS] [--backend cpu|cuda]
//! ```

use ringreduce::{Communicator, EngineConfig, ReduceOp};
use std::time::{Duration, Instant};

const RANKS: usize = 4;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(15);
    let backend = args
        .iter()
        .position(|a| a == "--backend")
        .and_then(|i| args.get(i + 1))
        .map_or("cpu", String::as_str);
    let config = || match backend {
        "cpu" => EngineConfig::cpu(RANKS),
        "cuda" => EngineConfig::cuda(RANKS),
        other => {
            eprintln!("call_styles: --backend takes cpu or cuda, not {other}");
            std::process::exit(2)
        }
    };
    println!("# call_styles: {RANKS} ranks on the {backend} backend, f32 sum, out of place; {rounds} interleaved rounds, median us per call");
    println!(
        "# {:>6} {:>12} {:>12} {:>12} {:>14} {:>14}",
        "size", "plain_loop", "all_ranks", "per_rank", "all/plain", "per/all"
    );
    for bytes in [8usize, 1 << 20, 16 << 20] {
        let count = bytes / 4;
        let calls = match bytes {
            8 => 1000,
            b if b <= 1 << 20 => 20,
            _ => 3,
        };
        let send: Vec<Vec<f32>> = (0..RANKS)
            .map(|r| (0..count).map(|i| ((i + r) % 7) as f32).collect())
            .collect();
        let mut recv = vec![vec![0.0f32; count]; RANKS];
        let mut comm = Communicator::new(config()).expect("a communicator");
        let mut handles = Communicator::per_rank(config()).expect("per-rank handles");
        let (mut plain, mut all, mut per) = (Vec::new(), Vec::new(), Vec::new());
        let per_call = |t: Duration| t.as_secs_f64() * 1e6 / calls as f64;
        for _ in 0..=rounds {
            let t0 = Instant::now();
            for _ in 0..calls {
                let (first, rest) = recv.split_at_mut(1);
                for (i, o) in first[0].iter_mut().enumerate() {
                    *o = send[0][i] + send[1][i] + send[2][i] + send[3][i];
                }
                for o in rest.iter_mut() {
                    o.copy_from_slice(&first[0]);
                }
            }
            plain.push(per_call(t0.elapsed()));
            let t0 = Instant::now();
            for _ in 0..calls {
                comm.all_reduce(&send, &mut recv, ReduceOp::Sum)
                    .expect("all-reduce");
            }
            all.push(per_call(t0.elapsed()));
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for (r, h) in handles.iter_mut().enumerate() {
                    let send = &send[r];
                    s.spawn(move || {
                        let mut out = vec![0.0f32; send.len()];
                        for _ in 0..calls {
                            h.all_reduce(send, &mut out, ReduceOp::Sum)
                                .expect("per-rank all-reduce");
                        }
                    });
                }
            });
            per.push(per_call(t0.elapsed()));
        }
        // The first round warms every contender up.
        let (p, a, q) = (
            median(plain[1..].to_vec()),
            median(all[1..].to_vec()),
            median(per[1..].to_vec()),
        );
        println!(
            "  {:>7} {p:>12.1} {a:>12.1} {q:>12.1} {:>13.2}x {:>13.2}x",
            ringreduce::size::format_bytes(bytes as u64),
            a / p,
            q / a
        );
    }
}
