//! The loaded library: resolved symbols, [`Nccl`], [`Comm`], [`UniqueId`] and [`NcclError`].
//!
//! Every symbol is resolved once, when the library is loaded, into a plain function pointer
//! kept next to the library handle in one reference-counted block. The handle is never
//! closed (NCCL starts background threads that must not outlive its code), so neither a
//! [`Comm`] nor a cloned [`Nccl`] can ever call into unmapped code.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::Arc;

use libloading::Library;

use super::discover;
pub use super::error::NcclError;
use super::types::{datatype, redop, CollArgs, Collective, ResultCode, Version};

/// A CUDA stream handle, as cudarc's driver API spells it (`cudaStream_t` is the same pointer).
pub type CUstream = cudarc::driver::sys::CUstream;

/// `NCCL_UNIQUE_ID_BYTES`.
pub const UNIQUE_ID_BYTES: usize = 128;
/// `ncclSuccess`.
const NCCL_SUCCESS: c_int = 0;

/// `ncclComm_t`.
type RawComm = *mut c_void;
type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetUniqueIdFn = unsafe extern "C" fn(*mut UniqueId) -> c_int;
type CommInitRankFn = unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> c_int;
type CommFn = unsafe extern "C" fn(RawComm) -> c_int;
type CommGetAsyncErrorFn = unsafe extern "C" fn(RawComm, *mut c_int) -> c_int;
type GroupFn = unsafe extern "C" fn() -> c_int;
/// `ncclAllReduce` and `ncclReduceScatter`: (send, recv, count, datatype, op, comm, stream).
type ReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    CUstream,
) -> c_int;
/// `ncclAllGather`: (send, recv, sendcount, datatype, comm, stream).
type AllGatherFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, CUstream) -> c_int;
type GetErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type GetLastErrorFn = unsafe extern "C" fn(RawComm) -> *const c_char;
/// `ncclCommRegister`: (comm, buff, size, handle out).
type CommRegisterFn = unsafe extern "C" fn(RawComm, *mut c_void, usize, *mut *mut c_void) -> c_int;
/// `ncclCommDeregister` and `ncclCommWindowDeregister`: (comm, handle or window).
type CommDeregisterFn = unsafe extern "C" fn(RawComm, *mut c_void) -> c_int;
/// `ncclCommWindowRegister`: (comm, buff, size, window out, winFlags).
type WindowRegisterFn =
    unsafe extern "C" fn(RawComm, *mut c_void, usize, *mut *mut c_void, c_int) -> c_int;
/// `ncclMemAlloc`: (pointer out, size).
type MemAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
/// `ncclMemFree`: (pointer).
type MemFreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `NCCL_WIN_COLL_SYMMETRIC`: the window is the same on every rank, so
/// NCCL's symmetric kernels may run on it.
const NCCL_WIN_COLL_SYMMETRIC: c_int = 0x01;

/// `ncclUniqueId`: 128 opaque bytes from [`Nccl::unique_id`], shared by every rank of one
/// communicator. [`UniqueId::as_bytes`] / [`UniqueId::from_bytes`] carry it between processes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct UniqueId {
    internal: [u8; UNIQUE_ID_BYTES],
}

impl UniqueId {
    /// The id's bytes, as NCCL wrote them.
    pub fn as_bytes(&self) -> &[u8; UNIQUE_ID_BYTES] {
        &self.internal
    }

    /// An id from bytes made by [`UniqueId::as_bytes`] (in this or another process); exactly
    /// [`UNIQUE_ID_BYTES`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId, NcclError> {
        let internal =
            <[u8; UNIQUE_ID_BYTES]>::try_from(bytes).map_err(|_| NcclError::Invalid {
                call: "UniqueId::from_bytes",
                reason: format!(
                    "an ncclUniqueId is {UNIQUE_ID_BYTES} bytes, got {}",
                    bytes.len()
                ),
            })?;
        Ok(UniqueId { internal })
    }
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

/// Entry points every supported NCCL exports (loading fails without them).
struct Required {
    get_version: GetVersionFn,
    get_unique_id: GetUniqueIdFn,
    comm_init_rank: CommInitRankFn,
    comm_destroy: CommFn,
    group_start: GroupFn,
    group_end: GroupFn,
    all_reduce: ReduceFn,
    get_error_string: GetErrorStringFn,
}

/// Entry points an older NCCL may lack; using one that is absent is
/// [`NcclError::Unavailable`].
struct Optional {
    comm_abort: Option<CommFn>,
    comm_get_async_error: Option<CommGetAsyncErrorFn>,
    reduce_scatter: Option<ReduceFn>,
    all_gather: Option<AllGatherFn>,
    /// NCCL >= 2.13; without it errors carry no last-error text.
    get_last_error: Option<GetLastErrorFn>,
    /// NCCL >= 2.19: buffer registration.
    comm_register: Option<CommRegisterFn>,
    comm_deregister: Option<CommDeregisterFn>,
    /// NCCL >= 2.27: windows (symmetric memory) and NCCL's own allocator.
    window_register: Option<WindowRegisterFn>,
    window_deregister: Option<CommDeregisterFn>,
    mem_alloc: Option<MemAllocFn>,
    mem_free: Option<MemFreeFn>,
}

/// The loaded library and its resolved entry points.
pub(super) struct Inner {
    path: PathBuf,
    version_code: i32,
    version: Version,
    req: Required,
    opt: Optional,
    /// Never closed: NCCL leaves threads (bootstrap root, proxies) that may still run its code.
    _lib: ManuallyDrop<Library>,
}

impl Inner {
    fn path_string(&self) -> String {
        self.path.display().to_string()
    }

    /// An optional entry point, or the "not available in NCCL x.y.z" error.
    fn optional<T: Copy>(&self, f: Option<T>, call: &'static str) -> Result<T, NcclError> {
        f.ok_or_else(|| NcclError::Unavailable {
            call,
            version: self.version,
            path: self.path_string(),
        })
    }

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
        let message = unsafe { c_str_lossy((self.req.get_error_string)(code)) }
            .unwrap_or_else(|| "unknown NCCL error".to_string());
        let last_error = self.opt.get_last_error.and_then(|get_last_error| {
            // SAFETY: ncclGetLastError accepts a null or live communicator and returns null
            // or a NUL-terminated buffer owned by NCCL, valid until the next NCCL call.
            let last = unsafe { c_str_lossy(get_last_error(comm)) }?;
            let last = last.trim();
            (!last.is_empty()).then(|| last.to_string())
        });
        NcclError::Call {
            call,
            code: ResultCode::from_raw(code),
            message,
            last_error,
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

/// Copies one symbol out of `lib` as a plain value; a missing one is [`NcclError::Symbol`].
///
/// # Safety
/// `T` must be the exact (fn-pointer) type of the symbol's C declaration, and the value must
/// only be used while `lib` stays loaded.
unsafe fn sym<T: Copy>(lib: &Library, path: &Path, name: &'static str) -> Result<T, NcclError> {
    // SAFETY: the type matches the symbol per this function's contract.
    match unsafe { lib.get::<T>(name.as_bytes()) } {
        Ok(symbol) => Ok(*symbol),
        Err(_) => Err(NcclError::Symbol {
            path: path.display().to_string(),
            symbol: name,
        }),
    }
}

/// [`sym`] for an entry point older releases may lack: `None` when absent.
///
/// # Safety
/// As for [`sym`].
unsafe fn optional_sym<T: Copy>(lib: &Library, path: &Path, name: &'static str) -> Option<T> {
    // SAFETY: forwarded contract.
    unsafe { sym(lib, path, name) }.ok()
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
            .field("version", &self.inner.version)
            .finish_non_exhaustive()
    }
}

impl Nccl {
    /// Finds and loads NCCL, resolving every symbol this binding uses.
    ///
    /// Search order: 1) `override_path` if `Some` (on failure: [`NcclError::Load`], no
    /// fallback); 2) `$NCCL_HOME`: `lib/libnccl.so.2`, `lib/libnccl.so`, `lib64/libnccl.so.2`,
    /// `lib64/libnccl.so`, and `$NCCL_HOME` itself if it is a file; 3) the dynamic linker's
    /// search path: `libnccl.so.2`, then `libnccl.so`; 4) `nvidia/nccl/lib/libnccl.so.2` of
    /// installed Python wheels (`nvidia-nccl-cu12`/`-cu13`: site/dist-packages of
    /// `$VIRTUAL_ENV`, `$CONDA_PREFIX`, `/usr/lib/python3*`, `/usr/local/lib/python3*`,
    /// `~/.local/lib/python3*`, `/opt/*/.venv/lib/python3*`, and the site dirs / `sys.path`
    /// reported by `python3`, asked with a time limit). When nothing loads,
    /// [`NcclError::NotFound`] lists every candidate tried. The first candidate that loads
    /// wins; if it lacks a required symbol that is an error ([`NcclError::Symbol`]), not a
    /// reason to go on searching.
    pub fn load(override_path: Option<&Path>) -> Result<Nccl, NcclError> {
        let found = discover::find(override_path)?;
        Nccl::from_library(found.lib, &found.path)
    }

    /// Resolves the symbols of an opened library and reads its version.
    pub(super) fn from_library(lib: Library, path: &Path) -> Result<Nccl, NcclError> {
        // SAFETY: for every `sym`/`optional_sym` call, each type is the fn-pointer type of the
        // symbol's declaration in nccl.h (ncclResult_t, ncclDataType_t and ncclRedOp_t are C
        // ints, ncclComm_t, ncclWindow_t, cudaStream_t and registration handles are pointers,
        // ncclUniqueId is 128 bytes passed by value, size_t is usize), and `lib` is never
        // closed (it moves into `Inner._lib`).
        let req = unsafe {
            Required {
                get_version: sym(&lib, path, "ncclGetVersion")?,
                get_unique_id: sym(&lib, path, "ncclGetUniqueId")?,
                comm_init_rank: sym(&lib, path, "ncclCommInitRank")?,
                comm_destroy: sym(&lib, path, "ncclCommDestroy")?,
                group_start: sym(&lib, path, "ncclGroupStart")?,
                group_end: sym(&lib, path, "ncclGroupEnd")?,
                all_reduce: sym(&lib, path, "ncclAllReduce")?,
                get_error_string: sym(&lib, path, "ncclGetErrorString")?,
            }
        };
        // SAFETY: as above.
        let opt = unsafe {
            Optional {
                comm_abort: optional_sym(&lib, path, "ncclCommAbort"),
                comm_get_async_error: optional_sym(&lib, path, "ncclCommGetAsyncError"),
                reduce_scatter: optional_sym(&lib, path, "ncclReduceScatter"),
                all_gather: optional_sym(&lib, path, "ncclAllGather"),
                get_last_error: optional_sym(&lib, path, "ncclGetLastError"),
                comm_register: optional_sym(&lib, path, "ncclCommRegister"),
                comm_deregister: optional_sym(&lib, path, "ncclCommDeregister"),
                window_register: optional_sym(&lib, path, "ncclCommWindowRegister"),
                window_deregister: optional_sym(&lib, path, "ncclCommWindowDeregister"),
                mem_alloc: optional_sym(&lib, path, "ncclMemAlloc"),
                mem_free: optional_sym(&lib, path, "ncclMemFree"),
            }
        };
        // A bare name was found by the dynamic linker: report the file actually mapped.
        let path = discover::resolved_path(path, req.get_version as usize);

        let mut code: c_int = 0;
        // SAFETY: the out-pointer is valid for the duration of the call.
        let rc = unsafe { (req.get_version)(&mut code) };
        let inner = Inner {
            path,
            version_code: code,
            version: Version::from_code(code).unwrap_or(Version::new(0, 0, 0)),
            req,
            opt,
            _lib: ManuallyDrop::new(lib),
        };
        inner.check("ncclGetVersion", rc, ptr::null_mut())?;
        Ok(Nccl {
            inner: Arc::new(inner),
        })
    }

    /// Where the library was loaded from (for a dynamic-linker hit, the resolved file when
    /// `/proc/self/maps` shows it, else the name that was opened).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The `ncclGetVersion` code, e.g. `22803` for 2.28.3 (read once, at load; never fails).
    pub fn version(&self) -> Result<i32, NcclError> {
        Ok(self.inner.version_code)
    }

    /// The version as `"major.minor.patch"`, e.g. `"2.28.3"` (never fails).
    pub fn version_string(&self) -> Result<String, NcclError> {
        Ok(super::types::version_code_to_string(
            self.inner.version_code,
        ))
    }

    /// The decoded version (`0.0.0` if the library reported a code <= 0).
    pub fn version_info(&self) -> Version {
        self.inner.version
    }

    /// `ncclGetUniqueId`. Call once (on one thread or process) and hand copies to every rank.
    pub(crate) fn unique_id(&self) -> Result<UniqueId, NcclError> {
        let mut id = UniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: `id` is a valid, writable ncclUniqueId (128 bytes, repr(C)).
        let code = unsafe { (self.inner.req.get_unique_id)(&mut id) };
        self.inner
            .check("ncclGetUniqueId", code, ptr::null_mut())
            .map(|()| id)
    }

    /// `ncclCommInitRank`. Blocks until all ranks joined; call it from each rank's thread
    /// concurrently, with that rank's device context current (NCCL binds the communicator to
    /// the CUDA runtime's current device, which follows the thread's current driver context).
    pub(crate) fn comm_init_rank(
        &self,
        nranks: usize,
        id: &UniqueId,
        rank: usize,
    ) -> Result<Comm, NcclError> {
        let call = "ncclCommInitRank";
        let (n, r) = match (c_int::try_from(nranks), c_int::try_from(rank)) {
            (Ok(n), Ok(r)) if n >= 1 && r < n => (n, r),
            _ => {
                return Err(NcclError::Invalid {
                    call,
                    reason: format!(
                        "rank {rank} of {nranks} ranks (need 0 <= rank < nranks <= {})",
                        c_int::MAX
                    ),
                })
            }
        };
        let mut raw: RawComm = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the id is passed by value as NCCL expects.
        let code = unsafe { (self.inner.req.comm_init_rank)(&mut raw, n, *id, r) };
        // On failure NCCL frees the half-built communicator; `raw` is not touched.
        self.inner.check(call, code, ptr::null_mut())?;
        if raw.is_null() {
            return Err(NcclError::Call {
                call,
                code: ResultCode::InternalError,
                message: "returned ncclSuccess but no communicator".to_string(),
                last_error: None,
            });
        }
        Ok(Comm {
            raw,
            lib: Arc::clone(&self.inner),
            nranks,
            rank,
        })
    }

    /// `ncclGroupStart`. Group state is per thread: pair it with [`Nccl::group_end`] on the
    /// same thread.
    pub(crate) fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments; NCCL keeps the group state per thread.
        let code = unsafe { (self.inner.req.group_start)() };
        self.inner.check("ncclGroupStart", code, ptr::null_mut())
    }

    /// `ncclGroupEnd`: launches everything queued since the matching `group_start` on this
    /// thread; errors of the grouped calls surface here.
    pub(crate) fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments; NCCL keeps the group state per thread.
        let code = unsafe { (self.inner.req.group_end)() };
        self.inner.check("ncclGroupEnd", code, ptr::null_mut())
    }

    /// `ncclMemAlloc` (NCCL 2.27+): `bytes` of device memory on the calling thread's
    /// current CUDA device, from NCCL's allocator (CUDA's virtual memory management,
    /// mapped for every GPU that can reach this one), the memory a symmetric window
    /// ([`Registration::Symmetric`]) needs. Freed with `ncclMemFree` when the returned
    /// [`NcclMem`] is dropped. [`NcclError::Unavailable`] on an older NCCL;
    /// [`NcclError::Invalid`] for zero bytes.
    pub(crate) fn mem_alloc(&self, bytes: usize) -> Result<NcclMem, NcclError> {
        let call = "ncclMemAlloc";
        let alloc = self.inner.optional(self.inner.opt.mem_alloc, call)?;
        let free = self
            .inner
            .optional(self.inner.opt.mem_free, "ncclMemFree")?;
        if bytes == 0 {
            return Err(NcclError::Invalid {
                call,
                reason: "zero bytes".into(),
            });
        }
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: the out-pointer is valid for the call; NCCL allocates on the current
        // device and writes the address.
        let code = unsafe { alloc(&mut p, bytes) };
        self.inner.check(call, code, ptr::null_mut())?;
        if p.is_null() {
            return Err(NcclError::Invalid {
                call,
                reason: format!("NCCL returned no memory for {bytes} bytes"),
            });
        }
        Ok(NcclMem {
            ptr: p as usize as u64,
            bytes,
            free,
            _lib: self.inner.clone(),
        })
    }

    /// The checks shared by the collectives: `comm` was made by this library, and the
    /// arguments pass [`CollArgs::validate`] for this NCCL version.
    fn prepare(&self, args: CollArgs, comm: &Comm) -> Result<(), NcclError> {
        let call = args.kind.call();
        // A communicator must be driven by the library that created it (two loads of one
        // file share its code, so their entry points are equal).
        if !Arc::ptr_eq(&self.inner, &comm.lib)
            && self.inner.req.all_reduce as usize != comm.lib.req.all_reduce as usize
        {
            return Err(NcclError::Invalid {
                call,
                reason: format!(
                    "the communicator was created by {}, not by {}",
                    comm.lib.path.display(),
                    self.inner.path.display()
                ),
            });
        }
        args.validate(self.inner.version, &self.inner.path)
    }

    /// `ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream)`: every rank
    /// ends with the reduction (`op`, an `ncclRedOp_t`) of all ranks' `count` elements of
    /// `datatype` (an `ncclDataType_t`). Buffers are CUDA device pointers (u64, as cudarc's
    /// `CUdeviceptr`); in place is `sendbuff == recvbuff`. The call only enqueues work on
    /// `stream`: synchronize it before reading the result.
    ///
    /// Rejected before NCCL is called ([`NcclError::Invalid`] / [`NcclError::Unsupported`]):
    /// a datatype or op this NCCL does not know (fp8 needs 2.24, bf16 and avg 2.10), sizes
    /// beyond the address space, null non-empty buffers, partially overlapping buffers, and
    /// a `comm` made by another library.
    ///
    /// # Safety
    /// `sendbuff` and `recvbuff` must be valid device memory of at least `count` elements of
    /// `datatype` each on `comm`'s device, `stream` must be a live stream on that device (or
    /// null), and neither the buffers nor the stream may be freed before the enqueued
    /// operation completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn all_reduce(
        &self,
        sendbuff: u64,
        recvbuff: u64,
        count: usize,
        datatype: i32,
        op: i32,
        comm: &Comm,
        stream: CUstream,
    ) -> Result<(), NcclError> {
        let args = comm.args(Collective::AllReduce, sendbuff, recvbuff, count, datatype);
        // SAFETY: forwarded contract.
        unsafe { self.reduce(self.inner.req.all_reduce, args, op, comm, stream) }
    }

    /// The reductions' one path (`ncclAllReduce` and `ncclReduceScatter` share a
    /// signature): [`Nccl::enqueue`] of entry point `f` on `args` with `op`.
    ///
    /// # Safety
    /// As for the collective `args.kind` names ([`Nccl::all_reduce`],
    /// [`Nccl::reduce_scatter`]), with `args`' buffers and count.
    unsafe fn reduce(
        &self,
        f: ReduceFn,
        args: CollArgs,
        op: i32,
        comm: &Comm,
        stream: CUstream,
    ) -> Result<(), NcclError> {
        let (send, recv, count, datatype) = (args.send, args.recv, args.count, args.datatype);
        let args = CollArgs {
            op: Some(op),
            ..args
        };
        self.enqueue(args, comm, |raw| {
            // SAFETY: `raw` is a live communicator of this library (checked by `enqueue`),
            // owned by `comm`, which is not Sync, so no other thread uses it now; buffers
            // and stream are valid per the caller's contract; the argument values were
            // validated.
            unsafe {
                f(
                    device_ptr(send),
                    device_ptr(recv).cast_mut(),
                    count,
                    datatype,
                    op,
                    raw,
                    stream,
                )
            }
        })
    }

    /// What every collective does around its entry point: [`Nccl::prepare`]'s checks,
    /// then `launch` with the raw communicator (only when they pass), then NCCL's code
    /// as a typed error naming the call.
    fn enqueue(
        &self,
        args: CollArgs,
        comm: &Comm,
        launch: impl FnOnce(RawComm) -> c_int,
    ) -> Result<(), NcclError> {
        let call = args.kind.call();
        self.prepare(args, comm)?;
        let code = launch(comm.raw);
        self.inner.check(call, code, comm.raw)
    }

    /// `ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream)`: rank
    /// `r` receives block `r` (of `recvcount` elements) of the reduction of all ranks'
    /// `nranks * recvcount` send elements. In place is `recvbuff == sendbuff + rank *
    /// recvcount * size`. Checks as for [`Nccl::all_reduce`]; [`NcclError::Unavailable`] if
    /// this NCCL lacks the entry point.
    ///
    /// # Safety
    /// `sendbuff` must be valid device memory of at least `nranks * recvcount` elements and
    /// `recvbuff` of at least `recvcount` elements of `datatype` on `comm`'s device; `stream`
    /// as for [`Nccl::all_reduce`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reduce_scatter(
        &self,
        sendbuff: u64,
        recvbuff: u64,
        recvcount: usize,
        datatype: i32,
        op: i32,
        comm: &Comm,
        stream: CUstream,
    ) -> Result<(), NcclError> {
        let kind = Collective::ReduceScatter;
        let f = self
            .inner
            .optional(self.inner.opt.reduce_scatter, kind.call())?;
        let args = comm.args(kind, sendbuff, recvbuff, recvcount, datatype);
        // SAFETY: forwarded contract.
        unsafe { self.reduce(f, args, op, comm, stream) }
    }

    /// `ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream)`: every rank
    /// receives all ranks' `sendcount` elements, rank `r`'s at block `r`. In place is
    /// `sendbuff == recvbuff + rank * sendcount * size`. Checks as for [`Nccl::all_reduce`];
    /// [`NcclError::Unavailable`] if this NCCL lacks the entry point.
    ///
    /// # Safety
    /// `sendbuff` must be valid device memory of at least `sendcount` elements and `recvbuff`
    /// of at least `nranks * sendcount` elements of `datatype` on `comm`'s device; `stream`
    /// as for [`Nccl::all_reduce`].
    pub unsafe fn all_gather(
        &self,
        sendbuff: u64,
        recvbuff: u64,
        sendcount: usize,
        datatype: i32,
        comm: &Comm,
        stream: CUstream,
    ) -> Result<(), NcclError> {
        let kind = Collective::AllGather;
        let f = self
            .inner
            .optional(self.inner.opt.all_gather, kind.call())?;
        let args = comm.args(kind, sendbuff, recvbuff, sendcount, datatype);
        self.enqueue(args, comm, |raw| {
            // SAFETY: as in `all_reduce`; sizes per the caller's contract.
            unsafe {
                f(
                    device_ptr(sendbuff),
                    device_ptr(recvbuff).cast_mut(),
                    sendcount,
                    datatype,
                    raw,
                    stream,
                )
            }
        })
    }

    /// [`Nccl::all_reduce`] with `ncclFloat32` and `ncclSum`.
    ///
    /// # Safety
    /// As for [`Nccl::all_reduce`], with `count` f32 elements per buffer.
    pub unsafe fn all_reduce_f32_sum(
        &self,
        sendbuff: u64,
        recvbuff: u64,
        count: usize,
        comm: &Comm,
        stream: CUstream,
    ) -> Result<(), NcclError> {
        // SAFETY: forwarded contract.
        unsafe {
            self.all_reduce(
                sendbuff,
                recvbuff,
                count,
                datatype::FLOAT32,
                redop::SUM,
                comm,
                stream,
            )
        }
    }
}

/// Device memory from [`Nccl::mem_alloc`], freed with `ncclMemFree` on drop (the
/// result ignored). Whoever uses it on the GPU must drain that work before the drop
/// (a device buffer that owns it frees it with its context current).
pub struct NcclMem {
    ptr: u64,
    bytes: usize,
    free: MemFreeFn,
    /// Keeps the library (and so `free`) loaded.
    _lib: Arc<Inner>,
}

impl fmt::Debug for NcclMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NcclMem")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl NcclMem {
    /// The device address.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes asked for (NCCL may have rounded the allocation up).
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }
}

impl Drop for NcclMem {
    fn drop(&mut self) {
        // SAFETY: the address came from ncclMemAlloc and is freed once, here; the
        // library is kept loaded by `_lib`. The result is deliberately ignored.
        let _ = unsafe { (self.free)(device_ptr(self.ptr).cast_mut()) };
    }
}

/// How a buffer is made known to a communicator before its collectives use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Registration {
    /// `ncclCommRegister` (NCCL 2.19+), local to the rank: NCCL may then move
    /// data straight from and into the buffer instead of through its own.
    Buffer,
    /// `ncclCommWindowRegister` with `NCCL_WIN_COLL_SYMMETRIC` (NCCL 2.27+),
    /// collective: every rank registers its buffer, and NCCL's symmetric
    /// kernels may then run on it. The memory must come from
    /// [`Nccl::mem_alloc`].
    Symmetric,
}

impl Registration {
    /// The entry point that makes it.
    pub fn call(self) -> &'static str {
        match self {
            Registration::Buffer => "ncclCommRegister",
            Registration::Symmetric => "ncclCommWindowRegister",
        }
    }
}

/// A buffer registered with a communicator ([`Comm::register`]), undone by
/// [`Comm::deregister`] (or by the communicator's end).
#[derive(Debug)]
pub struct Registered {
    handle: *mut c_void,
    /// The communicator that made it (only that one undoes it).
    comm: RawComm,
    kind: Registration,
    ptr: u64,
    bytes: usize,
}

// SAFETY: an opaque token NCCL handed out; it is only passed back to NCCL, by
// the owner of the communicator, one thread at a time.
unsafe impl Send for Registered {}

impl Registered {
    /// How it was registered.
    pub fn kind(&self) -> Registration {
        self.kind
    }

    /// The registered range: device address and bytes.
    pub fn range(&self) -> (u64, usize) {
        (self.ptr, self.bytes)
    }
}

/// A device address as the pointer NCCL takes (device pointers are plain addresses).
fn device_ptr(p: u64) -> *const c_void {
    p as usize as *const c_void
}

/// An NCCL communicator for one rank. Dropping it calls `ncclCommDestroy` (errors ignored);
/// [`Comm::abort`] is the way out of a communicator stuck on a failed peer.
///
/// `Send` (create it on a rank thread, drop it wherever) but not `Sync`: NCCL forbids
/// concurrent calls on one communicator. Synchronize the streams it used before dropping.
/// Only the library that made it drives it: collectives called through another [`Nccl`]
/// (another library file) are rejected.
pub struct Comm {
    raw: RawComm,
    lib: Arc<Inner>,
    nranks: usize,
    rank: usize,
}

// SAFETY: an ncclComm_t may be used from any thread, one thread at a time; `Comm` is not
// `Sync` (it holds a raw pointer), so a `&Comm` (the only way to use it) never reaches two
// threads at once.
unsafe impl Send for Comm {}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("raw", &self.raw)
            .field("rank", &self.rank)
            .field("nranks", &self.nranks)
            .field("library", &self.lib.path)
            .finish()
    }
}

impl Comm {
    /// This communicator's rank, as given to [`Nccl::comm_init_rank`].
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks, as given to [`Nccl::comm_init_rank`].
    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// The library that made (and alone drives) this communicator.
    pub fn library_path(&self) -> &Path {
        &self.lib.path
    }

    /// Whether this NCCL has `ncclCommAbort` ([`Comm::abort`] can run).
    pub fn can_abort(&self) -> bool {
        self.lib.opt.comm_abort.is_some()
    }

    fn args(&self, kind: Collective, send: u64, recv: u64, count: usize, dt: i32) -> CollArgs {
        CollArgs {
            kind,
            send,
            recv,
            count,
            datatype: dt,
            op: None,
            nranks: self.nranks,
            rank: self.rank,
        }
    }

    /// `ncclCommGetAsyncError`: `Ok(None)` while the communicator is healthy,
    /// `Ok(Some(error))` once NCCL recorded an asynchronous failure (a peer died, a network
    /// error, ...; then [`Comm::abort`] it), `Err` if the query itself failed or this NCCL
    /// lacks it. Poll it instead of blocking in a stream synchronize when a peer may fail.
    pub fn async_error(&self) -> Result<Option<NcclError>, NcclError> {
        let call = "ncclCommGetAsyncError";
        let f = self.lib.optional(self.lib.opt.comm_get_async_error, call)?;
        let mut state: c_int = NCCL_SUCCESS;
        // SAFETY: `self.raw` is live (owned by `self`, not Sync); `state` is a valid out-pointer.
        let code = unsafe { f(self.raw, &mut state) };
        self.lib.check(call, code, self.raw)?;
        Ok((state != NCCL_SUCCESS).then(|| self.lib.call_error(call, state, self.raw)))
    }

    /// Registers `bytes` at device address `ptr` with this communicator
    /// ([`Registration`]). [`NcclError::Unavailable`] where this NCCL lacks the entry
    /// point; [`NcclError::Invalid`] for a null address or zero bytes.
    ///
    /// # Safety
    /// `ptr..ptr + bytes` must be device memory on this communicator's device that
    /// stays allocated until the registration is undone ([`Comm::deregister`]) or the
    /// communicator is destroyed. For [`Registration::Symmetric`] every rank of the
    /// communicator must make the same call, outside a group (it is collective and
    /// blocks until they all have), on memory from [`Nccl::mem_alloc`], and a buffer
    /// may be registered so only once.
    pub unsafe fn register(
        &self,
        kind: Registration,
        ptr: u64,
        bytes: usize,
    ) -> Result<Registered, NcclError> {
        let call = kind.call();
        if ptr == 0 || bytes == 0 {
            return Err(NcclError::Invalid {
                call,
                reason: format!("nothing to register (address {ptr:#x}, {bytes} bytes)"),
            });
        }
        let mut handle: *mut c_void = ptr::null_mut();
        let buff = device_ptr(ptr).cast_mut();
        let code = match kind {
            Registration::Buffer => {
                let f = self.lib.optional(self.lib.opt.comm_register, call)?;
                // SAFETY: `self.raw` is live (owned by `self`, not Sync); the range is
                // valid device memory per the caller's contract; `handle` is a valid
                // out-pointer.
                unsafe { f(self.raw, buff, bytes, &mut handle) }
            }
            Registration::Symmetric => {
                let f = self.lib.optional(self.lib.opt.window_register, call)?;
                // The deregistration must exist too, or the window could never go.
                self.lib
                    .optional(self.lib.opt.window_deregister, "ncclCommWindowDeregister")?;
                // SAFETY: as above; collective participation per the caller's contract.
                unsafe { f(self.raw, buff, bytes, &mut handle, NCCL_WIN_COLL_SYMMETRIC) }
            }
        };
        self.lib.check(call, code, self.raw)?;
        Ok(Registered {
            handle,
            comm: self.raw,
            kind,
            ptr,
            bytes,
        })
    }

    /// Undoes [`Comm::register`] (`ncclCommDeregister` or
    /// `ncclCommWindowDeregister`, both local to the rank).
    ///
    /// [`NcclError::Invalid`] for a registration of another communicator.
    ///
    /// # Safety
    /// No NCCL operation enqueued on the registered buffer may still be running
    /// (synchronize the streams of the calls that used it first).
    pub unsafe fn deregister(&self, reg: Registered) -> Result<(), NcclError> {
        if reg.comm != self.raw {
            return Err(NcclError::Invalid {
                call: "ncclCommDeregister",
                reason: "the buffer was registered with another communicator".into(),
            });
        }
        let (call, f) = match reg.kind {
            Registration::Buffer => ("ncclCommDeregister", self.lib.opt.comm_deregister),
            Registration::Symmetric => ("ncclCommWindowDeregister", self.lib.opt.window_deregister),
        };
        let f = self.lib.optional(f, call)?;
        // SAFETY: `self.raw` is live; `reg.handle` came from this communicator's
        // registration (checked above) and is passed back once (`reg` is consumed);
        // nothing uses the buffer through NCCL any more (the caller's contract).
        let code = unsafe { f(self.raw, reg.handle) };
        self.lib.check(call, code, self.raw)
    }

    /// `ncclCommAbort`: frees the communicator without waiting for its pending work, which
    /// unblocks a rank whose peers died (`ncclCommDestroy`, run on drop, would wait for it).
    /// Consumes the communicator in every case. If this NCCL lacks `ncclCommAbort`
    /// ([`NcclError::Unavailable`]; see [`Comm::can_abort`]) the communicator is leaked,
    /// not destroyed, since destroying a stuck communicator would block.
    pub fn abort(mut self) -> Result<(), NcclError> {
        let call = "ncclCommAbort";
        // From here on `self` no longer owns the communicator: dropping it destroys nothing.
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        let f = self.lib.optional(self.lib.opt.comm_abort, call)?;
        if raw.is_null() {
            return Ok(());
        }
        // SAFETY: `raw` came from a successful ncclCommInitRank and is released exactly once
        // (here, not by Drop); the library stays loaded through `self.lib`.
        let code = unsafe { f(raw) };
        self.lib.check(call, code, ptr::null_mut())
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        if !raw.is_null() {
            // SAFETY: `raw` came from a successful ncclCommInitRank and is destroyed exactly
            // once; the library is kept loaded by `self.lib`. The result is deliberately ignored.
            let _ = unsafe { (self.lib.req.comm_destroy)(raw) };
        }
    }
}

#[cfg(test)]
mod tests;
