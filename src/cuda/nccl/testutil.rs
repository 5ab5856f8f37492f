//! Test support: scratch directories and a fake `libnccl.so.2` built with the C compiler.
//!
//! The fake library exports NCCL's entry points with recording stubs (no GPU, no network)
//! plus `fake_*` hooks to steer and inspect them. Each test builds its own copy in its own
//! directory, so the copies' globals are independent.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use libloading::Library;

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
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
    pub fn fake_file(&self, rel: &str) -> PathBuf {
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

/// The fake NCCL. `FAKE_VERSION` sets the version code; `OLD` leaves out the entry points
/// older NCCLs lack; `NO_ALLREDUCE` leaves out a required one.
const FAKE_NCCL_C: &str = r#"
#include <stdlib.h>
#include <stddef.h>

typedef struct { unsigned char internal[128]; } ncclUniqueId;
typedef struct { int nranks, rank; } fakeComm;

static int g_next = 0, g_async = 0, g_destroyed = 0, g_aborted = 0, g_calls = 0;
static int g_init_nranks = -1, g_init_rank = -1;
static size_t g_last[8];

int ncclGetVersion(int *v) { *v = FAKE_VERSION; return 0; }
int ncclGetUniqueId(ncclUniqueId *id) {
    for (int i = 0; i < 128; i++) id->internal[i] = (unsigned char)(i * 7 + 3);
    return 0;
}
int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
    for (int i = 0; i < 128; i++)
        if (id.internal[i] != (unsigned char)(i * 7 + 3)) return 4;
    g_init_nranks = nranks; g_init_rank = rank;
    fakeComm *c = malloc(sizeof *c);
    if (!c) return 2;
    c->nranks = nranks; c->rank = rank; *comm = c;
    return 0;
}
int ncclCommDestroy(void *c) { g_destroyed++; free(c); return 0; }
const char *ncclGetErrorString(int code) {
    return code == 5 ? "invalid usage (run with NCCL_DEBUG=WARN for details)"
                     : "fake NCCL error";
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }

static int record(int kind, const void *s, void *r, size_t n, int dt, int op, void *comm, void *st) {
    g_calls++;
    g_last[0] = (size_t)kind; g_last[1] = (size_t)s; g_last[2] = (size_t)r; g_last[3] = n;
    g_last[4] = (size_t)dt; g_last[5] = (size_t)op; g_last[6] = (size_t)comm; g_last[7] = (size_t)st;
    int rc = g_next; g_next = 0; return rc;
}
#ifndef NO_ALLREDUCE
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, void *comm, void *st) {
    return record(1, s, r, n, dt, op, comm, st);
}
#endif
#ifndef OLD
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, void *comm, void *st) {
    return record(2, s, r, n, dt, op, comm, st);
}
int ncclAllGather(const void *s, void *r, size_t n, int dt, void *comm, void *st) {
    return record(3, s, r, n, dt, -1, comm, st);
}
int ncclCommAbort(void *c) { g_aborted++; free(c); return 0; }
int ncclCommGetAsyncError(void *c, int *state) { (void)c; *state = g_async; return 0; }
const char *ncclGetLastError(void *c) { (void)c; return " fake last error\n"; }
static int g_regs = 0, g_wins = 0, g_mems = 0, g_win_flags = -1;
int ncclCommRegister(void *c, void *b, size_t n, void **h) {
    (void)c; if (!b || !n) return 4; g_regs++; *h = (char *)b + 1; return 0;
}
int ncclCommDeregister(void *c, void *h) { (void)c; if (!h) return 4; g_regs--; return 0; }
int ncclCommWindowRegister(void *c, void *b, size_t n, void **w, int flags) {
    (void)c; if (!b || !n) return 4; g_wins++; g_win_flags = flags; *w = (char *)b + 2; return 0;
}
int ncclCommWindowDeregister(void *c, void *w) { (void)c; if (!w) return 4; g_wins--; return 0; }
int ncclMemAlloc(void **p, size_t n) { *p = malloc(n); if (!*p) return 2; g_mems++; return 0; }
int ncclMemFree(void *p) { free(p); g_mems--; return 0; }
void fake_reg_counts(int *out) { out[0] = g_regs; out[1] = g_wins; out[2] = g_mems; out[3] = g_win_flags; }
#endif

void fake_set_next(int rc) { g_next = rc; }
void fake_set_async(int rc) { g_async = rc; }
void fake_counts(int *out) {
    out[0] = g_calls; out[1] = g_destroyed; out[2] = g_aborted;
    out[3] = g_init_nranks; out[4] = g_init_rank;
}
void fake_last(size_t *out) { for (int i = 0; i < 8; i++) out[i] = g_last[i]; }
"#;

/// Builds the fake library at `out` with `cc -shared`; `Err(reason)` when there is no C
/// compiler (the caller skips). A compiler that fails on this source is a test bug: panic.
pub fn build_fake(out: &Path, version: i32, defines: &[&str]) -> Result<(), String> {
    let dir = out.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    let src = dir.join(format!(
        "fake-nccl-{}.c",
        out.file_name().unwrap().to_string_lossy()
    ));
    fs::write(&src, FAKE_NCCL_C).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&cc);
    cmd.args(["-shared", "-fPIC", "-std=c99", "-O1", "-o"])
        .arg(out)
        .arg(&src)
        .arg(format!("-DFAKE_VERSION={version}"));
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) => return Err(format!("no C compiler ({cc}: {e})")),
    };
    assert!(
        output.status.success(),
        "{cc} failed on the fake NCCL: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Builds a fake library in `tmp` at `rel`, or prints why the test is skipped.
pub fn fake_or_skip(tmp: &TempDir, rel: &str, version: i32, defines: &[&str]) -> Option<Fake> {
    let path = tmp.0.join(rel);
    match build_fake(&path, version, defines) {
        Ok(()) => Some(Fake::open(path)),
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// The `fake_*` hooks of one built fake library.
pub struct Fake {
    pub path: PathBuf,
    hooks: Library,
}

/// What `fake_counts` reports.
#[derive(Debug, PartialEq, Eq)]
pub struct Counts {
    pub calls: i32,
    pub destroyed: i32,
    pub aborted: i32,
    pub init_nranks: i32,
    pub init_rank: i32,
}

impl Fake {
    fn open(path: PathBuf) -> Fake {
        // SAFETY: the fake library's initializers do nothing. Opening the same path as the
        // code under test returns the same handle, so the hooks see the same globals.
        let hooks = unsafe { Library::new(&path) }.unwrap();
        Fake { path, hooks }
    }

    /// The result code the next collective returns.
    pub fn set_next(&self, rc: i32) {
        // SAFETY: `fake_set_next(int)` as defined in FAKE_NCCL_C.
        unsafe {
            let f = self
                .hooks
                .get::<unsafe extern "C" fn(i32)>(b"fake_set_next")
                .unwrap();
            f(rc)
        }
    }

    /// The state `ncclCommGetAsyncError` reports.
    pub fn set_async(&self, rc: i32) {
        // SAFETY: `fake_set_async(int)` as defined in FAKE_NCCL_C.
        unsafe {
            let f = self
                .hooks
                .get::<unsafe extern "C" fn(i32)>(b"fake_set_async")
                .unwrap();
            f(rc)
        }
    }

    pub fn counts(&self) -> Counts {
        let mut out = [0i32; 5];
        // SAFETY: `fake_counts(int *)` writes 5 ints.
        unsafe {
            let f = self
                .hooks
                .get::<unsafe extern "C" fn(*mut i32)>(b"fake_counts")
                .unwrap();
            f(out.as_mut_ptr())
        }
        Counts {
            calls: out[0],
            destroyed: out[1],
            aborted: out[2],
            init_nranks: out[3],
            init_rank: out[4],
        }
    }

    /// Live buffer registrations, live windows, live `ncclMemAlloc` allocations, and the
    /// last window's flags (-1 before any).
    pub fn reg_counts(&self) -> [i32; 4] {
        let mut out = [0i32; 4];
        // SAFETY: `fake_reg_counts(int *)` writes 4 ints.
        unsafe {
            let f = self
                .hooks
                .get::<unsafe extern "C" fn(*mut i32)>(b"fake_reg_counts")
                .unwrap();
            f(out.as_mut_ptr())
        }
        out
    }

    /// The last collective's (kind 1/2/3, send, recv, count, datatype, op, comm, stream);
    /// `op` is `usize::MAX` for all-gather.
    pub fn last(&self) -> [usize; 8] {
        let mut out = [0usize; 8];
        // SAFETY: `fake_last(size_t *)` writes 8 size_t.
        unsafe {
            let f = self
                .hooks
                .get::<unsafe extern "C" fn(*mut usize)>(b"fake_last")
                .unwrap();
            f(out.as_mut_ptr())
        }
        out
    }
}
