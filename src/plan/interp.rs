//! The one interpreter of plans: what each op does to memory, in what parts.
//!
//! Every consumer of a plan goes through this module, so they cannot
//! disagree about an op's meaning:
//!
//! * [`parts`] splits an op into the steps between which other ranks' work
//!   may interleave: most ops are one part (wait, act, signal); a
//!   [`super::Kernel`] is one part per step (the two-rank exchange: push
//!   and raise its flag; wait for the peer's flag and reduce).
//! * `effects` / [`Effect`] say which memory a part reads and writes.
//! * [`Memory`] is the pluggable memory an effect is applied to:
//!   [`SymMem`] (symbolic: which inputs, at which offset, scaled how, are
//!   summed in each element) for the validator and the trace, and the CPU
//!   backend's real buffers.

use super::ir::{Buf, Label, Op, OpKind, ReduceStep, Region, SignalId};
use std::fmt::Write as _;
use std::ops::Range;
use std::rc::Rc;

/// One memory effect of an op part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect<'a> {
    /// `to.dst = from.src`.
    Copy {
        /// The rank read.
        from: usize,
        /// What is read.
        src: &'a Region,
        /// The rank written.
        to: usize,
        /// Where it lands.
        dst: &'a Region,
    },
    /// `rank.dst = rank.a (op) b_rank.b`.
    Reduce {
        /// The rank that reduces (and owns `dst` and `a`).
        rank: usize,
        /// The result.
        dst: &'a Region,
        /// The first operand.
        a: &'a Region,
        /// The rank that owns `b`.
        b_rank: usize,
        /// The second operand.
        b: &'a Region,
        /// The pre- and post-ops that apply.
        step: ReduceStep,
    },
}

/// A memory access: rank, region, write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access<'a> {
    /// Whose memory.
    pub rank: usize,
    /// Which elements.
    pub region: &'a Region,
    /// Whether it is written (else read).
    pub write: bool,
}

impl<'a> Effect<'a> {
    /// (from, to, elements) when the effect moves data from one rank's
    /// memory to another's (a peer read by a reduce counts as moved to the
    /// reducing rank).
    pub fn moved(&self) -> Option<(usize, usize, usize)> {
        match *self {
            Effect::Copy { from, src, to, .. } => Some((from, to, src.len())),
            Effect::Reduce {
                rank, b_rank, b, ..
            } => Some((b_rank, rank, b.len())),
        }
    }

    /// What the effect reads and writes.
    pub(crate) fn accesses(&self) -> Vec<Access<'a>> {
        match *self {
            Effect::Copy { from, src, to, dst } => vec![
                Access {
                    rank: from,
                    region: src,
                    write: false,
                },
                Access {
                    rank: to,
                    region: dst,
                    write: true,
                },
            ],
            Effect::Reduce {
                rank,
                dst,
                a,
                b_rank,
                b,
                ..
            } => vec![
                Access {
                    rank,
                    region: a,
                    write: false,
                },
                Access {
                    rank: b_rank,
                    region: b,
                    write: false,
                },
                Access {
                    rank,
                    region: dst,
                    write: true,
                },
            ],
        }
    }
}

/// One part of an op: wait for `waits`, apply `effect`, record `signal`.
/// `label` names it: the op's label, or a kernel step's own; `step` is that
/// kernel step's index.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// Signals to wait for first.
    pub waits: &'a [SignalId],
    /// What it does to memory (none for `End` and a bare signal).
    pub effect: Option<Effect<'a>>,
    /// The signal raised after it.
    pub signal: Option<SignalId>,
    /// Where it sits in the algorithm.
    pub label: &'a Label,
    /// The kernel step's index, for a kernel's part.
    pub step: Option<usize>,
}

/// The parts of rank `rank`'s op, in order. A kernel's op-level waits go
/// with its first step when that step waits for no flag, and its op-level
/// signal with its last step when that step raises none (the exchange and
/// the LL ring: one part per step); otherwise they are parts of their own.
pub fn parts(rank: usize, op: &Op) -> Vec<Part<'_>> {
    let label = &op.label;
    let OpKind::Kernel(k) = &op.kind else {
        return vec![Part {
            waits: &op.waits,
            effect: single_effect(rank, &op.kind),
            signal: op.signal,
            label,
            step: None,
        }];
    };
    let mut v: Vec<Part<'_>> = k
        .steps
        .iter()
        .enumerate()
        .map(|(j, s)| Part {
            waits: &s.waits,
            effect: single_effect(rank, &s.kind),
            signal: s.signal,
            label: &s.label,
            step: Some(j),
        })
        .collect();
    let own = Part {
        waits: &[],
        effect: None,
        signal: None,
        label,
        step: None,
    };
    if !op.waits.is_empty() {
        match v.first_mut() {
            Some(p) if p.waits.is_empty() => p.waits = &op.waits,
            _ => v.insert(
                0,
                Part {
                    waits: &op.waits,
                    ..own
                },
            ),
        }
    }
    if op.signal.is_some() || v.is_empty() {
        match v.last_mut() {
            Some(p) if p.signal.is_none() => p.signal = op.signal,
            _ => v.push(Part {
                signal: op.signal,
                ..own
            }),
        }
    }
    v
}

fn single_effect(rank: usize, kind: &OpKind) -> Option<Effect<'_>> {
    match kind {
        OpKind::Begin | OpKind::End | OpKind::Kernel(_) => None,
        OpKind::Copy { from, to, src, dst } => Some(Effect::Copy {
            from: *from,
            src,
            to: *to,
            dst,
        }),
        OpKind::Reduce {
            dst,
            a,
            b_rank,
            b,
            step,
        } => Some(Effect::Reduce {
            rank,
            dst,
            a,
            b_rank: *b_rank,
            b,
            step: *step,
        }),
    }
}

/// Every memory effect of an op, in order.
pub(crate) fn effects(rank: usize, kind: &OpKind) -> Vec<Effect<'_>> {
    match kind {
        OpKind::Kernel(k) => k
            .steps
            .iter()
            .filter_map(|s| single_effect(rank, &s.kind))
            .collect(),
        k => single_effect(rank, k).into_iter().collect(),
    }
}

/// Memory an effect can be applied to.
pub trait Memory {
    /// What a failed access is.
    type Error;
    /// `to.dst = from.src`.
    fn copy(
        &mut self,
        from: usize,
        src: &Region,
        to: usize,
        dst: &Region,
    ) -> Result<(), Self::Error>;
    /// `rank.dst = rank.a (op) b_rank.b`, with `step`'s pre- and post-ops.
    fn reduce(
        &mut self,
        rank: usize,
        dst: &Region,
        a: &Region,
        b_rank: usize,
        b: &Region,
        step: ReduceStep,
    ) -> Result<(), Self::Error>;
}

/// Apply one effect to `mem`.
pub fn apply<M: Memory + ?Sized>(mem: &mut M, e: &Effect<'_>) -> Result<(), M::Error> {
    match *e {
        Effect::Copy { from, src, to, dst } => mem.copy(from, src, to, dst),
        Effect::Reduce {
            rank,
            dst,
            a,
            b_rank,
            b,
            step,
        } => mem.reduce(rank, dst, a, b_rank, b, step),
    }
}

// ---------------------------------------------------------------------------
// Symbolic memory
// ---------------------------------------------------------------------------

/// `count` copies of input element `p + delta` of `rank`'s input, for the
/// element at position `p` of the buffer holding the value; `scaled` of them
/// pre-multiplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Term {
    /// Whose input.
    pub rank: u32,
    /// The input element's offset from the position holding the value.
    pub delta: i64,
    /// How many copies are summed in.
    pub count: u16,
    /// How many of them were pre-multiplied.
    pub scaled: u16,
}

/// A symbolic value: a sum of input elements, and how often the result was
/// post-divided. `None` terms means the element was never written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Val {
    /// The input elements summed in (none: never written).
    pub terms: Option<Rc<Vec<Term>>>,
    /// How often the value was post-divided.
    pub post: u16,
}

impl Val {
    /// An element never written.
    pub const UNDEF: Val = Val {
        terms: None,
        post: 0,
    };

    /// Rank `rank`'s input, for a buffer where input element 0 is at
    /// position `at`.
    pub fn input(rank: usize, at: usize) -> Val {
        Val {
            terms: Some(Rc::new(vec![Term {
                rank: rank as u32,
                delta: -(at as i64),
                count: 1,
                scaled: 0,
            }])),
            post: 0,
        }
    }

    /// The value seen from a position `shift` further on (a copy from
    /// position p to position p + shift).
    fn shifted(&self, shift: i64) -> Val {
        if shift == 0 {
            return self.clone();
        }
        Val {
            terms: self.terms.as_ref().map(|t| {
                Rc::new(
                    t.iter()
                        .map(|x| Term {
                            delta: x.delta - shift,
                            ..*x
                        })
                        .collect(),
                )
            }),
            post: self.post,
        }
    }

    /// Whether this is exactly one rank's untouched input.
    pub(crate) fn is_raw(&self) -> bool {
        matches!(&self.terms, Some(t) if t.len() == 1 && t[0].count == 1 && t[0].scaled == 0)
            && self.post == 0
    }

    /// Whether every rank in `0..n` contributes.
    pub fn is_complete(&self, n: usize) -> bool {
        match &self.terms {
            Some(t) => (0..n as u32).all(|r| t.iter().any(|x| x.rank == r)),
            None => false,
        }
    }

    /// The ranks summed in (for traces), e.g. `x0+x2`, `ALL`, `-`.
    pub fn describe(&self, n: usize) -> String {
        let Some(t) = &self.terms else {
            return "-".into();
        };
        let mut ranks: Vec<u32> = t.iter().map(|x| x.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        if n > 1 && ranks.len() == n && t.iter().all(|x| x.count == 1) {
            return "ALL".into();
        }
        let mut s = String::new();
        for (i, x) in t.iter().enumerate() {
            if i > 0 {
                s.push('+');
            }
            if x.count > 1 {
                let _ = write!(s, "{}*", x.count);
            }
            let _ = write!(s, "x{}", x.rank);
        }
        s
    }
}

/// `a (op) b` with the pre/post annotations applied symbolically.
fn combine(a: &Val, b: &Val, step: ReduceStep, n: usize) -> Result<Val, String> {
    let (Some(ta), Some(tb)) = (&a.terms, &b.terms) else {
        return Ok(Val::UNDEF);
    };
    let scale = |v: &Val, t: &Vec<Term>, pre: bool, which: &str| -> Result<Vec<Term>, String> {
        if !pre {
            return Ok(t.clone());
        }
        if !v.is_raw() {
            return Err(format!(
                "operand {which} is marked as an untouched input (pre-multiply) but holds {}",
                v.describe(n)
            ));
        }
        Ok(vec![Term { scaled: 1, ..t[0] }])
    };
    let mut terms = scale(a, ta, step.pre_a, "a")?;
    for x in scale(b, tb, step.pre_b, "b")? {
        match terms
            .iter_mut()
            .find(|y| y.rank == x.rank && y.delta == x.delta)
        {
            Some(y) => {
                y.count = y.count.saturating_add(x.count);
                y.scaled = y.scaled.saturating_add(x.scaled);
            }
            None => terms.push(x),
        }
    }
    terms.sort_unstable();
    let mut v = Val {
        terms: Some(Rc::new(terms)),
        post: a.post.saturating_add(b.post),
    };
    if step.post {
        if !v.is_complete(n) {
            return Err(format!(
                "result marked complete (post-divide) but holds {}",
                v.describe(n)
            ));
        }
        v.post = v.post.saturating_add(1);
    }
    Ok(v)
}

/// One buffer as sorted, disjoint segments of equal symbolic value.
#[derive(Debug, Clone, Default)]
pub struct Segments {
    /// (range, value): every element of the range holds `value` (whose
    /// terms are relative to the element's own position).
    segs: Vec<(Range<usize>, Val)>,
}

impl Segments {
    fn new(len: usize, v: Val) -> Self {
        let segs = if len == 0 { vec![] } else { vec![(0..len, v)] };
        Segments { segs }
    }

    /// The segments covering `r`, clipped to it.
    pub fn read(&self, r: &Range<usize>) -> Vec<(Range<usize>, Val)> {
        let i = self.segs.partition_point(|(s, _)| s.end <= r.start);
        self.segs[i..]
            .iter()
            .take_while(|(s, _)| s.start < r.end)
            .map(|(s, v)| (s.start.max(r.start)..s.end.min(r.end), v.clone()))
            .collect()
    }

    /// Overwrite `r` with `parts` (which cover it exactly, in order).
    fn write(&mut self, r: &Range<usize>, parts: Vec<(Range<usize>, Val)>) {
        if r.is_empty() {
            return;
        }
        let lo = self.segs.partition_point(|(s, _)| s.end <= r.start);
        let hi = self.segs.partition_point(|(s, _)| s.start < r.end);
        let mut keep = Vec::with_capacity(parts.len() + 2);
        if let Some((s, v)) = self.segs.get(lo) {
            if s.start < r.start {
                keep.push((s.start..r.start, v.clone()));
            }
        }
        keep.extend(parts);
        if hi > 0 {
            if let Some((s, v)) = self.segs.get(hi - 1) {
                if s.end > r.end {
                    keep.push((r.end..s.end, v.clone()));
                }
            }
        }
        self.segs.splice(lo..hi, keep);
    }
}

/// Symbolic memory of every rank's buffers.
#[derive(Debug, Clone)]
pub struct SymMem {
    /// The ranks.
    pub ranks: usize,
    /// Each rank's buffers, indexed by [`Buf::index`](super::Buf::index).
    pub bufs: Vec<[Segments; 4]>,
}

impl SymMem {
    /// The memory at the start of a call of `plan`: each rank's input holds
    /// its input, everything else is unwritten.
    pub fn new(plan: &super::ir::Plan) -> SymMem {
        let shape = &plan.shape;
        let bufs = (0..shape.ranks)
            .map(|r| {
                let mut b = [
                    Segments::new(shape.send_len(), Val::UNDEF),
                    Segments::new(shape.recv_len(), Val::UNDEF),
                    Segments::new(plan.scratch_len, Val::UNDEF),
                    Segments::new(plan.lines_len, Val::UNDEF),
                ];
                let input = shape.input(r);
                let v = Val::input(r, input.range.start);
                b[input.buf.index()].write(&input.range, vec![(input.range.clone(), v)]);
                b
            })
            .collect();
        SymMem {
            ranks: shape.ranks,
            bufs,
        }
    }

    /// The value segments of `region` on `rank`.
    pub fn read(&self, rank: usize, region: &Region) -> Vec<(Range<usize>, Val)> {
        self.bufs[rank][region.buf.index()].read(&region.range)
    }

    /// The value at one element.
    pub fn at(&self, rank: usize, buf: Buf, i: usize) -> Val {
        self.bufs[rank][buf.index()]
            .read(&(i..i + 1))
            .pop()
            .map_or(Val::UNDEF, |(_, v)| v)
    }
}

impl Memory for SymMem {
    type Error = String;

    fn copy(&mut self, from: usize, src: &Region, to: usize, dst: &Region) -> Result<(), String> {
        let shift = dst.range.start as i64 - src.range.start as i64;
        let parts = self.bufs[from][src.buf.index()]
            .read(&src.range)
            .into_iter()
            .map(|(r, v)| {
                let s = (r.start as i64 + shift) as usize..(r.end as i64 + shift) as usize;
                (s, v.shifted(shift))
            })
            .collect();
        self.bufs[to][dst.buf.index()].write(&dst.range, parts);
        Ok(())
    }

    fn reduce(
        &mut self,
        rank: usize,
        dst: &Region,
        a: &Region,
        b_rank: usize,
        b: &Region,
        step: ReduceStep,
    ) -> Result<(), String> {
        let n = self.ranks;
        // Both operands seen from the destination's positions.
        let sa = dst.range.start as i64 - a.range.start as i64;
        let sb = dst.range.start as i64 - b.range.start as i64;
        let va: Vec<(Range<usize>, Val)> = self.bufs[rank][a.buf.index()]
            .read(&a.range)
            .into_iter()
            .map(|(r, v)| {
                (
                    (r.start as i64 + sa) as usize..(r.end as i64 + sa) as usize,
                    v.shifted(sa),
                )
            })
            .collect();
        let vb: Vec<(Range<usize>, Val)> = self.bufs[b_rank][b.buf.index()]
            .read(&b.range)
            .into_iter()
            .map(|(r, v)| {
                (
                    (r.start as i64 + sb) as usize..(r.end as i64 + sb) as usize,
                    v.shifted(sb),
                )
            })
            .collect();
        // Merge the two segmentations.
        let mut out = Vec::with_capacity(va.len() + vb.len());
        let (mut i, mut j) = (0, 0);
        let mut at = dst.range.start;
        while at < dst.range.end && i < va.len() && j < vb.len() {
            let end = va[i].0.end.min(vb[j].0.end);
            let v = combine(&va[i].1, &vb[j].1, step, n)?;
            out.push((at..end, v));
            at = end;
            if va[i].0.end == end {
                i += 1;
            }
            if vb[j].0.end == end {
                j += 1;
            }
        }
        self.bufs[rank][dst.buf.index()].write(&dst.range, out);
        Ok(())
    }
}
