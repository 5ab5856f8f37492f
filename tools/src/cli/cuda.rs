//! What the commands use of the CUDA layer, and what stands in for it in a
//! build without the `cuda` feature: there every probe says "built without
//! the cuda feature", `auto` runs on the CPU, and a command that needs CUDA
//! or NCCL (`check`, `--nccl`, an `nccl` contender, `--backend cuda`) fails
//! with that reason.

use ringreduce::engine::Engine;
use ringreduce::error::Result;

#[cfg(feature = "cuda")]
pub use ringreduce::cuda::nccl::Nccl;

/// The driver and its GPUs, or why the CUDA backend cannot run (no
/// driver, no GPU).
#[cfg(feature = "cuda")]
pub fn probe() -> std::result::Result<&'static ringreduce::cuda::DriverInfo, String> {
    ringreduce::backend::cuda::probe()
}

/// Why the CUDA backend cannot run: the build has no `cuda` feature (no
/// `Ok` value exists, so a `match` needs no arm for it).
#[cfg(not(feature = "cuda"))]
pub fn probe() -> std::result::Result<std::convert::Infallible, String> {
    Err(ringreduce::backend::NO_CUDA.into())
}

/// The number of GPUs the CUDA backend sees, or why it cannot run (no
/// driver, no GPU, or a build without the `cuda` feature).
pub fn gpus() -> std::result::Result<usize, String> {
    #[cfg(feature = "cuda")]
    return probe().map(|i| i.devices.len());
    #[cfg(not(feature = "cuda"))]
    probe().map(|never| match never {})
}

/// "CUDA driver API 13000", where a driver is loaded.
pub fn driver_version() -> Option<String> {
    #[cfg(feature = "cuda")]
    return ringreduce::cuda::driver()
        .ok()
        .map(|d| format!("CUDA driver API {}", d.version));
    #[cfg(not(feature = "cuda"))]
    None
}

/// `Engine::nccl_init` (without the `cuda` feature there is no library to
/// pass).
pub fn nccl_init(core: &mut Engine, lib: &Nccl) -> Result<()> {
    #[cfg(feature = "cuda")]
    return core.nccl_init(lib);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = core;
        match *lib {}
    }
}

/// `Engine::nccl_memory`: the engine's buffers from NCCL's allocator.
pub fn nccl_memory(core: &mut Engine, lib: &Nccl) -> Result<()> {
    #[cfg(feature = "cuda")]
    return core.nccl_memory(lib);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = core;
        match *lib {}
    }
}

/// No NCCL without the `cuda` feature: loading it fails, so no value of
/// this type exists.
#[cfg(not(feature = "cuda"))]
pub enum Nccl {}

#[cfg(not(feature = "cuda"))]
impl Nccl {
    /// Fails: the build has no NCCL binding.
    pub fn load(_path: Option<&std::path::Path>) -> Result<Nccl> {
        Err(ringreduce::Error::NoCuda(format!(
            "{}, so NCCL cannot be loaded",
            ringreduce::backend::NO_CUDA
        )))
    }

    pub fn version_string(&self) -> Result<String> {
        match *self {}
    }

    pub fn path(&self) -> &std::path::Path {
        match *self {}
    }
}
