//! What a plan must satisfy to run over nodes on the host-staged hop
//! (`backend/cuda/net.rs`): pure, from the plan alone.
//!
//! A put (a copy from rank `from` into rank `to` of another node) lands
//! when `to` first waits on a signal `from` records at or after the put
//! (the receiver files one sender's messages in order, and such a wait
//! lands every put filed). So, per put:
//!
//! 1. `to` has such a wait (its *landing point*);
//! 2. no op of `to` that the plan orders after the put (through lanes and
//!    signals, any path) comes before the landing point in `to`'s issue
//!    order: it could read the bytes before they landed;
//! 3. no rank but `to` waits on the put's signal before its End: another
//!    rank learns only that the bytes left.

use crate::backend::op_desc;
use crate::error::{Error, Result};
use crate::plan::{OpKind, Plan};
use std::collections::{HashMap, VecDeque};

/// The ops (rank, index) that wait on each signal, by signal.
pub(super) type Waiting = HashMap<usize, Vec<(usize, usize)>>;

/// Check every put from or into rank `me` (`node_of[r]`: rank r's node);
/// returns who waits on each signal (the lowering's forwarding reads it).
pub(super) fn check(plan: &Plan, node_of: &[usize], me: usize) -> Result<Waiting> {
    // The ops waiting on each signal, and the op recording it.
    let mut waiting: Waiting = HashMap::new();
    let mut recorded: HashMap<usize, (usize, usize)> = HashMap::new();
    for (r, ops) in plan.ops.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            for w in &op.waits {
                waiting.entry(w.0).or_default().push((r, i));
            }
            if let Some(s) = op.signal {
                recorded.entry(s.0).or_insert((r, i));
            }
        }
    }
    for (r, ops) in plan.ops.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            let OpKind::Copy { from, to, .. } = op.kind else {
                continue;
            };
            if r != from || node_of[from] == node_of[to] || (to != me && from != me) {
                continue;
            }
            let refuse = |why: String| {
                Err(Error::Unsupported(
                    format!("{} over nodes: {} {why}", plan.name, op_desc(plan, r, i)),
                    "cuda",
                ))
            };
            let Some(s) = op.signal else {
                return refuse("copies to another node with no signal".into());
            };
            // 1. The landing point.
            let lands = |o: &crate::plan::Op| {
                o.waits.iter().any(|x| {
                    recorded
                        .get(&x.0)
                        .is_some_and(|&(owner, j)| owner == from && j >= i)
                })
            };
            let Some(landing) = plan.ops[to].iter().position(lands) else {
                return refuse(format!(
                    "copies to rank {to} on another node, which never waits on it or on anything rank {from} does after it"
                ));
            };
            // 2. Nothing of `to` ordered after the put comes before it.
            if let Some(k) = first_after(plan, (r, i), to, &waiting) {
                if k < landing {
                    return refuse(format!(
                        "is ordered before {}, which rank {to} issues before the wait that lands the put ({})",
                        op_desc(plan, to, k),
                        op_desc(plan, to, landing)
                    ));
                }
            }
            // 3. Other waiters only at their End.
            let early = waiting
                .get(&s.0)
                .into_iter()
                .flatten()
                .find(|&&(x, j)| x != to && !matches!(plan.ops[x][j].kind, OpKind::End));
            if let Some(&(x, j)) = early {
                return refuse(format!(
                    "is waited on by {}, not its destination, before its end",
                    op_desc(plan, x, j)
                ));
            }
        }
    }
    Ok(waiting)
}

/// The first op (in issue order) of rank `rank` that the plan orders after
/// op `start`: reachable through each rank's lane order and from a signal's
/// record to its waits.
fn first_after(
    plan: &Plan,
    start: (usize, usize),
    rank: usize,
    waiting: &Waiting,
) -> Option<usize> {
    let mut seen: Vec<Vec<bool>> = plan.ops.iter().map(|o| vec![false; o.len()]).collect();
    let mut todo = VecDeque::from([start]);
    let mut first: Option<usize> = None;
    while let Some((r, i)) = todo.pop_front() {
        let op = &plan.ops[r][i];
        let mut next = Vec::new();
        if let Some(j) = (i + 1..plan.ops[r].len()).find(|&j| plan.ops[r][j].lane == op.lane) {
            next.push((r, j));
        }
        if let Some(s) = op.signal {
            next.extend(waiting.get(&s.0).into_iter().flatten().copied());
        }
        for (x, j) in next {
            if !seen[x][j] {
                seen[x][j] = true;
                if x == rank {
                    first = Some(first.map_or(j, |f| f.min(j)));
                }
                todo.push_back((x, j));
            }
        }
    }
    first
}
