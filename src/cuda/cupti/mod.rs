//! CUPTI's activity API, loaded at run time: the timeline's source of
//! device timestamps (kernels, copies, memsets, synchronizations) that
//! costs the streams no extra work, unlike timing events between ops.
//!
//! * [`get`] loads `libcupti` once per process (the search of `find`),
//!   subscribes (which fails when another CUPTI client, e.g. a profiler,
//!   holds the subscription) and registers the buffer callbacks. Any
//!   failure is kept as a reason, and the caller falls back to events.
//! * [`Cupti::begin`] / [`Cupti::end`] enable the activity kinds while at
//!   least one timed call is pending in this process, so untimed calls pay
//!   nothing.
//! * [`Cupti::push`] / [`Cupti::pop`] put an external correlation id on the
//!   calling thread around an op's driver call: CUPTI then writes an
//!   external correlation record tying the call's correlation id (which
//!   the kernel or copy record carries) to the op's id.
//! * [`Cupti::take`] flushes CUPTI's buffers and hands over the records of
//!   the given ids (`records` parses the buffers into [`Activity`]).
//!
//! Layouts: the records are read field by field at the offsets of cudarc's
//! bindings of CUDA 13.0's `cupti_activity.h` (`CUpti_ActivityKernel10`,
//! `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemcpyPtoP4`,
//! `CUpti_ActivityMemset4`, `CUpti_ActivitySynchronization2`,
//! `CUpti_ActivityExternalCorrelation`); newer versions of a record append
//! fields, and only the leading fields these versions share are read.

mod records;

use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cudarc::cupti::sys;
use libloading::Library;

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

/// The activity kinds enabled while timed calls are pending.
///
/// `DRIVER` (a record per driver call) is what makes CUPTI write the
/// external correlation records: a pushed external id is tied to the
/// correlation id of a driver API *record*. Selecting single driver calls
/// with `cuptiActivityEnableDriverApi` instead gave no API record and no
/// external correlation at all when enabled after the context had run work
/// (as here, on the first timed call), though it did when enabled before
/// `cuInit`: `scripts/cupti-probe.py`, records
/// `docs/results/2026-12-02-h200x1-cupti-probe*.txt`. That was why the
/// first CUPTI timelines got no record of their ops. Not `SYNCHRONIZATION`:
/// CUPTI writes one per `cuStreamQuery` (the probe: 11 records for 10
/// queries and a synchronize), and the ranks poll their streams while they
/// wait; the timeline does not use them.
const KINDS: [sys::CUpti_ActivityKind; 6] = [
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY2,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
];

/// The driver calls that issue an op's work: with `DRIVER` on, every other
/// driver call is switched off one by one (`cuptiActivityEnableDriverApi(cb,
/// 0)`, which does filter once the kind is on: the probe's `driver-quiet`
/// kept 3 API records of 14), so the host's polls and event records cost no
/// record.
const ISSUING: [Cbid; 5] = [
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    Cbid::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
];
type Cbid = sys::CUpti_driver_api_trace_cbid_enum;

const CUSTOM0: u32 =
    sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 as u32;
const SUCCESS: u32 = sys::CUptiResult::CUPTI_SUCCESS as u32;

type Subscribe = unsafe extern "C" fn(
    *mut sys::CUpti_SubscriberHandle,
    sys::CUpti_CallbackFunc,
    *mut c_void,
) -> u32;
type Register = unsafe extern "C" fn(
    sys::CUpti_BuffersCallbackRequestFunc,
    sys::CUpti_BuffersCallbackCompleteFunc,
) -> u32;
type Kind = unsafe extern "C" fn(u32) -> u32;
type DriverApi = unsafe extern "C" fn(u32, u8) -> u32;
type Push = unsafe extern "C" fn(u32, u64) -> u32;
type Pop = unsafe extern "C" fn(u32, *mut u64) -> u32;
type NextRecord = unsafe extern "C" fn(*mut u8, usize, *mut *mut sys::CUpti_Activity) -> u32;
type Timestamp = unsafe extern "C" fn(*mut u64) -> u32;
type ResultString = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;
type Dropped = unsafe extern "C" fn(cudarc::driver::sys::CUcontext, u32, *mut usize) -> u32;

/// The CUPTI entry points used here, with the library that holds them.
struct Api {
    subscribe: Subscribe,
    register: Register,
    enable: Kind,
    disable: Kind,
    driver_api: DriverApi,
    flush_all: Kind,
    push: Push,
    pop: Pop,
    next_record: NextRecord,
    timestamp: Timestamp,
    result_string: ResultString,
    dropped: Dropped,
    /// Kept open for the process's life (the pointers above point into it).
    _lib: Library,
}

/// The loaded, subscribed CUPTI of this process.
pub struct Cupti {
    api: Api,
    /// Timed calls issued and not yet taken (kinds enabled while > 0).
    pending: Mutex<usize>,
}

/// One flush at a time (rank threads take their records concurrently).
static FLUSH: Mutex<()> = Mutex::new(());

/// The process's CUPTI, or why there is none (kept: tried once).
static CUPTI: OnceLock<Result<Cupti, String>> = OnceLock::new();

/// The process's CUPTI, loaded and subscribed on first use, or the reason
/// it cannot be used (missing, refused, another subscriber).
/// `setting`: `RINGREDUCE_CUPTI` (`Some("0")`: off; another value: the
/// library's path), read by the caller.
pub fn get(setting: Option<&Path>) -> Result<&'static Cupti, String> {
    CUPTI
        .get_or_init(|| init(setting))
        .as_ref()
        .map_err(Clone::clone)
}

/// What CUPTI delivered in this process so far, for an error that found
/// no record of an op: buffers, records, external correlations.
pub fn delivered() -> String {
    let s = records::store();
    format!(
        "CUPTI handed back {} buffers with {} records, {} of them external correlations, in this process",
        s.buffers, s.parsed, s.externals
    )
}

/// The process's CUPTI if [`get`] loaded it (for the buffer callbacks).
fn loaded() -> Option<&'static Cupti> {
    CUPTI.get().and_then(|c| c.as_ref().ok())
}

fn init(setting: Option<&Path>) -> Result<Cupti, String> {
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
    let c = Cupti {
        api,
        pending: Mutex::new(0),
    };
    c.subscribe()?;
    Ok(c)
}

/// Open CUPTI: the setting's path alone if given, else the loader's path,
/// then [`DIRS`].
fn find(setting: Option<&Path>) -> Result<(Library, PathBuf), String> {
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
        // SAFETY: loading libcupti runs its initialisers, which only set up
        // its own state; nothing here depends on symbols it could replace.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((lib, c.clone())),
            Err(e) => tried.push(format!("{} ({e})", c.display())),
        }
    }
    Err(format!("not found: {}", tried.join("; ")))
}

/// Look up the entry points.
///
/// # Safety
/// `lib` must be libcupti (the symbols are cast to their C signatures).
unsafe fn load(lib: Library) -> Result<Api, libloading::Error> {
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
        driver_api: sym!("cuptiActivityEnableDriverApi"),
        flush_all: sym!("cuptiActivityFlushAll"),
        push: sym!("cuptiActivityPushExternalCorrelationId"),
        pop: sym!("cuptiActivityPopExternalCorrelationId"),
        next_record: sym!("cuptiActivityGetNextRecord"),
        timestamp: sym!("cuptiGetTimestamp"),
        result_string: sym!("cuptiGetResultString"),
        dropped: sym!("cuptiActivityGetNumDroppedRecords"),
        _lib: lib,
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

    /// Subscribe (refused when another client holds CUPTI) and register
    /// the buffer callbacks.
    fn subscribe(&self) -> Result<(), String> {
        let mut h: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        // SAFETY: `h` is a valid out-pointer; no callback, no user data.
        let r = unsafe { (self.api.subscribe)(&mut h, None, std::ptr::null_mut()) };
        self.check("cuptiSubscribe", r)?;
        // SAFETY: the callbacks have CUPTI's signatures and never unwind.
        let r = unsafe { (self.api.register)(Some(records::requested), Some(records::completed)) };
        self.check("cuptiActivityRegisterCallbacks", r)
    }

    /// A timed call is being issued: enable the activity kinds if none was
    /// pending.
    pub fn begin(&self) -> Result<(), String> {
        let mut n = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if *n == 0 {
            for k in KINDS {
                // SAFETY: plain call with a valid kind.
                self.check("cuptiActivityEnable", unsafe {
                    (self.api.enable)(k as u32)
                })?;
            }
            self.quiet_driver_api();
        }
        *n += 1;
        Ok(())
    }

    /// With `DRIVER` on: no API record but for [`ISSUING`]. A call that
    /// fails (an id this CUPTI does not know) only leaves that call's
    /// records on: more records, the same timeline.
    fn quiet_driver_api(&self) {
        let size = Cbid::CUPTI_DRIVER_TRACE_CBID_SIZE as u32;
        for cb in 1..size {
            if !ISSUING.iter().any(|&k| k as u32 == cb) {
                // SAFETY: plain call; an unknown id is refused, not UB.
                let _ = unsafe { (self.api.driver_api)(cb, 0) };
            }
        }
    }

    /// `calls` timed calls were taken: disable the kinds when none is left
    /// pending, and forget the records nobody asked for.
    pub fn end(&self, calls: usize) -> Result<(), String> {
        let mut n = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(calls);
        if *n > 0 {
            return Ok(());
        }
        for k in KINDS {
            // SAFETY: plain call with a valid kind.
            self.check("cuptiActivityDisable", unsafe {
                (self.api.disable)(k as u32)
            })?;
        }
        self.flush()?;
        records::clear();
        Ok(())
    }

    /// Tag the calling thread's driver calls with `id` until [`Cupti::pop`].
    pub fn push(&self, id: u64) -> Result<(), String> {
        // SAFETY: plain call with a valid kind.
        let r = unsafe { (self.api.push)(CUSTOM0, id) };
        self.check("cuptiActivityPushExternalCorrelationId", r)
    }

    /// Remove the calling thread's last pushed id.
    pub fn pop(&self) -> Result<(), String> {
        let mut last = 0u64;
        // SAFETY: `last` is a valid out-pointer.
        let r = unsafe { (self.api.pop)(CUSTOM0, &mut last) };
        self.check("cuptiActivityPopExternalCorrelationId", r)
    }

    /// Hand every buffered record to the completion callback (forced:
    /// buffers still being filled too).
    fn flush(&self) -> Result<(), String> {
        let f = sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32;
        let _one = FLUSH.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: plain call; the callbacks it runs never unwind.
        self.check("cuptiActivityFlushAll", unsafe { (self.api.flush_all)(f) })
    }

    /// Flush, then take the records tied to the external ids `ids` accepts:
    /// their external correlation records and the activity records of the
    /// same correlation ids. Also the number of records CUPTI dropped for
    /// want of buffer space since the last take.
    pub fn take(&self, ids: &dyn Fn(u64) -> bool) -> Result<(Vec<Activity>, u64), String> {
        self.flush()?;
        Ok(records::take(ids))
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
mod tests {
    use super::*;

    #[test]
    fn cupti_off_or_missing_is_a_reason_not_a_failure() {
        let off = init(Some(Path::new("0"))).err().unwrap_or_default();
        assert_eq!(off, "off (RINGREDUCE_CUPTI=0)");
        let missing = init(Some(Path::new("/nonexistent/libcupti.so.13")))
            .err()
            .unwrap_or_default();
        assert!(
            missing.starts_with("not found: /nonexistent/libcupti.so.13 ("),
            "{missing}"
        );
    }

    #[test]
    fn a_take_hands_over_only_the_records_of_its_ids() {
        // Ids and correlation ids no real call uses in this test process.
        let base = u64::MAX - 100;
        let a = |kind, corr, external| Activity {
            kind,
            start: 1,
            end: 2,
            correlation: corr,
            external,
            device: 0,
            stream: 0,
        };
        records::store().records.extend([
            a(ActivityKind::External, u32::MAX - 1, base),
            a(ActivityKind::Kernel, u32::MAX - 1, 0),
            a(ActivityKind::External, u32::MAX - 2, base + 50),
            a(ActivityKind::PeerCopy, u32::MAX - 2, 0),
        ]);
        let (mine, _) = records::take(&|id| (base..base + 10).contains(&id));
        assert_eq!(mine.len(), 2, "{mine:?}");
        assert!(mine.iter().all(|r| r.correlation == u32::MAX - 1));
        let (other, _) = records::take(&|id| id == base + 50);
        assert_eq!(other.len(), 2, "{other:?}");
        let (none, _) = records::take(&|id| id >= base);
        assert!(none.is_empty());
    }
}
