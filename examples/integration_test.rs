//! How to test code that calls ringreduce: run it on the CPU backend (no
//! GPU needed, the same plans as on the GPU) with exact inputs, and
//! compare bit for bit.
//!
//! Put the test below in your crate's `tests/` (or a `#[cfg(test)]`
//! module); here it also runs as a program:
//!
//! ```text
//! cargo run --release --example integration_test
//! cargo test --release --example integration_test
//! ```
//!
//! Exact inputs: small integers stored in floats (or integer types) sum to
//! the same value in any order, so every rank's result is bitwise the
//! reference; random floats would differ in their last bits with the order
//! of the sums.

use ringreduce::{Communicator, EngineConfig, Error, EveryRank, ReduceOp};
use std::time::Duration;

/// The code under test: a data-parallel step that averages gradients
/// across ranks, from one caller for every rank.
pub fn average_gradients(
    comm: &mut Communicator<EveryRank>,
    grads: &mut [Vec<f32>],
) -> Result<(), Error> {
    comm.all_reduce_in_place(grads, ReduceOp::Avg)?;
    Ok(())
}

/// A communicator for tests: the CPU backend, a short timeout so a bug
/// that hangs a rank fails the test in seconds instead of minutes.
fn test_comm(ranks: usize) -> Communicator<EveryRank> {
    let cfg = EngineConfig::cpu(ranks).timeout(Duration::from_secs(10));
    Communicator::new(cfg).expect("a CPU communicator")
}

fn averages_are_exact() {
    // Powers of two: the average multiplies each input by 1/ranks first
    // (NCCL's float average), exact for them.
    for ranks in [1, 2, 4] {
        let mut comm = test_comm(ranks);
        // Rank r holds r * 4 + i: the average is exact in f32.
        let mut grads: Vec<Vec<f32>> = (0..ranks)
            .map(|r| (0..1000).map(|i| (r * 4 + i) as f32).collect())
            .collect();
        average_gradients(&mut comm, &mut grads).expect("average");
        let want: Vec<f32> = (0..1000)
            .map(|i| (0..ranks).map(|r| (r * 4 + i) as f32).sum::<f32>() / ranks as f32)
            .collect();
        for (r, g) in grads.iter().enumerate() {
            assert_eq!(g, &want, "{ranks} ranks, rank {r}");
        }
    }
}

fn a_wrong_buffer_count_is_an_error() {
    let mut comm = test_comm(3);
    let mut two = vec![vec![0.0f32; 4]; 2];
    let e = average_gradients(&mut comm, &mut two).expect_err("2 buffers for 3 ranks");
    assert!(
        matches!(
            e,
            Error::WrongBufferCount {
                ranks: 3,
                buffers: 2
            }
        ),
        "{e}"
    );
}

fn main() {
    averages_are_exact();
    a_wrong_buffer_count_is_an_error();
    println!("integration_test: 2 tests passed");
}

#[cfg(test)]
mod tests {
    #[test]
    fn averages_are_exact() {
        super::averages_are_exact();
    }

    #[test]
    fn a_wrong_buffer_count_is_an_error() {
        super::a_wrong_buffer_count_is_an_error();
    }
}
