//! The timeline from CUPTI activity records (pure: no driver call; the
//! `profiling` feature). A timed call's ops get consecutive external
//! correlation ids from a process-wide counter ([`CuptiCall::ids`]); CUPTI
//! ties each id to the correlation id of the driver call the op issued, and
//! that to the kernel or copy record with its device timestamps. [`spans`]
//! turns one call's records into the timeline's [`OpTime`]s.

use crate::backend::OpTime;
use crate::cuda::cupti::{Activity, ActivityKind, Issued};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// External ids handed out in this process (0 is never one).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One op of a call timed through CUPTI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRef {
    /// The op's index in the rank's list, and its parts.
    pub op: usize,
    pub parts: usize,
    /// Does no work (a begin or end mark): no record; it is placed at the
    /// latest end of `after`.
    pub mark: bool,
    /// Earlier ops of the call (indices into [`CuptiCall::ops`]) whose ends
    /// start it: the previous op on its lane and the ops of this rank that
    /// record the signals it waits on.
    pub after: Vec<usize>,
}

/// A call timed through CUPTI: its ops, the op with index `i` in `ops`
/// tagged with external id `base + i`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CuptiCall {
    pub base: u64,
    pub ops: Vec<OpRef>,
    /// When the call was issued, host ns since the epoch (where a call has
    /// no record at all, its marks are placed there).
    pub issued_ns: f64,
    /// The order tie only: the kernels and copies the ops issued, in
    /// issue order, with their streams (the callback tie files
    /// correlation ids instead).
    pub issued: Vec<Issued>,
    /// The callback tie only: (correlation id, external id) of each issuing
    /// driver call the ops made, as the callbacks saw them.
    pub ties: Vec<(u32, u64)>,
}

impl CuptiCall {
    /// A call of `n` ops: reserves `n` external ids.
    pub fn new(n: usize, issued_ns: f64) -> Self {
        let base = NEXT_ID.fetch_add(n.max(1) as u64, Ordering::Relaxed);
        CuptiCall {
            base,
            ops: Vec::with_capacity(n),
            issued_ns,
            issued: Vec::new(),
            ties: Vec::new(),
        }
    }

    /// The external id of the op at index `i` of `ops`.
    pub fn id(&self, i: usize) -> u64 {
        self.base + i as u64
    }

    /// The index in `ops` that external id `id` stands for, if it is this
    /// call's.
    pub fn index(&self, id: u64) -> Option<usize> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        (i < self.ops.len()).then_some(i)
    }
}

/// The op times of `call` on rank `rank` from `records` (those of the
/// call's ids), with `to_host` turning a CUPTI timestamp into host ns
/// since the epoch. An op's span is from the first start to the last end
/// of its records; a mark's, the latest end of the ops it follows (else
/// the call's first start). A work op without a record is an error: the
/// records are incomplete.
pub fn spans(
    rank: usize,
    call: &CuptiCall,
    records: &[Activity],
    to_host: &dyn Fn(u64) -> f64,
) -> std::result::Result<Vec<OpTime>, String> {
    let by_corr: HashMap<u32, usize> = records
        .iter()
        .filter(|a| a.kind == ActivityKind::External)
        .filter_map(|a| Some((a.correlation, call.index(a.external)?)))
        .collect();
    let mut span: Vec<Option<(u64, u64)>> = vec![None; call.ops.len()];
    for a in records {
        if a.kind == ActivityKind::External {
            continue;
        }
        let Some(&i) = by_corr.get(&a.correlation) else {
            continue;
        };
        span[i] = Some(match span[i] {
            Some((s, e)) => (s.min(a.start), e.max(a.end)),
            None => (a.start, a.end),
        });
    }
    let first = span.iter().flatten().map(|s| s.0).min();
    let mut host: Vec<(f64, f64)> = Vec::with_capacity(call.ops.len());
    for (i, o) in call.ops.iter().enumerate() {
        let (s, e) = match (span[i], o.mark) {
            (Some((s, e)), _) => (to_host(s), to_host(e)),
            (None, true) => {
                let t = o
                    .after
                    .iter()
                    .filter_map(|&j| host.get(j).map(|x| x.1))
                    .reduce(f64::max)
                    .or_else(|| first.map(to_host))
                    .unwrap_or(call.issued_ns);
                (t, t)
            }
            (None, false) => {
                return Err(format!(
                    "no CUPTI record of rank {rank}'s op {} (external id {}; the call's {} records held {} external correlations)",
                    o.op,
                    call.id(i),
                    records.len(),
                    by_corr.len()
                ))
            }
        };
        host.push((s, e));
    }
    let mut out = Vec::new();
    for (o, (s, e)) in call.ops.iter().zip(host) {
        for part in 0..o.parts {
            out.push(OpTime {
                rank,
                op: o.op,
                part,
                start_ns: s,
                end_ns: e,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
