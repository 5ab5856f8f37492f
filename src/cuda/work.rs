//! Loading and launching the kernels of a rank's *work stream* (the third
//! stream of a rank, beside the two lanes of the collectives): a caller's
//! own PTX, or the overlap benchmark's synthetic backward pass
//! (`ptx/compute.ptx`).
//!
//! The kernel's description ([`WorkKernel`]: entry, parameters, argument
//! checks) is backend-neutral (`crate::work`); a caller's kernel
//! comes from the `unsafe` [`WorkKernel::from_ptx`], whose contract stands
//! in for the built-in kernels' checks. Launches
//! ([`Stream::launch_work`]) check every argument's kind against the
//! parameter list and every buffer range against its allocation.

use super::driver::{Brand, Ctx, NotSend};
use super::kernels::Kernel;
use super::memory::DevBuf;
use super::result;
use super::stream::Stream;
use super::{err, CuResult};
use crate::work::KernelModule;
use crate::work::{ArgView, Param, WorkKernel};
use std::ffi::c_void;

impl WorkKernel {
    /// A caller's kernel: entry `entry` of `module` (PTX text, optionally a
    /// cubin for one compute capability), taking `params` in this order.
    ///
    /// # Safety
    /// * The entry exists in the module and declares exactly `params`
    ///   (`Ptr` and `U64` as `.u64`, `U32` as `.u32`, `F32` as `.f32`).
    /// * Launched with the arguments of any launch on a rank's work stream
    ///   made with this kernel, it touches no memory but the byte ranges
    ///   passed for its `Ptr` parameters (each `[address, address + len)`),
    ///   and it terminates.
    /// * The cubin, if any, is the PTX assembled for that compute
    ///   capability.
    pub unsafe fn from_ptx(
        module: KernelModule,
        entry: &'static str,
        params: &'static [Param],
    ) -> WorkKernel {
        WorkKernel {
            module,
            entry,
            params,
            check: None,
            builtin: None,
            host: None,
        }
    }
}

/// A work kernel loaded on the device branded `'id`.
pub struct LoadedWork<'id> {
    k: Kernel<'id>,
    key: (usize, &'static str),
    _brand: Brand<'id>,
    _thread: NotSend,
}

impl<'id> Ctx<'id> {
    /// Load `w` on this device (the module once per process and device).
    pub(crate) fn work_kernel(&self, w: &WorkKernel) -> CuResult<LoadedWork<'id>> {
        let k = self.kernel(&w.module, w.entry)?;
        let (b, t) = self.brand();
        Ok(LoadedWork {
            k,
            key: w.key(),
            _brand: b,
            _thread: t,
        })
    }
}

/// One argument of a launch, resolved on the rank thread.
pub enum Arg<'a, 'id> {
    /// Bytes `offset .. offset + bytes` of a buffer of this device.
    Buf(&'a DevBuf<'id>, usize, usize),
    U32(u32),
    U64(u64),
    F32(f32),
}

impl Arg<'_, '_> {
    pub fn view(&self) -> ArgView {
        match self {
            Arg::Buf(_, offset, bytes) => ArgView::Buf {
                offset: *offset,
                bytes: *bytes,
            },
            Arg::U32(v) => ArgView::U32(*v),
            Arg::U64(v) => ArgView::U64(*v),
            Arg::F32(v) => ArgView::F32(*v),
        }
    }
}

// The parameter block below stores 32-bit values in the low bytes of 64-bit
// slots.
const _: () = assert!(cfg!(target_endian = "little"));

impl<'id> Stream<'id> {
    /// Launch `w` (loaded as `k`) on this stream: `grid` blocks of `block`
    /// threads, no shared memory. Checks the kernel's identity, the
    /// arguments' kinds, each buffer range against its allocation, and the
    /// built-in kernels' own requirements. A grid of 0 launches nothing.
    pub(crate) fn launch_work(
        &self,
        k: &LoadedWork<'id>,
        w: &WorkKernel,
        grid: u32,
        block: u32,
        args: &[Arg<'_, 'id>],
    ) -> CuResult<()> {
        const CALL: &str = "cuLaunchKernel(work)";
        if k.key != w.key() {
            return Err(err(
                CALL,
                format!("{} launched with another kernel's handle", w.entry),
            ));
        }
        if !(1..=1024).contains(&block) || grid > i32::MAX as u32 {
            return Err(err(CALL, format!("a launch of {grid} x {block} threads")));
        }
        let views: Vec<ArgView> = args.iter().map(Arg::view).collect();
        w.check_args(&views).map_err(|m| err(CALL, m))?;
        if grid == 0 {
            return Ok(());
        }
        let mut slots: Vec<u64> = Vec::with_capacity(args.len());
        for a in args {
            slots.push(match a {
                Arg::Buf(b, off, n) => b.ptr_at(CALL, *off, *n)?,
                Arg::U32(v) => u64::from(*v),
                Arg::U64(v) => *v,
                Arg::F32(v) => u64::from(v.to_bits()),
            });
        }
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| (s as *mut u64).cast::<c_void>())
            .collect();
        // SAFETY: `k` is `w`'s entry loaded in this stream's context (same
        // brand, identity checked); `params` holds one pointer per declared
        // parameter, each to an 8-byte slot whose first bytes hold the value
        // in the parameter's type (little-endian, asserted above); every
        // buffer range lies inside a live allocation of this device
        // (`ptr_at` checked it) that the engine frees only after draining
        // this stream; what the kernel touches beyond that is bounded by
        // the built-in kernel's checked requirements or by the `from_ptx`
        // contract.
        self.count(unsafe { result::launch_kernel(k.k.f, grid, block, self.s, &mut params, CALL) })
    }
}

#[cfg(test)]
mod tests;
