//! The order tie: a rank's ops tied to their activity records without a
//! CUPTI callback. Every kernel, copy or memset a rank issues lands on one
//! of its streams, and CUPTI's record of it carries that stream's id and
//! the correlation id of the issuing call, which CUPTI hands out in issue
//! order (process-wide: other threads' calls leave gaps, never an
//! inversion on one stream, whose calls come from one thread). So a
//! stream's records sorted by correlation id are its issued calls in issue
//! order, and the n-th is the n-th call the rank issued there.
//!
//! What could make that a wrong tie is refused instead: a stream with
//! fewer or more records than calls, or a record whose class (kernel or
//! copy) is not the call's, is an error naming the rank and the op where
//! the two sequences part.

use std::collections::BTreeMap;

use super::{Activity, ActivityKind};

/// What an issued call's record is: a kernel, or a copy (memsets count as
/// copies: the copy engine's work).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Kernel,
    Copy,
}

impl Class {
    /// The class of a record (`None`: an [`ActivityKind::External`]).
    pub fn of(kind: ActivityKind) -> Option<Class> {
        match kind {
            ActivityKind::Kernel => Some(Class::Kernel),
            ActivityKind::Memcpy | ActivityKind::PeerCopy | ActivityKind::Memset => {
                Some(Class::Copy)
            }
            ActivityKind::External => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::Kernel => "a kernel",
            Class::Copy => "a copy",
        }
    }
}

/// One driver call a rank issued while timed, in the rank's issue order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The external id of the op that issued it (0: no op's, e.g. work a
    /// timed call issued outside its ops: its record is skipped).
    pub external: u64,
    /// The op's index in the rank's list and its lane (for errors).
    pub op: usize,
    pub lane: usize,
    /// CUPTI's id of the stream it was issued on.
    pub stream: u32,
    /// What its record must be (`None`: any).
    pub class: Option<Class>,
}

/// Tie `records` (the rank's, those on its streams) to the calls `issued`
/// (in issue order): one [`ActivityKind::External`] record per tied call,
/// correlation id to op id, as the callback would have filed it. `rank`
/// names the rank in errors.
pub(crate) fn tie_by_order(
    rank: usize,
    issued: &[Issued],
    records: &[Activity],
) -> std::result::Result<Vec<Activity>, String> {
    let mut calls: BTreeMap<u32, Vec<&Issued>> = BTreeMap::new();
    for c in issued {
        calls.entry(c.stream).or_default().push(c);
    }
    let mut recs: BTreeMap<u32, Vec<&Activity>> = BTreeMap::new();
    for a in records.iter().filter(|a| a.kind != ActivityKind::External) {
        recs.entry(a.stream).or_default().push(a);
    }
    let mut out = Vec::with_capacity(issued.len());
    for (&stream, rs) in &mut recs {
        if !calls.contains_key(&stream) {
            let known: Vec<String> = calls.keys().map(u32::to_string).collect();
            return Err(format!(
                "CUPTI recorded {} kernels or copies on rank {rank}'s stream {stream}, where its timed calls issued none (they issued on CUPTI streams {}; untimed work there while timed calls were pending?); no tie by order",
                rs.len(),
                known.join(", ")
            ));
        }
        rs.sort_by_key(|a| (a.correlation, a.start));
    }
    for (&stream, cs) in &calls {
        let empty = Vec::new();
        let rs = recs.get(&stream).unwrap_or(&empty);
        let counts = format!(
            "CUPTI stream {stream} holds {} records for the {} kernels and copies rank {rank} issued there",
            rs.len(),
            cs.len()
        );
        for (k, c) in cs.iter().enumerate() {
            let Some(r) = rs.get(k) else {
                return Err(format!(
                    "no CUPTI record of rank {rank}'s op {} (lane {}, call {} of its stream): {counts}; no tie by order",
                    c.op, c.lane, k
                ));
            };
            let got = Class::of(r.kind);
            if let (Some(want), Some(got)) = (c.class, got) {
                if want != got {
                    return Err(format!(
                        "rank {rank}'s op {} (lane {}, call {} of its stream) issued {} but the record in its place is {} (correlation id {}): a record is missing or extra at or before it; {counts}; no tie by order",
                        c.op,
                        c.lane,
                        k,
                        want.name(),
                        got.name(),
                        r.correlation
                    ));
                }
            }
            if k > 0 && rs[k - 1].correlation == r.correlation {
                return Err(format!(
                    "two CUPTI records of one call (correlation id {}) at rank {rank}'s op {} (lane {}); no tie by order",
                    r.correlation, c.op, c.lane
                ));
            }
            if c.external != 0 {
                out.push(Activity {
                    kind: ActivityKind::External,
                    start: 0,
                    end: 0,
                    correlation: r.correlation,
                    external: c.external,
                    device: r.device,
                    stream,
                });
            }
        }
        if rs.len() > cs.len() {
            let last = cs.last().map_or(0, |c| c.op);
            return Err(format!(
                "{} extra CUPTI records after rank {rank}'s op {last} (its last on the stream): {counts} (untimed work there while timed calls were pending?); no tie by order",
                rs.len() - cs.len()
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
