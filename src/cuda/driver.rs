//! The driver, its devices, contexts and peer access.

use super::result::{self, Device};
use super::{err, CuResult};
use cudarc::driver::sys;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// Facts about one GPU.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceInfo {
    /// The device ordinal.
    pub ordinal: usize,
    /// The device's name.
    pub name: String,
    /// Its memory, in bytes.
    pub total_mem: usize,
    /// Its streaming multiprocessors.
    pub sms: usize,
    /// Compute capability (major, minor), e.g. (9, 0) for an H200.
    pub cc: (i32, i32),
    /// PCI bus id, e.g. `0000:19:00.0`.
    pub pci: String,
}

/// Facts about the driver and its GPUs.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DriverInfo {
    /// `cuDriverGetVersion`, e.g. 13000.
    pub version: i32,
    /// Every device the driver lists.
    pub devices: Vec<DeviceInfo>,
}

/// Load libcuda (if present), `cuInit`, and list the devices. Never panics:
/// with no driver installed this returns an error instead of letting cudarc
/// panic on its first call.
pub fn driver() -> CuResult<&'static DriverInfo> {
    driver_timed().0.as_ref().map_err(Clone::clone)
}

/// Milliseconds the first [`driver`] call took (loading libcuda, `cuInit`,
/// listing devices): part of any program's cold start, NCCL's included.
pub(crate) fn driver_init_ms() -> f64 {
    driver_timed().1
}

fn driver_timed() -> &'static (CuResult<DriverInfo>, f64) {
    static INFO: OnceLock<(CuResult<DriverInfo>, f64)> = OnceLock::new();
    INFO.get_or_init(|| {
        let t = std::time::Instant::now();
        let r = load_driver();
        (r, t.elapsed().as_secs_f64() * 1e3)
    })
}

fn load_driver() -> CuResult<DriverInfo> {
    if !result::culib_present() {
        return Err(err(
            "dlopen(libcuda.so)",
            "no CUDA driver library found on this machine",
        ));
    }
    // The library is present, so cudarc's loader will not panic.
    result::init()?;
    let version = result::driver_version()?;
    let count = result::device_count()?;
    let mut devices = Vec::new();
    for ordinal in 0..count.max(0) as usize {
        let dev = result::device_get(ordinal)?;
        let name = result::device_name(dev)?;
        let total = result::device_total_mem(dev)?;
        use sys::CUdevice_attribute as A;
        let sms = result::device_attribute(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let cc = (
            result::device_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            result::device_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let pci = result::device_pci_bus_id(dev).unwrap_or_default();
        devices.push(DeviceInfo {
            ordinal,
            name,
            total_mem: total,
            sms: sms.max(1) as usize,
            cc,
            pci,
        });
    }
    Ok(DriverInfo { version, devices })
}

/// Whether device `a` can access device `b`'s memory directly
/// (`cuDeviceCanAccessPeer`). A device can always access itself.
pub(crate) fn can_access_peer(a: usize, b: usize) -> CuResult<bool> {
    if a == b {
        return Ok(true);
    }
    driver()?;
    result::device_can_access_peer(result::device_get(a)?, result::device_get(b)?)
}

/// What the driver says about the link from one device to another (for
/// `ringreduce topo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct P2pInfo {
    /// Whether the pair can access each other's memory.
    pub access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK` (0 is the best).
    pub perf_rank: i32,
    /// Whether atomics work natively across the pair.
    pub native_atomics: bool,
}

/// The driver's P2P attributes from device `a` to device `b`.
pub fn p2p_info(a: usize, b: usize) -> CuResult<P2pInfo> {
    driver()?;
    let (da, db) = (result::device_get(a)?, result::device_get(b)?);
    let get = |attr| result::device_p2p_attribute(attr, da, db);
    use sys::CUdevice_P2PAttribute as P;
    Ok(P2pInfo {
        access: get(P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED)? != 0,
        perf_rank: get(P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
        native_atomics: get(P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)? != 0,
    })
}

pub(crate) type Brand<'id> = PhantomData<fn(&'id ()) -> &'id ()>;
pub(crate) type NotSend = PhantomData<*const ()>;

/// A device's primary context, bound to the current thread for the lifetime
/// of a [`with_device`] closure. `'id` brands everything made from it.
pub struct Ctx<'id> {
    pub(crate) ordinal: usize,
    pub(crate) ctx: sys::CUcontext,
    pub(crate) sms: usize,
    pub(crate) cc: (i32, i32),
    _brand: Brand<'id>,
    _thread: NotSend,
}

thread_local! {
    static KEEP_RETAINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keep the primary context that the running [`with_device`] closure on
/// this thread retained, instead of releasing it when the closure returns:
/// for a rank whose GPU work never ends (it waits on a peer process that
/// died), since the last release destroys the context, which waits for
/// that work. Leaking a retain is safe; the process's end reclaims it.
pub(crate) fn keep_context_retained() {
    KEEP_RETAINED.with(|k| k.set(true));
}

/// Bind device `ordinal`'s primary context to this thread and run `f`.
/// The primary context is retained for the duration and released after.
pub(crate) fn with_device<R>(
    ordinal: usize,
    f: impl for<'id> FnOnce(Ctx<'id>) -> R,
) -> CuResult<R> {
    let info = driver()?;
    let (sms, cc) = info
        .devices
        .get(ordinal)
        .map(|d| (d.sms, d.cc))
        .ok_or_else(|| {
            err(
                "cuDeviceGet",
                format!(
                    "device {ordinal} does not exist ({} present)",
                    info.devices.len()
                ),
            )
        })?;
    let dev = result::device_get(ordinal)?;
    let ctx = result::primary_ctx_retain(dev)?;
    struct Release(Device);
    impl Drop for Release {
        fn drop(&mut self) {
            if KEEP_RETAINED.with(|k| k.replace(false)) {
                // keep_context_retained: work on this context never ends.
                return;
            }
            // SAFETY: balances the retain above; errors are ignored in Drop.
            let _ = unsafe { result::primary_ctx_release(self.0) };
        }
    }
    let _release = Release(dev);
    // SAFETY: ctx was just retained and stays alive until `_release` drops.
    unsafe { result::ctx_set_current(ctx) }?;
    Ok(f(Ctx {
        ordinal,
        ctx,
        sms,
        cc,
        _brand: PhantomData,
        _thread: PhantomData,
    }))
}

/// A rank's context, as other ranks see it (for enabling peer access).
#[derive(Debug, Clone, Copy)]
pub struct PeerCtx {
    ordinal: usize,
    ctx: sys::CUcontext,
}
// SAFETY: a CUcontext handle is a process-wide identifier usable from any thread.
unsafe impl Send for PeerCtx {}
// SAFETY: as above; PeerCtx only exposes the handle to driver calls.
unsafe impl Sync for PeerCtx {}

impl<'id> Ctx<'id> {
    pub(crate) fn export(&self) -> PeerCtx {
        PeerCtx {
            ordinal: self.ordinal,
            ctx: self.ctx,
        }
    }

    /// `cuMemGetInfo`: (free, total) bytes of this device.
    pub(crate) fn mem_info(&self) -> CuResult<(usize, usize)> {
        // This thread's current context is self.ctx (the `Ctx` exists).
        result::mem_get_info()
    }

    /// Enable direct access from this context to `peer`'s memory
    /// (`cuCtxEnablePeerAccess`). Same device: nothing to do. Already
    /// enabled: fine. Returns an error when the devices cannot access each
    /// other, so a peer copy never silently goes through host memory.
    pub(crate) fn enable_peer_access(&self, peer: &PeerCtx) -> CuResult<()> {
        if peer.ordinal == self.ordinal {
            return Ok(());
        }
        if !can_access_peer(self.ordinal, peer.ordinal)? {
            return Err(err(
                "cuDeviceCanAccessPeer",
                format!(
                    "device {} cannot access device {} directly",
                    self.ordinal, peer.ordinal
                ),
            ));
        }
        // SAFETY: this thread's current context is self.ctx; peer.ctx is a
        // retained primary context of another device.
        unsafe { result::ctx_enable_peer_access(peer.ctx) }
    }

    pub(crate) fn brand(&self) -> (Brand<'id>, NotSend) {
        (PhantomData, PhantomData)
    }
}
