//! Helpers and the `test_backend!` macro shared by the library's API tests
//! (`tests/api/`) and the tools' integration tests
//! (`tools/tests/integration/`, which include this file).
//!
//! Every behaviour is ONE generic body taking a [`BackendChoice`], registered
//! twice by [`test_backend!`]: `name[cpu]` and `name[cuda]`. The CUDA variant
//! reports SKIPPED with the reason when there is no driver or too few GPUs,
//! so the same binary runs everywhere (CI without a GPU, the GPU machine).

// Two test binaries include this file; each uses a part of it.
#![allow(dead_code)]

use crate::harness::{Outcome, TestResult};
use ringreduce::fault::FaultPlan;
use ringreduce::{
    AlgoChoice, BackendChoice, CallShape, Communicator, Element, Engine, EngineConfig, EveryRank,
    OneRank, RecvBufs, SendBufs,
};
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
pub fn engine(b: BackendChoice, ranks: usize) -> Result<Engine, String> {
    engine_with(b, ranks, TEST_TIMEOUT, FaultPlan::none())
}

/// A communicator of every rank from this caller, `ranks` ranks on backend
/// `b` (timeout [`TEST_TIMEOUT`]).
pub fn comm(b: BackendChoice, ranks: usize) -> Result<Communicator<EveryRank>, String> {
    comm_with(b, ranks, TEST_TIMEOUT, FaultPlan::none())
}

/// A communicator of every rank with an explicit timeout and injected
/// faults.
pub fn comm_with(
    b: BackendChoice,
    ranks: usize,
    timeout: Duration,
    faults: FaultPlan,
) -> Result<Communicator<EveryRank>, String> {
    Communicator::new(config(b, ranks, timeout, faults))
        .map_err(|e| format!("building a {b:?} communicator of {ranks} ranks: {e}"))
}

/// The configuration the tests' engines and communicators are built with.
fn config(b: BackendChoice, ranks: usize, timeout: Duration, faults: FaultPlan) -> EngineConfig {
    let mut cfg = EngineConfig::new(ranks, b).with_faults(faults);
    cfg.timeout = timeout;
    cfg
}

/// An engine with an explicit timeout and injected faults.
pub fn engine_with(
    b: BackendChoice,
    ranks: usize,
    timeout: Duration,
    faults: FaultPlan,
) -> Result<Engine, String> {
    Engine::new(config(b, ranks, timeout, faults))
        .map_err(|e| format!("building a {b:?} engine of {ranks} ranks: {e}"))
}

/// Parse a path name (`auto`, `ring:pipe2`, ...); panics on a typo in a test.
pub fn algo(name: &str) -> AlgoChoice {
    name.parse()
        .unwrap_or_else(|e| panic!("bad algorithm name {name:?} in a test: {e}"))
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
