//! The ring schedule: pure index arithmetic, no I/O, no unsafe code.
//!
//! Every backend (CPU, CUDA) and the `trace` command take their chunk ranges and
//! their per-step send/receive indices from this module; none recomputes them.
//!
//! # Chunking
//! A buffer of `count` elements is cut into `n` contiguous chunks.
//! * Boundaries fall on 16-byte multiples where possible: the buffer is first
//!   counted in *units* of `16 / size_of::<T>()` elements (4 for `f32`), and the
//!   units are dealt out: every chunk gets `units / n`, and the remainder
//!   `units % n` goes one extra unit each to the **first** chunks. The few
//!   elements past the last whole unit (fewer than one unit) join the last chunk,
//!   so every inner boundary stays aligned.
//! * When there are fewer units than chunks (a tiny buffer), alignment is
//!   impossible for all of them; then the elements themselves are dealt out the
//!   same way (`count / n` each, the remainder to the first chunks). `count < n`
//!   leaves the last chunks empty, and `count == 0` leaves them all empty.
//!
//! # Ring steps
//! Rank `r` sends to its right neighbour `(r + 1) % n` and receives from its left
//! neighbour `(r + n - 1) % n`. There are `n - 1` Reduce-Scatter steps and `n - 1`
//! All-Gather steps. At step `s` (0-based), all indices mod `n`:
//!
//! | phase | rank `r` sends chunk | rank `r` receives chunk |
//! | --- | --- | --- |
//! | Reduce-Scatter | `r - s` | `r - s - 1` (and adds it into its own copy) |
//! | All-Gather | `r + 1 - s` | `r - s` (and overwrites its own copy) |
//!
//! Invariants (tested exhaustively below):
//! * what `r` receives at a step is exactly what its left neighbour sends;
//! * during Reduce-Scatter the chunk `r` sends at step `s + 1` is the one it
//!   received (and reduced) at step `s`, so partial sums travel round the ring;
//! * after the last Reduce-Scatter step rank `r` owns the complete sum of chunk
//!   [`Ring::owned_chunk`]`(r) = r + 1`, which is what it first sends in All-Gather.

use std::ops::Range;

/// Which half of the ring all-reduce a step belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Phase {
    /// Partial sums travel round the ring and are added at each hop.
    ReduceScatter,
    /// Complete chunks travel round the ring and overwrite stale copies.
    AllGather,
}

impl Phase {
    /// Short label used in traces.
    pub fn label(self) -> &'static str {
        match self {
            Phase::ReduceScatter => "reduce-scatter",
            Phase::AllGather => "all-gather",
        }
    }
}

/// How a buffer of `count` elements is cut into `n` chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkLayout {
    count: usize,
    bounds: Vec<usize>,
}

impl ChunkLayout {
    /// Cut `count` elements of `elem_size` bytes into `n` chunks (see the module doc).
    ///
    /// `n` must be at least 1 and `elem_size` at least 1; callers validate this
    /// (the engine rejects 0 ranks with a typed error before reaching here). A
    /// zero is treated as one so that this function never panics.
    pub fn new(count: usize, n: usize, elem_size: usize) -> Self {
        let n = n.max(1);
        let unit = (16 / elem_size.max(1)).max(1);
        let units = count / unit;
        let mut bounds = Vec::with_capacity(n + 1);
        bounds.push(0);
        if units >= n {
            // Aligned layout: deal whole 16-byte units, remainder to the first chunks.
            let (base, extra) = (units / n, units % n);
            let mut at = 0;
            for c in 0..n {
                at += (base + usize::from(c < extra)) * unit;
                bounds.push(at);
            }
            // The sub-unit tail joins the last chunk.
            if let Some(last) = bounds.last_mut() {
                *last = count;
            }
        } else {
            // Too small to align every chunk: deal single elements.
            let (base, extra) = (count / n, count % n);
            let mut at = 0;
            for c in 0..n {
                at += base + usize::from(c < extra);
                bounds.push(at);
            }
        }
        ChunkLayout { count, bounds }
    }

    /// `n` chunks of exactly `chunk` elements each: the layout of
    /// reduce-scatter and all-gather, whose chunk boundaries the caller fixes
    /// (NCCL's `recvcount` / `sendcount`).
    pub fn uniform(chunk: usize, n: usize) -> Self {
        let n = n.max(1);
        ChunkLayout {
            count: chunk * n,
            bounds: (0..=n).map(|c| c * chunk).collect(),
        }
    }

    /// Number of chunks (the number of ranks).
    pub fn chunks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Total element count.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Element range of chunk `c` (taken mod the chunk count).
    pub fn range(&self, c: usize) -> Range<usize> {
        let c = c % self.chunks();
        self.bounds[c]..self.bounds[c + 1]
    }

    /// Length of chunk `c`.
    pub fn len(&self, c: usize) -> usize {
        self.range(c).len()
    }

    /// True when the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Length of the largest chunk (the receive scratch a rank needs).
    pub(crate) fn max_len(&self) -> usize {
        (0..self.chunks()).map(|c| self.len(c)).max().unwrap_or(0)
    }
}

/// How many bytes a device keeps per byte of LL slot
/// ([`crate::plan::Buf::Lines`]): each line of 8 data bytes is 16 bytes on
/// the wire (two words of 4 data bytes and the call's 4-byte flag).
pub(crate) const LL_WIDEN: usize = 2;

/// How an LL kernel cuts a buffer over `n` ranks: (chunks, slots per half).
/// The ring cuts it into `n` chunks and gives each of its 2(n-1) steps a
/// slot; the one-shot (2 ranks) sends the whole buffer as one chunk in one
/// step.
pub(crate) fn ll_cut(n: usize, one_shot: bool) -> (usize, usize) {
    if one_shot {
        (1, 1)
    } else {
        (n, 2 * n.saturating_sub(1))
    }
}

/// Elements of one slot of an LL kernel, for `count` elements of
/// `elem_size` bytes cut into `n` chunks: the largest chunk of
/// [`ChunkLayout::new`], rounded up to whole lines of 8 data bytes.
pub(crate) fn ll_slot_len(count: usize, n: usize, elem_size: usize) -> usize {
    let max_len = ChunkLayout::new(count, n, elem_size).max_len();
    let size = elem_size.max(1);
    max_len.saturating_mul(size).div_ceil(8).saturating_mul(8) / size
}

/// Elements of one slot of the Simple ring kernel's scratch, for `count`
/// elements of `elem_size` bytes cut into `n` chunks: the largest chunk of
/// [`ChunkLayout::new`], rounded up to 16 bytes (so every slot starts
/// 16-byte aligned when the first does).
pub(crate) fn simple_slot_len(count: usize, n: usize, elem_size: usize) -> usize {
    let max_len = ChunkLayout::new(count, n, elem_size).max_len();
    let size = elem_size.max(1);
    max_len.saturating_mul(size).div_ceil(16).saturating_mul(16) / size
}

/// Bytes of one slot of an LL kernel on a device: [`ll_slot_len`]'s
/// lines, [`LL_WIDEN`] times their data (every element type's size divides
/// the line's 8 data bytes). The CUDA backend's: without it, its tests'.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn ll_slot_bytes(count: usize, n: usize, elem_size: usize) -> usize {
    ll_slot_len(count, n, elem_size)
        .saturating_mul(elem_size)
        .saturating_mul(LL_WIDEN)
}

/// Cut `range` into at most `pieces` contiguous slices for pipelining, with the
/// same rules as [`ChunkLayout`] (16-byte aligned inner boundaries where
/// possible). Empty slices are dropped, so the result may be shorter.
pub fn slices(range: Range<usize>, pieces: usize, elem_size: usize) -> Vec<Range<usize>> {
    let layout = ChunkLayout::new(range.len(), pieces.max(1), elem_size);
    (0..layout.chunks())
        .map(|i| {
            let r = layout.range(i);
            range.start + r.start..range.start + r.end
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// The rank to the right of `r` (the one `r` sends to).
pub fn right(r: usize, n: usize) -> usize {
    (r + 1) % n
}

/// The rank to the left of `r` (the one `r` receives from).
pub fn left(r: usize, n: usize) -> usize {
    (r + n - 1) % n
}

fn wrap(x: isize, n: usize) -> usize {
    x.rem_euclid(n as isize) as usize
}

/// Chunk that rank `r` sends at step `s` of `phase` in a ring of `n`.
pub(crate) fn send_chunk(phase: Phase, r: usize, s: usize, n: usize) -> usize {
    let (r, s) = (r as isize, s as isize);
    match phase {
        Phase::ReduceScatter => wrap(r - s, n),
        Phase::AllGather => wrap(r + 1 - s, n),
    }
}

/// Chunk that rank `r` receives at step `s` of `phase` in a ring of `n`.
pub(crate) fn recv_chunk(phase: Phase, r: usize, s: usize, n: usize) -> usize {
    let (r, s) = (r as isize, s as isize);
    match phase {
        Phase::ReduceScatter => wrap(r - s - 1, n),
        Phase::AllGather => wrap(r - s, n),
    }
}

/// The chunk whose complete sum rank `r` holds after Reduce-Scatter.
pub(crate) fn owned_chunk(r: usize, n: usize) -> usize {
    (r + 1) % n
}

/// Number of steps in each phase.
pub fn steps(n: usize) -> usize {
    n.saturating_sub(1)
}

/// A ring of `n` ranks with its chunks rotated by `rot`: chunk `c` of the
/// formulas above becomes chunk `(c - rot) mod n`. With `rot = 0` (the
/// all-reduce) Reduce-Scatter leaves rank r with chunk `r + 1`; with
/// `rot = 1` it leaves rank r with chunk `r` and All-Gather starts from chunk
/// `r`: NCCL's reduce-scatter and all-gather, where rank r's own chunk is
/// chunk r.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// The ranks.
    pub n: usize,
    /// How far chunk numbers are rotated (0: all-reduce, 1: rank r owns
    /// chunk r).
    pub rot: usize,
}

impl Ring {
    /// The all-reduce ring.
    pub fn all_reduce(n: usize) -> Ring {
        Ring { n, rot: 0 }
    }

    /// The ring in which rank r's own chunk is chunk r.
    pub(crate) fn own_chunk(n: usize) -> Ring {
        Ring { n, rot: 1 }
    }

    fn rotate(&self, c: usize) -> usize {
        (c + self.n - self.rot % self.n.max(1)) % self.n.max(1)
    }

    /// The chunk rank `r` sends at step `s` of `phase`.
    pub(crate) fn send_chunk(&self, phase: Phase, r: usize, s: usize) -> usize {
        self.rotate(send_chunk(phase, r, s, self.n))
    }

    /// The chunk rank `r` receives at step `s` of `phase`.
    pub(crate) fn recv_chunk(&self, phase: Phase, r: usize, s: usize) -> usize {
        self.rotate(recv_chunk(phase, r, s, self.n))
    }

    /// The chunk rank `r` holds reduced after Reduce-Scatter.
    pub fn owned_chunk(&self, r: usize) -> usize {
        self.rotate(owned_chunk(r, self.n))
    }

    /// Rank `r`'s right neighbour (it sends there).
    pub fn right(&self, r: usize) -> usize {
        right(r, self.n)
    }

    /// Rank `r`'s left neighbour (it receives from there).
    pub fn left(&self, r: usize) -> usize {
        left(r, self.n)
    }

    /// Steps per phase: `n - 1`.
    pub fn steps(&self) -> usize {
        steps(self.n)
    }
}

/// One step of the ring as seen by one rank. A test oracle.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RankStep {
    /// Reduce-Scatter or All-Gather.
    pub phase: Phase,
    /// The step within the phase.
    pub step: usize,
    /// The rank.
    pub rank: usize,
    /// The rank it sends to (its right neighbour).
    pub to: usize,
    /// The rank it receives from (its left neighbour).
    pub from: usize,
    /// The chunk it sends.
    pub send_chunk: usize,
    /// That chunk's elements.
    pub send: Range<usize>,
    /// The chunk it receives.
    pub recv_chunk: usize,
    /// That chunk's elements.
    pub recv: Range<usize>,
}

/// Every step of both phases for rank `r`, in execution order. A test oracle.
#[cfg(test)]
pub(crate) fn rank_steps(layout: &ChunkLayout, r: usize) -> Vec<RankStep> {
    let n = layout.chunks();
    [Phase::ReduceScatter, Phase::AllGather]
        .into_iter()
        .flat_map(|phase| {
            (0..steps(n)).map(move |s| {
                let sc = send_chunk(phase, r, s, n);
                let rc = recv_chunk(phase, r, s, n);
                RankStep {
                    phase,
                    step: s,
                    rank: r,
                    to: right(r, n),
                    from: left(r, n),
                    send_chunk: sc,
                    send: layout.range(sc),
                    recv_chunk: rc,
                    recv: layout.range(rc),
                }
            })
        })
        .collect()
}

/// Bytes one rank sends (and, equally, receives) in a ring all-reduce. A test oracle.
#[cfg(test)]
pub(crate) fn ring_bytes_per_rank(layout: &ChunkLayout, r: usize, elem_size: usize) -> usize {
    rank_steps(layout, r)
        .iter()
        .map(|s| s.send.len() * elem_size)
        .sum()
}

/// The formula `2(N-1)/N * D`, in bytes, for comparison with the exact count.
pub fn ring_bytes_formula(n: usize, bytes: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    2.0 * (n as f64 - 1.0) / n as f64 * bytes as f64
}

#[cfg(test)]
mod tests;
