//! One thread per rank, the way NCCL is used with one thread per GPU:
//! `Communicator::per_rank` gives one handle per rank; each thread calls
//! with its own rank's buffers, and a call runs once every rank made it.
//!
//! Every rank must make the same calls in the same order: a rank that asks
//! for something else (another op, count, element type, root, collective)
//! makes the call fail on every rank at once with `Error::Mismatch`,
//! naming what each rank asked for, before any data moves.
//!
//! ```text
//! cargo run --release --example per_rank
//! ```

use ringreduce::{Communicator, EngineConfig, Error, ReduceOp};

/// What each rank's thread runs: average "gradients", then take rank 0's
/// "parameters".
fn train_step(comm: &mut Communicator) -> Result<Vec<f32>, Error> {
    let r = comm.rank();
    let mut grads = vec![(r + 1) as f32; 16];
    comm.all_reduce_in_place(&mut grads, ReduceOp::Avg)?;
    let mut params = vec![r as f32 * 100.0; 4];
    comm.broadcast_in_place(&mut params, 0)?;
    comm.barrier()?;
    Ok(grads)
}

fn main() -> Result<(), Error> {
    let ranks = Communicator::per_rank(EngineConfig::cpu(4))?;
    let results: Vec<Result<Vec<f32>, Error>> = std::thread::scope(|s| {
        let threads: Vec<_> = ranks
            .into_iter()
            .map(|mut comm| s.spawn(move || train_step(&mut comm)))
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a rank thread panicked"))
            .collect()
    });
    for (r, res) in results.into_iter().enumerate() {
        let grads = res?;
        assert!(grads.iter().all(|&g| g == 2.5), "rank {r}: {grads:?}");
    }
    println!("per_rank: 4 rank threads averaged their gradients (2.5)");

    // A mismatch is one error on every rank, not wrong data.
    let ranks = Communicator::per_rank(EngineConfig::cpu(2))?;
    let outcomes: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let threads: Vec<_> = ranks
            .into_iter()
            .map(|mut comm| {
                s.spawn(move || {
                    let op = if comm.rank() == 0 {
                        ReduceOp::Sum
                    } else {
                        ReduceOp::Max
                    };
                    let mut x = vec![1.0f32; 4];
                    comm.all_reduce_in_place(&mut x, op).map(|_| ())
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a rank thread panicked"))
            .collect()
    });
    for (r, o) in outcomes.iter().enumerate() {
        match o {
            Err(e @ Error::Mismatch { .. }) => println!("rank {r}: {e}"),
            other => panic!("rank {r}: expected a mismatch, got {other:?}"),
        }
    }
    Ok(())
}
