use super::*;
use ringreduce::element::{bf16, f16, F8E4M3, F8E5M2};

#[test]
fn verdicts_travel_and_join() {
    let a = Verdict {
        wrong: vec![0],
        max_abs_err: 0.5,
        max_rel_err: f64::INFINITY,
        bitwise: false,
        first_wrong: None,
    };
    let b = Verdict {
        wrong: vec![3],
        max_abs_err: f64::NAN,
        max_rel_err: 0.0,
        bitwise: true,
        first_wrong: Some((0, 7, 1.0, 2.0)),
    }
    .at_rank(1);
    let b2 = Verdict::decode(&b.encode()).unwrap();
    assert_eq!(b2.first_wrong, Some((1, 7, 1.0, 2.0)));
    assert!(b2.max_abs_err.is_nan());
    let j = Verdict::join([Verdict::decode(&a.encode()).unwrap(), b2]);
    assert_eq!(j.wrong, vec![0, 3]);
    assert_eq!(j.max_rel_err, f64::INFINITY);
    assert!(!j.bitwise && !j.passed());
    assert!(Verdict::decode(&[1, 2, 3]).is_none());
}

/// What any ring / one-shot order computes: fold in the order
/// `start, start+1, ...` (mod N), with the same flags as the reference.
fn fold_from<T: Element>(c: &Combine, inputs: &[Vec<T>], start: usize, i: usize) -> T {
    let rot: Vec<Vec<T>> = (0..inputs.len())
        .map(|k| vec![inputs[(start + k) % inputs.len()][i]])
        .collect();
    fold(c, &rot, 0)
}

fn ring_outputs<T: Element>(inputs: &[Vec<T>], op: ReduceOp) -> Vec<Vec<T>> {
    let n = inputs.len();
    let count = inputs[0].len();
    let c = Combine::new(T::DTYPE, op, n);
    // Element i is reduced starting at rank (i % n) + 1, like ring chunks.
    let out: Vec<T> = (0..count)
        .map(|i| fold_from(&c, inputs, i % n + 1, i))
        .collect();
    vec![out; n]
}

#[test]
fn f32_sum_exact_inputs_are_the_old_ones() {
    for r in 0..9 {
        for i in 0..5000 {
            let old = (((i % 4099) * 7 + r * 13) % 17) as f64 - 8.0;
            assert_eq!(exact_value(DataType::Float, ReduceOp::Sum, 9, r, i), old);
        }
    }
}

/// Exact inputs: every type, op, rank count; every rotation of the order
/// gives the reference bit for bit (the point of exact inputs).
#[test]
fn exact_inputs_make_any_order_bitwise() {
    for d in DataType::ALL {
        ringreduce::with_element!(d, T => exact_case::<T>());
    }
}

fn exact_case<T: Element>() {
    for op in ReduceOp::ALL {
        for n in [1usize, 2, 3, 4, 5, 8, 17, 40] {
            let inputs: Vec<Vec<T>> = make_inputs(Inputs::Exact, op, n, 600, 1).expect("inputs");
            let r = reference(&inputs, op, Inputs::Exact);
            let d = T::DTYPE;
            assert_eq!(r.bitwise, is_bitwise(d, op, n, Inputs::Exact));
            for x in inputs.iter().flatten() {
                assert!(x.to_f64().abs() <= 8.0 && x.to_f64().fract() == 0.0);
            }
            if !r.bitwise {
                assert!(op == ReduceOp::Avg && d.is_float() && !n.is_power_of_two());
                continue;
            }
            let c = Combine::new(d, op, n);
            for i in 0..600 {
                let want = r.expect[i];
                for start in 0..n {
                    let got = fold_from(&c, &inputs, start, i);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{d} {op} n={n} i={i} start={start}"
                    );
                }
                // And it is the exact answer.
                let vals: Vec<f64> = inputs.iter().map(|v| v[i].to_f64()).collect();
                let exact = match op {
                    ReduceOp::Sum => vals.iter().sum::<f64>(),
                    ReduceOp::Prod => vals.iter().product::<f64>(),
                    ReduceOp::Max => vals.iter().cloned().fold(f64::MIN, f64::max),
                    ReduceOp::Min => vals.iter().cloned().fold(f64::MAX, f64::min),
                    ReduceOp::Avg if d.is_float() => vals.iter().sum::<f64>() / n as f64,
                    ReduceOp::Avg => (vals.iter().sum::<f64>() / n as f64).trunc(),
                };
                assert_eq!(want.to_f64(), exact, "{d} {op} n={n} i={i}");
            }
            // The inputs are not trivial.
            let distinct: std::collections::BTreeSet<u64> =
                r.expect.iter().map(|x| x.to_bits()).collect();
            assert!(distinct.len() > 1 || n > 16, "{d} {op} n={n}");
        }
    }
}

/// Random inputs: other orders land within the bound (or bitwise where
/// promised); a perturbed element is caught.
#[test]
fn random_inputs_within_bounds() {
    for d in DataType::ALL {
        ringreduce::with_element!(d, T => random_case::<T>());
    }
}

fn random_case<T: Element>() {
    let d = T::DTYPE;
    for op in ReduceOp::ALL {
        for n in [1usize, 2, 3, 5, 8, 16] {
            let inputs: Vec<Vec<T>> = make_inputs(Inputs::Random, op, n, 3000, 7).expect("inputs");
            let r = reference(&inputs, op, Inputs::Random);
            assert_eq!(r.bitwise, is_bitwise(d, op, n, Inputs::Random));
            assert_eq!(r.bound.is_none(), r.bitwise);
            let outs = ring_outputs(&inputs, op);
            let v = check(&outs, &r);
            assert!(
                v.passed(),
                "{d} {op} n={n}: {:?} {:?}",
                v.wrong,
                v.first_wrong
            );
            // Another order too, and the two against each other.
            let c = Combine::new(d, op, n);
            let other: Vec<T> = (0..3000)
                .map(|i| fold_from(&c, &inputs, n / 2, i))
                .collect();
            let other = vec![other; n];
            assert!(check(&other, &r).passed(), "{d} {op} n={n} other order");
            assert!(
                compare(&outs, &other, &r).passed(),
                "{d} {op} n={n} compare"
            );
            // Break one element clearly.
            let mut bad = outs.clone();
            let k = 1234;
            let w = bad[n - 1][k].to_f64();
            let bump = r.bound.as_ref().map_or(0.0, |b| 3.0 * b[k]);
            bad[n - 1][k] = if d.is_float() {
                T::from_f64(w + bump.max(w.abs() + 1.0))
            } else {
                T::from_bits(bad[n - 1][k].to_bits() ^ 1)
            };
            let v = check(&bad, &r);
            let mut wrong = vec![0; n];
            wrong[n - 1] = 1;
            assert_eq!(v.wrong, wrong, "{d} {op} n={n}: {w} -> {:?}", bad[n - 1][k]);
            assert_eq!(v.first_wrong.map(|f| (f.0, f.1)), Some((n - 1, k)));
            assert!(!compare(&outs, &bad, &r).passed());
        }
    }
}

#[test]
fn random_inputs_are_deterministic_and_spread() {
    let a: Vec<f32> = make_input(Inputs::Random, ReduceOp::Sum, 4, 1, 100_000, 3).expect("inputs");
    let b: Vec<f32> = make_input(Inputs::Random, ReduceOp::Max, 2, 1, 100_000, 3).expect("inputs");
    let c: Vec<f32> = make_input(Inputs::Random, ReduceOp::Sum, 4, 2, 100_000, 3).expect("inputs");
    let e: Vec<f32> = make_input(Inputs::Random, ReduceOp::Sum, 4, 1, 100_000, 4).expect("inputs");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a, e);
    assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
    let mean = a.iter().map(|&x| x as f64).sum::<f64>() / a.len() as f64;
    assert!(mean.abs() < 0.01);
    let ints: Vec<u8> =
        make_input(Inputs::Random, ReduceOp::Sum, 2, 0, 100_000, 3).expect("inputs");
    let seen: std::collections::BTreeSet<u8> = ints.iter().copied().collect();
    assert_eq!(seen.len(), 256);
    let i64s: Vec<i64> = make_input(Inputs::Random, ReduceOp::Sum, 2, 0, 1000, 3).expect("inputs");
    assert!(i64s.iter().any(|&x| x < i64::MIN / 2) && i64s.iter().any(|&x| x > i64::MAX / 2));
    let h: Vec<F8E4M3> =
        make_input(Inputs::Random, ReduceOp::Sum, 2, 0, 10_000, 3).expect("inputs");
    assert!(h.iter().all(|x| x.to_f64().abs() <= 1.0));
}

#[test]
fn nan_rules() {
    let r = Reference {
        expect: vec![f32::NAN, 1.0, 2.0],
        bound: None,
        bitwise: true,
        ranks: 2,
        op: ReduceOp::Sum,
    };
    let nan2 = f32::from_bits(0xffc0_0001);
    assert!(check(&[vec![nan2, 1.0, 2.0]], &r).passed());
    assert_eq!(check(&[vec![1.0, 1.0, f32::NAN]], &r).wrong, vec![2]);
    assert_eq!(check(&[vec![f32::NAN, -0.0, 2.0]], &r).wrong, vec![1]);
    let z = Reference {
        expect: vec![0.0f32],
        ..r.clone()
    };
    assert_eq!(check(&[vec![-0.0f32]], &z).wrong, vec![1]); // bitwise: signs of zero differ
    let t = Reference {
        expect: vec![f32::NAN, 1.0, f32::INFINITY],
        bound: Some(vec![0.1, 0.1, 0.1]),
        bitwise: false,
        ..r.clone()
    };
    assert!(check(&[vec![f32::NAN, 1.05, f32::INFINITY]], &t).passed());
    assert_eq!(check(&[vec![1.0, f32::NAN, 3e38]], &t).wrong, vec![3]);
    // Missing elements are wrong.
    let v = check(&[vec![f32::NAN]], &r);
    assert_eq!(v.wrong, vec![2]);
    assert_eq!(v.first_wrong.map(|f| (f.0, f.1)), Some((0, 1)));
}

#[test]
fn avg_reference_is_nccl_semantics() {
    // 3 ranks of half: pre-multiply each input by f16(1/3), then sum.
    let inputs: Vec<Vec<f16>> = [1.0f32, 2.0, 4.0]
        .iter()
        .map(|&x| vec![f16::from_f32(x)])
        .collect();
    let r = reference(&inputs, ReduceOp::Avg, Inputs::Exact);
    assert!(!r.bitwise);
    assert!((r.expect[0].to_f64() - 7.0 / 3.0).abs() < 1e-3);
    let s = f16::from_bits(0x3555);
    let pre = |x: f16| f16::from_f64(x.to_f64() * s.to_f64());
    let nccl = f16::from_f64(
        f16::from_f64(pre(inputs[0][0]).to_f64() + pre(inputs[1][0]).to_f64()).to_f64()
            + pre(inputs[2][0]).to_f64(),
    );
    assert!(check(&[vec![nccl]], &r).passed());
    // Integers: sum, then truncating division on the last step.
    let ints = vec![vec![-7i32, 7], vec![1, 1], vec![-1, 0]];
    let r = reference(&ints, ReduceOp::Avg, Inputs::Random);
    assert!(r.bitwise);
    assert_eq!(r.expect, vec![-2, 2]);
    // One rank: identity (pre-multiply by 1).
    let one = vec![vec![bf16::from_f32(3.5), bf16::from_f32(-0.0)]];
    let r = reference(&one, ReduceOp::Avg, Inputs::Random);
    assert_eq!(r.expect, one[0]);
    let e5 = vec![vec![F8E5M2::from_f64(3.0)]; 4];
    assert_eq!(
        reference(&e5, ReduceOp::Avg, Inputs::Exact).expect,
        vec![F8E5M2::from_f64(3.0)]
    );
}

#[test]
fn scatter_gather_changed() {
    let n = 3;
    let inputs: Vec<Vec<i32>> =
        make_inputs(Inputs::Random, ReduceOp::Sum, n, 3 * 5, 2).expect("inputs");
    let full = reference(&inputs, ReduceOp::Sum, Inputs::Random);
    let rs = reference_reduce_scatter(&inputs, ReduceOp::Sum, Inputs::Random);
    assert_eq!(rs.len(), n);
    for (r, part) in rs.iter().enumerate() {
        assert_eq!(part.expect, full.expect[r * 5..(r + 1) * 5]);
        assert!(part.bitwise);
    }
    let fl: Vec<Vec<f64>> = make_inputs(Inputs::Random, ReduceOp::Sum, 4, 8, 2).expect("inputs");
    let rs = reference_reduce_scatter(&fl, ReduceOp::Sum, Inputs::Random);
    assert_eq!(rs[3].bound.as_ref().map(Vec::len), Some(2));
    let ag = reference_all_gather(&inputs);
    assert_eq!(ag.expect.len(), 45);
    assert_eq!(ag.expect[15..30], inputs[1][..]);
    assert!(check(&vec![ag.expect.clone(); 3], &ag).passed());
    let a = vec![1.0f32, -0.0, f32::NAN];
    assert_eq!(changed(&a, &a), 0);
    assert_eq!(changed(&a, &[1.0, 0.0, f32::NAN]), 1);
    assert_eq!(changed(&a, &[1.0]), 2);
}

#[test]
fn scaled_in_place_reference() {
    let inputs: Vec<Vec<f32>> =
        make_inputs(Inputs::Exact, ReduceOp::Sum, 3, 100, 1).expect("inputs");
    let r = reference(&inputs, ReduceOp::Sum, Inputs::Exact).scaled(9.0);
    for i in 0..100 {
        let s: f32 = inputs.iter().map(|v| v[i]).sum();
        assert_eq!(r.expect[i], s * 9.0);
    }
    assert!(r.bitwise);
}

#[test]
fn inputs_parse() {
    assert_eq!("exact".parse(), Ok(Inputs::Exact));
    assert_eq!(" Random ".parse(), Ok(Inputs::Random));
    assert!("fuzzy".parse::<Inputs>().is_err());
    assert_eq!(Inputs::default().to_string(), "random");
}
