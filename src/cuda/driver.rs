//! The driver, its devices, contexts and peer access.

use super::{check, err, CuResult};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// Facts about one GPU.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_mem: usize,
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
pub fn driver_init_ms() -> f64 {
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

fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: valid out-pointer, attribute and device.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut v, attr, dev)
    })?;
    Ok(v)
}

fn load_driver() -> CuResult<DriverInfo> {
    // SAFETY: is_culib_present only tries to dlopen libcuda and closes it.
    if !unsafe { sys::is_culib_present() } {
        return Err(err(
            "dlopen(libcuda.so)",
            "no CUDA driver library found on this machine",
        ));
    }
    // SAFETY: the library is present, so cudarc's loader will not panic; cuInit
    // takes flags 0 and has no other preconditions.
    check("cuInit", unsafe { sys::cuInit(0) })?;
    let mut version = 0;
    // SAFETY: valid out-pointer.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version)
    })?;
    let mut count = 0;
    // SAFETY: valid out-pointer, driver initialised.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    let mut devices = Vec::new();
    for ordinal in 0..count.max(0) as usize {
        let dev = device_handle(ordinal)?;
        let mut name = [0i8; 256];
        // SAFETY: buffer of the stated length; dev is valid.
        check("cuDeviceGetName", unsafe {
            sys::cuDeviceGetName(name.as_mut_ptr().cast(), name.len() as i32, dev)
        })?;
        // SAFETY: the driver NUL-terminates within the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr().cast()) }
            .to_string_lossy()
            .into_owned();
        let mut total = 0usize;
        // SAFETY: valid out-pointer and device.
        check("cuDeviceTotalMem", unsafe {
            sys::cuDeviceTotalMem_v2(&mut total, dev)
        })?;
        use sys::CUdevice_attribute as A;
        let sms = attribute(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let cc = (
            attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let mut pci = [0i8; 32];
        // SAFETY: buffer of the stated length; dev is valid.
        let pci = match check("cuDeviceGetPCIBusId", unsafe {
            sys::cuDeviceGetPCIBusId(pci.as_mut_ptr().cast(), pci.len() as i32, dev)
        }) {
            // SAFETY: NUL-terminated by the driver within the buffer.
            Ok(()) => unsafe { CStr::from_ptr(pci.as_ptr().cast()) }
                .to_string_lossy()
                .into_owned(),
            Err(_) => String::new(),
        };
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

pub(crate) fn device_handle(ordinal: usize) -> CuResult<sys::CUdevice> {
    let mut dev = 0;
    // SAFETY: valid out-pointer; the driver validates the ordinal.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut dev, ordinal as i32)
    })?;
    Ok(dev)
}

/// Whether device `a` can access device `b`'s memory directly
/// (`cuDeviceCanAccessPeer`). A device can always access itself.
pub fn can_access_peer(a: usize, b: usize) -> CuResult<bool> {
    if a == b {
        return Ok(true);
    }
    driver()?;
    let (da, db) = (device_handle(a)?, device_handle(b)?);
    let mut can = 0;
    // SAFETY: valid out-pointer and device handles.
    check("cuDeviceCanAccessPeer", unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, da, db)
    })?;
    Ok(can != 0)
}

/// What the driver says about the link from one device to another (for
/// `ringreduce topo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct P2pInfo {
    pub access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK` (0 is the best).
    pub perf_rank: i32,
    pub native_atomics: bool,
}

/// The driver's P2P attributes from device `a` to device `b`.
pub fn p2p_info(a: usize, b: usize) -> CuResult<P2pInfo> {
    driver()?;
    let (da, db) = (device_handle(a)?, device_handle(b)?);
    let get = |attr| -> CuResult<i32> {
        let mut v = 0;
        // SAFETY: valid out-pointer, attribute and two device handles.
        check("cuDeviceGetP2PAttribute", unsafe {
            sys::cuDeviceGetP2PAttribute(&mut v, attr, da, db)
        })?;
        Ok(v)
    };
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
pub fn keep_context_retained() {
    KEEP_RETAINED.with(|k| k.set(true));
}

/// Bind device `ordinal`'s primary context to this thread and run `f`.
/// The primary context is retained for the duration and released after.
pub fn with_device<R>(ordinal: usize, f: impl for<'id> FnOnce(Ctx<'id>) -> R) -> CuResult<R> {
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
    let dev = device_handle(ordinal)?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointer and device.
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
    })?;
    struct Release(sys::CUdevice);
    impl Drop for Release {
        fn drop(&mut self) {
            if KEEP_RETAINED.with(|k| k.replace(false)) {
                // keep_context_retained: work on this context never ends.
                return;
            }
            // SAFETY: balances the retain above; errors are ignored in Drop.
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.0) };
        }
    }
    let _release = Release(dev);
    // SAFETY: ctx was just retained and stays alive until `_release` drops.
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
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
    pub fn export(&self) -> PeerCtx {
        PeerCtx {
            ordinal: self.ordinal,
            ctx: self.ctx,
        }
    }

    /// `cuMemGetInfo`: (free, total) bytes of this device.
    pub fn mem_info(&self) -> CuResult<(usize, usize)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; this thread's current context is self.ctx.
        check("cuMemGetInfo", unsafe {
            sys::cuMemGetInfo_v2(&mut free, &mut total)
        })?;
        Ok((free, total))
    }

    /// Enable direct access from this context to `peer`'s memory
    /// (`cuCtxEnablePeerAccess`). Same device: nothing to do. Already
    /// enabled: fine. Returns an error when the devices cannot access each
    /// other, so a peer copy never silently goes through host memory.
    pub fn enable_peer_access(&self, peer: &PeerCtx) -> CuResult<()> {
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
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer.ctx, 0) };
        if r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        check("cuCtxEnablePeerAccess", r)
    }

    pub(crate) fn brand(&self) -> (Brand<'id>, NotSend) {
        (PhantomData, PhantomData)
    }
}
