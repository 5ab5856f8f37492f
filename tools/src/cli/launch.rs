//! `ringreduce launch -n N [--devices ...] -- <command>`: start N rank
//! processes of a command, like torchrun.
//!
//! * The command is a ringreduce command (`run`, `check`, `bench`, `soak`,
//!   ...: this binary runs it) or any program that uses
//!   [`ringreduce::Communicator::from_env`](ringreduce::Communicator::from_env)
//!   (e.g. `target/release/examples/processes`).
//! * The launcher creates the job's store (a fresh directory of mode 0700
//!   under `/dev/shm`, or `--store`; a non-empty one is a leftover and
//!   refused; under `/dev/shm` it first removes this user's stores whose
//!   launcher and ranks are all gone, `store::sweep_stale`) and gives rank r
//!   `RINGREDUCE_RANK=r`, `RINGREDUCE_SIZE=N`, `RINGREDUCE_LOCAL_RANK=r`,
//!   `RINGREDUCE_LOCAL_SIZE=N`, `RINGREDUCE_STORE`, `RINGREDUCE_RUN_ID`,
//!   with `--devices`: `RINGREDUCE_DEVICES` = rank r's GPU by
//!   [`ringreduce::backend::placement`] (blocks when ranks outnumber GPUs), with
//!   `--timeout`: `RINGREDUCE_TIMEOUT`.
//! * Each rank's stdout and stderr lines come out prefixed `[rank r] `.
//! * Faults: when a rank exits non-zero or is killed, the launcher writes
//!   the reason into the store (every rank's bounded waits check it, and
//!   notice dead peers by themselves), waits up to the timeout for the
//!   others to end on their own, then stops the rest (`SIGTERM` to each
//!   rank's process group, `SIGKILL` after `--grace`). Ctrl-C (and
//!   `SIGTERM`/`SIGHUP`) is forwarded the same way. Ranks are started with
//!   `PR_SET_PDEATHSIG`, so even a launcher killed with `SIGKILL` leaves no
//!   rank running. The exit status is the worst of the ranks' (`128 + n`
//!   for a rank killed by signal n).

use ringreduce::error::{Error, Result};
use ringreduce::os::{self as proc, Sig};
use ringreduce::process::launch::{default_base, sweep_stale, LaunchStore as Store};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The commands of this binary that `launch` runs with this binary, as
/// ranks of the job.
pub const OWN: [&str; 7] = ["run", "check", "bench", "soak", "trace", "theory", "env"];

/// The commands of this binary that do not run as a rank of a job: each
/// measures or sets up on its own (`topo` the machine, `compare` several
/// rank counts, `overlap` the stream-ordered calls of one process), and
/// `launch` starts jobs. `launch -n 2 -- topo` is refused, naming them,
/// instead of looking for a program called `topo`.
pub const NOT_A_RANK: [(&str, &str); 4] = [
    (
        "topo",
        "it measures this machine's GPUs and links; run it directly",
    ),
    (
        "compare",
        "it runs several rank counts itself (--ranks 2,4,8); run it directly",
    ),
    (
        "overlap",
        "its stream-ordered calls need every rank in one process; run it directly with --ranks",
    ),
    ("launch", "a job cannot start jobs"),
];

#[derive(clap::Args, Debug)]
pub struct LaunchArgs {
    /// Number of rank processes.
    #[arg(short = 'n', long = "nprocs")]
    pub nprocs: usize,
    /// GPUs, comma-separated: each rank gets one (passed as
    /// RINGREDUCE_DEVICES), the r-th listed, or with more ranks than GPUs in
    /// blocks as one process's ranks are (4 on 0,1: 0,0,1,1). Default: the
    /// same placement over every GPU (each rank knows its local rank and
    /// the local size, RINGREDUCE_LOCAL_SIZE).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// The ranks' limit on any wait, in seconds (RINGREDUCE_TIMEOUT, default
    /// 60), and how long the launcher waits for the other ranks to end on
    /// their own after one failed.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Seconds between SIGTERM and SIGKILL when ranks must be stopped.
    #[arg(long, default_value_t = 3.0)]
    pub grace: f64,
    /// The store directory (created with mode 0700; an existing one must be
    /// empty). Default: a fresh directory under /dev/shm (or the temporary
    /// directory).
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// Keep the store directory after the run (it is removed by default).
    #[arg(long)]
    pub keep_store: bool,
    /// The command every rank runs, after `--`: a ringreduce command (run,
    /// check, bench, soak) or a program that uses ringreduce::Communicator.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// How a rank ended, in words.
fn describe(st: &ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by {}", proc::signal_name(s)),
        _ => "ended".into(),
    }
}

/// The shell's exit status of a rank: its code, or 128 + the signal.
fn code_of(st: &ExitStatus) -> u8 {
    match (st.code(), st.signal()) {
        (Some(c), _) => u8::try_from(c.clamp(0, 255)).unwrap_or(255),
        (None, Some(s)) => u8::try_from((128 + s).clamp(0, 255)).unwrap_or(255),
        _ => 1,
    }
}

/// Copy `from` to our stdout or stderr, each line prefixed.
///
/// A closed stdout (`| head`) drops the lines quietly, as every command
/// ends quietly on a closed pipe; any other failure to write stdout (a full
/// disk, `> /dev/full`) is recorded in `lost` (the first one), so the
/// launch does not exit 0 having lost its ranks' output. The ranks are not
/// stopped either way: the lines are drained so they never block.
fn forward(
    from: impl Read + Send + 'static,
    prefix: String,
    to_err: bool,
    lost: Lost,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            let mut buf = Vec::with_capacity(prefix.len() + line.len());
            buf.extend_from_slice(prefix.as_bytes());
            buf.extend_from_slice(&line);
            let written = if to_err {
                std::io::stderr().lock().write_all(&buf)
            } else {
                let mut o = std::io::stdout().lock();
                o.write_all(&buf).and_then(|_| o.flush())
            };
            match written {
                Err(e) if !to_err && e.kind() != std::io::ErrorKind::BrokenPipe => {
                    lost.record(e);
                }
                _ => {}
            }
        }
    })
}

/// The first error writing the ranks' output to stdout, shared by the
/// forwarding threads.
#[derive(Clone, Default)]
struct Lost(std::sync::Arc<std::sync::Mutex<Option<std::io::Error>>>);

impl Lost {
    fn record(&self, e: std::io::Error) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert(e);
    }

    fn take(&self) -> Option<std::io::Error> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The ranks of a launch, while they run.
struct Ranks {
    children: Vec<Child>,
    status: Vec<Option<ExitStatus>>,
}

impl Ranks {
    fn running(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.children
            .iter()
            .enumerate()
            .filter(|(r, _)| self.status[*r].is_none())
            .map(|(r, c)| (r, c.id()))
    }

    /// Signal every running rank's process group.
    fn signal(&self, sig: Sig) {
        for (_, pid) in self.running() {
            let _ = proc::signal_group(pid, sig);
        }
    }

    /// Reap the ranks that ended; the newly ended ones.
    fn poll(&mut self) -> Vec<(usize, ExitStatus)> {
        let mut ended = Vec::new();
        for (r, c) in self.children.iter_mut().enumerate() {
            if self.status[r].is_none() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.status[r] = Some(st);
                    ended.push((r, st));
                }
            }
        }
        ended
    }

    fn all_done(&self) -> bool {
        self.status.iter().all(Option::is_some)
    }

    /// Stop every rank now: SIGKILL, then reap.
    fn kill_all(&mut self) {
        self.signal(Sig::Kill);
        for (r, c) in self.children.iter_mut().enumerate() {
            if self.status[r].is_none() {
                self.status[r] = c.wait().ok();
            }
        }
    }
}

pub fn execute(a: LaunchArgs) -> Result<u8> {
    let (n, timeout, grace) = checked(&a)?;
    let (program, args) = program_of(&a)?;
    let run_id = format!(
        "{:x}-{:x}",
        std::process::id(),
        ringreduce::process::unique_suffix()
    );
    let dir = store_dir(&a, &run_id);
    let store = Store::create(&dir, &run_id, n, timeout)?;
    proc::catch_interrupts();
    let job = Job {
        n,
        program: &program,
        args: &args,
        dir: &dir,
        run_id: &run_id,
        store: &store,
    };
    let lost = Lost::default();
    let (mut ranks, forwarders) = spawn_ranks(&a, &job, &lost)?;
    let (first_failure, interrupted) = watch(&mut ranks, &store, timeout, grace);
    // The pipes close with the ranks (and anything they started, stopped
    // with their groups); do not wait forever for a stray holder.
    let t0 = Instant::now();
    while forwarders.iter().any(|h| !h.is_finished()) && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for h in forwarders.into_iter().filter(|h| h.is_finished()) {
        let _ = h.join();
    }
    if a.keep_store {
        crate::note!("launch: store kept at {}", dir.display());
    } else {
        store.remove();
    }
    // A rank killed while it used CUDA IPC leaves the driver's files in
    // /dev/shm; every rank has ended now.
    let pids: Vec<u32> = ranks.children.iter().map(Child::id).collect();
    ringreduce::process::launch::sweep_cuda_ipc_files(Path::new("/dev/shm"), &pids);
    let worst = status_of(&ranks, interrupted, first_failure.is_some(), &lost);
    if worst != 0 {
        say_failures(&ranks, worst);
    }
    Ok(worst)
}

/// The rank count, the timeout and the grace period, checked with the
/// settings the ranks will read before any rank starts.
fn checked(a: &LaunchArgs) -> Result<(usize, Duration, Duration)> {
    let n = a.nprocs;
    if n == 0 {
        return Err(Error::ZeroRanks);
    }
    if n > ringreduce::engine::MAX_RANKS {
        return Err(Error::TooManyRanks {
            ranks: n,
            max: ringreduce::engine::MAX_RANKS,
        });
    }
    if !(a.grace.is_finite() && a.grace >= 0.0 && a.grace <= 1e7) {
        return Err(Error::BadArgument(format!(
            "--grace must be 0 to 10000000 seconds (got {})",
            a.grace
        )));
    }
    let timeout = a
        .timeout
        .map(|t| ringreduce::param::timeout_arg("--timeout", t))
        .transpose()?;
    // The settings the ranks will read, before any rank starts.
    ringreduce::settings::check_settings()?;
    if a.devices.as_ref().is_some_and(Vec::is_empty) {
        return Err(Error::BadArgument(
            "--devices needs at least one GPU".into(),
        ));
    }
    let timeout = match timeout {
        Some(t) => t,
        None => ringreduce::param::timeout()?,
    };
    let grace = Duration::from_secs_f64(a.grace);
    Ok((n, timeout, grace))
}

/// The program each rank runs and its arguments: this binary for its own
/// commands.
fn program_of(a: &LaunchArgs) -> Result<(PathBuf, Vec<String>)> {
    Ok(match a.command.first() {
        Some(c) if OWN.contains(&c.as_str()) => {
            let me = std::env::current_exe().map_err(|e| Error::Io {
                path: "the launcher's own executable".into(),
                source: std::sync::Arc::new(e),
            })?;
            (me, a.command.clone())
        }
        Some(c) if NOT_A_RANK.iter().any(|(n, _)| n == c) => {
            let why = NOT_A_RANK.iter().find(|(n, _)| n == c).map_or("", |x| x.1);
            return Err(Error::BadArgument(format!(
                "`{c}` is a ringreduce command that does not run as a rank of a job: {why} (launch runs {} of this binary, or any program; ./{c} names a program of that name)",
                OWN.join(", ")
            )));
        }
        Some(c) => (PathBuf::from(c), a.command[1..].to_vec()),
        None => return Err(Error::BadArgument("launch needs a command after --".into())),
    })
}

/// The store's directory: `--store`, or a fresh one (after removing the
/// stale ones).
fn store_dir(a: &LaunchArgs, run_id: &str) -> PathBuf {
    match &a.store {
        Some(d) => d.clone(),
        None => {
            // Stores of runs whose launcher and ranks are all gone (killed
            // with SIGKILL: nobody else removes them) go first.
            let base = default_base();
            for d in sweep_stale(&base) {
                crate::note!(
                    "launch: removed the stale store {} (its launcher and ranks are gone)",
                    d.display()
                );
            }
            base.join(format!("ringreduce-{}-{run_id}", proc::uid()))
        }
    }
}

/// What every rank of the job shares.
struct Job<'a> {
    n: usize,
    program: &'a Path,
    args: &'a [String],
    dir: &'a Path,
    run_id: &'a str,
    store: &'a Store,
}

/// Start every rank, their output forwarded; on a failure to start one,
/// stop those started.
fn spawn_ranks(
    a: &LaunchArgs,
    job: &Job<'_>,
    lost: &Lost,
) -> Result<(Ranks, Vec<std::thread::JoinHandle<()>>)> {
    let Job {
        n,
        program,
        args,
        dir,
        run_id,
        store,
    } = *job;
    let mut ranks = Ranks {
        children: Vec::with_capacity(n),
        status: Vec::new(),
    };
    let mut forwarders = Vec::new();
    for r in 0..n {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("RINGREDUCE_RANK", r.to_string())
            .env("RINGREDUCE_SIZE", n.to_string())
            .env("RINGREDUCE_LOCAL_RANK", r.to_string())
            .env("RINGREDUCE_LOCAL_SIZE", n.to_string())
            .env("RINGREDUCE_STORE", dir)
            .env("RINGREDUCE_RUN_ID", run_id)
            .env_remove("RINGREDUCE_MULTIPROC")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: stopping a rank stops what it started.
            .process_group(0);
        if let Some(t) = a.timeout {
            cmd.env("RINGREDUCE_TIMEOUT", t.to_string());
        }
        if let Some(d) = &a.devices {
            let device = ringreduce::backend::device_of(r, n, d);
            cmd.env("RINGREDUCE_DEVICES", device.to_string());
        }
        proc::die_with_parent(&mut cmd);
        match cmd.spawn() {
            Ok(mut c) => {
                if let Some(o) = c.stdout.take() {
                    forwarders.push(forward(o, format!("[rank {r}] "), false, lost.clone()));
                }
                if let Some(e) = c.stderr.take() {
                    forwarders.push(forward(e, format!("[rank {r}] "), true, lost.clone()));
                }
                ranks.children.push(c);
                ranks.status.push(None);
            }
            Err(e) => {
                let why = format!("rank {r} could not be started ({}): {e}", program.display());
                store.abort(&why);
                ranks.kill_all();
                if !a.keep_store {
                    store.remove();
                }
                return Err(Error::BadArgument(why));
            }
        }
    }
    Ok((ranks, forwarders))
}

/// A rank or a signal, and when it was seen.
type When<T> = Option<(T, Instant)>;

/// Watch the ranks until every one has ended: on the first failure or a
/// signal, stop the others. Returns the first failure and the signal.
fn watch(
    ranks: &mut Ranks,
    store: &Store,
    timeout: Duration,
    grace: Duration,
) -> (When<usize>, When<i32>) {
    let mut first_failure: Option<(usize, Instant)> = None;
    let mut interrupted: Option<(i32, Instant)> = None;
    let mut term_sent: Option<Instant> = None;
    let mut kill_sent = false;
    loop {
        for (r, st) in ranks.poll() {
            if !st.success() && first_failure.is_none() && interrupted.is_none() {
                let why = format!("rank {r} {}", describe(&st));
                store.abort_for(r, &format!("its process {}", describe(&st)));
                crate::note!(
                    "launch: {why}; waiting up to {:.0} s for the other ranks to end",
                    timeout.as_secs_f64()
                );
                first_failure = Some((r, Instant::now()));
            }
        }
        if ranks.all_done() {
            break;
        }
        if let (Some(sig), None) = (proc::caught(), interrupted) {
            let why = format!("the launcher got {}", proc::signal_name(sig));
            crate::note!("launch: {why}; stopping the ranks");
            store.abort(&why);
            // The ranks get the signal the launcher got (Ctrl-C stays
            // SIGINT, a SIGTERM stays SIGTERM).
            ranks.signal(Sig::from_raw(sig).unwrap_or(Sig::Int));
            interrupted = Some((sig, Instant::now()));
        }
        let stop_at = match (first_failure, interrupted) {
            (_, Some((_, t))) => Some(t + grace),
            (Some((_, t)), None) => Some(t + timeout + Duration::from_secs(1)),
            _ => None,
        };
        if term_sent.is_none() && stop_at.is_some_and(|t| Instant::now() >= t) {
            let left: Vec<String> = ranks.running().map(|(r, _)| r.to_string()).collect();
            crate::note!("launch: stopping ranks {} (SIGTERM)", left.join(", "));
            ranks.signal(Sig::Term);
            term_sent = Some(Instant::now());
        }
        if !kill_sent && term_sent.is_some_and(|t| t.elapsed() >= grace) {
            let left: Vec<String> = ranks.running().map(|(r, _)| r.to_string()).collect();
            crate::note!("launch: killing ranks {} (SIGKILL)", left.join(", "));
            ranks.signal(Sig::Kill);
            kill_sent = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (first_failure, interrupted)
}

/// The launch's exit status: the worst rank's, the shell's for a signal
/// the launcher got, 1 after a failure, at least 2 when output was lost.
fn status_of(ranks: &Ranks, interrupted: When<i32>, failed: bool, lost: &Lost) -> u8 {
    let statuses: Vec<ExitStatus> = ranks.status.iter().flatten().copied().collect();
    let worst = statuses.iter().map(code_of).max().unwrap_or(0);
    let worst = match interrupted {
        // Ended by a signal: the shell's status for it (130 for SIGINT,
        // 143 for SIGTERM), whatever the ranks did with it.
        Some((sig, _)) => u8::try_from((128 + sig).clamp(0, 255)).unwrap_or(255),
        None if worst == 0 && failed => 1,
        None => worst,
    };
    // Every rank succeeded, but their output was lost: not a success.
    match lost.take() {
        Some(e) => {
            crate::note!("launch: error: the ranks' output could not be written to stdout: {e}");
            worst.max(2)
        }
        None => worst,
    }
}

/// One line naming each rank's end, grouped.
fn say_failures(ranks: &Ranks, worst: u8) {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (r, st) in ranks.status.iter().enumerate() {
        let d = st.as_ref().map_or("did not report".into(), describe);
        match groups.iter_mut().find(|(k, _)| *k == d) {
            Some((_, v)) => v.push(r),
            None => groups.push((d, vec![r])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(d, v)| {
            let rs: Vec<String> = v.iter().map(usize::to_string).collect();
            // "rank 1 was killed", "ranks 0, 1 were killed".
            let d = if v.len() > 1 {
                d.replacen("was ", "were ", 1)
            } else {
                d.clone()
            };
            format!(
                "{} {} {d}",
                ringreduce::words::plural(v.len(), "rank", "ranks"),
                rs.join(", ")
            )
        })
        .collect();
    crate::note!("launch: {}; exit status {worst}", parts.join("; "));
}
