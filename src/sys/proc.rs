//! Processes and signals: what the launcher needs to stop its ranks (one
//! process group, `SIGTERM` then `SIGKILL`), to never leave orphans (a rank
//! dies with its launcher), and to forward Ctrl-C; and what fault tests need
//! (a rank that kills itself with `SIGKILL`).

// The launcher's parts (signals, process groups, Ctrl-C) are public
// through `process::os` for a launcher of rank processes (`ringreduce
// launch` is one); `uid` and `kill_self` are the library's own.
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals this crate sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// `SIGHUP`.
    Hup,
    /// `SIGINT`.
    Int,
    /// `SIGTERM`.
    Term,
    /// `SIGKILL`.
    Kill,
}

impl Sig {
    fn raw(self) -> libc::c_int {
        match self {
            Sig::Hup => libc::SIGHUP,
            Sig::Int => libc::SIGINT,
            Sig::Term => libc::SIGTERM,
            Sig::Kill => libc::SIGKILL,
        }
    }

    /// The signal numbered `n`, if it is one this crate sends.
    pub fn from_raw(n: i32) -> Option<Sig> {
        [Sig::Hup, Sig::Int, Sig::Term, Sig::Kill]
            .into_iter()
            .find(|s| s.raw() == n)
    }

    /// Its number.
    #[cfg(test)]
    pub fn number(self) -> i32 {
        self.raw()
    }
}

/// The usual name of signal number `n` (`SIGKILL`), or `signal n`.
pub fn signal_name(n: i32) -> String {
    let name = match n {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {n}"),
    };
    name.to_string()
}

fn pid_t(pid: u32) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad pid {pid}"),
        )),
    }
}

/// Send `sig` to process `pid` (never to a group: pid 0 is refused).
#[cfg(test)]
pub fn signal(pid: u32, sig: Sig) -> io::Result<()> {
    let p = pid_t(pid)?;
    // SAFETY: kill(2) with a positive pid addresses exactly that process; it
    // touches no memory of ours.
    if unsafe { libc::kill(p, sig.raw()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Send `sig` to every process of process group `pgid`.
pub fn signal_group(pgid: u32, sig: Sig) -> io::Result<()> {
    let p = pid_t(pgid)?;
    // SAFETY: kill(2) with a negative pid addresses the process group `p`
    // (checked positive above, so never -1, "every process"); it touches no
    // memory of ours.
    if unsafe { libc::kill(-p, sig.raw()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// End this process at once with `SIGKILL`, as an external `kill -9` would
/// (a fault-injection hook: no destructor, no flush, no exit code).
pub(crate) fn kill_self() -> ! {
    // SAFETY: kill(2) of our own pid; SIGKILL cannot be caught, so the call
    // does not return when it succeeds.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort()
}

/// Whether this process was started with its standard output closed
/// (`>&-`). Rust's runtime then opens `/dev/null` read-write in its place
/// before `main`, so every line written to it vanishes without an error;
/// a shell's `>/dev/null` opens it write-only, which this tells apart.
pub fn stdout_was_closed() -> bool {
    // SAFETY: fcntl(2) with F_GETFL only reads the flags of descriptor 1,
    // and fstat(2) fills the `stat` we own; both fail cleanly (-1) on a
    // descriptor that is not open.
    unsafe {
        let flags = libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFL);
        if flags == -1 {
            return true;
        }
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(libc::STDOUT_FILENO, &mut st) != 0 {
            return true;
        }
        let dev_null = (st.st_mode & libc::S_IFMT) == libc::S_IFCHR
            && libc::major(st.st_rdev) == 1
            && libc::minor(st.st_rdev) == 3;
        dev_null && (flags & libc::O_ACCMODE) == libc::O_RDWR
    }
}

/// The real user id of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid(2) has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Make the child that `cmd` spawns receive `SIGKILL` when this process
/// (the thread that spawns it) dies, however it dies, so a killed launcher
/// never leaves rank processes behind. If this process is already gone when
/// the child starts, the child does not start.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: prctl(2) and getppid(2) are,
    // and it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(io::Error::other(
                    "the launcher exited before the rank started",
                ));
            }
            Ok(())
        });
    }
}

static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: one lock-free atomic store.
    CAUGHT.store(sig, Ordering::SeqCst);
}

/// From now on, `SIGINT`, `SIGTERM` and `SIGHUP` do not end this process:
/// they are recorded, for [`caught`] to report (the launcher forwards them
/// to its ranks and then ends itself).
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only does an
        // atomic store, which is async-signal-safe; installing it replaces
        // the default disposition of these three signals only.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The last signal [`catch_interrupts`] recorded, if any.
pub fn caught() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// End this process now with `code`, after flushing standard output and
/// error, without running the C library's exit handlers: the CUDA driver's
/// handler waits for any thread inside a driver call, and a rank thread
/// stuck there (behind GPU work a dead peer never releases) would hold the
/// process forever. Rust destructors of other threads do not run either;
/// the caller has already reported everything.
pub fn exit_now(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` takes any status and never returns; it skips atexit
    // handlers and stdio buffers (Rust's were flushed above), which is the
    // point.
    unsafe { libc::_exit(libc::c_int::from(code)) }
}

/// A vector of `count` default elements, or [`Error::OutOfMemory`](crate::error::Error::OutOfMemory) when
/// the memory cannot be had (never an abort of the process). More than
/// the machine holds (MemTotal and SwapTotal) is refused before it is
/// asked for: where the kernel overcommits (`vm.overcommit_memory=1`),
/// the reservation would succeed and the process be killed as it fills
/// the pages.
pub fn zeroed<T: Default + Clone>(count: usize, what: &str) -> crate::error::Result<Vec<T>> {
    let need = (count as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    fits(need, what)?;
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(count)
        .map_err(|_| oom(need, what, host_memory().map_or(0, |m| m.0), true))?;
    v.resize(count, T::default());
    Ok(v)
}

/// [`Error::OutOfMemory`](crate::error::Error::OutOfMemory) if `need`
/// bytes for `what` are more than the machine holds (MemTotal and
/// SwapTotal): memory that is sized first and filled later (a vector, a
/// shared segment) cannot fail at the filling, where an overcommitting
/// kernel kills the process instead.
pub(crate) fn fits(need: u64, what: &str) -> crate::error::Result<()> {
    match memory_ceiling() {
        Some(ceiling) if need > ceiling => Err(oom(need, what, ceiling, false)),
        _ => Ok(()),
    }
}

fn oom(need: u64, what: &str, available: u64, is_free: bool) -> crate::error::Error {
    crate::error::Error::OutOfMemory {
        what: what.to_string(),
        memory: "host memory".into(),
        need,
        available,
        is_free,
        hint: "use a smaller size or fewer ranks".into(),
    }
}

/// What the machine can ever hold: MemTotal plus SwapTotal, read once per
/// process (vectors are made on per-call paths, such as a GPU buffer's
/// copy to the host, where a read of /proc/meminfo each time would cost).
fn memory_ceiling() -> Option<u64> {
    static CEILING: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *CEILING.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        Some(
            meminfo_field(&text, "MemTotal:")?
                .saturating_add(meminfo_field(&text, "SwapTotal:").unwrap_or(0)),
        )
    })
}

/// A field of /proc/meminfo, in bytes.
fn meminfo_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kib| kib * 1024)
}

/// Host memory from /proc/meminfo: (available, total) bytes.
pub fn host_memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some((
        meminfo_field(&text, "MemAvailable:")?,
        meminfo_field(&text, "MemTotal:")?,
    ))
}

#[cfg(test)]
mod tests;
