//! What the calls' agreement check costs (issue 32 item 5;
//! `EngineConfig::check_calls`): small all-reduces of one rank per
//! process on the CPU backend, with the check on and off, in alternating
//! jobs of 2 processes started with `ringreduce launch`.
//!
//! ```text
//! cargo bench --bench agreement            # the table (docs/lab/perf-notes.md)
//! cargo bench --bench agreement -- 4096    # other element counts (f32)
//! ```
//!
//! Each job times blocks of back-to-back calls after a warm-up; a row is
//! the median block of every job of that setting, in microseconds per call.

use ringreduce::{BackendChoice, Communicator, EngineConfig, ReduceOp};
use std::process::Command;
use std::time::Instant;

const BLOCKS: usize = 7;
const CALLS: usize = 2000;
const JOBS: usize = 3;

/// One rank of a job: time `BLOCKS` blocks of `CALLS` all-reduces of
/// `count` f32; rank 0 prints each block's microseconds per call.
fn rank(check: bool, count: usize) -> Result<(), ringreduce::Error> {
    let mut cfg = EngineConfig::job_from_env(BackendChoice::Cpu)?;
    cfg.check_calls = check;
    let mut comm = Communicator::join(cfg)?;
    let send = vec![1.0f32; count];
    let mut recv = vec![0.0f32; count];
    for _ in 0..CALLS / 4 {
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
    }
    for _ in 0..BLOCKS {
        comm.barrier()?;
        let t = Instant::now();
        for _ in 0..CALLS {
            comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / CALLS as f64;
        if comm.rank() == 0 {
            println!("block_us {us:.3}");
        }
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rank") {
        let check = args.get(i + 1).is_some_and(|a| a == "on");
        let count = args.get(i + 2).and_then(|a| a.parse().ok()).unwrap_or(256);
        if let Err(e) = rank(check, count) {
            eprintln!("rank: {e}");
            std::process::exit(1);
        }
        return;
    }
    let counts: Vec<usize> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    let counts = if counts.is_empty() {
        vec![1, 256, 16384]
    } else {
        counts
    };
    let me = std::env::current_exe().expect("the bench's own path");
    println!(
        "agreement check, 2 rank processes, CPU backend, f32 sum, median of {} blocks of {CALLS} calls x {JOBS} jobs per setting",
        BLOCKS
    );
    println!(
        "{:>10} {:>14} {:>14} {:>10}",
        "bytes", "check on us", "check off us", "cost us"
    );
    for count in counts {
        let mut on = Vec::new();
        let mut off = Vec::new();
        for _ in 0..JOBS {
            for check in ["on", "off"] {
                let out = Command::new(env!("CARGO_BIN_EXE_ringreduce"))
                    .args(["launch", "-n", "2", "--timeout", "120", "--"])
                    .arg(&me)
                    .args(["--rank", check, &count.to_string()])
                    .output()
                    .expect("ringreduce launch");
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "launch failed: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let blocks = text
                    .lines()
                    .filter_map(|l| l.split("block_us ").nth(1))
                    .filter_map(|x| x.trim().parse::<f64>().ok());
                if check == "on" {
                    on.extend(blocks);
                } else {
                    off.extend(blocks);
                }
            }
        }
        let (a, b) = (median(on), median(off));
        println!("{:>10} {a:>14.2} {b:>14.2} {:>10.2}", count * 4, a - b);
    }
}
