//! The bootstrap store: a directory only the user can enter (mode 0700),
//! holding small files written atomically (a temporary file, then a rename
//! or a hard link). No socket, no network listener.
//!
//! What it holds:
//!
//! * `run-id`: the run's identity (`run <id>`, `size <n>`, `creator <pid>
//!   <start>`), written first by whoever creates the store: the launcher,
//!   or rank 0 under `mpirun`. A rank started with a run id
//!   (`RINGREDUCE_RUN_ID`) refuses a store of another run: a directory left
//!   by a crashed run is reported, never silently reused.
//! * `rank-<r>`: rank r's process (pid and start time), created once (a
//!   second rank r, or a stale file, is an error).
//! * keys that ranks publish for each other (the shared segment's name, the
//!   NCCL unique id, ...), and
//! * `abort`: why the run was given up (written by the launcher when a rank
//!   died, or by a rank), which every bounded wait checks.
//!
//! Every wait is bounded by the engine's timeout, names what it waited for
//! and whose job it was to write it, and ends early when that rank's process
//! is gone or the run was aborted.

use super::ProcId;
use crate::error::{Error, Result, WaitKind};
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const RUN_FILE: &str = "run-id";
pub const ABORT_FILE: &str = "abort";
/// The first line of an abort written for a rank ([`Store::abort_for`]).
const ABORT_RANK: &str = "rank ended: ";

fn store_err(dir: &Path, msg: impl std::fmt::Display) -> Error {
    Error::BadArgument(format!("store {}: {msg}", dir.display()))
}

/// What `run-id` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    pub run: String,
    pub size: usize,
    pub creator: Option<ProcId>,
}

impl RunInfo {
    fn encode(&self) -> String {
        let mut s = format!("run {}\nsize {}\n", self.run, self.size);
        if let Some(c) = self.creator {
            s.push_str(&format!("creator {}\n", c.encode()));
        }
        s
    }

    fn parse(text: &str) -> Option<RunInfo> {
        let mut run = None;
        let mut size = None;
        let mut creator = None;
        for line in text.lines() {
            let (k, v) = line.split_once(' ')?;
            match k {
                "run" => run = Some(v.trim().to_string()),
                "size" => size = v.trim().parse().ok(),
                "creator" => creator = ProcId::parse(v),
                _ => {}
            }
        }
        Some(RunInfo {
            run: run?,
            size: size?,
            creator,
        })
    }
}

/// A key's file name: letters, digits, `-`, `_` and `.` only.
fn check_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && !key.starts_with('.')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok {
        return Err(Error::BadArgument(format!("bad store key {key:?}")));
    }
    Ok(())
}

/// Write `data` to `dir/name` atomically: a temporary file (mode 0600),
/// then a rename (`exclusive`: a hard link, which fails if `name` exists).
fn publish(dir: &Path, name: &str, data: &[u8], exclusive: bool) -> std::io::Result<()> {
    let tmp = dir.join(format!(
        ".tmp-{}-{}-{name}",
        std::process::id(),
        crate::process::unique_suffix()
    ));
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
    }
    let r = if exclusive {
        fs::hard_link(&tmp, dir.join(name))
    } else {
        fs::rename(&tmp, dir.join(name))
    };
    let _ = fs::remove_file(&tmp);
    r
}

/// Where the launcher puts stores by default: `/dev/shm` (memory, so the
/// CPU backend's shared buffers never go to disk) when it is writable, else
/// the temporary directory.
pub fn default_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable =
        fs::metadata(shm).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o002 != 0);
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Error unless `dir` is a directory owned by this user that nobody else
/// can enter.
pub(crate) fn check_private(dir: &Path) -> Result<()> {
    let m = fs::metadata(dir).map_err(Error::io_at(dir))?;
    if !m.is_dir() {
        return Err(store_err(dir, "is not a directory"));
    }
    let me = crate::sys::proc::uid();
    if m.uid() != me {
        return Err(store_err(
            dir,
            format!(
                "is owned by uid {}, not by this user ({me}); refusing to use it",
                m.uid()
            ),
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(store_err(
            dir,
            format!(
                "has mode {:o}: other users could read or plant handles; it must be 0700",
                m.mode() & 0o777
            ),
        ));
    }
    Ok(())
}

/// A short description of what a leftover store holds, for the error.
pub(crate) fn describe_leftover(dir: &Path) -> String {
    let info = fs::read_to_string(dir.join(RUN_FILE))
        .ok()
        .and_then(|t| RunInfo::parse(&t));
    let files = fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    match info {
        Some(i) => {
            let who = match i.creator {
                Some(c) if c.alive() => format!("created by pid {}, which is still running", c.pid),
                Some(c) => format!("created by pid {}, which is gone", c.pid),
                None => "creator unknown".into(),
            };
            format!(
                "it holds run {} of {} ranks ({who}; {files} files)",
                i.run, i.size
            )
        }
        None => format!("it holds {files} files and no {RUN_FILE}"),
    }
}

/// Why a non-empty directory cannot become a new store, in words: a store
/// of a run still going, a stale store (its creator is gone), or a
/// directory that is no store at all, which is never suggested for removal.
fn non_empty_reason(dir: &Path) -> String {
    let info = fs::read_to_string(dir.join(RUN_FILE))
        .ok()
        .and_then(|t| RunInfo::parse(&t));
    match info {
        None => {
            let n = fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
            format!(
                "the directory is not empty ({n} {}) and is not a ringreduce store (no {RUN_FILE} file); a store must be a new or empty directory: name another one",
                crate::words::plural(n, "entry", "entries")
            )
        }
        Some(i) if i.creator.is_some_and(|c| c.alive()) => format!(
            "a store in use: {}; use another directory",
            describe_leftover(dir)
        ),
        Some(_) => format!(
            "stale store directory: {}; it is never reused: remove it (rm -r {}) or use another directory",
            describe_leftover(dir),
            dir.display()
        ),
    }
}

/// Remove the CUDA driver's interprocess files that ended rank processes
/// left in `dir` (`/dev/shm` on Linux): `cuda.shm.<n>.<pid in hex>.<m>`,
/// one set per process that used CUDA IPC, which the driver removes at a
/// clean exit and a killed process cannot (issue 32 item 10; the naming
/// read off the GPU machine,
/// `results/2026-12-01-h200x1-s10/2026-12-01-h200x1-s10.log.xz`). Only
/// files of the given pids, owned by this user, whose process is gone (a
/// reused pid's files stay). Returns what was removed.
pub fn sweep_cuda_ipc_files(dir: &Path, pids: &[u32]) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let dead: Vec<(u32, String)> = pids
        .iter()
        .filter(|&&p| super::proc_stat(p).is_none_or(|(st, _)| matches!(st, 'Z' | 'X' | 'x')))
        .map(|&p| (p, format!("{p:x}")))
        .collect();
    let uid = crate::sys::proc::uid();
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("cuda.shm.") else {
            continue;
        };
        // "<n>.<hex pid>.<m>"
        let parts: Vec<&str> = rest.split('.').collect();
        let [n, hex, m] = parts[..] else { continue };
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(n) || !digits(m) || !dead.iter().any(|(_, h)| h == hex) {
            continue;
        }
        let path = e.path();
        let ours =
            fs::symlink_metadata(&path).is_ok_and(|md| md.file_type().is_file() && md.uid() == uid);
        if ours && fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Remove this user's stores under `base` (named `ringreduce-<uid>-...`, as
/// [`default_base`] stores are) whose creator and every rank that joined
/// are gone: a launcher killed with `SIGKILL` cannot remove its own, and
/// nobody else would. A store without a readable run-id or creator is left
/// alone (one may be being created at this moment), and so is anything
/// that is not a private directory of this user. Returns what was removed.
pub fn sweep_stale(base: &Path) -> Vec<PathBuf> {
    let prefix = format!("ringreduce-{}-", crate::sys::proc::uid());
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(&prefix)) {
            continue;
        }
        let dir = e.path();
        if check_private(&dir).is_err() {
            continue;
        }
        let creator = fs::read_to_string(dir.join(RUN_FILE))
            .ok()
            .and_then(|t| RunInfo::parse(&t))
            .and_then(|i| i.creator);
        let Some(creator) = creator else {
            continue;
        };
        if creator.alive() {
            continue;
        }
        let Ok(files) = fs::read_dir(&dir) else {
            continue;
        };
        let rank_alive = files.flatten().any(|f| {
            f.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("rank-"))
                && fs::read_to_string(f.path())
                    .ok()
                    .and_then(|t| ProcId::parse(&t))
                    .is_some_and(|p| p.alive())
        });
        if !rank_alive && fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

/// The store of one run, as one participant sees it.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    run: String,
    /// This participant's rank (`None`: the launcher).
    rank: Option<usize>,
    timeout: Duration,
}

impl Store {
    /// Create a fresh store for a run of `size` ranks at `dir`: the directory
    /// must not exist, or be empty (then it must already be private); it is
    /// created with mode 0700. A non-empty directory is a leftover of another
    /// run and an error.
    pub fn create(dir: &Path, run: &str, size: usize, timeout: Duration) -> Result<Store> {
        match fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(store_err(dir, non_empty_reason(dir)));
                }
                check_private(dir)?;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| {
                        if e.kind() == ErrorKind::AlreadyExists {
                            store_err(dir, "another process created it at the same moment (a stale or concurrent run)")
                        } else {
                            Error::io_at(dir)(e)
                        }
                    })?;
                check_private(dir)?;
            }
            Err(e) => return Err(Error::io_at(dir)(e)),
        }
        let info = RunInfo {
            run: run.to_string(),
            size,
            creator: Some(ProcId::me()),
        };
        publish(dir, RUN_FILE, info.encode().as_bytes(), true).map_err(|e| {
            if e.kind() == ErrorKind::AlreadyExists {
                store_err(dir, "another run wrote its run-id at the same moment")
            } else {
                Error::io_at(dir)(e)
            }
        })?;
        Ok(Store {
            dir: dir.to_path_buf(),
            run: run.to_string(),
            rank: None,
            timeout,
        })
    }

    /// Join the store at `dir` as `rank` of `size`: wait (bounded) for its
    /// `run-id`, check that the directory is private, that it belongs to run
    /// `run` (when given) and to `size` ranks, that the run was not aborted,
    /// and that no other process joined as `rank`; then record this process
    /// as `rank-<rank>`.
    pub fn join(
        dir: &Path,
        run: Option<&str>,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Result<Store> {
        let start = Instant::now();
        let mut nap = Duration::from_micros(100);
        let info = loop {
            match fs::read_to_string(dir.join(RUN_FILE)) {
                Ok(t) => match RunInfo::parse(&t) {
                    Some(i) => break i,
                    None => return Err(store_err(dir, format!("unreadable {RUN_FILE}: {t:?}"))),
                },
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io_at(&dir.join(RUN_FILE))(e)),
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout {
                    rank,
                    what: format!(
                        "the store {} to be created (its {RUN_FILE}, written by {})",
                        dir.display(),
                        if run.is_some() {
                            "the launcher"
                        } else {
                            "rank 0"
                        }
                    ),
                    seconds: timeout.as_secs_f64(),
                    wait: WaitKind::Host,
                });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(20));
        };
        check_private(dir)?;
        if let Some(want) = run {
            if info.run != want {
                return Err(store_err(
                    dir,
                    format!(
                        "stale store directory: {} but this rank belongs to run {want}; remove it or use another directory",
                        describe_leftover(dir)
                    ),
                ));
            }
        } else if let Some(c) = info.creator {
            if !c.alive() && rank != 0 {
                return Err(store_err(
                    dir,
                    format!(
                        "stale store directory: {}; remove it or use another directory",
                        describe_leftover(dir)
                    ),
                ));
            }
        }
        let me = Store {
            dir: dir.to_path_buf(),
            run: info.run,
            rank: Some(rank),
            timeout,
        };
        if info.size != size {
            let why = format!(
                "it is for {} ranks, this rank was started as one of {size}",
                info.size
            );
            // The ranks that joined would wait their whole timeout for a
            // job that cannot form: give the run up, so they end at once.
            me.abort(&format!(
                "rank {rank} was started as one of {size} ranks, but the job has {}",
                info.size
            ));
            return Err(store_err(dir, why));
        }
        match me.abort_record() {
            // The launcher gave the run up because a rank ended badly: name
            // it, as every rank that joined does.
            Some((Some(q), why)) => {
                return Err(Error::peer_failed(
                    q,
                    &why,
                    format!("before rank {rank} joined the job"),
                ))
            }
            Some((None, why)) => {
                return Err(Error::Worker {
                    rank,
                    message: format!("the run was aborted before this rank joined: {why}"),
                })
            }
            None => {}
        }
        let name = format!("rank-{rank}");
        publish(dir, &name, ProcId::me().encode().as_bytes(), true).map_err(|e| {
            if e.kind() == ErrorKind::AlreadyExists {
                let other = me.proc_of(rank).map_or("?".into(), |p| p.pid.to_string());
                store_err(
                    dir,
                    format!("rank {rank} already joined (pid {other}): two processes with the same rank, or a stale store"),
                )
            } else {
                Error::io_at(dir)(e)
            }
        })?;
        Ok(me)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn run(&self) -> &str {
        &self.run
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn who(&self) -> usize {
        self.rank.unwrap_or(usize::MAX)
    }

    /// Publish `key` (replacing an older value).
    pub fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        check_key(key)?;
        publish(&self.dir, key, data, false).map_err(Error::io_at(&self.dir))
    }

    /// The value of `key` if it is there now.
    pub(crate) fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        match fs::read(self.dir.join(key)) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io_at(&self.dir.join(key))(e)),
        }
    }

    /// Wait (bounded) for `key`, which rank `from` publishes; `what` says
    /// what it is, for the error.
    pub fn get(&self, key: &str, from: usize, what: &str) -> Result<Vec<u8>> {
        let start = Instant::now();
        let mut nap = Duration::from_micros(50);
        let mut checked = Instant::now();
        loop {
            if let Some(v) = self.try_get(key)? {
                return Ok(v);
            }
            if checked.elapsed() > Duration::from_millis(20) {
                checked = Instant::now();
                if let Some(f) = self.health(&[from]) {
                    return Err(f.error(self.who(), &format!("{what} from rank {from}")));
                }
            }
            if start.elapsed() > self.timeout {
                let joined = self.proc_of(from).is_some();
                return Err(Error::Timeout {
                    rank: self.who(),
                    what: format!(
                        "{what} from rank {from} (store key {key}; rank {from} {})",
                        if joined {
                            "joined the store but never published it"
                        } else {
                            "never joined the store"
                        }
                    ),
                    seconds: self.timeout.as_secs_f64(),
                    wait: WaitKind::Host,
                });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(5));
        }
    }

    /// Rank `r`'s process, once it joined.
    pub(crate) fn proc_of(&self, r: usize) -> Option<ProcId> {
        fs::read_to_string(self.dir.join(format!("rank-{r}")))
            .ok()
            .and_then(|t| ProcId::parse(&t))
    }

    /// Why the run was given up, and the rank whose end made the launcher
    /// give it up, if one did ([`Store::abort_for`]).
    pub(crate) fn abort_record(&self) -> Option<(Option<usize>, String)> {
        let text = fs::read_to_string(self.dir.join(ABORT_FILE)).ok()?;
        let text = text.trim();
        let by_rank = text.strip_prefix(ABORT_RANK).and_then(|rest| {
            let (rank, why) = rest.split_once('\n')?;
            Some((Some(rank.trim().parse().ok()?), why.trim().to_string()))
        });
        Some(by_rank.unwrap_or((None, text.to_string())))
    }

    /// Give up the run: every participant's next check sees `why` (the
    /// first reason written wins).
    pub fn abort(&self, why: &str) {
        let _ = publish(&self.dir, ABORT_FILE, why.as_bytes(), true);
    }

    /// Give up the run because rank `rank` ended badly (`why`: how): the
    /// other ranks name it ([`Error::PeerFailed`]), not the abort.
    pub fn abort_for(&self, rank: usize, why: &str) {
        let text = format!("{ABORT_RANK}{rank}\n{why}");
        let _ = publish(&self.dir, ABORT_FILE, text.as_bytes(), true);
    }

    /// Whether the run is still healthy as far as ranks `watch` go: `None`,
    /// or why not (aborted, or one of them died after joining).
    pub(crate) fn health(&self, watch: &[usize]) -> Option<crate::sync::JobFault> {
        use crate::sync::JobFault;
        if let Some((rank, why)) = self.abort_record() {
            return Some(JobFault::Aborted { why, rank });
        }
        for &r in watch {
            if let Some(p) = self.proc_of(r) {
                if !p.alive() {
                    return Some(JobFault::Died {
                        rank: r,
                        pid: p.pid,
                    });
                }
            }
        }
        None
    }

    /// Remove the store and everything in it.
    pub fn remove(&self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests;
