//! Shared helpers and the `test_backend!` macro.
//!
//! Every behaviour is ONE generic body taking a [`BackendChoice`], registered
//! twice by [`test_backend!`]: `name[cpu]` and `name[cuda]`. The CUDA variant
//! reports SKIPPED with the reason when there is no driver or too few GPUs,
//! so the same binary runs everywhere (CI without a GPU, the GPU machine).

use crate::harness::{Outcome, TestResult};
use ringreduce::fault::FaultPlan;
use ringreduce::verify::{self, Inputs};
use ringreduce::{
    AlgoChoice, BackendChoice, CallShape, Collective, Element, Engine, EngineConfig, EveryRank,
    OneRank, RecvBufs, ReduceOp, SendBufs,
};
use ringreduce_tools::bench::{self, Contender, ContenderKind};
use std::time::Duration;

/// Why the CUDA backend cannot run here with `min_gpus` GPUs, if it cannot.
pub fn cuda_skip_reason(min_gpus: usize) -> Option<String> {
    match ringreduce::backend::cuda::probe() {
        Err(e) => Some(format!("no CUDA driver/GPU ({e})")),
        Ok(info) if info.devices.len() < min_gpus => Some(format!(
            "needs {min_gpus} GPUs, found {}",
            info.devices.len()
        )),
        Ok(_) => None,
    }
}

/// GPUs the driver reports (0 without a driver).
pub fn gpu_count() -> usize {
    ringreduce::backend::cuda::probe().map_or(0, |i| i.devices.len())
}

/// Rank counts a test sweeps on backend `b`: CPU 1..=5; CUDA the GPU count
/// and up to twice it (several ranks per GPU), at most 8, at least 1.
pub fn rank_counts(b: BackendChoice) -> Vec<usize> {
    match b {
        BackendChoice::Cuda => {
            let g = gpu_count().max(1);
            (g.min(8)..=(2 * g).min(8)).collect()
        }
        _ => (1..=5).collect(),
    }
}

/// The limit on every wait of the engines the tests build: long enough for
/// any call here, short enough that a hang fails the test instead of CI.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An engine of `ranks` ranks on backend `b` (timeout [`TEST_TIMEOUT`]).
pub fn engine<T: Element>(b: BackendChoice, ranks: usize) -> Result<Engine<T>, String> {
    engine_with(b, ranks, TEST_TIMEOUT, FaultPlan::none())
}

/// An engine with an explicit timeout and injected faults.
pub fn engine_with<T: Element>(
    b: BackendChoice,
    ranks: usize,
    timeout: Duration,
    faults: FaultPlan,
) -> Result<Engine<T>, String> {
    let mut cfg = EngineConfig::new(ranks, b).with_faults(faults);
    cfg.timeout = timeout;
    Engine::<T>::new(cfg).map_err(|e| format!("building a {b:?} engine of {ranks} ranks: {e}"))
}

/// The repository's root (the workspace's; this crate is its `tools/`),
/// for the tests that read the sources and docs.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Parse a path name (`auto`, `ring:pipe2`, ...); panics on a typo in a test.
pub fn algo(name: &str) -> AlgoChoice {
    name.parse()
        .unwrap_or_else(|e| panic!("bad algorithm name {name:?} in a test: {e}"))
}

/// The engine contender for `choice`.
pub fn contender(choice: &AlgoChoice) -> Contender {
    Contender {
        name: choice.name(),
        kind: ContenderKind::Engine(choice.clone()),
    }
}

/// `Result<T, E: Display>` to `Result<T, String>` with context.
pub trait Ctx<T> {
    fn ctx(self, what: impl std::fmt::Display) -> Result<T, String>;
}

impl<T, E: std::fmt::Display> Ctx<T> for Result<T, E> {
    fn ctx(self, what: impl std::fmt::Display) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// One checked call through `bench::checked_call`: make `kind` inputs for
/// NCCL's `count` of `collective`, load them, poison the outputs, run
/// `choice`, read every rank's output back and verify it (bitwise for exact
/// inputs, within the order bound otherwise), and count changed send buffers
/// out of place. Errors (the engine's, or a wrong result) name the case.
#[allow(clippy::too_many_arguments)]
pub fn checked<T: Element>(
    e: &mut Engine<T>,
    choice: &AlgoChoice,
    collective: Collective,
    count: usize,
    in_place: bool,
    op: ReduceOp,
    kind: Inputs,
    seed: u64,
) -> Result<(), String> {
    let n = e.ranks();
    let what = format!(
        "{} {collective} {} {} count={count} ranks={n} {} {kind} inputs seed={seed}",
        choice.name(),
        T::DTYPE.name(),
        op.name(),
        if in_place { "in place" } else { "out of place" },
    );
    let per_rank = e.shape(collective, count, in_place).input(0).len();
    let inputs = verify::make_inputs::<T>(kind, op, n, per_rank, seed).expect("inputs");
    let expect = bench::expected(collective, &inputs, op, kind);
    let (wrong, v, _) = bench::checked_call(
        e,
        &contender(choice),
        collective,
        in_place,
        op,
        &inputs,
        &expect,
    )
    .ctx(&what)?;
    if wrong != 0 {
        return Err(format!(
            "{what}: {wrong} wrong (per rank {:?}, changed inputs included), first (rank, index, got, expected) {:?}, max abs err {:e}",
            v.wrong, v.first_wrong, v.max_abs_err
        ));
    }
    Ok(())
}

/// Check `outputs` against the expected result of `collective` on `inputs`.
pub fn verify_outputs<T: Element>(
    what: &str,
    collective: Collective,
    inputs: &[Vec<T>],
    outputs: &[Vec<T>],
    op: ReduceOp,
    kind: Inputs,
) -> Result<(), String> {
    let expect = bench::expected(collective, inputs, op, kind);
    let v = bench::check_outputs(outputs, &expect);
    if !v.passed() {
        return Err(format!(
            "{what}: {} wrong (per rank {:?}), first (rank, index, got, expected) {:?}",
            v.total_wrong(),
            v.wrong,
            v.first_wrong
        ));
    }
    Ok(())
}

/// Run a generic test body once per backend: `name[cpu]` and `name[cuda]`.
/// The CUDA variant reports SKIPPED with the reason when there is no driver
/// or fewer than `$gpus` GPUs.
#[macro_export]
macro_rules! test_backend {
    ($h:expr, $name:expr, $gpus:expr, $body:expr) => {{
        let body = $body;
        $h.add(format!("{}[cpu]", $name), move || {
            body(ringreduce::BackendChoice::Cpu)
        });
        $h.add(format!("{}[cuda]", $name), move || {
            if let Some(why) = $crate::common::cuda_skip_reason($gpus) {
                return Ok($crate::harness::Outcome::Skip(why));
            }
            body(ringreduce::BackendChoice::Cuda)
        });
    }};
}

/// Register a CUDA-only test: SKIPPED with the reason without a driver or
/// with fewer than `gpus` GPUs.
pub fn cuda_only(
    h: &mut crate::harness::Harness,
    name: &str,
    gpus: usize,
    body: impl Fn() -> TestResult + 'static,
) {
    h.add(format!("{name}[cuda]"), move || {
        if let Some(why) = cuda_skip_reason(gpus) {
            return Ok(Outcome::Skip(why));
        }
        body()
    });
}

pub fn pass() -> TestResult {
    Ok(Outcome::Pass)
}

pub fn skip(why: impl Into<String>) -> TestResult {
    Ok(Outcome::Skip(why.into()))
}

/// The body's buffers (one per local rank) as a communicator of shape
/// `Self` takes them: the list itself for every rank from one caller, the
/// one buffer for a handle of one rank.
pub trait Shape: CallShape + Sized {
    type Send<T: Element>: SendBufs<Self, T> + ?Sized;
    type Recv<T: Element>: RecvBufs<Self, T> + ?Sized;
    fn send<T: Element>(v: &[Vec<T>]) -> &Self::Send<T>;
    fn recv<T: Element>(v: &mut [Vec<T>]) -> &mut Self::Recv<T>;
}

impl Shape for EveryRank {
    type Send<T: Element> = [Vec<T>];
    type Recv<T: Element> = [Vec<T>];
    fn send<T: Element>(v: &[Vec<T>]) -> &[Vec<T>] {
        v
    }
    fn recv<T: Element>(v: &mut [Vec<T>]) -> &mut [Vec<T>] {
        v
    }
}

impl Shape for OneRank {
    type Send<T: Element> = Vec<T>;
    type Recv<T: Element> = Vec<T>;
    fn send<T: Element>(v: &[Vec<T>]) -> &Vec<T> {
        &v[0]
    }
    fn recv<T: Element>(v: &mut [Vec<T>]) -> &mut Vec<T> {
        &mut v[0]
    }
}
