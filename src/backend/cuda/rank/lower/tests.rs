//! The lowering over the plans of every registered algorithm, every
//! collective, at awkward sizes, without a GPU.

use super::*;
use crate::plan::{Buf, Collective, Shape, Traffic};
use std::collections::HashSet;

/// Rank `r`'s buffers: ids no other rank has, so an address names its
/// owner's binding.
fn binding(r: usize) -> Binding {
    Binding {
        send: BufId(10 + r as u32),
        recv: BufId(100 + r as u32),
    }
}

/// The buffer (kind) behind id `id` of rank `r`.
fn kind_of(r: usize, id: BufId) -> Buf {
    match id {
        BufId::SCRATCH => Buf::Scratch,
        BufId::LL => Buf::Lines,
        x if x == binding(r).send => Buf::Send,
        x if x == binding(r).recv => Buf::Recv,
        _ => panic!("rank {r} has no buffer {}", id.0),
    }
}

/// The registry's algorithms that run on GPUs (`hier:G:mpi` is for host
/// memory: [`a_rails_all_reduce_is_refused_by_name`]).
fn gpu_paths() -> Vec<std::sync::Arc<dyn crate::algo::Algorithm>> {
    crate::algo::paths()
        .into_iter()
        .filter(|a| a.supports_at(&crate::algo::Placement::default()).is_ok())
        .collect()
}

/// Every plan the GPU's algorithms make for the shapes below (the first
/// call, and the next call of a chain).
fn plans() -> Vec<Plan> {
    let mut out = Vec::new();
    for algo in gpu_paths() {
        for ranks in 1..=5 {
            let mut collectives = Collective::ALL.to_vec();
            collectives.push(Collective::Broadcast { root: 0 });
            collectives.push(Collective::Broadcast { root: ranks - 1 });
            for collective in collectives {
                for count in [0, 1, 7, 1003] {
                    for elem_size in [1, 2, 8] {
                        for in_place in [false, true] {
                            let shape = Shape {
                                collective,
                                ranks,
                                count,
                                elem_size,
                                in_place,
                            };
                            if algo.supports(&shape).is_err() {
                                continue;
                            }
                            let mut path = algo.path(&shape);
                            for continues in [false, true] {
                                let plan = path.next(continues).expect("a supported shape's plan");
                                out.push((*plan).clone());
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The LL ring kernel's lowering states its ring: a plan whose steps differ
/// from what the kernel computes (here a receive whose slot moved) is
/// refused, never run as something else.
#[test]
fn an_ll_ring_unlike_the_kernels_is_refused() {
    let shape = Shape::all_reduce(3, 1003, 4, false);
    let algo = crate::algo::parse("ring:ll").unwrap();
    let mut plan = (*algo.path(&shape).next(false).unwrap()).clone();
    let bind: Vec<Binding> = (0..plan.ranks()).map(binding).collect();
    let i = plan.ops[0]
        .iter()
        .position(|o| matches!(o.kind, OpKind::Kernel(_)))
        .unwrap();
    let low = Lowering::new(&plan, 0, &bind, 4).expect("lowering");
    assert!(matches!(
        low.op(i).unwrap().work,
        DriverOp::RingLl { half: 0, .. }
    ));
    let OpKind::Kernel(k) = &mut plan.ops[0][i].kind else {
        unreachable!()
    };
    let OpKind::Reduce { b, .. } = &mut k.steps[3].kind else {
        panic!("step 1's receive is a reduce: {:?}", k.steps[3]);
    };
    b.range = b.range.start + 1..b.range.end + 1;
    let low = Lowering::new(&plan, 0, &bind, 4).expect("lowering");
    let m = low.op(i).unwrap_err().to_string();
    assert!(m.contains("not the ring the LL kernel runs: step 1"), "{m}");

    // The one-shot runs on the same kernel, as the ring of one chunk: its
    // plan lowers to the one-shot and nothing else, and a ring's steps
    // under the one-shot's kind are refused.
    let shape = Shape::all_reduce(2, 1003, 4, false);
    let one = crate::algo::parse("oneshot:ll").unwrap();
    let mut plan = (*one.path(&shape).next(true).unwrap()).clone();
    let bind: Vec<Binding> = (0..2).map(binding).collect();
    let kernel = |p: &Plan| {
        p.ops[1]
            .iter()
            .position(|o| matches!(o.kind, OpKind::Kernel(_)))
            .unwrap()
    };
    let i = kernel(&plan);
    let low = Lowering::new(&plan, 1, &bind, 4).expect("lowering");
    assert!(matches!(
        low.op(i).unwrap().work,
        DriverOp::RingLl {
            half: 1,
            one_shot: true,
            steps: 2,
            ..
        }
    ));
    let ring = crate::algo::ringll::plan(&shape, 1, false);
    let OpKind::Kernel(rk) = &ring.ops[1][kernel(&ring)].kind else {
        unreachable!()
    };
    let OpKind::Kernel(k) = &mut plan.ops[1][i].kind else {
        unreachable!()
    };
    k.steps = rk.steps.clone();
    let low = Lowering::new(&plan, 1, &bind, 4).expect("lowering");
    let m = low.op(i).unwrap_err().to_string();
    assert!(m.contains("not the ring the LL kernel runs"), "{m}");
}

/// One op lowered: (rank, op index, waits, lowered).
type LoweredOp = (usize, usize, Vec<Wait>, Lowered);

/// Every op of every rank of `plan`, lowered.
fn lower_all(plan: &Plan) -> Vec<LoweredOp> {
    let bind: Vec<Binding> = (0..plan.ranks()).map(binding).collect();
    let elem = plan.shape.elem_size;
    let mut out = Vec::new();
    for r in 0..plan.ranks() {
        let low = Lowering::new(plan, r, &bind, elem).expect("lowering");
        for (i, op) in plan.ops[r].iter().enumerate() {
            let l = low.op(i).expect("lowered op");
            out.push((r, i, low.waits(op).collect(), l));
        }
    }
    out
}

/// `a` is region `reg` of rank `rank`, at `elem` bytes per element.
fn is_region(a: &Addr, rank: usize, reg: &Region, elem: usize) -> bool {
    a.rank == rank && a.buf == binding(rank).id(reg.buf) && a.offset == reg.range.start * elem
}

/// `bytes` from `a` lie inside its buffer.
fn in_bounds(plan: &Plan, a: &Addr, bytes: usize) -> bool {
    let elem = plan.shape.elem_size;
    let len = match kind_of(a.rank, a.buf) {
        Buf::Send => plan.shape.send_len(),
        Buf::Recv => plan.shape.recv_len(),
        Buf::Scratch => plan.scratch_len,
        Buf::Lines => plan.lines_len,
    };
    a.offset + bytes <= len * elem
}

#[test]
fn the_plans_cover_every_algorithm_and_collective() {
    let plans = plans();
    let names: HashSet<&str> = plans.iter().map(|p| p.name.as_str()).collect();
    assert!(gpu_paths().len() + 1 >= crate::algo::paths().len());
    for algo in gpu_paths() {
        assert!(names.contains(algo.name().as_str()), "{}", algo.name());
    }
    for c in Collective::ALL {
        assert!(plans.iter().any(|p| p.shape.collective == c), "{c}");
    }
    assert!(plans
        .iter()
        .any(|p| matches!(p.shape.collective, Collective::Broadcast { .. })));
}

#[test]
fn every_op_lowers_to_exactly_the_work_the_plan_says() {
    for plan in plans() {
        let elem = plan.shape.elem_size;
        for (r, i, _, l) in lower_all(&plan) {
            let op = &plan.ops[r][i];
            let at = format!("{} {:?} rank {r} op {i}", plan.name, plan.shape);
            assert_eq!(l.lane, op.lane, "{at}");
            match (&op.kind, l.work) {
                (OpKind::Begin | OpKind::End, DriverOp::Mark) => {}
                (
                    OpKind::Copy { from, to, src, dst },
                    DriverOp::Copy {
                        src: s,
                        dst: d,
                        bytes,
                    },
                ) => {
                    assert!(*from == r || *to == r, "{at}: a copy of other ranks");
                    assert!(is_region(&s, *from, src, elem), "{at}: {s:?}");
                    assert!(is_region(&d, *to, dst, elem), "{at}: {d:?}");
                    assert_eq!(bytes, src.len() * elem, "{at}");
                    assert!(
                        in_bounds(&plan, &s, bytes) && in_bounds(&plan, &d, bytes),
                        "{at}"
                    );
                }
                (
                    OpKind::Reduce {
                        dst,
                        a,
                        b_rank,
                        b,
                        step,
                    },
                    DriverOp::Reduce {
                        dst: d,
                        a: x,
                        b: y,
                        bytes,
                        flags,
                    },
                ) => {
                    assert!(is_region(&d, r, dst, elem), "{at}");
                    assert!(is_region(&x, r, a, elem), "{at}");
                    assert!(is_region(&y, *b_rank, b, elem), "{at}");
                    assert_eq!(bytes, dst.len() * elem, "{at}");
                    assert_eq!(flags, step_flags(step), "{at}");
                    for p in [d, x, y] {
                        assert!(in_bounds(&plan, &p, bytes), "{at}: {p:?}");
                    }
                }
                (
                    OpKind::Kernel(k),
                    DriverOp::Exchange {
                        peer,
                        dst,
                        a,
                        peer_slot,
                        my_slot,
                        bytes,
                        flags,
                    },
                ) => {
                    let [Op {
                        kind:
                            OpKind::Copy {
                                to,
                                src: input,
                                dst: ps,
                                ..
                            },
                        ..
                    }, Op {
                        kind:
                            OpKind::Reduce {
                                dst: d,
                                b: ms,
                                step,
                                ..
                            },
                        ..
                    }] = &k.steps[..]
                    else {
                        panic!("{at}: an exchange lowered from {:?}", k.steps);
                    };
                    assert_eq!(k.kind, KernelKind::Exchange, "{at}");
                    assert_eq!(peer, *to, "{at}");
                    assert!(is_region(&dst, r, d, elem), "{at}");
                    assert!(is_region(&a, r, input, elem), "{at}");
                    assert!(is_region(&peer_slot, *to, ps, elem), "{at}");
                    assert!(is_region(&my_slot, r, ms, elem), "{at}");
                    assert_eq!(bytes, d.len() * elem, "{at}");
                    assert_eq!(flags, step_flags(step), "{at}");
                    for p in [dst, a, peer_slot, my_slot] {
                        assert!(in_bounds(&plan, &p, bytes), "{at}: {p:?}");
                    }
                }
                (
                    OpKind::Kernel(k),
                    DriverOp::RingLl {
                        right,
                        dst,
                        a,
                        count,
                        ranks,
                        half,
                        steps,
                        flags,
                        one_shot,
                        simple,
                    },
                ) => {
                    // The steps themselves are checked against the
                    // kernel's ring by the lowering (an_ll_ring_unlike...).
                    assert!(k.kind.uses_lines() || simple, "{at}");
                    assert_eq!(one_shot, k.kind == KernelKind::LlOneShot, "{at}");
                    assert_eq!(simple, k.kind == KernelKind::SimpleRing, "{at}");
                    assert_eq!(right, (r + 1) % plan.ranks(), "{at}");
                    assert!(is_region(&dst, r, &plan.shape.output(r), elem), "{at}");
                    assert!(is_region(&a, r, &plan.shape.input(r), elem), "{at}");
                    assert_eq!((count, ranks), (plan.shape.count, plan.ranks()), "{at}");
                    assert!(half < 2 && steps == k.steps.len() && flags == 0b111, "{at}");
                }
                (k, w) => panic!("{at}: {} lowered to {w:?}", k.name()),
            }
            // The timeline reads the driver's parts as the plan's.
            assert_eq!(
                l.work.parts(),
                crate::plan::interp::parts(r, op).len(),
                "{at}"
            );
        }
    }
}

#[test]
fn the_lowered_traffic_is_the_plans() {
    for plan in plans() {
        let mut t = vec![Traffic::default(); plan.ranks()];
        for (_, _, _, l) in lower_all(&plan) {
            if let Some((from, to, bytes)) = l.moved {
                assert_ne!(from, to, "{}: traffic within a rank", plan.name);
                t[from].sent += bytes as u64;
                t[to].received += bytes as u64;
            }
        }
        assert_eq!(t, plan.traffic(), "{} {:?}", plan.name, plan.shape);
    }
}

/// Issued in the plans' issue order, every wait comes after the record it
/// waits for: a local wait after this rank's earlier op on another lane
/// recorded it, a peer's after its owner's thread recorded it (the host
/// wait in between makes the owner's record precede the GPU wait). Every
/// signal a lane waits on is recorded (needed); none is waited on twice by
/// one op, recorded twice in a call, or recorded by anyone but its owner's
/// lane.
#[test]
fn waits_follow_the_records_they_guard_and_nothing_is_issued_twice() {
    for plan in plans() {
        let all = lower_all(&plan);
        let at = |r: usize, i: usize| format!("{} {:?} rank {r} op {i}", plan.name, plan.shape);
        // Who records each signal, at which op.
        let mut recorded = vec![None; plan.signals.len()];
        for (r, i, _, l) in &all {
            if let Some(s) = l.record {
                assert!(
                    recorded[s.0].is_none(),
                    "{}: signal {} recorded twice",
                    at(*r, *i),
                    s.0
                );
                let sig = plan.signals[s.0];
                assert!(sig.needed, "{}", at(*r, *i));
                assert_eq!((sig.owner, sig.lane), (*r, l.lane), "{}", at(*r, *i));
                recorded[s.0] = Some((*r, *i));
            }
        }
        for (r, i, waits, l) in &all {
            let mut seen = HashSet::new();
            for w in waits {
                let s = w.signal();
                assert!(
                    seen.insert(s),
                    "{}: waits twice on signal {}",
                    at(*r, *i),
                    s.0
                );
                let sig = plan.signals[s.0];
                assert!(!plan.same_lane(s, *r, l.lane), "{}", at(*r, *i));
                let Some((owner, j)) = recorded[s.0] else {
                    panic!(
                        "{}: waits on signal {} that nobody records",
                        at(*r, *i),
                        s.0
                    );
                };
                match w {
                    Wait::Local(_) => {
                        assert_eq!(owner, *r, "{}", at(*r, *i));
                        assert!(j < *i, "{}: waits before its own record", at(*r, *i));
                    }
                    Wait::Peer { owner: o, .. } => {
                        assert_eq!((*o, sig.owner), (owner, owner), "{}", at(*r, *i));
                        assert_ne!(owner, *r, "{}", at(*r, *i));
                    }
                    Wait::Remote { .. } | Wait::Land { .. } => {
                        panic!("{}: a wait over nodes on one node", at(*r, *i))
                    }
                    Wait::Host { .. } => {
                        panic!(
                            "{}: a wait on the host with no rank taking turns",
                            at(*r, *i)
                        )
                    }
                }
            }
        }
    }
}

/// A small example spelled out: the flag one-shot on 2 ranks is, on each
/// rank, a begin, one exchange kernel with the peer's slot in the scratch,
/// and an end; no copy. The first call's exchange waits for both ranks'
/// begin; a chained call's waits on nothing and records nothing.
#[test]
fn the_flag_one_shot_is_one_exchange_per_rank() {
    let algo = crate::algo::parse("oneshot:flag").expect("oneshot:flag");
    let shape = Shape::all_reduce(2, 5, 4, false);
    let mut path = algo.path(&shape);
    let plan = path.next(false).expect("plan");
    let all = lower_all(&plan);
    for r in 0..2 {
        let waits: Vec<Wait> = all
            .iter()
            .filter(|x| x.0 == r)
            .flat_map(|x| x.2.clone())
            .collect();
        assert!(
            matches!(waits[..], [Wait::Peer { owner, .. }] if owner == 1 - r),
            "rank {r}: {waits:?}"
        );
    }
    assert_eq!(all.len(), 6);
    for r in 0..2 {
        let works: Vec<DriverOp> = all.iter().filter(|x| x.0 == r).map(|x| x.3.work).collect();
        let at = |rank: usize, buf: BufId| Addr {
            rank,
            buf,
            offset: 0,
        };
        let exchange = DriverOp::Exchange {
            peer: 1 - r,
            dst: at(r, binding(r).recv),
            a: at(r, binding(r).send),
            peer_slot: at(1 - r, BufId::SCRATCH),
            my_slot: at(r, BufId::SCRATCH),
            bytes: 20,
            flags: 0b111,
        };
        assert_eq!(
            works,
            [DriverOp::Mark, exchange, DriverOp::Mark],
            "rank {r}"
        );
    }
    let chained = lower_all(&path.next(true).expect("chained plan"));
    assert!(chained
        .iter()
        .all(|x| x.2.is_empty() && x.3.record.is_none()));
}

#[test]
fn a_missing_binding_is_an_error() {
    let algo = crate::algo::parse("ring").expect("ring");
    let plan = algo
        .path(&Shape::all_reduce(3, 7, 4, false))
        .next(false)
        .expect("plan");
    let bind = [binding(0), binding(1)];
    assert!(Lowering::new(&plan, 2, &bind, 4).is_err());
    // Rank 2's buffers are read or written by rank 0 (its successor) or
    // rank 1 (its predecessor) somewhere in the ring.
    let fails = (0..2).any(|r| {
        let low = Lowering::new(&plan, r, &bind, 4).expect("ranks 0 and 1 have one");
        (0..plan.ops[r].len()).any(|i| low.op(i).is_err())
    });
    assert!(fails);
}

/// Every plan lowered over `node_of`: the lowered ops, or the first error.
fn lower_over(plan: &Plan, node_of: &[usize]) -> Result<Vec<LoweredOp>> {
    let bind: Vec<Binding> = (0..plan.ranks()).map(binding).collect();
    let elem = plan.shape.elem_size;
    let mut out = Vec::new();
    for r in 0..plan.ranks() {
        let low = Lowering::new(plan, r, &bind, elem)?.over_nodes(node_of)?;
        for (i, op) in plan.ops[r].iter().enumerate() {
            let l = low.op(i)?;
            out.push((r, i, low.waits(op).collect(), l));
        }
    }
    Ok(out)
}

/// Over nodes (every layout of blocks of g ranks), a plan is either refused
/// as unsupported, naming the op, or lowered so that every byte and signal
/// that crosses a node goes by message: a rank touches only its node's
/// memory, pushes to other nodes with `Send`, its destination lands every
/// put before using it, and every other signal a rank of another node
/// waits on is forwarded to exactly one rank of that node.
#[test]
fn over_nodes_every_crossing_is_a_message_and_every_message_is_received() {
    let (mut accepted, mut refused) = (HashSet::new(), HashSet::new());
    for plan in plans() {
        let n = plan.ranks();
        for g in (1..n).filter(|g| n % g == 0) {
            let node_of: Vec<usize> = (0..n).map(|r| r / g).collect();
            let at = format!("{} {:?} nodes of {g}", plan.name, plan.shape);
            let all = match lower_over(&plan, &node_of) {
                Ok(v) => v,
                Err(e) => {
                    assert!(matches!(e, Error::Unsupported(..)), "{at}: {e}");
                    refused.insert(plan.name.clone());
                    continue;
                }
            };
            accepted.insert(plan.name.clone());
            let near = |a: usize, b: usize| node_of[a] == node_of[b];
            // The puts: (signal, from, to).
            let mut puts = Vec::new();
            for (r, i, _, l) in &all {
                let op = &plan.ops[*r][*i];
                let mut addrs = Vec::new();
                match l.work {
                    DriverOp::Send {
                        src,
                        dst,
                        bytes,
                        signal,
                    } => {
                        assert_eq!(src.rank, *r, "{at}: a send of another's data");
                        assert!(!near(*r, dst.rank), "{at}: a send inside a node");
                        assert!(bytes > 0 || signal.is_some(), "{at}");
                        assert_eq!(signal, op.signal, "{at}");
                        let s = signal.expect("a put carries its signal");
                        puts.push((s, *r, dst.rank));
                    }
                    DriverOp::Copy { src, dst, .. } => addrs.extend([src, dst]),
                    DriverOp::Reduce { dst, a, b, .. } => addrs.extend([dst, a, b]),
                    DriverOp::Exchange {
                        dst,
                        a,
                        peer_slot,
                        my_slot,
                        ..
                    } => addrs.extend([dst, a, peer_slot, my_slot]),
                    DriverOp::RingLl { right, dst, a, .. } => {
                        assert!(near(*r, right), "{at}: an LL put to another node");
                        addrs.extend([dst, a]);
                    }
                    DriverOp::Mark => {}
                }
                for a in addrs {
                    assert!(
                        near(*r, a.rank),
                        "{at}: rank {r} op {i} touches rank {}",
                        a.rank
                    );
                }
                let mut seen = HashSet::new();
                for &f in &l.forward {
                    assert!(!near(*r, f), "{at}: forwarded inside the node");
                    assert!(seen.insert(f), "{at}: forwarded twice to rank {f}");
                }
            }
            for (r, i, waits, _) in &all {
                for w in waits {
                    let s = w.signal();
                    let owner = plan.signals[s.0].owner;
                    let here = format!("{at}: rank {r} op {i} waits on signal {}", s.0);
                    if near(*r, owner) {
                        assert!(matches!(w, Wait::Local(_) | Wait::Peer { .. }), "{here}");
                        continue;
                    }
                    match puts.iter().find(|p| p.0 == s) {
                        Some(&(_, from, to)) if to == *r => {
                            assert_eq!(*w, Wait::Land { signal: s, from }, "{here}");
                        }
                        found => {
                            if found.is_some() {
                                // Another rank's put: only an End may wait
                                // on it (it starts no chain in the call).
                                assert!(
                                    matches!(plan.ops[*r][*i].kind, OpKind::End),
                                    "{here}: another rank's put"
                                );
                            }
                            assert_eq!(*w, Wait::Remote { signal: s, owner }, "{here}");
                            // Sent to this very rank (its wait ends once
                            // the signal reached its own process).
                            let fwd = all
                                .iter()
                                .filter(|x| x.0 == owner && x.3.record == Some(s))
                                .flat_map(|x| x.3.forward.iter())
                                .filter(|&&f| f == *r)
                                .count();
                            assert_eq!(fwd, 1, "{here}: sent to it {fwd} times");
                        }
                    }
                }
            }
            // Every put is landed by its destination: at a wait on a
            // signal its sender records at or after the put (the receiver
            // files the put before that signal).
            let recorded_at = |owner: usize, s: SignalId| {
                plan.ops[owner].iter().position(|o| o.signal == Some(s))
            };
            for (s, from, to) in puts {
                let i = recorded_at(from, s).expect("the put records its signal");
                assert!(
                    all.iter()
                        .filter(|x| x.0 == to)
                        .flat_map(|x| &x.2)
                        .any(|w| {
                            matches!(w, Wait::Land { .. } | Wait::Remote { .. })
                                && plan.signals[w.signal().0].owner == from
                                && recorded_at(from, w.signal()).is_some_and(|j| j >= i)
                        }),
                    "{at}: rank {from}'s put into rank {to} is never landed"
                );
            }
        }
    }
    let mut names: Vec<_> = accepted.iter().collect();
    names.sort();
    println!("lowered over nodes: {names:?}");
    let mut names: Vec<_> = refused.difference(&accepted).collect();
    names.sort();
    println!("refused over nodes, every layout: {names:?}");
    for name in ["ring", "hier:2", "ring:pipe3"] {
        assert!(accepted.contains(name), "{name} is lowered over nodes");
    }
    assert!(!refused.is_empty(), "the pull paths are refused");
}
#[test]
fn zz_debug_dump() {
    for plan in plans() {
        if plan.name.starts_with("ring:pipe")
            && plan.ranks() == 4
            && plan.shape.count == 1003
            && plan.shape.collective == Collective::AllReduce
        {
            eprintln!("{}", plan.name);
            for (r, ops) in plan.ops.iter().enumerate() {
                for (i, op) in ops.iter().enumerate() {
                    if let OpKind::Copy { from, to, .. } = op.kind {
                        let s = op.signal.unwrap();
                        let waiters: Vec<usize> = (0..4)
                            .filter(|&x| plan.ops[x].iter().any(|o| o.waits.contains(&s)))
                            .collect();
                        if !waiters.contains(&to) {
                            let later: Vec<(usize, usize)> = plan.ops[to]
                                .iter()
                                .enumerate()
                                .flat_map(|(k, o)| {
                                    o.waits
                                        .iter()
                                        .filter(|w| plan.signals[w.0].owner == from)
                                        .map(move |w| (k, w.0))
                                })
                                .collect();
                            eprintln!("r{r} op{i} copy {from}->{to} sig {} lane {:?} waiters {waiters:?}; {to} waits on {from}'s: {later:?}", s.0, op.lane);
                            let rec: Vec<(usize, Option<usize>)> = plan.ops[from]
                                .iter()
                                .enumerate()
                                .map(|(k, o)| (k, o.signal.map(|x| x.0)))
                                .collect();
                            eprintln!("   {from}'s records {rec:?}");
                        }
                    }
                }
            }
            break;
        }
    }
}

/// A put whose data its destination could use before it landed is refused:
/// rank 0 (node 0) puts into rank 1 (node 1), then signals rank 2 (node 1)
/// through a later op; rank 2 signals rank 1, whose reduce then runs before
/// rank 1 ever waits on anything of rank 0 (only its End does). The plan
/// orders the reduce after the put, but on the hop it would run before the
/// put landed. The same plan with rank 1's reduce also waiting on the put
/// is lowered.
#[test]
fn a_put_used_before_its_landing_is_refused() {
    use crate::plan::builder::{region, PlanBuilder};
    use crate::plan::Label;
    let build = |direct: bool| {
        let mut b = PlanBuilder::new("chain", Shape::all_reduce(3, 4, 4, false));
        let begin = b.begin_all();
        let src = region(Buf::Send, 0..4);
        let slot = region(Buf::Recv, 0..4);
        let put = b.copy(
            0,
            Lane::Copy,
            (0, src.clone()),
            (1, slot.clone()),
            vec![begin[0], begin[1]],
            Label::default(),
        );
        let later = b.copy(
            0,
            Lane::Copy,
            (0, src.clone()),
            (0, region(Buf::Recv, 0..4)),
            vec![],
            Label::default(),
        );
        let relay = b.copy(
            2,
            Lane::Copy,
            (2, src.clone()),
            (2, region(Buf::Recv, 0..4)),
            vec![later],
            Label::default(),
        );
        let mut waits = vec![relay];
        if direct {
            waits.push(put);
        }
        let step = ReduceStep::default();
        b.reduce(
            1,
            slot.clone(),
            slot.clone(),
            (1, src),
            step,
            waits,
            false,
            Label::default(),
        );
        b.end(0, vec![put, later]);
        b.end(1, vec![put]);
        b.end(2, vec![relay]);
        b.finish()
    };
    let node_of = [0, 1, 1];
    let bind: Vec<Binding> = (0..3).map(binding).collect();
    let low = |plan: &Plan| {
        Lowering::new(plan, 1, &bind, 4)?
            .over_nodes(&node_of)
            .map(|_| ())
    };
    match low(&build(false)) {
        Err(Error::Unsupported(m, _)) => {
            assert!(m.contains("before the wait that lands the put"), "{m}")
        }
        other => panic!("the chained plan was not refused: {other:?}"),
    }
    low(&build(true)).expect("with a direct wait the plan lowers");
}

/// Rank processes sharing one GPU take turns on it: every wait on another
/// such rank's signal is made on the host, every signal such a rank waits
/// on is published only once its work completed, and a kernel that spins
/// on such a rank's flags is refused naming it. Waits on ranks of other
/// GPUs, and ranks sharing nothing, lower as before.
#[test]
fn ranks_taking_turns_on_a_gpu_wait_on_the_host_for_completed_work() {
    for plan in plans() {
        let n = plan.ranks();
        if n < 2 {
            continue;
        }
        let bind: Vec<Binding> = (0..n).map(binding).collect();
        let elem = plan.shape.elem_size;
        // Ranks 0 and 1 share a GPU; the others each have their own.
        let shared = |x: usize| x < 2;
        for r in 0..n {
            let turns: Vec<bool> = (0..n).map(|x| x != r && shared(r) && shared(x)).collect();
            let low = Lowering::new(&plan, r, &bind, elem)
                .unwrap()
                .taking_turns(&turns);
            let plain = Lowering::new(&plan, r, &bind, elem).unwrap();
            for (i, op) in plan.ops[r].iter().enumerate() {
                let l = match low.op(i) {
                    Ok(l) => l,
                    Err(e) => {
                        let m = e.to_string();
                        assert!(
                            matches!(op.kind, OpKind::Kernel(_))
                                && m.contains("is another process on this GPU"),
                            "{}: rank {r} op {i}: {m}",
                            plan.name
                        );
                        assert!(
                            plain.op(i).is_ok(),
                            "{}: refused only taking turns",
                            plan.name
                        );
                        continue;
                    }
                };
                let p = plain.op(i).unwrap();
                assert_eq!((l.work, l.record), (p.work, p.record), "{}", plan.name);
                for (w, pw) in low.waits(op).zip(plain.waits(op)) {
                    let owner = plan.signals[w.signal().0].owner;
                    if turns[owner] {
                        assert_eq!(
                            w,
                            Wait::Host {
                                signal: pw.signal(),
                                owner
                            }
                        );
                    } else {
                        assert_eq!(w, pw, "{}", plan.name);
                    }
                }
                // Published once complete exactly when a rank taking turns
                // waits on it.
                let waited = l.record.is_some_and(|s| {
                    plan.ops
                        .iter()
                        .enumerate()
                        .any(|(x, ops)| turns[x] && ops.iter().any(|o| o.waits.contains(&s)))
                });
                assert_eq!(l.complete_first, waited, "{}: rank {r} op {i}", plan.name);
                assert!(!p.complete_first);
            }
        }
    }
}

/// A rail's all-reduce op (`hier:G:mpi`) has no GPU lowering: it is refused
/// as unsupported on the CUDA backend, naming the plan and the op, never
/// lowered into something else.
#[test]
fn a_rails_all_reduce_is_refused_by_name() {
    let shape = Shape::all_reduce(4, 1000, 4, false);
    let plan = crate::algo::hier::plan(&shape, 2, crate::algo::hier::Rail::Mpi);
    let bind: Vec<Binding> = (0..4).map(binding).collect();
    let low = Lowering::new(&plan, 1, &bind, 4).expect("lowering");
    let i = plan.ops[1]
        .iter()
        .position(|o| matches!(&o.kind, OpKind::Kernel(k) if k.kind == KernelKind::Rail))
        .expect("a rail op");
    let e = low.op(i).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, Error::Unsupported(..)), "{e:?}");
    assert!(
        m.contains("hier:2:mpi") && m.contains("rail's all-reduce") && m.contains("CPU backend"),
        "{m}"
    );
}
