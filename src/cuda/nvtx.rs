//! NVTX ranges in a `ringreduce` domain, for Nsight Systems, Nsight Compute
//! (`ncu --nvtx`) or any NVTX tool: one per call and one per ring step of
//! each rank (see `backend/cuda/rank/hooks/nvtx.rs`).
//!
//! NVTX3 is header-only in C; from Rust its entry points come from the
//! toolkit's `libnvtx3interop.so`, loaded at run time on first use (the
//! loader's path, then the toolkit directories CUPTI is searched in).
//! Missing library: no ranges, silently. The domain is created once; NVTX
//! returns a null domain when no tool is injected (its own check of
//! `NVTX_INJECTION64_PATH` and of a tool linked into the process), and then
//! [`active`] is `None`: a range costs one atomic load and no formatting.

use std::ffi::{c_char, c_int, CString};
use std::path::Path;
use std::sync::OnceLock;

use cudarc::nvtx::sys;
use libloading::Library;

/// Names tried through the dynamic linker's search path, then in these
/// directories.
const NAMES: [&str; 2] = ["libnvtx3interop.so", "libnvtx3interop.so.1"];
const DIRS: [&str; 2] = [
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
];

type DomainCreate = unsafe extern "C" fn(*const c_char) -> sys::nvtxDomainHandle_t;
type PushEx =
    unsafe extern "C" fn(sys::nvtxDomainHandle_t, *const sys::nvtxEventAttributes_t) -> c_int;
type Pop = unsafe extern "C" fn(sys::nvtxDomainHandle_t) -> c_int;

/// The loaded NVTX with a tool listening, and the `ringreduce` domain.
pub struct Nvtx {
    domain: sys::nvtxDomainHandle_t,
    push: PushEx,
    pop: Pop,
}

// SAFETY: the domain handle is an opaque process-wide token that NVTX's
// functions accept from any thread (NVTX is thread-safe); the rest is
// function pointers and the library.
unsafe impl Send for Nvtx {}
// SAFETY: as above; nothing here is mutated after creation.
unsafe impl Sync for Nvtx {}

static NVTX: OnceLock<Option<Nvtx>> = OnceLock::new();

/// NVTX, if its library loads and a tool listens (tried once per process).
pub(crate) fn active() -> Option<&'static Nvtx> {
    NVTX.get_or_init(load).as_ref()
}

fn load() -> Option<Nvtx> {
    let candidates = NAMES
        .iter()
        .map(|n| Path::new(n).to_path_buf())
        .chain(DIRS.iter().map(|d| Path::new(d).join(NAMES[0])));
    // SAFETY: loading the NVTX interop library runs only its initialisers.
    // Never unloaded, even when it is not used after all (no domain): a
    // tool's injection (ncu's, Nsight's) may have hooked into it, as
    // libcupti is kept for the same reason (`cupti::find`).
    let lib: &'static Library = Box::leak(Box::new(
        candidates
            .into_iter()
            .find_map(|c| unsafe { Library::new(c) }.ok())?,
    ));
    // SAFETY: the symbols have these C signatures (nvToolsExt.h).
    let (create, push, pop) = unsafe {
        let create: DomainCreate = *lib.get(b"nvtxDomainCreateA\0").ok()?;
        let push: PushEx = *lib.get(b"nvtxDomainRangePushEx\0").ok()?;
        let pop: Pop = *lib.get(b"nvtxDomainRangePop\0").ok()?;
        (create, push, pop)
    };
    // SAFETY: a NUL-terminated static name; NVTX copies what it keeps.
    let domain = unsafe { create(c"ringreduce".as_ptr()) };
    if domain.is_null() {
        return None;
    }
    Some(Nvtx { domain, push, pop })
}

/// An open range, closed when dropped (on the thread that opened it).
pub struct Range {
    nvtx: &'static Nvtx,
}

impl Nvtx {
    /// Open a range named `name` in the `ringreduce` domain.
    pub fn range(&'static self, name: &str) -> Range {
        let text = CString::new(name.replace('\0', " ")).unwrap_or_default();
        // SAFETY: an all-zero nvtxEventAttributes_t is a valid empty
        // attribute set (integers, a union of pointers and integers).
        let mut a: sys::nvtxEventAttributes_t = unsafe { std::mem::zeroed() };
        a.version = 3;
        a.size = std::mem::size_of::<sys::nvtxEventAttributes_t>() as u16;
        a.messageType = sys::nvtxMessageType_t::NVTX_MESSAGE_TYPE_ASCII as i32;
        a.message.ascii = text.as_ptr();
        // SAFETY: `a` and the string it points at outlive the call; NVTX
        // copies the message.
        unsafe { (self.push)(self.domain, &a) };
        Range { nvtx: self }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        // SAFETY: closes the range this thread opened last in the domain.
        unsafe { (self.nvtx.pop)(self.nvtx.domain) };
    }
}

#[cfg(test)]
mod tests;
