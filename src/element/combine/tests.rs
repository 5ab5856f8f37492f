use super::*;
use crate::element::{bf16, f16, F8E4M3, F8E5M2};

fn c(d: DataType, op: ReduceOp, n: usize) -> Combine {
    Combine::new(d, op, n)
}

fn one<T: Element>(op: ReduceOp, a: f64, b: f64) -> T {
    combine_one(&c(T::DTYPE, op, 2), T::from_f64(a), T::from_f64(b))
}

fn bits<T: Element>(op: ReduceOp, a: T, b: T) -> u64 {
    combine_one(&c(T::DTYPE, op, 2), a, b).to_bits()
}

#[test]
fn integers() {
    use ReduceOp::*;
    assert_eq!(one::<i8>(Sum, 100.0, 100.0), -56);
    assert_eq!(one::<u8>(Sum, 200.0, 100.0), 44);
    assert_eq!(
        combine_one(&c(DataType::Int32, Sum, 2), i32::MAX, 1),
        i32::MIN
    );
    assert_eq!(combine_one(&c(DataType::Uint64, Sum, 2), u64::MAX, 2), 1);
    assert_eq!(combine_one(&c(DataType::Int64, Prod, 2), i64::MAX, 2), -2);
    assert_eq!(one::<i8>(Prod, 16.0, 16.0), 0);
    assert_eq!(one::<i8>(Prod, -3.0, 5.0), -15);
    assert_eq!(one::<u32>(Prod, 65536.0, 65537.0), 65536);
    assert_eq!(one::<u8>(Max, 200.0, 100.0), 200);
    assert_eq!(one::<i8>(Max, -1.0, 1.0), 1);
    assert_eq!(one::<i8>(Min, -1.0, 1.0), -1);
    assert_eq!(one::<u64>(Min, 7.0, 3.0), 3);
    assert_eq!(
        combine_one(&c(DataType::Int64, Min, 2), i64::MIN, i64::MAX),
        i64::MIN
    );
    // Avg: SumPostDiv by N, on the last step only, truncating toward zero.
    let avg = |d, n| c(d, Avg, n);
    let last = avg(DataType::Int8, 3).with_flags(true, true, true);
    assert_eq!(combine_one::<i8>(&last, -4, -3), -2);
    assert_eq!(combine_one::<i8>(&last, 4, 3), 2);
    assert_eq!(combine_one::<i8>(&avg(DataType::Int8, 3), -4, -3), -7);
    let last2 = avg(DataType::Int8, 2).with_flags(false, false, true);
    assert_eq!(combine_one::<i8>(&last2, 100, 100), -28); // wrapped sum -56, halved
    assert_eq!(combine_one::<i8>(&last2, -128, 0), -64);
    let one_rank = avg(DataType::Int8, 1).with_flags(false, false, true);
    assert_eq!(combine_one::<i8>(&one_rank, -128, 0), -128);
    let u = avg(DataType::Uint8, 2).with_flags(false, false, true);
    assert_eq!(combine_one::<u8>(&u, 255, 0), 127);
    assert_eq!(combine_one::<u8>(&u, 255, 1), 0); // wrapped to 0
    let big = avg(DataType::Int8, 200).with_flags(false, false, true);
    assert_eq!(combine_one::<i8>(&big, 100, 27), 0);
    let u64avg = avg(DataType::Uint64, 3).with_flags(false, false, true);
    assert_eq!(combine_one::<u64>(&u64avg, u64::MAX, 0), u64::MAX / 3);
    let i64avg = avg(DataType::Int64, 3).with_flags(false, false, true);
    assert_eq!(combine_one::<i64>(&i64avg, i64::MIN, 0), i64::MIN / 3);
    // An integer PreMulSum (never lowered) is a wrapping multiply.
    let pm = Combine {
        op: DevOp::PreMulSum,
        scalar: 3,
        ..c(DataType::Int8, Sum, 2)
    }
    .with_flags(true, false, false);
    assert_eq!(combine_one::<i8>(&pm, 50, 1), -105);
}

#[test]
fn float_and_double() {
    use ReduceOp::*;
    assert_eq!(one::<f32>(Sum, 1.0, 2f64.powi(-24)), 1.0); // tie to even
    assert_eq!(
        one::<f32>(Sum, 1.0, 3.0 * 2f64.powi(-24)),
        1.0 + 2.0 * f32::EPSILON
    );
    assert_eq!(one::<f32>(Sum, 3e38, 3e38), f32::INFINITY);
    assert_eq!(one::<f32>(Prod, 1e-30, 1e-30), 0.0);
    assert_eq!(one::<f32>(Prod, -2.0, 1.5), -3.0);
    let sub = f32::from_bits(1);
    assert_eq!(
        combine_one(&c(DataType::Float, Sum, 2), sub, sub),
        f32::from_bits(2)
    );
    assert_eq!(one::<f64>(Sum, 0.1, 0.2), 0.1 + 0.2);
    assert_eq!(one::<f64>(Prod, 0.1, 0.3), 0.1 * 0.3);
    assert_eq!(one::<f64>(Max, -1.0, -2.0), -1.0);
    assert_eq!(one::<f32>(Min, -1.0, -2.0), -2.0);
    // f32 + f32 through f64 is the native f32 sum (innocuous double rounding).
    let mut s = 1u64;
    for _ in 0..200_000 {
        let x = f32::from_bits(crate::element::minifloat::tests::splitmix(&mut s) as u32);
        let y = f32::from_bits(crate::element::minifloat::tests::splitmix(&mut s) as u32);
        let (sum, prod) = (
            one::<f32>(Sum, x as f64, y as f64),
            one::<f32>(Prod, x as f64, y as f64),
        );
        assert!(
            sum.to_bits() == (x + y).to_bits() || (sum.is_nan() && (x + y).is_nan()),
            "{x:e} + {y:e}"
        );
        assert!(
            prod.to_bits() == (x * y).to_bits() || (prod.is_nan() && (x * y).is_nan()),
            "{x:e} * {y:e}"
        );
    }
    // Avg on floats: pre-multiply by float(1/N) on the flagged operands.
    let avg = c(DataType::Float, Avg, 3).with_flags(true, true, false);
    let third = 1.0f32 / 3.0;
    assert_eq!(combine_one::<f32>(&avg, 1.0, 2.0), third + 2.0 * third);
    let later = c(DataType::Float, Avg, 3).with_flags(false, true, true);
    assert_eq!(combine_one::<f32>(&later, 1.0, 3.0), 1.0 + 3.0 * third);
    let d = c(DataType::Double, Avg, 3).with_flags(true, false, false);
    assert_eq!(combine_one::<f64>(&d, 3.0, 1.0), 3.0 * (1.0 / 3.0) + 1.0);
}

#[test]
fn nan_and_signed_zero() {
    use ReduceOp::*;
    let nan = f64::NAN;
    assert_eq!(bits::<f32>(Sum, f32::NAN, 1.0), 0x7fff_ffff);
    assert_eq!(bits::<f64>(Prod, -f64::NAN, 1.0), 0x7fff_ffff_ffff_ffff);
    assert_eq!(
        bits::<f32>(Sum, f32::INFINITY, f32::NEG_INFINITY),
        0x7fff_ffff
    );
    assert_eq!(one::<f32>(Max, nan, 1.0), 1.0);
    assert_eq!(one::<f32>(Max, 1.0, nan), 1.0);
    assert_eq!(one::<f64>(Min, nan, -1.0), -1.0);
    assert_eq!(bits::<f32>(Max, f32::NAN, f32::NAN), 0x7fff_ffff);
    assert_eq!(bits::<f16>(Min, f16::NAN, f16::NAN), 0x7fff);
    assert_eq!(one::<f16>(Max, nan, -3.0), f16::from_f32(-3.0));
    assert_eq!(one::<bf16>(Min, 2.0, nan), bf16::from_f32(2.0));
    assert_eq!(bits::<F8E4M3>(Max, F8E4M3(0x7f), F8E4M3(0xff)), 0x7f);
    assert_eq!(bits::<F8E4M3>(Max, F8E4M3(0xff), F8E4M3(0x38)), 0x38);
    assert_eq!(bits::<F8E5M2>(Min, F8E5M2(0x7e), F8E5M2(0xbc)), 0xbc);
    assert_eq!(bits::<F8E4M3>(Sum, F8E4M3(0x7f), F8E4M3(0x38)), 0x7f);
    for t in DataType::ALL.into_iter().filter(|d| d.is_float()) {
        crate::with_element!(t, T => zeros_and_nan::<T>());
    }
}

fn zeros_and_nan<T: Element>() {
    use ReduceOp::*;
    let t = T::DTYPE;
    let (p, m) = (T::from_f64(0.0), T::from_f64(-0.0));
    assert_ne!(p.to_bits(), m.to_bits());
    for (a, b) in [(p, m), (m, p)] {
        assert_eq!(bits::<T>(Max, a, b), p.to_bits(), "{t} max");
        assert_eq!(bits::<T>(Min, a, b), m.to_bits(), "{t} min");
    }
    assert_eq!(bits::<T>(Sum, m, m), m.to_bits(), "{t} -0 + -0");
    assert_eq!(bits::<T>(Sum, p, m), p.to_bits(), "{t} +0 + -0");
    // Every NaN result is the canonical one.
    let nan = T::from_f64(f64::NAN);
    assert_eq!(nan.to_bits(), t.format().map_or(0, |f| f.nan_bits()), "{t}");
    assert_eq!(bits::<T>(Prod, nan, T::from_f64(2.0)), nan.to_bits(), "{t}");
    assert_eq!(bits::<T>(Sum, T::from_f64(1.0), nan), nan.to_bits(), "{t}");
}

#[test]
fn half_and_bfloat16() {
    use ReduceOp::*;
    let e = |k| 2f64.powi(k);
    assert_eq!(one::<f16>(Sum, 1.0, e(-11)).to_bits(), 0x3c00); // tie -> even
    assert_eq!(one::<f16>(Sum, 1.0 + e(-10), e(-11)).to_bits(), 0x3c02); // tie -> even (up)
    assert_eq!(one::<f16>(Sum, 1.0, 3.0 * e(-11)).to_bits(), 0x3c02);
    assert_eq!(one::<f16>(Sum, 65504.0, 16.0).to_bits(), 0x7c00); // tie at the top -> inf
    assert_eq!(one::<f16>(Sum, 65504.0, 8.0).to_bits(), 0x7bff);
    assert_eq!(one::<f16>(Sum, 60000.0, 10000.0).to_bits(), 0x7c00);
    assert_eq!(one::<f16>(Sum, -60000.0, -10000.0).to_bits(), 0xfc00);
    assert_eq!(one::<f16>(Sum, e(-24), e(-24)).to_bits(), 0x0002); // subnormals
    assert_eq!(one::<f16>(Prod, e(-12), e(-13)).to_bits(), 0x0000); // 2^-25: tie -> 0
    assert_eq!(one::<f16>(Prod, 3.0 * e(-14), e(-11)).to_bits(), 0x0002); // 1.5 * 2^-24 -> 2^-23
    assert_eq!(
        one::<f16>(Prod, 1.0 + e(-10), 1.0 + e(-10)).to_bits(),
        0x3c02
    );
    assert_eq!(one::<f16>(Max, -2.0, 0.5), f16::from_f32(0.5));
    assert_eq!(one::<bf16>(Sum, 1.0, e(-8)).to_bits(), 0x3f80); // tie -> even
    assert_eq!(one::<bf16>(Sum, 1.0, 3.0 * e(-8)).to_bits(), 0x3f82);
    assert_eq!(one::<bf16>(Sum, 1.0, e(-8) + e(-15)).to_bits(), 0x3f81); // just above the tie
    assert_eq!(one::<bf16>(Sum, 3e38, 3e38).to_bits(), 0x7f80);
    assert_eq!(one::<bf16>(Prod, e(-100), e(-33)).to_bits(), 0x0001); // 2^-133: smallest subnormal
    assert_eq!(one::<bf16>(Min, -2.0, 0.5), bf16::from_f32(-2.0));
    // Avg: multiply by f16(1/3) = 0x3555 and round in half.
    let avg = c(DataType::Half, Avg, 3);
    assert_eq!(avg.scalar, 0x3555);
    let s = f16::from_bits(0x3555).to_f64();
    let r = combine_one(
        &avg.with_flags(true, true, false),
        f16::from_f32(1.0),
        f16::from_f32(2.0),
    );
    let want = f16::from_f64(f16::from_f64(s).to_f64() + f16::from_f64(2.0 * s).to_f64());
    assert_eq!(r, want);
}

#[test]
fn fp8() {
    use ReduceOp::*;
    let e4 = |x: f64| F8E4M3::from_f64(x);
    let e5 = |x: f64| F8E5M2::from_f64(x);
    assert_eq!(one::<F8E4M3>(Sum, 400.0, 100.0), e4(448.0)); // saturates
    assert_eq!(one::<F8E4M3>(Sum, 400.0, 100.0).0, 0x7e);
    assert_eq!(one::<F8E4M3>(Sum, 448.0, 448.0).0, 0x7e); // f16 896 -> 448
    assert_eq!(one::<F8E4M3>(Sum, -448.0, -448.0).0, 0xfe);
    assert_eq!(one::<F8E4M3>(Prod, 448.0, 448.0).0, 0x7e); // f16 inf -> 448
    assert_eq!(one::<F8E4M3>(Sum, 1.0, 0.0625).0, 0x38); // tie -> even 1.0
    assert_eq!(one::<F8E4M3>(Sum, 1.125, 0.0625).0, 0x3a); // tie -> even 1.25
    assert_eq!(one::<F8E4M3>(Sum, 2f64.powi(-9), 2f64.powi(-9)).0, 0x02); // subnormals
    assert_eq!(one::<F8E4M3>(Prod, 2f64.powi(-5), 2f64.powi(-5)).0, 0x00); // 2^-10: tie -> 0
    assert_eq!(one::<F8E4M3>(Prod, -1.5, 3.0).0, e4(-4.5).0);
    assert_eq!(one::<F8E5M2>(Sum, 57344.0, 57344.0).0, 0x7b); // f16 inf -> max finite
    assert_eq!(one::<F8E5M2>(Sum, 49152.0, 8192.0).0, 0x7b); // exactly 57344
    assert_eq!(one::<F8E5M2>(Sum, 1.0, 0.125).0, 0x3c); // tie -> even 1.0
    assert_eq!(one::<F8E5M2>(Sum, 1.25, 0.125).0, 0x3e); // tie -> even 1.5
    assert_eq!(one::<F8E5M2>(Prod, 2f64.powi(-8), 2f64.powi(-8)).0, 0x01); // 2^-16: smallest subnormal
    assert_eq!(one::<F8E5M2>(Prod, 2f64.powi(-16), 0.5).0, 0x00); // 2^-17: tie -> 0
    assert_eq!(one::<F8E5M2>(Prod, 2f64.powi(-16), 0.75).0, 0x01);
    assert_eq!(one::<F8E5M2>(Prod, 2f64.powi(-16), 2f64.powi(-16)).0, 0x00); // f16 underflow
    assert_eq!(bits::<F8E5M2>(Max, F8E5M2(0x7c), e5(1.0)), 0x7b); // +inf -> satfinite
    assert_eq!(bits::<F8E5M2>(Sum, F8E5M2(0x7c), F8E5M2(0xfc)), 0x7f); // inf - inf = NaN
    assert_eq!(bits::<F8E5M2>(Min, F8E5M2(0xfc), e5(1.0)), 0xfb);
    assert_eq!(one::<F8E5M2>(Max, -3.0, 2.0), e5(2.0));
    // Avg on 3 ranks: e4m3(1/3) = 0.34375; premultiply in half, then round.
    let avg = c(DataType::F8e4m3, Avg, 3);
    assert_eq!(avg.scalar, 0x2b);
    let first = avg.with_flags(true, true, false);
    let r = combine_one(&first, e4(3.0), e4(6.0));
    // 3*0.34375 = 1.03125 -> 1.0; 6*0.34375 = 2.0625 -> 2.0; sum 3.0.
    assert_eq!(r, e4(3.0));
}

/// The fast loops (aligned typed, unaligned byte, reduce-into, parallel)
/// agree with `combine_one` for every type, op and flag combination.
#[test]
fn loops_match_combine_one() {
    let n = PAR_MIN + 777;
    for d in DataType::ALL {
        crate::with_element!(d, T => check_loops::<T>(n));
    }
}

fn check_loops<T: Element>(n: usize) {
    let mut s = T::DTYPE as u64 + 99;
    let mut rand_vec = |len: usize| -> Vec<T> {
        (0..len)
            .map(|i| {
                let r = crate::element::minifloat::tests::splitmix(&mut s);
                // Mostly small values, some raw bit patterns (NaN, inf, huge).
                if i % 5 == 0 {
                    T::from_bits(r)
                } else {
                    T::from_f64(((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 20.0)
                }
            })
            .collect()
    };
    let a = rand_vec(n);
    let b = rand_vec(n);
    for op in ReduceOp::ALL {
        for flags in 0..8u8 {
            let cm = Combine::new(T::DTYPE, op, 3).with_flags(
                flags & 1 != 0,
                flags & 2 != 0,
                flags & 4 != 0,
            );
            let want: Vec<u64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| combine_one(&cm, x, y).to_bits())
                .collect();
            let got_bits = |v: &[T]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
            // Typed, three operands (parallel path).
            let mut d = vec![T::default(); n];
            combine_slices(&cm, &mut d, &a, &b).unwrap();
            assert!(
                got_bits(&d) == want,
                "{} {op:?} flags {flags}: typed",
                T::DTYPE
            );
            // Typed, reduce-into, short (serial path).
            let mut d = a[..1000].to_vec();
            combine_into_slices(&cm, &mut d, &b[..1000]).unwrap();
            assert!(
                got_bits(&d) == want[..1000],
                "{} {op:?} flags {flags}: into",
                T::DTYPE
            );
            // Bytes, aligned and misaligned by one byte.
            let ab: &[u8] = bytemuck::cast_slice(&a);
            let bb: &[u8] = bytemuck::cast_slice(&b);
            for shift in [0usize, 1] {
                let m = 3001 * size_of::<T>();
                let mut buf = vec![0u8; m + 1];
                let mut abuf = vec![0u8; m + 1];
                abuf[shift..shift + m].copy_from_slice(&ab[..m]);
                combine(
                    &cm,
                    &mut buf[shift..shift + m],
                    &abuf[shift..shift + m],
                    &bb[..m],
                )
                .unwrap();
                let got: Vec<T> = buf[shift..shift + m]
                    .chunks_exact(size_of::<T>())
                    .map(bytemuck::pod_read_unaligned)
                    .collect();
                assert!(
                    got_bits(&got) == want[..3001],
                    "{} {op:?} flags {flags}: bytes shift {shift}",
                    T::DTYPE
                );
                combine_into(&cm, &mut abuf[shift..shift + m], &bb[..m]).unwrap();
                let got: Vec<T> = abuf[shift..shift + m]
                    .chunks_exact(size_of::<T>())
                    .map(bytemuck::pod_read_unaligned)
                    .collect();
                assert!(
                    got_bits(&got) == want[..3001],
                    "{} {op:?} flags {flags}: into bytes {shift}",
                    T::DTYPE
                );
            }
        }
    }
    // Long unaligned buffers take the parallel byte path.
    let cm = Combine::new(T::DTYPE, ReduceOp::Sum, 2);
    let m = n * size_of::<T>();
    let mut abuf = vec![0u8; m + 1];
    abuf[1..].copy_from_slice(bytemuck::cast_slice(&a));
    combine_into(&cm, &mut abuf[1..], bytemuck::cast_slice(&b)).unwrap();
    let got: Vec<T> = abuf[1..]
        .chunks_exact(size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect();
    let want: Vec<T> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| combine_one(&cm, x, y))
        .collect();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(x, y)| x.to_bits() == y.to_bits()));
}

#[test]
fn rejects_bad_lengths() {
    let cm = Combine::new(DataType::Float, ReduceOp::Sum, 2);
    let mut d = vec![0u8; 8];
    assert!(combine(&cm, &mut d, &[0u8; 8], &[0u8; 4]).is_err());
    assert!(combine_into(&cm, &mut d[..6], &[0u8; 6]).is_err());
    assert!(combine_slices(&cm, &mut [0f32; 2], &[0f32; 2], &[0f32; 3]).is_err());
    assert!(combine(&cm, &mut [], &[], &[]).is_ok());
}

/// `combine_serial` gives the bits `combine` and `combine_into` give, for
/// every type, op and flag, on lengths that leave a piece short, and
/// refuses lengths that differ or split an element.
#[test]
fn serial_pieces_match_the_whole() {
    for d in DataType::ALL {
        let size = d.size();
        // Three pieces and a part, in whole elements.
        let n = (3 * SERIAL_PIECE_BYTES + 7 * size) / size * size;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut bytes = |len: usize| -> Vec<u8> {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect()
        };
        let (a, b, start) = (bytes(n), bytes(n), bytes(n));
        for op in ReduceOp::ALL {
            for (pa, pb, post) in [
                (false, false, false),
                (true, true, true),
                (true, false, true),
            ] {
                let k = c(d, op, 3).with_flags(pa, pb, post);
                let (mut whole, mut serial) = (start.clone(), start.clone());
                combine(&k, &mut whole, &a, &b).unwrap();
                combine_serial(&k, &mut serial, Some(&a), &b).unwrap();
                assert!(whole == serial, "{d:?} {op:?} {pa} {pb} {post}");
                let (mut whole, mut serial) = (a.clone(), a.clone());
                combine_into(&k, &mut whole, &b).unwrap();
                combine_serial(&k, &mut serial, None, &b).unwrap();
                assert!(whole == serial, "into {d:?} {op:?} {pa} {pb} {post}");
            }
        }
        let mut out = vec![0u8; n];
        assert!(combine_serial(&c(d, ReduceOp::Sum, 2), &mut out, None, &a[..n - size]).is_err());
        if size > 1 {
            let mut odd = vec![0u8; n - 1];
            assert!(combine_serial(&c(d, ReduceOp::Sum, 2), &mut odd, None, &a[..n - 1]).is_err());
        }
    }
}
