//! Inputs and host-side verification (rayon).
//!
//! * [`Inputs::Exact`]: small integers. Every partial sum is an integer far
//!   below 2^24, so f32 addition is exact in any order and results must be
//!   bitwise equal to the reference.
//! * [`Inputs::Random`]: uniform floats in [-1, 1). The summation order of the
//!   ring differs from the reference's, so results are compared with an
//!   absolute tolerance from the standard error bound of recursive summation,
//!   `|err| <= (N-1)·u·Σ|x_i|` (u = 2^-24), doubled for safety.

use crate::element::Element;
use approx::AbsDiffEq;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// Which inputs to feed the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Inputs {
    /// Small integers: bitwise-exact results.
    Exact,
    /// Uniform random floats in [-1, 1): tolerance check.
    #[default]
    Random,
}

/// Rank r's input for `count` elements.
pub fn make_input<T: Element>(kind: Inputs, rank: usize, count: usize, seed: u64) -> Vec<T> {
    match kind {
        Inputs::Exact => (0..count)
            .into_par_iter()
            .map(|i| T::from_f64(exact_value(rank, i)))
            .collect(),
        Inputs::Random => {
            // One generator per 64Ki block so generation parallelises and
            // stays deterministic for a given seed.
            const BLOCK: usize = 1 << 16;
            let mut v = vec![T::default(); count];
            v.par_chunks_mut(BLOCK).enumerate().for_each(|(b, out)| {
                let s = seed
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .wrapping_add((rank as u64) << 40)
                    .wrapping_add(b as u64);
                let mut rng = rand::rngs::SmallRng::seed_from_u64(s);
                for x in out {
                    *x = T::from_f64(rng.gen_range(-1.0..1.0));
                }
            });
            v
        }
    }
}

/// The exact-valued input: an integer in -8..=8 that depends on rank and index.
pub fn exact_value(rank: usize, i: usize) -> f64 {
    (((i % 4099) * 7 + rank * 13) % 17) as f64 - 8.0
}

/// Inputs for every rank.
pub fn make_inputs<T: Element>(kind: Inputs, ranks: usize, count: usize, seed: u64) -> Vec<Vec<T>> {
    (0..ranks)
        .map(|r| make_input(kind, r, count, seed))
        .collect()
}

/// Element-wise reference sum in f64, and Σ|x| for the error bound.
pub struct Reference {
    pub sum: Vec<f64>,
    pub abs: Vec<f64>,
    pub ranks: usize,
}

pub fn reference<T: Element>(inputs: &[Vec<T>]) -> Reference {
    let count = inputs.first().map_or(0, Vec::len);
    let (sum, abs): (Vec<f64>, Vec<f64>) = (0..count)
        .into_par_iter()
        .map(|i| {
            inputs.iter().fold((0.0, 0.0), |(s, a), v| {
                let x = v[i].to_f64();
                (s + x, a + x.abs())
            })
        })
        .unzip();
    Reference {
        sum,
        abs,
        ranks: inputs.len(),
    }
}

impl Reference {
    /// The reference of `factor` times the sum (e.g. n^(k-1) after k in-place
    /// all-reduces of n ranks), with the error bound scaled alike.
    pub fn scaled(&self, factor: f64) -> Reference {
        Reference {
            sum: self.sum.iter().map(|x| x * factor).collect(),
            abs: self.abs.iter().map(|x| x * factor).collect(),
            ranks: self.ranks,
        }
    }
}

/// Outcome of a check.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Verdict {
    /// Wrong elements per rank.
    pub wrong: Vec<u64>,
    /// Largest absolute error seen.
    pub max_abs_err: f64,
    /// Largest error relative to Σ|x| at that element.
    pub max_rel_err: f64,
    /// Whether the comparison was bitwise.
    pub bitwise: bool,
    /// First wrong element, for the message: (rank, index, got, expected).
    pub first_wrong: Option<(usize, usize, f64, f64)>,
}

impl Verdict {
    pub fn total_wrong(&self) -> u64 {
        self.wrong.iter().sum()
    }
    pub fn passed(&self) -> bool {
        self.total_wrong() == 0
    }
}

/// Unit roundoff of f32.
const U32: f64 = 1.0 / (1u64 << 24) as f64;

/// Compare every rank's output with the reference. `exact` demands bitwise
/// equality with the (exactly representable) reference.
pub fn check<T: Element>(outputs: &[Vec<T>], r: &Reference, exact: bool) -> Verdict {
    let factor = 2.0 * (r.ranks.max(2) - 1) as f64 * U32;
    let mut v = Verdict {
        bitwise: exact,
        ..Verdict::default()
    };
    for (rank, out) in outputs.iter().enumerate() {
        let (wrong, max_abs, max_rel, first) = out
            .par_iter()
            .enumerate()
            .map(|(i, x)| {
                let got = x.to_f64();
                let (want, bound) = match (r.sum.get(i), r.abs.get(i)) {
                    (Some(&s), Some(&a)) => (s, a * factor),
                    _ => (f64::NAN, 0.0),
                };
                let ok = if exact {
                    x.bits() == T::from_f64(want).bits()
                } else {
                    got.abs_diff_eq(&want, bound + f64::MIN_POSITIVE)
                };
                let err = if got.is_nan() || want.is_nan() {
                    f64::INFINITY
                } else {
                    (got - want).abs()
                };
                let scale = r.abs.get(i).copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
                let first = (!ok).then_some((rank, i, got, want));
                (u64::from(!ok), err, err / scale, first)
            })
            .reduce(
                || (0, 0.0, 0.0, None),
                |a, b| (a.0 + b.0, a.1.max(b.1), a.2.max(b.2), a.3.or(b.3)),
            );
        v.wrong.push(wrong);
        v.max_abs_err = v.max_abs_err.max(max_abs);
        v.max_rel_err = v.max_rel_err.max(max_rel);
        if v.first_wrong.is_none() {
            v.first_wrong = first;
        }
    }
    v
}

/// Compare two sets of outputs (e.g. ring vs NCCL). Bitwise when `exact`,
/// otherwise within the summation error bound of `r`.
pub fn compare<T: Element>(a: &[Vec<T>], b: &[Vec<T>], r: &Reference, exact: bool) -> Verdict {
    let as_ref = |outs: &[Vec<T>], rank: usize| Reference {
        sum: outs[rank].iter().map(|x| x.to_f64()).collect(),
        abs: r.abs.clone(),
        ranks: r.ranks,
    };
    let mut v = Verdict {
        bitwise: exact,
        ..Verdict::default()
    };
    for rank in 0..a.len().min(b.len()) {
        let part = check(std::slice::from_ref(&a[rank]), &as_ref(b, rank), exact);
        v.wrong.push(part.total_wrong());
        v.max_abs_err = v.max_abs_err.max(part.max_abs_err);
        v.max_rel_err = v.max_rel_err.max(part.max_rel_err);
        if v.first_wrong.is_none() {
            v.first_wrong = part.first_wrong.map(|(_, i, g, w)| (rank, i, g, w));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_inputs_are_small_integers() {
        for r in 0..9 {
            for i in 0..5000 {
                let x = exact_value(r, i);
                assert!(x.fract() == 0.0 && x.abs() <= 8.0);
            }
        }
    }

    #[test]
    fn detects_a_wrong_element() {
        let inputs: Vec<Vec<f32>> = make_inputs(Inputs::Random, 3, 1000, 7);
        let r = reference(&inputs);
        let mut out: Vec<Vec<f32>> = (0..3)
            .map(|_| r.sum.iter().map(|&x| x as f32).collect())
            .collect();
        assert!(check(&out, &r, false).passed());
        out[2][500] += 1e-3;
        let v = check(&out, &r, false);
        assert_eq!(v.wrong, vec![0, 0, 1]);
        assert_eq!(v.first_wrong.map(|w| (w.0, w.1)), Some((2, 500)));
    }

    #[test]
    fn random_inputs_are_deterministic() {
        let a: Vec<f32> = make_input(Inputs::Random, 1, 100_000, 3);
        let b: Vec<f32> = make_input(Inputs::Random, 1, 100_000, 3);
        let c: Vec<f32> = make_input(Inputs::Random, 2, 100_000, 3);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
