//! The plan's data: what each rank does in one collective call.
//!
//! A plan is per-rank lists of [`Op`]s. Each op runs on one *lane* of its
//! rank (an in-order queue: a CUDA stream, or simply program order on the
//! CPU), and is ordered with anything else only through *signals*: an op may
//! wait for signals before it starts and may record one signal when it is
//! done. Every signal has a [`SignalKind`] that says how a backend realises it
//! (an event recorded on one stream and waited on by another, or a flag in
//! GPU memory written and polled inside a kernel), so the mapping from plan to
//! driver calls is one-to-one and nothing has to be recognised later.
//!
//! What an op does to memory is defined once, in
//! [`interp`](super::interp); the validator, the trace and the CPU backend
//! all go through it.

use crate::schedule::Phase;
use std::ops::Range;

/// The collectives a plan can implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Collective {
    /// Every rank ends with the reduction of all inputs.
    #[default]
    AllReduce,
    /// Rank r ends with chunk r of the reduction of all inputs.
    ReduceScatter,
    /// Every rank ends with the concatenation of all inputs.
    AllGather,
    /// Every rank ends with rank `root`'s input (the other ranks' inputs
    /// are not read).
    Broadcast {
        /// The rank whose input every rank ends with.
        root: usize,
    },
}

impl Collective {
    /// The collectives the command line measures and checks against NCCL
    /// (not [`Collective::Broadcast`], a library call).
    pub const ALL: [Collective; 3] = [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
    ];

    /// Name as the CLI spells it (`all-reduce`, `reduce-scatter`, `all-gather`).
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all-reduce",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllGather => "all-gather",
            Collective::Broadcast { .. } => "broadcast",
        }
    }

    /// Whether the collective reduces (takes a reduce op).
    pub fn reduces(self) -> bool {
        matches!(self, Collective::AllReduce | Collective::ReduceScatter)
    }

    /// The root of a broadcast.
    pub fn root(self) -> Option<usize> {
        match self {
            Collective::Broadcast { root } => Some(root),
            _ => None,
        }
    }

    /// nccl-tests' bus-bandwidth factor: `2(N-1)/N` for all-reduce,
    /// `(N-1)/N` for reduce-scatter and all-gather, 0 for one rank.
    pub fn bus_factor(self, ranks: usize) -> f64 {
        if ranks <= 1 {
            return 0.0;
        }
        let n = ranks as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            // nccl-tests: a broadcast's bus bandwidth is its algorithm
            // bandwidth.
            Collective::Broadcast { .. } => 1.0,
            _ => (n - 1.0) / n,
        }
    }

    /// Parse one name (`all-reduce`, `allreduce`, `ar`, ...).
    pub fn parse(s: &str) -> Result<Collective, String> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "all-reduce" | "allreduce" | "ar" => Ok(Collective::AllReduce),
            "reduce-scatter" | "reducescatter" | "rs" => Ok(Collective::ReduceScatter),
            "all-gather" | "allgather" | "ag" => Ok(Collective::AllGather),
            other => Err(format!(
                "unknown collective {other:?} (expected all-reduce, reduce-scatter or all-gather)"
            )),
        }
    }
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        match self {
            Collective::Broadcast { root } => write!(f, " from rank {root}"),
            _ => Ok(()),
        }
    }
}

impl std::str::FromStr for Collective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Collective::parse(s)
    }
}

/// What a plan is for: the collective, the ranks, the element count and
/// size, and whether the output buffer is also the input.
///
/// `count` is per rank and in NCCL's convention for the collective:
/// all-reduce `count` elements in and out; reduce-scatter `count` elements out
/// (`ranks * count` in); all-gather `count` elements in (`ranks * count` out);
/// broadcast `count` elements in (read on the root only) and out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Which collective.
    pub collective: Collective,
    /// The ranks that take part.
    pub ranks: usize,
    /// NCCL's count (elements per rank, see above).
    pub count: usize,
    /// Bytes per element.
    pub elem_size: usize,
    /// Whether each rank's output overwrites its input buffer.
    pub in_place: bool,
}

impl Shape {
    /// An all-reduce of `count` elements of `elem_size` bytes on `ranks` ranks.
    pub fn all_reduce(ranks: usize, count: usize, elem_size: usize, in_place: bool) -> Shape {
        Shape {
            collective: Collective::AllReduce,
            ranks,
            count,
            elem_size,
            in_place,
        }
    }

    /// Elements of the send buffer (0 in place: the input lives in `Recv`).
    pub fn send_len(&self) -> usize {
        if self.in_place {
            return 0;
        }
        match self.collective {
            Collective::ReduceScatter => self.count.saturating_mul(self.ranks),
            _ => self.count,
        }
    }

    /// Elements of the receive buffer (saturating: a shape too large for
    /// the address space says so through a length no buffer has; the
    /// engine refuses it, `Error::TooLarge`).
    pub fn recv_len(&self) -> usize {
        match self.collective {
            Collective::AllReduce | Collective::Broadcast { .. } => self.count,
            // In place, reduce-scatter works in the whole input buffer.
            Collective::ReduceScatter if self.in_place => self.count.saturating_mul(self.ranks),
            Collective::ReduceScatter => self.count,
            Collective::AllGather => self.count.saturating_mul(self.ranks),
        }
    }

    /// Where rank `r`'s input lies (NCCL's in-place convention: for
    /// all-gather the input is the rank's own slice of the output).
    pub fn input(&self, r: usize) -> Region {
        let whole = match self.collective {
            Collective::ReduceScatter => self.count * self.ranks,
            _ => self.count,
        };
        match (self.collective, self.in_place) {
            (Collective::AllGather, true) => {
                Region::new(Buf::Recv, r * self.count..(r + 1) * self.count)
            }
            (_, true) => Region::new(Buf::Recv, 0..whole),
            (_, false) => Region::new(Buf::Send, 0..whole),
        }
    }

    /// Where rank `r`'s output lies (reduce-scatter in place: the rank's own
    /// slice of the input buffer).
    pub fn output(&self, r: usize) -> Region {
        match (self.collective, self.in_place) {
            (Collective::ReduceScatter, true) => {
                Region::new(Buf::Recv, r * self.count..(r + 1) * self.count)
            }
            _ => Region::new(Buf::Recv, 0..self.recv_len()),
        }
    }

    /// Bytes per rank as nccl-tests reports a row's size: all-reduce and
    /// broadcast `count` elements; reduce-scatter and all-gather
    /// `ranks * count` (the whole buffer).
    pub fn bytes(&self) -> u64 {
        let elems = match self.collective {
            Collective::AllReduce | Collective::Broadcast { .. } => self.count,
            _ => self.count * self.ranks,
        };
        (elems * self.elem_size) as u64
    }
}

/// The per-rank buffers a plan refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buf {
    /// The input of an out-of-place collective (never written).
    Send,
    /// The output (and, in place, also the input).
    Recv,
    /// Scratch for incoming partial data, owned by the engine.
    Scratch,
    /// An LL kernel's slots ([`KernelKind::uses_lines`]: its puts land here),
    /// owned by the engine. A device keeps every element of them in a line
    /// with the call's flag, `schedule::LL_WIDEN` times its size,
    /// so a slot starts at a multiple of 8 bytes
    /// (`schedule::ll_slot_len`); the CPU backend keeps the
    /// elements as they are and its flags on the signal board.
    Lines,
}

impl Buf {
    /// Every buffer, in index order.
    pub const ALL: [Buf; 4] = [Buf::Send, Buf::Recv, Buf::Scratch, Buf::Lines];
    /// The buffer's index in [`Buf::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
    /// The buffer's name in traces ("send", "recv", "scratch", "lines").
    pub fn name(self) -> &'static str {
        match self {
            Buf::Send => "send",
            Buf::Recv => "recv",
            Buf::Scratch => "scratch",
            Buf::Lines => "lines",
        }
    }
}

/// A range of elements in one of a rank's buffers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Region {
    /// Which buffer.
    pub buf: Buf,
    /// Which elements of it.
    pub range: Range<usize>,
}

impl Region {
    /// Elements `range` of `buf`.
    pub fn new(buf: Buf, range: Range<usize>) -> Self {
        Region { buf, range }
    }
    /// Its elements.
    pub fn len(&self) -> usize {
        self.range.len()
    }
    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
    /// The part `rel` of this region (element offsets from its start).
    pub fn sub(&self, rel: Range<usize>) -> Region {
        let start = self.range.start;
        Region::new(self.buf, start + rel.start..start + rel.end)
    }
    /// Whether the two regions share an element.
    pub fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf
            && self.range.start < other.range.end
            && other.range.start < self.range.end
    }
}

/// The in-order queues of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// Kernels (reduce, exchange) and, for one-lane plans, everything.
    Compute = 0,
    /// Copy-engine copies that should overlap the compute lane.
    Copy = 1,
}

/// Number of lanes per rank.
pub const LANES: usize = 2;

impl Lane {
    /// The lane's name in traces and timelines.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Compute => "compute",
            Lane::Copy => "copy",
        }
    }
}

/// A completion flag recorded once per call by one rank and waited on by
/// any op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SignalId(pub usize);

/// How a backend realises a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalKind {
    /// Recorded on the producer's lane after the op (`cuEventRecord`), waited
    /// on by the consumer's lane (`cuStreamWaitEvent`). The consumer's host
    /// thread issues the wait only after the producer's thread issued the
    /// record.
    Event,
    /// Raised and polled inside kernels ([`OpKind::Kernel`]): a put step
    /// raises it in the receiving rank's memory (after its data, or in the
    /// same words: LL), the receiving rank's step polls it. No host
    /// involvement.
    Flag,
}

/// One signal of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// The rank whose op records it.
    pub owner: usize,
    /// The lane of that op.
    pub lane: Lane,
    /// How it is raised and waited for.
    pub kind: SignalKind,
    /// Whether anyone outside the producer's own (rank, lane) waits on it.
    /// Backends need not record the others: in-lane order covers them.
    pub needed: bool,
    /// Whether a rank other than the owner waits on it. One process per GPU
    /// records only these as interprocess events; the others stay ordinary
    /// events of the owner's context.
    pub remote: bool,
}

/// How a reduce treats its operands, for the reduce ops whose operands are
/// transformed (NCCL's `PreMulSum` for a floating-point average: each input
/// is multiplied by 1/N exactly once, before it is first added; and
/// `SumPostDiv` for an integer average: the complete sum is divided by N
/// once). Every reduce of every plan carries it, for every op; the other ops
/// ignore it. The validator checks it against the data flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReduceStep {
    /// `a` is a rank's untouched input: pre-multiply it.
    pub pre_a: bool,
    /// `b` is a rank's untouched input: pre-multiply it.
    pub pre_b: bool,
    /// The result is complete (every rank's input): post-divide it.
    pub post: bool,
}

/// Which kernel runs an [`OpKind::Kernel`], and so the contract its steps
/// keep (the validator checks it; a backend lowers it to that kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// The two-rank exchange: a *put* of this rank's input into the peer's
    /// slot (raising the step's flag in the peer's memory), then a *receive*
    /// that waits for the peer's put and computes `dst = input (op) slot`
    /// (two steps; the regions may be empty: a hand-shake).
    Exchange,
    /// The ring in one kernel per rank, NCCL's LL protocol: each step is a
    /// *put* (a copy into the right neighbour's slot whose words carry the
    /// call's flag; it raises the step's flag and waits for nothing) or a
    /// *receive* (it waits for one flag of the left neighbour's puts and
    /// reduces or copies that slot into this rank's memory). Slots are
    /// LL slots ([`Buf::Lines`]) the step's put writes and only its receive
    /// reads.
    LlRing,
    /// The one-shot of two ranks on the LL ring's kernel: the ring of one
    /// chunk and one step, a *put* of the whole input into the peer's slot
    /// and a *receive* that reduces it with the input (the contract of
    /// [`KernelKind::LlRing`], on 2 ranks).
    LlOneShot,
    /// The ring in one kernel per rank, NCCL's Simple protocol: the steps
    /// of [`KernelKind::LlRing`], each put storing its chunk plainly into
    /// the right neighbour's scratch slot ([`Buf::Scratch`]) and then
    /// raising one flag per tile of it, each receive waiting for those
    /// flags. A slot is written by one put and read by one receive per call.
    SimpleRing,
    /// The all-reduce of one rail of a hierarchical plan (the ranks with
    /// the same index on every node), one op per member. Its steps are a
    /// ring over the rail's members, as an LL ring's are: each step a *put*
    /// into the right member's scratch slot of that step (each slot written
    /// once per call; the first put into a member waits for that member's
    /// Begin) or a *receive* from the left member's. One machine runs the
    /// steps; a link that reaches the members through a network library
    /// runs the whole op as that library's all-reduce of the op's
    /// [`Group`] instead (MPI's `MPI_Allreduce` on the rail's
    /// communicator), and its steps, their waits and flags, do not run.
    Rail,
}

impl KernelKind {
    /// Whether its slots are LL slots ([`Buf::Lines`]): words that carry
    /// the call's flag on a device.
    pub fn uses_lines(self) -> bool {
        matches!(self, KernelKind::LlRing | KernelKind::LlOneShot)
    }
}

/// What a [`KernelKind::Rail`] op computes as a whole, for a link that runs
/// it as one all-reduce over its members instead of its steps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Group {
    /// The members, in rail order (one per node); the op's rank is one.
    pub members: Vec<usize>,
    /// This rank's contribution (its memory).
    pub src: Region,
    /// Where the reduction over the members lands (its memory; the same
    /// range as `src`'s, and may be `src` itself).
    pub dst: Region,
    /// Whether `src` takes the op's pre-op (`pre_a`) and the result its
    /// post-op (`post`).
    pub step: ReduceStep,
}

/// One kernel per rank whose steps are ordered on the GPU itself: a step
/// waits for flags that other ranks' steps raise ([`SignalKind::Flag`]),
/// applies its effect (a [`OpKind::Copy`] or [`OpKind::Reduce`]), and may
/// raise a flag of its own. The op's own `waits` (events) come before the
/// first step and its `signal` after the last.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// Which kernel runs the steps.
    pub kind: KernelKind,
    /// The steps in order, each an op of its own: its `kind` a copy or a
    /// reduce, its `waits` flags, its `signal` a flag, its label naming the
    /// ring step for traces and errors (its lane is the kernel's).
    pub steps: Vec<Op>,
    /// A rail's op as a whole ([`KernelKind::Rail`] only).
    pub group: Option<Group>,
}

/// What an op does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Start of the collective on this rank.
    Begin,
    /// Copy `src` on rank `from` into `dst` on rank `to` with the copy engine
    /// (`cuMemcpyPeerAsync`). The issuing rank (whose list holds the op) is
    /// `from` for a push or `to` for a pull; a local copy has `from == to`.
    Copy {
        /// The rank whose memory is read.
        from: usize,
        /// The rank whose memory is written.
        to: usize,
        /// What is read, in `from`'s memory.
        src: Region,
        /// Where it lands, in `to`'s memory.
        dst: Region,
    },
    /// `dst = a (op) b` by the reduce kernel on this rank; `a` and `dst` are
    /// this rank's memory, `b` is rank `b_rank`'s (another rank's memory is
    /// read by the kernel through peer access). `dst` may equal `a` exactly.
    Reduce {
        /// Where the result goes (this rank's memory).
        dst: Region,
        /// The first operand (this rank's memory).
        a: Region,
        /// The rank whose memory holds `b`.
        b_rank: usize,
        /// The second operand.
        b: Region,
        /// Which operands take the op's pre-op and whether the result takes
        /// its post-op ([`ReduceStep`]).
        step: ReduceStep,
    },
    /// Steps ordered by flags inside one kernel (see [`Kernel`]).
    Kernel(Kernel),
    /// End of the collective on this rank.
    End,
}

impl OpKind {
    /// Short name for traces and errors.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Begin => "begin",
            OpKind::Copy { .. } => "copy",
            OpKind::Reduce { .. } => "reduce",
            OpKind::Kernel(k) => match k.kind {
                KernelKind::Exchange => "exchange",
                KernelKind::LlRing => "ll ring kernel",
                KernelKind::LlOneShot => "ll one-shot kernel",
                KernelKind::SimpleRing => "simple ring kernel",
                KernelKind::Rail => "rail all-reduce",
            },
            OpKind::End => "end",
        }
    }
}

/// Where an op sits in the algorithm, for traces, timelines and errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Label {
    /// Reduce-scatter or all-gather (none for ops outside a ring).
    pub phase: Option<Phase>,
    /// The ring step within the phase.
    pub step: usize,
    /// The chunk the op moves or reduces.
    pub chunk: usize,
    /// The slice of that chunk (pipelined paths).
    pub slice: usize,
    /// A word for what the op is, where the above do not say it.
    pub note: &'static str,
}

/// One operation of one rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Op {
    /// The lane (stream) that runs it.
    pub lane: Lane,
    /// What it does.
    pub kind: OpKind,
    /// Signals to wait for before the op starts.
    pub waits: Vec<SignalId>,
    /// Signal recorded when the op is done.
    pub signal: Option<SignalId>,
    /// Where it sits in the algorithm.
    pub label: Label,
}

/// A whole collective call: per-rank op lists plus what they need.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The path that built it, e.g. `ring:pipe2`, `oneshot:flag`.
    pub name: String,
    /// The call it is a plan for.
    pub shape: Shape,
    /// `ops[r]` is rank r's op list, in issue order.
    pub ops: Vec<Vec<Op>>,
    /// Every signal, indexed by [`SignalId`].
    pub signals: Vec<Signal>,
    /// Scratch elements each rank needs.
    pub scratch_len: usize,
    /// Elements of LL slots ([`Buf::Lines`]) each rank needs.
    pub lines_len: usize,
    /// Fenced plans order everything that touches a rank's memory after that
    /// rank's Begin and before its End, so any sequence of them is safe. An
    /// unfenced plan is only safe after specific predecessors (checked with
    /// [`Plan::validate_sequence`]).
    pub fenced: bool,
    /// Not a collective (a fence, a link probe): the data-flow check, which
    /// checks what the collective promises, does not apply.
    pub probe: bool,
    /// The node size the plan was built for (`hier:G`: `Some(G)`, ranks `r`
    /// and `s` on different nodes when `r / G != s / G`); `None`: the plan
    /// does not know of nodes. The timeline draws the copies between nodes
    /// on a network track of their own.
    pub per_node: Option<usize>,
    /// What is computed once per plan object, when first asked: the
    /// validator's verdict ([`Plan::validate_once`]) and the traffic
    /// ([`Plan::traffic`]).
    pub(crate) memo: Memo,
}

/// What is computed once per plan object and kept with it, whatever
/// address it lives at: the validator's verdict (debug builds validate each
/// plan object once, [`crate::algo::checked`]) and the bytes each rank
/// moves (every call of a cached plan reports them). A plan is not changed
/// once built; a clone is another object and starts empty.
#[derive(Default)]
pub(crate) struct Memo {
    verdict: std::sync::OnceLock<Result<(), String>>,
    traffic: std::sync::OnceLock<Vec<Traffic>>,
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo::default()
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.verdict.get() {
            None => f.write_str("unchecked"),
            Some(Ok(())) => f.write_str("valid"),
            Some(Err(_)) => f.write_str("invalid"),
        }
    }
}

/// Bytes moved by one rank in one call, between ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Traffic {
    /// Bytes the rank sent to other ranks.
    pub sent: u64,
    /// Bytes it received from them.
    pub received: u64,
    /// Of `sent`, the bytes that left the rank's node (the network
    /// transport's puts; 0 inside one machine). Counted by the backends
    /// over nodes (the CPU backend's network transport, the CUDA backend's
    /// host-staged hop); a plan's own count is
    /// [`Plan::node_traffic`].
    pub network: u64,
}

impl Plan {
    /// [`Plan::validate`], run once per plan object: later calls give the
    /// first verdict again (a clone is validated afresh).
    pub fn validate_once(&self) -> Result<(), String> {
        self.memo.verdict.get_or_init(|| self.validate()).clone()
    }

    /// The ranks of the plan.
    pub fn ranks(&self) -> usize {
        self.shape.ranks
    }

    /// Number of signals.
    /// Each signal's marks as the plan's waits imply them: (needed,
    /// remote). Needed: someone outside the producer's own (rank, lane)
    /// waits on it, or it is a flag. Remote: a rank other than its owner
    /// waits on it. The builder sets them; the validator checks them.
    pub(crate) fn signal_marks(&self) -> Vec<(bool, bool)> {
        let mut marks = vec![(false, false); self.signals.len()];
        for (r, ops) in self.ops.iter().enumerate() {
            for op in ops {
                for w in super::interp::parts(r, op).iter().flat_map(|p| p.waits) {
                    let (Some(s), Some(m)) = (self.signals.get(w.0), marks.get_mut(w.0)) else {
                        continue; // an unknown signal: the validator reports it
                    };
                    m.0 |= !(s.owner == r && s.lane == op.lane) || s.kind == SignalKind::Flag;
                    m.1 |= s.owner != r;
                }
            }
        }
        marks
    }

    /// How many signals the plan has.
    pub(crate) fn signal_count(&self) -> usize {
        self.signals.len()
    }

    /// True when signal `s` is recorded on rank `r`'s `lane`, so a wait on it
    /// from that lane is already implied by in-lane order.
    pub fn same_lane(&self, s: SignalId, r: usize, lane: Lane) -> bool {
        self.signals
            .get(s.0)
            .is_some_and(|g| g.owner == r && g.lane == lane)
    }

    /// Error unless the plan was built for `ranks` ranks.
    pub(crate) fn check_ranks(&self, ranks: usize) -> Result<(), String> {
        if self.shape.ranks != ranks {
            return Err(format!(
                "{}: plan for {} ranks on {ranks} ranks",
                self.name, self.shape.ranks
            ));
        }
        Ok(())
    }

    /// Whether every cross-rank or cross-lane ordering of the plan happens
    /// on the GPU itself (flags inside exchange kernels), so that per-GPU
    /// CUDA graphs of the compute lane can replay it. The CUDA backend
    /// captures any other plan into one graph across every GPU.
    pub fn device_ordered(&self) -> bool {
        self.signals
            .iter()
            .all(|s| !s.needed || s.kind == SignalKind::Flag)
            && self.ops.iter().flatten().all(|op| op.lane == Lane::Compute)
    }

    /// Whether some rank's op waits on a signal of another rank (an event
    /// or a flag another rank's GPU work raises). A plan without such waits
    /// orders its ranks only where every plan does, on the host, at Begin
    /// (the path for processes that share a GPU:
    /// [`crate::algo::Placement::time_sliced`]).
    ///
    /// That is each signal's `remote` mark, set when the plan is built and
    /// checked against the waits by the validator.
    pub fn waits_between_ranks(&self) -> bool {
        self.signals.iter().any(|s| s.remote)
    }

    /// Whether some rank runs a kernel whose steps wait for other ranks'
    /// inside the GPU ([`OpKind::Kernel`]).
    pub fn has_kernels(&self) -> bool {
        self.ops
            .iter()
            .flatten()
            .any(|op| matches!(op.kind, OpKind::Kernel(_)))
    }

    /// Bytes each rank sends to other ranks, and receives from them
    /// (counted from the ops once per plan object).
    pub fn traffic(&self) -> Vec<Traffic> {
        self.memo
            .traffic
            .get_or_init(|| self.traffic_between(|from, to| from != to))
            .clone()
    }

    /// Bytes each rank sends to, and receives from, ranks on other nodes
    /// when the ranks are grouped into nodes of `per_node` consecutive
    /// ranks (rank `r` on node `r / per_node`): the part of
    /// [`Plan::traffic`] that would cross the network between machines.
    /// `per_node` 0 counts as 1 (every rank its own node).
    pub fn node_traffic(&self, per_node: usize) -> Vec<Traffic> {
        let g = per_node.max(1);
        self.traffic_between(|from, to| from / g != to / g)
    }

    /// The bytes of every move from rank `from` to rank `to` that
    /// `counts(from, to)` accepts, per rank sent and received.
    fn traffic_between(&self, counts: impl Fn(usize, usize) -> bool) -> Vec<Traffic> {
        let elem = self.shape.elem_size as u64;
        let mut t = vec![Traffic::default(); self.ranks()];
        for (rank, ops) in self.ops.iter().enumerate() {
            for op in ops {
                for e in super::interp::effects(rank, &op.kind) {
                    if let Some((from, to, len)) = e.moved() {
                        if counts(from, to) {
                            t[from].sent += len as u64 * elem;
                            t[to].received += len as u64 * elem;
                        }
                    }
                }
            }
        }
        t
    }

    /// Number of ops of all ranks.
    pub(crate) fn op_count(&self) -> usize {
        self.ops.iter().map(Vec::len).sum()
    }
}
