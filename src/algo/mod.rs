//! The algorithms, one file each. An algorithm turns a [`Shape`] into
//! [`Plan`]s; it is the only place that knows what its plans look like.
//!
//! * [`Algorithm`]: a named algorithm with its options (`ring:pipe2`).
//! * [`Path`]: the per-(engine, shape) state that picks each call's plan.
//!   Most paths always issue the same plan (`StaticPath`); the chained
//!   one-shots alternate scratch halves between consecutive calls and keep
//!   that parity (and their CUDA-graph fence protocol) here, with the
//!   algorithm, not in the engine.
//! * [`AlgoChoice`]: what a user asks for (`auto` or a fixed algorithm) and
//!   [`AlgoChoice::resolve`], the size policy of `auto`.
//!
//! Adding an algorithm: a new file with a type implementing [`Algorithm`]
//! and a `parse` function, and one line in [`REGISTRY`].

pub(crate) mod bcast;
pub mod cost;
pub(crate) mod flag;
pub(crate) mod fused;
pub(crate) mod hier;
pub(crate) mod oneshot;
pub(crate) mod oneshotll;
pub mod probe;
pub(crate) mod ps;
pub(crate) mod ring;
pub(crate) mod ringflag;
pub(crate) mod ringll;
pub(crate) mod ringsimple;

use crate::error::{Error, Result};
use crate::plan::{Collective, Plan, Shape};
use std::fmt::Debug;
use std::sync::Arc;

/// A named algorithm with its options.
pub trait Algorithm: Send + Sync + Debug {
    /// The path name shown everywhere, e.g. `ring:pipe2`.
    fn name(&self) -> String;
    /// Why this algorithm cannot run `shape`, if it cannot.
    fn supports(&self, shape: &Shape) -> std::result::Result<(), String>;
    /// Fresh per-(engine, shape) state.
    fn path(&self, shape: &Shape) -> Box<dyn Path>;
    /// The closed form of what the busiest rank moves in one all-reduce,
    /// if the algorithm has one (`compare` sets it beside the counted bytes).
    fn load(&self) -> Option<Load> {
        None
    }
    /// The shape of its all-reduce's time in the alpha-beta-gamma model
    /// ([`cost::Cost`]), if it has one: what `bench` fits to this
    /// path's rows and `theory` prices.
    fn cost(&self) -> Option<cost::Cost> {
        None
    }
    /// Why this algorithm cannot run where the ranks are ([`Placement`]),
    /// if it cannot; every choice passes it in
    /// [`AlgoChoice::resolve_in`], fixed or `auto`.
    fn supports_at(&self, at: &Placement) -> std::result::Result<(), String> {
        let _ = at;
        Ok(())
    }
}

/// The closed form of the bytes the busiest rank of an all-reduce of `D`
/// bytes per rank sends (and, equally, receives) on `N` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// `2(N-1)/N·D` on every rank: the ring.
    Ring,
    /// `(N-1)·D` on the root, `D` on the others: the parameter server.
    Root,
    /// `(N-1)·D` on every rank: every rank's input goes to every other rank
    /// (the one-shots).
    Everyone,
    /// `2(G-1)/G·D` inside the node plus `2(K-1)/K·D/G` on the rail, on
    /// every rank: the hierarchical all-reduce with `G = per_node` ranks
    /// per node and `K = N/G` nodes.
    Hier {
        /// The ranks per node (`G`).
        per_node: usize,
    },
}

impl Load {
    /// The formula as the article writes it.
    pub fn formula(self) -> &'static str {
        match self {
            Load::Ring => "2(N-1)/N·D",
            Load::Root | Load::Everyone => "(N-1)·D",
            Load::Hier { .. } => "2(G-1)/G·D + 2(K-1)/K·D/G",
        }
    }

    /// The busiest rank's bytes for `d` bytes per rank on `n` ranks.
    pub fn bytes(self, n: usize, d: u64) -> f64 {
        match self {
            Load::Ring => cost::ring_per_rank_bytes(n, d as f64),
            Load::Root | Load::Everyone => cost::ps_root_bytes(n, d as f64),
            Load::Hier { per_node } => {
                let g = per_node.clamp(1, n.max(1));
                let d = d as f64;
                cost::ring_per_rank_bytes(g, d) + cost::ring_per_rank_bytes(n / g, d / g as f64)
            }
        }
    }
}

/// Chooses the plan of each call of one algorithm at one shape.
pub trait Path: Send {
    /// The plan of the next plain call. `continues` is true when the
    /// engine's previous call was this path at this shape, with nothing
    /// issued in between (no other collective, no load, no NCCL call).
    fn next(&mut self, continues: bool) -> Result<Arc<Plan>>;
    /// The plans to capture, in order, for a CUDA graph of `calls` calls.
    fn graph_plans(&mut self, calls: usize) -> Result<Vec<Arc<Plan>>> {
        (0..calls).map(|_| self.next(true)).collect()
    }
    /// What to issue before a replay of that graph (`continues` as for
    /// [`Path::next`]; a replay counts as a call of this path). Updates the
    /// state to what holds after the replay.
    fn before_replay(&mut self, _continues: bool) -> Result<Option<Arc<Plan>>> {
        Ok(None)
    }
}

/// A path whose every call is the same plan.
#[derive(Debug)]
pub(crate) struct StaticPath(pub Arc<Plan>);

impl StaticPath {
    /// Build the plan once (validated in debug builds).
    pub(crate) fn boxed(plan: Plan) -> Box<dyn Path> {
        Box::new(StaticPath(Arc::new(plan)))
    }
}

impl Path for StaticPath {
    fn next(&mut self, _continues: bool) -> Result<Arc<Plan>> {
        checked(&self.0)?;
        Ok(self.0.clone())
    }
}

/// In debug builds, validate a plan the first time it is used (the
/// validator's cost is paid once per plan object: the verdict is kept in
/// the plan, [`Plan::validate_once`], not in a table keyed by its address).
pub fn checked(plan: &Arc<Plan>) -> Result<()> {
    if cfg!(debug_assertions) && plan.op_count() < 200_000 {
        plan.validate_once().map_err(Error::Plan)?;
    }
    Ok(())
}

/// Each algorithm file's parser: `Some` when the name is its own.
type Parser = fn(&str) -> Option<std::result::Result<Arc<dyn Algorithm>, String>>;

/// One algorithm file in [`REGISTRY`].
pub struct Entry {
    /// Its parser.
    pub parse: Parser,
    /// The names it takes, as help spells them (`ring:pipeK`: K slices).
    pub names: &'static [&'static str],
    /// What each does, for help and errors.
    pub help: &'static str,
}

impl Entry {
    const fn new(parse: Parser, names: &'static [&'static str], help: &'static str) -> Entry {
        Entry { parse, names, help }
    }
}

/// Every algorithm, by its parser. The order is the order of the help text.
pub const REGISTRY: &[Entry] = &[
    Entry::new(
        ring::parse,
        &["ring", "ring:naive", "ring:pipeK"],
        "ring (one copy and one reduce per step), ring:naive (one scratch slot), ring:pipeK (K pipeline slices, 1..=64)",
    ),
    Entry::new(
        oneshot::parse,
        &["oneshot"],
        "oneshot (every rank pushes its input to every other rank with the copy engine, then reduces)",
    ),
    Entry::new(
        fused::parse,
        &["oneshot:fused"],
        "oneshot:fused (every collective: each rank reads the other ranks' inputs itself; out of place with no wait between ranks, in place after the peers began, summing into scratch for an all-reduce)",
    ),
    Entry::new(
        flag::parse,
        &["oneshot:flag"],
        "oneshot:flag (2 ranks: one exchange kernel per rank, synchronized by flags in GPU memory)",
    ),
    Entry::new(
        oneshotll::parse,
        &["oneshot:ll"],
        "oneshot:ll (2 ranks: one kernel per rank stores its whole input into the peer's slot with the flag in the same words, then reduces what the peer stored; no flag round trip)",
    ),
    Entry::new(
        ringflag::parse,
        &["ring:flag"],
        "ring:flag (2 ranks: the ring's copies and reduce on one stream, the two waits across GPUs as flag hand-shakes in GPU memory)",
    ),
    Entry::new(
        ringll::parse,
        &["ring:ll"],
        "ring:ll (the ring in one kernel per rank: each step stored into the right neighbour's slot with its flag in the same words, polled there; no copy engine, no event between steps)",
    ),
    Entry::new(
        ringsimple::parse,
        &["ring:simple"],
        "ring:simple (the ring in one kernel per rank: each step stored plainly into the right neighbour's scratch, then a flag per 16 KiB tile; every byte stored is data, one flag round trip per tile)",
    ),
    Entry::new(ps::parse, &["ps"], "ps (parameter server, rank 0 as root)"),
    Entry::new(
        hier::parse,
        &["hier:G", "hier:G:mpi"],
        "hier:G (hierarchical: nodes of G consecutive ranks; reduce-scatter inside each node, a ring all-reduce between the nodes on each rail, all-gather inside each node), hier:G:mpi (the same, each rail's all-reduce one op per rank: MPI's own MPI_Allreduce between nodes, a ring of puts on one machine; host memory only)",
    ),
    Entry::new(
        bcast::parse,
        &["bcast", "bcast:pipeK"],
        "bcast (broadcast only: the root's buffer forwarded along the ring), bcast:pipeK (in K pipeline slices, 1..=64)",
    ),
];

/// Every name in [`REGISTRY`], as help spells them (`ring:pipeK`).
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().flat_map(|e| e.names.iter().copied())
}

/// The algorithm of a registered name (`ring:pipeK` as `ring:pipe3`: an
/// odd slice count, chunks that do not divide evenly; `hier:G` as
/// `hier:2`, two ranks per node).
pub fn example(name: &str) -> Option<Arc<dyn Algorithm>> {
    parse(&example_name(name)).ok()
}

/// The name [`example`] parses for a registered name.
pub(crate) fn example_name(name: &str) -> String {
    name.replace(":pipeK", ":pipe3").replace("hier:G", "hier:2")
}

/// One algorithm of each name in [`REGISTRY`] ([`example`]).
pub fn paths() -> Vec<Arc<dyn Algorithm>> {
    names().filter_map(example).collect()
}

/// Whether `algo` runs `collective` at some shape (two ranks, a few
/// elements, in or out of place).
pub fn runs(algo: &dyn Algorithm, collective: Collective) -> bool {
    [false, true].into_iter().any(|in_place| {
        let shape = Shape {
            collective,
            ranks: 2,
            count: 64,
            elem_size: 4,
            in_place,
        };
        algo.supports(&shape).is_ok()
    })
}

/// Parse a fixed algorithm name.
pub fn parse(name: &str) -> std::result::Result<Arc<dyn Algorithm>, String> {
    let s = name.trim().to_ascii_lowercase();
    for e in REGISTRY {
        if let Some(r) = (e.parse)(&s) {
            return r;
        }
    }
    // `X:graph` is bench's name for X replayed from a CUDA graph.
    if let Some(base) = s.strip_suffix(":graph") {
        if base == "auto" || parse(base).is_ok() {
            return Err(format!(
                "{s:?} is {base} replayed from a CUDA graph, which only bench measures \
                 (bench --algo {s}); here use {base}"
            ));
        }
    }
    Err(format!(
        "unknown algorithm {s:?}; expected auto or one of: {}",
        REGISTRY
            .iter()
            .map(|e| e.help)
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// What the user asks for; `Auto` picks by shape (see [`AlgoChoice::resolve`]).
#[derive(Debug, Clone, Default)]
pub enum AlgoChoice {
    #[default]
    /// Pick by shape and placement.
    Auto,
    /// This algorithm, whatever the shape.
    Fixed(Arc<dyn Algorithm>),
}

impl PartialEq for AlgoChoice {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl std::str::FromStr for AlgoChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            Ok(AlgoChoice::Auto)
        } else {
            parse(s).map(AlgoChoice::Fixed)
        }
    }
}

impl std::fmt::Display for AlgoChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// With every rank on one GPU, an all-reduce of more than 2 ranks takes
/// `ring:ll` up to this size per rank: one kernel per rank whose steps
/// hand over through flagged stores (4 ranks on one H100,
/// `results/2026-12-05-gpu1-ring-ll/`: 11-19 us against the one-shot's
/// and the PS's 22-34 us from 8 B to 512 KiB, behind them from 2 MiB).
/// Two ranks keep the one-shots, at or ahead of it at every size there; on
/// several GPUs it is not measured yet, so `auto` does not take it there.
pub(crate) const LL_MANY_MAX_BYTES: usize = 512 << 10;

/// Whether `auto` takes `ring:ll` for `shape` on one GPU.
fn ll_ring_wins(shape: &Shape) -> bool {
    shape.collective == Collective::AllReduce
        && shape.ranks > 2
        && shape.count > 0
        && shape.count.saturating_mul(shape.elem_size) <= LL_MANY_MAX_BYTES
}

/// With every rank on one GPU, an all-reduce of more than 2 ranks takes
/// `ring:simple` above [`PS_MAX_BYTES`] and up to this size per rank: the
/// ring's steps in one kernel per rank, plain stores and a flag per tile
/// (4 ranks on one H100, `results/2026-12-08-h100x1-ring-simple/`: 74 and
/// 138 us at 8 and 16 MiB against the copy-engine ring's 96 and 158, which
/// `auto` took there; `ps` ahead at 4 MiB, the copy-engine ring from
/// 32 MiB). Measured with 4 ranks only; on several GPUs not yet.
pub(crate) const SIMPLE_MANY_MAX_BYTES: usize = 16 << 20;

/// Whether `auto` takes `ring:simple` for `shape` on one GPU.
fn simple_ring_wins(shape: &Shape) -> bool {
    let bytes = shape.count.saturating_mul(shape.elem_size);
    shape.collective == Collective::AllReduce
        && shape.ranks > 2
        && bytes > PS_MAX_BYTES
        && bytes <= SIMPLE_MANY_MAX_BYTES
}

/// Up to this size per rank, 2 ranks use the one-shot kernels for an
/// all-reduce (2 x H200, docs/lab/perf-notes.md: 1.4x-2.7x NCCL from 8 B to
/// 8 MiB out of place; 1.13x at 16 MiB in place).
pub(crate) const ONESHOT_MAX_BYTES: usize = 16 << 20;

/// From this size the ring cuts each chunk into 4 slices instead of 2.
pub(crate) const PIPE4_MIN_BYTES: usize = 1 << 30;

/// Up to this size per rank, an all-reduce of more than 2 ranks uses the
/// parameter server: two rounds, whatever N, where the ring has 2(N-1)
/// dependent steps at 12-14 us each (4 and 8 ranks on 2 x H200, ranks in
/// blocks, the record
/// `results/2026-11-30-h200x2-s8-final/logs.tar.xz:2026-11-30-h200x2-s8-final.log`:
/// PS 45 / 79 us against the ring's 85 / 85 us at 1 / 4 MiB with 4 ranks,
/// 92-145 against 177-215 us with 8; the ring ahead from 16 MiB, 124
/// against 235 us).
pub(crate) const PS_MAX_BYTES: usize = 4 << 20;

/// Out of place, more than 2 ranks use `oneshot:fused` (one kernel per
/// rank that reads every peer's input) while a rank reads at most this
/// many bytes from its peers, `(N-1) * size` (`results/2026-11-30-h200x2-s8-many`:
/// 19-23 us against the PS's 39-62 us at 8 B-512 KiB with 4 ranks, 55-66
/// against 100-160 us with 8; 37 against 54 us at 4 x 2 MiB = 6 MiB read;
/// behind the PS at 8 x 2 MiB = 14 MiB read, 129 against 110 us).
pub(crate) const FUSED_MANY_MAX_READ: usize = 8 << 20;

/// Below this many bytes of a reduce-scatter's whole buffer the plain ring
/// (one copy and one reduce per step) beats the pipelined one (2 x H200,
/// 2026-11-30, `-ring2-bench-rsag.log.gz`: 75 vs 52 GB/s at 4 MiB, 18 vs 13
/// at 1 MiB; equal at 16 MiB, pipe2 ahead from 64 MiB).
pub(crate) const RS_PIPE_MIN_BYTES: usize = 16 << 20;

impl AlgoChoice {
    /// `auto` or the fixed algorithm's name.
    pub fn name(&self) -> String {
        match self {
            AlgoChoice::Auto => "auto".into(),
            AlgoChoice::Fixed(a) => a.name(),
        }
    }

    /// The algorithm for `shape`: a fixed choice if it supports the shape
    /// (else an error that says why), or `auto`'s pick. `auto` honours the
    /// environment variable `RINGREDUCE_ALGO` (like `NCCL_ALGO`).
    ///
    /// `auto`, from the 2 x H200 runs (docs/lab/perf-notes.md):
    /// * an all-reduce of at most 16 MiB (`ONESHOT_MAX_BYTES`) per rank on 2 ranks
    ///   uses `oneshot:fused` out of place and `oneshot:flag` in place;
    /// * an all-reduce of more than 2 ranks uses `oneshot:fused` out of
    ///   place while `(N-1) * size` is at most 8 MiB (`FUSED_MANY_MAX_READ`),
    ///   else `ps` up to 4 MiB (`PS_MAX_BYTES`) per rank, then the plain `ring`
    ///   (4 and 8 ranks: ahead of `ring:pipe2` at every size measured);
    /// * every other call uses `ring:pipe2`, except an all-gather (no
    ///   reduce to overlap: the plain `ring`, which measured ahead of
    ///   `ring:pipe2` at every size on 2 x H200) and a reduce-scatter below
    ///   16 MiB, `RS_PIPE_MIN_BYTES` (`ring`);
    /// * from 1 GiB (`PIPE4_MIN_BYTES`) a pipelined ring cuts 4 slices;
    /// * a broadcast uses `bcast`, pipelined by size
    ///   (`bcast::slices_for`).
    pub fn resolve(&self, shape: &Shape) -> Result<Arc<dyn Algorithm>> {
        let algo = match self {
            AlgoChoice::Fixed(a) => a.clone(),
            AlgoChoice::Auto => match forced()? {
                Some(a) => a,
                None => auto(shape),
            },
        };
        algo.supports(shape).map_err(|why| {
            Error::BadArgument(format!(
                "{} cannot run this call ({} of {} on {}, {}): {why}",
                algo.name(),
                shape.collective,
                crate::words::counted(shape.count, "element"),
                crate::words::counted(shape.ranks, "rank"),
                if shape.in_place {
                    "in place"
                } else {
                    "out of place"
                }
            ))
        })?;
        Ok(algo)
    }
}

/// [`Algorithm::supports_at`] of the paths whose kernels spin on flags
/// that other ranks' kernels raise (`oneshot:flag`, `ring:flag`,
/// `ring:ll`, `oneshot:ll`): refused where rank processes share a GPU,
/// whose contexts take turns on it, so that every flag would wait for a
/// turn of the scheduler (milliseconds).
///
/// Also refused where rank threads of this process share a GPU with too
/// few of its hardware queues ([`Placement::short_queues`]): a kernel
/// queued behind another rank's spinning kernel never starts, and that
/// kernel waits for it.
pub(crate) fn spins_across_ranks(at: &Placement) -> std::result::Result<(), String> {
    if at.time_sliced {
        return Err("its kernels spin on flags that other ranks' kernels raise, and rank processes sharing one GPU take turns on it, so every flag would wait for a turn of the scheduler (milliseconds); use auto there".into());
    }
    if let Some(q) = at.short_queues {
        return Err(format!(
            "its kernels spin on flags that other ranks' kernels raise, and {} rank threads share one GPU with {} hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): two ranks' streams can then share a queue, where one rank's kernel waits behind the kernel that waits for it; set CUDA_DEVICE_MAX_CONNECTIONS to at least {} before the process starts, or use auto there",
            q.ranks,
            q.queues,
            QUEUES_PER_RANK * q.ranks
        ));
    }
    Ok(())
}

/// Hardware queues (`CUDA_DEVICE_MAX_CONNECTIONS`) a rank thread sharing a
/// GPU needs for the paths whose kernels spin on other ranks' flags: its
/// two streams and room for the others of the context (the engine's work
/// streams, a framework's). Measured with 4 rank threads on one GPU
/// (`results/2026-12-06-h100x1-ll-stop/`): with 8 queues a sweep of
/// `ring:ll` stopped within its first 1 to 5 runs, with 16 and 32 in none of 10;
/// with 4 and 2 queues, and 2 ranks on 1, it stopped at once.
pub(crate) const QUEUES_PER_RANK: usize = 4;

/// Rank threads of this process sharing a GPU whose hardware queues are
/// too few for kernels that spin on each other (`QUEUES_PER_RANK`, 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortQueues {
    /// The most ranks of this process on one GPU.
    pub ranks: usize,
    /// The hardware queues the driver gives a context
    /// (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 unless set).
    pub queues: usize,
}

impl ShortQueues {
    /// `Some` where `ranks` rank threads on one GPU with `queues` hardware
    /// queues are too few for spinning kernels.
    pub fn of(ranks: usize, queues: usize) -> Option<ShortQueues> {
        (ranks > 1 && queues < QUEUES_PER_RANK.saturating_mul(ranks))
            .then_some(ShortQueues { ranks, queues })
    }
}

/// Where a call's ranks run, as far as `auto` cares
/// ([`AlgoChoice::resolve_in`]). The default: ranks on GPUs of one machine,
/// each GPU to itself or shared by threads of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    /// A job over nodes: `Some(G)` with every G consecutive ranks a node,
    /// `Some(0)` for nodes of another layout.
    pub per_node: Option<usize>,
    /// The ranks' buffers are host memory (the CPU backend).
    pub host: bool,
    /// Ranks of different processes share a GPU. Their kernels take turns
    /// on it (the driver time-slices contexts), so every wait of one rank's
    /// GPU work on another process's (an event, a flag) costs a turn of
    /// the scheduler: about a millisecond, whatever the size.
    pub time_sliced: bool,
    /// Every rank is a thread of this process on one and the same GPU:
    /// their kernels run at once (one context), and a step between them
    /// is a store and a poll in the same memory.
    pub one_gpu: bool,
    /// Rank threads of this process share a GPU whose hardware queues
    /// are too few for kernels that spin on each other: the paths whose
    /// kernels do refuse, and `auto` takes none of them.
    pub short_queues: Option<ShortQueues>,
    /// Every rank is a process of its own (a job of `launch` or mpirun).
    /// On host memory each runs its rank on its own thread, with no
    /// hand-off to a rank thread, so a step between ranks costs less
    /// than between rank threads of one process.
    pub processes: bool,
}

impl AlgoChoice {
    /// [`AlgoChoice::resolve`] where the ranks run as `at` says. `auto`,
    /// unless `RINGREDUCE_ALGO` forces a path:
    ///
    /// * over nodes (`per_node`), takes only paths whose ranks push (the
    ///   network transport refuses reads of a peer's memory): for an
    ///   all-reduce over several nodes, on host memory `hier:G:mpi` (each
    ///   rail's phase MPI's own all-reduce; measured on the CPU backend
    ///   against `hier:G` and, for nodes of one rank, the `ring`: 0.5x of
    ///   `hier:2` at 4 KiB, 0.7x at 64 KiB, level from 1 MiB to 16 MiB,
    ///   `docs/results/2026-12-07-cpu-mpi-rail-waits/`), on GPUs `hier:G`
    ///   for nodes of G > 1 ranks (the scale-out model prices it at or
    ///   below the flat ring for every layout, size and pair of links, so
    ///   no call needs pricing: the tools' `theory::scale` test
    ///   `the_hierarchical_all_reduce_is_never_slower_than_the_flat_ring`);
    ///   `bcast` for a broadcast, else the `ring`;
    /// * on host memory (`host`), is its own (measured on the CPU backend:
    ///   `oneshot:fused` out of place up to 64 KiB (`HOST_FUSED_MAX_BYTES`) per
    ///   rank, else `ps`);
    /// * with processes sharing a GPU (`time_sliced`), takes
    ///   `oneshot:fused` for every collective out of place, whatever the
    ///   size (it waits on no other rank inside the call); in place a path
    ///   whose waits between ranks the CUDA backend makes on the host, once
    ///   the awaited work completed, each costing a turn of the GPU's
    ///   scheduler: the copy-engine `oneshot` for an all-reduce of 2 ranks
    ///   up to 16 MiB (`ONESHOT_MAX_BYTES`) (one such wait), else `oneshot:fused`
    ///   (two rounds of them, whatever N: the peers' Begin, then their
    ///   last read);
    /// * with every rank a thread on one GPU (`one_gpu`), `ring:ll` for an
    ///   all-reduce of more than 2 ranks up to 512 KiB (`LL_MANY_MAX_BYTES`);
    /// * where rank threads share a GPU with too few hardware queues
    ///   (`short_queues`), no path whose kernels spin on each other: the
    ///   copy-engine `oneshot` where it would take `oneshot:flag`.
    ///
    /// Every choice, fixed or not, must also run where the ranks are
    /// ([`Algorithm::supports_at`]).
    pub fn resolve_in(&self, shape: &Shape, at: &Placement) -> Result<Arc<dyn Algorithm>> {
        let algo = self.resolve_placed(shape, at)?;
        algo.supports_at(at)
            .map_err(|why| Error::BadArgument(format!("{} cannot run here: {why}", algo.name())))?;
        Ok(algo)
    }

    fn resolve_placed(&self, shape: &Shape, at: &Placement) -> Result<Arc<dyn Algorithm>> {
        if !matches!(self, AlgoChoice::Auto) || forced()?.is_some() {
            return self.resolve(shape);
        }
        let algo: Arc<dyn Algorithm> = if let Some(g) = at.per_node {
            let n = shape.ranks;
            let nodes = g >= 1 && g < n && n % g == 0;
            match shape.collective {
                Collective::AllReduce if nodes && at.host => Arc::new(hier::Hier {
                    per_node: g,
                    rail: hier::Rail::Mpi,
                }),
                Collective::AllReduce if nodes && g > 1 => Arc::new(hier::Hier {
                    per_node: g,
                    rail: hier::Rail::Ring,
                }),
                Collective::Broadcast { .. } => auto(shape),
                _ => Arc::new(ring::Ring::PLAIN),
            }
        } else if at.host {
            auto_host(shape, at.processes)
        } else if at.time_sliced && shape.ranks > 1 {
            time_sliced(shape)
        } else if at.one_gpu && at.short_queues.is_none() && ll_ring_wins(shape) {
            Arc::new(ringll::RING_LL)
        } else if at.one_gpu && at.short_queues.is_none() && simple_ring_wins(shape) {
            Arc::new(ringsimple::RING_SIMPLE)
        } else {
            match auto(shape) {
                // The in-place 2-rank one-shot spins: the copy-engine one
                // takes its place where the queues are short.
                a if at.short_queues.is_some() && a.supports_at(at).is_err() => {
                    Arc::new(oneshot::ONESHOT)
                }
                a => a,
            }
        };
        AlgoChoice::Fixed(algo).resolve(shape)
    }
}

/// Rank processes sharing a GPU (their kernels take turns on it, so each
/// wait between ranks costs a turn of the scheduler): `oneshot` for an
/// all-reduce of 2 ranks in place up to 16 MiB (`ONESHOT_MAX_BYTES`), whose one
/// wait between the ranks follows the peer's copy (205-230 us per call on
/// one H100, where `oneshot:fused` in place, two rounds of waits, took
/// 400-460 us), else `oneshot:fused` (out of place no wait at all; in place
/// on 3 ranks 0.90-0.94x the time of `ps`, the next best, up to 2 MiB and
/// level with it at 16 MiB), from
/// `docs/results/2026-12-06-h200x1-host-ordered/`.
fn time_sliced(shape: &Shape) -> Arc<dyn Algorithm> {
    let bytes = shape.count.saturating_mul(shape.elem_size);
    let two = shape.collective == Collective::AllReduce && shape.ranks == 2;
    if shape.in_place && two && bytes <= ONESHOT_MAX_BYTES {
        return Arc::new(oneshot::ONESHOT);
    }
    Arc::new(fused::Fused)
}

/// Out-of-place all-reduces of at most this many bytes per rank take
/// `oneshot:fused` on host memory (the CPU backend): each rank reads every
/// input once, with no step between ranks; above it the redundant reads
/// cost more than the parameter server's two phases.
pub(crate) const HOST_FUSED_MAX_BYTES: usize = 64 << 10;

/// `auto` on host memory (the CPU backend), from its own measurements
/// (`docs/results/2026-12-04-cpu-host-auto/`, 2 to 8 ranks on a 2-core
/// machine, 8 B to 16 MiB): memory is shared and the ranks' threads
/// outnumber the cores, so what costs is each step the ranks wait on each
/// other, not bytes on a link. An all-reduce uses `oneshot:fused` out of
/// place up to 64 KiB (`HOST_FUSED_MAX_BYTES`) per rank (one step, 2-8x ahead of
/// the ring there), `ps` in place at those sizes and above them from 3
/// ranks (two phases whatever N: at or ahead of the ring from 2 MiB, and
/// 1.5-2.6x ahead of it below 64 KiB), and the ring above them on 2 ranks
/// (ahead of `ps` at 256 KiB-2 MiB there); every other collective as on
/// the GPU ([`AlgoChoice::resolve`]). With every rank a process
/// (`processes`: no hand-off to a rank thread, so the ring's steps cost
/// less) the ring above 64 KiB (`HOST_FUSED_MAX_BYTES`) on any number of ranks
/// (4 processes on 2 cores, `docs/results/2026-12-06-cpu-mpi-inline/`:
/// 0.6x `ps`'s time at 1 MiB, 0.8x at 16 MiB; `ps` ahead at 64 KiB).
fn auto_host(shape: &Shape, processes: bool) -> Arc<dyn Algorithm> {
    let bytes = shape.count.saturating_mul(shape.elem_size);
    if shape.collective == Collective::AllReduce && shape.ranks > 1 {
        let small = bytes <= HOST_FUSED_MAX_BYTES;
        if small && !shape.in_place {
            return Arc::new(fused::Fused);
        }
        if small || (shape.ranks > 2 && !processes) {
            return Arc::new(ps::ParameterServer);
        }
        return Arc::new(ring::Ring::PLAIN);
    }
    auto(shape)
}

fn auto(shape: &Shape) -> Arc<dyn Algorithm> {
    let bytes = shape.count.saturating_mul(shape.elem_size);
    if let Collective::Broadcast { .. } = shape.collective {
        return Arc::new(bcast::Bcast {
            slices: bcast::slices_for(bytes, shape.ranks),
        });
    }
    if shape.collective == Collective::AllReduce && shape.ranks == 2 && bytes <= ONESHOT_MAX_BYTES {
        if shape.in_place {
            return Arc::new(flag::FLAG);
        }
        return Arc::new(fused::Fused);
    }
    let many = shape.collective == Collective::AllReduce && shape.ranks > 2;
    let peer_reads = bytes.saturating_mul(shape.ranks - 1);
    if many && !shape.in_place && peer_reads <= FUSED_MANY_MAX_READ {
        return Arc::new(fused::Fused);
    }
    if many && bytes <= PS_MAX_BYTES {
        return Arc::new(ps::ParameterServer);
    }
    let whole = bytes.saturating_mul(shape.ranks);
    let plain = match shape.collective {
        Collective::AllGather => true,
        Collective::ReduceScatter => whole < RS_PIPE_MIN_BYTES,
        Collective::AllReduce => many && bytes < PIPE4_MIN_BYTES,
        Collective::Broadcast { .. } => true,
    };
    let slices = if plain {
        1
    } else if bytes >= PIPE4_MIN_BYTES {
        4
    } else {
        2
    };
    Arc::new(ring::Ring { slices, slots: 2 })
}

/// `RINGREDUCE_ALGO`: the path of every call left to `auto`, read from the
/// environment (declared here, with the algorithms it names).
pub(crate) static ALGO: crate::param::Param<String> = crate::param::Param::new(
    "RINGREDUCE_ALGO",
    crate::param::Group::Engine,
    "auto or a path",
    "auto",
    "The path of every call left to auto (the default --algo and EngineConfig::algo), as NCCL_ALGO forces NCCL's; --algo with a path overrides it.",
    parse_algo,
)
.accepting(algo_accepted);

/// `RINGREDUCE_ALGO`'s accepted values, from the algorithms' registry (the
/// parser's own list, so the two cannot drift apart).
fn algo_accepted() -> String {
    format!(
        "auto or a path: {}",
        REGISTRY
            .iter()
            .map(|e| e.help)
            .collect::<Vec<_>>()
            .join("; ")
    )
}

fn parse_algo(v: &std::ffi::OsStr) -> std::result::Result<String, String> {
    let s = crate::param::utf8(v)?;
    if s.eq_ignore_ascii_case("auto") {
        return Ok("auto".into());
    }
    parse(s).map(|_| s.to_string())
}

/// The plan `choice` uses for `shape` (the first call of a chain),
/// validated: what the trace shows and `ringreduce.plan` returns.
pub fn plan_of(choice: &AlgoChoice, shape: &Shape) -> Result<Plan> {
    // An engine's limits: a plan of more ranks than an engine runs, or of
    // more elements than an address space holds, is nobody's.
    if shape.ranks == 0 {
        return Err(Error::ZeroRanks);
    }
    if shape.ranks > crate::plan::MAX_RANKS {
        return Err(Error::TooManyRanks {
            ranks: shape.ranks,
            max: crate::plan::MAX_RANKS,
        });
    }
    let bytes = (shape.count as u128) * (shape.ranks as u128) * (shape.elem_size as u128);
    if bytes * 3 > isize::MAX as u128 {
        return Err(Error::TooLarge {
            what: "plan",
            count: shape.count as u128,
            elem_size: shape.elem_size,
            ranks: shape.ranks,
        });
    }
    let algo = choice.resolve(shape)?;
    let plan = algo.path(shape).next(false)?;
    plan.validate().map_err(Error::Plan)?;
    Ok((*plan).clone())
}

/// The path `RINGREDUCE_ALGO` forces on calls left to auto (`None`: unset
/// or `auto`), as it was written.
pub fn forced_algo() -> Result<Option<String>> {
    Ok(ALGO.get()?.filter(|a| a != "auto"))
}

/// The path forced by `RINGREDUCE_ALGO` ([`ALGO`], checked
/// when read), if set to a fixed algorithm.
fn forced() -> Result<Option<Arc<dyn Algorithm>>> {
    match forced_algo()? {
        Some(v) => parse(&v)
            .map(Some)
            .map_err(|e| Error::BadArgument(format!("RINGREDUCE_ALGO={v}: {e}"))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests;
