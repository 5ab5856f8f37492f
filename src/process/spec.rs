//! Where one process stands in a job ([`JobSpec`]): from a program, from
//! the environment `ringreduce launch` or a process manager set, or
//! through the caller's key-value store.

use super::{store, KeyValue, SharedKeyValue};
use crate::error::{Error, Result};
use std::path::PathBuf;

/// Who started the job's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `ringreduce launch`.
    Launch,
    /// `mpirun` of Open MPI.
    OpenMpi,
    /// A PMI launcher: MPICH's or Intel MPI's `mpirun`/`mpiexec`, Slurm's
    /// `srun`.
    Pmi,
    /// A program, through [`JobSpec::new`].
    Explicit,
}

impl Origin {
    /// Where the rank numbers came from, in words.
    pub fn name(self) -> &'static str {
        match self {
            Origin::Launch => "ringreduce launch",
            Origin::OpenMpi => "Open MPI mpirun",
            Origin::Pmi => "PMI (MPICH/Intel MPI mpirun, srun)",
            Origin::Explicit => "explicit",
        }
    }
}

/// Where one process stands in a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// This process's rank.
    pub rank: usize,
    /// The ranks of the job.
    pub size: usize,
    /// The rank among the job's processes on this machine (picks the GPU).
    pub local_rank: usize,
    /// How many of the job's processes run on this machine, when the
    /// environment says (`RINGREDUCE_LOCAL_SIZE`, set by `ringreduce
    /// launch`; `OMPI_COMM_WORLD_LOCAL_SIZE`; `MPI_LOCALNRANKS`). With it,
    /// more processes than GPUs go in blocks ([`crate::backend::placement`]),
    /// as one process's rank threads do; without it, `local_rank % GPUs`.
    pub local_size: Option<usize>,
    /// The store directory (unused when [`JobSpec::key_value`] is set).
    pub store: PathBuf,
    /// The run id the store must carry (set by the launcher); `None`: this
    /// job's rank 0 creates the store.
    pub run_id: Option<String>,
    /// Where the rank numbers came from.
    pub origin: Origin,
    /// The parent process whose id named the store, when no job id or
    /// store was given (an `mpirun` without one): ranks under different
    /// parents never meet, and a failed join says so.
    pub store_from_parent: Option<u32>,
    /// The caller's key-value store, when the job bootstraps through it
    /// instead of a store directory ([`rendezvous`](super::rendezvous)).
    pub key_value: Option<SharedKeyValue>,
}

/// A whole-number job variable ([`crate::param`]; read at each call).
fn env_usize(p: &crate::param::Param<usize>) -> Result<Option<usize>> {
    p.get()
}

/// A file-name-safe form of a job key.
fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    t.chars().take(80).collect()
}

impl JobSpec {
    /// Rank `rank` of `size`, through the store at `store`, which rank 0
    /// creates (it must not exist yet) and every rank joins.
    pub fn new(rank: usize, size: usize, store: impl Into<PathBuf>) -> JobSpec {
        JobSpec {
            rank,
            size,
            local_rank: rank,
            local_size: Some(size),
            store: store.into(),
            run_id: None,
            origin: Origin::Explicit,
            store_from_parent: None,
            key_value: None,
        }
    }

    /// Rank `rank` of `size`, meeting through the caller's key-value store
    /// `kv` (what `torch.distributed` hands a process group): no store
    /// directory is made ([`rendezvous`](super::rendezvous)). Every rank of the job runs on
    /// this machine.
    pub fn with_key_value(rank: usize, size: usize, kv: std::sync::Arc<dyn KeyValue>) -> JobSpec {
        JobSpec {
            store: PathBuf::new(),
            key_value: Some(SharedKeyValue(kv)),
            ..JobSpec::new(rank, size, PathBuf::new())
        }
    }

    /// The job this process belongs to according to its environment, if
    /// any: `RINGREDUCE_RANK`/`RINGREDUCE_SIZE` (set by `ringreduce
    /// launch`), else Open MPI's `OMPI_COMM_WORLD_RANK`/`_SIZE`, else
    /// `PMI_RANK`/`PMI_SIZE`. `RINGREDUCE_MULTIPROC=0` ignores all of them.
    pub fn from_env() -> Result<Option<JobSpec>> {
        use crate::param as p;
        // Read at each call, not cached: a program may set these before it
        // joins a job (see crate::param).
        if p::MULTIPROC.get()? == Some(false) {
            return Ok(None);
        }
        // Every launcher variable that is set must be well formed, the
        // ones of another launcher than this job's too.
        crate::settings::check_launcher()?;
        type Var = &'static p::Param<usize>;
        let sources: [(Var, Var, Var, Var, Origin); 3] = [
            (
                &p::RANK,
                &p::SIZE,
                &p::LOCAL_RANK,
                &p::LOCAL_SIZE,
                Origin::Launch,
            ),
            (
                &p::OMPI_RANK,
                &p::OMPI_SIZE,
                &p::OMPI_LOCAL_RANK,
                &p::OMPI_LOCAL_SIZE,
                Origin::OpenMpi,
            ),
            (
                &p::PMI_RANK,
                &p::PMI_SIZE,
                &p::MPI_LOCALRANKID,
                &p::MPI_LOCALNRANKS,
                Origin::Pmi,
            ),
        ];
        for (rk, sz, local, local_n, origin) in sources {
            let (rank, size) = match (env_usize(rk)?, env_usize(sz)?) {
                (None, None) => continue,
                (Some(r), Some(s)) => (r, s),
                _ => {
                    return Err(Error::BadArgument(format!(
                        "{} and {} must be set together",
                        rk.name, sz.name
                    )))
                }
            };
            let (rk, sz) = (rk.name, sz.name);
            if size == 0 {
                return Err(Error::BadArgument(format!(
                    "{sz}=0: a job has at least 1 rank (the size is the number of rank processes)"
                )));
            }
            if rank >= size {
                return Err(Error::BadArgument(format!(
                    "{rk}={rank} {sz}={size}: the rank must be below the size (ranks count from 0)"
                )));
            }
            if size > crate::plan::MAX_RANKS {
                return Err(Error::TooManyRanks {
                    ranks: size,
                    max: crate::plan::MAX_RANKS,
                });
            }
            let local_rank = env_usize(local)?
                .or(env_usize(&p::SLURM_LOCALID)?)
                .unwrap_or(rank);
            // A local size the local rank does not fit places nothing: the
            // device then follows local_rank % GPUs (backend::device_of).
            let local_size = env_usize(local_n)?;
            let run_id = p::RUN_ID.get()?;
            let (store, store_from_parent) = match p::STORE.get()? {
                Some(s) => (s, None),
                _ if origin == Origin::Launch => {
                    return Err(Error::BadArgument(
                        "RINGREDUCE_RANK is set but RINGREDUCE_STORE is not (start ranks with `ringreduce launch`)".into(),
                    ))
                }
                _ => Self::job_store(origin)?,
            };
            return Ok(Some(JobSpec {
                rank,
                size,
                local_rank,
                local_size,
                store,
                run_id,
                origin,
                store_from_parent,
                key_value: None,
            }));
        }
        Ok(None)
    }

    /// The store of an `mpirun` job that named none: one directory per job
    /// under `/dev/shm` (or the temporary directory), named after the job's
    /// id as the launcher exports it, or, failing that, after the parent
    /// process that every rank of the job on this machine shares (the MPI
    /// daemon).
    fn job_store(origin: Origin) -> Result<(PathBuf, Option<u32>)> {
        use crate::param as p;
        let keys = [
            &p::PMIX_NAMESPACE,
            &p::OMPI_JOBID,
            &p::ORTE_JOBID,
            &p::PMI_KVSNAME,
            &p::SLURM_JOB_ID,
        ];
        let mut key = None;
        for k in keys {
            if let Some(v) = k.get()? {
                key = Some(format!("{}-{v}", k.name));
                break;
            }
        }
        if origin == Origin::Pmi {
            if let (Some(k), Some(step)) = (&mut key, p::SLURM_STEP_ID.get()?) {
                k.push_str(&format!("-{step}"));
            }
        }
        let parent = key.is_none().then(std::os::unix::process::parent_id);
        let key = key.unwrap_or_else(|| format!("ppid-{}", std::os::unix::process::parent_id()));
        let dir = store::default_base().join(format!(
            "ringreduce-{}-{}",
            crate::sys::proc::uid(),
            sanitize(&key)
        ));
        Ok((dir, parent))
    }
}
