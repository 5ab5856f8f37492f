//! Collectives on device buffers: data stays in GPU memory between calls,
//! no host staging. Without a GPU this says so and exits 0.
//!
//! ```text
//! cargo run --release --example device_buffers
//! ```

use ringreduce::{Communicator, EngineConfig, Error, ReduceOp};

fn main() -> Result<(), Error> {
    let gpus = match ringreduce::backend::cuda::probe() {
        Ok(info) => info.devices.len(),
        Err(why) => {
            println!("device_buffers: no GPU here ({why}); nothing to run");
            return Ok(());
        }
    };
    // One rank per GPU (at least 2: several ranks may share a GPU).
    let n = gpus.max(2);
    let mut comm = Communicator::new(EngineConfig::cuda(n))?;
    println!("{n} ranks: {}", comm.describe());

    let len = 1 << 20;
    let grads = comm.alloc::<f32>(len)?;
    // One host slice per rank to start from.
    let init: Vec<Vec<f32>> = (0..n).map(|r| vec![r as f32 + 1.0; len]).collect();
    comm.write_buffer(&grads, &init)?;
    for step in 0..10 {
        // In place on the devices; nothing comes back to the host.
        let info = comm.all_reduce_device(&grads, &grads, len, ReduceOp::Avg)?;
        if step == 0 {
            println!("path {}", info.path);
        }
    }
    let mut back = vec![vec![0.0f32; 8]; n];
    comm.read_buffer(&grads, &mut back)?;
    let avg = (n + 1) as f32 / 2.0;
    // (the average multiplies by 1/n first: exact when n is a power of 2)
    assert!(back
        .iter()
        .all(|b| b.iter().all(|&x| (x - avg).abs() <= 1e-5 * avg)));
    comm.free(grads)?;
    println!("device_buffers: 10 averages on the GPUs, result {avg} on every rank");
    Ok(())
}
