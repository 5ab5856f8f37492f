//! Small binary floating-point formats: one generic, exhaustively tested
//! conversion between `f64` and the bits of a format described by a
//! [`Format`] (sign bit, exponent bits, mantissa bits, bias, infinities).
//!
//! All rounding of `half`, `bfloat16` and the two FP8 formats in this crate
//! goes through [`encode`]: round to nearest, ties to even, with subnormals,
//! overflow to infinity (or to the largest finite value with `satfinite`, as
//! CUDA's `__NV_SATFINITE` conversions do) and NaN. One rounding, from `f64`
//! directly (the `half` crate's `from_f64` is not used: on x86 with F16C it
//! goes through `f32`, and its bf16 path truncates the low 32 bits, so both can
//! round twice).

/// A binary floating-point format: 1 sign bit, `exp_bits`, `man_bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Format {
    /// Exponent field width.
    pub exp_bits: u32,
    /// Stored mantissa (fraction) width.
    pub man_bits: u32,
    /// Exponent bias: a normal value is `1.m * 2^(e - bias)`.
    pub bias: i32,
    /// IEEE-like: the all-ones exponent holds infinity (mantissa 0) and NaN.
    /// Otherwise (OCP E4M3 "FN"): the all-ones exponent is a normal binade
    /// except the all-ones pattern, the only NaN; there is no infinity.
    pub has_inf: bool,
}

impl Format {
    /// IEEE binary16 (`half`): max 65504.
    pub const F16: Format = Format {
        exp_bits: 5,
        man_bits: 10,
        bias: 15,
        has_inf: true,
    };
    /// bfloat16: the top half of an `f32`.
    pub const BF16: Format = Format {
        exp_bits: 8,
        man_bits: 7,
        bias: 127,
        has_inf: true,
    };
    /// IEEE binary32 (`f32`), for bounds and tests (the crate rounds to `f32`
    /// with `as`, which is the same rounding).
    pub const F32: Format = Format {
        exp_bits: 8,
        man_bits: 23,
        bias: 127,
        has_inf: true,
    };
    /// IEEE binary64 (`f64`).
    pub const F64: Format = Format {
        exp_bits: 11,
        man_bits: 52,
        bias: 1023,
        has_inf: true,
    };
    /// OCP FP8 E4M3 (the "FN" variant): no infinities, NaN = 0x7f/0xff, max 448.
    pub const E4M3: Format = Format {
        exp_bits: 4,
        man_bits: 3,
        bias: 7,
        has_inf: false,
    };
    /// OCP FP8 E5M2: IEEE-like with infinities, max 57344.
    pub const E5M2: Format = Format {
        exp_bits: 5,
        man_bits: 2,
        bias: 15,
        has_inf: true,
    };

    /// Total width in bits.
    #[inline]
    pub const fn width(self) -> u32 {
        1 + self.exp_bits + self.man_bits
    }

    /// The sign bit.
    #[inline]
    pub const fn sign_mask(self) -> u64 {
        1 << (self.exp_bits + self.man_bits)
    }

    /// All bits of the format.
    #[inline]
    const fn all_mask(self) -> u64 {
        self.sign_mask() | (self.sign_mask() - 1)
    }

    #[inline]
    const fn exp_mask(self) -> u64 {
        (1 << self.exp_bits) - 1
    }

    #[inline]
    const fn man_mask(self) -> u64 {
        (1 << self.man_bits) - 1
    }

    /// Bits of the largest finite value (positive).
    #[inline]
    pub const fn max_bits(self) -> u64 {
        if self.has_inf {
            ((self.exp_mask() - 1) << self.man_bits) | self.man_mask()
        } else {
            (self.exp_mask() << self.man_bits) | (self.man_mask() - 1)
        }
    }

    /// Bits of +infinity, if the format has one.
    #[inline]
    pub const fn inf_bits(self) -> Option<u64> {
        if self.has_inf {
            Some(self.exp_mask() << self.man_bits)
        } else {
            None
        }
    }

    /// The canonical NaN: every bit but the sign set (what CUDA produces:
    /// 0x7fff for half and bfloat16, 0x7f for both FP8 formats).
    #[inline]
    pub const fn nan_bits(self) -> u64 {
        self.sign_mask() - 1
    }

    /// Whether `bits` encode a NaN.
    #[inline]
    pub const fn is_nan(self, bits: u64) -> bool {
        let mag = bits & (self.sign_mask() - 1);
        if self.has_inf {
            mag > (self.exp_mask() << self.man_bits)
        } else {
            mag == self.nan_bits()
        }
    }

    /// Largest finite value.
    #[inline]
    pub const fn max_finite(self) -> f64 {
        decode(self, self.max_bits())
    }

    /// Smallest positive (subnormal) value, `2^(1 - bias - man_bits)`.
    #[inline]
    pub const fn min_subnormal(self) -> f64 {
        pow2(1 - self.bias - self.man_bits as i32)
    }

    /// Unit roundoff `2^-(man_bits + 1)`: the relative error bound of one
    /// rounding to nearest in the normal range.
    #[inline]
    pub const fn unit_roundoff(self) -> f64 {
        pow2(-(self.man_bits as i32) - 1)
    }
}

/// `2^k` exactly, for `k` in `-1074..=1023`.
#[inline]
const fn pow2(k: i32) -> f64 {
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else if k >= -1074 {
        f64::from_bits(1u64 << (k + 1074))
    } else {
        0.0
    }
}

/// The value of `bits` (the low `fmt.width()` bits; higher bits are ignored).
/// Exact: every value of these formats is an `f64`. NaN keeps its sign.
#[inline]
pub const fn decode(fmt: Format, bits: u64) -> f64 {
    let bits = bits & fmt.all_mask();
    let sign = (bits >> (fmt.exp_bits + fmt.man_bits)) << 63;
    let e = (bits >> fmt.man_bits) & fmt.exp_mask();
    let m = bits & fmt.man_mask();
    let mag = if e == 0 {
        // Zero or subnormal: m * 2^(1 - bias - man_bits), exact.
        (m as f64 * fmt.min_subnormal()).to_bits()
    } else if e == fmt.exp_mask() && (fmt.has_inf || m == fmt.man_mask()) {
        if fmt.is_nan(bits) {
            f64::NAN.to_bits()
        } else {
            f64::INFINITY.to_bits()
        }
    } else {
        // Normal: rebias the exponent, left-align the mantissa.
        (((e as i64 - fmt.bias as i64 + 1023) as u64) << 52) | (m << (52 - fmt.man_bits))
    };
    f64::from_bits(sign | mag)
}

/// Every value of an 8-bit format, by bits (see [`decode8`]).
pub(crate) const fn table8(fmt: Format) -> [f64; 256] {
    let mut t = [0.0; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = decode(fmt, b as u64);
        b += 1;
    }
    t
}

const E4M3_VALUES: [f64; 256] = table8(Format::E4M3);
const E5M2_VALUES: [f64; 256] = table8(Format::E5M2);

/// [`decode`] for the two FP8 formats by table lookup (other formats: `decode`).
#[inline]
pub(crate) fn decode8(fmt: Format, bits: u8) -> f64 {
    match fmt {
        Format::E4M3 => E4M3_VALUES[bits as usize],
        Format::E5M2 => E5M2_VALUES[bits as usize],
        _ => decode(fmt, bits as u64),
    }
}

/// Round `x` to `fmt`, to nearest with ties to even, and return its bits.
///
/// * Subnormal results are rounded like any other (gradual underflow); a
///   result that rounds up out of the subnormal range becomes the smallest
///   normal, one that rounds to zero keeps the sign of `x`.
/// * Overflow (the rounded magnitude exceeds the largest finite value, with
///   the exponent unbounded) and `+-inf` give `+-max finite` when `satfinite`,
///   otherwise `+-inf`, or NaN for a format without infinities.
/// * NaN gives the canonical NaN ([`Format::nan_bits`]).
#[inline]
pub fn encode(fmt: Format, x: f64, satfinite: bool) -> u64 {
    if x.is_nan() {
        return fmt.nan_bits();
    }
    let sign = if x.is_sign_negative() {
        fmt.sign_mask()
    } else {
        0
    };
    let overflow = if satfinite {
        sign | fmt.max_bits()
    } else {
        match fmt.inf_bits() {
            Some(inf) => sign | inf,
            None => fmt.nan_bits(),
        }
    };
    let a = x.abs();
    if a.is_infinite() {
        return overflow;
    }
    if fmt.man_bits >= 52 {
        // f64 itself (tests only).
        return x.to_bits();
    }
    let raw = a.to_bits();
    let emin = 1 - fmt.bias;
    if raw >= ((emin + 1023) as u64) << 52 {
        // Fast path, the result is normal (or overflows): round the whole
        // exponent|mantissa pattern as an integer, so a carry out of the
        // mantissa bumps the exponent, then rebias.
        let shift = 52 - fmt.man_bits;
        let rem = raw & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        let mut q = raw >> shift;
        if rem > half || (rem == half && q & 1 == 1) {
            q += 1;
        }
        let mag = q - (((1023 - fmt.bias) as u64) << fmt.man_bits);
        return if mag > fmt.max_bits() {
            overflow
        } else {
            sign | mag
        };
    }
    if a == 0.0 {
        return sign;
    }
    // Subnormal result (or zero): the general path below.
    // a = mant * 2^e exactly, mant < 2^53.
    let raw = a.to_bits();
    let field = (raw >> 52) as i32;
    let frac = raw & ((1 << 52) - 1);
    let (mant, e) = if field == 0 {
        (frac, -1074)
    } else {
        (frac | (1 << 52), field - 1075)
    };
    // floor(log2 a), and the exponent of the result's last mantissa bit
    // (the quantum): fixed at the subnormal quantum below the normal range.
    let lg = e + 63 - mant.leading_zeros() as i32;
    let emin = 1 - fmt.bias;
    let quantum = lg.max(emin) - fmt.man_bits as i32;
    let shift = quantum - e;
    let q: u64 = if shift <= 0 {
        // Exact: a has no bits below the quantum (then mant << -shift has its
        // top bit at position man_bits at most).
        mant << (-shift)
    } else if shift >= 64 {
        // a < 2^53 * 2^e <= quantum / 2^10: rounds to zero.
        0
    } else {
        let kept = mant >> shift;
        let rem = mant & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        }
    };
    // Assemble the magnitude. A carry out of the mantissa (q == 2^(m+1) for a
    // normal, q == 2^m for a subnormal) lands in the exponent field, which is
    // exactly the next binade.
    let mag = if lg < emin {
        q
    } else {
        (((lg + fmt.bias) as u64) << fmt.man_bits) + q - (1 << fmt.man_bits)
    };
    if mag > fmt.max_bits() {
        return overflow;
    }
    sign | mag
}

#[cfg(test)]
pub(crate) mod tests;
