//! The overlap benchmark's kernels on the host: the values of
//! `ptx/compute.ptx` (its gradient formula) and the host implementations
//! the CPU backend runs for its three kernels
//! ([`WorkKernel::with_host`]), with the same results bit for bit (f32
//! `mul_add` is the PTX `fma.rn.f32`). The argument positions are the PTX
//! signatures, which the library's built-in checks have already checked.

use ringreduce::backend::ordered::{Builtin, HostArgs, WorkKernel};
use ringreduce::error::Result;

/// Element `i` of bucket `bucket` of rank `rank` at step `step`: the
/// formula of `ptx/compute.ptx` (an integer in -512..=511).
pub(super) fn grad_value(rank: u32, bucket: u32, i: u64, step: u32) -> i32 {
    let mut h = (i as u32)
        .wrapping_mul(0x9E37_79B1)
        .wrapping_add(bucket.wrapping_mul(0x85EB_CA77))
        .wrapping_add(rank.wrapping_mul(0xC2B2_AE3D))
        .wrapping_add(step.wrapping_mul(0x27D4_EB2F));
    h ^= h >> 15;
    ((h >> 7) & 1023) as i32 - 512
}

/// The exact all-reduced (sum) value of element `i` over ranks
/// `first..first + count`.
pub(super) fn grad_sum(first: u32, count: u32, bucket: u32, i: u64, step: u32) -> f32 {
    let s: i32 = (first..first + count)
        .map(|r| grad_value(r, bucket, i, step))
        .sum();
    s as f32
}

/// One of the kernels of `ptx/compute.ptx`, with its host implementation.
pub(super) fn kernel(b: Builtin) -> WorkKernel {
    let host = match b {
        Builtin::GradFma => grad_fma,
        Builtin::GradMem => grad_mem,
        Builtin::GradCheck => grad_check,
    };
    WorkKernel::builtin(b).with_host(host)
}

/// The bucket's values as the kernels write them: rank, bucket, step in
/// arguments `at..at + 3`.
fn bucket_values(h: &dyn HostArgs, n: usize, at: usize) -> Vec<f32> {
    let (r, b, s) = (h.int(at) as u32, h.int(at + 1) as u32, h.int(at + 2) as u32);
    (0..n)
        .map(|i| grad_value(r, b, i as u64, s) as f32)
        .collect()
}

/// `rr_grad_fma(out, n, iters, m, c, rank, bucket, step)`.
fn grad_fma(h: &mut dyn HostArgs) -> Result<()> {
    let n = h.int(1) as usize;
    let (iters, m, c) = (h.int(2), h.float(3), h.float(4));
    let values = bucket_values(h, n, 5);
    let mut out = vec![0f32; n];
    for (i, o) in out.iter_mut().enumerate() {
        let a0 = (i as u32 & 1023) as f32;
        let mut a = [a0, a0 + 1.0, a0 + 2.0, a0 + 3.0];
        for _ in 0..iters * 8 {
            for x in &mut a {
                *x = x.mul_add(m, c);
            }
        }
        let sum = (a[0] + a[1]) + (a[2] + a[3]);
        *o = if sum.is_nan() {
            f32::from_bits(0x7FFF_FFFF)
        } else {
            values[i]
        };
    }
    h.write(0, bytemuck::cast_slice(&out))
}

/// `rr_grad_mem(out, n, x, y, passes, a, rank, bucket, step)`.
fn grad_mem(h: &mut dyn HostArgs) -> Result<()> {
    let n = h.int(1) as usize;
    let (passes, a) = (h.int(4) as usize, h.float(5));
    let mut x = vec![0f32; passes * n];
    let mut y = vec![0f32; passes * n];
    h.read(2, bytemuck::cast_slice_mut(&mut x))?;
    h.read(3, bytemuck::cast_slice_mut(&mut y))?;
    for (yv, xv) in y.iter_mut().zip(&x) {
        *yv = a.mul_add(*xv, *yv);
    }
    h.write(3, bytemuck::cast_slice(&y))?;
    let out = bucket_values(h, n, 6);
    h.write(0, bytemuck::cast_slice(&out))
}

/// `rr_grad_check(bucket, n, counters, first, count, bucket_id, step)`.
fn grad_check(h: &mut dyn HostArgs) -> Result<()> {
    let n = h.int(1) as usize;
    let (first, count) = (h.int(3) as u32, h.int(4) as u32);
    let (b, s) = (h.int(5) as u32, h.int(6) as u32);
    let mut got = vec![0f32; n];
    h.read(0, bytemuck::cast_slice_mut(&mut got))?;
    let (mut wrong, mut firstbad) = (0u64, u64::MAX);
    for (i, g) in got.iter().enumerate() {
        if g.to_bits() != grad_sum(first, count, b, i as u64, s).to_bits() {
            wrong += 1;
            firstbad = firstbad.min(i as u64);
        }
    }
    if wrong > 0 {
        let mut ctr = [0u64; 2];
        h.read(2, bytemuck::cast_slice_mut(&mut ctr))?;
        ctr[0] += wrong;
        ctr[1] = ctr[1].min(firstbad);
        h.write(2, bytemuck::cast_slice(&ctr))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
