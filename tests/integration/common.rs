//! Shared helpers and the `test_backend!` macro.

use crate::harness::{Outcome, TestResult};
use ringreduce::{BackendChoice, Engine, EngineConfig};

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

pub fn gpu_count() -> usize {
    ringreduce::backend::cuda::probe().map_or(0, |i| i.devices.len())
}

pub fn engine(backend: BackendChoice, ranks: usize) -> Result<Engine<f32>, String> {
    Engine::<f32>::new(EngineConfig::new(ranks, backend)).map_err(|e| e.to_string())
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

pub fn pass() -> TestResult {
    Ok(Outcome::Pass)
}
