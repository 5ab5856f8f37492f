//! Benchmark results: data types, nccl-tests-style text, JSON, CSV and an SVG plot.
//!
//! One file per layer: the types live here, [`text`](Report::render_all) in
//! `text.rs`, [JSON](Report::to_json) in `json.rs`, [CSV](Report::to_csv) in
//! `csv.rs`, the [SVG plot](Report::to_svg) in `svg.rs`, and the output-file
//! checks and atomic writes ([`check_outputs`]) in `output.rs`.
//!
//! # Definitions (as in nccl-tests, `doc/PERFORMANCE.md`)
//!
//! For a collective over `N` ranks whose [`Row::size`] is `S` bytes and that
//! takes `t` seconds:
//!
//! * **algbw** = `S / t`, in GB/s with 1 GB = 1e9 B ([`algbw_gbps`]).
//! * **busbw** = `algbw * factor` ([`Collective::bus_factor`]): `2(N-1)/N` for all-reduce,
//!   `(N-1)/N` for reduce-scatter and all-gather. The factor is the fraction
//!   of the data each rank must send (and receive) in an optimal algorithm, so
//!   busbw is comparable with the link's hardware bandwidth and independent of
//!   `N`. As in nccl-tests the factor is `0` for `N = 1`, so a single rank
//!   reports a busbw of 0.
//!
//! A [`Measurement`] whose `wrong` is `None` was not checked and prints `N/A`,
//! like nccl-tests run with `-c 0`. A non-positive or non-finite time yields
//! `algbw = busbw = 0` (rather than infinity) so the JSON output stays valid.
//!
//! # Several collectives, types and operators
//!
//! Each [`Row`] names its collective, element type and reduction operator; a
//! [`Combo`] is one such triple. The text output has one block of tables per
//! combination present ([`Report::combos`], order of first appearance); the
//! JSON and CSV hold every row; the plot shows the first combination.
//!
//! # Text output
//!
//! [`Report::render_algo_table`] reproduces the nccl-tests column layout
//! character for character (116 columns; a row's `path`, if any, is appended
//! after the last column). Every other line [`Report::render_all`] produces
//! starts with `#`, so tools that parse nccl-tests output by skipping `#`
//! lines see only the data rows.
//!
//! # Output files
//!
//! Every file a command writes goes through `output.rs`: call
//! [`check_files`] (or [`check_outputs`] for `bench`'s three) before a long
//! run so that a bad path, a wrong extension or two outputs naming the same
//! file fail at once; [`write_output`] (and [`Report::write_json`],
//! [`Report::write_csv`], [`Report::write_svg`]) replace a regular file
//! atomically (temporary file in its directory, renamed onto it: an
//! interrupted run never leaves a truncated file, a failed write leaves the
//! old file as it was), follow symbolic links, write a hard-linked file in
//! place and write devices, FIFOs and `/dev/stdout` through, never renaming
//! over them. The rules are in that module's documentation.

use std::fmt;
use std::io;
use std::path::PathBuf;

use ringreduce::element::{DataType, ReduceOp};
use ringreduce::plan::Collective;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod csv;
mod json;
mod output;
mod svg;
mod text;

pub use output::{check_files, check_outputs, is_written_through, write_output, Format};

/// [`Row::collective`] of an all-reduce (`"all-reduce"` in JSON and CSV).
pub const ALL_REDUCE: Collective = Collective::AllReduce;
/// [`Row::collective`] of a reduce-scatter (`"reduce-scatter"`).
pub const REDUCE_SCATTER: Collective = Collective::ReduceScatter;
/// [`Row::collective`] of an all-gather (`"all-gather"`).
pub const ALL_GATHER: Collective = Collective::AllGather;

/// Errors from checking output paths and writing the JSON, CSV and SVG files.
///
/// `flag` fields name the command-line flag the path came from
/// (`-J/--json`, `--csv`, `--plot`, `--timeline`, `--svg`, ...).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory that would hold an output file does not exist.
    #[error("{flag} {}: directory {} does not exist", .path.display(), .dir.display())]
    NoSuchDir {
        flag: &'static str,
        path: PathBuf,
        dir: PathBuf,
    },
    /// What would be the directory of an output file is not a directory.
    #[error("{flag} {}: {} is not a directory", .path.display(), .dir.display())]
    NotADir {
        flag: &'static str,
        path: PathBuf,
        dir: PathBuf,
    },
    /// A file cannot be created in the directory of an output file.
    #[error("{flag} {}: cannot create a file in directory {}: {source}{}", .path.display(), .dir.display(),
        if source.kind() == io::ErrorKind::NotFound {
            " (the directory exists, but its file system takes no new files, as /proc and /sys do: write the file elsewhere)"
        } else { "" })]
    NotWritable {
        flag: &'static str,
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The output path is a directory or has no file name.
    #[error("{flag} {}: names a directory, not a file", .path.display())]
    NotAFile { flag: &'static str, path: PathBuf },
    /// Two outputs name the same file.
    #[error("{first} and {second} both name the file {}; give each output its own path", .path.display())]
    SamePath {
        first: &'static str,
        second: &'static str,
        path: PathBuf,
    },
    /// An output's path does not end in the extension of what it holds
    /// (see [`check_files`]).
    #[error("{flag} {}: {}, but this output is {}: give a path ending in .{expected} (a device, a FIFO or /dev/stdout may be named as it is)", .path.display(), found_detail(.found), .expected.to_ascii_uppercase())]
    WrongExtension {
        flag: &'static str,
        path: PathBuf,
        /// The path's extension, if any (e.g. `png`).
        found: Option<String>,
        /// The extension it must have, without the dot (`json`, `csv`,
        /// `svg`).
        expected: &'static str,
    },
    /// An output path cannot be resolved (a loop of symbolic links, a
    /// directory that cannot be searched, ...).
    #[error("{flag} {}: {source}", .path.display())]
    BadPath {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An existing file, device, FIFO or descriptor named as an output may
    /// not be written by this process.
    #[error("{flag} {}: cannot write to this {what}: {source}", .path.display())]
    CannotWrite {
        flag: &'static str,
        path: PathBuf,
        /// What the path is (`file`, `character device`, `FIFO`, ...).
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// Writing an output failed; `what` says what became of the file.
    #[error("{flag} {}: {what}: {source}", .path.display())]
    Write {
        flag: &'static str,
        path: PathBuf,
        what: String,
        #[source]
        source: io::Error,
    },
    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The plotting library reported an error.
    #[error("plotting failed: {0}")]
    Plot(String),
}

fn found_detail(found: &Option<String>) -> String {
    match found {
        Some(e) => format!("ends in .{e}"),
        None => "has no extension".into(),
    }
}

/// One timed configuration (out-of-place or in-place).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    /// Mean time per call, microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s (1e9 B/s).
    pub algbw: f64,
    /// Bus bandwidth, GB/s (1e9 B/s).
    pub busbw: f64,
    /// Number of wrong elements; `None` = not checked (printed `N/A`).
    pub wrong: Option<u64>,
}

impl Measurement {
    /// Builds a measurement, computing algbw and busbw from the collective,
    /// the size ([`Row::size`]), the rank count and the time.
    pub fn new(
        collective: Collective,
        size_bytes: u64,
        ranks: usize,
        time_us: f64,
        wrong: Option<u64>,
    ) -> Self {
        let algbw = algbw_gbps(size_bytes, time_us);
        Measurement {
            time_us,
            algbw,
            busbw: algbw * collective.bus_factor(ranks),
            wrong,
        }
    }
}

/// `size_bytes / time` in GB/s (1e9 B/s); 0 when `time_us` is not a positive
/// finite number.
pub fn algbw_gbps(size_bytes: u64, time_us: f64) -> f64 {
    if time_us.is_finite() && time_us > 0.0 {
        // bytes / (us * 1e-6 s) / 1e9 = bytes / (us * 1e3)
        size_bytes as f64 / (time_us * 1e3)
    } else {
        0.0
    }
}

fn default_collective() -> Collective {
    ALL_REDUCE
}

/// A collective, a type or an op as its name (the text the rows had when
/// they carried strings).
fn name_of<S: Serializer, T: Copy + Into<Name>>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str((*v).into().0)
}

/// A name in a report's rows: [`Collective::name`], [`DataType::name`],
/// [`ReduceOp::name`], or `none` (the op of a collective that does not
/// reduce).
struct Name(&'static str);

impl From<Collective> for Name {
    fn from(c: Collective) -> Name {
        Name(c.name())
    }
}

impl From<DataType> for Name {
    fn from(d: DataType) -> Name {
        Name(d.name())
    }
}

impl From<Option<ReduceOp>> for Name {
    fn from(o: Option<ReduceOp>) -> Name {
        Name(o.map_or("none", ReduceOp::name))
    }
}

fn parsed<'de, D: Deserializer<'de>, T>(
    d: D,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

fn collective_named<'de, D: Deserializer<'de>>(d: D) -> Result<Collective, D::Error> {
    parsed(d, Collective::parse)
}

fn dtype_named<'de, D: Deserializer<'de>>(d: D) -> Result<DataType, D::Error> {
    parsed(d, str::parse)
}

fn op_named<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ReduceOp>, D::Error> {
    parsed(d, |s| match s {
        "none" => Ok(None),
        s => s.parse().map(Some),
    })
}

/// One line of results: one algorithm at one message size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Algorithm name, e.g. `"ring"` or `"nccl"`; the plot's series key.
    pub algo: String,
    /// Optional implementation path detail, e.g. `"ring:pipe4"`; `"a/b"`
    /// when the out-of-place and in-place calls ran different paths.
    pub path: Option<String>,
    /// Number of ranks.
    pub ranks: usize,
    /// Bytes, as nccl-tests counts them: the buffer of each rank for
    /// all-reduce; the whole gathered buffer (`N` chunks) for reduce-scatter
    /// and all-gather. algbw is this over the time.
    pub size: u64,
    /// Elements in `size`.
    pub count: u64,
    /// Collective: [`ALL_REDUCE`], [`REDUCE_SCATTER`] or [`ALL_GATHER`],
    /// written by name, `"all-reduce"` (JSON written before this field
    /// existed loads as all-reduce).
    #[serde(
        default = "default_collective",
        serialize_with = "name_of",
        deserialize_with = "collective_named"
    )]
    pub collective: Collective,
    /// Element type, written by name, e.g. `"float"`.
    #[serde(
        rename = "type",
        serialize_with = "name_of",
        deserialize_with = "dtype_named"
    )]
    pub dtype: DataType,
    /// Reduction operator, written by name, e.g. `"sum"`; `None` (`"none"`)
    /// for a collective that does not reduce.
    #[serde(serialize_with = "name_of", deserialize_with = "op_named")]
    pub redop: Option<ReduceOp>,
    /// Out-of-place result (separate send and receive buffers).
    pub out_of_place: Option<Measurement>,
    /// In-place result (receive buffer = send buffer).
    pub in_place: Option<Measurement>,
}

impl Row {
    /// [`Row::redop`]'s name: `"sum"`, or `"none"` without a reduction.
    pub fn redop_name(&self) -> &'static str {
        Name::from(self.redop).0
    }
}

/// One (collective, type, op) combination: the rows that share a table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Combo {
    /// [`Row::collective`].
    pub collective: String,
    /// [`Row::dtype`].
    pub dtype: String,
    /// [`Row::redop`].
    pub redop: String,
}

impl Combo {
    /// The combination of `row`.
    pub fn of(row: &Row) -> Self {
        Combo {
            collective: row.collective.name().into(),
            dtype: row.dtype.name().into(),
            redop: row.redop_name().into(),
        }
    }

    /// Whether `row` belongs to this combination.
    pub fn matches(&self, row: &Row) -> bool {
        row.collective.name() == self.collective
            && row.dtype.name() == self.dtype
            && row.redop_name() == self.redop
    }
}

impl fmt::Display for Combo {
    /// `all-reduce float sum`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.collective, self.dtype, self.redop)
    }
}

/// Cold-start cost of one algorithm at one size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ColdStart {
    /// Algorithm name.
    pub algo: String,
    /// Bytes per rank.
    pub size: u64,
    /// Communicator / buffer setup, milliseconds.
    pub setup_ms: f64,
    /// First call (including lazy initialisation), milliseconds.
    pub first_call_ms: f64,
    /// Steady-state time per call after warm-up, microseconds.
    pub steady_us: f64,
}

/// Run metadata, printed as `#` lines before the tables.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// Tool name.
    pub tool: String,
    /// Tool version.
    pub version: String,
    /// Date/time of the run.
    pub date: String,
    /// Command line.
    pub command: String,
    /// Hardware description lines (the first one appears in the plot title).
    pub hardware: Vec<String>,
    /// Driver version, if known.
    pub driver: Option<String>,
    /// NCCL version, if NCCL was used.
    pub nccl_version: Option<String>,
    /// Number of ranks.
    pub ranks: usize,
    /// Number of devices.
    pub devices: usize,
    /// `rank_to_device[r]` is the device rank `r` runs on.
    pub rank_to_device: Vec<usize>,
    /// Backend name, e.g. `"cuda"` or `"cpu"`, optionally followed by `:` and
    /// details (the plot title shows the name only).
    pub backend: String,
    /// How time was measured.
    pub timing: String,
    /// Timed iterations per measurement.
    pub iters: usize,
    /// Warm-up iterations per measurement.
    pub warmup: usize,
    /// Measured peer-copy bandwidth ceiling, GB/s.
    pub link_ceiling_gbps: Option<f64>,
    /// Free-form notes.
    pub notes: Vec<String>,
    /// The alpha-beta model fitted to each path's own all-reduce rows
    /// (JSON written before this field existed loads without it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelFit>,
}

impl Header {
    /// The run was on the CPU backend (its description starts `cpu:`, as
    /// every CPU backend's does): ranks are host threads or processes, with
    /// no device.
    pub fn on_cpu(&self) -> bool {
        self.backend.starts_with("cpu")
    }
}

/// One path's alpha-beta model fitted to that path's own all-reduce rows
/// of a sweep: with `l = rounds·alpha` and `b = link_bytes / beta` (the
/// path's [`crate::theory::Cost`] terms), `time = max(l, b) +
/// (1 - overlap)·min(l, b)` (see [`crate::theory::Fit`] and
/// [`crate::theory::fit`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelFit {
    /// The path whose rows were fitted (`ring`, `ring:pipe2`, `ps`, ...;
    /// `X:graph` for X replayed from CUDA graphs).
    pub path: String,
    /// The path's cost in the article's notation.
    pub formula: String,
    /// Latency per dependent round, microseconds.
    pub alpha_us: f64,
    /// Effective bandwidth per link direction, GB/s (1e9 B/s); the reduce
    /// is included.
    pub beta_gbps: f64,
    /// How many rows were fitted.
    pub rows: usize,
    /// The fraction of the smaller term hidden under the larger (0: the
    /// classic sum; reports from before the overlap was fitted have none).
    #[serde(default)]
    pub overlap: f64,
}

/// Where the time of one size's call went, from timelines of isolated calls
/// (`bench --breakdown`), microseconds, means over the calls and ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BreakdownRow {
    /// Bytes per rank.
    pub size: u64,
    /// The path that ran.
    pub path: String,
    /// Timed calls (each on idle devices).
    pub calls: usize,
    /// The fitted model's time.
    pub model_us: Option<f64>,
    /// The sweep's time (back-to-back calls).
    pub sweep_us: Option<f64>,
    /// One isolated call: from the launch to the rank's last op's end.
    pub wall_us: f64,
    /// Launch to the rank's first op's start.
    pub issue_us: f64,
    /// Idle while a lane waits for another rank.
    pub wait_us: f64,
    /// A copy runs.
    pub copy_us: f64,
    /// A reduce or exchange kernel runs and no copy does.
    pub reduce_us: f64,
    /// Everything else.
    pub rest_us: f64,
    /// Where the op times came from: the timeline's `timing source: ...`
    /// line (empty in reports written before it was recorded).
    #[serde(default)]
    pub timing: String,
}

/// A complete benchmark report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Run metadata.
    pub header: Header,
    /// Cold-start measurements.
    pub cold_start: Vec<ColdStart>,
    /// Result rows, in the order they were measured.
    pub rows: Vec<Row>,
    /// Where each size's time went (`bench --breakdown`; absent in older
    /// JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakdown: Vec<BreakdownRow>,
}

impl Report {
    /// Algorithm names in order of first appearance in `rows` (all
    /// combinations).
    pub fn algos(&self) -> Vec<&str> {
        first_appearances(self.rows.iter().map(|r| r.algo.as_str()))
    }

    /// The (collective, type, op) combinations present, in order of first
    /// appearance in `rows`.
    pub fn combos(&self) -> Vec<Combo> {
        let mut out: Vec<Combo> = Vec::new();
        for r in &self.rows {
            if !out.iter().any(|c| c.matches(r)) {
                out.push(Combo::of(r));
            }
        }
        out
    }

    /// The rows of one combination, in order.
    pub fn rows_of<'a>(&'a self, combo: &'a Combo) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| combo.matches(r))
    }
}

/// Distinct items in order of first appearance.
fn first_appearances<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for s in items {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Shared fixtures of the format modules' tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub const GIB: u64 = 1 << 30;

    pub fn header() -> Header {
        Header {
            tool: "ringreduce".into(),
            version: "0.1.0".into(),
            date: "2025-01-01T00:00:00Z".into(),
            command: "ringreduce bench -b 8 -e 1G".into(),
            hardware: vec!["NVIDIA H200".into(), "2x AMD EPYC".into()],
            driver: Some("560.35".into()),
            nccl_version: Some("2.23.4".into()),
            ranks: 2,
            devices: 2,
            rank_to_device: vec![0, 1],
            backend: "cuda".into(),
            timing: "cuda events".into(),
            iters: 20,
            warmup: 5,
            link_ceiling_gbps: Some(350.0),
            notes: vec!["synthetic".into()],
            models: Vec::new(),
        }
    }

    pub fn row(algo: &str, path: Option<&str>, size: u64, oop_us: f64, ip_us: f64) -> Row {
        Row {
            algo: algo.into(),
            path: path.map(String::from),
            ranks: 2,
            size,
            count: size / 4,
            collective: ALL_REDUCE,
            dtype: DataType::Float,
            redop: Some(ReduceOp::Sum),
            out_of_place: Some(Measurement::new(ALL_REDUCE, size, 2, oop_us, Some(0))),
            in_place: Some(Measurement::new(ALL_REDUCE, size, 2, ip_us, None)),
        }
    }

    pub fn report() -> Report {
        Report {
            header: header(),
            cold_start: vec![
                ColdStart {
                    algo: "nccl".into(),
                    size: 8,
                    setup_ms: 400.0,
                    first_call_ms: 100.0,
                    steady_us: 18.0,
                },
                ColdStart {
                    algo: "ring".into(),
                    size: 8,
                    setup_ms: 40.0,
                    first_call_ms: 10.0,
                    steady_us: 25.0,
                },
            ],
            rows: vec![
                row("nccl", None, 8, 18.47, 18.29),
                row("ring", Some("ring:pipe4"), 8, 30.0, 31.0),
                row("nccl", None, 1 << 20, 150.0, 160.0),
                row("ring", Some("ring:pipe4"), 1 << 20, 100.0, 200.0),
                row("nccl", None, GIB, 2740.0, 2750.0),
                row("ring", Some("ring:pipe1"), GIB, 12345.6, 3000.0),
            ],
            breakdown: vec![],
        }
    }

    /// `row` for another collective / type / op, measured with its factor.
    pub fn row_of(algo: &str, collective: Collective, dtype: &str, size: u64, us: f64) -> Row {
        Row {
            collective,
            dtype: dtype.parse().unwrap(),
            out_of_place: Some(Measurement::new(collective, size, 2, us, Some(0))),
            in_place: None,
            ..row(algo, None, size, us, us)
        }
    }

    /// A unique path in the temp directory for one test.
    pub fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("ringreduce_{}_{name}", std::process::id()))
    }
}

#[cfg(test)]
mod tests;
