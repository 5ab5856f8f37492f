//! CUPTI's activity API, loaded at run time: the timeline's source of
//! device timestamps (kernels, copies, memsets, synchronizations) that
//! costs the streams no extra work, unlike timing events between ops.
//!
//! * [`get`] loads `libcupti` once per process (the search of `find`),
//!   subscribes (which fails when another CUPTI client, e.g. a profiler,
//!   holds the subscription) and registers the buffer callbacks. Any
//!   failure is kept as a reason, and the caller falls back to events.
//! * [`Cupti::begin`] / [`Cupti::end`] enable the activity kinds (those
//!   `RINGREDUCE_CUPTI_KINDS` selects) while at least one timed call is
//!   pending in this process, so untimed calls pay nothing
//!   (`RINGREDUCE_CUPTI_KEEP=1`: from the first timed call on, an
//!   experiment).
//! * [`Cupti::push`] / [`Cupti::pop`] bracket an op's driver call on the
//!   calling thread: CUPTI's callback at the exit of each issuing call
//!   (`cuLaunchKernel`, the copies) hands over that call's correlation id
//!   (which the kernel or copy record carries), and the pop files it
//!   under the op's id as an [`ActivityKind::External`] record.
//! * [`Cupti::take`] flushes CUPTI's buffers and hands over the records of
//!   the given correlation ids (`records` parses the buffers into
//!   [`Activity`]).
//! * The order tie (`RINGREDUCE_CUPTI_TIE=order`) subscribes nothing and
//!   pushes nothing: [`Cupti::take_streams`] hands over the records on a
//!   rank's streams ([`Cupti::stream_id`]) and [`tie_by_order`] ties them
//!   to the calls the ops issued, in issue order.
//!
//! Why a callback and not CUPTI's external correlation records: those are
//! written only for API records, which need the `DRIVER` activity kind on
//! (every driver call of the timed calls then writes one); with that set-up
//! 4 ranks sharing one H200 took +63.5 % per call at 1 MiB with the
//! timeline on, with the callback +35.8 %
//! (`docs/results/2026-12-02-h200x1-cupti-quiet/`,
//! `docs/results/2026-12-02-h200x1-cupti-callback/`).
//!
//! Layouts: the records are read field by field at the offsets of cudarc's
//! bindings of CUDA 13.0's `cupti_activity.h` (`CUpti_ActivityKernel10`,
//! `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemcpyPtoP4`,
//! `CUpti_ActivityMemset4`) and of `CUpti_CallbackData`; newer
//! versions of a record append fields, and only the leading fields these
//! versions share are read.

mod records;

use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cudarc::cupti::sys;
use libloading::Library;

pub(crate) use crate::param::{CuptiKinds, CuptiTie};
pub(crate) use records::order::tie_by_order;
pub use records::order::{Class, Issued};
pub use records::{Activity, ActivityKind};

/// Names tried through the dynamic linker's search path, in order.
const SONAMES: [&str; 2] = ["libcupti.so.13", "libcupti.so"];
/// Directories searched after the loader's path (the toolkit keeps CUPTI
/// outside the default path).
const DIRS: [&str; 4] = [
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
    "/usr/local/cuda/extras/CUPTI/lib64",
    "/usr/local/cuda-13.0/extras/CUPTI/lib64",
];

/// The activity kinds enabled while timed calls are pending: the records
/// with device times. Each is tied to its op through the correlation id the
/// issuing call's callback saw (see [`ISSUING`]), not through CUPTI's
/// external correlation records: those need the `DRIVER` activity kind
/// (a per-call `cuptiActivityEnableDriverApi` alone gave none once the
/// context had run work: record
/// `docs/results/2026-12-02-h200x1-cupti-driver-kind/` and its
/// `cupti-probe.py`), which put an
/// API record on every driver call of the timed calls, stream polls
/// included. No `SYNCHRONIZATION` records either: CUPTI writes one per
/// `cuStreamQuery`, and the timeline does not use them.
const KINDS: [sys::CUpti_ActivityKind; 4] = [
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY2,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
];

/// The [`KINDS`] `RINGREDUCE_CUPTI_KINDS` selects.
fn kinds_of(k: CuptiKinds) -> &'static [sys::CUpti_ActivityKind] {
    match k {
        CuptiKinds::All => &KINDS,
        CuptiKinds::Kernel => &KINDS[..1],
        CuptiKinds::Copy => &KINDS[1..],
    }
}

/// Whether records of class `c` are collected under `k`.
pub fn collects(k: CuptiKinds, c: Class) -> bool {
    matches!(
        (k, c),
        (CuptiKinds::All, _)
            | (CuptiKinds::Kernel, Class::Kernel)
            | (CuptiKinds::Copy, Class::Copy)
    )
}

/// The driver calls that issue an op's work: CUPTI calls [`on_exit`] at
/// the end of each while timed calls are pending (and for no other call).
const ISSUING: [Cbid; 5] = [
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
];
/// `CUPTI_CB_DOMAIN_DRIVER_API`, `CUPTI_CB_DOMAIN_RUNTIME_API` and
/// `CUPTI_API_EXIT`, as integers.
const DRIVER_DOMAIN: u32 = sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API as u32;
/// Every runtime call gets the callback too while timed calls are pending:
/// a library timed as one op (NCCL) may launch through the runtime, whose
/// kernel records carry the runtime call's correlation id. (The engine's
/// own ops issue through the driver alone, so they call it for nothing.)
const RUNTIME_DOMAIN: u32 = sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API as u32;
const API_EXIT: u32 = sys::CUpti_ApiCallbackSite::CUPTI_API_EXIT as u32;
type Cbid = sys::CUpti_driver_api_trace_cbid_enum;

const SUCCESS: u32 = sys::CUptiResult::CUPTI_SUCCESS as u32;

/// CUPTI's callback, with the domain, id and site as the integers the C ABI
/// passes (a value this build does not know is no Rust enum).
type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Subscribe =
    unsafe extern "C" fn(*mut sys::CUpti_SubscriberHandle, Option<Callback>, *mut c_void) -> u32;
type EnableCallback = unsafe extern "C" fn(u32, sys::CUpti_SubscriberHandle, u32, u32) -> u32;
type EnableDomain = unsafe extern "C" fn(u32, sys::CUpti_SubscriberHandle, u32) -> u32;
type Register = unsafe extern "C" fn(
    sys::CUpti_BuffersCallbackRequestFunc,
    sys::CUpti_BuffersCallbackCompleteFunc,
) -> u32;
type Kind = unsafe extern "C" fn(u32) -> u32;
type NextRecord = unsafe extern "C" fn(*mut u8, usize, *mut *mut sys::CUpti_Activity) -> u32;
type Timestamp = unsafe extern "C" fn(*mut u64) -> u32;
type ResultString = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;
type Dropped = unsafe extern "C" fn(cudarc::driver::sys::CUcontext, u32, *mut usize) -> u32;
type StreamId = unsafe extern "C" fn(
    cudarc::driver::sys::CUcontext,
    cudarc::driver::sys::CUstream,
    u8,
    *mut u32,
) -> u32;

/// The CUPTI entry points used here, with the library that holds them.
struct Api {
    subscribe: Subscribe,
    register: Register,
    enable: Kind,
    disable: Kind,
    enable_callback: EnableCallback,
    enable_domain: EnableDomain,
    flush_all: Kind,
    next_record: NextRecord,
    timestamp: Timestamp,
    result_string: ResultString,
    dropped: Dropped,
    stream_id: StreamId,
}

/// How the timeline uses CUPTI (`RINGREDUCE_CUPTI_TIE`, `_KINDS`,
/// `_KEEP`; the first timed call's values hold for the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub tie: CuptiTie,
    pub kinds: CuptiKinds,
    /// Leave the kinds on once on.
    pub keep: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tie: CuptiTie::Callback,
            kinds: CuptiKinds::All,
            keep: false,
        }
    }
}

/// Timed calls issued and not yet taken, holds ([`Cupti::hold`]), and
/// whether the kinds are on.
struct Pending {
    calls: usize,
    holds: usize,
    on: bool,
}

/// The loaded, subscribed CUPTI of this process.
pub struct Cupti {
    api: Api,
    /// The subscriber handle, as an address (an opaque CUPTI token; 0:
    /// none, the order tie subscribes nothing).
    subscriber: usize,
    /// How ops are tied to records, and the kinds enabled (read once).
    pub tie: CuptiTie,
    pub kinds: CuptiKinds,
    keep: bool,
    /// Timed calls issued and not yet taken (kinds enabled while > 0, or
    /// from the first with `keep`).
    pending: Mutex<Pending>,
}

thread_local! {
    /// The op id [`Cupti::push`] opened on this thread (0: none).
    static OPEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The correlation ids the issuing calls' callbacks saw while it was
    /// open.
    static SEEN: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// CUPTI's callback at the entry and exit of each [`ISSUING`] driver call
/// and each runtime call (on the calling thread): at the exit, keep the
/// call's correlation id if an op is open on this thread. Never unwinds,
/// never blocks.
///
/// # Safety
/// Called by CUPTI; for the driver and runtime domains `data` points at a
/// `CUpti_CallbackData`.
unsafe extern "C" fn on_exit(_user: *mut c_void, domain: u32, _cbid: u32, data: *const c_void) {
    if (domain != DRIVER_DOMAIN && domain != RUNTIME_DOMAIN) || data.is_null() {
        return;
    }
    type D = sys::CUpti_CallbackData;
    let base = data.cast::<u8>();
    // SAFETY: `data` is a CUpti_CallbackData (the domain says so); its
    // site and correlation id are 32-bit integers inside it.
    let (site, corr) = unsafe {
        (
            base.add(std::mem::offset_of!(D, callbackSite))
                .cast::<u32>()
                .read_unaligned(),
            base.add(std::mem::offset_of!(D, correlationId))
                .cast::<u32>()
                .read_unaligned(),
        )
    };
    if site != API_EXIT || OPEN.try_with(|o| o.get()).unwrap_or(0) == 0 {
        return;
    }
    let _ = SEEN.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.push(corr);
        }
    });
}

/// [`Cupti::pop`] of the calling thread's op.
fn close(ties: &mut Vec<(u32, u64)>) -> Result<(), String> {
    let id = OPEN.with(|o| o.replace(0));
    if id == 0 {
        return Err("CUPTI: an op closed that was not open".into());
    }
    SEEN.with(|s| ties.extend(s.borrow_mut().drain(..).map(|c| (c, id))));
    Ok(())
}

/// One flush at a time (rank threads take their records concurrently).
static FLUSH: Mutex<()> = Mutex::new(());

/// The process's CUPTI, or why there is none (kept: tried once).
static CUPTI: OnceLock<Result<Cupti, String>> = OnceLock::new();

/// The process's CUPTI, loaded and subscribed on first use, or the reason
/// it cannot be used (missing, refused, another subscriber).
/// `setting`: `RINGREDUCE_CUPTI` (`Some("0")`: off; another value: the
/// library's path), read by the caller.
///
/// `how`: the other settings (the first call's hold for the process).
pub fn get(setting: Option<&Path>, how: Settings) -> Result<&'static Cupti, String> {
    CUPTI
        .get_or_init(|| init(setting, how))
        .as_ref()
        .map_err(Clone::clone)
}

/// What CUPTI delivered in this process so far, for an error that found
/// no record of an op: buffers, records, external correlations.
pub(crate) fn delivered() -> String {
    let s = records::store();
    format!(
        "CUPTI handed back {} buffers with {} records, and its callbacks tied {} driver calls to ops, in this process",
        s.buffers, s.parsed, s.externals
    )
}

/// The process's CUPTI if [`get`] loaded it (for the buffer callbacks).
fn loaded() -> Option<&'static Cupti> {
    CUPTI.get().and_then(|c| c.as_ref().ok())
}

fn init(setting: Option<&Path>, how: Settings) -> Result<Cupti, String> {
    // Unset or 1: CUPTI from the default places; 0: off; else a path.
    let setting = match setting {
        Some(p) if p.as_os_str() == "0" => return Err("off (RINGREDUCE_CUPTI=0)".into()),
        Some(p) if p.as_os_str() == "1" => None,
        other => other,
    };
    let (lib, path) = find(setting)?;
    // SAFETY: `lib` is libcupti; every symbol is looked up with the
    // signature of its declaration in cupti_activity.h / cupti_callbacks.h
    // (enums passed as their 32-bit values, as the C ABI does).
    let api = unsafe { load(lib) }.map_err(|e| format!("{}: {e}", path.display()))?;
    let mut c = Cupti {
        api,
        subscriber: 0,
        tie: how.tie,
        kinds: how.kinds,
        keep: how.keep,
        pending: Mutex::new(Pending {
            calls: 0,
            holds: 0,
            on: false,
        }),
    };
    c.subscriber = c.subscribe()?;
    Ok(c)
}

/// Open CUPTI: the setting's path alone if given, else the loader's path,
/// then [`DIRS`].
///
/// The library found is never unloaded, even when it is not used after
/// all: loading libcupti hooks it into the driver, and unloading it after
/// a refused subscription (another profiler, e.g. `ncu`, holds CUPTI)
/// made the process die of a segmentation fault at exit
/// (`docs/results/2026-12-02-h200x1-ncu-exit/`).
fn find(setting: Option<&Path>) -> Result<(&'static Library, PathBuf), String> {
    let candidates: Vec<PathBuf> = match setting {
        Some(p) => vec![p.to_path_buf()],
        None => SONAMES
            .iter()
            .map(PathBuf::from)
            .chain(DIRS.iter().map(|d| Path::new(d).join(SONAMES[0])))
            .collect(),
    };
    let mut tried = Vec::new();
    for c in &candidates {
        // SAFETY: loading libcupti runs its initialisers; nothing here
        // depends on symbols it could replace.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((Box::leak(Box::new(lib)), c.clone())),
            Err(e) => tried.push(format!("{} ({e})", c.display())),
        }
    }
    Err(format!("not found: {}", tried.join("; ")))
}

/// Look up the entry points.
///
/// # Safety
/// `lib` must be libcupti (the symbols are cast to their C signatures).
unsafe fn load(lib: &'static Library) -> Result<Api, libloading::Error> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the caller's contract: the symbol has this type.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }?
        };
    }
    Ok(Api {
        subscribe: sym!("cuptiSubscribe"),
        register: sym!("cuptiActivityRegisterCallbacks"),
        enable: sym!("cuptiActivityEnable"),
        disable: sym!("cuptiActivityDisable"),
        enable_callback: sym!("cuptiEnableCallback"),
        enable_domain: sym!("cuptiEnableDomain"),
        flush_all: sym!("cuptiActivityFlushAll"),
        next_record: sym!("cuptiActivityGetNextRecord"),
        timestamp: sym!("cuptiGetTimestamp"),
        result_string: sym!("cuptiGetResultString"),
        dropped: sym!("cuptiActivityGetNumDroppedRecords"),
        stream_id: sym!("cuptiGetStreamIdEx"),
    })
}

impl Cupti {
    /// CUPTI's name and text of a result.
    fn describe(&self, call: &str, r: u32) -> String {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: `s` is a valid out-pointer; CUPTI points it at a static
        // string or leaves it null.
        let ok = unsafe { (self.api.result_string)(r, &mut s) } == SUCCESS;
        let text = if ok && !s.is_null() {
            // SAFETY: a non-null result string is NUL-terminated and static.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        } else {
            format!("CUPTI error {r}")
        };
        format!("{call}: {text}")
    }

    fn check(&self, call: &str, r: u32) -> Result<(), String> {
        if r == SUCCESS {
            Ok(())
        } else {
            Err(self.describe(call, r))
        }
    }

    /// Subscribe [`on_exit`] (refused when another client holds CUPTI; the
    /// callback tie only) and register the buffer callbacks; the subscriber
    /// handle (0: none).
    fn subscribe(&self) -> Result<usize, String> {
        if self.tie == CuptiTie::Order {
            // SAFETY: the callbacks have CUPTI's signatures and never unwind.
            let r =
                unsafe { (self.api.register)(Some(records::requested), Some(records::completed)) };
            self.check("cuptiActivityRegisterCallbacks", r)?;
            return Ok(0);
        }
        let mut h: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        // SAFETY: `h` is a valid out-pointer; the callback has CUPTI's
        // signature and never unwinds; no user data.
        let r = unsafe { (self.api.subscribe)(&mut h, Some(on_exit), std::ptr::null_mut()) };
        self.check("cuptiSubscribe", r)?;
        // SAFETY: the callbacks have CUPTI's signatures and never unwind.
        let r = unsafe { (self.api.register)(Some(records::requested), Some(records::completed)) };
        self.check("cuptiActivityRegisterCallbacks", r)?;
        Ok(h as usize)
    }

    /// [`on_exit`] on (`on`) or off for every [`ISSUING`] driver call and
    /// every runtime call.
    fn callbacks(&self, on: bool) -> Result<(), String> {
        if self.tie == CuptiTie::Order {
            return Ok(());
        }
        let h = self.subscriber as sys::CUpti_SubscriberHandle;
        for cb in ISSUING {
            // SAFETY: `h` is this process's subscriber; a valid domain and id.
            let r =
                unsafe { (self.api.enable_callback)(u32::from(on), h, DRIVER_DOMAIN, cb as u32) };
            self.check("cuptiEnableCallback", r)?;
        }
        // SAFETY: as above; a valid domain.
        let r = unsafe { (self.api.enable_domain)(u32::from(on), h, RUNTIME_DOMAIN) };
        self.check("cuptiEnableDomain(RUNTIME_API)", r)?;
        Ok(())
    }

    /// A timed call is being issued: enable the activity kinds if nothing
    /// holds them on.
    pub fn begin(&self) -> Result<(), String> {
        self.add(|n| n.calls += 1)
    }

    /// Hold the activity kinds on (timing was switched on: the timed calls
    /// that follow find them on) until [`Cupti::release`].
    pub fn hold(&self) -> Result<(), String> {
        self.add(|n| n.holds += 1)
    }

    /// The kinds on if nothing was pending or held, then `count` it.
    fn add(&self, count: impl FnOnce(&mut Pending)) -> Result<(), String> {
        let mut n = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if n.calls == 0 && n.holds == 0 {
            self.turn_on(&mut n)?;
        }
        count(&mut n);
        Ok(())
    }

    /// The kinds on for the first pending call or hold: enabled, or (kept
    /// on) the untimed calls' records dropped.
    fn turn_on(&self, n: &mut Pending) -> Result<(), String> {
        if n.on {
            // Kept on: the untimed calls' records go.
            self.flush()?;
            records::clear();
        } else if let Err(e) = self.switch(true) {
            // Nothing pending: leave nothing on.
            let _ = self.switch(false);
            return Err(e);
        }
        n.on = true;
        Ok(())
    }

    /// `calls` timed calls were taken: when none is left pending, forget
    /// the records nobody asked for (others' work, a primer's), and disable
    /// the kinds unless something holds them on.
    pub fn end(&self, calls: usize) -> Result<(), String> {
        self.remove(|n| n.calls = n.calls.saturating_sub(calls))
    }

    /// A [`Cupti::hold`] ends.
    pub fn release(&self) -> Result<(), String> {
        self.remove(|n| n.holds = n.holds.saturating_sub(1))
    }

    /// `count` a call taken or a hold ended, then [`Cupti::settle`].
    fn remove(&self, count: impl FnOnce(&mut Pending)) -> Result<(), String> {
        let mut n = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        count(&mut n);
        self.settle(&mut n)
    }

    /// With no timed call pending: the records nobody asked for dropped,
    /// and the kinds off unless held (or kept) on.
    fn settle(&self, n: &mut Pending) -> Result<(), String> {
        if n.calls > 0 {
            return Ok(());
        }
        if n.holds == 0 && !self.keep && n.on {
            n.on = false;
            self.switch(false)?;
        }
        self.flush()?;
        records::clear();
        Ok(())
    }

    /// The selected kinds and (callback tie) [`on_exit`] on or off.
    fn switch(&self, on: bool) -> Result<(), String> {
        if !on {
            self.callbacks(false)?;
        }
        for &k in kinds_of(self.kinds) {
            let (name, f) = if on {
                ("cuptiActivityEnable", self.api.enable)
            } else {
                ("cuptiActivityDisable", self.api.disable)
            };
            // SAFETY: plain call with a valid kind.
            self.check(name, unsafe { f(k as u32) })?;
        }
        if on {
            self.callbacks(true)?;
        }
        Ok(())
    }

    /// CUPTI's id of `stream`, a stream of context `ctx`: what its
    /// activity records carry as `streamId`.
    pub(crate) fn stream_id(
        &self,
        ctx: cudarc::driver::sys::CUcontext,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<u32, String> {
        let mut id = 0u32;
        // SAFETY: a live context and a live stream handle of it (the
        // caller's [`super::driver::Ctx`] and [`super::stream::Stream`]),
        // not a per-thread default stream; `id` is a valid out-pointer.
        let r = unsafe { (self.api.stream_id)(ctx, stream, 0, &mut id) };
        self.check("cuptiGetStreamIdEx", r)?;
        Ok(id)
    }

    /// Open op `id` (not 0) on the calling thread: the correlation ids of
    /// its issuing driver calls are kept until [`Cupti::pop`].
    pub fn push(&self, id: u64) -> Result<(), String> {
        OPEN.with(|o| o.set(id));
        SEEN.with(|s| s.borrow_mut().clear());
        Ok(())
    }

    /// Close the calling thread's op: each correlation id its calls got,
    /// with the op's id, onto `ties` (the call's own list, handed to
    /// [`Cupti::take`]: no lock shared with other threads per op).
    pub fn pop(&self, ties: &mut Vec<(u32, u64)>) -> Result<(), String> {
        close(ties)
    }

    /// Hand every buffered record to the completion callback (forced:
    /// buffers still being filled too).
    fn flush(&self) -> Result<(), String> {
        let f = sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32;
        let _one = FLUSH.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: plain call; the callbacks it runs never unwind.
        self.check("cuptiActivityFlushAll", unsafe { (self.api.flush_all)(f) })
    }

    /// Flush, then take the activity records of the correlation ids in
    /// `ties` (what [`Cupti::pop`] filed: correlation id, op id), with the
    /// ties as external correlation records. Also the number of records
    /// CUPTI dropped for want of buffer space since the last take.
    pub fn take(&self, ties: &[(u32, u64)]) -> Result<(Vec<Activity>, u64), String> {
        self.flush()?;
        Ok(records::take(ties))
    }

    /// Flush, then take the records on the streams `streams` accepts (the
    /// order tie: CUPTI's stream ids of a rank's lanes), and the dropped
    /// count as [`Cupti::take`].
    pub(crate) fn take_streams(
        &self,
        streams: &dyn Fn(u32) -> bool,
    ) -> Result<(Vec<Activity>, u64), String> {
        self.flush()?;
        Ok(records::take_streams(streams))
    }

    /// CUPTI's clock now, bracketed by the host clock: (CUPTI ns, host
    /// instant at the bracket's middle, bracket half-width in ns). The
    /// activity records' timestamps are on CUPTI's clock.
    pub fn clock(&self) -> Result<(u64, Instant, f64), String> {
        let mut best: Option<(u64, Instant, f64)> = None;
        for _ in 0..10 {
            let mut t = 0u64;
            let a = Instant::now();
            // SAFETY: `t` is a valid out-pointer.
            let r = unsafe { (self.api.timestamp)(&mut t) };
            let b = Instant::now();
            self.check("cuptiGetTimestamp", r)?;
            let half = b.duration_since(a) / 2;
            let h = half.as_secs_f64() * 1e9;
            if best.is_none_or(|x| h < x.2) {
                best = Some((t, a + half, h));
            }
        }
        best.ok_or_else(|| "no CUPTI timestamp".to_string())
    }
}

#[cfg(test)]
mod tests;
