//! Data types and reduction operations (NCCL's), and the [`Element`] trait.
//!
//! Every per-type fact (enum variant, host type, nccl-tests name, size, NCCL
//! enum value, PTX suffix, float/signed, numerics) comes from ONE table, the
//! `__ringreduce_dtypes!` macro below: adding a data type is one table line
//! plus its numerics (an existing kind, or a new [`minifloat::Format`]).
//!
//! * [`DataType`], [`ReduceOp`]: what a user asks for (NCCL's enums).
//! * [`DevOp`], [`Lowered`], [`DataType::lower`]: what a kernel computes
//!   (NCCL 2.28's `hostToDevRedOp`).
//! * [`combine`](mod@combine): the CPU semantics of one reduce step, bitwise identical to
//!   the GPU kernels.
//! * [`minifloat`]: the one rounding routine for `half`, `bfloat16` and FP8.
//! * [`with_element!`](crate::with_element) / [`DataType::dispatch`]: turn a
//!   runtime [`DataType`] into a call of a generic function.

pub mod combine;
pub mod minifloat;

pub use combine::combine_one;
pub use combine::Combine;
pub(crate) use combine::{apply_ops, combine, combine_into, combine_serial};
pub use half::{bf16, f16};

use minifloat::{decode, encode, Format};
use std::fmt;
use std::str::FromStr;

/// The data-type table: one line per type, in NCCL enum order. Adding a data
/// type is one line here plus its numerics (the last column: `int`,
/// `native(FORMAT)` for types Rust computes with natively, `mini(FORMAT)` for
/// 16-bit floats rounded by [`minifloat`], `fp8(FORMAT)` for 8-bit floats that
/// NCCL computes in half precision).
///
/// `__ringreduce_dtypes!([callback] args...)` expands to
/// `callback! { args... rows... }`.
#[doc(hidden)]
#[macro_export]
macro_rules! __ringreduce_dtypes {
    ([$($cb:tt)*] $($args:tt)*) => {
        $($cb)*! { $($args)*
            // variant    host type                  name        size nccl ptx     float  signed numerics
            Int8     => i8,                          "int8",     1,   0,  "s8",   false, true,  int;
            Uint8    => u8,                          "uint8",    1,   1,  "u8",   false, false, int;
            Int32    => i32,                         "int32",    4,   2,  "s32",  false, true,  int;
            Uint32   => u32,                         "uint32",   4,   3,  "u32",  false, false, int;
            Int64    => i64,                         "int64",    8,   4,  "s64",  false, true,  int;
            Uint64   => u64,                         "uint64",   8,   5,  "u64",  false, false, int;
            Half     => $crate::element::f16,        "half",     2,   6,  "f16",  true,  true,  mini(F16);
            Float    => f32,                         "float",    4,   7,  "f32",  true,  true,  native(F32);
            Double   => f64,                         "double",   8,   8,  "f64",  true,  true,  native(F64);
            Bfloat16 => $crate::element::bf16,       "bfloat16", 2,   9,  "bf16", true,  true,  mini(BF16);
            F8e4m3   => $crate::element::F8E4M3,     "f8e4m3",   1,  10,  "e4m3", true,  true,  fp8(E4M3);
            F8e5m2   => $crate::element::F8E5M2,     "f8e5m2",   1,  11,  "e5m2", true,  true,  fp8(E5M2);
        }
    };
}

/// Run `body` with the type alias `T` bound to the host type of a runtime
/// [`DataType`]: the bridge from a runtime choice to generic code.
///
/// ```
/// use ringreduce::element::{DataType, Element};
/// fn zeros<T: Element>(n: usize) -> usize { vec![T::default(); n].len() * size_of::<T>() }
/// let bytes = ringreduce::with_element!(DataType::Half, T => zeros::<T>(10));
/// assert_eq!(bytes, 20);
/// ```
///
/// Every arm must have the same type, so `body` is usually a call of one
/// generic function. (In an inline body `T` is a concrete type, so inherent
/// methods win: `x.to_bits()` on an `f32` is `f32::to_bits`; write
/// `Element::to_bits(x)` there.) [`DataType::dispatch`] does the same as a
/// function taking an [`ElementFn`] visitor.
#[macro_export]
macro_rules! with_element {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::__ringreduce_dtypes!([$crate::__ringreduce_with_element]($dtype)($T)($body))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __ringreduce_with_element {
    (($dtype:expr) ($T:ident) ($body:expr)
     $($variant:ident => $host:ty, $name:literal, $size:literal, $nccl:literal, $ptx:literal,
       $float:literal, $signed:literal, $kind:ident $(($fmt:ident))?;)*) => {
        match $dtype {
            $($crate::element::DataType::$variant => {
                #[allow(non_camel_case_types, dead_code)]
                type $T = $host;
                $body
            })*
        }
    };
}

macro_rules! define_data_type {
    (@format int) => { None };
    (@format $kind:ident $fmt:ident) => { Some(Format::$fmt) };
    ($($variant:ident => $host:ty, $name:literal, $size:literal, $nccl:literal, $ptx:literal,
       $float:literal, $signed:literal, $kind:ident $(($fmt:ident))?;)*) => {
        /// NCCL's data types, named as nccl-tests names them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "lowercase"))]
        pub enum DataType {
            $(#[doc = concat!("`", $name, "` (NCCL ", stringify!($nccl), ", PTX `", $ptx, "`)")] $variant,)*
        }

        const DTYPE_COUNT: usize = [$($name),*].len();

        impl DataType {
            /// Every data type, in NCCL enum order.
            pub const ALL: [DataType; DTYPE_COUNT] = [$(DataType::$variant),*];

            /// The nccl-tests name (`"float"`, `"bfloat16"`, `"f8e4m3"`, ...).
            pub const fn name(self) -> &'static str {
                match self { $(DataType::$variant => $name,)* }
            }

            /// Size of one element in bytes.
            pub const fn size(self) -> usize {
                match self { $(DataType::$variant => $size,)* }
            }

            /// The `ncclDataType_t` value (`ncclInt8` = 0 ... `ncclFloat8e5m2` = 11).
            pub const fn nccl(self) -> i32 {
                match self { $(DataType::$variant => $nccl,)* }
            }

            /// Whether this is a floating-point type.
            pub const fn is_float(self) -> bool {
                match self { $(DataType::$variant => $float,)* }
            }

            /// Whether the type is signed (integers only; every float is).
            pub const fn is_signed(self) -> bool {
                match self { $(DataType::$variant => $signed,)* }
            }

            /// The PTX type suffix, used in kernel and file names
            /// (`"s8"`, `"f32"`, `"bf16"`, `"e4m3"`, ...).
            pub const fn ptx(self) -> &'static str {
                match self { $(DataType::$variant => $ptx,)* }
            }

            /// The binary format of a float type (`None` for integers): its
            /// precision and range, e.g. for error bounds.
            pub const fn format(self) -> Option<Format> {
                match self { $(DataType::$variant => define_data_type!(@format $kind $($fmt)?),)* }
            }
        }

        $(const _: () = assert!(size_of::<$host>() == $size);)*
    };
}

__ringreduce_dtypes!([define_data_type]);

/// OCP FP8 E4M3 ("FN": bias 7, no infinities, NaN = 0x7f/0xff, max 448),
/// stored as its bits. `==` compares bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct F8E4M3(pub u8);

/// OCP FP8 E5M2 (bias 15, IEEE-like with infinities, max 57344), stored as
/// its bits. `==` compares bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct F8E5M2(pub u8);

macro_rules! fp8_inherent {
    ($($t:ident $fmt:ident),*) => {$(
        impl $t {
            /// The value with these bits.
            pub const fn from_bits(bits: u8) -> $t {
                $t(bits)
            }
            /// The raw bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&decode(Format::$fmt, self.0 as u64), f)
            }
        }
    )*};
}
fp8_inherent!(F8E4M3 E4M3, F8E5M2 E5M2);

pub(crate) mod sealed {
    /// The reduce primitives of one type (not nameable outside the crate, so
    /// [`Element`](super::Element) cannot be implemented elsewhere). The
    /// semantics are documented in [`combine`](super::combine).
    pub trait Sealed: Copy {
        /// Round an exact (or f64) result to the type the way a reduce
        /// kernel does: floats to nearest even (FP8: to half first, then FP8
        /// with satfinite), NaN to the canonical NaN; integers `as`.
        fn round_op(x: f64) -> Self;
        /// `+`: wrapping for integers, rounded once for floats.
        fn red_add(self, b: Self) -> Self;
        /// `*`: wrapping for integers, rounded once for floats.
        fn red_mul(self, b: Self) -> Self;
        /// Maximum (IEEE maxNum for floats).
        fn red_max(self, b: Self) -> Self;
        /// Minimum (IEEE minNum for floats).
        fn red_min(self, b: Self) -> Self;
        /// Division by a rank count (`SumPostDiv`'s post-op): truncating
        /// integer division; floats divide and round (never produced by
        /// lowering).
        fn red_div(self, n: u64) -> Self;
    }
}

/// An element type the engine can reduce (sealed: exactly the host types of
/// [`DataType`]).
pub trait Element:
    bytemuck::Pod + Default + Send + Sync + PartialEq + fmt::Debug + 'static + sealed::Sealed
{
    /// The data type this host type stores.
    const DTYPE: DataType;

    /// The exact value (integers: `as f64`, which rounds for |x| > 2^53).
    fn to_f64(self) -> f64;

    /// Convert: floats round to nearest even, once, from `f64` directly (FP8
    /// with satfinite: overflow and `+-inf` give `+-max finite`); NaN gives the
    /// canonical NaN. Integers: `as` (saturating, NaN to 0).
    fn from_f64(x: f64) -> Self;

    /// Raw bits, zero-extended.
    #[inline]
    fn to_bits(self) -> u64 {
        let mut b = [0u8; 8];
        let n = size_of::<Self>();
        if cfg!(target_endian = "little") {
            b[..n].copy_from_slice(bytemuck::bytes_of(&self));
            u64::from_le_bytes(b)
        } else {
            b[8 - n..].copy_from_slice(bytemuck::bytes_of(&self));
            u64::from_be_bytes(b)
        }
    }

    /// The element with these bits (the low `size` bytes of `bits`), e.g. a
    /// [`Lowered::scalar`].
    #[inline]
    fn from_bits(bits: u64) -> Self {
        let n = size_of::<Self>();
        if cfg!(target_endian = "little") {
            bytemuck::pod_read_unaligned(&bits.to_le_bytes()[..n])
        } else {
            bytemuck::pod_read_unaligned(&bits.to_be_bytes()[8 - n..])
        }
    }
}

/// IEEE maxNum as CUDA's `fmaxf`/`__hmax`: one NaN operand gives the other
/// operand, two give NaN; `max(-0, +0) = +0` (assumed for `fmaxf`/`fmax`,
/// documented for `__hmax`; to be confirmed on the GPU).
#[inline]
fn max_num(a: f64, b: f64) -> f64 {
    if a.is_nan() || b > a || (b == a && a.is_sign_negative()) {
        b
    } else {
        a
    }
}

/// IEEE minNum, the mirror of [`max_num`]: `min(-0, +0) = -0`.
#[inline]
fn min_num(a: f64, b: f64) -> f64 {
    if a.is_nan() || b < a || (b == a && b.is_sign_negative()) {
        b
    } else {
        a
    }
}

// The float primitives, one generic function each: compute in f64, round once
// with the type's `round_op`. For f64 that is the native operation. For the
// narrower types the f64 result is either exact (every product of two f32, or
// two 16-bit floats; every sum of two f16 or of two FP8; every sum that lands
// in the target's subnormal range, since both operands are multiples of its
// smallest subnormal) or, for a sum of two f32 or bf16 whose exponents differ
// a lot, rounded once more than the hardware does; that double rounding is
// innocuous because f64 has at least 2p+2 bits for a p-bit target (Figueroa,
// "When is double rounding innocuous?", 1995: 53 >= 2*24+2), so the result
// equals the correctly rounded sum, as on the GPU.
#[inline]
fn float_add<T: Element>(a: T, b: T) -> T {
    T::round_op(a.to_f64() + b.to_f64())
}
#[inline]
fn float_mul<T: Element>(a: T, b: T) -> T {
    T::round_op(a.to_f64() * b.to_f64())
}
#[inline]
fn float_max<T: Element>(a: T, b: T) -> T {
    T::round_op(max_num(a.to_f64(), b.to_f64()))
}
#[inline]
fn float_min<T: Element>(a: T, b: T) -> T {
    T::round_op(min_num(a.to_f64(), b.to_f64()))
}
// f32 and f64 add and multiply on the hardware's own operation: its result
// is the correctly rounded one that `float_add` / `float_mul` compute
// through f64 (the same bits, checked by `native_ops_are_the_f64_ones`), and
// a loop of it vectorizes. Only a NaN needs the kernel's canonical bits.
#[inline]
fn native_add<T: Element + core::ops::Add<Output = T>>(a: T, b: T) -> T {
    canonical(a + b)
}
#[inline]
fn native_mul<T: Element + core::ops::Mul<Output = T>>(a: T, b: T) -> T {
    canonical(a * b)
}
/// `x`, or the canonical NaN where `x` is a NaN (`x != x`).
#[inline]
fn canonical<T: Element>(x: T) -> T {
    #[allow(clippy::eq_op)]
    if x != x {
        T::round_op(f64::NAN)
    } else {
        x
    }
}
#[inline]
fn float_div<T: Element>(a: T, n: u64) -> T {
    T::round_op(a.to_f64() / n.max(1) as f64)
}

macro_rules! impl_elements {
    (@int $variant:ident $host:ty) => {
        impl sealed::Sealed for $host {
            #[inline]
            fn round_op(x: f64) -> Self {
                x as $host
            }
            #[inline]
            fn red_add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline]
            fn red_mul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            #[inline]
            fn red_max(self, b: Self) -> Self {
                Ord::max(self, b)
            }
            #[inline]
            fn red_min(self, b: Self) -> Self {
                Ord::min(self, b)
            }
            #[inline]
            fn red_div(self, n: u64) -> Self {
                // Truncating division of the (wrapped) value, signed for
                // signed types, as NCCL's FuncSumPostDiv::divide.
                (self as i128 / n.max(1) as i128) as $host
            }
        }
        impl Element for $host {
            const DTYPE: DataType = DataType::$variant;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                x as $host
            }
        }
    };
    (@float $variant:ident $host:ty) => {
        impl_elements!(@float $variant $host, float_add, float_mul);
    };
    (@float $variant:ident $host:ty, $add:ident, $mul:ident) => {
        impl sealed::Sealed for $host {
            #[inline]
            fn round_op(x: f64) -> Self {
                Self::round_kernel(x)
            }
            #[inline]
            fn red_add(self, b: Self) -> Self {
                $add(self, b)
            }
            #[inline]
            fn red_mul(self, b: Self) -> Self {
                $mul(self, b)
            }
            #[inline]
            fn red_max(self, b: Self) -> Self {
                float_max(self, b)
            }
            #[inline]
            fn red_min(self, b: Self) -> Self {
                float_min(self, b)
            }
            #[inline]
            fn red_div(self, n: u64) -> Self {
                float_div(self, n)
            }
        }
    };
    (@native $variant:ident $host:ty, $fmt:ident) => {
        impl_elements!(@float $variant $host, native_add, native_mul);
        impl RoundKernel for $host {
            #[inline]
            fn round_kernel(x: f64) -> Self {
                if x.is_nan() {
                    <$host>::from_bits(Format::$fmt.nan_bits() as _)
                } else {
                    x as $host
                }
            }
        }
        impl Element for $host {
            const DTYPE: DataType = DataType::$variant;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                Self::round_kernel(x)
            }
        }
    };
    (@mini $variant:ident $host:ty, $fmt:ident) => {
        impl_elements!(@float $variant $host);
        impl RoundKernel for $host {
            #[inline]
            fn round_kernel(x: f64) -> Self {
                <$host>::from_bits(encode(Format::$fmt, x, false) as _)
            }
        }
        impl Element for $host {
            const DTYPE: DataType = DataType::$variant;
            #[inline]
            fn to_f64(self) -> f64 {
                decode(Format::$fmt, self.to_bits() as u64)
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                Self::round_kernel(x)
            }
        }
    };
    (@fp8 $variant:ident $host:ty, $fmt:ident) => {
        impl_elements!(@float $variant $host);
        impl RoundKernel for $host {
            /// NCCL computes FP8 in half precision and converts back with
            /// satfinite: round to f16 (overflow to inf), then to FP8.
            #[inline]
            fn round_kernel(x: f64) -> Self {
                let h = decode(Format::F16, encode(Format::F16, x, false));
                <$host>::from_bits(encode(Format::$fmt, h, true) as _)
            }
        }
        impl Element for $host {
            const DTYPE: DataType = DataType::$variant;
            #[inline]
            fn to_f64(self) -> f64 {
                minifloat::decode8(Format::$fmt, self.to_bits())
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                <$host>::from_bits(encode(Format::$fmt, x, true) as _)
            }
        }
    };
    ($($variant:ident => $host:ty, $name:literal, $size:literal, $nccl:literal, $ptx:literal,
       $float:literal, $signed:literal, $kind:ident $(($fmt:ident))?;)*) => {
        $(impl_elements!(@$kind $variant $host $(, $fmt)?);)*
    };
}

/// How a kernel rounds an f64 result to a float type (see `Sealed::round_op`).
trait RoundKernel {
    fn round_kernel(x: f64) -> Self;
}

__ringreduce_dtypes!([impl_elements]);

/// A generic function to run on the host type of a runtime [`DataType`]:
/// the function-style form of [`with_element!`](crate::with_element).
pub trait ElementFn {
    /// What the function returns.
    type Output;
    /// Run the function for the host type `T`.
    fn call<T: Element>(self) -> Self::Output;
}

impl DataType {
    /// Call `f.call::<T>()` with `T` the host type of `self`.
    pub fn dispatch<F: ElementFn>(self, f: F) -> F::Output {
        crate::with_element!(self, T => f.call::<T>())
    }

    /// Lower a reduction for `ranks` ranks to what the kernel computes, as
    /// NCCL 2.28's `hostToDevRedOp`: Sum/Prod/Max/Min map directly (scalar 0);
    /// Avg on integers is `SumPostDiv` by `ranks`; Avg on floats is
    /// `PreMulSum` by `1/ranks` rounded to the type the way NCCL computes it
    /// (`double`: `1.0/N`; every other float: `float(1.0/N)`, then rounded to
    /// the type, FP8 with satfinite). `ranks == 0` is treated as 1.
    pub fn lower(self, op: ReduceOp, ranks: usize) -> Lowered {
        let n = ranks.max(1);
        let (op, scalar) = match op {
            ReduceOp::Sum => (DevOp::Sum, 0),
            ReduceOp::Prod => (DevOp::Prod, 0),
            ReduceOp::Max => (DevOp::Max, 0),
            ReduceOp::Min => (DevOp::Min, 0),
            ReduceOp::Avg if !self.is_float() => (DevOp::SumPostDiv, n as u64),
            ReduceOp::Avg => {
                let inv = 1.0 / n as f64;
                let x = if self == DataType::Double {
                    inv
                } else {
                    inv as f32 as f64
                };
                (
                    DevOp::PreMulSum,
                    crate::with_element!(self, T => Element::to_bits(T::from_f64(x))),
                )
            }
        };
        Lowered { op, scalar }
    }

    /// Parse a comma-separated list of names or aliases, or `all`. Duplicates
    /// are dropped (first occurrence kept).
    pub fn parse_list(s: &str) -> Result<Vec<DataType>, String> {
        parse_list(s, &DataType::ALL)
    }
}

impl FromStr for DataType {
    type Err = String;
    /// A name (`int8` ... `f8e5m2`) or an alias: `char` (int8), `int`
    /// (int32), `fp16`/`f16`/`float16`, `bf16`, `fp32`/`f32`/`float32`,
    /// `fp64`/`f64`/`float64`, `fp8_e4m3`/`e4m3`, `fp8_e5m2`/`e5m2`.
    fn from_str(s: &str) -> Result<DataType, String> {
        let t = s.trim().to_ascii_lowercase();
        let alias = match t.as_str() {
            "char" => Some(DataType::Int8),
            "int" => Some(DataType::Int32),
            "fp16" | "f16" | "float16" => Some(DataType::Half),
            "bf16" => Some(DataType::Bfloat16),
            "fp32" | "f32" | "float32" => Some(DataType::Float),
            "fp64" | "f64" | "float64" => Some(DataType::Double),
            "fp8_e4m3" | "e4m3" => Some(DataType::F8e4m3),
            "fp8_e5m2" | "e5m2" => Some(DataType::F8e5m2),
            _ => None,
        };
        alias
            .or_else(|| DataType::ALL.into_iter().find(|d| d.name() == t))
            .ok_or_else(|| {
                format!(
                    "unknown data type `{}`: expected one of {} (or an alias: char, int, fp16, f16, float16, bf16, fp32, f32, float32, fp64, f64, float64, fp8_e4m3, e4m3, fp8_e5m2, e5m2)",
                    s.trim(),
                    names(&DataType::ALL)
                )
            })
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reduction operation (`ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "lowercase")
)]
pub enum ReduceOp {
    /// `ncclSum` = 0.
    #[default]
    Sum,
    /// `ncclProd` = 1.
    Prod,
    /// `ncclMax` = 2.
    Max,
    /// `ncclMin` = 3.
    Min,
    /// `ncclAvg` = 4.
    Avg,
}

impl ReduceOp {
    /// Every operation, in NCCL enum order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];

    /// Name as nccl-tests prints it.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }

    /// The `ncclRedOp_t` value.
    pub const fn nccl(self) -> i32 {
        self as i32
    }

    /// Parse a comma-separated list of names, or `all`; duplicates dropped.
    pub fn parse_list(s: &str) -> Result<Vec<ReduceOp>, String> {
        parse_list(s, &ReduceOp::ALL)
    }
}

impl FromStr for ReduceOp {
    type Err = String;
    fn from_str(s: &str) -> Result<ReduceOp, String> {
        let t = s.trim().to_ascii_lowercase();
        ReduceOp::ALL
            .into_iter()
            .find(|o| o.name() == t)
            .ok_or_else(|| {
                format!(
                    "unknown reduction `{}`: expected one of {}",
                    s.trim(),
                    names(&ReduceOp::ALL)
                )
            })
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn names<T: fmt::Display>(all: &[T]) -> String {
    all.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_list<T: FromStr<Err = String> + Copy + PartialEq>(
    s: &str,
    all: &[T],
) -> Result<Vec<T>, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(all.to_vec());
    }
    let mut out: Vec<T> = Vec::new();
    for part in crate::words::list_items(s)? {
        let x: T = part.parse()?;
        if !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(out)
}

/// What a reduce kernel computes once an op is lowered for a type and rank
/// count (NCCL's `ncclDevRedOp_t`; NCCL 2.28 folds Max and Min into one
/// `MinMax` with a mask, here they stay apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DevOp {
    /// Addition.
    Sum,
    /// Multiplication.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Multiply every input by the scalar (flagged pre-op), then sum.
    PreMulSum,
    /// Sum, then divide the result by the scalar (flagged post-op).
    SumPostDiv,
}

impl DevOp {
    /// Lower-case name, as used in kernel names.
    pub const fn name(self) -> &'static str {
        match self {
            DevOp::Sum => "sum",
            DevOp::Prod => "prod",
            DevOp::Max => "max",
            DevOp::Min => "min",
            DevOp::PreMulSum => "premulsum",
            DevOp::SumPostDiv => "sumpostdiv",
        }
    }
}

/// A lowered reduction: the kernel op and its scalar argument (the bits of
/// `1/N` in the element type for `PreMulSum`, the rank count for
/// `SumPostDiv`, zero-extended; 0 otherwise). Note: NCCL 2.28 itself passes
/// `N << 1 | signed` as the `SumPostDiv` argument; here the signedness comes
/// from the data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lowered {
    /// The device's op.
    pub op: DevOp,
    /// Its scalar argument (see above).
    pub scalar: u64,
}

#[cfg(test)]
mod tests;
