//! Every rank from one thread: the simplest way to use ringreduce.
//!
//! One `Communicator` for 4 ranks in this process; each call takes one
//! buffer per rank, in rank order. The element type comes from the
//! buffers, so one communicator reduces `f32`, `i64`, `bf16`, ...
//!
//! ```text
//! cargo run --release --example threads
//! ```

use ringreduce::{BackendChoice, Communicator, EngineConfig, ReduceOp};

fn main() -> Result<(), ringreduce::Error> {
    // CUDA when a driver and GPUs are there, else the CPU backend
    // (EngineConfig::cpu(4) or ::cuda(4) to choose).
    let mut comm = Communicator::new(EngineConfig::new(4, BackendChoice::Auto))?;
    println!("{} ranks: {}", comm.size(), comm.describe());

    // All-reduce: every rank ends with the sum of every rank's buffer.
    let send: Vec<Vec<f32>> = (0..4).map(|r| vec![r as f32 + 1.0; 1000]).collect();
    let mut recv = vec![vec![0.0f32; 1000]; 4];
    let info = comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
    assert!(recv.iter().all(|b| b.iter().all(|&x| x == 10.0)));
    println!(
        "all-reduce of 1000 floats: path {}, rank 0 sent {} bytes",
        info.path, info.traffic[0].sent
    );

    // Another element type on the same communicator, in place.
    let mut counts: Vec<Vec<i64>> = (0..4).map(|r| vec![r as i64; 8]).collect();
    comm.all_reduce_in_place(&mut counts, ReduceOp::Max)?;
    assert!(counts.iter().all(|b| b.iter().all(|&x| x == 3)));

    // Reduce-scatter: rank r ends with chunk r of the sum.
    let grads: Vec<Vec<f32>> = (0..4).map(|_| (0..8).map(|i| i as f32).collect()).collect();
    let mut mine = vec![vec![0.0f32; 2]; 4];
    comm.reduce_scatter(&grads, &mut mine, ReduceOp::Sum)?;
    assert_eq!(mine[3], vec![24.0, 28.0]);

    // All-gather and broadcast.
    let parts: Vec<Vec<u8>> = (0..4).map(|r| vec![r as u8; 2]).collect();
    let mut whole = vec![vec![0u8; 8]; 4];
    comm.all_gather(&parts, &mut whole)?;
    assert_eq!(whole[1], vec![0, 0, 1, 1, 2, 2, 3, 3]);
    let mut params: Vec<Vec<f64>> = (0..4).map(|r| vec![r as f64; 3]).collect();
    comm.broadcast_in_place(&mut params, 2)?;
    assert!(params.iter().all(|b| b == &vec![2.0; 3]));

    comm.barrier()?;
    println!("threads: every collective checked");
    Ok(())
}
