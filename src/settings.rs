//! Every environment variable this build reads, in one list: the
//! variables are declared where they are read ([`crate::param`]; the
//! algorithm path, `RINGREDUCE_ALGO`, with the algorithms), and listed,
//! checked and reported here, above both.

use crate::error::{Error, Result};
use crate::param::*;

/// Every declared variable, in [`Group::ALL`]'s order.
pub fn all() -> Vec<&'static dyn Declared> {
    let mut v: Vec<&'static dyn Declared> = vec![
        &TIMEOUT,
        &crate::algo::ALGO,
        &PTX_JIT,
        &CUDA_QUEUES,
        &DEVICES,
        &CUPTI,
        &CUPTI_TIE,
        &CUPTI_KINDS,
        &CUPTI_KEEP,
        &HOST_MEMORY,
    ];
    v.push(&FAULT);
    v.extend([
        &MULTIPROC as &'static dyn Declared,
        &RANK,
        &SIZE,
        &LOCAL_RANK,
        &LOCAL_SIZE,
        &STORE,
        &RUN_ID,
        &RANKS_PER_NODE,
        &NET_MESSAGE_MAX,
        &MPI,
        &OMPI_RANK,
        &OMPI_SIZE,
        &OMPI_LOCAL_RANK,
        &OMPI_LOCAL_SIZE,
        &PMI_RANK,
        &PMI_SIZE,
        &MPI_LOCALRANKID,
        &MPI_LOCALNRANKS,
        &SLURM_LOCALID,
        &PMIX_NAMESPACE,
        &OMPI_JOBID,
        &ORTE_JOBID,
        &PMIX_RANK,
        &PMI_FD,
        &PMI_PORT,
        &PMI_KVSNAME,
        &SLURM_JOB_ID,
        &SLURM_STEP_ID,
        &NCCL_HOME,
        &VIRTUAL_ENV,
        &CONDA_PREFIX,
        &HOME,
    ]);
    v
}

fn check_groups(groups: &[Group]) -> Result<()> {
    for p in all().into_iter().filter(|p| groups.contains(&p.group())) {
        p.check()?;
    }
    Ok(())
}

/// Check the variables the engine reads (the first malformed one is the
/// error): [`crate::Engine::new`] calls it.
pub(crate) fn check_engine() -> Result<()> {
    check_groups(&[Group::Engine, Group::Fault])
}

/// Check every setting (the engine's, the command line's, fault
/// injection, and the launcher's unless `RINGREDUCE_MULTIPROC=0` says to
/// ignore them): the commands call it before they start, so a malformed
/// variable is an error whether or not this run would have read it.
pub fn check_settings() -> Result<()> {
    check_groups(&[Group::Engine, Group::Cli, Group::Fault])?;
    check_launcher()
}

/// Check the launcher's variables (`RINGREDUCE_RANK` ..., Open MPI's,
/// PMI's, Slurm's, `RINGREDUCE_RANKS_PER_NODE`, `RINGREDUCE_MPI`), unless
/// `RINGREDUCE_MULTIPROC=0` says to ignore them: a job's rank reads some
/// of them, and a malformed one is an error wherever it is.
pub(crate) fn check_launcher() -> Result<()> {
    if MULTIPROC.get()? == Some(false) {
        return Ok(());
    }
    check_groups(&[Group::Launcher, Group::Mpi])?;
    without_mpi()
}

/// In a build without the `mpi` feature, the variables that ask for MPI
/// (`RINGREDUCE_RANKS_PER_NODE`: nodes over MPI; `RINGREDUCE_MPI=1`) are
/// refused at once, saying which feature is missing: ignored, the ranks
/// would wait "at joining the job" until the timeout.
fn without_mpi() -> Result<()> {
    if cfg!(feature = "mpi") {
        return Ok(());
    }
    let missing = |var: &'static str, value: String| Error::Env {
        var,
        value,
        reason: "this binary was built without the `mpi` feature, which it asks for".into(),
        expected: "unset, or a binary built with `cargo build --release --features mpi` \
                   (needs an MPI to build: Debian's libopenmpi-dev or libmpich-dev)"
            .into(),
    };
    if let Some(g) = RANKS_PER_NODE.get()? {
        return Err(missing(RANKS_PER_NODE.name(), g.to_string()));
    }
    if MPI.get()? == Some(true) {
        return Err(missing(MPI.name(), "1".into()));
    }
    Ok(())
}

/// The `RINGREDUCE_*` variables of the environment that this build does not
/// read (a typo), sorted.
pub fn undeclared() -> Vec<(String, String)> {
    let known: Vec<&str> = all()
        .iter()
        .map(|p| p.name())
        .chain(TEST_ONLY.iter().map(|t| t.0))
        .collect();
    let mut v: Vec<(String, String)> = reported()
        .into_iter()
        .filter(|(k, _)| k.starts_with("RINGREDUCE_") && !known.contains(&k.as_str()))
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests;
