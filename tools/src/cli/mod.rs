//! The command line's commands, one file each; `main.rs` only parses and
//! dispatches. Every command validates all of its arguments before it loads
//! a library or builds an engine, writes to stdout through [`Out`] (a closed
//! pipe makes it quiet: it ends at once, or runs on to write the output
//! files it was asked for), and reports progress on stderr through
//! [`note!`](crate::note) (a closed stderr loses the line, never panics).

pub mod bench;
pub mod check;
pub mod compare;
pub mod cuda;
pub mod env;
pub mod launch;
pub mod overlap;
pub mod run;
pub mod soak;
pub mod theory;
pub mod topo;
pub mod trace;

use ringreduce::backend::BackendChoice;
use ringreduce::element::{DataType, ReduceOp};
use ringreduce::engine::EngineConfig;
use ringreduce::error::{Error, Result};
use ringreduce::plan::Collective;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// For a clap error about a negative value given to a flag that takes a
/// whole number: the message naming the flag, what was typed and what is
/// accepted (clap's own says "invalid digit found in string").
pub fn negative_value(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let get = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let flag = get(ContextKind::InvalidArg)?;
    let value = get(ContextKind::InvalidValue)?;
    if !value.trim_start().starts_with('-') {
        return None;
    }
    let flag = flag.split(' ').next().unwrap_or(&flag).to_string();
    Some(format!(
        "{flag} {value:?}: a count cannot be negative; accepted: a whole number (0, 1, 2, ...) in the flag's range (ringreduce {} --help)",
        std::env::args().nth(1).unwrap_or_default()
    ))
}

/// `--backend`: auto, cpu or cuda, listed in `--help` with what auto means
/// (the library's [`BackendChoice`] parses the value).
pub fn backend_arg() -> impl clap::builder::TypedValueParser<Value = BackendChoice> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("auto").help("CUDA when a driver and a GPU are present, otherwise CPU"),
        PossibleValue::new("cpu"),
        PossibleValue::new("cuda"),
    ])
    .try_map(|s| s.parse::<BackendChoice>())
}

/// Standard output, written through [`out`] and [`out_raw`] (and
/// [`write_stdout`] for an output file named `/dev/stdout`).
///
/// A closed stdout (`| head -1`, a reader that went away) never panics and
/// is never an error. What it does depends on whether the command was asked
/// for output files (any path but `/dev/stdout` given to
/// [`crate::report::check_files`],
/// which every command checks its `--json`/`--csv`/`--plot`/`--svg`/
/// `--timeline` paths with before it runs):
///
/// * **no output file:** the print returns [`closed`] and the
///   command ends at once, quietly, with exit status 0 (nobody reads the
///   rest, so the rest of a long sweep is not run);
/// * **output files requested:** stdout goes quiet (every later print does
///   nothing) and the command runs on, so that every file is still written;
///   its exit status is the one it would have had (0, 1 for a failed check,
///   2 for an error), the closed pipe changing nothing.
pub struct Out;

static QUIET: AtomicBool = AtomicBool::new(false);
/// Stdout was found closed (a broken pipe): nothing more is written to it.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// The command was asked for at least one output file.
static FILES: AtomicBool = AtomicBool::new(false);

/// End the command with exit status `code`. When a rank thread was left
/// stuck in a driver call (its pool broke: a peer died under GPU work), the
/// process ends at once without the C exit handlers, whose CUDA part would
/// wait for that thread forever); otherwise
/// `code` is returned for `main` to end normally.
pub fn finish(code: u8) -> std::process::ExitCode {
    if ringreduce::engine::threads_left_stuck() > 0 {
        ringreduce::os::exit_now(code);
    }
    std::process::ExitCode::from(code)
}

/// Print nothing to stdout from now on ([`out`] and [`out_raw`] do
/// nothing): the ranks other than 0 of a multi-process job, whose report
/// rank 0 prints.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Say that this command will write output files: from now on a closed
/// stdout makes it quiet instead of ending it (see [`Out`]). Called by
/// [`crate::report::check_files`] when it is given any path.
pub fn expect_files() {
    FILES.store(true, Ordering::Relaxed);
}

/// Whether stdout was found closed (and the command went on quietly for
/// its files).
pub fn stdout_closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Writes `bytes` to stdout and flushes it. A closed stdout is `Ok`: it is
/// remembered, and nothing more is written to it. For the output files
/// written through to this process's own stdout (`-J /dev/stdout`).
pub fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut o = std::io::stdout().lock();
    match o.write_all(bytes).and_then(|()| o.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => r,
    }
}

/// [`write_stdout`] for the text report: nothing when quiet, and a closed
/// stdout ends the command ([`closed`]) unless output files are
/// pending (see [`Out`]).
fn print(bytes: &[u8]) -> Result<()> {
    if QUIET.load(Ordering::Relaxed) {
        return Ok(());
    }
    // Started with `>&-`: std would drop every line without an error, and
    // the command end with status 0 having shown nothing.
    static WAS_CLOSED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !FILES.load(Ordering::Relaxed) && *WAS_CLOSED.get_or_init(ringreduce::os::stdout_was_closed)
    {
        return Err(Error::BadArgument(
            "standard output was closed (>&-): the report has nowhere to go; open it (>/dev/null to drop it), or name an output file (-J/--json, --csv, --plot, --timeline, --svg)".into(),
        ));
    }
    write_stdout(bytes).map_err(|e| Error::Io {
        path: "stdout".into(),
        source: std::sync::Arc::new(e),
    })?;
    if stdout_closed() && !FILES.load(Ordering::Relaxed) {
        return Err(closed());
    }
    Ok(())
}

/// Standard output was closed (`| head -1`) with no output file pending:
/// the command ends quietly ([`is_closed`]).
pub fn closed() -> Error {
    Error::io(
        "stdout",
        std::io::Error::from(std::io::ErrorKind::BrokenPipe),
    )
}

/// Whether `e` is [`closed`]'s error.
pub fn is_closed(e: &Error) -> bool {
    matches!(e, Error::Io { path, source } if path == "stdout" && source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// A report that could not be made or written (JSON, CSV, SVG).
pub fn report_error(e: impl std::fmt::Display) -> Error {
    Error::io("the report", std::io::Error::other(e.to_string()))
}

/// Print one line (or several) to stdout.
pub fn out(s: impl AsRef<str>) -> Result<()> {
    let s = s.as_ref();
    let mut line = String::with_capacity(s.len() + 1);
    line.push_str(s);
    line.push('\n');
    print(line.as_bytes())
}

/// Print without a newline.
pub fn out_raw(s: &str) -> Result<()> {
    print(s.as_bytes())
}

/// `eprintln!` that never panics: a closed or full stderr (`2>&1 | head`)
/// loses the line instead of ending the command before its output files
/// are written; and writes the line at once, so ranks sharing a pipe do
/// not interleave inside a line. Every message of the command line goes
/// through it.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        // One write of the whole line: stderr is unbuffered, and a line
        // written piece by piece interleaves with other processes' lines
        // on a shared pipe (`mpirun`, `launch`: "error: error: ..." was
        // seen).
        let mut line = ::std::format!($($arg)*);
        line.push('\n');
        let _ = ::std::io::stderr().lock().write_all(line.as_bytes());
    }};
}

/// Options of every command that builds an engine.
#[derive(clap::Args, Clone, Debug)]
pub struct Common {
    /// Number of ranks (default: 4 on the CPU, one per GPU on CUDA).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Backend: auto picks CUDA when a driver and a GPU are present.
    #[arg(long, value_parser = crate::cli::backend_arg(), default_value = "auto")]
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
    /// `--devices`, when given, names at least one GPU, and the run is on
    /// GPUs: on the CPU backend (asked for, or `auto` without CUDA) it
    /// would be ignored, so it is refused.
    fn check_devices(&self) -> Result<()> {
        let Some(d) = &self.devices else {
            return Ok(());
        };
        if d.is_empty() {
            return Err(Error::BadArgument(
                "--devices needs at least one GPU".into(),
            ));
        }
        if let Some(why) = self.backend.cpu_reason() {
            return Err(Error::BadArgument(format!(
                "--devices picks GPUs, but this run is on the cpu backend ({why}), which has none: leave --devices out"
            )));
        }
        Ok(())
    }

    /// The engine configuration; argument errors first. In a rank process of
    /// a multi-process job (started by `ringreduce launch` or `mpirun`, see
    /// [`ringreduce::process::JobSpec::from_env`]) the configuration is that
    /// rank's, the rank count is the job's, and only rank 0 prints.
    pub fn config(&self) -> Result<EngineConfig> {
        let timeout = self
            .timeout
            .map(|t| ringreduce::param::timeout_arg("--timeout", t))
            .transpose()?;
        // Every RINGREDUCE_* setting, before anything runs.
        ringreduce::settings::check_settings()?;
        if let Some(spec) = ringreduce::process::JobSpec::from_env()? {
            if let Some(n) = self.ranks.filter(|&n| n != spec.size) {
                return Err(Error::BadArgument(format!(
                    "--ranks {n}, but this process is rank {} of a job of {} processes (leave --ranks out, or set RINGREDUCE_MULTIPROC=0 to ignore the job's environment)",
                    spec.rank, spec.size
                )));
            }
            self.check_devices()?;
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
            Some(n) if n > ringreduce::engine::MAX_RANKS => {
                return Err(Error::TooManyRanks {
                    ranks: n,
                    max: ringreduce::engine::MAX_RANKS,
                })
            }
            Some(n) => n,
            None => match self.backend {
                BackendChoice::Cpu => 4,
                _ => match cuda::gpus() {
                    Ok(gpus) => self.devices.as_ref().map_or(gpus, Vec::len),
                    Err(_) => 4,
                },
            },
        };
        self.check_devices()?;
        let mut cfg = EngineConfig::new(ranks, self.backend);
        cfg.devices = self.devices.clone();
        if let Some(t) = timeout {
            cfg.timeout = t;
        }
        Ok(cfg)
    }
}

/// `-d/--datatype`, `-o/--op` and `--collective`, each a list or `all`.
/// Left out, each takes its default (float, sum, all-reduce; `soak`: all):
/// a value given explicitly is always what runs, even one equal to the
/// default.
#[derive(clap::Args, Clone, Debug)]
pub struct Kinds {
    /// Data types, comma-separated, or all (nccl-tests names: int8 uint8
    /// int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2).
    /// Default: float.
    #[arg(short = 'd', long = "datatype")]
    pub datatype: Option<String>,
    /// Reduce ops, comma-separated, or all (sum prod max min avg). Default:
    /// sum.
    #[arg(short = 'o', long = "op")]
    pub op: Option<String>,
    /// Collectives, comma-separated, or all (all-reduce reduce-scatter
    /// all-gather). Default: all-reduce.
    #[arg(long)]
    pub collective: Option<String>,
}

/// What [`Kinds`] asks for, parsed.
#[derive(Debug, Clone)]
pub struct Combos {
    pub dtypes: Vec<DataType>,
    pub ops: Vec<ReduceOp>,
    pub collectives: Vec<Collective>,
}

impl Kinds {
    /// The lists asked for; float, sum and all-reduce where none was given.
    pub fn parse(&self) -> Result<Combos> {
        self.parse_or("float", "sum", "all-reduce")
    }

    /// The lists asked for; `all` of each where none was given (`soak`).
    pub fn parse_or_all(&self) -> Result<Combos> {
        self.parse_or("all", "all", "all")
    }

    fn parse_or(&self, dtype: &str, op: &str, collective: &str) -> Result<Combos> {
        let flag = |flag: &str, e: String| Error::BadArgument(format!("{flag}: {e}"));
        let dtypes = DataType::parse_list(self.datatype.as_deref().unwrap_or(dtype))
            .map_err(|e| flag("-d/--datatype", e))?;
        let ops = ReduceOp::parse_list(self.op.as_deref().unwrap_or(op))
            .map_err(|e| flag("-o/--op", e))?;
        let collectives = parse_collectives(self.collective.as_deref().unwrap_or(collective))?;
        Ok(Combos {
            dtypes,
            ops,
            collectives,
        })
    }
}

/// `-d/--datatype`, `-o/--op` and `--collective` of the commands that run
/// one call (`run`, `trace`): one of each, never a list.
#[derive(clap::Args, Clone, Debug)]
pub struct OneKind {
    /// Data type (nccl-tests names: int8 uint8 int32 uint32 int64 uint64
    /// half float double bfloat16 f8e4m3 f8e5m2, or an alias such as bf16).
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// Reduce op: sum prod max min avg.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Collective: all-reduce, reduce-scatter or all-gather.
    #[arg(long, default_value = "all-reduce")]
    pub collective: String,
}

impl OneKind {
    /// The one (type, op, collective) asked for; a list is refused, naming
    /// the commands that take lists.
    pub fn single(&self) -> Result<(DataType, ReduceOp, Collective)> {
        let one = |flag: &str, v: &str| {
            if v.contains(',') || v.trim().eq_ignore_ascii_case("all") {
                Err(Error::BadArgument(format!(
                    "{flag} {v:?}: this command runs one call, so it takes one value (bench, check and soak take lists)"
                )))
            } else {
                Ok(())
            }
        };
        one("-d/--datatype", &self.datatype)?;
        one("-o/--op", &self.op)?;
        one("--collective", &self.collective)?;
        let dtype: DataType = self
            .datatype
            .parse()
            .map_err(|e| Error::BadArgument(format!("-d/--datatype: {e}")))?;
        let op: ReduceOp = self
            .op
            .parse()
            .map_err(|e| Error::BadArgument(format!("-o/--op: {e}")))?;
        let collective = Collective::parse(&self.collective)
            .map_err(|e| Error::BadArgument(format!("--collective: {e}")))?;
        Ok((dtype, op, collective))
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

/// NCCL for a command whose contenders may include it (`bench --algo`,
/// `overlap --contenders`), decided before any engine exists:
///
/// * a library named with `--nccl-lib` is an argument: loaded first (a
///   missing file is an error), and refused when no contender is NCCL;
/// * NCCL asked for explicitly must be there: on the CPU backend that is
///   an error saying the CPU backend has no NCCL (not that the library is
///   missing), and a missing library is an error;
/// * NCCL among the default contenders is left out, with a note, on the
///   CPU backend or where the library is not found.
///
/// Returns the library (when a contender is NCCL and it is there) and the
/// note; `contenders` loses NCCL when it is left out.
pub fn nccl_for_contenders(
    contenders: &mut Vec<crate::bench::Contender>,
    by_default: bool,
    backend: BackendChoice,
    lib: Option<&std::path::Path>,
    flag: &str,
) -> Result<(Option<cuda::Nccl>, Option<String>)> {
    use cuda::Nccl;
    let named = lib.map(|p| Nccl::load(Some(p))).transpose()?;
    let wanted = contenders.iter().any(crate::bench::Contender::is_nccl);
    if named.is_some() && !wanted {
        return Err(Error::BadArgument(format!(
            "--nccl-lib names an NCCL library, but no contender is NCCL (add nccl to {flag})"
        )));
    }
    if !wanted {
        return Ok((None, None));
    }
    if let Some(why) = backend.cpu_reason() {
        if by_default {
            contenders.retain(|c| !c.is_nccl());
            return Ok((
                None,
                Some(format!(
                    "nccl left out of the default contenders: the cpu backend has no NCCL ({why}; compare paths with {flag} auto,ring,ps,...)"
                )),
            ));
        }
        let drop = if lib.is_some() {
            format!("leave out --nccl-lib (and nccl from {flag})")
        } else {
            format!("leave nccl out of {flag}")
        };
        return Err(Error::BadArgument(format!(
            "NCCL was asked for, but the cpu backend has no NCCL, which needs GPUs ({why}): {drop}"
        )));
    }
    match named.map_or_else(|| Nccl::load(None), Ok) {
        Ok(lib) => Ok((Some(lib), None)),
        Err(e) if by_default => {
            contenders.retain(|c| !c.is_nccl());
            Ok((
                None,
                Some(format!(
                    "nccl left out of the default contenders: {e} ({flag} auto,nccl makes it required)"
                )),
            ))
        }
        // An NCCL error (without the `cuda` feature: already an Error).
        #[cfg_attr(not(feature = "cuda"), allow(clippy::useless_conversion))]
        Err(e) => Err(e.into()),
    }
}

/// How `--algo auto` picks its path, for reports: by size, or the path
/// `RINGREDUCE_ALGO` forces.
pub fn auto_source() -> Result<String> {
    Ok(match ringreduce::algo::forced_algo()? {
        Some(v) => format!("auto, forced by RINGREDUCE_ALGO={v}; --algo overrides it"),
        None => "auto; choose with --algo".into(),
    })
}

/// The algorithm names the command line's collectives run (every name in
/// [`ringreduce::algo::REGISTRY`] but the broadcast's), as help spells them
/// (`ring:pipeK`).
pub fn path_names() -> Vec<&'static str> {
    ringreduce::algo::names()
        .filter(|n| {
            ringreduce::algo::example(n).is_some_and(|a| {
                Collective::ALL
                    .iter()
                    .any(|&c| ringreduce::algo::runs(a.as_ref(), c))
            })
        })
        .collect()
}

/// One path of each of [`path_names`] (`ring:pipeK` as `ring:pipe3`,
/// `hier:G` as `hier:2`):
/// what `--algo all` means.
pub fn all_paths() -> Vec<ringreduce::algo::AlgoChoice> {
    ringreduce::algo::paths()
        .into_iter()
        .filter(|a| {
            Collective::ALL
                .iter()
                .any(|&c| ringreduce::algo::runs(a.as_ref(), c))
        })
        .map(ringreduce::algo::AlgoChoice::Fixed)
        .collect()
}

/// [`path_names`] but `skip`, comma-separated, for help texts.
pub fn path_list(skip: &[&str]) -> String {
    path_names()
        .into_iter()
        .filter(|n| !skip.contains(n))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A comma-separated list of collectives, or `all`.
pub fn parse_collectives(s: &str) -> Result<Vec<Collective>> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Collective::ALL.to_vec());
    }
    let bad = |e: String| Error::BadArgument(format!("--collective: {e}"));
    let mut v: Vec<Collective> = Vec::new();
    for part in ringreduce::words::list_items(s).map_err(bad)? {
        let c = Collective::parse(part).map_err(bad)?;
        if !v.contains(&c) {
            v.push(c);
        }
    }
    Ok(v)
}

/// Host memory this machine can give the process: `RINGREDUCE_HOST_MEMORY`
/// if set (machines whose memory grows on demand report too little; a
/// malformed value is an error), else MemAvailable.
pub fn host_memory_available() -> Result<Option<u64>> {
    if let Some(b) = ringreduce::param::HOST_MEMORY.get()? {
        return Ok(Some(b));
    }
    Ok(ringreduce::os::host_memory().map(|(avail, _)| avail))
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

/// A size argument in bytes (`4MiB`, `1GiB+12`, `100MB`); the error names
/// the flag and the value ("--size \"-1\": a size cannot be negative").
pub fn size_arg(flag: &str, value: &str) -> Result<u64> {
    ringreduce::size::parse_size(value)
        .map_err(|reason| Error::BadArgument(format!("{flag} {value:?}: {reason}")))
}

/// A count argument in elements (`1003`, `4M`); the error names the flag
/// and speaks of elements, never bytes.
pub fn count_arg(flag: &str, value: &str) -> Result<u64> {
    ringreduce::size::parse_count(value)
        .map_err(|r| Error::BadArgument(format!("{flag} {value:?}: {r}")))
}

/// Elements of `dtype` for `--count` or `--size` (default 4 MiB).
pub fn parse_count(count: Option<&str>, size: Option<&str>, dtype: DataType) -> Result<usize> {
    let too_big = |flag: &str, input: &str| {
        Error::BadArgument(format!("{flag} {input:?}: too large for this machine"))
    };
    match (count, size) {
        (Some(c), _) => {
            let v = count_arg("--count", c)?;
            usize::try_from(v).map_err(|_| too_big("--count", c))
        }
        (None, s) => {
            let s = s.unwrap_or("4MiB");
            let b = size_arg("--size", s)?;
            let e = dtype.size() as u64;
            if b % e != 0 {
                return Err(Error::BadArgument(format!(
                    "--size {s:?}: not a whole number of {} elements ({e} bytes each)",
                    dtype.name()
                )));
            }
            usize::try_from(b / e).map_err(|_| too_big("--size", s))
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
