//! CUPTI's activity buffers: allocated on request, parsed into plain
//! [`Activity`] records when CUPTI completes them, kept in one store per
//! process until a rank takes its own.

pub mod order;

use std::alloc::{alloc, dealloc, Layout};
use std::collections::HashSet;
use std::mem::offset_of;
use std::sync::Mutex;

use cudarc::cupti::sys;
use cudarc::driver::sys::CUcontext;

/// One activity buffer's size and alignment (CUPTI's samples use 8 MiB
/// and 8).
const BUFFER_SIZE: usize = 4 << 20;
const BUFFER_ALIGN: usize = 8;

/// What an activity record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivityKind {
    /// A kernel (`CONCURRENT_KERNEL`).
    Kernel,
    /// A copy within a device or with the host (`MEMCPY`).
    Memcpy,
    /// A copy between two devices (`MEMCPY2`).
    PeerCopy,
    /// A memset.
    Memset,
    /// Ties `correlation` to the op id `external` (filed by the issuing
    /// call's callback, not read from a buffer).
    External,
}

/// One activity record, as the timeline needs it: times in CUPTI's clock
/// (ns), CUPTI's correlation id of the driver call that issued it, and for
/// [`ActivityKind::External`] the external id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    pub kind: ActivityKind,
    pub start: u64,
    pub end: u64,
    pub correlation: u32,
    pub external: u64,
    pub device: u32,
    pub stream: u32,
}

/// The records CUPTI completed and nobody took yet, and how many it
/// dropped.
pub(super) struct Store {
    pub(super) records: Vec<Activity>,
    dropped: u64,
    /// Since the process started: buffers CUPTI handed back, the records
    /// parsed from them, and the correlation ids the issuing calls'
    /// callbacks filed (what an error says when a call finds none of its
    /// records).
    pub(super) buffers: u64,
    pub(super) parsed: u64,
    pub(super) externals: u64,
}

static STORE: Mutex<Store> = Mutex::new(Store {
    records: Vec::new(),
    dropped: 0,
    buffers: 0,
    parsed: 0,
    externals: 0,
});

pub(super) fn store() -> std::sync::MutexGuard<'static, Store> {
    STORE.lock().unwrap_or_else(|p| p.into_inner())
}

fn layout() -> Option<Layout> {
    Layout::from_size_align(BUFFER_SIZE, BUFFER_ALIGN).ok()
}

/// CUPTI asks for a buffer.
///
/// # Safety
/// Called by CUPTI with valid out-pointers.
pub(super) unsafe extern "C" fn requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    // SAFETY: the layout has a non-zero size; the buffer is freed in
    // `completed`, which CUPTI calls for every buffer it was given.
    let p = layout().map_or(std::ptr::null_mut(), |l| unsafe { alloc(l) });
    // SAFETY: CUPTI's out-pointers are valid (the callback's contract); a
    // null buffer with size 0 makes CUPTI drop records instead.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { BUFFER_SIZE };
        *max = 0;
    }
}

/// CUPTI hands back a buffer: parse its records into the store, free it.
///
/// # Safety
/// Called by CUPTI with a buffer from `requested` and its valid size.
pub(super) unsafe extern "C" fn completed(
    ctx: CUcontext,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut parsed = Vec::new();
    let mut dropped = 0usize;
    if let Some(c) = super::loaded() {
        // SAFETY: the context and stream id CUPTI passed; `dropped` is a
        // valid out-pointer (left 0 if the call fails).
        let _ = unsafe { (c.api.dropped)(ctx, stream, &mut dropped) };
        let mut rec: *mut sys::CUpti_Activity = std::ptr::null_mut();
        // SAFETY: `buffer` holds `valid` bytes of records; CUPTI walks
        // them and points `rec` at each in turn.
        while unsafe { (c.api.next_record)(buffer, valid, &mut rec) } == super::SUCCESS {
            // SAFETY: `rec` points at a whole record inside `buffer`.
            if let Some(a) = unsafe { parse(rec.cast::<u8>()) } {
                parsed.push(a);
            }
        }
    }
    let mut s = store();
    s.buffers += 1;
    s.parsed += parsed.len() as u64;
    s.records.extend(parsed);
    s.dropped += dropped as u64;
    drop(s);
    if let Some(l) = layout() {
        // SAFETY: `buffer` came from `requested` with this layout.
        unsafe { dealloc(buffer, l) };
    }
}

/// Read a field of type `T` at `offset` bytes into a record.
///
/// # Safety
/// `rec + offset .. + size_of::<T>()` must lie inside the record, and `T`
/// must accept any bit pattern.
unsafe fn field<T: Copy>(rec: *const u8, offset: usize) -> T {
    // SAFETY: the caller's contract; records are packed, so unaligned.
    unsafe { rec.add(offset).cast::<T>().read_unaligned() }
}

/// A record's kind, start, end, correlation id, device and stream from the
/// offsets of the record type `$t`.
macro_rules! timed {
    ($rec:expr, $kind:expr, $t:ty, $device:ident) => {{
        // SAFETY: `$rec` is a record of type `$t` (its kind says so); these
        // are integer fields inside it.
        unsafe {
            Activity {
                kind: $kind,
                start: field::<u64>($rec, offset_of!($t, start)),
                end: field::<u64>($rec, offset_of!($t, end)),
                correlation: field::<u32>($rec, offset_of!($t, correlationId)),
                external: 0,
                device: field::<u32>($rec, offset_of!($t, $device)),
                stream: field::<u32>($rec, offset_of!($t, streamId)),
            }
        }
    }};
}

/// One record as an [`Activity`] (`None`: a kind the timeline does not use,
/// e.g. the driver API records that only carry the external ids).
///
/// # Safety
/// `rec` points at a whole activity record from CUPTI.
unsafe fn parse(rec: *const u8) -> Option<Activity> {
    use sys::CUpti_ActivityKind as K;
    // SAFETY: every record starts with its kind, a 32-bit enum; read as an
    // integer (a value this build does not know is no Rust enum).
    let kind: u32 = unsafe { field(rec, 0) };
    let a = match kind {
        k if k == K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32
            || k == K::CUPTI_ACTIVITY_KIND_KERNEL as u32 =>
        {
            timed!(
                rec,
                ActivityKind::Kernel,
                sys::CUpti_ActivityKernel10,
                deviceId
            )
        }
        k if k == K::CUPTI_ACTIVITY_KIND_MEMCPY as u32 => {
            timed!(
                rec,
                ActivityKind::Memcpy,
                sys::CUpti_ActivityMemcpy6,
                deviceId
            )
        }
        k if k == K::CUPTI_ACTIVITY_KIND_MEMCPY2 as u32 => {
            timed!(
                rec,
                ActivityKind::PeerCopy,
                sys::CUpti_ActivityMemcpyPtoP4,
                deviceId
            )
        }
        k if k == K::CUPTI_ACTIVITY_KIND_MEMSET as u32 => {
            timed!(
                rec,
                ActivityKind::Memset,
                sys::CUpti_ActivityMemset4,
                deviceId
            )
        }
        _ => return None,
    };
    Some(a)
}

/// The [`ActivityKind::External`] record that ties correlation id `c` to
/// op id `id` (what an issuing call's callback saw).
pub(crate) fn external(c: u32, id: u64) -> Activity {
    Activity {
        kind: ActivityKind::External,
        start: 0,
        end: 0,
        correlation: c,
        external: id,
        device: 0,
        stream: 0,
    }
}

/// Take the records of the correlation ids `ties` (correlation id, op id:
/// what the callbacks filed, kept by the calls themselves), with those ties
/// as [`ActivityKind::External`] records, and the count of dropped records
/// (reset).
pub(super) fn take(ties: &[(u32, u64)]) -> (Vec<Activity>, u64) {
    let mine: HashSet<u32> = ties.iter().map(|t| t.0).collect();
    let mut s = store();
    s.externals += ties.len() as u64;
    let (mut taken, kept): (Vec<Activity>, Vec<Activity>) = std::mem::take(&mut s.records)
        .into_iter()
        .partition(|a| a.kind != ActivityKind::External && mine.contains(&a.correlation));
    s.records = kept;
    let dropped = std::mem::take(&mut s.dropped);
    drop(s);
    taken.extend(ties.iter().map(|&(c, id)| external(c, id)));
    (taken, dropped)
}

/// Take the records (no external correlation) on the streams `streams`
/// accepts, and the count of dropped records (reset): the order tie.
pub(super) fn take_streams(streams: &dyn Fn(u32) -> bool) -> (Vec<Activity>, u64) {
    let mut s = store();
    let (taken, kept) = std::mem::take(&mut s.records)
        .into_iter()
        .partition(|a| a.kind != ActivityKind::External && streams(a.stream));
    s.records = kept;
    (taken, std::mem::take(&mut s.dropped))
}

/// Forget every record (no timed call pending in the process).
pub(super) fn clear() {
    store().records.clear();
}
