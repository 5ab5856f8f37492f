//! A small, hand-written runtime binding of NCCL.
//!
//! The library is opened with `libloading` at run time (never linked), so the
//! crate builds and runs its CPU paths on machines without NCCL. Every symbol
//! is resolved once, at [`Nccl::load`], into a plain function pointer; the
//! library handle lives in the same reference-counted block as those pointers
//! and is never closed (NCCL starts background threads that must not outlive
//! its code), so a [`Comm`] or a cloned [`Nccl`] can never call into unmapped
//! code.
//!
//! Only what the AllReduce comparison needs is bound: version, unique id,
//! `ncclCommInitRank`, group start/end, `ncclAllReduce` (f32, sum) and
//! `ncclCommDestroy`, plus the error-string helpers used in error messages.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr, OsStr, OsString};
use std::fmt;
use std::fs;
use std::io::Read;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::ptr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use libloading::Library;

/// A CUDA stream handle, as cudarc's driver API spells it (`cudaStream_t` is the same pointer).
pub type CUstream = cudarc::driver::sys::CUstream;

/// `NCCL_UNIQUE_ID_BYTES`.
const NCCL_UNIQUE_ID_BYTES: usize = 128;
/// `ncclSuccess`.
const NCCL_SUCCESS: c_int = 0;
/// `ncclInternalError`.
const NCCL_INTERNAL_ERROR: c_int = 3;
/// `ncclInvalidArgument`.
const NCCL_INVALID_ARGUMENT: c_int = 4;
/// `ncclInvalidUsage`.
const NCCL_INVALID_USAGE: c_int = 5;
/// `ncclFloat32`.
const NCCL_FLOAT32: c_int = 7;
/// `ncclSum`.
const NCCL_SUM: c_int = 0;

/// Names tried through the dynamic linker's own search path, in order.
const SONAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];
/// Candidates below `$NCCL_HOME`, in order.
const NCCL_HOME_LIBS: [&str; 4] = [
    "lib/libnccl.so.2",
    "lib/libnccl.so",
    "lib64/libnccl.so.2",
    "lib64/libnccl.so",
];
/// Where the `nvidia-nccl-cu12` / `nvidia-nccl-cu13` wheels put the library, below a site dir.
const WHEEL_LIB: &str = "nvidia/nccl/lib/libnccl.so.2";
/// Upper bound on the `python3` site-dir query.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(10);

/// `ncclComm_t`.
type RawComm = *mut c_void;
type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetUniqueIdFn = unsafe extern "C" fn(*mut UniqueId) -> c_int;
type CommInitRankFn = unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> c_int;
type GroupFn = unsafe extern "C" fn() -> c_int;
type AllReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    CUstream,
) -> c_int;
type CommDestroyFn = unsafe extern "C" fn(RawComm) -> c_int;
type GetErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type GetLastErrorFn = unsafe extern "C" fn(RawComm) -> *const c_char;

/// Errors from loading NCCL or from an NCCL call.
#[derive(Debug, thiserror::Error)]
pub enum NcclError {
    /// library not found; `tried` lists every path/name attempted, in order, with the reason each failed
    #[error("NCCL library not found (tried: {})", tried.join("; "))]
    NotFound { tried: Vec<String> },
    #[error("NCCL library {path} could not be loaded: {reason}")]
    Load { path: String, reason: String },
    #[error("NCCL library {path} lacks symbol {symbol}")]
    Symbol { path: String, symbol: &'static str },
    /// an NCCL call returned non-success: name the call, the code, NCCL's error string and last error
    #[error("{call} failed: {code} ({message})")]
    Call {
        call: &'static str,
        code: i32,
        message: String,
    },
}

/// `ncclUniqueId`: 128 opaque bytes from [`Nccl::unique_id`], shared by every rank of one communicator.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct UniqueId {
    internal: [u8; NCCL_UNIQUE_ID_BYTES],
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UniqueId(")?;
        for b in &self.internal[..16] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("..)")
    }
}

/// The loaded library and its resolved entry points.
struct Inner {
    path: PathBuf,
    get_version: GetVersionFn,
    get_unique_id: GetUniqueIdFn,
    comm_init_rank: CommInitRankFn,
    group_start: GroupFn,
    group_end: GroupFn,
    all_reduce: AllReduceFn,
    comm_destroy: CommDestroyFn,
    get_error_string: GetErrorStringFn,
    get_last_error: Option<GetLastErrorFn>,
    /// Never closed: NCCL leaves threads (bootstrap root, proxies) that may still run its code.
    _lib: ManuallyDrop<Library>,
}

impl Inner {
    /// `Ok` for `ncclSuccess`, else a [`NcclError::Call`] carrying NCCL's own description.
    fn check(&self, call: &'static str, code: c_int, comm: RawComm) -> Result<(), NcclError> {
        if code == NCCL_SUCCESS {
            Ok(())
        } else {
            Err(self.call_error(call, code, comm))
        }
    }

    fn call_error(&self, call: &'static str, code: c_int, comm: RawComm) -> NcclError {
        // SAFETY: ncclGetErrorString accepts any code and returns null or a static C string.
        let mut message = unsafe { c_str_lossy((self.get_error_string)(code)) }
            .unwrap_or_else(|| "unknown NCCL error".to_string());
        if let Some(get_last_error) = self.get_last_error {
            // SAFETY: ncclGetLastError accepts a null or live communicator (it ignores it in
            // current releases) and returns null or a NUL-terminated buffer owned by NCCL.
            let last = unsafe { c_str_lossy(get_last_error(comm)) };
            if let Some(last) = last {
                let last = last.trim();
                if !last.is_empty() {
                    message.push_str("; last error: ");
                    message.push_str(last);
                }
            }
        }
        NcclError::Call {
            call,
            code,
            message,
        }
    }
}

/// Copies a C string out of NCCL-owned memory.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string that stays valid during the call.
unsafe fn c_str_lossy(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated per this function's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// A loaded NCCL library. Cheap to clone (shared handle); `Send + Sync`.
#[derive(Clone)]
pub struct Nccl {
    inner: Arc<Inner>,
}

impl fmt::Debug for Nccl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nccl")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Nccl {
    /// Finds and loads NCCL, resolving every symbol this binding uses.
    ///
    /// Search order: 1) `override_path` if `Some` (on failure: [`NcclError::Load`], no fallback);
    /// 2) `$NCCL_HOME`: `lib/libnccl.so.2`, `lib/libnccl.so`, `lib64/libnccl.so.2`,
    /// `lib64/libnccl.so`, and `$NCCL_HOME` itself if it is a file; 3) the dynamic linker's
    /// search path: `libnccl.so.2`, then `libnccl.so`; 4) `nvidia/nccl/lib/libnccl.so.2` of
    /// installed Python wheels (site/dist-packages of `$VIRTUAL_ENV`, `$CONDA_PREFIX`,
    /// `/usr/lib/python3*`, `/usr/local/lib/python3*`, `~/.local/lib/python3*`,
    /// `/opt/*/.venv/lib/python3*`, and the site dirs / `sys.path` reported by `python3`).
    /// The first candidate that loads wins; if it lacks a required symbol that is an error
    /// ([`NcclError::Symbol`]), not a reason to go on searching.
    pub fn load(override_path: Option<&Path>) -> Result<Nccl, NcclError> {
        if let Some(path) = override_path {
            return match open_library(path.as_os_str()) {
                Ok(lib) => Nccl::from_library(lib, path),
                Err(reason) => Err(NcclError::Load {
                    path: path.display().to_string(),
                    reason,
                }),
            };
        }
        let env = SearchEnv::from_process();
        let site_dirs = wheel_site_dirs(&env);
        let candidates = candidate_paths(env.nccl_home.as_deref(), &site_dirs);
        let wheel_note = format!(
            "{WHEEL_LIB} of a Python wheel (nvidia-nccl-cu*): not found in {} site dir(s) from {}",
            site_dirs.len(),
            wheel_patterns(&env).join(", ")
        );
        load_candidates(&candidates, Some(wheel_note))
    }

    /// Resolves the symbols of an opened library.
    fn from_library(lib: Library, path: &Path) -> Result<Nccl, NcclError> {
        // SAFETY (all `sym` calls): each type is the fn-pointer type of the symbol's
        // declaration in nccl.h (ncclResult_t/ncclDataType_t/ncclRedOp_t are C ints,
        // ncclComm_t and cudaStream_t are pointers, ncclUniqueId is 128 bytes passed by value).
        let get_version: GetVersionFn = unsafe { sym(&lib, path, "ncclGetVersion") }?;
        let get_unique_id: GetUniqueIdFn = unsafe { sym(&lib, path, "ncclGetUniqueId") }?;
        let comm_init_rank: CommInitRankFn = unsafe { sym(&lib, path, "ncclCommInitRank") }?;
        let group_start: GroupFn = unsafe { sym(&lib, path, "ncclGroupStart") }?;
        let group_end: GroupFn = unsafe { sym(&lib, path, "ncclGroupEnd") }?;
        let all_reduce: AllReduceFn = unsafe { sym(&lib, path, "ncclAllReduce") }?;
        let comm_destroy: CommDestroyFn = unsafe { sym(&lib, path, "ncclCommDestroy") }?;
        let get_error_string: GetErrorStringFn = unsafe { sym(&lib, path, "ncclGetErrorString") }?;
        let get_last_error: Option<GetLastErrorFn> =
            unsafe { sym(&lib, path, "ncclGetLastError") }.ok();

        // A bare name was found by the dynamic linker: report the file actually mapped.
        let path = if path.to_string_lossy().contains('/') {
            path.to_path_buf()
        } else {
            mapped_file_containing(get_version as usize).unwrap_or_else(|| path.to_path_buf())
        };
        Ok(Nccl {
            inner: Arc::new(Inner {
                path,
                get_version,
                get_unique_id,
                comm_init_rank,
                group_start,
                group_end,
                all_reduce,
                comm_destroy,
                get_error_string,
                get_last_error,
                _lib: ManuallyDrop::new(lib),
            }),
        })
    }

    /// Where the library was loaded from (for a dynamic-linker hit, the resolved file when
    /// `/proc/self/maps` shows it, else the name that was opened).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// `ncclGetVersion`: the version code, e.g. `22803` for 2.28.3.
    pub fn version(&self) -> Result<i32, NcclError> {
        let mut version: c_int = 0;
        // SAFETY: the out-pointer is valid for the duration of the call.
        let code = unsafe { (self.inner.get_version)(&mut version) };
        self.inner
            .check("ncclGetVersion", code, ptr::null_mut())
            .map(|()| version)
    }

    /// The version as `"major.minor.patch"`, e.g. `"2.28.3"`.
    pub fn version_string(&self) -> Result<String, NcclError> {
        self.version().map(version_code_to_string)
    }

    /// `ncclGetUniqueId`. Call once (on one thread) and hand copies to every rank.
    pub fn unique_id(&self) -> Result<UniqueId, NcclError> {
        let mut id = UniqueId {
            internal: [0; NCCL_UNIQUE_ID_BYTES],
        };
        // SAFETY: `id` is a valid, writable ncclUniqueId (128 bytes, repr(C)).
        let code = unsafe { (self.inner.get_unique_id)(&mut id) };
        self.inner
            .check("ncclGetUniqueId", code, ptr::null_mut())
            .map(|()| id)
    }

    /// ncclCommInitRank. Blocks until all ranks joined; call it from each rank's thread
    /// concurrently, with that rank's device context current (NCCL binds the communicator to
    /// the CUDA runtime's current device, which follows the thread's current driver context).
    pub fn comm_init_rank(
        &self,
        nranks: usize,
        id: &UniqueId,
        rank: usize,
    ) -> Result<Comm, NcclError> {
        let (n, r) = match (c_int::try_from(nranks), c_int::try_from(rank)) {
            (Ok(n), Ok(r)) if n >= 1 && r < n => (n, r),
            _ => {
                return Err(NcclError::Call {
                    call: "ncclCommInitRank",
                    code: NCCL_INVALID_ARGUMENT,
                    message: format!(
                        "invalid argument: rank {rank} of {nranks} ranks \
                         (need 0 <= rank < nranks <= {})",
                        c_int::MAX
                    ),
                })
            }
        };
        let mut raw: RawComm = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the id is passed by value as NCCL expects.
        let code = unsafe { (self.inner.comm_init_rank)(&mut raw, n, *id, r) };
        // On failure NCCL frees the half-built communicator and nulls `raw`; it is not touched.
        self.inner
            .check("ncclCommInitRank", code, ptr::null_mut())?;
        if raw.is_null() {
            return Err(NcclError::Call {
                call: "ncclCommInitRank",
                code: NCCL_INTERNAL_ERROR,
                message: "returned success but no communicator".to_string(),
            });
        }
        Ok(Comm {
            raw,
            lib: Arc::clone(&self.inner),
        })
    }

    /// `ncclGroupStart`. Group state is per thread: pair it with [`Nccl::group_end`] on the same thread.
    pub fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments; NCCL keeps the group state per thread.
        let code = unsafe { (self.inner.group_start)() };
        self.inner.check("ncclGroupStart", code, ptr::null_mut())
    }

    /// `ncclGroupEnd`: launches everything queued since the matching `group_start` on this
    /// thread; errors of the grouped calls surface here.
    pub fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments; NCCL keeps the group state per thread.
        let code = unsafe { (self.inner.group_end)() };
        self.inner.check("ncclGroupEnd", code, ptr::null_mut())
    }

    /// ncclAllReduce with ncclFloat32 (=7) and ncclSum (=0); sendbuff/recvbuff are CUDA device
    /// pointers (u64, as cudarc's CUdeviceptr). In place is allowed (`sendbuff == recvbuff`).
    /// The call only enqueues work on `stream`; synchronize the stream before reading results.
    ///
    /// # Safety
    /// `sendbuff` and `recvbuff` must be valid device memory of at least `count` f32 each on
    /// `comm`'s device, `stream` must be a live stream on that device, and neither the buffers
    /// nor the stream may be freed before the enqueued operation completes.
    pub unsafe fn all_reduce_f32_sum(
        &self,
        sendbuff: u64,
        recvbuff: u64,
        count: usize,
        comm: &Comm,
        stream: CUstream,
    ) -> Result<(), NcclError> {
        // A communicator must be driven by the library that created it.
        if !Arc::ptr_eq(&self.inner, &comm.lib)
            && self.inner.all_reduce as usize != comm.lib.all_reduce as usize
        {
            return Err(NcclError::Call {
                call: "ncclAllReduce",
                code: NCCL_INVALID_USAGE,
                message: format!(
                    "communicator was created by {}, not by {}",
                    comm.lib.path.display(),
                    self.inner.path.display()
                ),
            });
        }
        // SAFETY: `comm.raw` is a live communicator (owned by `comm`, which is not Sync, so
        // no other thread uses it now); buffers and stream are valid per the caller's contract.
        let code = unsafe {
            (self.inner.all_reduce)(
                sendbuff as usize as *const c_void,
                recvbuff as usize as *mut c_void,
                count,
                NCCL_FLOAT32,
                NCCL_SUM,
                comm.raw,
                stream,
            )
        };
        self.inner.check("ncclAllReduce", code, comm.raw)
    }
}

/// An NCCL communicator for one rank. Dropping it calls `ncclCommDestroy` (errors ignored).
///
/// `Send` (create it on a rank thread, drop it wherever) but not `Sync`: NCCL forbids
/// concurrent calls on one communicator. Synchronize the streams it used before dropping.
pub struct Comm {
    raw: RawComm,
    lib: Arc<Inner>,
}

// SAFETY: an ncclComm_t may be used from any thread, one thread at a time; `Comm` is not
// `Sync`, so a `&Comm` (the only way to use it) never reaches two threads at once.
unsafe impl Send for Comm {}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("raw", &self.raw)
            .field("library", &self.lib.path)
            .finish()
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        if !raw.is_null() {
            // SAFETY: `raw` came from a successful ncclCommInitRank and is destroyed exactly
            // once; the library is kept loaded by `self.lib`. The result is deliberately ignored.
            let _ = unsafe { (self.lib.comm_destroy)(raw) };
        }
    }
}

/// `ncclGetVersion` code to `"major.minor.patch"`: `major*10000 + minor*100 + patch` since
/// NCCL 2.9, `major*1000 + minor*100 + patch` before (codes below 10000).
pub fn version_code_to_string(code: i32) -> String {
    if code <= 0 {
        return code.to_string();
    }
    let (major, minor, patch) = if code >= 10_000 {
        (code / 10_000, (code % 10_000) / 100, code % 100)
    } else {
        (code / 1_000, (code % 1_000) / 100, code % 100)
    };
    format!("{major}.{minor}.{patch}")
}

/// Copies one symbol out of `lib` as a plain value.
///
/// # Safety
/// `T` must be the exact (fn-pointer) type of the symbol's C declaration.
unsafe fn sym<T: Copy>(lib: &Library, path: &Path, name: &'static str) -> Result<T, NcclError> {
    // SAFETY: the type matches the symbol per this function's contract; the copied pointer is
    // only used while the library stays loaded (it is never closed).
    match unsafe { lib.get::<T>(name.as_bytes()) } {
        Ok(symbol) => Ok(*symbol),
        Err(_) => Err(NcclError::Symbol {
            path: path.display().to_string(),
            symbol: name,
        }),
    }
}

/// dlopen with `RTLD_NOW | RTLD_LOCAL`; a name without `/` goes through the linker's search.
fn open_library(target: &OsStr) -> Result<Library, String> {
    use libloading::os::unix::{Library as UnixLibrary, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading runs the library's initializers; NCCL's only set up internal state.
    unsafe { UnixLibrary::open(Some(target), RTLD_NOW | RTLD_LOCAL) }
        .map(Library::from)
        .map_err(|e| e.to_string())
}

/// One place [`Nccl::load`] looks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Candidate {
    /// A file (from `$NCCL_HOME`); a missing one is recorded in `tried`.
    File(PathBuf),
    /// A name for the dynamic linker's search path.
    Name(&'static str),
    /// A possible Python-wheel file; skipped silently when missing.
    Wheel(PathBuf),
}

impl Candidate {
    fn describe(&self) -> String {
        match self {
            Candidate::File(p) => p.display().to_string(),
            Candidate::Name(n) => format!("{n} (dynamic linker search path)"),
            Candidate::Wheel(p) => format!("{} (Python wheel)", p.display()),
        }
    }
}

/// Steps 2-4 of the search, in order (pure, apart from checking whether `$NCCL_HOME` is a file).
fn candidate_paths(nccl_home: Option<&OsStr>, wheel_site_dirs: &[PathBuf]) -> Vec<Candidate> {
    let mut out = Vec::new();
    if let Some(home) = nccl_home.filter(|h| !h.is_empty()) {
        let home = Path::new(home);
        if home.is_file() {
            out.push(Candidate::File(home.to_path_buf()));
        } else {
            out.extend(
                NCCL_HOME_LIBS
                    .iter()
                    .map(|rel| Candidate::File(home.join(rel))),
            );
        }
    }
    out.extend(SONAMES.iter().map(|name| Candidate::Name(name)));
    out.extend(
        wheel_site_dirs
            .iter()
            .map(|dir| Candidate::Wheel(dir.join(WHEEL_LIB))),
    );
    out
}

/// Tries `candidates` in order; the first that opens is used. `wheel_note` is added to
/// `tried` when no wheel candidate file existed.
fn load_candidates(
    candidates: &[Candidate],
    wheel_note: Option<String>,
) -> Result<Nccl, NcclError> {
    let mut tried = Vec::new();
    let mut wheel_seen = false;
    for candidate in candidates {
        let target: &OsStr = match candidate {
            Candidate::File(p) => {
                if let Err(e) = fs::metadata(p) {
                    tried.push(format!("{}: {e}", p.display()));
                    continue;
                }
                p.as_os_str()
            }
            Candidate::Wheel(p) => {
                if !p.is_file() {
                    continue;
                }
                wheel_seen = true;
                p.as_os_str()
            }
            Candidate::Name(name) => OsStr::new(name),
        };
        match open_library(target) {
            Ok(lib) => return Nccl::from_library(lib, Path::new(target)),
            Err(reason) => tried.push(format!("{}: {reason}", candidate.describe())),
        }
    }
    if !wheel_seen {
        tried.extend(wheel_note);
    }
    Err(NcclError::NotFound { tried })
}

/// The environment the search reads, captured once.
#[derive(Debug, Clone)]
struct SearchEnv {
    nccl_home: Option<OsString>,
    virtual_env: Option<OsString>,
    conda_prefix: Option<OsString>,
    home: Option<OsString>,
    /// Root of the fixed system locations (`usr/lib`, `opt`, ...): `/` except in tests.
    root: PathBuf,
    /// Whether to ask `python3` for its site dirs.
    query_python: bool,
}

impl SearchEnv {
    fn from_process() -> SearchEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        SearchEnv {
            nccl_home: var("NCCL_HOME"),
            virtual_env: var("VIRTUAL_ENV"),
            conda_prefix: var("CONDA_PREFIX"),
            home: var("HOME"),
            root: PathBuf::from("/"),
            query_python: true,
        }
    }

    /// `(lib dir, label)` pairs whose `python3*/{site,dist}-packages` are searched (without `/opt`).
    fn lib_dirs(&self) -> Vec<(PathBuf, String)> {
        let mut dirs = Vec::new();
        if let Some(v) = &self.virtual_env {
            dirs.push((Path::new(v).join("lib"), "$VIRTUAL_ENV/lib".to_string()));
        }
        if let Some(c) = &self.conda_prefix {
            dirs.push((Path::new(c).join("lib"), "$CONDA_PREFIX/lib".to_string()));
        }
        for rel in ["usr/lib", "usr/lib64", "usr/local/lib", "usr/local/lib64"] {
            let dir = self.root.join(rel);
            let label = dir.display().to_string();
            dirs.push((dir, label));
        }
        if let Some(h) = &self.home {
            dirs.push((Path::new(h).join(".local/lib"), "~/.local/lib".to_string()));
        }
        dirs
    }
}

/// Human-readable patterns of the wheel search, for the `tried` list.
fn wheel_patterns(env: &SearchEnv) -> Vec<String> {
    let mut out: Vec<String> = env
        .lib_dirs()
        .into_iter()
        .map(|(_, label)| format!("{label}/python3*/{{site,dist}}-packages"))
        .collect();
    out.push(format!(
        "{}/*/.venv/lib/python3*/{{site,dist}}-packages",
        env.root.join("opt").display()
    ));
    if env.query_python {
        out.push("python3 site.getsitepackages()/sys.path".to_string());
    }
    out
}

/// Existing site dirs that may hold a wheel's `nvidia/` tree, in search order, deduplicated.
fn wheel_site_dirs(env: &SearchEnv) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for (lib, _) in env.lib_dirs() {
        push_python_site_dirs(&lib, &mut dirs);
    }
    for opt_entry in sorted_entries(&env.root.join("opt")) {
        push_python_site_dirs(&opt_entry.join(".venv/lib"), &mut dirs);
    }
    if env.query_python {
        dirs.extend(python_reported_dirs());
    }
    let mut seen = HashSet::new();
    dirs.retain(|d| seen.insert(fs::canonicalize(d).unwrap_or_else(|_| d.clone())));
    dirs
}

/// Appends `lib_dir/python3*/{site,dist}-packages` that exist.
fn push_python_site_dirs(lib_dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in sorted_entries(lib_dir) {
        let is_python3 = entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("python3"));
        if !is_python3 {
            continue;
        }
        for sub in ["site-packages", "dist-packages"] {
            let dir = entry.join(sub);
            if dir.is_dir() {
                out.push(dir);
            }
        }
    }
}

/// Entries of `dir`, sorted; empty if it cannot be read.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    entries.sort();
    entries
}

/// Site dirs and `sys.path` of the `python3` on `PATH`; empty on any failure or after
/// [`PYTHON_TIMEOUT`].
fn python_reported_dirs() -> Vec<PathBuf> {
    const SCRIPT: &str = "import site,sys; print('\\n'.join(\
        list(getattr(site,'getsitepackages',lambda:[])())\
        +[getattr(site,'getusersitepackages',lambda:'')()]+sys.path))";
    let spawned = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = spawned else {
        return Vec::new();
    };
    let Some(mut stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Vec::new();
    };
    let reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + PYTHON_TIMEOUT;
    let succeeded = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    if !succeeded {
        // The reader thread is left to finish on its own (it ends when the pipe closes).
        return Vec::new();
    }
    let text = reader.join().unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('/'))
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
}

/// The file mapped at `addr` in this process, from `/proc/self/maps`.
fn mapped_file_containing(addr: usize) -> Option<PathBuf> {
    let maps = fs::read_to_string("/proc/self/maps").ok()?;
    path_in_maps(&maps, addr)
}

/// Parses `/proc/<pid>/maps` text: the path of the mapping containing `addr`, if it is a file.
fn path_in_maps(maps: &str, addr: usize) -> Option<PathBuf> {
    for line in maps.lines() {
        // Fields: address perms offset dev inode [path]; the path may contain spaces.
        let mut rest = line;
        let mut range = "";
        for i in 0..5 {
            rest = rest.trim_start();
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if i == 0 {
                range = &rest[..end];
            }
            rest = &rest[end..];
        }
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if lo <= addr && addr < hi {
            let path = rest.trim();
            let path = path.strip_suffix(" (deleted)").unwrap_or(path);
            return path.starts_with('/').then(|| PathBuf::from(path));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A scratch directory removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!(
                "ringreduce-nccl-test-{}-{tag}-{n}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        /// Creates `rel` (and its parents) holding bytes that are not a shared library.
        fn fake_file(&self, rel: &str) -> PathBuf {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, b"this is not an ELF shared object\n").unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn hermetic_env(root: &Path) -> SearchEnv {
        SearchEnv {
            nccl_home: None,
            virtual_env: None,
            conda_prefix: None,
            home: None,
            root: root.to_path_buf(),
            query_python: false,
        }
    }

    #[test]
    fn auto_traits() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Nccl>();
        send_sync::<UniqueId>();
        send_sync::<NcclError>();
        send::<Comm>();
        assert_eq!(std::mem::size_of::<UniqueId>(), 128);
        assert_eq!(std::mem::align_of::<UniqueId>(), 1);
    }

    #[test]
    fn load_none_lists_every_place_tried() {
        match Nccl::load(None) {
            Ok(nccl) => eprintln!(
                "NCCL present at {}; search test skipped",
                nccl.path().display()
            ),
            Err(NcclError::NotFound { tried }) => {
                assert!(
                    tried.iter().any(|t| t.starts_with("libnccl.so.2 ")),
                    "{tried:?}"
                );
                assert!(
                    tried.iter().any(|t| t.starts_with("libnccl.so ")),
                    "{tried:?}"
                );
                assert!(
                    tried
                        .iter()
                        .any(|t| t.contains("nvidia/nccl/lib/libnccl.so.2")
                            && t.contains("python3*/{site,dist}-packages")),
                    "{tried:?}"
                );
                if let Some(home) = std::env::var_os("NCCL_HOME").filter(|h| !h.is_empty()) {
                    let home = Path::new(&home);
                    if !home.is_file() {
                        let want = home.join("lib/libnccl.so.2").display().to_string();
                        assert!(tried.iter().any(|t| t.starts_with(&want)), "{tried:?}");
                    }
                }
                let shown = NcclError::NotFound { tried }.to_string();
                assert!(
                    shown.starts_with("NCCL library not found (tried: "),
                    "{shown}"
                );
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }

    #[test]
    fn override_path_does_not_fall_back() {
        let path = Path::new("/nonexistent/libnccl.so.2");
        match Nccl::load(Some(path)) {
            Err(NcclError::Load { path: p, reason }) => {
                assert_eq!(p, "/nonexistent/libnccl.so.2");
                assert!(!reason.is_empty());
            }
            other => panic!("expected Load error, got {other:?}"),
        }
    }

    #[test]
    fn override_path_that_is_not_a_library() {
        let tmp = TempDir::new("override");
        let fake = tmp.fake_file("libnccl.so.2");
        match Nccl::load(Some(&fake)) {
            Err(NcclError::Load { path, reason }) => {
                assert_eq!(path, fake.display().to_string());
                assert!(!reason.is_empty());
            }
            other => panic!("expected Load error, got {other:?}"),
        }
    }

    #[test]
    fn candidate_order_with_nccl_home_dir() {
        let tmp = TempDir::new("home-order");
        let site = PathBuf::from("/some/site-packages");
        let got = candidate_paths(Some(tmp.0.as_os_str()), std::slice::from_ref(&site));
        let want = vec![
            Candidate::File(tmp.0.join("lib/libnccl.so.2")),
            Candidate::File(tmp.0.join("lib/libnccl.so")),
            Candidate::File(tmp.0.join("lib64/libnccl.so.2")),
            Candidate::File(tmp.0.join("lib64/libnccl.so")),
            Candidate::Name("libnccl.so.2"),
            Candidate::Name("libnccl.so"),
            Candidate::Wheel(site.join("nvidia/nccl/lib/libnccl.so.2")),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn candidate_order_without_or_with_file_nccl_home() {
        let names = vec![
            Candidate::Name("libnccl.so.2"),
            Candidate::Name("libnccl.so"),
        ];
        assert_eq!(candidate_paths(None, &[]), names);
        assert_eq!(candidate_paths(Some(OsStr::new("")), &[]), names);

        let tmp = TempDir::new("home-file");
        let file = tmp.fake_file("my-libnccl.so");
        let got = candidate_paths(Some(file.as_os_str()), &[]);
        assert_eq!(got[0], Candidate::File(file.clone()));
        assert_eq!(&got[1..], &names[..]);
    }

    #[test]
    fn fake_library_in_nccl_home_is_named_in_error() {
        let tmp = TempDir::new("home-fake");
        let fake = tmp.fake_file("lib/libnccl.so.2");
        let files: Vec<Candidate> = candidate_paths(Some(tmp.0.as_os_str()), &[])
            .into_iter()
            .filter(|c| matches!(c, Candidate::File(_)))
            .collect();
        assert_eq!(files.len(), 4);
        match load_candidates(&files, None) {
            Err(NcclError::NotFound { tried }) => {
                assert_eq!(tried.len(), 4, "{tried:?}");
                let prefix = format!("{}: ", fake.display());
                assert!(tried[0].starts_with(&prefix), "{tried:?}");
                assert!(!tried[0].contains("os error 2"), "{tried:?}");
                for t in &tried[1..] {
                    assert!(t.contains("os error 2"), "{tried:?}");
                }
                let shown = NcclError::NotFound { tried }.to_string();
                assert!(shown.contains(&fake.display().to_string()), "{shown}");
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn wheel_dirs_are_globbed_and_tried() {
        let tmp = TempDir::new("wheels");
        let root = tmp.0.join("root");
        let venv = tmp.0.join("venv");
        let home = tmp.0.join("home");
        let w_venv =
            tmp.fake_file("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
        let w_usr =
            tmp.fake_file("root/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2");
        let w_opt = tmp.fake_file(
            "root/opt/proj/.venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2",
        );
        fs::create_dir_all(home.join(".local/lib/python3.10/site-packages")).unwrap();
        fs::create_dir_all(root.join("usr/local/lib/python2.7/site-packages")).unwrap();

        let mut env = hermetic_env(&root);
        env.virtual_env = Some(venv.clone().into_os_string());
        env.home = Some(home.clone().into_os_string());
        let dirs = wheel_site_dirs(&env);
        assert_eq!(
            dirs,
            vec![
                venv.join("lib/python3.12/site-packages"),
                root.join("usr/lib/python3/dist-packages"),
                home.join(".local/lib/python3.10/site-packages"),
                root.join("opt/proj/.venv/lib/python3.11/site-packages"),
            ]
        );

        let wheels: Vec<Candidate> = candidate_paths(None, &dirs)
            .into_iter()
            .filter(|c| matches!(c, Candidate::Wheel(_)))
            .collect();
        match load_candidates(&wheels, Some("NOTE".to_string())) {
            Err(NcclError::NotFound { tried }) => {
                // The home site dir has no wheel: skipped silently; the note is not added.
                assert_eq!(tried.len(), 3, "{tried:?}");
                for (t, w) in tried.iter().zip([&w_venv, &w_usr, &w_opt]) {
                    assert!(t.starts_with(&w.display().to_string()), "{tried:?}");
                }
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn no_wheel_adds_the_note_with_patterns() {
        let tmp = TempDir::new("nowheel");
        let env = hermetic_env(&tmp.0);
        let dirs = wheel_site_dirs(&env);
        assert!(dirs.is_empty());
        let patterns = wheel_patterns(&env);
        assert!(patterns.iter().any(|p| p.contains("usr/lib/python3*")));
        assert!(patterns
            .iter()
            .any(|p| p.contains("opt/*/.venv/lib/python3*")));
        match load_candidates(&candidate_paths(None, &dirs)[2..], Some("NOTE".into())) {
            Err(NcclError::NotFound { tried }) => assert_eq!(tried, vec!["NOTE".to_string()]),
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn version_codes() {
        assert_eq!(version_code_to_string(22803), "2.28.3");
        assert_eq!(version_code_to_string(2708), "2.7.8");
        assert_eq!(version_code_to_string(20900), "2.9.0");
        assert_eq!(version_code_to_string(21805), "2.18.5");
        assert_eq!(version_code_to_string(2000), "2.0.0");
        assert_eq!(version_code_to_string(0), "0");
    }

    #[test]
    fn maps_parsing() {
        let maps = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 123 /usr/bin/cat
7f0000000000-7f0000100000 r-xp 00010000 fd:01 456 /opt/my dir/libnccl.so.2.28.3
7f0000100000-7f0000200000 r-xp 00000000 00:00 0 
7f0000200000-7f0000300000 r-xp 00000000 fd:01 789 /tmp/libx.so (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";
        assert_eq!(
            path_in_maps(maps, 0x7f00_0000_1234),
            Some(PathBuf::from("/opt/my dir/libnccl.so.2.28.3"))
        );
        assert_eq!(path_in_maps(maps, 0x7f00_0010_0000), None);
        assert_eq!(
            path_in_maps(maps, 0x7f00_0020_0000),
            Some(PathBuf::from("/tmp/libx.so"))
        );
        assert_eq!(path_in_maps(maps, 0x7ffd_0000_0010), None);
        assert_eq!(path_in_maps(maps, 0x10), None);
        // This very function's code is mapped from the test binary.
        assert!(mapped_file_containing(maps_parsing as *const () as usize).is_some());
    }

    #[test]
    fn call_error_display() {
        let e = NcclError::Call {
            call: "ncclAllReduce",
            code: 5,
            message: "invalid usage".into(),
        };
        assert_eq!(e.to_string(), "ncclAllReduce failed: 5 (invalid usage)");
        let e = NcclError::Symbol {
            path: "/x/libnccl.so.2".into(),
            symbol: "ncclAllReduce",
        };
        assert_eq!(
            e.to_string(),
            "NCCL library /x/libnccl.so.2 lacks symbol ncclAllReduce"
        );
    }
}
