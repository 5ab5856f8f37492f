//! Inputs, references and checks for every data type and reduction (rayon).
//!
//! # What the reference is
//!
//! [`reference`](fn@reference) folds `combine_one` over ranks 0, 1, ..., N-1 in order,
//! with the flags a ring or one-shot all-reduce uses (first reduce: both
//! operands pre-multiplied; later reduces: the incoming input only; last
//! reduce: the post-divide), i.e. NCCL's semantics for the element type:
//! integers wrap, floats round once per operation to the type (FP8 through
//! half precision, with saturation), `avg` is a pre-multiply by `1/N` rounded
//! to the type on floats and a truncating post-divide on integers.
//!
//! # Which comparisons are bitwise, and why
//!
//! A result is compared **bitwise** with the reference when it cannot depend
//! on the reduction order (the ring reduces chunk `c` in the order
//! `c+1, c+2, ...`, one-shot in another, NCCL in yet another):
//!
//! * **Integer types**: wrapping `+` and `*` are associative and commutative,
//!   `max`/`min` too, and `avg` divides the (order-independent) wrapped sum
//!   once at the end.
//! * **`max` and `min`** on floats: the result is one of the inputs whatever
//!   the order (maxNum/minNum are associative and commutative, NaN and signed
//!   zeros included, see [`combine`](mod@ringreduce::element::combine)).
//! * **N <= 2**: `a (op) b` is commutative bit for bit.
//! * **[`Inputs::Exact`]**: every input is a small integer chosen so that
//!   every partial result of every reduction order is exactly representable in
//!   the type, so no operation ever rounds: `sum`/`avg` use integers in
//!   `[-m, m]` (unsigned `[0, m]`) with `N*m` below the type's exact-integer
//!   limit `2^(mantissa bits + 1)` and `m <= 8` (when N alone exceeds the limit,
//!   at most that many ranks are non-zero per element, each `+-1`); `prod`
//!   uses `+-1` and `+-2` with at most `log2(max finite)` twos per element;
//!   `max`/`min` use `[-8, 8]`. For `avg` on floats the pre-multiply by
//!   `1/N` is exact only when N is a power of two, so `avg` on floats is
//!   bitwise with exact inputs only for such N.
//!
//! Otherwise (random float inputs, N >= 3, `sum`/`avg`/`prod`) the order
//! changes the rounding, so `expect` holds the correctly rounded exact result
//! and each element has an absolute tolerance `bound[i]` against it, from the
//! standard error bounds of recursive summation and products (Higham,
//! *Accuracy and Stability of Numerical Algorithms*, ch. 3-4) with
//! `u = 2^-(mantissa bits + 1)` the unit roundoff of the type (for FP8 plus
//! half's `2^-11`, since each FP8 operation rounds to half first), `tiny` the
//! type's smallest subnormal (the absolute error of a rounding near zero),
//! `S = sum |x_r|`:
//!
//! * `sum`: `2 (N-1) (u S + tiny)`: N-1 roundings of partial sums, each at
//!   most `u` times a partial sum of magnitudes (`<= S`), doubled to cover the
//!   rounding of `expect` itself and second-order terms.
//! * `avg`: `2 (|s - 1/N| S + (N+1) u s' S + 2N tiny)` with `s` the rounded
//!   scalar `1/N` in the type and `s' = max(s, 1/N)`: the scalar's own
//!   rounding, one rounding per pre-multiply and N-1 per partial sum.
//! * `prod`: `2 N (u |P| + tiny M)` with `P` the exact product and
//!   `M = prod max(1, |x_r|)`: N-1 relative roundings, plus underflows near
//!   zero that later factors can magnify by at most `M`.
//!
//! [`compare`] (e.g. ringreduce against NCCL) is bitwise when the reference is
//! bitwise, and otherwise allows `2 bound[i]` between the two results (each is
//! within `bound[i]` of `expect`).
//!
//! NaN: any NaN matches any NaN; a NaN where a number is expected (or a
//! number where a NaN is expected) is wrong. Random and exact inputs never
//! contain NaN or infinities.

use rayon::prelude::*;
use ringreduce::element::combine::{post_op, pre_op};
use ringreduce::element::{combine_one, Combine, DataType, Element, ReduceOp};
use std::fmt;
use std::str::FromStr;

mod verdict;
pub use verdict::Verdict;

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny deterministic generator,
/// good enough for test inputs and cheap to seed per block; public for
/// callers that draw their own cases from a seed (`ringreduce soak`).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// Advance `state` and return the next output.
    #[inline]
    pub fn mix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        SplitMix64::mix(&mut self.state)
    }

    /// Uniform in [0, 1), 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Which inputs to feed the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Inputs {
    /// Small integers: every result is exact, checks are bitwise.
    Exact,
    /// Floats uniform in [-1, 1) (integers: uniform over the whole type):
    /// tolerance checks where the order matters.
    #[default]
    Random,
}

impl Inputs {
    pub const fn name(self) -> &'static str {
        match self {
            Inputs::Exact => "exact",
            Inputs::Random => "random",
        }
    }
}

impl FromStr for Inputs {
    type Err = String;
    fn from_str(s: &str) -> Result<Inputs, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "exact" => Ok(Inputs::Exact),
            "random" => Ok(Inputs::Random),
            other => Err(format!(
                "unknown inputs `{other}`: expected exact or random"
            )),
        }
    }
}

impl fmt::Display for Inputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The largest `K` such that every integer in `[-K, K]` (unsigned: `[0, K]`)
/// is exact in `dtype`: `2^(mantissa bits + 1)` for floats, the maximum for
/// integers (so exact inputs never wrap either).
fn exact_integers(dtype: DataType) -> u64 {
    let bits = 8 * dtype.size() as u32 - u32::from(dtype.is_signed());
    match dtype.format() {
        Some(f) => 1u64 << (f.man_bits + 1).min(63),
        None => u64::MAX >> (64 - bits),
    }
}

/// The largest `k` with `2^k` finite in `dtype` (integers: `2^k` fits).
fn max_exponent(dtype: DataType) -> u64 {
    match dtype.format() {
        Some(f) => ((1i64 << f.exp_bits) - if f.has_inf { 2 } else { 1 } - f.bias as i64) as u64,
        None => 8 * dtype.size() as u64 - 1 - u64::from(dtype.is_signed()),
    }
}

/// The exact-valued input of `rank` at index `i` (see the module docs): a
/// small integer, depending on rank and index, such that every partial
/// result of `op` over `ranks` ranks, in any order, is exact in `dtype`.
/// For `float`/`sum` with up to 2^21 ranks this is
/// `((i % 4099) * 7 + rank * 13) % 17 - 8`. Integer types follow the same
/// rules with their own limits, so exact inputs never wrap.
pub fn exact_value(dtype: DataType, op: ReduceOp, ranks: usize, rank: usize, i: usize) -> f64 {
    let n = ranks.max(1);
    let signed = dtype.is_signed();
    // The historical pattern for 17 values; a hash of (rank, i) for other
    // ranges (7*i would cancel modulo 7).
    let base = ((i % 4099) * 7 + rank * 13) as u64;
    let mut h = ((i as u64) << 20) ^ rank as u64;
    let hash = SplitMix64::mix(&mut h);
    let pick = |m: u64| {
        let k = if signed { 2 * m + 1 } else { m + 1 };
        let v = if k == 17 { base % 17 } else { hash % k };
        if signed {
            v as f64 - m as f64
        } else {
            v as f64
        }
    };
    match op {
        ReduceOp::Sum | ReduceOp::Avg => {
            let cap = exact_integers(dtype);
            if n as u64 <= cap {
                pick((cap / n as u64).min(8))
            } else if (((i + rank) % n) as u64) < cap {
                // More ranks than exact integers: at most `cap` ranks are
                // non-zero at each index, each +-1 (unsigned: 0 or 1).
                pick(1)
            } else {
                0.0
            }
        }
        ReduceOp::Max | ReduceOp::Min => pick(8),
        ReduceOp::Prod => {
            // k twos at index i (k <= the largest exponent), on ranks
            // (i+rank) % n < k; the rest +-1. Every partial product is a power
            // of two in magnitude, at most 2^k.
            let most = max_exponent(dtype).min(n as u64);
            let k = ((i / 3) as u64) % (most + 1);
            let mag = if (((i + rank) % n) as u64) < k {
                2.0
            } else {
                1.0
            };
            let neg = signed && (i * 5 + rank * 3) % 7 < 3;
            if neg {
                -mag
            } else {
                mag
            }
        }
    }
}

/// Rank `rank`'s input for `count` elements: deterministic for a given
/// `(kind, op, ranks, rank, seed)`; generated in parallel for large counts.
/// Random inputs do not depend on `op` or `ranks`. Memory that cannot be
/// had is [`Error::OutOfMemory`](ringreduce::Error::OutOfMemory).
pub fn make_input<T: Element>(
    kind: Inputs,
    op: ReduceOp,
    ranks: usize,
    rank: usize,
    count: usize,
    seed: u64,
) -> ringreduce::error::Result<Vec<T>> {
    let mut v =
        ringreduce::os::zeroed::<T>(count, &format!("rank {rank}'s input of {count} elements"))?;
    match kind {
        Inputs::Exact => v.par_iter_mut().enumerate().for_each(|(i, x)| {
            *x = T::from_f64(exact_value(T::DTYPE, op, ranks, rank, i));
        }),
        Inputs::Random => {
            // One generator per 64Ki block so generation parallelises and
            // stays deterministic for a given seed.
            const BLOCK: usize = 1 << 16;
            let float = T::DTYPE.is_float();
            v.par_chunks_mut(BLOCK).enumerate().for_each(|(b, out)| {
                let mut s =
                    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((rank as u64) << 40) ^ b as u64;
                let mut rng = SplitMix64::new(SplitMix64::mix(&mut s));
                for x in out {
                    *x = if float {
                        T::from_f64(rng.next_f64() * 2.0 - 1.0)
                    } else {
                        T::from_bits(rng.next_u64())
                    };
                }
            });
        }
    }
    Ok(v)
}

/// Inputs for every rank (memory that cannot be had:
/// [`Error::OutOfMemory`](ringreduce::Error::OutOfMemory)).
pub fn make_inputs<T: Element>(
    kind: Inputs,
    op: ReduceOp,
    ranks: usize,
    count: usize,
    seed: u64,
) -> ringreduce::error::Result<Vec<Vec<T>>> {
    (0..ranks)
        .map(|r| make_input(kind, op, ranks, r, count, seed))
        .collect()
}

/// Whether the all-reduce of `ranks` ranks is bitwise reproducible in any
/// order (see the module docs).
pub fn is_bitwise(dtype: DataType, op: ReduceOp, ranks: usize, kind: Inputs) -> bool {
    !dtype.is_float()
        || matches!(op, ReduceOp::Max | ReduceOp::Min)
        || ranks <= 2
        || (kind == Inputs::Exact && (op != ReduceOp::Avg || ranks.is_power_of_two()))
}

/// An expected result.
#[derive(Debug, Clone)]
pub struct Reference<T> {
    /// The expected elements: NCCL's in-order fold when `bitwise`, otherwise
    /// the correctly rounded exact result.
    pub expect: Vec<T>,
    /// Absolute tolerance per element against `expect` (`None` when bitwise).
    pub bound: Option<Vec<f64>>,
    /// Whether results must equal `expect` bit for bit (NaN matching NaN).
    pub bitwise: bool,
    pub ranks: usize,
    pub op: ReduceOp,
}

impl<T: Element> Reference<T> {
    /// The reference of `factor` times the result, with the bound scaled
    /// alike: e.g. `n^(k-1)` after k in-place `sum` all-reduces of n ranks.
    /// Exact (and so still bitwise) when the scaled values are representable,
    /// as with exact inputs and powers of small rank counts.
    pub fn scaled(&self, factor: f64) -> Reference<T> {
        Reference {
            expect: self
                .expect
                .par_iter()
                .map(|x| T::from_f64(x.to_f64() * factor))
                .collect(),
            bound: self
                .bound
                .as_ref()
                .map(|b| b.par_iter().map(|x| x * factor.abs()).collect()),
            bitwise: self.bitwise,
            ranks: self.ranks,
            op: self.op,
        }
    }
}

/// NCCL's in-order fold of element `i` over all ranks.
#[inline]
fn fold<T: Element>(c: &Combine, inputs: &[Vec<T>], i: usize) -> T {
    match inputs {
        [] => T::default(),
        [x] => post_op(c, pre_op(c, x[i])),
        [x0, x1, rest @ ..] => {
            let mut acc = combine_one(&c.with_flags(true, true, rest.is_empty()), x0[i], x1[i]);
            for (k, x) in rest.iter().enumerate() {
                acc = combine_one(&c.with_flags(false, true, k + 1 == rest.len()), acc, x[i]);
            }
            acc
        }
    }
}

/// All-reduce reference of `inputs` (one vector per rank; elements beyond
/// the shortest are ignored). See the module docs for `expect` and `bound`.
pub fn reference<T: Element>(inputs: &[Vec<T>], op: ReduceOp, kind: Inputs) -> Reference<T> {
    let n = inputs.len();
    let count = inputs.iter().map(Vec::len).min().unwrap_or(0);
    let dtype = T::DTYPE;
    let c = Combine::new(dtype, op, n);
    let bitwise = is_bitwise(dtype, op, n, kind);
    let fmt = match dtype.format() {
        Some(f) if !bitwise => f,
        _ => {
            let expect = (0..count)
                .into_par_iter()
                .map(|i| fold(&c, inputs, i))
                .collect();
            return Reference {
                expect,
                bound: None,
                bitwise: true,
                ranks: n,
                op,
            };
        }
    };
    let fp8 = dtype.size() == 1;
    let u = fmt.unit_roundoff()
        + if fp8 {
            ringreduce::element::minifloat::Format::F16.unit_roundoff()
        } else {
            0.0
        };
    let tiny = fmt.min_subnormal();
    let nf = n as f64;
    let inv = 1.0 / nf;
    let s = T::from_bits(c.scalar).to_f64();
    let (expect, bound): (Vec<T>, Vec<f64>) = (0..count)
        .into_par_iter()
        .map(|i| {
            let (exact, b) = match op {
                ReduceOp::Prod => {
                    let (p, m) = inputs.iter().fold((1.0f64, 1.0f64), |(p, m), v| {
                        let x = v[i].to_f64();
                        (p * x, m * x.abs().max(1.0))
                    });
                    (p, 2.0 * nf * (u * p.abs() + tiny * m))
                }
                _ => {
                    // Neumaier's compensated sum: exact to ~2^-53 relative.
                    let (mut sum, mut comp, mut abs) = (0.0f64, 0.0f64, 0.0f64);
                    for v in inputs {
                        let x = v[i].to_f64();
                        let t = sum + x;
                        comp += if sum.abs() >= x.abs() {
                            (sum - t) + x
                        } else {
                            (x - t) + sum
                        };
                        sum = t;
                        abs += x.abs();
                    }
                    let sum = sum + comp;
                    if op == ReduceOp::Avg {
                        let b = (s - inv).abs() * abs
                            + (nf + 1.0) * u * s.max(inv) * abs
                            + 2.0 * nf * tiny;
                        (sum / nf, 2.0 * b)
                    } else {
                        (sum, 2.0 * (nf - 1.0) * (u * abs + tiny))
                    }
                }
            };
            (T::from_f64(exact), b)
        })
        .unzip();
    Reference {
        expect,
        bound: Some(bound),
        bitwise: false,
        ranks: n,
        op,
    }
}

/// Reduce-scatter of N ranks' inputs of `N*c` elements: rank r's expected
/// output is chunk r (elements `r*c..(r+1)*c`) of the all-reduce reference,
/// with its bounds. (`c` = length / N, rounded down.)
pub fn reference_reduce_scatter<T: Element>(
    inputs: &[Vec<T>],
    op: ReduceOp,
    kind: Inputs,
) -> Vec<Reference<T>> {
    let full = reference(inputs, op, kind);
    let n = inputs.len();
    let c = full.expect.len().checked_div(n).unwrap_or(0);
    (0..n)
        .map(|r| Reference {
            expect: full.expect[r * c..(r + 1) * c].to_vec(),
            bound: full.bound.as_ref().map(|b| b[r * c..(r + 1) * c].to_vec()),
            bitwise: full.bitwise,
            ranks: n,
            op,
        })
        .collect()
}

/// Broadcast: every rank's expected output is the root's input (always
/// bitwise; `op` is meaningless, set to Sum).
pub fn reference_broadcast<T: Element>(inputs: &[Vec<T>], root: usize) -> Reference<T> {
    Reference {
        expect: inputs.get(root).cloned().unwrap_or_default(),
        bound: None,
        bitwise: true,
        ranks: inputs.len(),
        op: ReduceOp::Sum,
    }
}

/// All-gather: every rank's expected output is the concatenation of all
/// inputs, in rank order (always bitwise; `op` is meaningless, set to Sum).
pub fn reference_all_gather<T: Element>(inputs: &[Vec<T>]) -> Reference<T> {
    Reference {
        expect: inputs.concat(),
        bound: None,
        bitwise: true,
        ranks: inputs.len(),
        op: ReduceOp::Sum,
    }
}

/// How many elements differ in their bits between `a` (e.g. a send buffer
/// read back) and `b` (the input it was loaded from), counting a length
/// difference as that many differing elements. A collective must never write
/// its input out of place, so this should be 0.
pub fn changed<T: Element>(a: &[T], b: &[T]) -> u64 {
    let same = a
        .par_iter()
        .zip(b.par_iter())
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count() as u64;
    same + a.len().abs_diff(b.len()) as u64
}

/// One element: (ok, |got - want|). `bound` is `None` for a bitwise check.
#[inline]
fn judge<T: Element>(got: T, want: T, bound: Option<f64>) -> (bool, f64) {
    let (g, w) = (got.to_f64(), want.to_f64());
    let err = match (g.is_nan(), w.is_nan()) {
        (true, true) => 0.0,
        (false, false) if g == w => 0.0,
        (false, false) => (g - w).abs(),
        _ => f64::INFINITY,
    };
    let ok = match bound {
        None => got.to_bits() == want.to_bits() || (g.is_nan() && w.is_nan()),
        Some(_) if g.is_nan() || w.is_nan() => g.is_nan() && w.is_nan(),
        Some(b) if w.is_finite() && b.is_finite() => err <= b,
        Some(_) => g == w,
    };
    (ok, if err.is_nan() { f64::INFINITY } else { err })
}

/// Per-chunk tally of a comparison.
#[derive(Clone, Copy, Default)]
struct Tally {
    wrong: u64,
    max_abs: f64,
    max_rel: f64,
    /// First wrong element: (index, got, expected).
    first: Option<(usize, f64, f64)>,
}

impl Tally {
    fn merge(self, o: Tally) -> Tally {
        Tally {
            wrong: self.wrong + o.wrong,
            max_abs: self.max_abs.max(o.max_abs),
            max_rel: self.max_rel.max(o.max_rel),
            first: self.first.or(o.first),
        }
    }
}

/// Compare `got` with `want` element by element: bitwise when `bound` is
/// `None`, else within `k * bound[i]`. Elements of the longer slice beyond
/// the shorter one are wrong. Chunked for rayon; the bitwise loop only looks
/// closer at elements whose bits differ.
fn tally<T: Element>(got: &[T], want: &[T], bound: Option<&[f64]>, k: f64) -> Tally {
    const CHUNK: usize = 1 << 15;
    let n = got.len().min(want.len());
    let mut t = got[..n]
        .par_chunks(CHUNK)
        .zip(want[..n].par_chunks(CHUNK))
        .enumerate()
        .map(|(c, (g, w))| {
            let base = c * CHUNK;
            let mut t = Tally::default();
            for (j, (&x, &y)) in g.iter().zip(w).enumerate() {
                let b = match bound {
                    None if x.to_bits() == y.to_bits() => continue,
                    None => None,
                    Some(b) => Some(k * b.get(base + j).copied().unwrap_or(0.0)),
                };
                let (ok, err) = judge(x, y, b);
                let wf = y.to_f64().abs();
                if wf.is_finite() && wf > 0.0 {
                    t.max_rel = t.max_rel.max(err / wf);
                }
                t.max_abs = t.max_abs.max(err);
                if !ok {
                    t.wrong += 1;
                    if t.first.is_none() {
                        t.first = Some((base + j, x.to_f64(), y.to_f64()));
                    }
                }
            }
            t
        })
        .reduce(Tally::default, Tally::merge);
    let extra = got.len().abs_diff(want.len());
    if extra > 0 {
        t.wrong += extra as u64;
        t.max_abs = f64::INFINITY;
        let at = |s: &[T]| s.get(n).map_or(f64::NAN, |x| x.to_f64());
        t.first = t.first.or(Some((n, at(got), at(want))));
    }
    t
}

/// Fold per-rank tallies into a verdict.
fn verdict(tallies: impl Iterator<Item = Tally>, bitwise: bool) -> Verdict {
    let mut v = Verdict {
        bitwise,
        ..Verdict::default()
    };
    for (rank, t) in tallies.enumerate() {
        v.wrong.push(t.wrong);
        v.max_abs_err = v.max_abs_err.max(t.max_abs);
        v.max_rel_err = v.max_rel_err.max(t.max_rel);
        if v.first_wrong.is_none() {
            v.first_wrong = t.first.map(|(i, g, w)| (rank, i, g, w));
        }
    }
    v
}

/// Check every rank's output against `r`: bitwise (NaN matching NaN) when
/// `r.bitwise`, otherwise within `r.bound`. Missing or extra elements are
/// wrong.
pub fn check<T: Element>(outputs: &[Vec<T>], r: &Reference<T>) -> Verdict {
    let bound = r.bound.as_deref().filter(|_| !r.bitwise);
    verdict(
        outputs.iter().map(|o| tally(o, &r.expect, bound, 1.0)),
        bound.is_none(),
    )
}

/// Compare two sets of outputs rank by rank (e.g. ringreduce against NCCL):
/// bitwise when `r.bitwise`, otherwise `|a - b| <= 2 bound` (each side may be
/// `bound` away from the reference). `first_wrong` holds (rank, index, a, b).
pub fn compare<T: Element>(a: &[Vec<T>], b: &[Vec<T>], r: &Reference<T>) -> Verdict {
    let bound = r.bound.as_deref().filter(|_| !r.bitwise);
    let empty: Vec<T> = Vec::new();
    verdict(
        (0..a.len().max(b.len())).map(|rank| {
            let x = a.get(rank).unwrap_or(&empty);
            let y = b.get(rank).unwrap_or(&empty);
            tally(x, y, bound, 2.0)
        }),
        bound.is_none(),
    )
}

#[cfg(test)]
mod tests;
