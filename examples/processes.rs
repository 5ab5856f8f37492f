//! One rank per process: run this program as every rank of a job.
//!
//! ```text
//! cargo build --release --examples
//! cargo run --release -- launch -n 2 -- target/release/examples/processes
//! mpirun -np 2 target/release/examples/processes      # the same under mpirun
//! ```
//!
//! `Communicator::from_env` finds the job in the environment the launcher
//! set (`RINGREDUCE_RANK`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK`); the rank
//! count is the job's. Each process calls with its own rank's buffers.

use ringreduce::{BackendChoice, Communicator, Error, JobSpec, ReduceOp};

fn main() {
    match JobSpec::from_env() {
        Ok(Some(_)) => {}
        Ok(None) => {
            eprintln!(
                "processes: this program is one rank of a job; start every rank with\n  \
                 cargo run --release -- launch -n 2 -- target/release/examples/processes\n\
                 (or mpirun -np 2 target/release/examples/processes)"
            );
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("processes: {e}");
            std::process::exit(2);
        }
    }
    if let Err(e) = run() {
        eprintln!("processes: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Error> {
    // CUDA when the machine has a driver and GPUs (every rank must pick the
    // same backend), else the CPU backend with shared memory.
    let mut comm = Communicator::from_env(BackendChoice::Auto)?;
    let (r, n) = (comm.rank(), comm.size());

    let mut x = vec![(r + 1) as f32; 1 << 16];
    let info = comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
    let want = (n * (n + 1) / 2) as f32;
    assert!(x.iter().all(|&v| v == want), "rank {r}: wrong sum");

    // Another element type; rank r's chunk lands in rank r's buffer.
    let all: Vec<i64> = (0..(2 * n) as i64).collect();
    let mut chunk = vec![0i64; 2];
    comm.reduce_scatter(&all, &mut chunk, ReduceOp::Sum)?;
    assert_eq!(
        chunk,
        vec![(2 * r) as i64 * n as i64, (2 * r + 1) as i64 * n as i64]
    );

    let mut config = vec![if r == 0 { 42u32 } else { 0 }; 4];
    comm.broadcast_in_place(&mut config, 0)?;
    assert_eq!(config, vec![42; 4]);
    comm.barrier()?;
    if r == 0 {
        println!(
            "processes: {n} ranks, all-reduce of 64Ki floats by {}, every result checked",
            info.path
        );
    }
    Ok(())
}
