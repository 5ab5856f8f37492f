use super::*;

const FORMATS: [Format; 4] = [Format::F16, Format::BF16, Format::E4M3, Format::E5M2];

/// An independent oracle: every finite non-negative value of the format in
/// ascending order (bits are monotone in value), plus a virtual point one
/// ulp beyond the largest finite value that stands for overflow.
struct Table {
    fmt: Format,
    vals: Vec<(f64, u64)>,
}

impl Table {
    fn new(fmt: Format) -> Table {
        let mut vals: Vec<(f64, u64)> = (0..=fmt.max_bits()).map(|b| (decode(fmt, b), b)).collect();
        let (max, mb) = vals[vals.len() - 1];
        let ulp = max - vals[vals.len() - 2].0;
        vals.push((max + ulp, mb + 1));
        for w in vals.windows(2) {
            assert!(w[0].0 < w[1].0, "{fmt:?}: not monotone at {:#x}", w[1].1);
        }
        Table { fmt, vals }
    }

    /// Round to nearest, ties to the even bit pattern, by search.
    fn round(&self, x: f64, satfinite: bool) -> u64 {
        let fmt = self.fmt;
        if x.is_nan() {
            return fmt.nan_bits();
        }
        let sign = if x.is_sign_negative() {
            fmt.sign_mask()
        } else {
            0
        };
        let a = x.abs();
        let over = if satfinite {
            sign | fmt.max_bits()
        } else {
            fmt.inf_bits().map_or(fmt.nan_bits(), |i| sign | i)
        };
        let last = self.vals.len() - 1;
        if a >= self.vals[last].0 {
            return over;
        }
        let k = self.vals.partition_point(|&(v, _)| v <= a);
        // vals[k-1] <= a < vals[k]
        let (lo, lb) = self.vals[k - 1];
        let (hi, hb) = self.vals[k];
        let pick = if a - lo < hi - a {
            lb
        } else if a - lo > hi - a {
            hb
        } else if lb & 1 == 0 {
            lb
        } else {
            hb
        };
        if pick > fmt.max_bits() {
            over
        } else {
            sign | pick
        }
    }
}

fn same(fmt: Format, a: u64, b: u64) -> bool {
    a == b || (fmt.is_nan(a) && fmt.is_nan(b))
}

#[test]
fn known_values() {
    assert_eq!(Format::F16.max_finite(), 65504.0);
    assert_eq!(
        Format::BF16.max_finite(),
        f32::from_bits(0x7f7f_0000) as f64
    );
    assert_eq!(Format::E4M3.max_finite(), 448.0);
    assert_eq!(Format::E5M2.max_finite(), 57344.0);
    assert_eq!(Format::F16.min_subnormal(), 2f64.powi(-24));
    assert_eq!(Format::BF16.min_subnormal(), 2f64.powi(-133));
    assert_eq!(Format::E4M3.min_subnormal(), 2f64.powi(-9));
    assert_eq!(Format::E5M2.min_subnormal(), 2f64.powi(-16));
    assert_eq!(Format::E4M3.max_bits(), 0x7e);
    assert_eq!(Format::E5M2.max_bits(), 0x7b);
    assert_eq!(Format::E5M2.inf_bits(), Some(0x7c));
    assert_eq!(Format::E4M3.inf_bits(), None);
    assert_eq!(Format::F16.nan_bits(), 0x7fff);
    assert_eq!(Format::E4M3.nan_bits(), 0x7f);
    assert!(Format::E4M3.is_nan(0xff) && Format::E4M3.is_nan(0x7f));
    assert!(!Format::E4M3.is_nan(0x7e) && !Format::E4M3.is_nan(0x78));
    assert_eq!(decode(Format::E4M3, 0x78), 256.0);
    assert!(Format::E5M2.is_nan(0x7d) && !Format::E5M2.is_nan(0x7c));
    assert_eq!(decode(Format::E5M2, 0xfc), f64::NEG_INFINITY);
    assert_eq!(decode(Format::E4M3, 0x01), 2f64.powi(-9));
    assert_eq!(decode(Format::E4M3, 0x08), 2f64.powi(-6));
    assert_eq!(decode(Format::E5M2, 0x01), 2f64.powi(-16));
    assert_eq!(decode(Format::E4M3, 0x38), 1.0);
    assert_eq!(decode(Format::E5M2, 0x3c), 1.0);
    assert_eq!(decode(Format::E5M2, 0xbc), -1.0);
    assert_eq!(decode(Format::F16, 0x3c00), 1.0);
    assert_eq!(decode(Format::BF16, 0x3f80), 1.0);
    assert_eq!(decode(Format::F16, 0x8000).to_bits(), (-0.0f64).to_bits());
    // Rounding and overflow by hand.
    assert_eq!(encode(Format::E4M3, 464.0, true), 0x7e); // tie -> even 448
    assert_eq!(encode(Format::E4M3, 464.0, false), 0x7e);
    assert_eq!(encode(Format::E4M3, 465.0, false), 0x7f); // NaN, no inf
    assert_eq!(encode(Format::E4M3, -465.0, true), 0xfe);
    assert_eq!(encode(Format::E4M3, f64::INFINITY, true), 0x7e);
    assert_eq!(encode(Format::E5M2, 61440.0, false), 0x7c); // tie -> even: inf
    assert_eq!(encode(Format::E5M2, 61439.0, false), 0x7b);
    assert_eq!(encode(Format::E5M2, -1e9, true), 0xfb);
    assert_eq!(encode(Format::E5M2, f64::NEG_INFINITY, false), 0xfc);
    assert_eq!(encode(Format::F16, 65520.0, false), 0x7c00); // tie -> inf
    assert_eq!(encode(Format::F16, 65519.99, false), 0x7bff);
    assert_eq!(encode(Format::F16, 65520.0, true), 0x7bff);
    assert_eq!(encode(Format::E4M3, 2f64.powi(-10), true), 0x00); // tie -> 0
    assert_eq!(encode(Format::E4M3, -2f64.powi(-10), true), 0x80);
    assert_eq!(encode(Format::E4M3, 3.0 * 2f64.powi(-11), true), 0x01);
    assert_eq!(encode(Format::E4M3, 1.0625, true), 0x38); // tie -> even 1.0
    assert_eq!(encode(Format::E4M3, 1.1875, true), 0x3a); // tie -> even 1.25
    assert_eq!(encode(Format::F16, f64::MIN_POSITIVE / 2.0, false), 0);
    assert_eq!(encode(Format::F16, -f64::from_bits(1), false), 0x8000);
    assert_eq!(encode(Format::BF16, f64::NAN, false), 0x7fff);
    assert_eq!(encode(Format::E5M2, -f64::NAN, true), 0x7f);
    assert_eq!(encode(Format::BF16, 1e300, false), 0x7f80);
}

#[test]
fn all_patterns_round_trip() {
    for fmt in FORMATS {
        for b in 0..(1u64 << fmt.width()) {
            let x = decode(fmt, b);
            if fmt.is_nan(b) {
                assert!(x.is_nan());
                assert_eq!(encode(fmt, x, false), fmt.nan_bits());
                continue;
            }
            assert_eq!(encode(fmt, x, false), b, "{fmt:?} {b:#x} = {x}");
            if x.is_finite() {
                assert_eq!(encode(fmt, x, true), b, "{fmt:?} {b:#x} = {x}");
            }
        }
    }
}

#[test]
fn fp8_tables_match_decode() {
    for fmt in [Format::E4M3, Format::E5M2] {
        for b in 0..=255u8 {
            let (t, d) = (decode8(fmt, b), decode(fmt, b as u64));
            assert!(t.to_bits() == d.to_bits(), "{fmt:?} {b:#x}");
        }
    }
    assert_eq!(decode8(Format::F16, 0x38), decode(Format::F16, 0x38));
}

#[test]
fn f16_and_bf16_decode_like_half() {
    for b in 0..=u16::MAX {
        let h = half::f16::from_bits(b).to_f64();
        let g = half::bf16::from_bits(b).to_f64();
        let (x, y) = (
            decode(Format::F16, b as u64),
            decode(Format::BF16, b as u64),
        );
        assert!(
            x.to_bits() == h.to_bits() || (x.is_nan() && h.is_nan()),
            "f16 {b:#x}"
        );
        assert!(
            y.to_bits() == g.to_bits() || (y.is_nan() && g.is_nan()),
            "bf16 {b:#x}"
        );
    }
}

/// Every midpoint between adjacent values (ties), and the f64 neighbours
/// of each midpoint, against the oracle; for f16/bf16 also against the
/// `half` crate's (correctly rounded) `from_f32`: midpoints are exact f32.
#[test]
fn midpoints_tie_to_even() {
    for fmt in FORMATS {
        let t = Table::new(fmt);
        for w in t.vals.windows(2) {
            let mid = (w[0].0 + w[1].0) / 2.0;
            for m in [mid, -mid] {
                for x in [
                    m,
                    f64::from_bits(m.to_bits() - 1),
                    f64::from_bits(m.to_bits() + 1),
                ] {
                    for sat in [false, true] {
                        let (got, want) = (encode(fmt, x, sat), t.round(x, sat));
                        assert!(
                            same(fmt, got, want),
                            "{fmt:?} sat={sat} x={x:e}: {got:#x} vs {want:#x}"
                        );
                    }
                }
                let half_bits = match fmt {
                    Format::F16 => Some(half::f16::from_f32(m as f32).to_bits()),
                    Format::BF16 => Some(half::bf16::from_f32(m as f32).to_bits()),
                    _ => None,
                };
                if let Some(hb) = half_bits {
                    assert_eq!(m as f32 as f64, m);
                    assert_eq!(encode(fmt, m, false), hb as u64, "{fmt:?} tie {m:e}");
                }
            }
        }
    }
}

/// SplitMix64: the element tests' random bits.
pub(crate) fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Millions of random f64: fully random bit patterns, and random values
/// with exponents in and around each format's range (where the rounding,
/// underflow and overflow happen), against the oracle; f32-exact ones
/// against `half` too.
#[test]
fn random_f64_against_oracle() {
    let mut s = 12345u64;
    for fmt in FORMATS {
        let t = Table::new(fmt);
        let lo = -(fmt.bias + fmt.man_bits as i32) - 4;
        let hi = (1 << fmt.exp_bits) - fmt.bias + 2;
        for k in 0..1_500_000u64 {
            let r = splitmix(&mut s);
            let x = if k % 8 == 0 {
                f64::from_bits(r)
            } else {
                let e = lo + (r % (hi - lo) as u64) as i32;
                let frac = splitmix(&mut s) >> 12;
                let m = f64::from_bits((1023u64 << 52) | frac) * pow2(e);
                if r & (1 << 40) != 0 {
                    -m
                } else {
                    m
                }
            };
            for sat in [false, true] {
                let (got, want) = (encode(fmt, x, sat), t.round(x, sat));
                assert!(
                    same(fmt, got, want),
                    "{fmt:?} sat={sat} x={x:e}: {got:#x} vs {want:#x}"
                );
            }
            let xf = x as f32;
            let hb = match fmt {
                Format::F16 => Some(half::f16::from_f32(xf).to_bits()),
                Format::BF16 => Some(half::bf16::from_f32(xf).to_bits()),
                _ => None,
            };
            if let Some(hb) = hb {
                let got = encode(fmt, xf as f64, false);
                assert!(
                    same(fmt, got, hb as u64),
                    "{fmt:?} {xf:e}: {got:#x} vs half {hb:#x}"
                );
            }
        }
    }
}
