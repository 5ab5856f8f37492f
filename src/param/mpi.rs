//! The variables a process manager sets (Open MPI's `mpirun`, MPICH's
//! Hydra, Slurm's `srun`): a job's rank, size and node, read when ringreduce
//! joins a job started by one (declared like every other variable in
//! [`super`]).

use super::*;

// -- the job, set by mpirun or srun ----------------------------------------

pub(crate) static OMPI_RANK: Param<usize> = Param::new(
    "OMPI_COMM_WORLD_RANK",
    Group::Mpi,
    WHOLE,
    "not under Open MPI",
    "The rank, from Open MPI's mpirun.",
    parse_whole,
);
pub(crate) static OMPI_SIZE: Param<usize> = Param::new(
    "OMPI_COMM_WORLD_SIZE",
    Group::Mpi,
    WHOLE,
    "not under Open MPI",
    "The number of ranks, from Open MPI's mpirun.",
    parse_whole,
);
pub(crate) static OMPI_LOCAL_RANK: Param<usize> = Param::new(
    "OMPI_COMM_WORLD_LOCAL_RANK",
    Group::Mpi,
    WHOLE,
    "SLURM_LOCALID, else the rank",
    "The rank on this machine, from Open MPI's mpirun.",
    parse_whole,
);
pub(crate) static OMPI_LOCAL_SIZE: Param<usize> = Param::new(
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    Group::Mpi,
    WHOLE,
    "unknown",
    "The number of ranks on this machine, from Open MPI's mpirun.",
    parse_whole,
);
pub(crate) static PMI_RANK: Param<usize> = Param::new(
    "PMI_RANK",
    Group::Mpi,
    WHOLE,
    "not under a PMI launcher",
    "The rank, from a PMI launcher (MPICH or Intel MPI mpirun, srun).",
    parse_whole,
);
pub(crate) static PMI_SIZE: Param<usize> = Param::new(
    "PMI_SIZE",
    Group::Mpi,
    WHOLE,
    "not under a PMI launcher",
    "The number of ranks, from a PMI launcher.",
    parse_whole,
);
pub(crate) static MPI_LOCALRANKID: Param<usize> = Param::new(
    "MPI_LOCALRANKID",
    Group::Mpi,
    WHOLE,
    "SLURM_LOCALID, else the rank",
    "The rank on this machine, from MPICH or Intel MPI.",
    parse_whole,
);
pub(crate) static MPI_LOCALNRANKS: Param<usize> = Param::new(
    "MPI_LOCALNRANKS",
    Group::Mpi,
    WHOLE,
    "unknown",
    "The number of ranks on this machine, from MPICH or Intel MPI.",
    parse_whole,
);
pub(crate) static SLURM_LOCALID: Param<usize> = Param::new(
    "SLURM_LOCALID",
    Group::Mpi,
    WHOLE,
    "the rank",
    "The rank on this machine, from Slurm (when the launcher's own is missing).",
    parse_whole,
);
pub(crate) static PMIX_NAMESPACE: Param<String> = Param::new(
    "PMIX_NAMESPACE",
    Group::Mpi,
    ANY_TEXT,
    "the next key below",
    "Names the store of a job started by mpirun (the first of these keys that is set).",
    parse_text,
);
pub(crate) static OMPI_JOBID: Param<String> = Param::new(
    "OMPI_MCA_ess_base_jobid",
    Group::Mpi,
    ANY_TEXT,
    "the next key below",
    "Names the store of an Open MPI job.",
    parse_text,
);
pub(crate) static ORTE_JOBID: Param<String> = Param::new(
    "OMPI_MCA_orte_ess_jobid",
    Group::Mpi,
    ANY_TEXT,
    "the next key below",
    "Names the store of an older Open MPI's job.",
    parse_text,
);
pub(crate) static PMIX_RANK: Param<String> = Param::new(
    "PMIX_RANK",
    Group::Mpi,
    ANY_TEXT,
    "no PMIx server",
    "Set by a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix): with the mpi feature, its ranks bootstrap through MPI (the rank variables alone do not).",
    parse_text,
);
pub(crate) static PMI_FD: Param<String> = Param::new(
    "PMI_FD",
    Group::Mpi,
    ANY_TEXT,
    "no PMI server",
    "Set by a PMI launcher (MPICH's hydra, srun --mpi=pmi2): with the mpi feature, its ranks bootstrap through MPI.",
    parse_text,
);
pub(crate) static PMI_PORT: Param<String> = Param::new(
    "PMI_PORT",
    Group::Mpi,
    ANY_TEXT,
    "no PMI server",
    "Set by a PMI launcher reached over a port (MPICH's hydra): as PMI_FD.",
    parse_text,
);
pub(crate) static PMI_KVSNAME: Param<String> = Param::new(
    "PMI_KVSNAME",
    Group::Mpi,
    ANY_TEXT,
    "the next key below",
    "Names the store of a PMI job.",
    parse_text,
);
pub(crate) static SLURM_JOB_ID: Param<String> = Param::new(
    "SLURM_JOB_ID",
    Group::Mpi,
    ANY_TEXT,
    "the parent process's id",
    "Names the store of a Slurm job.",
    parse_text,
);
pub(crate) static SLURM_STEP_ID: Param<String> = Param::new(
    "SLURM_STEP_ID",
    Group::Mpi,
    ANY_TEXT,
    "none",
    "Appended to the store's name under a PMI launcher (one store per job step).",
    parse_text,
);
