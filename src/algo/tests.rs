//! The algorithms' plans against the validator: every algorithm, rank count,
//! size, element size, collective and place; chains of calls; graph replays;
//! the validator's own negative cases; large rank counts.

use super::*;
use crate::plan::{Collective, Lane, OpKind, Plan, ReduceStep, Shape, SignalId};

fn algos() -> Vec<Arc<dyn Algorithm>> {
    let mut v: Vec<Arc<dyn Algorithm>> = vec![
        Arc::new(oneshot::ONESHOT),
        Arc::new(fused::Fused),
        Arc::new(flag::FLAG),
        Arc::new(ringflag::RING_FLAG),
        Arc::new(ringll::RING_LL),
        Arc::new(ps::ParameterServer),
    ];
    for per_node in [1, 2, 3] {
        for rail in [hier::Rail::Ring, hier::Rail::Mpi] {
            v.push(Arc::new(hier::Hier { per_node, rail }));
        }
    }
    for slices in [1, 2, 3, 4] {
        for slots in [1, 2] {
            v.push(Arc::new(ring::Ring { slices, slots }));
        }
    }
    v
}

fn shapes(n: usize, counts: &[usize]) -> Vec<Shape> {
    let mut v = Vec::new();
    for &count in counts {
        for collective in Collective::ALL {
            for elem_size in [1, 2, 4, 8] {
                for in_place in [false, true] {
                    v.push(Shape {
                        collective,
                        ranks: n,
                        count,
                        elem_size,
                        in_place,
                    });
                }
            }
        }
    }
    v
}

fn first_plan(a: &dyn Algorithm, s: &Shape) -> Plan {
    let mut p = a.path(s);
    (*p.next(false)
        .unwrap_or_else(|e| panic!("{}: {e}", a.name())))
    .clone()
}

/// Every plan of every algorithm is deadlock-free, race-free, bracketed,
/// and delivers exactly what its collective promises (symbolic execution).
#[test]
fn plans_validate_small() {
    for a in algos() {
        for n in 1..=5 {
            for s in shapes(n, &[0, 1, 2, 3, 5, 8, 9, 17, 33, 67]) {
                if a.supports(&s).is_err() {
                    continue;
                }
                let p = first_plan(a.as_ref(), &s);
                if let Err(e) = p.validate() {
                    panic!("{} {s:?}: {e}", a.name());
                }
            }
        }
    }
}

#[test]
fn plans_validate_up_to_9_ranks() {
    for a in algos() {
        for n in 6..=9 {
            for s in shapes(n, &[0, 5, 36, 100]) {
                if a.supports(&s).is_err() || s.elem_size != 4 {
                    continue;
                }
                let p = first_plan(a.as_ref(), &s);
                p.validate()
                    .unwrap_or_else(|e| panic!("{} {s:?}: {e}", a.name()));
            }
        }
    }
}

/// Large rank counts up to the engine's limit: races and brackets are
/// checked up to RACE_CHECK_MAX_RANKS, deadlock freedom and data flow
/// everywhere.
#[test]
fn plans_validate_many_ranks() {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut ns = vec![crate::engine::MAX_RANKS, 64, 65];
    for _ in 0..3 {
        ns.push(10 + next(120) as usize);
    }
    for n in ns {
        let count = n * 3 + next(50) as usize;
        for (a, coll) in [
            (
                Arc::new(ring::Ring {
                    slices: 2,
                    slots: 2,
                }) as Arc<dyn Algorithm>,
                Collective::AllReduce,
            ),
            (Arc::new(ring::Ring::PLAIN), Collective::ReduceScatter),
            (Arc::new(ring::Ring::PLAIN), Collective::AllGather),
            (Arc::new(ps::ParameterServer), Collective::AllReduce),
        ] {
            let s = Shape {
                collective: coll,
                ranks: n,
                count,
                elem_size: 4,
                in_place: next(2) == 0,
            };
            first_plan(a.as_ref(), &s)
                .validate()
                .unwrap_or_else(|e| panic!("{} n={n}: {e}", a.name()));
        }
    }
}

/// The chained paths: their plan builders and the rank counts they take.
fn chained() -> [(oneshot::ChainBuild, std::ops::RangeInclusive<usize>); 4] {
    [
        (oneshot::plan, 2..=5),
        (flag::plan, 2..=2),
        (ringflag::plan, 2..=2),
        (ringll::plan, 2..=5),
    ]
}

fn chain(shape: Shape, build: oneshot::ChainBuild) -> (Plan, Plan, Plan) {
    (
        build(&shape, 0, true),
        build(&shape, 1, false),
        build(&shape, 0, false),
    )
}

/// Chained calls (first fenced, then unfenced on alternating halves) are
/// race-free among themselves and next to any other plan.
#[test]
fn chains_are_race_free() {
    for (build, ranks) in chained() {
        for n in ranks {
            for count in [1, 5, 64] {
                for ip in [false, true] {
                    let s = Shape::all_reduce(n, count, 4, ip);
                    let (first, a, b) = chain(s, build);
                    for p in [&first, &a, &b] {
                        p.validate().unwrap_or_else(|e| panic!("{e}"));
                    }
                    Plan::validate_sequence(&[&first, &a, &b, &a, &b])
                        .unwrap_or_else(|e| panic!("n={n} count={count}: {e}"));
                    // In and out of place may alternate within a chain.
                    let (_, a_other, _) = chain(Shape::all_reduce(n, count, 4, !ip), build);
                    Plan::validate_sequence(&[&first, &a_other, &b])
                        .unwrap_or_else(|e| panic!("mixed places: {e}"));
                    for other in algos() {
                        let os = Shape::all_reduce(n, count, 4, ip);
                        if other.supports(&os).is_err() {
                            continue;
                        }
                        let x = first_plan(other.as_ref(), &os);
                        Plan::validate_sequence(&[&x, &first, &a, &b, &x, &first, &a])
                            .unwrap_or_else(|e| panic!("{} n={n}: {e}", other.name()));
                    }
                }
            }
        }
    }
}

/// Skipping the fence is only safe on the other half: the same half twice
/// in a row races.
#[test]
fn a_chain_on_the_same_half_races() {
    for flag in [false, true] {
        let s = Shape::all_reduce(2, 64, 4, false);
        let build = if flag { flag::plan } else { oneshot::plan };
        let first = build(&s, 0, true);
        let same_half = build(&s, 0, false);
        assert!(Plan::validate_sequence(&[&first, &same_half]).is_err());
        let other_half = build(&s, 1, false);
        assert!(Plan::validate_sequence(&[&first, &other_half]).is_ok());
    }
    // ring:flag's second hand-shake already orders the next call's copy
    // after the peer's reduce, so even the same half is safe.
    let s = Shape::all_reduce(2, 64, 4, false);
    let first = ringflag::plan(&s, 0, true);
    let same_half = ringflag::plan(&s, 0, false);
    assert!(Plan::validate_sequence(&[&first, &same_half, &same_half]).is_ok());
}

/// The path state: a chain continues on the other half; a break fences.
#[test]
fn chain_path_parity() {
    let s = Shape::all_reduce(2, 16, 4, true);
    let mut p = flag::FLAG.path(&s);
    let a = p.next(false).unwrap();
    let b = p.next(true).unwrap();
    let c = p.next(true).unwrap();
    assert!(a.fenced && !b.fenced && !c.fenced);
    assert!(Plan::validate_sequence(&[&a, &b, &c]).is_ok());
    let d = p.next(false).unwrap();
    assert!(d.fenced);
}

/// What a graph replay issues: a fence unless the previous call was on half
/// 0 of this path, then the captured calls (halves 1, 0), again and again,
/// next to any other plan.
#[test]
fn graph_replays_are_race_free() {
    let paths: [&dyn Algorithm; 3] = [&flag::FLAG, &ringflag::RING_FLAG, &ringll::RING_LL];
    for (count, ip, algo) in [1, 5, 64]
        .into_iter()
        .flat_map(|c| [(c, false), (c, true)])
        .flat_map(|(c, ip)| paths.map(|a| (c, ip, a)))
    {
        {
            let s = Shape::all_reduce(2, count, 4, ip);
            let mut path = algo.path(&s);
            let g = path.graph_plans(2).unwrap();
            let fence = path.before_replay(false).unwrap().expect("a fence");
            assert!(path.before_replay(true).unwrap().is_none());
            let x = first_plan(&ring::Ring::PLAIN, &s);
            let mut seq: Vec<&Plan> = vec![&x, &fence, &g[0], &g[1], &g[0], &g[1], &x, &fence];
            seq.extend([&*g[0], &*g[1]]);
            Plan::validate_sequence(&seq).unwrap_or_else(|e| panic!("count={count}: {e}"));
            // A plain call continuing after a replay uses half 1.
            let after = path.next(true).unwrap();
            Plan::validate_sequence(&[&g[0], &g[1], &after]).unwrap();
            assert!(path.graph_plans(3).is_err());
        }
    }
}

#[test]
fn device_ordered_plans() {
    let s = Shape::all_reduce(2, 100, 4, true);
    let mut p = flag::FLAG.path(&s);
    let g = p.graph_plans(2).unwrap();
    assert!(g.iter().all(|p| p.device_ordered()));
    assert!(
        !flag::plan(&s, 0, true).device_ordered(),
        "fenced waits on events"
    );
    assert!(!first_plan(&ring::Ring::PLAIN, &s).device_ordered());
    let g = ringflag::RING_FLAG.path(&s).graph_plans(2).unwrap();
    assert!(
        g.iter().all(|p| p.device_ordered()),
        "ring:flag chains wait on no event"
    );
    let oop = Shape::all_reduce(2, 100, 4, false);
    assert!(first_plan(&fused::Fused, &oop).device_ordered());
}

#[test]
fn ring_traffic_is_the_schedule() {
    use crate::schedule::{ring_bytes_per_rank, ChunkLayout};
    for n in 1..=9 {
        for count in [0, 3, 100, 1003] {
            let s = Shape::all_reduce(n, count, 4, false);
            let p = ring::plan(&s, 3, 2);
            let l = ChunkLayout::new(count, n, 4);
            let t = p.traffic();
            for r in 0..n {
                if n > 1 {
                    assert_eq!(t[r].sent as usize, ring_bytes_per_rank(&l, r, 4));
                }
                assert_eq!(t[r].received, t[crate::schedule::left(r, n)].sent);
            }
        }
    }
    // Reduce-scatter and all-gather each move (N-1)/N of the whole buffer.
    for coll in [Collective::ReduceScatter, Collective::AllGather] {
        let s = Shape {
            collective: coll,
            ranks: 4,
            count: 10,
            elem_size: 4,
            in_place: false,
        };
        let t = ring::plan(&s, 2, 2).traffic();
        assert!(t.iter().all(|t| t.sent == 3 * 10 * 4), "{coll}: {t:?}");
    }
}

#[test]
fn ps_root_traffic() {
    let p = ps::plan(&Shape::all_reduce(4, 100, 4, false));
    let t = p.traffic();
    assert_eq!(t[0].received, 3 * 400);
    assert_eq!(t[0].sent, 3 * 400);
    assert_eq!(t[1].sent, 400);
    assert_eq!(t[1].received, 400);
}

#[test]
fn parse_names() {
    for name in [
        "ring",
        "ring:naive",
        "ring:pipe2",
        "ring:pipe64",
        "oneshot",
        "oneshot:fused",
        "oneshot:flag",
        "ring:flag",
        "ring:ll",
        "ring:simple",
        "oneshot:ll",
        "ps",
        "bcast",
        "bcast:pipe4",
        "hier:1",
        "hier:2",
        "hier:8",
    ] {
        let a = parse(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.name(), name);
        let c: AlgoChoice = name.parse().unwrap();
        assert_eq!(c.name(), name);
    }
    assert_eq!(parse("ring:pipe1").unwrap().name(), "ring");
    assert!(parse("ring:pipe0").is_err());
    assert!(parse("ring:pipe65").is_err());
    assert!(parse("tree").unwrap_err().contains("oneshot:flag"));
    assert!(matches!("auto".parse::<AlgoChoice>(), Ok(AlgoChoice::Auto)));
}

/// A path asked for never changes silently: unsupported shapes are refused
/// with the reason.
#[test]
fn unsupported_shapes_are_refused() {
    let c = |s: &str| s.parse::<AlgoChoice>().unwrap();
    let oop4 = Shape::all_reduce(4, 10, 4, false);
    let e = c("oneshot:flag").resolve(&oop4).unwrap_err().to_string();
    assert!(e.contains("two-rank"), "{e}");
    let rs = Shape {
        collective: Collective::ReduceScatter,
        ..oop4
    };
    for a in ["oneshot", "oneshot:flag", "ps"] {
        assert!(c(a).resolve(&rs).is_err(), "{a}");
    }
    assert!(c("ring:pipe2").resolve(&rs).is_ok());
    // oneshot:fused runs every collective, in place too (its plans are
    // validated with the rest), and a broadcast's root must be a rank.
    assert!(c("oneshot:fused").resolve(&rs).is_ok());
    let rs_in_place = Shape {
        in_place: true,
        ..rs
    };
    assert!(c("oneshot:fused").resolve(&rs_in_place).is_ok());
    // A broadcast runs bcast and oneshot:fused only, and bcast nothing else.
    let bc = Shape {
        collective: Collective::Broadcast { root: 1 },
        ..oop4
    };
    for a in ["ring", "ring:pipe2", "oneshot", "oneshot:flag", "ps"] {
        let e = c(a).resolve(&bc).unwrap_err().to_string();
        assert!(e.contains("bcast"), "{a}: {e}");
    }
    assert!(c("bcast:pipe3").resolve(&bc).is_ok());
    assert!(c("oneshot:fused").resolve(&bc).is_ok());
    assert!(c("bcast").resolve(&rs).is_err());
    let far = Shape {
        collective: Collective::Broadcast { root: 4 },
        ..oop4
    };
    assert!(c("bcast").resolve(&far).is_err());
    assert!(c("oneshot:fused").resolve(&far).is_err());
}

fn broadcast(ranks: usize, root: usize, count: usize, elem_size: usize, in_place: bool) -> Shape {
    Shape {
        collective: Collective::Broadcast { root },
        ranks,
        count,
        elem_size,
        in_place,
    }
}

/// Every broadcast plan: every root, rank count, size, element size,
/// place and slice count; deadlock-free, race-free, bracketed, and every
/// rank ends with exactly the root's input (symbolic execution).
#[test]
fn broadcast_plans_validate() {
    for n in 1..=9 {
        for root in 0..n {
            for count in [0, 1, 2, 3, 5, 8, 17, 67, 1000] {
                for elem_size in [1, 2, 4, 8] {
                    for in_place in [false, true] {
                        for slices in [1, 2, 3, 4, 8] {
                            let s = broadcast(n, root, count, elem_size, in_place);
                            let a = bcast::Bcast { slices };
                            a.supports(&s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
                            first_plan(&a, &s)
                                .validate()
                                .unwrap_or_else(|e| panic!("{} {s:?}: {e}", a.name()));
                        }
                    }
                }
            }
        }
    }
    for (n, root) in [(crate::engine::MAX_RANKS, 200), (65, 64), (64, 0)] {
        let s = broadcast(n, root, 3 * n + 7, 4, root % 2 == 0);
        first_plan(&bcast::Bcast { slices: 4 }, &s)
            .validate()
            .unwrap_or_else(|e| panic!("n={n} root={root}: {e}"));
    }
}

/// The root sends the buffer once, every rank but the root receives it
/// once, every rank but the last of the chain forwards it once.
#[test]
fn broadcast_traffic() {
    let (n, root, count) = (5, 2, 1000);
    let p = first_plan(
        &bcast::Bcast { slices: 3 },
        &broadcast(n, root, count, 4, false),
    );
    let t = p.traffic();
    let last = (root + n - 1) % n;
    for (r, t) in t.iter().enumerate() {
        let sent = if r == last { 0 } else { 4000 };
        let received = if r == root { 0 } else { 4000 };
        assert_eq!((t.sent, t.received), (sent, received), "rank {r}");
    }
}

/// The validator catches a broadcast that forwards the wrong data: a hop
/// that copies the sender's own input instead of what it received.
#[test]
fn negative_broadcast_forwards_its_own_input() {
    let s = broadcast(3, 0, 8, 4, false);
    let mut p = first_plan(&bcast::Bcast { slices: 1 }, &s);
    let hop = p.ops[1]
        .iter_mut()
        .find(|o| matches!(o.kind, OpKind::Copy { from: 1, to: 2, .. }))
        .expect("rank 1 forwards to rank 2");
    if let OpKind::Copy { src, .. } = &mut hop.kind {
        *src = s.input(1);
    }
    let e = p.validate().unwrap_err();
    assert!(e.contains("wrong input elements"), "{e}");
}

#[test]
fn auto_policy() {
    let name = |s: Shape| AlgoChoice::Auto.resolve(&s).unwrap().name();
    assert_eq!(name(Shape::all_reduce(2, 1024, 4, false)), "oneshot:fused");
    assert_eq!(name(Shape::all_reduce(2, 1024, 4, true)), "oneshot:flag");
    assert_eq!(name(Shape::all_reduce(2, 8 << 20, 4, false)), "ring:pipe2");
    assert_eq!(
        name(Shape::all_reduce(2, 256 << 20, 4, false)),
        "ring:pipe4"
    );
    // More than 2 ranks: out of place oneshot:fused while a rank reads at
    // most 8 MiB from its peers, else the parameter server up to 4 MiB per
    // rank, then the plain ring (measured on 2 x H200, see
    // FUSED_MANY_MAX_READ and PS_MAX_BYTES).
    let mib = |ranks, m: usize| name(Shape::all_reduce(ranks, (m << 20) / 4, 4, false));
    assert_eq!(mib(4, 2), "oneshot:fused"); // reads 6 MiB from its peers
    assert_eq!(mib(4, 4), "ps"); // 12 MiB
    assert_eq!(mib(8, 1), "oneshot:fused"); // 7 MiB
    assert_eq!(mib(8, 2), "ps"); // 14 MiB
    assert_eq!(mib(8, 16), "ring");
    for ranks in [3, 4, 8] {
        for in_place in [false, true] {
            let s = |count| Shape::all_reduce(ranks, count, 4, in_place);
            let small = if in_place { "ps" } else { "oneshot:fused" };
            let fused_max = (8 << 20) / 4 / (ranks - 1);
            assert_eq!(name(s(16)), small);
            assert_eq!(name(s(fused_max)), small);
            let ps_or = |count: usize, other| {
                if !in_place && count <= fused_max {
                    other
                } else if count <= 1 << 20 {
                    "ps"
                } else {
                    "ring"
                }
            };
            assert_eq!(name(s(fused_max + 1)), ps_or(fused_max + 1, small));
            assert_eq!(name(s(1 << 20)), ps_or(1 << 20, small));
            assert_eq!(name(s((1 << 20) + 1)), "ring");
            assert_eq!(name(s(64 << 20)), "ring");
            assert_eq!(name(s(256 << 20)), "ring:pipe4");
        }
    }
    let of = |collective, count| Shape {
        collective,
        ..Shape::all_reduce(2, count, 4, false)
    };
    // All-gather: the plain ring at every size; reduce-scatter: the plain
    // ring below 16 MiB of whole buffer (2 x 2 MiB x 4 B = 16 MiB), then
    // pipelined (measured on 2 x H200, see RS_PIPE_MIN_BYTES).
    assert_eq!(name(of(Collective::AllGather, 16)), "ring");
    assert_eq!(name(of(Collective::AllGather, 64 << 20)), "ring");
    assert_eq!(name(of(Collective::ReduceScatter, 16)), "ring");
    assert_eq!(name(of(Collective::ReduceScatter, (2 << 20) - 1)), "ring");
    assert_eq!(name(of(Collective::ReduceScatter, 2 << 20)), "ring:pipe2");
    // Broadcast: bcast, pipelined in slices of at least 512 KiB from 3
    // ranks on (two ranks have nothing to forward), at most 8.
    let bc = |ranks, bytes: usize| name(broadcast(ranks, 0, bytes / 4, 4, false));
    assert_eq!(bc(2, 64 << 20), "bcast");
    assert_eq!(bc(4, 4 << 10), "bcast");
    assert_eq!(bc(4, 1 << 20), "bcast:pipe2");
    assert_eq!(bc(8, 64 << 20), "bcast:pipe8");
}

/// A path whose kernels spin on other ranks' flags refuses, by name,
/// where rank processes share one GPU; elsewhere it runs, and `auto` never
/// hits the refusal.
#[test]
fn paths_that_spin_refuse_where_processes_take_turns_on_a_gpu() {
    let shared = Placement {
        time_sliced: true,
        ..Placement::default()
    };
    for name in [
        "ring:ll",
        "ring:simple",
        "oneshot:ll",
        "oneshot:flag",
        "ring:flag",
    ] {
        let s = Shape::all_reduce(2, 1000, 4, false);
        let algo: AlgoChoice = name.parse().unwrap();
        let e = algo.resolve_in(&s, &shared).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{name} cannot run here")) && e.contains("take turns"),
            "{e}"
        );
        for at in [
            Placement::default(),
            Placement {
                host: true,
                ..Placement::default()
            },
            Placement {
                per_node: Some(1),
                ..Placement::default()
            },
        ] {
            assert_eq!(algo.resolve_in(&s, &at).unwrap().name(), name);
        }
    }
    // Every other path runs there (its waits between ranks are made on
    // the host by the CUDA backend).
    for algo in paths() {
        let name = algo.name();
        if name.ends_with(":mpi") {
            // Host memory only, wherever the GPUs are.
            let e = algo.supports_at(&shared).unwrap_err();
            assert!(e.contains("host memory"), "{name}: {e}");
        } else if ![
            "ring:ll",
            "ring:simple",
            "oneshot:ll",
            "oneshot:flag",
            "ring:flag",
        ]
        .contains(&name.as_str())
        {
            algo.supports_at(&shared)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    for n in [2, 3] {
        for in_place in [false, true] {
            let s = Shape::all_reduce(n, 1000, 4, in_place);
            AlgoChoice::Auto.resolve_in(&s, &shared).unwrap();
        }
    }
}

/// Where rank threads share a GPU with too few hardware queues, a path
/// whose kernels spin on other ranks' flags refuses by name, saying what
/// to set, and `auto` takes none: it was the default of 4 rank threads on
/// one GPU (`ring:ll`), and its sweeps stopped with the driver's 8 queues
/// (`results/2026-12-06-h100x1-ll-stop/`).
#[test]
fn paths_that_spin_refuse_where_rank_threads_share_too_few_queues() {
    let spinning = [
        "ring:ll",
        "ring:simple",
        "oneshot:ll",
        "oneshot:flag",
        "ring:flag",
    ];
    for (n, queues) in [(2, 4), (3, 8), (4, 8), (4, 15)] {
        let short = Placement {
            one_gpu: true,
            short_queues: ShortQueues::of(n, queues),
            ..Placement::default()
        };
        assert!(short.short_queues.is_some());
        for name in spinning {
            let algo: AlgoChoice = name.parse().unwrap();
            if algo.resolve(&Shape::all_reduce(n, 1000, 4, false)).is_err() {
                continue; // refused for the shape already (2-rank paths)
            }
            let e = algo
                .resolve_in(&Shape::all_reduce(n, 1000, 4, false), &short)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("{name} cannot run here"))
                    && e.contains(&format!(
                        "CUDA_DEVICE_MAX_CONNECTIONS to at least {}",
                        QUEUES_PER_RANK * n
                    )),
                "{e}"
            );
        }
        for s in shapes(n, &[1, 5, 1000, LL_MANY_MAX_BYTES / 4, 16 << 20]) {
            let algo = AlgoChoice::Auto.resolve_in(&s, &short).unwrap();
            assert!(
                !spinning.contains(&algo.name().as_str()),
                "{s:?}: {}",
                algo.name()
            );
        }
    }
    let enough = Placement {
        one_gpu: true,
        short_queues: ShortQueues::of(4, 16),
        ..Placement::default()
    };
    assert_eq!(enough.short_queues, None);
    let s = Shape::all_reduce(4, 1000, 4, false);
    assert_eq!(
        AlgoChoice::Auto.resolve_in(&s, &enough).unwrap().name(),
        "ring:ll"
    );
}

/// On one GPU (threads), `auto` takes `ring:ll` for all-reduces of more
/// than 2 ranks up to `LL_MANY_MAX_BYTES` and `ring:simple` above
/// `PS_MAX_BYTES` up to `SIMPLE_MANY_MAX_BYTES`, and elsewhere what it
/// took.
#[test]
fn auto_on_one_gpu_takes_the_kernel_rings_where_they_were_measured_to_win() {
    let one = Placement {
        one_gpu: true,
        ..Placement::default()
    };
    let max = LL_MANY_MAX_BYTES / 4;
    let (ps, simple) = (PS_MAX_BYTES / 4, SIMPLE_MANY_MAX_BYTES / 4);
    for n in 2..=6 {
        for s in shapes(
            n,
            &[
                1,
                5,
                1000,
                max,
                max + 1,
                ps,
                ps + 1,
                simple,
                simple + 1,
                16 << 20,
            ],
        ) {
            let got = AlgoChoice::Auto.resolve_in(&s, &one).unwrap().name();
            let bytes = s.count * s.elem_size;
            let many = s.collective == Collective::AllReduce && n > 2;
            if many && bytes <= LL_MANY_MAX_BYTES {
                assert_eq!(got, "ring:ll", "{s:?}");
            } else if many && bytes > PS_MAX_BYTES && bytes <= SIMPLE_MANY_MAX_BYTES {
                assert_eq!(got, "ring:simple", "{s:?}");
            } else {
                let elsewhere = AlgoChoice::Auto.resolve_in(&s, &Placement::default());
                assert_eq!(got, elsewhere.unwrap().name(), "{s:?}");
            }
        }
    }
}

/// With processes sharing a GPU, `auto` takes the fused one-shot for every
/// collective out of place, at every rank count and size (no wait between
/// ranks at all); in place the copy-engine one-shot for an all-reduce of 2
/// ranks up to `ONESHOT_MAX_BYTES` (one wait), else the fused one-shot (at
/// most two waits per peer: its Begin and its last read), where every other
/// path hands off at each step. Nodes and host memory keep their own
/// policies.
#[test]
fn auto_with_processes_sharing_a_gpu_never_waits_between_ranks() {
    let at = Placement {
        time_sliced: true,
        ..Placement::default()
    };
    let check = |s: &Shape| {
        let algo = AlgoChoice::Auto.resolve_in(s, &at).unwrap();
        algo.supports_at(&at)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"));
        if s.ranks == 1 {
            return;
        }
        let bytes = s.count * s.elem_size;
        let two = s.collective == Collective::AllReduce && s.ranks == 2;
        if s.in_place && two && bytes <= ONESHOT_MAX_BYTES {
            assert_eq!(algo.name(), "oneshot", "{s:?}");
            return;
        }
        assert_eq!(algo.name(), "oneshot:fused", "{s:?}");
        if s.count > 1000 {
            return;
        }
        let p = first_plan(algo.as_ref(), s);
        p.validate().unwrap_or_else(|e| panic!("{s:?}: {e}"));
        if !s.in_place {
            assert!(!p.waits_between_ranks(), "{s:?}");
        }
        for (r, ops) in p.ops.iter().enumerate() {
            let mut remote: Vec<usize> = ops
                .iter()
                .flat_map(|op| op.waits.iter().map(|w| w.0))
                .filter(|&w| p.signals[w].owner != r)
                .collect();
            remote.sort_unstable();
            remote.dedup();
            assert!(
                remote.len() <= 2 * (s.ranks - 1),
                "{s:?}: rank {r}: {remote:?}"
            );
        }
    };
    for n in 2..=9 {
        for s in shapes(n, &[1, 5, 1000, 1 << 20, 64 << 20]) {
            check(&s);
        }
    }
    for n in 1..=6 {
        for root in 0..n {
            for count in [0, 1, 7, 1000] {
                for in_place in [false, true] {
                    check(&broadcast(n, root, count, 4, in_place));
                }
            }
        }
    }
    // The plans `auto` takes on one process's GPUs do wait between ranks:
    // the property is not true of every plan.
    let ring = first_plan(&ring::Ring::PLAIN, &Shape::all_reduce(2, 8, 4, false));
    assert!(ring.waits_between_ranks());
    let s = Shape::all_reduce(4, 1 << 20, 4, false);
    let nodes = Placement {
        per_node: Some(2),
        ..at
    };
    assert_eq!(
        AlgoChoice::Auto.resolve_in(&s, &nodes).unwrap().name(),
        "hier:2"
    );
    let host = Placement { host: true, ..at };
    assert_eq!(
        AlgoChoice::Auto.resolve_in(&s, &host).unwrap().name(),
        auto_host(&s, at.processes).name()
    );
    // Over nodes on host memory each rail's phase is MPI's all-reduce,
    // nodes of one rank included; on GPUs nodes of one rank take the ring.
    for (g, name) in [(1, "hier:1:mpi"), (2, "hier:2:mpi")] {
        for bytes in [8, 4 << 10, 1 << 20, 64 << 20] {
            let s = Shape::all_reduce(4, bytes / 4, 4, false);
            let at = Placement {
                per_node: Some(g),
                ..host
            };
            assert_eq!(AlgoChoice::Auto.resolve_in(&s, &at).unwrap().name(), name);
        }
    }
    for (g, name) in [(0, "ring"), (1, "ring"), (4, "ring")] {
        let at = Placement {
            per_node: Some(g),
            ..at
        };
        assert_eq!(
            AlgoChoice::Auto.resolve_in(&s, &at).unwrap().name(),
            name,
            "{g}"
        );
        let host = Placement { host: true, ..at };
        if g != 1 {
            assert_eq!(
                AlgoChoice::Auto.resolve_in(&s, &host).unwrap().name(),
                name,
                "{g}"
            );
        }
    }
}

/// `auto` on host memory: one step out of place while small, the
/// parameter server in place while small, and above that the ring where
/// every rank is a process (its steps need no hand-off there) but `ps`
/// with rank threads from 3 ranks.
#[test]
fn auto_on_host_memory_takes_the_ring_where_ranks_are_processes() {
    let pick = |ranks: usize, bytes: usize, in_place: bool, processes: bool| {
        let at = Placement {
            host: true,
            processes,
            ..Placement::default()
        };
        let s = Shape::all_reduce(ranks, bytes / 4, 4, in_place);
        AlgoChoice::Auto.resolve_in(&s, &at).unwrap().name()
    };
    for processes in [false, true] {
        assert_eq!(pick(4, 4 << 10, false, processes), "oneshot:fused");
        assert_eq!(pick(4, 64 << 10, true, processes), "ps");
        assert_eq!(pick(2, 1 << 20, true, processes), "ring");
    }
    assert_eq!(pick(4, 1 << 20, true, false), "ps");
    assert_eq!(pick(4, 1 << 20, true, true), "ring");
    assert_eq!(pick(4, 16 << 20, false, true), "ring");
}

// ---------------------------------------------------------------------------
// The validator's negative cases: each defect is caught, with a reason.
// ---------------------------------------------------------------------------

fn ring4() -> Plan {
    ring::plan(&Shape::all_reduce(4, 64, 4, false), 1, 2)
}

fn err(p: &Plan) -> String {
    p.validate().expect_err("the defect must be caught")
}

/// A cross-rank signal not marked `remote` would be an ordinary event in
/// one process per GPU, which the other process cannot wait on.
#[test]
fn negative_unmarked_remote_signal() {
    let mut p = ring4();
    let s = p
        .signals
        .iter()
        .position(|s| s.remote)
        .expect("a cross-rank signal");
    p.signals[s].remote = false;
    let e = err(&p);
    assert!(e.contains("marked not remote"), "{e}");
    let mut p = ring4();
    let s = p
        .signals
        .iter()
        .position(|s| !s.remote)
        .expect("a rank-local signal");
    p.signals[s].remote = true;
    let e = err(&p);
    assert!(e.contains("marked remote"), "{e}");
}

#[test]
fn negative_dropped_wait_is_a_race() {
    let mut p = ring4();
    // Drop the wait of rank 1's first reduce on its left neighbour's copy.
    let op = p.ops[1]
        .iter_mut()
        .find(|o| matches!(o.kind, OpKind::Reduce { .. }))
        .unwrap();
    op.waits.clear();
    let e = err(&p);
    assert!(e.contains("race"), "{e}");
}

#[test]
fn negative_cycle_is_a_deadlock() {
    let mut p = ring4();
    // Rank 0's first copy waits for rank 1's End-side... make two ops wait
    // on each other: rank 0's first copy on rank 1's first copy and back.
    let s0 = p.ops[0].iter().find_map(|o| match o.kind {
        OpKind::Copy { .. } => o.signal,
        _ => None,
    });
    let s1 = p.ops[1].iter().find_map(|o| match o.kind {
        OpKind::Copy { .. } => o.signal,
        _ => None,
    });
    let (s0, s1) = (s0.unwrap(), s1.unwrap());
    for (r, w) in [(0, s1), (1, s0)] {
        let op = p.ops[r]
            .iter_mut()
            .find(|o| matches!(o.kind, OpKind::Copy { .. }))
            .unwrap();
        op.waits.push(w);
    }
    let e = err(&p);
    assert!(e.contains("deadlock"), "{e}");
}

#[test]
fn negative_double_sum() {
    // The parameter server's root adds rank 1's slot a second time, in
    // order (no race): the data-flow check sees rank 1 counted twice.
    let mut p = ps::plan(&Shape::all_reduce(3, 16, 4, false));
    let i = p.ops[0]
        .iter()
        .position(|o| matches!(o.kind, OpKind::Reduce { .. }))
        .unwrap();
    let mut dup = p.ops[0][i].clone();
    dup.signal = None;
    dup.waits.clear();
    if let OpKind::Reduce { dst, a, step, .. } = &mut dup.kind {
        *a = dst.clone();
        step.pre_a = false;
        step.post = false;
    }
    p.ops[0].insert(i + 1, dup);
    let e = err(&p);
    assert!(e.contains("more than once"), "{e}");
}

#[test]
fn negative_unsynchronized_peer_read() {
    // The fused plan reading the peer's *receive* buffer (written by the
    // peer in the same call) instead of its send buffer.
    let mut p = fused::plan(&Shape::all_reduce(2, 32, 4, false));
    for op in p.ops[0].iter_mut() {
        if let OpKind::Reduce { b, .. } = &mut op.kind {
            b.buf = crate::plan::Buf::Recv;
        }
    }
    let e = err(&p);
    assert!(e.contains("race") || e.contains("never written"), "{e}");
}

#[test]
fn negative_misplaced_copy() {
    let mut p = ring::plan(&Shape::all_reduce(3, 48, 4, false), 1, 2);
    // Shift one all-gather copy's destination by one element.
    let op = p.ops[1]
        .iter_mut()
        .rev()
        .find(|o| matches!(o.kind, OpKind::Copy { .. }))
        .unwrap();
    if let OpKind::Copy { dst, .. } = &mut op.kind {
        if dst.range.start > 0 {
            dst.range = dst.range.start - 1..dst.range.end - 1;
        } else {
            dst.range = dst.range.start + 1..dst.range.end + 1;
        }
    }
    assert!(p.validate().is_err());
}

#[test]
fn negative_missing_premultiply() {
    let mut p = ring4();
    for op in p.ops[0].iter_mut() {
        if let OpKind::Reduce { step, .. } = &mut op.kind {
            *step = ReduceStep::default();
        }
    }
    let e = err(&p);
    assert!(e.contains("pre-multipl") || e.contains("complete"), "{e}");
    // Marking a partial sum as raw is caught at once.
    let mut q = ring4();
    for op in q.ops[0].iter_mut() {
        if let OpKind::Reduce { step, .. } = &mut op.kind {
            step.pre_b = true;
        }
    }
    let e = err(&q);
    assert!(e.contains("untouched input"), "{e}");
}

#[test]
fn negative_structure() {
    // A copy past the end of the scratch buffer.
    let mut p = ring4();
    let op = p.ops[0]
        .iter_mut()
        .find(|o| matches!(o.kind, OpKind::Copy { .. }))
        .unwrap();
    if let OpKind::Copy { dst, .. } = &mut op.kind {
        dst.range.end += 10_000;
    }
    assert!(err(&p).contains("outside"));
    // A signal recorded twice.
    let mut q = ring4();
    let s = q.ops[0][0].signal;
    q.ops[0][1].signal = s;
    assert!(err(&q).contains("recorded"));
    // An exchange without its partner.
    let mut f = flag::plan(&Shape::all_reduce(2, 8, 4, true), 0, true);
    f.ops[1].retain(|o| !matches!(o.kind, OpKind::Kernel(_)));
    assert!(err(&f).contains("put filled") || err(&f).contains("recorded"));
    // A wait on a flag outside an exchange.
    let mut g = flag::plan(&Shape::all_reduce(2, 8, 4, true), 0, true);
    let flag_sig = g
        .signals
        .iter()
        .position(|s| s.kind == crate::plan::SignalKind::Flag)
        .unwrap();
    let end = g.ops[0].len() - 1;
    g.ops[0][end].waits.push(SignalId(flag_sig));
    assert!(err(&g).contains("flag"));
    // Writing into a send buffer.
    let mut h = ring4();
    let op = h.ops[0]
        .iter_mut()
        .find(|o| matches!(o.kind, OpKind::Copy { .. }))
        .unwrap();
    if let OpKind::Copy { dst, .. } = &mut op.kind {
        dst.buf = crate::plan::Buf::Send;
    }
    assert!(err(&h).contains("send"));
    let _ = Lane::Copy;
}

/// The LL ring kernel's contract: each break of it is named.
#[test]
fn negative_ll_ring_kernel() {
    let shape = Shape::all_reduce(3, 12, 4, false);
    fn steps(p: &mut Plan, r: usize) -> &mut Vec<crate::plan::Op> {
        p.ops[r]
            .iter_mut()
            .find_map(|o| match &mut o.kind {
                OpKind::Kernel(k) => Some(&mut k.steps),
                _ => None,
            })
            .unwrap()
    }
    let good = ringll::plan(&shape, 0, true);
    good.validate().unwrap();
    // A put to the left neighbour instead of the right.
    let mut p = good.clone();
    if let OpKind::Copy { to, .. } = &mut steps(&mut p, 0)[0].kind {
        *to = 2;
    }
    assert!(err(&p).contains("rank 1's lines"), "{}", err(&p));
    // A put into the right neighbour's scratch instead of its LL slots.
    let mut p = good.clone();
    if let OpKind::Copy { dst, .. } = &mut steps(&mut p, 0)[0].kind {
        dst.buf = crate::plan::Buf::Scratch;
    }
    p.scratch_len = p.lines_len;
    assert!(err(&p).contains("rank 1's lines"), "{}", err(&p));
    // An op outside the kernel that reads LL slots (whose words carry
    // flags on a device).
    let mut p = good.clone();
    let lines = crate::plan::Region::new(crate::plan::Buf::Lines, 0..1);
    let out = p.shape.output(0).sub(0..1);
    p.ops[0].insert(
        1,
        crate::plan::Op {
            lane: Lane::Compute,
            kind: OpKind::Copy {
                from: 0,
                to: 0,
                src: lines,
                dst: out,
            },
            waits: vec![],
            signal: None,
            label: Default::default(),
        },
    );
    assert!(
        err(&p).contains("LL slots outside an LL kernel"),
        "{}",
        err(&p)
    );
    // A receive that waits for an event (rank 0's Begin), not a flag.
    let mut p = good.clone();
    steps(&mut p, 1)[1].waits = vec![SignalId(0)];
    assert!(err(&p).contains("not a flag"), "{}", err(&p));
    // A receive that reads a slot its left neighbour's put did not fill.
    let mut p = good.clone();
    if let OpKind::Reduce { b, .. } = &mut steps(&mut p, 1)[1].kind {
        b.range = b.range.start + 1..b.range.end + 1;
    }
    assert!(err(&p).contains("slot rank 0's put filled"), "{}", err(&p));
    // An exchange whose slot is its own input (the put and the reduce
    // would read the peer's data as this rank's): the slot, the peer's put
    // and the input all moved onto the input's range of scratch.
    let mut f = flag::plan(&Shape::all_reduce(2, 8, 4, false), 0, true);
    for r in 0..2 {
        let OpKind::Kernel(k) = &mut f.ops[r][1].kind else {
            panic!("op 1 of rank {r} is the exchange");
        };
        if let OpKind::Copy { src, .. } = &mut k.steps[0].kind {
            src.buf = crate::plan::Buf::Scratch;
        }
        if let OpKind::Reduce { a, .. } = &mut k.steps[1].kind {
            a.buf = crate::plan::Buf::Scratch;
        }
    }
    assert!(err(&f).contains("overlaps its input"), "{}", err(&f));
    // A receive that waits for nothing: the reduce would race the put.
    let mut p = good.clone();
    steps(&mut p, 1)[1].waits.clear();
    assert!(err(&p).contains("one flag"), "{}", err(&p));
    // A one-shot's kernel on 3 ranks.
    let mut p = good.clone();
    for ops in &mut p.ops {
        for o in ops {
            if let OpKind::Kernel(k) = &mut o.kind {
                k.kind = crate::plan::KernelKind::LlOneShot;
            }
        }
    }
    assert!(
        err(&p).contains("one put and one receive on 2 ranks"),
        "{}",
        err(&p)
    );
    // A kernel on the copy lane.
    let mut p = good;
    for o in &mut p.ops[2] {
        if matches!(o.kind, OpKind::Kernel(_)) {
            o.lane = Lane::Copy;
        }
    }
    assert!(!err(&p).is_empty());
}

/// The path names the README and ALGORITHM.md mention in their prose (inline
/// code outside recorded output) are names `--algo` accepts. The README once
/// listed `ring:pipeKx2`, `oneshot:pull`, `oneshot:fenced` and
/// `oneshot:pipeK` long after they were gone.
#[test]
fn documented_paths_exist() {
    let docs = [
        ("README.md", include_str!("../../README.md")),
        ("docs/ALGORITHM.md", include_str!("../../docs/ALGORITHM.md")),
    ];
    let mut seen = 0;
    for (file, text) in docs {
        let mut in_block = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if in_block {
                continue;
            }
            for (i, span) in line.split('`').enumerate() {
                let span = &span.replace("pipeK", "pipe2").replace("pullK", "pull2");
                let looks = i % 2 == 1
                    && ["ring", "oneshot", "ps"]
                        .iter()
                        .any(|p| span == *p || span.starts_with(&format!("{p}:")))
                    && span
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == ':');
                if !looks {
                    continue;
                }
                let name = span.strip_suffix(":graph").unwrap_or(span);
                seen += 1;
                assert!(
                    parse(name).is_ok(),
                    "{file} names `{span}`: {:?}",
                    parse(name).err()
                );
            }
        }
    }
    assert!(seen > 10, "found only {seen} path names in the docs");
}

/// Regression (a new user's report): `run --algo ring:graph` said "unknown
/// algorithm"; `:graph` exists only in `bench`, and the message says so.
#[test]
fn graph_suffix_outside_bench_says_where_it_belongs() {
    for name in ["ring:graph", "oneshot:flag:graph", "auto:graph"] {
        let e = super::parse(name).expect_err(name);
        assert!(
            e.contains("only bench measures") && e.contains("bench --algo"),
            "{name}: {e}"
        );
    }
    let e = super::parse("nonsense:graph").expect_err("nonsense");
    assert!(e.contains("unknown algorithm"), "{e}");
}

/// Regression (issue 26): the debug validation of a plan was keyed by the
/// address of its `Arc` in a global set that was never cleared, so a new
/// plan at the address of a dropped one was never validated. The verdict now
/// lives in the plan object: a new plan at a reused address is validated,
/// and so is a changed clone of a validated one.
#[test]
fn a_new_plan_at_a_reused_address_is_validated() {
    let good = Arc::new(ring4());
    assert!(good.validate_once().is_ok());
    assert!(good.validate_once().is_ok(), "the verdict is kept");
    // A broken plan, made before the good one's memory is freed so that
    // its Arc takes the same block (the allocator reuses a freed block of
    // the same size at once; the test holds without that, but proves less).
    let mut broken = ring4();
    broken.ops[0].clear();
    let addr = Arc::as_ptr(&good);
    drop(good);
    let bad = Arc::new(broken);
    if Arc::as_ptr(&bad) != addr {
        eprintln!("note: the allocator did not reuse the address");
    }
    assert!(bad.validate_once().is_err(), "a new plan is validated");
    assert!(bad.validate_once().is_err(), "and stays refused");
    if cfg!(debug_assertions) {
        assert!(matches!(checked(&bad), Err(Error::Plan(_))));
    }
    // A clone is another object: changed after its original was validated,
    // it is validated again.
    let ok = Arc::new(ring4());
    assert!(ok.validate_once().is_ok());
    let mut changed = (*ok).clone();
    changed.ops[1].clear();
    assert!(changed.validate_once().is_err());
}

/// Every name of the registry parses to an algorithm of that name
/// (`ring:pipeK` as `ring:pipe3`), and the one-shots, the ring and the
/// parameter server have a closed form of their traffic.
#[test]
fn registry_names_parse() {
    assert_eq!(paths().len(), names().count());
    for (name, a) in names().zip(paths()) {
        assert_eq!(a.name(), example_name(name));
    }
    assert_eq!(parse("ps").unwrap().load(), Some(Load::Root));
    assert_eq!(parse("ring:flag").unwrap().load(), Some(Load::Ring));
    assert_eq!(parse("oneshot").unwrap().load(), Some(Load::Everyone));
    assert_eq!(parse("bcast").unwrap().load(), None);
    assert_eq!(
        parse("hier:2").unwrap().load(),
        Some(Load::Hier { per_node: 2 })
    );
    // 2 nodes x 2 ranks of 1 MB: 1 MB inside the node, 0.5 MB on the rail.
    assert_eq!(Load::Hier { per_node: 2 }.bytes(4, 1_000_000), 1.5e6);
}

/// The node sizes that divide `n`.
fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|g| n % g == 0).collect()
}

/// The hierarchical plans validate for N in 2..=8 and every node size G
/// dividing N, every element size, in and out of place, sizes that divide
/// evenly and sizes that leave chunks empty.
#[test]
fn hier_plans_validate() {
    for n in 2..=8 {
        for (g, rail) in divisors(n)
            .into_iter()
            .flat_map(|g| [(g, hier::Rail::Ring), (g, hier::Rail::Mpi)])
        {
            let a = hier::Hier { per_node: g, rail };
            for s in shapes(n, &[0, 1, 2, 3, 7, 16, 17, 64, 100, 1000]) {
                if s.collective != Collective::AllReduce {
                    assert!(a.supports(&s).is_err(), "{} {s:?}", a.name());
                    continue;
                }
                a.supports(&s)
                    .unwrap_or_else(|e| panic!("{} {s:?}: {e}", a.name()));
                let p = first_plan(&a, &s);
                assert_eq!(p.name, a.name());
                p.validate()
                    .unwrap_or_else(|e| panic!("{} {s:?}: {e}", a.name()));
            }
        }
    }
}

/// A node size that does not divide the rank count is refused with a
/// typed error naming the path and the reason; a node size below 1 (or
/// not a number) does not parse.
#[test]
fn hier_refuses_a_node_size_that_does_not_divide() {
    let c = |s: &str| s.parse::<AlgoChoice>().unwrap();
    for (g, n) in [(2, 3), (2, 5), (3, 4), (4, 6), (8, 4)] {
        let shape = Shape::all_reduce(n, 64, 4, false);
        let e = c(&format!("hier:{g}")).resolve(&shape).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::BadArgument(_)), "{e:?}");
        assert!(
            msg.contains(&format!("hier:{g}")) && msg.contains("do not divide"),
            "{msg}"
        );
    }
    for bad in ["hier:0", "hier:", "hier", "hier:x", "hier:1025", "hier:-1"] {
        let e = parse(bad).unwrap_err();
        assert!(e.contains("hier:G"), "{bad}: {e}");
    }
    let rs = Shape {
        collective: Collective::ReduceScatter,
        ..Shape::all_reduce(4, 64, 4, false)
    };
    assert!(c("hier:2").resolve(&rs).is_err());
    // auto never picks it: inside one machine it is slower than the ring.
    for n in [2, 4, 6, 8] {
        for bytes in [8, 1 << 20, 64 << 20, 1 << 30] {
            for in_place in [false, true] {
                let s = Shape::all_reduce(n, bytes / 4, 4, in_place);
                let a = AlgoChoice::Auto.resolve(&s).unwrap();
                assert!(!a.name().starts_with("hier"), "{}", a.name());
            }
        }
    }
}

/// What crosses the node boundary (the issue's target): on K nodes of G
/// ranks, the hierarchical plan sends `2(K-1)/K·D/G` bytes per rank between
/// nodes, exactly when the chunks divide evenly, and `2(K-1)·D` over all
/// ranks whatever the size; it moves every byte of a rank's traffic inside
/// the node otherwise. The flat ring on the same grouping sends
/// `2(N-1)/N·D` across from the last rank of each node.
#[test]
fn hier_node_traffic_is_the_rails() {
    for n in 2..=8 {
        for (g, rail) in divisors(n)
            .into_iter()
            .flat_map(|g| [(g, hier::Rail::Ring), (g, hier::Rail::Mpi)])
        {
            let k = n / g;
            for elem_size in [1, 2, 4, 8] {
                // 16-byte units, so that count = units * unit.
                let unit = 16 / elem_size;
                for count in [n * k * unit, 3 * n * k * unit, 5, 1000, 77] {
                    let s = Shape::all_reduce(n, count, elem_size, false);
                    let p = hier::plan(&s, g, rail);
                    let d = (count * elem_size) as u64;
                    let t = p.node_traffic(g);
                    let sent: u64 = t.iter().map(|x| x.sent).sum();
                    let received: u64 = t.iter().map(|x| x.received).sum();
                    assert_eq!(sent, 2 * (k as u64 - 1) * d, "n={n} g={g} count={count}");
                    assert_eq!(received, sent);
                    if count % (n * k * unit) == 0 {
                        let want = 2 * (k as u64 - 1) * d / (k * g) as u64;
                        for (r, x) in t.iter().enumerate() {
                            assert_eq!(x.sent, want, "n={n} g={g} r={r} count={count}");
                            assert_eq!(x.received, want, "n={n} g={g} r={r}");
                        }
                        // Everything else stays inside the node: 2(G-1)/G·D.
                        for (r, (all, across)) in p.traffic().iter().zip(&t).enumerate() {
                            let inside = 2 * (g as u64 - 1) * d / g as u64;
                            assert_eq!(all.sent - across.sent, inside, "n={n} g={g} r={r}");
                        }
                        let ring = ring::plan(&s, 1, 2).node_traffic(g);
                        for (r, x) in ring.iter().enumerate() {
                            let crosses = k > 1 && (r + 1) % g == 0;
                            let want = if crosses {
                                2 * (n as u64 - 1) * d / n as u64
                            } else {
                                0
                            };
                            assert_eq!(x.sent, want, "ring n={n} g={g} r={r}");
                        }
                    }
                }
            }
        }
    }
    // The issue's case: 2 nodes x 2 ranks, 1 MiB per rank: D/G = 512 KiB,
    // 2(K-1)/K = 1, so 512 KiB per rank crosses the network.
    let s = Shape::all_reduce(4, 1 << 18, 4, true);
    let t = hier::plan(&s, 2, hier::Rail::Ring).node_traffic(2);
    assert!(t
        .iter()
        .all(|x| x.sent == 512 << 10 && x.received == 512 << 10));
}

/// Over nodes, `hier:G:mpi` runs each rail's op as the network library's
/// all-reduce (its steps do not run), so no other op may wait for a rank of
/// another node: a wait across nodes is a message per call, and a process
/// that expects none can nap between calls. Every rank's End used to wait
/// for its rail neighbour's last copy, which never writes into it there.
/// `hier:G` (the ring over the rail) does wait across nodes.
#[test]
fn hier_mpi_waits_for_no_other_node_outside_its_rails() {
    for n in 2..=8 {
        for g in divisors(n).into_iter().filter(|&g| g < n) {
            for count in [0, 1, 5, 64, 1000] {
                let s = Shape::all_reduce(n, count, 4, false);
                let across = |rail| {
                    let p = hier::plan(&s, g, rail);
                    let mut found = Vec::new();
                    for (r, ops) in p.ops.iter().enumerate() {
                        for op in ops {
                            for w in &op.waits {
                                let owner = p.signals[w.0].owner;
                                if owner / g != r / g {
                                    found.push((r, op.label.note, owner));
                                }
                            }
                        }
                    }
                    found
                };
                let mpi = across(hier::Rail::Mpi);
                assert!(mpi.is_empty(), "n={n} g={g} count={count}: {mpi:?}");
                if count >= n {
                    assert!(!across(hier::Rail::Ring).is_empty(), "n={n} g={g}");
                }
            }
        }
    }
}

/// `hier:N` is the ring's traffic inside one node; `hier:1` the ring's.
#[test]
fn hier_limits_are_the_ring() {
    for n in 2..=6 {
        let s = Shape::all_reduce(n, 96 * n, 4, false);
        let ring = ring::plan(&s, 1, 2).traffic();
        assert_eq!(hier::plan(&s, n, hier::Rail::Ring).traffic(), ring);
        assert_eq!(hier::plan(&s, 1, hier::Rail::Ring).traffic(), ring);
        assert!(hier::plan(&s, n, hier::Rail::Ring)
            .node_traffic(n)
            .iter()
            .all(|t| t.sent == 0));
    }
}

/// `RINGREDUCE_ALGO` takes `auto` or any path the registry parses, trimmed;
/// anything else is refused naming the variable and the value.
#[test]
fn the_algo_variable_takes_auto_or_a_path() {
    use std::ffi::OsStr;
    let p = &ALGO;
    let get = |v: &str| p.parse(Some(OsStr::new(v)));
    assert_eq!(get("").unwrap(), None);
    assert_eq!(get("AUTO").unwrap().as_deref(), Some("auto"));
    assert_eq!(get(" ring:pipe4 ").unwrap().as_deref(), Some("ring:pipe4"));
    assert_eq!(get("ps").unwrap().as_deref(), Some("ps"));
    for v in ["garbage", "ring:pipe0", "ring:graph", "-1", "1e308"] {
        let m = get(v).unwrap_err().to_string();
        assert!(
            m.contains("RINGREDUCE_ALGO") && m.contains(&format!("{v:?}")),
            "{m}"
        );
    }
}

/// A rail's all-reduce (`hier:G:mpi`) must say, as its group, exactly what
/// its steps compute (a link runs the group instead of the steps), and its
/// puts may wait for nothing but their member's Begin: every mutation
/// below is refused by the validator, naming what is wrong.
#[test]
fn a_rails_group_must_be_what_its_steps_compute() {
    let s = Shape::all_reduce(4, 1000, 4, false);
    let good = hier::plan(&s, 2, hier::Rail::Mpi);
    good.validate().unwrap();
    let own_begin = good.ops[1][0].signal.unwrap();
    let mutate = |f: &dyn Fn(&mut crate::plan::Kernel)| -> String {
        let mut p = good.clone();
        let k = p.ops[1]
            .iter_mut()
            .find_map(|o| match &mut o.kind {
                OpKind::Kernel(k) => Some(k),
                _ => None,
            })
            .expect("a rail op");
        f(k);
        p.validate().unwrap_err()
    };
    type Mutation = Box<dyn Fn(&mut crate::plan::Kernel)>;
    let cases: Vec<(&str, Mutation)> = vec![
        (
            "steps write",
            Box::new(|k| {
                let g = k.group.as_mut().unwrap();
                g.dst.range.end += 1;
                g.src.range.end += 1;
            }),
        ),
        (
            "not rank 1's rail",
            Box::new(|k| k.group.as_mut().unwrap().members.reverse()),
        ),
        (
            "the post-op",
            Box::new(|k| k.group.as_mut().unwrap().step.post = false),
        ),
        ("without its group", Box::new(|k| k.group = None)),
        (
            "not a flag of another rank",
            Box::new(move |k| {
                let put = k.steps.iter_mut().find(|s| !s.waits.is_empty()).unwrap();
                put.waits = vec![own_begin];
            }),
        ),
    ];
    for (want, f) in cases {
        let e = mutate(&*f);
        assert!(e.contains(want), "{want}: {e}");
    }
    // Only a rail's op has a group.
    let mut p = ringll::plan(&Shape::all_reduce(2, 64, 4, false), 0, true);
    for o in p.ops[0].iter_mut() {
        if let OpKind::Kernel(k) = &mut o.kind {
            k.group = good.ops[1].iter().find_map(|o| match &o.kind {
                OpKind::Kernel(k) => k.group.clone(),
                _ => None,
            });
        }
    }
    let e = p.validate().unwrap_err();
    assert!(e.contains("only a rail's all-reduce has a group"), "{e}");
}

/// `hier:G:mpi`'s node reduce-scatter reads the node peers' inputs in
/// place at every size, and out of place from
/// `hier::READS_OUT_OF_PLACE_FROM` bytes (below, the node ring's copies):
/// each plan validates, for N in 2..=8, every G and element size, sizes
/// just below and above the switch and uneven ones.
#[test]
fn hier_mpi_node_phase_reads_its_peers_where_it_pays() {
    let reads_peer = |p: &Plan| {
        p.ops.iter().enumerate().any(|(r, ops)| {
            ops.iter()
                .any(|o| matches!(o.kind, OpKind::Reduce { b_rank, .. } if b_rank != r))
        })
    };
    for n in [2, 3, 4, 6, 8] {
        for g in divisors(n).into_iter().filter(|&g| g > 1) {
            let a = hier::Hier {
                per_node: g,
                rail: hier::Rail::Mpi,
            };
            for es in [1, 2, 4, 8] {
                let at = hier::READS_OUT_OF_PLACE_FROM / es;
                for (count, in_place) in [
                    (at - 1, false),
                    (at, false),
                    (at + 7, false),
                    (17, true),
                    (at + 7, true),
                ] {
                    let s = Shape::all_reduce(n, count, es, in_place);
                    let p = first_plan(&a, &s);
                    p.validate()
                        .unwrap_or_else(|e| panic!("{} {s:?}: {e}", a.name()));
                    let want = in_place || count * es >= hier::READS_OUT_OF_PLACE_FROM;
                    assert_eq!(reads_peer(&p), want, "{} {s:?}", a.name());
                }
            }
        }
    }
}
