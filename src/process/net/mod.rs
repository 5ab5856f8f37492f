//! Past one machine (the `mpi` feature): the MPI bootstrap of a job over
//! several nodes ([`World`]) and the network transport's wire
//! ([`wire`]).
//!
//! Under `mpirun`/`srun` every rank initialises MPI ([`crate::sys::mpi::Mpi`]), takes
//! the world communicator and a node communicator: the ranks that share
//! memory (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), or, with
//! `RINGREDUCE_RANKS_PER_NODE=G`, every `G` consecutive ranks (several
//! "nodes" on one machine, for tests). Inside a node the ranks join a job
//! of their own exactly as on one machine (a store directory per node, the
//! node's control segment, shared-memory buffers: [`crate::process`]); the
//! job's collectives (all-gathers and barriers of the set-up, the calls'
//! agreement) run over the world communicator. Ranks on different nodes
//! share nothing: no store, no segment, no handle; they reach each other
//! only through MPI point-to-point ([`crate::transport::Net`]).

pub(crate) mod wire;

use crate::error::{Error, Result};
use crate::process::JobSpec;
use crate::sys::mpi::{Bound, Comm, Mpi};
use std::time::{Duration, Instant};

/// This process's place in a job over nodes.
#[derive(Debug)]
pub(crate) struct World {
    pub mpi: &'static Mpi,
    /// The node of every world rank (nodes numbered by their first rank).
    pub node_of: Vec<usize>,
    /// This process's node.
    pub node: usize,
    /// The world ranks of this node, in node-rank order.
    pub members: Vec<usize>,
    /// This process's rank in its node.
    pub node_rank: usize,
    /// This process's rail: the ranks with its node rank on every node
    /// (`MPI_Comm_split` by node rank, ordered by world rank), and their
    /// world ranks in that order.
    pub rail: Comm,
    pub rail_members: Vec<usize>,
    /// The most data bytes one put carries (`RINGREDUCE_NET_MESSAGE_MAX`).
    pub put_max: usize,
    pub timeout: Duration,
}

/// The largest `RINGREDUCE_NET_MESSAGE_MAX`: a put's header (a few words)
/// and its data in one MPI message of at most `i32::MAX` bytes.
const PUT_MAX_LIMIT: u64 = (1 << 31) - 64;

/// `RINGREDUCE_NET_MESSAGE_MAX`, checked, or its default (1 GiB).
fn put_max() -> Result<usize> {
    match crate::param::NET_MESSAGE_MAX.get()? {
        None => Ok(1 << 30),
        Some(b) if (1..=PUT_MAX_LIMIT).contains(&b) => Ok(b as usize),
        Some(b) => Err(Error::Env {
            var: "RINGREDUCE_NET_MESSAGE_MAX",
            value: b.to_string(),
            reason: "outside the sizes one MPI message carries with a put's header".into(),
            expected: format!("1 to {PUT_MAX_LIMIT} bytes (2GiB minus 64)"),
        }),
    }
}

/// Whether this process must bootstrap through MPI: the feature is on, it
/// was started by mpirun or srun (the rank variables) whose process
/// manager is there to initialise MPI with (`PMIX_RANK`, `PMI_FD` or
/// `PMI_PORT`: a program given only the rank variables joins through the
/// store, as without the feature), and `RINGREDUCE_MPI` is not 0.
pub(crate) fn wanted(spec: &JobSpec) -> Result<bool> {
    use crate::param as p;
    use crate::process::Origin;
    let server =
        p::PMIX_RANK.get()?.is_some() || p::PMI_FD.get()?.is_some() || p::PMI_PORT.get()?.is_some();
    Ok(matches!(spec.origin, Origin::OpenMpi | Origin::Pmi)
        && server
        && p::MPI.get()? != Some(false))
}

/// The bytes of a `usize`, for the all-gathers.
fn word(v: usize) -> Vec<u8> {
    (v as u64).to_le_bytes().to_vec()
}

fn unword(b: &[u8]) -> usize {
    u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize
}

impl World {
    /// Initialise MPI and find the nodes. Collective over the world; every
    /// wait bounded by `timeout`.
    pub fn join(spec: &JobSpec, timeout: Duration) -> Result<World> {
        let put_max = put_max()?;
        let mpi = Mpi::get(spec.rank, timeout)?;
        if mpi.rank != spec.rank || mpi.size != spec.size {
            return Err(Error::BadArgument(format!(
                "the launcher's variables say rank {} of {}, MPI says rank {} of {}",
                spec.rank, spec.size, mpi.rank, mpi.size
            )));
        }
        // The splits below are blocking collectives (MPI has no
        // non-blocking split): first a bounded barrier, so a rank that
        // never came ends this one's wait with a timeout, not a hang.
        let deadline = Instant::now() + timeout;
        let joined = || "every rank of the job (MPI_Init done)".to_string();
        let b = Bound {
            deadline,
            timeout,
            stop: &|| Ok(()),
            what: &joined,
        };
        mpi.barrier(mpi.world, &b)?;
        let node_comm: Comm = match crate::param::RANKS_PER_NODE.get()? {
            Some(0) => {
                return Err(Error::BadArgument(
                    "RINGREDUCE_RANKS_PER_NODE=0: a node has at least one rank".into(),
                ))
            }
            Some(g) if spec.size % g != 0 => {
                return Err(Error::BadArgument(format!(
                    "RINGREDUCE_RANKS_PER_NODE={g} does not divide the job's {} ranks",
                    spec.size
                )))
            }
            // Several nodes on one machine: consecutive blocks of G ranks.
            Some(g) => mpi.split(mpi.world, mpi.rank / g, mpi.rank)?,
            None => mpi.split_shared()?,
        };
        // Every rank's `v` on `comm`, in its rank order.
        let gather = |comm: Comm, v: usize, what: &'static str| -> Result<Vec<usize>> {
            let what = move || what.to_string();
            let b = Bound {
                deadline,
                timeout,
                stop: &|| Ok(()),
                what: &what,
            };
            Ok(mpi
                .allgather(comm, &word(v), &b)?
                .iter()
                .map(|b| unword(b))
                .collect())
        };
        let members = gather(node_comm, mpi.rank, "the ranks of this node")?;
        let (node_rank, _) = mpi.rank_size(node_comm)?;
        // Every rank is past the all-gather above: the split cannot wait
        // for a rank that never came.
        let rail = mpi.split(mpi.world, node_rank, mpi.rank)?;
        let rail_members = gather(rail, mpi.rank, "the ranks of this rail")?;
        let first = members.iter().copied().min().unwrap_or(mpi.rank);
        let firsts = gather(mpi.world, first, "every rank's node")?;
        let mut leaders = firsts.clone();
        leaders.sort_unstable();
        leaders.dedup();
        let node_of: Vec<usize> = firsts
            .iter()
            .map(|f| leaders.binary_search(f).unwrap_or(0))
            .collect();
        Ok(World {
            mpi,
            node: node_of.get(mpi.rank).copied().unwrap_or(0),
            node_of,
            members,
            node_rank,
            rail,
            rail_members,
            put_max,
            timeout,
        })
    }

    /// The number of nodes.
    pub fn nodes(&self) -> usize {
        self.node_of.iter().max().map_or(1, |m| m + 1)
    }

    /// The job spec of this process's node: its ranks join a job of their
    /// own through a store of the node's (its rank 0 creates it).
    pub(crate) fn node_spec(&self, spec: &JobSpec) -> JobSpec {
        let name = spec
            .store
            .file_name()
            .map_or_else(|| "job".into(), |s| s.to_string_lossy().into_owned());
        let store = spec
            .store
            .with_file_name(format!("{name}-node{}", self.node));
        JobSpec {
            rank: self.node_rank,
            size: self.members.len(),
            local_rank: self.node_rank,
            local_size: Some(self.members.len()),
            store,
            run_id: None,
            origin: spec.origin,
            store_from_parent: None,
            key_value: None,
        }
    }

    /// Every rank's `mine`, in world rank order; `stop` ends the wait early.
    pub(crate) fn allgather(
        &self,
        mine: &[u8],
        what: &str,
        stop: &dyn Fn() -> Result<()>,
    ) -> Result<Vec<Vec<u8>>> {
        self.bounded(what, stop, |b| self.mpi.allgather(self.mpi.world, mine, b))
    }

    /// A barrier of the world; `stop` ends the wait early.
    pub fn barrier(&self, what: &str, stop: &dyn Fn() -> Result<()>) -> Result<()> {
        self.bounded(what, stop, |b| self.mpi.barrier(self.mpi.world, b))
    }

    /// `f` waiting for every rank at `what`, from now for the job's
    /// timeout; `stop` ends the wait early.
    fn bounded<R>(
        &self,
        what: &str,
        stop: &dyn Fn() -> Result<()>,
        f: impl FnOnce(&Bound<'_>) -> Result<R>,
    ) -> Result<R> {
        let what = || format!("every rank at {what}");
        f(&Bound::after(self.timeout, stop, &what))
    }
}
