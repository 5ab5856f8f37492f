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
mod tests {
    use super::*;
    use ringreduce::algo::AlgoChoice;
    use ringreduce::backend::ordered::{After, Grid, SpanTag, WorkArg, WorkLaunch};
    use ringreduce::backend::Binding;
    use ringreduce::element::{DataType, ReduceOp};
    use ringreduce::engine::Engine;
    use ringreduce::plan::Shape;
    use ringreduce::EngineConfig;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_value_formula_matches_the_ptx_headers_definition() {
        // Spot values computed by hand from the formula in ptx/compute.ptx.
        let h = |i: u32, b: u32, r: u32, s: u32| {
            let mut h = i
                .wrapping_mul(0x9E3779B1)
                .wrapping_add(b.wrapping_mul(0x85EBCA77))
                .wrapping_add(r.wrapping_mul(0xC2B2AE3D))
                .wrapping_add(s.wrapping_mul(0x27D4EB2F));
            h ^= h >> 15;
            ((h >> 7) & 1023) as i32 - 512
        };
        for (i, b, r, s) in [
            (0, 0, 0, 0),
            (1, 2, 3, 4),
            (1 << 31, 7, 1, 99),
            (12345, 0, 1, 1),
        ] {
            assert_eq!(grad_value(r, b, u64::from(i), s), h(i, b, r, s));
        }
        assert_eq!(grad_value(0, 0, 0, 0), -512);
        let all: Vec<i32> = (0..4096).map(|i| grad_value(1, 2, i, 3)).collect();
        assert!(all.iter().all(|v| (-512..512).contains(v)));
        assert!(all.iter().any(|&v| v < -400) && all.iter().any(|&v| v > 400));
        assert_eq!(
            grad_sum(0, 2, 2, 5, 3),
            (grad_value(0, 2, 5, 3) + grad_value(1, 2, 5, 3)) as f32
        );
    }

    /// The work stream writes a bucket, an ordered all-reduce sums it, the
    /// check kernel counts 0 wrong; a stale bucket (the next step's values
    /// expected) counts every element.
    #[test]
    fn cpu_work_then_ordered_all_reduce_then_check() {
        let ranks = 3;
        let mut core = Engine::new(EngineConfig::cpu(ranks)).unwrap();
        let n = 1000usize;
        let bucket = core.alloc_id(&vec![4 * n; ranks]).unwrap();
        let ctr = core.alloc_id(&vec![16; ranks]).unwrap();
        core.work_mark().unwrap();
        let fma = Arc::new(kernel(Builtin::GradFma));
        core.work_launch(&WorkLaunch {
            kernel: fma,
            grid: Grid::Items(n as u64),
            block: 256,
            args: vec![
                WorkArg::Buf {
                    id: bucket,
                    offset: 0,
                    bytes: 4 * n,
                },
                WorkArg::U64(n as u64),
                WorkArg::U32(1),
                WorkArg::F32(0.999),
                WorkArg::F32(0.001),
                WorkArg::Rank,
                WorkArg::U32(4),
                WorkArg::U32(7),
            ],
            tag: Some(SpanTag {
                what: "kernel",
                index: 4,
            }),
        })
        .unwrap();
        let shape = Shape::all_reduce(ranks, n, 4, true);
        let bind = Arc::new(vec![
            Binding {
                send: bucket,
                recv: bucket
            };
            ranks
        ]);
        let (_plan, done) = core
            .launch_after(
                Some(&AlgoChoice::Auto),
                shape,
                DataType::Float,
                ReduceOp::Sum,
                bind,
                &After::Work,
                Some(SpanTag {
                    what: "collective",
                    index: 4,
                }),
            )
            .unwrap();
        assert_eq!(done.len(), ranks);
        for (r, d) in done.iter().enumerate() {
            assert_eq!(d.rank(), r);
            assert!(d.is_complete().unwrap());
            d.wait(Duration::from_secs(1)).unwrap();
        }
        core.work_wait(&done).unwrap();
        let check = |core: &mut Engine, step: u32| -> Vec<[u64; 2]> {
            for r in 0..ranks {
                core.write(r, ctr, 0, bytemuck::cast_slice(&[0u64, u64::MAX]))
                    .unwrap();
            }
            core.work_launch(&WorkLaunch {
                kernel: Arc::new(kernel(Builtin::GradCheck)),
                grid: Grid::Items(n as u64),
                block: 256,
                args: vec![
                    WorkArg::Buf {
                        id: bucket,
                        offset: 0,
                        bytes: 4 * n,
                    },
                    WorkArg::U64(n as u64),
                    WorkArg::Buf {
                        id: ctr,
                        offset: 0,
                        bytes: 16,
                    },
                    WorkArg::U32(0),
                    WorkArg::U32(ranks as u32),
                    WorkArg::U32(4),
                    WorkArg::U32(step),
                ],
                tag: None,
            })
            .unwrap();
            (0..ranks)
                .map(|r| {
                    let mut c = [0u64; 2];
                    core.read(r, ctr, 0, bytemuck::cast_slice_mut(&mut c))
                        .unwrap();
                    c
                })
                .collect()
        };
        assert!(check(&mut core, 7).iter().all(|c| *c == [0, u64::MAX]));
        assert!(check(&mut core, 8).iter().all(|c| c[0] > 900 && c[1] < 5));
        let spans = core.take_work_spans().unwrap();
        let k = spans
            .iter()
            .find(|s| s.what == "kernel" && s.rank == 1)
            .unwrap();
        let c = spans
            .iter()
            .find(|s| s.what == "collective" && s.rank == 1)
            .unwrap();
        assert!(k.end_ns <= c.start_ns && k.stream == "work" && c.stream == "comm");
    }
}
