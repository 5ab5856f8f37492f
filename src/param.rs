//! Every environment variable ringreduce reads, declared once: here,
//! except `RINGREDUCE_ALGO`, declared with the algorithms it names
//! (`algo::ALGO`).
//!
//! Modelled on NCCL's `NCCL_PARAM` (`src/include/param.h`): each variable is
//! one [`Param`] with its name, its type (a parse function), what it
//! accepts, what unset means and a line of documentation;
//! [`settings::all`](crate::settings::all) lists them (`ringreduce env`
//! prints that list with each value and where it came from). No module of
//! the library reads the environment otherwise; the test
//! suites read their own variables (`TEST_ONLY`).
//!
//! * **Empty is unset**, as NCCL reads its variables (`ncclLoadParam` takes
//!   the default when the value is empty): `RINGREDUCE_TIMEOUT=` means 60 s.
//!   A value of spaces only is empty too.
//! * **A malformed or out-of-range value is an error**, [`Error::Env`]:
//!   the variable, the value, why it is refused and what is accepted. It is
//!   never ignored and never a panic (NCCL logs and takes the default;
//!   ringreduce refuses to start). [`crate::Engine::new`] checks the
//!   variables the engine reads (`settings::check_engine`), every command that runs
//!   collectives checks every setting before it starts ([`check_settings`](crate::settings::check_settings)),
//!   and a malformed value stops them even when an argument overrides the
//!   variable (`--timeout`, `EngineConfig::timeout`): the environment is
//!   wrong either way.
//! * **Settings are read once** per process and cached ([`Param::get`]),
//!   like NCCL's: a value cannot change between the check and the use. The
//!   job's variables (set by `ringreduce launch` or by `mpirun`) and the
//!   places NCCL is looked for are read at each use, as they always were: a
//!   program may set them before it joins a job or loads NCCL, and join
//!   more than one job.
//! * **Fault injection** (`FAULT`, `RINGREDUCE_FAULT`) is read by every
//!   build, so the binary `cargo build` makes is the one the tests run:
//!   unset, it costs one comparison per op.

// Public so that programs around the library list and check the same
// variables: `ringreduce env` prints [`all`](crate::settings::all), and the commands run
// [`check_settings`] before they build an engine.

use crate::error::{Error, Result};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

mod mpi;
mod parse;
pub(crate) use mpi::*;
pub(crate) use parse::check_seconds;
pub(crate) use parse::utf8;
use parse::*;

/// The limit on any wait when neither `RINGREDUCE_TIMEOUT` nor an argument
/// sets one.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest timeout accepted anywhere (`RINGREDUCE_TIMEOUT`,
/// `--timeout`, `EngineConfig::timeout`), in seconds: 10^7 s is about 115
/// days, and deadlines computed from it cannot overflow.
pub(crate) const MAX_TIMEOUT_SECONDS: f64 = 1e7;

/// What a timeout accepts, for messages.
pub(crate) const TIMEOUT_RANGE: &str = "a number of seconds greater than 0 and at most 10000000";

/// What a variable is for; [`all`](crate::settings::all) lists them in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Settings of the engine (the library): read once, checked by
    /// [`crate::Engine::new`].
    Engine,
    /// Settings of the command line: read once, checked before a command
    /// runs.
    Cli,
    /// Fault injection, for tests of the error paths.
    Fault,
    /// This process's place in a job, set by `ringreduce launch` for its
    /// ranks: read each time a job is joined.
    Launcher,
    /// The same set by `mpirun` (Open MPI, MPICH, Intel MPI) or `srun`.
    Mpi,
    /// Where NCCL is looked for: read at each search.
    NcclSearch,
}

impl Group {
    /// Every group, in the order `ringreduce env` prints them.
    pub const ALL: [Group; 6] = [
        Group::Engine,
        Group::Cli,
        Group::Fault,
        Group::Launcher,
        Group::Mpi,
        Group::NcclSearch,
    ];

    /// The group's title in `ringreduce env`.
    pub fn title(self) -> &'static str {
        match self {
            Group::Engine => "settings of the engine (read once per process; Engine::new checks them)",
            Group::Cli => "settings of the command line (read once per process)",
            Group::Fault => "fault injection (for tests of the error paths)",
            Group::Launcher => "this process's place in a job, set by `ringreduce launch` (read when a job is joined; checked by every command)",
            Group::Mpi => "the same, set by mpirun or srun (read when a job is joined; checked by every command)",
            Group::NcclSearch => "where NCCL is looked for (read at each search)",
        }
    }

    /// Whether the variables of this group are read once and cached.
    pub fn read_once(self) -> bool {
        matches!(self, Group::Engine | Group::Cli | Group::Fault)
    }
}

/// A refused value, as cached.
#[derive(Debug, Clone)]
struct Refused {
    value: String,
    reason: String,
}

/// One environment variable: its name, its type (`T`, made by the parse
/// function), what it accepts and what unset means.
pub struct Param<T: 'static> {
    /// The variable's name.
    pub name: &'static str,
    /// Which group it is listed in.
    pub group: Group,
    /// What a value may be, for messages and `ringreduce env`.
    pub accepted: &'static str,
    /// What a value may be, made from its parser's own list (when the
    /// list can grow: the algorithms), in place of `accepted`.
    made: Option<fn() -> String>,
    /// What unset (or empty) means.
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
    parse: fn(&OsStr) -> std::result::Result<T, String>,
    cache: OnceLock<std::result::Result<Option<T>, Refused>>,
}

impl<T: Clone + Send + Sync + 'static> Param<T> {
    pub(crate) const fn new(
        name: &'static str,
        group: Group,
        accepted: &'static str,
        default: &'static str,
        doc: &'static str,
        parse: fn(&OsStr) -> std::result::Result<T, String>,
    ) -> Param<T> {
        Param {
            name,
            group,
            accepted,
            made: None,
            default,
            doc,
            parse,
            cache: OnceLock::new(),
        }
    }

    /// The same, with what it accepts made by `made` from the parser's own
    /// list.
    pub(crate) const fn accepting(mut self, made: fn() -> String) -> Param<T> {
        self.made = Some(made);
        self
    }

    /// What a value may be ([`Param::accepted`], or made from the parser's
    /// list).
    pub fn accepts(&self) -> String {
        self.made.map_or_else(|| self.accepted.to_string(), |f| f())
    }

    /// The value in the environment now, `None` when unset or empty.
    pub fn raw(&self) -> Option<OsString> {
        std::env::var_os(self.name).filter(|v| !is_blank(v))
    }

    /// `raw` parsed (a pure function: what [`Param::get`] does with the
    /// environment's value): `Ok(None)` when unset or empty, an
    /// [`Error::Env`] naming the variable when malformed or out of range.
    pub fn parse(&self, raw: Option<&OsStr>) -> Result<Option<T>> {
        self.parse_inner(raw).map_err(|r| self.error(r))
    }

    fn parse_inner(&self, raw: Option<&OsStr>) -> std::result::Result<Option<T>, Refused> {
        match raw {
            Some(v) if !is_blank(v) => (self.parse)(v).map(Some).map_err(|reason| Refused {
                value: v.to_string_lossy().into_owned(),
                reason,
            }),
            _ => Ok(None),
        }
    }

    fn error(&self, r: Refused) -> Error {
        Error::Env {
            var: self.name,
            value: r.value,
            reason: r.reason,
            expected: self.accepts(),
        }
    }

    /// The variable's value: read once and cached for a setting
    /// ([`Group::read_once`]), read now for the others.
    pub fn get(&self) -> Result<Option<T>> {
        if self.group.read_once() {
            self.cache
                .get_or_init(|| self.parse_inner(std::env::var_os(self.name).as_deref()))
                .clone()
                .map_err(|r| self.error(r))
        } else {
            self.parse(std::env::var_os(self.name).as_deref())
        }
    }
}

/// A declared variable whatever its type: what [`all`](crate::settings::all) lists.
pub trait Declared: Sync {
    /// The variable's name.
    fn name(&self) -> &'static str;
    /// Its group.
    fn group(&self) -> Group;
    /// What a value may be.
    fn accepted(&self) -> String;
    /// What unset means.
    fn default(&self) -> &'static str;
    /// What it does.
    fn doc(&self) -> &'static str;
    /// The value in the environment now (`None`: unset or empty).
    fn raw(&self) -> Option<OsString>;
    /// The value in the environment now as it is set (empty included).
    fn set(&self) -> Option<OsString> {
        std::env::var_os(self.name())
    }
    /// Whether the value is acceptable (unset is).
    fn check(&self) -> Result<()>;
}

impl<T: Clone + Send + Sync + 'static> Declared for Param<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn group(&self) -> Group {
        self.group
    }
    fn accepted(&self) -> String {
        self.accepts()
    }
    fn default(&self) -> &'static str {
        self.default
    }
    fn doc(&self) -> &'static str {
        self.doc
    }
    fn raw(&self) -> Option<OsString> {
        Param::raw(self)
    }
    fn check(&self) -> Result<()> {
        self.get().map(|_| ())
    }
}

// -- settings of the engine ---------------------------------------------

pub(crate) static TIMEOUT: Param<Duration> = Param::new(
    "RINGREDUCE_TIMEOUT",
    Group::Engine,
    TIMEOUT_RANGE,
    "60",
    "The longest any wait may take, on the host and on the GPU, before a call fails with a timeout; --timeout and EngineConfig::timeout override it (`launch --timeout` sets it for the ranks).",
    parse_seconds,
);

pub(crate) static CUDA_QUEUES: Param<usize> = Param::new(
    "CUDA_DEVICE_MAX_CONNECTIONS",
    Group::Engine,
    "a whole number from 1 (the CUDA driver's own variable)",
    "8 (the driver's)",
    "Read, never set: the hardware queues the CUDA driver gives each context, read by the driver when it creates one. Rank threads sharing a GPU need 4 each for the paths whose kernels spin on other ranks' flags (ring:ll, oneshot:ll, oneshot:flag, ring:flag): with fewer, two ranks' streams can share a queue, where one rank's kernel waits behind the kernel that waits for it. Those paths then refuse, and auto takes none of them.",
    parse_queues,
);

pub(crate) static PTX_JIT: Param<bool> = Param::new(
    "RINGREDUCE_PTX_JIT",
    Group::Engine,
    "0 or 1",
    "0",
    "1: JIT-compile the PTX kernels even on a GPU whose embedded cubin matches (to compare the two).",
    parse_flag,
);

pub(crate) static DEVICES: Param<Vec<usize>> = Param::new(
    "RINGREDUCE_DEVICES",
    Group::Engine,
    "GPU ordinals, comma-separated (0, or 0,1)",
    "every GPU",
    "The GPUs a rank process (CUDA backend, one process per rank) picks from; `launch --devices` sets one per rank; --devices overrides it.",
    parse_devices,
);

pub(crate) static CUPTI: Param<PathBuf> = Param::new(
    "RINGREDUCE_CUPTI",
    Group::Engine,
    "0, 1, or the path of libcupti",
    "CUPTI where it loads, else CUDA events",
    "The timeline's source on the CUDA backend (CUPTI needs the library's profiling feature, which the tools turn on; without it: CUDA events): unset or 1: CUPTI's activity records from libcupti.so.13 or libcupti.so on the loader's path, else under /usr/local/cuda{,-13.0}/targets/x86_64-linux/lib or extras/CUPTI/lib64; a path: from that library; 0: CUDA events between the ops (also the fallback, with the reason printed, where CUPTI is missing or refuses, e.g. under another profiler).",
    parse_path,
);

/// How a CUPTI-timed op is tied to its activity records
/// (`RINGREDUCE_CUPTI_TIE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CuptiTie {
    /// CUPTI's callback at the exit of each issuing driver call hands over
    /// its correlation id (a subscriber for the process's life).
    Callback,
    /// No callback: each stream's records, in correlation-id order, are
    /// the calls the ops issued on it, in issue order.
    Order,
}

/// The activity kinds enabled for the timeline (`RINGREDUCE_CUPTI_KINDS`):
/// an experiment knob; other than `All`, the timeline is partial and says
/// so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CuptiKinds {
    /// Every kind (the default).
    All,
    /// Kernels only: copy ops are not timed.
    Kernel,
    /// Copies and memsets only: kernel ops are not timed.
    Copy,
}

pub(crate) static CUPTI_TIE: Param<CuptiTie> = Param::new(
    "RINGREDUCE_CUPTI_TIE",
    Group::Engine,
    "callback or order",
    "callback",
    "How the CUPTI timeline ties each op to its kernel or copy record: callback: a CUPTI callback at the exit of each issuing driver call (cuLaunchKernel, the copies) files the call's correlation id under the op; order: no callback (and no CUPTI subscriber), each stream's records in correlation-id order are the kernels and copies the rank issued on it, in issue order (a missing or extra record is an error naming the rank and op, never a wrong tie).",
    parse_cupti_tie,
);

pub(crate) static CUPTI_KINDS: Param<CuptiKinds> = Param::new(
    "RINGREDUCE_CUPTI_KINDS",
    Group::Engine,
    "all, kernel or copy",
    "all",
    "An experiment knob of the CUPTI timeline: the activity kinds it enables (all: kernels, copies, memsets; kernel: kernels alone; copy: copies and memsets alone), to measure what each kind costs. Other than all, the timeline is partial: the ops of the kinds left off are shown as instants and the timing source line says PARTIAL.",
    parse_cupti_kinds,
);

pub(crate) static CUPTI_KEEP: Param<bool> = Param::new(
    "RINGREDUCE_CUPTI_KEEP",
    Group::Engine,
    "0 or 1",
    "0",
    "An experiment knob of the CUPTI timeline: 1 leaves the activity kinds on from the first timed call for the process's life (untimed calls then pay CUPTI's per-launch work too; each batch of timed calls starts with a flush that drops the untimed calls' records); 0 turns them on while timed calls are pending.",
    parse_flag,
);

// -- settings of the command line ----------------------------------------

/// `RINGREDUCE_HOST_MEMORY`: the host memory the commands count on.
pub static HOST_MEMORY: Param<u64> = Param::new(
    "RINGREDUCE_HOST_MEMORY",
    Group::Cli,
    "a size of at least 1 byte: 64GiB, 500GB, 1073741824 (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)",
    "MemAvailable of /proc/meminfo",
    "The host memory the commands count on when they check that a run fits (machines whose memory grows on demand report too little).",
    parse_bytes,
);

// -- fault injection -------------------------------------------------------

/// `RINGREDUCE_FAULT`: faults a test injects into a job's processes.
pub(crate) static FAULT: Param<Vec<crate::fault::EnvFault>> = Param::new(
    "RINGREDUCE_FAULT",
    Group::Fault,
    crate::fault::ENV_FAULT_SYNTAX,
    "no fault",
    "Faults injected into a job of one process per rank: a rank's process kills itself in a call (kill), fails before it joins (nostart), panics (panic) or exits (exit) as a call starts. Every rank named must be a rank of the job.",
    parse_faults,
);

/// The name of the fault-injection variable.
pub(crate) const FAULT_NAME: &str = "RINGREDUCE_FAULT";

// -- the job, set by `ringreduce launch` ----------------------------------

pub(crate) static MULTIPROC: Param<bool> = Param::new(
    "RINGREDUCE_MULTIPROC",
    Group::Launcher,
    "0 or 1",
    "1",
    "0: ignore the job variables below (launch's, mpirun's, srun's) and run every rank in this process.",
    parse_flag,
);

pub(crate) static RANK: Param<usize> = Param::new(
    "RINGREDUCE_RANK",
    Group::Launcher,
    WHOLE,
    "not a rank of a job",
    "This process's rank in its job.",
    parse_whole,
);

pub(crate) static SIZE: Param<usize> = Param::new(
    "RINGREDUCE_SIZE",
    Group::Launcher,
    WHOLE,
    "not a rank of a job",
    "The number of ranks (processes) of the job.",
    parse_whole,
);

pub(crate) static LOCAL_RANK: Param<usize> = Param::new(
    "RINGREDUCE_LOCAL_RANK",
    Group::Launcher,
    WHOLE,
    "the rank",
    "The rank among the job's processes on this machine (picks the GPU).",
    parse_whole,
);

pub(crate) static LOCAL_SIZE: Param<usize> = Param::new(
    "RINGREDUCE_LOCAL_SIZE",
    Group::Launcher,
    WHOLE,
    "unknown: GPU = local rank % GPUs",
    "How many of the job's processes run on this machine (more processes than GPUs then go in blocks).",
    parse_whole,
);

pub(crate) static STORE: Param<PathBuf> = Param::new(
    "RINGREDUCE_STORE",
    Group::Launcher,
    A_PATH,
    "required with RINGREDUCE_RANK; under mpirun a directory named after the job",
    "The job's store directory, where its ranks meet.",
    parse_path,
);

pub(crate) static RUN_ID: Param<String> = Param::new(
    "RINGREDUCE_RUN_ID",
    Group::Launcher,
    ANY_TEXT,
    "rank 0 creates the store",
    "The run id the store must carry (a store of another run is refused).",
    parse_text,
);

pub(crate) static RANKS_PER_NODE: Param<usize> = Param::new(
    "RINGREDUCE_RANKS_PER_NODE",
    Group::Launcher,
    POSITIVE,
    "the machines: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)",
    "With the mpi feature under mpirun: treat every G consecutive ranks as one node (several nodes on one machine, for tests): ranks of different nodes share no memory and talk over MPI.",
    parse_positive,
);

pub(crate) static NET_MESSAGE_MAX: Param<u64> = Param::new(
    "RINGREDUCE_NET_MESSAGE_MAX",
    Group::Launcher,
    "a size from 1 byte to 2GiB minus 64 bytes: 64KiB, 1GiB, 1048576 (B, KiB, MiB, GiB, kB, MB, GB)",
    "1GiB",
    "With the mpi feature: the most data bytes one message between nodes carries; a longer copy goes as several messages, in order, its signal with the last (MPI counts a message's bytes in an int).",
    parse_bytes,
);

pub(crate) static MPI: Param<bool> = Param::new(
    "RINGREDUCE_MPI",
    Group::Launcher,
    "0 or 1",
    "1 in builds with the mpi feature",
    "0: do not bootstrap through MPI under mpirun (join through the store, one machine, as without the mpi feature).",
    parse_flag,
);

// -- where NCCL is looked for ----------------------------------------------

/// `NCCL_HOME`: where NCCL is looked for first.
pub static NCCL_HOME: Param<PathBuf> = Param::new(
    "NCCL_HOME",
    Group::NcclSearch,
    A_PATH,
    "not searched",
    "An NCCL installation (its lib/libnccl.so.2) or the library file itself, searched first after --nccl-lib.",
    parse_path,
);
pub(crate) static VIRTUAL_ENV: Param<PathBuf> = Param::new(
    "VIRTUAL_ENV",
    Group::NcclSearch,
    A_PATH,
    "not searched",
    "A Python virtual environment whose nvidia-nccl wheel is searched.",
    parse_path,
);
pub(crate) static CONDA_PREFIX: Param<PathBuf> = Param::new(
    "CONDA_PREFIX",
    Group::NcclSearch,
    A_PATH,
    "not searched",
    "A conda environment whose lib/ and nvidia-nccl wheel are searched.",
    parse_path,
);
pub(crate) static HOME: Param<PathBuf> = Param::new(
    "HOME",
    Group::NcclSearch,
    A_PATH,
    "not searched",
    "The user's ~/.local Python packages are searched for the nvidia-nccl wheel.",
    parse_path,
);

/// Variables read only by the test suites (`tests/`, `#[ignore]`d unit
/// tests), listed so that `ringreduce env` does not take them for typos.
pub(crate) const TEST_ONLY: [(&str, &str); 3] = [
    (
        "RINGREDUCE_BIN",
        "the ringreduce binary the integration tests run (default: the one cargo built)",
    ),
    (
        "RINGREDUCE_PLOT_DIR",
        "where the ignored plot-review test writes its SVGs (default: the temporary directory)",
    ),
    (
        "RINGREDUCE_PLOT_JSON",
        "a bench JSON the ignored plot-review test also draws",
    ),
];

/// `TEST_ONLY` with each variable's value now.
pub fn test_only() -> Vec<(&'static str, &'static str, Option<OsString>)> {
    TEST_ONLY
        .iter()
        .map(|(name, doc)| (*name, *doc, std::env::var_os(name)))
        .collect()
}

/// `RINGREDUCE_TIMEOUT`, or 60 s (`DEFAULT_TIMEOUT`) when unset.
pub fn timeout() -> Result<Duration> {
    Ok(TIMEOUT.get()?.unwrap_or(DEFAULT_TIMEOUT))
}

/// A `--timeout`-like argument `flag` of `t` seconds, checked.
pub fn timeout_arg(flag: &str, t: f64) -> Result<Duration> {
    check_seconds(t).map_err(|why| {
        Error::BadArgument(format!("{flag} must be {TIMEOUT_RANGE} (got {t}: {why})"))
    })
}

/// The faults `RINGREDUCE_FAULT` injects (none when unset).
pub(crate) fn env_faults() -> Result<Vec<crate::fault::EnvFault>> {
    Ok(FAULT.get()?.unwrap_or_default())
}

/// The `NCCL_*` and `RINGREDUCE_*` variables of the environment, as
/// `(name, value)` in the environment's order: what the reports of `bench`
/// and `overlap` record (a value that is not UTF-8 is shown lossily).
pub fn reported() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| k.starts_with("NCCL_") || k.starts_with("RINGREDUCE_"))
        .collect()
}

#[cfg(test)]
mod tests;
