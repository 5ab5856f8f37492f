//! The ring all-reduce in one page, with nothing from the library: N threads
//! (the ranks), one channel into each rank from its left neighbour, the
//! buffer cut into N chunks, reduce-scatter then all-gather, and the result
//! checked against a direct sum. docs/ALGORITHM.md walks through it; the
//! engine runs the same index rules (src/schedule.rs) through a plan.
//!
//! Run: `cargo run --release --example reference_ring`

use std::error::Error;
use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Chunk `c` of `count` elements cut into `n` chunks (the first
/// `count % n` chunks one element longer).
fn chunk(c: usize, n: usize, count: usize) -> Range<usize> {
    let (base, extra) = (count / n, count % n);
    let start = c * base + c.min(extra);
    start..start + base + usize::from(c < extra)
}

/// Rank `r` of `n`: sends to rank r+1 through `right`, receives from rank
/// r-1 through `left`. Steps count from 0, as in the formulas.
fn ring_rank(
    r: usize,
    n: usize,
    mut buf: Vec<f64>,
    right: Sender<Vec<f64>>,
    left: Receiver<Vec<f64>>,
) -> Res<Vec<f64>> {
    let count = buf.len();
    // Chunk index `r + k` modulo n, for k in -n..=n.
    let at = |k: isize| chunk((r as isize + k).rem_euclid(n as isize) as usize, n, count);
    // Reduce-scatter, N-1 steps: send chunk r-s, receive chunk r-s-1 and add
    // it to our own copy; the partial sum travels one hop per step.
    for s in 0..n as isize - 1 {
        right.send(buf[at(-s)].to_vec())?;
        let got = left.recv()?;
        for (mine, theirs) in buf[at(-s - 1)].iter_mut().zip(got) {
            *mine += theirs;
        }
    }
    // Now rank r holds the complete sum of chunk r+1.
    // All-gather, N-1 steps: send chunk r+1-s, receive chunk r-s, overwrite.
    for s in 0..n as isize - 1 {
        right.send(buf[at(1 - s)].to_vec())?;
        let got = left.recv()?;
        buf[at(-s)].copy_from_slice(&got);
    }
    Ok(buf)
}

fn main() -> Res<()> {
    let (n, count) = (4, 10);
    // Small integers, so the f64 sums are exact in any order.
    let inputs: Vec<Vec<f64>> = (0..n)
        .map(|r| {
            (0..count)
                .map(|i| ((7 * r + 3 * i) % 11) as f64 - 5.0)
                .collect()
        })
        .collect();
    // Channel i carries what rank i receives; rank r sends into channel r+1.
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..n).map(|_| channel()).unzip();
    let handles: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(r, left)| {
            let right = senders[(r + 1) % n].clone();
            let buf = inputs[r].clone();
            thread::spawn(move || ring_rank(r, n, buf, right, left))
        })
        .collect();
    let expected: Vec<f64> = (0..count)
        .map(|i| inputs.iter().map(|x| x[i]).sum())
        .collect();
    for (r, h) in handles.into_iter().enumerate() {
        let got = h.join().map_err(|_| format!("rank {r} panicked"))??;
        if got != expected {
            return Err(format!("rank {r}: {got:?}, expected {expected:?}").into());
        }
    }
    println!("ring all-reduce of {count} elements on {n} threads: every rank holds {expected:?}");
    println!(
        "PASS: 2(N-1) = {} steps, each sending one chunk of about {count}/{n} elements",
        2 * (n - 1)
    );
    Ok(())
}
