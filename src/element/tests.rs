use super::*;

#[test]
fn table_facts() {
    let names: Vec<&str> = DataType::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(
        names,
        [
            "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
            "bfloat16", "f8e4m3", "f8e5m2"
        ]
    );
    for (i, d) in DataType::ALL.into_iter().enumerate() {
        assert_eq!(d.nccl(), i as i32);
        assert_eq!(d.to_string().parse::<DataType>(), Ok(d));
        #[cfg(feature = "serde")]
        assert_eq!(
            serde_json::to_string(&d).ok(),
            Some(format!("\"{}\"", d.name()))
        );
        assert_eq!(d.format().is_some(), d.is_float());
        assert_eq!(
            with_element!(d, T => (T::DTYPE, size_of::<T>())),
            (d, d.size())
        );
    }
    let ptx: Vec<&str> = DataType::ALL.iter().map(|d| d.ptx()).collect();
    assert_eq!(
        ptx,
        ["s8", "u8", "s32", "u32", "s64", "u64", "f16", "f32", "f64", "bf16", "e4m3", "e5m2"]
    );
    assert!(
        DataType::Int64.is_signed() && !DataType::Uint8.is_signed() && DataType::Half.is_signed()
    );
    assert!(!DataType::Int32.is_float() && DataType::F8e5m2.is_float());
    for (i, o) in ReduceOp::ALL.into_iter().enumerate() {
        assert_eq!(o.nccl(), i as i32);
        assert_eq!(o.to_string().parse::<ReduceOp>(), Ok(o));
        #[cfg(feature = "serde")]
        assert_eq!(
            serde_json::to_string(&o).ok(),
            Some(format!("\"{}\"", o.name()))
        );
    }
}

#[test]
fn parsing() {
    use DataType::*;
    assert_eq!(DataType::parse_list("all"), Ok(DataType::ALL.to_vec()));
    assert_eq!(
        DataType::parse_list("fp16, bf16,f32,float64,char,int,e4m3,fp8_e5m2,half"),
        Ok(vec![
            Half, Bfloat16, Float, Double, Int8, Int32, F8e4m3, F8e5m2
        ])
    );
    assert_eq!("FLOAT16".parse(), Ok(Half));
    assert_eq!("float32".parse(), Ok(Float));
    assert_eq!("f64".parse(), Ok(Double));
    assert_eq!("fp8_e4m3".parse(), Ok(F8e4m3));
    assert_eq!("e5m2".parse(), Ok(F8e5m2));
    let e = DataType::parse_list("float,quad").unwrap_err();
    assert!(
        e.contains("quad") && e.contains("bfloat16") && e.contains("f8e5m2"),
        "{e}"
    );
    assert!(DataType::parse_list("float,").is_err());
    assert_eq!(
        ReduceOp::parse_list("max, sum,max"),
        Ok(vec![ReduceOp::Max, ReduceOp::Sum])
    );
    assert_eq!(ReduceOp::parse_list("ALL"), Ok(ReduceOp::ALL.to_vec()));
    assert!(ReduceOp::parse_list("mean").unwrap_err().contains("avg"));
}

#[test]
fn lowering() {
    use DataType::*;
    for d in DataType::ALL {
        for (op, dev) in [
            (ReduceOp::Sum, DevOp::Sum),
            (ReduceOp::Prod, DevOp::Prod),
            (ReduceOp::Max, DevOp::Max),
            (ReduceOp::Min, DevOp::Min),
        ] {
            assert_eq!(d.lower(op, 5), Lowered { op: dev, scalar: 0 });
        }
    }
    for d in [Int8, Uint8, Int32, Uint32, Int64, Uint64] {
        assert_eq!(
            d.lower(ReduceOp::Avg, 7),
            Lowered {
                op: DevOp::SumPostDiv,
                scalar: 7
            }
        );
    }
    let avg = |d: DataType, n| {
        let l = d.lower(ReduceOp::Avg, n);
        assert_eq!(l.op, DevOp::PreMulSum);
        l.scalar
    };
    assert_eq!(avg(Float, 3), (1.0f32 / 3.0).to_bits() as u64);
    assert_eq!(avg(Double, 3), (1.0f64 / 3.0).to_bits());
    assert_eq!(
        avg(Half, 3),
        half::f16::from_f32(1.0 / 3.0).to_bits() as u64
    );
    assert_eq!(
        avg(Bfloat16, 3),
        half::bf16::from_f32(1.0 / 3.0).to_bits() as u64
    );
    assert_eq!(avg(Half, 4), 0x3400); // 0.25
    assert_eq!(avg(F8e4m3, 2), 0x30); // 0.5 = 2^-1: exponent 6
    assert_eq!(avg(F8e5m2, 4), 0x34); // 0.25 = 2^-2: exponent 13
    assert_eq!(avg(F8e4m3, 3), 0x2b); // 1/3 -> 0.34375 = 1.011b * 2^-2
    assert_eq!(avg(F8e4m3, 1024), 0x00); // 2^-10: a tie between 0 and 2^-9 -> 0
    assert_eq!(avg(F8e4m3, 1000), 0x01);
    assert_eq!(avg(Half, 1), 0x3c00);
    // Double rounding as NCCL does it: 1/N to f32 first, then to the type.
    for n in 1..5000 {
        let via32 = (1.0 / n as f64) as f32;
        assert_eq!(avg(Half, n), half::f16::from_f32(via32).to_bits() as u64);
        assert_eq!(
            avg(Bfloat16, n),
            half::bf16::from_f32(via32).to_bits() as u64
        );
    }
}

#[test]
fn element_conversions() {
    assert_eq!(i8::from_f64(300.0), 127);
    assert_eq!(u8::from_f64(-3.0), 0);
    assert_eq!(i32::from_f64(f64::NAN), 0);
    assert_eq!((-1i8).to_bits(), 0xff);
    assert_eq!((-1i64).to_bits(), u64::MAX);
    assert_eq!(<i8 as Element>::from_bits(0x1ff), -1);
    assert_eq!(1.5f32.to_bits(), 0x3fc0_0000);
    assert_eq!(<f32 as Element>::to_bits(-0.0), 0x8000_0000);
    assert_eq!(<f64 as Element>::from_bits(0x3ff0_0000_0000_0000), 1.0);
    // One rounding from f64 (the `half` crate's own from_f64 goes through
    // f32 on x86 with F16C and gets 0x3c00 here).
    assert_eq!(
        <f16 as Element>::from_f64(1.0 + 2f64.powi(-11) + 2f64.powi(-40)).to_bits(),
        0x3c01
    );
    assert_eq!(
        <bf16 as Element>::from_f64(1.0 + 2f64.powi(-8) + 2f64.powi(-40)).to_bits(),
        0x3f81
    );
    assert_eq!(<bf16 as Element>::from_f64(f64::INFINITY).to_bits(), 0x7f80);
    assert_eq!(F8E4M3::from_f64(1000.0), F8E4M3(0x7e));
    assert_eq!(F8E4M3::from_f64(f64::NEG_INFINITY), F8E4M3(0xfe));
    assert_eq!(F8E5M2::from_f64(f64::INFINITY), F8E5M2(0x7b));
    assert_eq!(F8E5M2::from_f64(f64::NAN), F8E5M2(0x7f));
    assert_eq!(F8E4M3(0x38).to_f64(), 1.0);
    assert_eq!(F8E4M3(0x38).to_string(), "1");
    assert_eq!(<f32 as Element>::from_f64(f64::NAN).to_bits(), 0x7fff_ffff);
    assert_eq!(<f32 as Element>::from_f64(1e300), f32::INFINITY);
    // One rounding from f64: 1 + 2^-24 + 2^-50 rounds up in f32.
    assert_eq!(
        <f32 as Element>::from_f64(1.0 + 2f64.powi(-24) + 2f64.powi(-50)),
        1.0 + f32::EPSILON
    );
    for d in DataType::ALL {
        with_element!(d, T => small_values_round_trip::<T>());
    }
}

fn small_values_round_trip<T: Element>() {
    let d = T::DTYPE;
    for x in [0.0, 1.0, -2.0, 8.0, 12.0] {
        if d.is_signed() || x >= 0.0 {
            assert_eq!(T::from_f64(x).to_f64(), x, "{d}");
        }
    }
    assert_eq!(T::from_bits(T::from_f64(3.0).to_bits()), T::from_f64(3.0));
    assert_eq!(
        T::from_bits(T::from_f64(-1.0).to_bits()).to_f64(),
        if d.is_signed() { -1.0 } else { 0.0 }
    );
}

struct SizeOf;
impl ElementFn for SizeOf {
    type Output = (DataType, usize);
    fn call<T: Element>(self) -> (DataType, usize) {
        (T::DTYPE, size_of::<T>())
    }
}

#[test]
fn dispatch_visits_the_host_type() {
    for d in DataType::ALL {
        assert_eq!(d.dispatch(SizeOf), (d, d.size()));
    }
}

/// f32 and f64 add and multiply on the hardware give the bits of the
/// rounded-once f64 computation the other floats use (`float_add`,
/// `float_mul`), NaN canonical: over every pair of special values and two
/// hundred thousand random bit patterns (subnormals, overflow and
/// exponents far apart included).
#[test]
fn native_ops_are_the_f64_ones() {
    fn check<T: Element + core::ops::Add<Output = T> + core::ops::Mul<Output = T>>(values: &[T]) {
        let bits = |x: T| x.to_bits();
        for &a in values {
            for &b in values {
                assert_eq!(
                    bits(native_add(a, b)),
                    bits(float_add(a, b)),
                    "{a:?} + {b:?}"
                );
                assert_eq!(
                    bits(native_mul(a, b)),
                    bits(float_mul(a, b)),
                    "{a:?} * {b:?}"
                );
            }
        }
    }
    // xorshift64: a fixed sequence, no dependency.
    let mut s = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let special32 = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
        1.0 + f32::EPSILON,
        16_777_216.0,
        1e-30,
        3e38,
    ];
    let mut v32: Vec<f32> = special32.to_vec();
    v32.extend((0..440).map(|_| f32::from_bits(next() as u32)));
    check(&v32);
    let special64 = [
        0.0f64,
        -0.0,
        1.0,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(0xfff0_0000_0000_0001),
    ];
    let mut v64: Vec<f64> = special64.to_vec();
    v64.extend((0..100).map(|_| f64::from_bits(next())));
    check(&v64);
}
