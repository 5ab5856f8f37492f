//! Finding and opening `libnccl.so.2`.
//!
//! Search order ([`find`]):
//! 1. the explicit path (`--nccl-lib`), if given: it is used or its failure is reported,
//!    with no fallback;
//! 2. `$NCCL_HOME`: `lib/libnccl.so.2`, `lib/libnccl.so`, `lib64/libnccl.so.2`,
//!    `lib64/libnccl.so`, or `$NCCL_HOME` itself if it is a file;
//! 3. the dynamic linker's search path (`LD_LIBRARY_PATH`, the ld.so cache, ...):
//!    `libnccl.so.2`, then `libnccl.so`;
//! 4. `nvidia/nccl/lib/libnccl.so.2` of an installed Python wheel (`nvidia-nccl-cu12` and
//!    `nvidia-nccl-cu13` both install it there), in the `python3*/{site,dist}-packages` of
//!    `$VIRTUAL_ENV/lib`, `$CONDA_PREFIX/lib`, `/usr/lib`, `/usr/lib64`, `/usr/local/lib`,
//!    `/usr/local/lib64`, `~/.local/lib` and `/opt/*/.venv/lib`, then the site dirs and
//!    `sys.path` that the `python3` on `PATH` reports (asked only when steps 2-3 failed, and
//!    given at most [`PYTHON_TIMEOUT`]).
//!
//! The first candidate that opens wins. A missing `$NCCL_HOME` file or one that does not
//! load is recorded and the search goes on; when nothing loads, [`NcclError::NotFound`]
//! lists every candidate tried with the reason it failed, and the wheel locations searched.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use libloading::Library;

use super::binding::NcclError;

/// Names tried through the dynamic linker's own search path, in order.
pub(super) const SONAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];
/// Candidates below `$NCCL_HOME`, in order.
const NCCL_HOME_LIBS: [&str; 4] = [
    "lib/libnccl.so.2",
    "lib/libnccl.so",
    "lib64/libnccl.so.2",
    "lib64/libnccl.so",
];
/// Where the `nvidia-nccl-cu12` / `nvidia-nccl-cu13` wheels put the library, below a site dir.
pub(super) const WHEEL_LIB: &str = "nvidia/nccl/lib/libnccl.so.2";
/// Upper bound on the `python3` site-dir query.
pub(super) const PYTHON_TIMEOUT: Duration = Duration::from_secs(10);

/// An opened library and the path or name it was opened by.
pub(super) struct Found {
    pub lib: Library,
    pub path: PathBuf,
}

/// Finds and opens NCCL: `override_path` alone if given, else the search of the module doc.
pub(super) fn find(override_path: Option<&Path>) -> Result<Found, NcclError> {
    match override_path {
        Some(path) => match open_library(path.as_os_str()) {
            Ok(lib) => Ok(Found {
                lib,
                path: path.to_path_buf(),
            }),
            Err(reason) => Err(NcclError::Load {
                path: path.display().to_string(),
                reason,
            }),
        },
        None => search(&SearchEnv::from_process()),
    }
}

/// Steps 2-4 of the search, reading the environment from `env`.
pub(super) fn search(env: &SearchEnv) -> Result<Found, NcclError> {
    let mut tried = Vec::new();
    let early = early_candidates(env.nccl_home.as_deref(), env.sonames);
    if let Some(found) = try_candidates(&early, &mut tried).0 {
        return Ok(found);
    }
    let site_dirs = wheel_site_dirs(env);
    let (found, wheels_seen) = try_candidates(&wheel_candidates(&site_dirs), &mut tried);
    if let Some(found) = found {
        return Ok(found);
    }
    if wheels_seen == 0 {
        tried.push(wheel_note(env, &site_dirs));
    }
    Err(NcclError::NotFound { tried })
}

/// dlopen with `RTLD_NOW | RTLD_LOCAL`; a name without `/` goes through the linker's search.
pub(super) fn open_library(target: &OsStr) -> Result<Library, String> {
    use libloading::os::unix::{Library as UnixLibrary, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading runs the library's initializers; NCCL's only set up internal state
    // (and a file that is not NCCL is rejected when its symbols are resolved).
    unsafe { UnixLibrary::open(Some(target), RTLD_NOW | RTLD_LOCAL) }
        .map(Library::from)
        .map_err(|e| e.to_string())
}

/// One place the search looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Candidate {
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

/// Steps 2-3, in order (pure, apart from checking whether `$NCCL_HOME` is a file).
pub(super) fn early_candidates(
    nccl_home: Option<&OsStr>,
    sonames: &[&'static str],
) -> Vec<Candidate> {
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
    out.extend(sonames.iter().map(|name| Candidate::Name(name)));
    out
}

/// Step 4: the wheel file in each site dir, in order.
pub(super) fn wheel_candidates(site_dirs: &[PathBuf]) -> Vec<Candidate> {
    site_dirs
        .iter()
        .map(|dir| Candidate::Wheel(dir.join(WHEEL_LIB)))
        .collect()
}

/// Tries `candidates` in order and returns the first that opens, and how many wheel files
/// existed; every failure is appended to `tried`.
pub(super) fn try_candidates(
    candidates: &[Candidate],
    tried: &mut Vec<String>,
) -> (Option<Found>, usize) {
    let mut wheels_seen = 0;
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
                wheels_seen += 1;
                p.as_os_str()
            }
            Candidate::Name(name) => OsStr::new(name),
        };
        match open_library(target) {
            Ok(lib) => {
                let path = PathBuf::from(target);
                return (Some(Found { lib, path }), wheels_seen);
            }
            Err(reason) => tried.push(format!("{}: {reason}", candidate.describe())),
        }
    }
    (None, wheels_seen)
}

/// The `tried` entry for step 4 when no wheel file existed: the site dirs looked in and the
/// patterns they came from.
fn wheel_note(env: &SearchEnv, site_dirs: &[PathBuf]) -> String {
    let dirs = if site_dirs.is_empty() {
        "no site dir exists".to_string()
    } else {
        let list: Vec<String> = site_dirs.iter().map(|d| d.display().to_string()).collect();
        format!("not in {}", list.join(", "))
    };
    format!(
        "{WHEEL_LIB} of a Python wheel (nvidia-nccl-cu12/cu13): {dirs} (site dirs from {})",
        wheel_patterns(env).join(", ")
    )
}

/// The environment the search reads, captured once.
#[derive(Debug, Clone)]
pub(super) struct SearchEnv {
    pub nccl_home: Option<OsString>,
    pub virtual_env: Option<OsString>,
    pub conda_prefix: Option<OsString>,
    pub home: Option<OsString>,
    /// Root of the fixed system locations (`usr/lib`, `opt`, ...): `/` except in tests.
    pub root: PathBuf,
    /// Names for the dynamic linker: [`SONAMES`] except in tests.
    pub sonames: &'static [&'static str],
    /// Whether to ask `python3` for its site dirs.
    pub query_python: bool,
}

impl SearchEnv {
    pub(super) fn from_process() -> SearchEnv {
        // Paths: any value is one (crate::param), empty is unset.
        let var = |p: &crate::param::Param<PathBuf>| p.raw();
        SearchEnv {
            nccl_home: var(&crate::param::NCCL_HOME),
            virtual_env: var(&crate::param::VIRTUAL_ENV),
            conda_prefix: var(&crate::param::CONDA_PREFIX),
            home: var(&crate::param::HOME),
            root: PathBuf::from("/"),
            sonames: &SONAMES,
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
pub(super) fn wheel_patterns(env: &SearchEnv) -> Vec<String> {
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
pub(super) fn wheel_site_dirs(env: &SearchEnv) -> Vec<PathBuf> {
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

/// For a library opened by a bare name, the file the dynamic linker actually mapped (the one
/// holding `addr`, an address inside it), when `/proc/self/maps` shows it; else `opened`.
pub(super) fn resolved_path(opened: &Path, addr: usize) -> PathBuf {
    if opened.to_string_lossy().contains('/') {
        return opened.to_path_buf();
    }
    mapped_file_containing(addr).unwrap_or_else(|| opened.to_path_buf())
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
mod tests;
