//! Kernels a caller runs on a rank's *work stream* (the third stream of a
//! rank, beside the two lanes of the collectives), described once for
//! every backend: the overlap benchmark's synthetic backward pass
//! (`ptx/compute.ptx`), or, with the `cuda` feature, a caller's own PTX.
//!
//! A [`WorkKernel`] names a PTX module and entry, its parameter list and,
//! for the built-in kernels, a check of a launch's arguments against what
//! the kernel touches. The CUDA driver layer loads and launches it
//! (`cuda::work`, where the `unsafe` `WorkKernel::from_ptx` makes a
//! caller's kernel, its contract standing in for that check); a backend
//! that runs work on the host runs the host implementation a caller gives
//! the kernel ([`WorkKernel::with_host`], a `HostKernel` over
//! [`HostArgs`]), and refuses a kernel without one.

/// A hand-written PTX module, and the same PTX assembled ahead of time by
/// `ptxas` (checked byte for byte by CI): (image, compute capability, label).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct KernelModule {
    /// The module's name (its file).
    pub name: &'static str,
    /// Its PTX text.
    pub ptx: &'static str,
    /// Its cubin, the compute capability it is for and a label, if any.
    pub cubin: Option<(&'static [u8], (i32, i32), &'static str)>,
}

/// The module of the built-in kernels: its PTX, and the sm_90 cubin.
#[cfg(feature = "cuda")]
pub(crate) fn compute_module() -> KernelModule {
    KernelModule {
        name: "compute",
        ptx: include_str!("../ptx/compute.ptx"),
        cubin: Some((
            include_bytes!("../ptx/sm_90/compute.cubin"),
            (9, 0),
            "cubin sm_90 (ptxas 13.0)",
        )),
    }
}

/// A work kernel's host implementation (see [`WorkKernel::with_host`]):
/// one rank's part of a launch, through [`HostArgs`]. The overlap
/// benchmark's kernels have theirs in the tools crate, beside the values
/// they compute.
pub(crate) type HostKernel = fn(&mut dyn HostArgs) -> crate::error::Result<()>;

/// One rank's part of a work launch on a host backend, as a
/// `HostKernel` sees it: the arguments as this rank sees them (checked
/// against the kernel's parameters and requirements) and the rank's
/// buffers they name.
pub trait HostArgs {
    /// The rank.
    fn rank(&self) -> usize;
    /// The arguments, as this rank sees them.
    fn args(&self) -> &[ArgView];
    /// Read the start of buffer argument `i` into `out`.
    fn read(&mut self, i: usize, out: &mut [u8]) -> crate::error::Result<()>;
    /// Write `data` at the start of buffer argument `i`.
    fn write(&mut self, i: usize, data: &[u8]) -> crate::error::Result<()>;
    /// Argument `i` as an integer (`U32` or `U64`; 0 for another kind,
    /// which the parameter check already refused).
    fn int(&self, i: usize) -> u64 {
        match self.args().get(i) {
            Some(ArgView::U32(v)) => u64::from(*v),
            Some(ArgView::U64(v)) => *v,
            _ => 0,
        }
    }
    /// Argument `i` as an `F32` (0 for another kind).
    fn float(&self, i: usize) -> f32 {
        match self.args().get(i) {
            Some(ArgView::F32(v)) => *v,
            _ => 0.0,
        }
    }
}

/// One kernel parameter, as the PTX declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Param {
    /// `.u64`: the generic address of a range of one of the engine's
    /// buffers on the rank's device.
    Ptr,
    /// `.u32`.
    U32,
    /// `.u64`.
    U64,
    /// `.f32`.
    F32,
}

/// The kernels of `ptx/compute.ptx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `rr_grad_fma(out, n, iters, m, c, rank, bucket, step)`: the
    /// compute-bound layer.
    GradFma,
    /// `rr_grad_mem(out, n, x, y, passes, a, rank, bucket, step)`: the
    /// memory-bound layer.
    GradMem,
    /// `rr_grad_check(bucket, n, counters, first, count, bucket_id, step)`:
    /// the bucket check.
    GradCheck,
}

/// What a launch's argument check sees: buffer ranges (offset and length
/// in bytes within their allocation) and scalars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgView {
    /// A buffer range: its first byte and length within its allocation.
    Buf {
        /// The first byte.
        offset: usize,
        /// The length in bytes.
        bytes: usize,
    },
    /// A `.u32`.
    U32(u32),
    /// A `.u64`.
    U64(u64),
    /// A `.f32`.
    F32(f32),
}

impl ArgView {
    pub(crate) fn param(&self) -> Param {
        match self {
            ArgView::Buf { .. } => Param::Ptr,
            ArgView::U32(_) => Param::U32,
            ArgView::U64(_) => Param::U64,
            ArgView::F32(_) => Param::F32,
        }
    }
}

/// A built-in kernel's check of a launch's arguments (an error says what
/// is wrong).
pub type ArgCheck = fn(&[ArgView]) -> Result<(), String>;

/// A kernel for the work stream (see the module doc).
#[derive(Debug, Clone)]
pub struct WorkKernel {
    /// The PTX module (and cubin) the entry is in.
    #[cfg(feature = "cuda")]
    pub(crate) module: KernelModule,
    pub(crate) entry: &'static str,
    pub(crate) params: &'static [Param],
    pub(crate) check: Option<ArgCheck>,
    pub(crate) builtin: Option<Builtin>,
    /// What a host backend runs instead of the PTX.
    pub(crate) host: Option<HostKernel>,
}

use Param::{Ptr, F32, U32, U64};

const FMA_PARAMS: &[Param] = &[Ptr, U64, U32, F32, F32, U32, U32, U32];
const MEM_PARAMS: &[Param] = &[Ptr, U64, Ptr, Ptr, U32, F32, U32, U32, U32];
const CHECK_PARAMS: &[Param] = &[Ptr, U64, Ptr, U32, U32, U32, U32];

/// Bytes of `n` floats, or an error on overflow.
fn floats(n: u64, what: &str) -> Result<usize, String> {
    usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| format!("{what}: {n} floats overflow"))
}

fn buf(a: &ArgView) -> (usize, usize) {
    match a {
        ArgView::Buf { offset, bytes } => (*offset, *bytes),
        _ => (0, 0),
    }
}

fn u64_of(a: &ArgView) -> u64 {
    match a {
        ArgView::U64(v) => *v,
        ArgView::U32(v) => u64::from(*v),
        _ => 0,
    }
}

fn covers(what: &str, range: (usize, usize), need: usize, align: usize) -> Result<(), String> {
    if range.1 < need {
        return Err(format!(
            "{what}: {need} bytes needed, the range has {}",
            range.1
        ));
    }
    if range.0 % align != 0 {
        return Err(format!(
            "{what}: offset {} is not a multiple of {align}",
            range.0
        ));
    }
    Ok(())
}

/// rr_grad_fma writes out[0..n), 4-byte aligned.
fn check_fma(a: &[ArgView]) -> Result<(), String> {
    let n = floats(u64_of(&a[1]), "rr_grad_fma")?;
    covers("rr_grad_fma out", buf(&a[0]), n, 4)
}

/// rr_grad_mem writes out[0..n) and y[0..passes*n), reads x[0..passes*n);
/// n a multiple of 4, everything 16-byte aligned (allocations are 256-byte
/// aligned, so the offsets decide).
fn check_mem(a: &[ArgView]) -> Result<(), String> {
    let n = u64_of(&a[1]);
    if n % 4 != 0 {
        return Err(format!("rr_grad_mem: n = {n} is not a multiple of 4"));
    }
    let bucket = floats(n, "rr_grad_mem")?;
    let work = floats(n.saturating_mul(u64_of(&a[4])), "rr_grad_mem")?;
    covers("rr_grad_mem out", buf(&a[0]), bucket, 16)?;
    covers("rr_grad_mem x", buf(&a[2]), work, 16)?;
    covers("rr_grad_mem y", buf(&a[3]), work, 16)
}

/// rr_grad_check reads bucket[0..n) and updates counters[0..2]; its sums
/// are exact for at most 2^14 ranks.
fn check_check(a: &[ArgView]) -> Result<(), String> {
    let n = floats(u64_of(&a[1]), "rr_grad_check")?;
    covers("rr_grad_check bucket", buf(&a[0]), n, 4)?;
    covers("rr_grad_check counters", buf(&a[2]), 16, 8)?;
    if u64_of(&a[4]) > 1 << 14 {
        return Err("rr_grad_check: more than 2^14 ranks".into());
    }
    Ok(())
}

impl WorkKernel {
    /// One of the built-in kernels of `ptx/compute.ptx`. Safe: their
    /// memory accesses are documented in the PTX header (exactly the
    /// ranges their checks require), and the emulator tests
    /// (`kernels/test_compute_ptx.py`) run them between guard zones.
    pub fn builtin(b: Builtin) -> WorkKernel {
        let (entry, params, check): (_, _, ArgCheck) = match b {
            Builtin::GradFma => ("rr_grad_fma", FMA_PARAMS, check_fma),
            Builtin::GradMem => ("rr_grad_mem", MEM_PARAMS, check_mem),
            Builtin::GradCheck => ("rr_grad_check", CHECK_PARAMS, check_check),
        };
        WorkKernel {
            #[cfg(feature = "cuda")]
            module: compute_module(),
            entry,
            params,
            check: Some(check),
            builtin: Some(b),
            host: None,
        }
    }

    /// The same kernel with a host implementation: what a backend that
    /// runs work on the host (the CPU) runs for each rank's part of a
    /// launch, after the same argument checks. The CUDA backend runs the
    /// PTX and ignores it.
    pub fn with_host(mut self, f: HostKernel) -> WorkKernel {
        self.host = Some(f);
        self
    }

    /// The host implementation, if the kernel has one.
    pub fn host(&self) -> Option<HostKernel> {
        self.host
    }

    /// The kernel's entry name in its module.
    pub fn entry(&self) -> &'static str {
        self.entry
    }

    /// Its parameters, in order.
    pub fn params(&self) -> &'static [Param] {
        self.params
    }

    /// Which built-in kernel this is, if it is one.
    pub fn builtin_kind(&self) -> Option<Builtin> {
        self.builtin
    }

    /// Error unless `args` fit the parameter list (and, for a built-in
    /// kernel, what it touches).
    pub(crate) fn check_args(&self, args: &[ArgView]) -> Result<(), String> {
        if args.len() != self.params.len() {
            return Err(format!(
                "{} takes {} arguments, got {}",
                self.entry,
                self.params.len(),
                args.len()
            ));
        }
        for (i, (a, p)) in args.iter().zip(self.params).enumerate() {
            if a.param() != *p {
                return Err(format!(
                    "{} argument {i}: a {:?} for a {p:?} parameter",
                    self.entry,
                    a.param()
                ));
            }
        }
        match self.check {
            Some(c) => c(args),
            None => Ok(()),
        }
    }

    /// A key that identifies the kernel (module and entry).
    #[cfg(feature = "cuda")]
    pub fn key(&self) -> (usize, &'static str) {
        (self.module.ptx.as_ptr() as usize, self.entry)
    }
}

#[cfg(test)]
mod tests;
