//! The command line's commands, one file each; `main.rs` only parses and
//! dispatches. Every command validates all of its arguments before it loads
//! a library or builds an engine, writes to stdout through [`Out`] (a closed
//! pipe ends the command quietly), and reports progress on stderr.

pub mod bench;
pub mod check;
pub mod compare;
pub mod env;
pub mod launch;
pub mod overlap;
pub mod run;
pub mod soak;
pub mod theory;
pub mod topo;
pub mod trace;

use crate::backend::BackendChoice;
use crate::element::{DataType, ReduceOp};
use crate::engine::EngineConfig;
use crate::error::{Error, Result};
use crate::plan::Collective;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Standard output that turns a closed pipe into [`Error::BrokenPipe`]-like
/// quiet exit instead of a panic.
pub struct Out;

static QUIET: AtomicBool = AtomicBool::new(false);

/// Print nothing to stdout from now on ([`out`] and [`out_raw`] do
/// nothing): the ranks other than 0 of a multi-process job, whose report
/// rank 0 prints.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Print one line (or several) to stdout.
pub fn out(s: impl AsRef<str>) -> Result<()> {
    if QUIET.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut o = std::io::stdout().lock();
    let r = o
        .write_all(s.as_ref().as_bytes())
        .and_then(|_| o.write_all(b"\n"))
        .and_then(|_| o.flush());
    r.map_err(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe => Error::Closed,
        _ => Error::Io {
            path: "stdout".into(),
            source: e,
        },
    })
}

/// Print without a newline.
pub fn out_raw(s: &str) -> Result<()> {
    if QUIET.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())
        .and_then(|_| o.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Error::Closed,
            _ => Error::Io {
                path: "stdout".into(),
                source: e,
            },
        })
}

/// Options of every command that builds an engine.
#[derive(clap::Args, Clone, Debug)]
pub struct Common {
    /// Number of ranks (default: 4 on the CPU, one per GPU on CUDA).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Backend: auto picks CUDA when a driver and a GPU are present.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// GPUs to use, comma-separated (default: all); with more ranks than
    /// GPUs, ranks go in blocks (4 on 0,1: 0,0,1,1); list a GPU more than
    /// once to place them by hand.
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Give up on any wait after this many seconds (default:
    /// RINGREDUCE_TIMEOUT or 60).
    #[arg(long)]
    pub timeout: Option<f64>,
}

impl Common {
    /// The engine configuration; argument errors first. In a rank process of
    /// a multi-process job (started by `ringreduce launch` or `mpirun`, see
    /// [`crate::process::JobSpec::from_env`]) the configuration is that
    /// rank's, the rank count is the job's, and only rank 0 prints.
    pub fn config(&self) -> Result<EngineConfig> {
        let timeout = self
            .timeout
            .map(|t| crate::param::timeout_arg("--timeout", t))
            .transpose()?;
        // Every RINGREDUCE_* setting, before anything runs.
        crate::param::check_settings()?;
        if let Some(spec) = crate::process::JobSpec::from_env()? {
            if let Some(n) = self.ranks.filter(|&n| n != spec.size) {
                return Err(Error::BadArgument(format!(
                    "--ranks {n}, but this process is rank {} of a job of {} processes (leave --ranks out, or set RINGREDUCE_MULTIPROC=0 to ignore the job's environment)",
                    spec.rank, spec.size
                )));
            }
            if let Some(d) = &self.devices {
                if d.is_empty() {
                    return Err(Error::BadArgument(
                        "--devices needs at least one GPU".into(),
                    ));
                }
            }
            set_quiet(spec.rank != 0);
            let mut cfg = EngineConfig::new(spec.size, self.backend);
            cfg.devices = self.devices.clone();
            if let Some(t) = timeout {
                cfg.timeout = t;
            }
            cfg.process = Some(spec);
            return Ok(cfg);
        }
        let ranks = match self.ranks {
            Some(0) => return Err(Error::ZeroRanks),
            Some(n) if n > crate::engine::MAX_RANKS => {
                return Err(Error::TooManyRanks {
                    ranks: n,
                    max: crate::engine::MAX_RANKS,
                })
            }
            Some(n) => n,
            None => match self.backend {
                BackendChoice::Cpu => 4,
                _ => match crate::backend::cuda::probe() {
                    Ok(info) => self.devices.as_ref().map_or(info.devices.len(), Vec::len),
                    Err(_) => 4,
                },
            },
        };
        if let Some(d) = &self.devices {
            if d.is_empty() {
                return Err(Error::BadArgument(
                    "--devices needs at least one GPU".into(),
                ));
            }
        }
        let mut cfg = EngineConfig::new(ranks, self.backend);
        cfg.devices = self.devices.clone();
        if let Some(t) = timeout {
            cfg.timeout = t;
        }
        Ok(cfg)
    }
}

/// `-d/--datatype`, `-o/--op` and `--collective`, each a list or `all`.
#[derive(clap::Args, Clone, Debug)]
pub struct Kinds {
    /// Data types, comma-separated, or all (nccl-tests names: int8 uint8
    /// int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2).
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// Reduce ops, comma-separated, or all (sum prod max min avg).
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Collectives, comma-separated, or all (all-reduce reduce-scatter
    /// all-gather).
    #[arg(long, default_value = "all-reduce")]
    pub collective: String,
}

/// What [`Kinds`] asks for, parsed.
#[derive(Debug, Clone)]
pub struct Combos {
    pub dtypes: Vec<DataType>,
    pub ops: Vec<ReduceOp>,
    pub collectives: Vec<Collective>,
}

impl Kinds {
    pub fn parse(&self) -> Result<Combos> {
        let dtypes = DataType::parse_list(&self.datatype).map_err(Error::BadArgument)?;
        let ops = ReduceOp::parse_list(&self.op).map_err(Error::BadArgument)?;
        let collectives = parse_collectives(&self.collective)?;
        Ok(Combos {
            dtypes,
            ops,
            collectives,
        })
    }

    /// Exactly one of each (for `run` and `trace`).
    pub fn single(&self) -> Result<(DataType, ReduceOp, Collective)> {
        let c = self.parse()?;
        match (c.dtypes.as_slice(), c.ops.as_slice(), c.collectives.as_slice()) {
            ([d], [o], [k]) => Ok((*d, *o, *k)),
            _ => Err(Error::BadArgument(
                "this command takes one data type, one op and one collective (check and bench take lists)".into(),
            )),
        }
    }
}

impl Combos {
    /// Every (collective, type, op) to run; all-gather has no op, so it
    /// appears once per type (with `sum`).
    pub fn each(&self) -> Vec<(Collective, DataType, ReduceOp)> {
        let mut v = Vec::new();
        for &c in &self.collectives {
            for &d in &self.dtypes {
                if c.reduces() {
                    for &o in &self.ops {
                        v.push((c, d, o));
                    }
                } else {
                    v.push((c, d, ReduceOp::Sum));
                }
            }
        }
        v
    }
}

/// How `--algo auto` picks its path, for reports: by size, or the path
/// `RINGREDUCE_ALGO` forces.
pub fn auto_source() -> Result<String> {
    Ok(match crate::param::forced_algo()? {
        Some(v) => format!("auto, forced by RINGREDUCE_ALGO={v}; --algo overrides it"),
        None => "auto; choose with --algo".into(),
    })
}

/// A comma-separated list of collectives, or `all`.
pub fn parse_collectives(s: &str) -> Result<Vec<Collective>> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Collective::ALL.to_vec());
    }
    let mut v: Vec<Collective> = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let c = Collective::parse(part).map_err(Error::BadArgument)?;
        if !v.contains(&c) {
            v.push(c);
        }
    }
    if v.is_empty() {
        return Err(Error::BadArgument(
            "--collective needs at least one collective".into(),
        ));
    }
    Ok(v)
}

/// Host memory this machine can give the process: `RINGREDUCE_HOST_MEMORY`
/// if set (machines whose memory grows on demand report too little; a
/// malformed value is an error), else MemAvailable.
pub fn host_memory_available() -> Result<Option<u64>> {
    if let Some(b) = crate::param::HOST_MEMORY.get()? {
        return Ok(Some(b));
    }
    Ok(crate::backend::cpu::host_memory().map(|(avail, _)| avail))
}

/// Error unless `need` bytes of host memory are available for `what`.
pub fn check_host_memory(need: u128, what: &str) -> Result<()> {
    let need = u64::try_from(need).unwrap_or(u64::MAX);
    if let Some(avail) = host_memory_available()? {
        if need > avail {
            return Err(Error::OutOfMemory {
                what: what.to_string(),
                memory: "host memory".into(),
                need,
                available: avail,
                is_free: true,
                hint: "use a smaller size or fewer ranks (RINGREDUCE_HOST_MEMORY overrides the estimate of what is available)".into(),
            });
        }
    }
    Ok(())
}

/// Elements of `dtype` for `--count` or `--size` (default 4 MiB).
pub fn parse_count(count: Option<&str>, size: Option<&str>, dtype: DataType) -> Result<usize> {
    let too_big = |input: &str| Error::BadSize {
        input: input.to_string(),
        reason: "too large for this machine".into(),
    };
    match (count, size) {
        (Some(c), _) => {
            let v = crate::size::parse_size(c)?;
            usize::try_from(v).map_err(|_| too_big(c))
        }
        (None, s) => {
            let s = s.unwrap_or("4MiB");
            let b = crate::size::parse_size(s)?;
            let e = dtype.size() as u64;
            if b % e != 0 {
                return Err(Error::BadSize {
                    input: s.to_string(),
                    reason: format!(
                        "not a whole number of {} elements ({e} bytes)",
                        dtype.name()
                    ),
                });
            }
            usize::try_from(b / e).map_err(|_| too_big(s))
        }
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
