//! The CPU semantics of one reduce step, bitwise identical to the GPU kernels
//! (and to NCCL 2.28's `src/device/reduce_kernel.h`; the PTX kernels are
//! generated from the same table).
//!
//! `dst[i] = post(pre_a(a[i]) (op) pre_b(b[i]))`, where
//!
//! * `pre(x)` applies only for [`DevOp::PreMulSum`] and only when its flag is
//!   set: `x * s` rounded once in the type, `s` = the scalar's bits as the
//!   element type. Integers: wrapping multiply (never produced by lowering).
//! * `post(x)` applies only for [`DevOp::SumPostDiv`] and only when its flag
//!   is set: truncating division of the wrapped integer by the scalar (the
//!   rank count; 0 counts as 1), signed for signed types.
//! * `op`: Sum, PreMulSum and SumPostDiv add; Prod multiplies (integers
//!   wrap); Max/Min compare by value (integers signed per type; floats IEEE
//!   maxNum/minNum like `fmaxf`/`__hmax`: one NaN operand gives the other, two
//!   give the canonical NaN; `max(-0, +0) = +0`, `min(-0, +0) = -0`, which
//!   `__hmax`/`__hmin` document and `fmaxf`/`fminf` are ASSUMED to do: to be
//!   confirmed on the GPU).
//! * Every float operation rounds once to the type, to nearest even: f32/f64
//!   natively; half and bfloat16 as `round(f64(a) op f64(b))` (see `float_add`
//!   in the parent module for why that is the correctly rounded result); FP8
//!   as NCCL computes it, in half precision: `fp8_satfinite(round_f16(f64(a) op
//!   f64(b)))`, so an FP8 overflow (or an infinity, e.g. `max(inf, 1)` in E5M2)
//!   saturates to the largest finite value, and Max/Min results that are
//!   finite are exact. NaN results are the canonical NaN (all bits but the
//!   sign set).

use super::{DataType, DevOp, Element, ReduceOp};
use rayon::prelude::*;

/// One reduce step of a lowered reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Combine {
    /// The element type.
    pub dtype: DataType,
    /// The device's op.
    pub op: DevOp,
    /// The lowered scalar ([`Lowered::scalar`](super::Lowered)).
    pub scalar: u64,
    /// Pre-multiply operand `a` (PreMulSum only).
    pub pre_a: bool,
    /// Pre-multiply operand `b` (PreMulSum only).
    pub pre_b: bool,
    /// Divide the result (SumPostDiv only).
    pub post: bool,
}

impl Combine {
    /// Lower `op` for `dtype` and `ranks`; every flag off.
    pub fn new(dtype: DataType, op: ReduceOp, ranks: usize) -> Combine {
        let l = dtype.lower(op, ranks);
        Combine {
            dtype,
            op: l.op,
            scalar: l.scalar,
            pre_a: false,
            pre_b: false,
            post: false,
        }
    }

    /// The same step with these flags.
    pub fn with_flags(self, pre_a: bool, pre_b: bool, post: bool) -> Combine {
        Combine {
            pre_a,
            pre_b,
            post,
            ..self
        }
    }
}

/// The pre-op of `c` applied to one value, ignoring the flags: `x * scalar`
/// rounded in the type for PreMulSum, `x` otherwise.
#[inline]
pub fn pre_op<T: Element>(c: &Combine, x: T) -> T {
    if c.op == DevOp::PreMulSum {
        x.red_mul(T::from_bits(c.scalar))
    } else {
        x
    }
}

/// The post-op of `c` applied to one value, ignoring the flags: division by
/// the scalar for SumPostDiv, `x` otherwise.
#[inline]
pub fn post_op<T: Element>(c: &Combine, x: T) -> T {
    if c.op == DevOp::SumPostDiv {
        x.red_div(c.scalar)
    } else {
        x
    }
}

/// One element: `post(pre_a(a) (op) pre_b(b))`. `T` decides the type
/// (`c.dtype` is not consulted).
#[inline]
pub fn combine_one<T: Element>(c: &Combine, a: T, b: T) -> T {
    let a = if c.pre_a { pre_op(c, a) } else { a };
    let b = if c.pre_b { pre_op(c, b) } else { b };
    let r = match c.op {
        DevOp::Sum | DevOp::PreMulSum | DevOp::SumPostDiv => a.red_add(b),
        DevOp::Prod => a.red_mul(b),
        DevOp::Max => a.red_max(b),
        DevOp::Min => a.red_min(b),
    };
    if c.post {
        post_op(c, r)
    } else {
        r
    }
}

/// `dst[i] = post(pre_a(a[i]) (op) pre_b(b[i]))` on byte slices holding whole
/// elements of `c.dtype`, all the same length, at any alignment.
pub(crate) fn combine(c: &Combine, dst: &mut [u8], a: &[u8], b: &[u8]) -> Result<(), String> {
    lengths(c.dtype, dst.len(), &[a.len(), b.len()])?;
    crate::with_element!(c.dtype, T => combine_bytes::<T>(c, dst, Some(a), b))
}

/// `dst[i] = post(pre_a(dst[i]) (op) pre_b(b[i]))`: the reduce-into form.
pub(crate) fn combine_into(c: &Combine, dst: &mut [u8], b: &[u8]) -> Result<(), String> {
    lengths(c.dtype, dst.len(), &[b.len()])?;
    crate::with_element!(c.dtype, T => combine_bytes::<T>(c, dst, None, b))
}

/// [`combine`] (`a` given) or [`combine_into`] (`a` `None`) on this thread
/// alone: in pieces short enough that the typed loop never splits them
/// across rayon, for a caller that must not hand work to another thread
/// (one outside the backend's pool, or a process whose cores its peers
/// keep busy).
pub(crate) fn combine_serial(
    c: &Combine,
    dst: &mut [u8],
    a: Option<&[u8]>,
    b: &[u8],
) -> Result<(), String> {
    let size = c.dtype.size();
    lengths(
        c.dtype,
        dst.len(),
        &[a.map_or(dst.len(), <[u8]>::len), b.len()],
    )?;
    // Fewer than PAR_MIN elements of any type.
    let piece = (SERIAL_PIECE_BYTES / size).max(1) * size;
    for (i, d) in dst.chunks_mut(piece).enumerate() {
        let at = i * piece..i * piece + d.len();
        match a {
            Some(a) => combine(c, d, &a[at.clone()], &b[at])?,
            None => combine_into(c, d, &b[at])?,
        }
    }
    Ok(())
}

/// The pieces of [`combine_serial`]: below `PAR_MIN` elements of every type.
const SERIAL_PIECE_BYTES: usize = 1 << 16;

/// `x = post(pre(x))` for every element of `data` in place, by the flags
/// of `c` (`pre_a`: the pre-op, `post`: the post-op), at any alignment: a
/// contribution handed to a library that knows only the plain op, and
/// what comes back.
pub(crate) fn apply_ops(c: &Combine, data: &mut [u8]) -> Result<(), String> {
    lengths(c.dtype, data.len(), &[])?;
    let pre = c.pre_a && c.op == DevOp::PreMulSum;
    let post = c.post && c.op == DevOp::SumPostDiv;
    if !pre && !post {
        return Ok(());
    }
    crate::with_element!(c.dtype, T => {
        for x in data.chunks_exact_mut(size_of::<T>()) {
            let mut v: T = bytemuck::pod_read_unaligned(x);
            if pre {
                v = pre_op(c, v);
            }
            if post {
                v = post_op(c, v);
            }
            x.copy_from_slice(bytemuck::bytes_of(&v));
        }
    });
    Ok(())
}

/// Typed slices: `dst[i] = combine_one(c, a[i], b[i])`, vectorisable loops and
/// rayon for long slices (the tests' way into the typed path).
#[cfg(test)]
fn combine_slices<T: Element>(c: &Combine, dst: &mut [T], a: &[T], b: &[T]) -> Result<(), String> {
    if a.len() != dst.len() || b.len() != dst.len() {
        return Err(format!(
            "combine: lengths differ (dst {}, a {}, b {})",
            dst.len(),
            a.len(),
            b.len()
        ));
    }
    typed(c, dst, Some(a), b);
    Ok(())
}

/// Typed slices, reduce-into: `dst[i] = combine_one(c, dst[i], b[i])`.
#[cfg(test)]
fn combine_into_slices<T: Element>(c: &Combine, dst: &mut [T], b: &[T]) -> Result<(), String> {
    if b.len() != dst.len() {
        return Err(format!(
            "combine: lengths differ (dst {}, b {})",
            dst.len(),
            b.len()
        ));
    }
    typed(c, dst, None, b);
    Ok(())
}

fn lengths(dtype: DataType, dst: usize, others: &[usize]) -> Result<(), String> {
    let size = dtype.size();
    if dst % size != 0 {
        return Err(format!(
            "combine: {dst} bytes is not a whole number of {dtype} elements ({size} bytes)"
        ));
    }
    if others.iter().any(|&n| n != dst) {
        return Err(format!(
            "combine: byte lengths differ (dst {dst}, operands {others:?})"
        ));
    }
    Ok(())
}

fn aligned<T>(s: &[u8]) -> bool {
    (s.as_ptr() as usize) % align_of::<T>() == 0
}

fn combine_bytes<T: Element>(
    c: &Combine,
    dst: &mut [u8],
    a: Option<&[u8]>,
    b: &[u8],
) -> Result<(), String> {
    let all_aligned = aligned::<T>(dst) && a.is_none_or(aligned::<T>) && aligned::<T>(b);
    if all_aligned {
        let e = |x: bytemuck::PodCastError| format!("combine: {x}");
        let bt: &[T] = bytemuck::try_cast_slice(b).map_err(e)?;
        let at: Option<&[T]> = a.map(bytemuck::try_cast_slice).transpose().map_err(e)?;
        let dt: &mut [T] = bytemuck::try_cast_slice_mut(dst).map_err(e)?;
        typed(c, dt, at, bt);
        return Ok(());
    }
    // Unaligned: read and write element by element.
    let size = size_of::<T>();
    let c = *c;
    let one = move |d: &mut [u8], x: &[u8], y: &[u8]| {
        let r = combine_one::<T>(
            &c,
            bytemuck::pod_read_unaligned(x),
            bytemuck::pod_read_unaligned(y),
        );
        d.copy_from_slice(bytemuck::bytes_of(&r));
    };
    let par = dst.len() / size >= PAR_MIN;
    match a {
        Some(a) if par => dst
            .par_chunks_exact_mut(size)
            .zip(a.par_chunks_exact(size).zip(b.par_chunks_exact(size)))
            .for_each(|(d, (x, y))| one(d, x, y)),
        Some(a) => dst
            .chunks_exact_mut(size)
            .zip(a.chunks_exact(size).zip(b.chunks_exact(size)))
            .for_each(|(d, (x, y))| one(d, x, y)),
        None if par => dst
            .par_chunks_exact_mut(size)
            .zip(b.par_chunks_exact(size))
            .for_each(|(d, y)| {
                let x: T = bytemuck::pod_read_unaligned(d);
                one(d, bytemuck::bytes_of(&x), y)
            }),
        None => dst
            .chunks_exact_mut(size)
            .zip(b.chunks_exact(size))
            .for_each(|(d, y)| {
                let x: T = bytemuck::pod_read_unaligned(d);
                one(d, bytemuck::bytes_of(&x), y)
            }),
    }
    Ok(())
}

/// Slices at least this long are split across rayon's pool.
const PAR_MIN: usize = 1 << 18;
/// Elements per rayon task.
const PAR_CHUNK: usize = 1 << 16;

/// Dispatch the op (and flags) once, outside the loop, so each loop body is a
/// fixed, inlinable closure built from the same primitives as [`combine_one`]
/// (a unit test checks the two agree for every type, op and flag).
fn typed<T: Element>(c: &Combine, dst: &mut [T], a: Option<&[T]>, b: &[T]) {
    let s = T::from_bits(c.scalar);
    let n = c.scalar;
    let pre = c.op == DevOp::PreMulSum;
    let post = c.op == DevOp::SumPostDiv && c.post;
    match c.op {
        DevOp::Max => run(dst, a, b, |x: T, y: T| x.red_max(y)),
        DevOp::Min => run(dst, a, b, |x: T, y: T| x.red_min(y)),
        DevOp::Prod => run(dst, a, b, |x: T, y: T| x.red_mul(y)),
        _ if post => run(dst, a, b, move |x: T, y: T| x.red_add(y).red_div(n)),
        _ if pre && c.pre_a && c.pre_b => run(dst, a, b, move |x: T, y: T| {
            x.red_mul(s).red_add(y.red_mul(s))
        }),
        _ if pre && c.pre_a => run(dst, a, b, move |x: T, y: T| x.red_mul(s).red_add(y)),
        _ if pre && c.pre_b => run(dst, a, b, move |x: T, y: T| x.red_add(y.red_mul(s))),
        _ => run(dst, a, b, |x: T, y: T| x.red_add(y)),
    }
}

#[inline]
fn run<T: Element, F: Fn(T, T) -> T + Sync + Send + Copy>(
    dst: &mut [T],
    a: Option<&[T]>,
    b: &[T],
    f: F,
) {
    let serial = move |d: &mut [T], a: Option<&[T]>, b: &[T]| match a {
        Some(a) => {
            for ((d, &x), &y) in d.iter_mut().zip(a).zip(b) {
                *d = f(x, y);
            }
        }
        None => {
            for (d, &y) in d.iter_mut().zip(b) {
                *d = f(*d, y);
            }
        }
    };
    if dst.len() < PAR_MIN {
        serial(dst, a, b);
        return;
    }
    match a {
        Some(a) => dst
            .par_chunks_mut(PAR_CHUNK)
            .zip(a.par_chunks(PAR_CHUNK).zip(b.par_chunks(PAR_CHUNK)))
            .for_each(|(d, (a, b))| serial(d, Some(a), b)),
        None => dst
            .par_chunks_mut(PAR_CHUNK)
            .zip(b.par_chunks(PAR_CHUNK))
            .for_each(|(d, b)| serial(d, None, b)),
    }
}

#[cfg(test)]
mod tests;
