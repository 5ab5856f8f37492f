use super::*;

const NV: Link = NVLINK_H200;
const NET: Link = NETWORK_STATED;

fn cluster(nodes: usize, per_node: usize) -> Cluster {
    Cluster {
        nodes,
        per_node,
        intra: NV,
        inter: NET,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The exact terms on 2 nodes of 2 GPUs, 1 MB per GPU.
#[test]
fn exact_terms_small() {
    let c = cluster(2, 2);
    let d = 1e6;
    // Flat ring: N = 4, 6 steps of 250 kB, the network's hop the slower
    // (5 + 250e3/50e3 = 10 us against 13 + 250e3/380e3).
    let step = (5.0 + 250e3 / 50e3f64).max(13.0 + 250e3 / 380e3);
    assert!(close(c.flat_ring_us(d), 6.0 * step));
    // Hier: 2(G-1) = 2 NVLink steps moving 2*1/2*1e6, then 2(K-1) = 2
    // network steps moving 2*1/2*(1e6/2).
    let intra = 2.0 * 13.0 + 1e6 / 380e3;
    let inter = 2.0 * 5.0 + 0.5e6 / 50e3;
    assert!(close(c.hier_us(d), intra + inter));
    // Tree: depth 1, 2 latencies, D/G = 0.5e6 through each NIC on 2
    // nodes, pipelined with the node's ring.
    let node = 1e6 / 380e3f64;
    assert!(close(
        c.tree_us(d),
        2.0 * 13.0 + 2.0 * 5.0 + node.max(0.5e6 / 50e3)
    ));
    // 3 nodes of 4: N = 12; depth ceil(log2 3) = 2.
    let c = cluster(3, 4);
    let intra = 6.0 * 13.0 + 1.5e6 / 380e3;
    assert!(close(
        c.hier_us(d),
        intra + 4.0 * 5.0 + (4.0 / 3.0) * 0.25e6 / 50e3
    ));
    assert!(close(
        c.tree_us(d),
        6.0 * 13.0 + 4.0 * 5.0 + (1.5e6 / 380e3f64).max(0.5e6 / 50e3)
    ));
    let step = (5.0 + 1e6 / 12.0 / 50e3f64).max(13.0 + 1e6 / 12.0 / 380e3);
    assert!(close(c.flat_ring_us(d), 22.0 * step));
}

#[test]
fn tree_depths() {
    let want = [
        (1, 0.0),
        (2, 1.0),
        (3, 2.0),
        (4, 2.0),
        (5, 3.0),
        (128, 7.0),
        (129, 8.0),
    ];
    for (k, d) in want {
        assert_eq!(tree_depth(k), d, "K = {k}");
    }
    assert_eq!(tree_depth(0), 0.0);
}

/// One node: every algorithm is the node's ring.
#[test]
fn one_node_is_the_intra_node_ring() {
    for g in [1, 2, 4, 8] {
        let c = cluster(1, g);
        for d in [0.0, 8.0, 1e6, 1e9] {
            let p = c.project(d);
            let ring = crate::theory::ring_time_us(
                g,
                d,
                &crate::theory::AlphaBeta {
                    alpha_us: NV.alpha_us,
                    link_gbps: NV.gbps,
                },
            );
            assert!(close(p.flat_ring_us, ring), "G = {g}");
            assert!(close(p.hier_us, ring), "G = {g}");
            assert!(close(p.tree_us, ring), "G = {g}");
        }
    }
}

/// One GPU per node: hier is the flat ring over the network.
#[test]
fn one_gpu_per_node_hier_is_the_flat_ring() {
    for k in [2, 3, 16] {
        let c = cluster(k, 1);
        assert!(close(c.hier_us(1e8), c.flat_ring_us(1e8)));
    }
}

/// When the network is slower than NVLink, the hierarchical all-reduce
/// beats the flat ring at every size and node count (it sends D/G of
/// the data over it, the flat ring all of it, and takes fewer network
/// steps); with a network as fast as NVLink and as quick, they differ
/// only by the steps taken.
#[test]
fn hier_beats_the_flat_ring_when_the_network_is_slower() {
    for g in [2, 4, 8] {
        for k in [2, 4, 16, 128] {
            for d in [1e3, 1e6, 1e9] {
                let c = cluster(k, g);
                assert!(c.hier_us(d) < c.flat_ring_us(d), "K={k} G={g} D={d}");
            }
        }
    }
}

/// The tree wins where latency dominates (many nodes, small sizes),
/// the pipelined rings where bandwidth does (large sizes): hier's
/// network bytes 2(K-1)/K·D/G are below the tree's 2·D/G. Unpipelined,
/// hier pays both phases' bytes and falls behind the tree.
#[test]
fn tree_wins_small_hier_wins_large() {
    let c = cluster(128, 8);
    let among = |p: Projection| {
        least(&[
            ("ring", p.flat_ring_us),
            ("hier:pipe", p.hier_pipe_us),
            ("tree", p.tree_us),
        ])
    };
    assert_eq!(among(c.project(1e3)), "tree");
    assert_eq!(among(c.project(1e11)), "hier:pipe");
    assert_eq!(among(cluster(16, 8).project(1e10)), "hier:pipe");
    assert!(c.tree_us(1e11) < c.hier_us(1e11));
    // An exact tie says so, whichever comes first.
    let tie = Projection {
        flat_ring_us: 5.0,
        hier_us: 5.0,
        tree_us: 5.0,
        nic_rings_us: 5.0,
        hier_pipe_us: 5.0,
        in_network_us: 5.0,
    };
    assert_eq!(tie.fastest(), "tie: ring, hier");
    assert_eq!(
        tie.fastest_priced(),
        "tie: ring, hier, ring:nics, hier:pipe, tree"
    );
    let two = Projection {
        flat_ring_us: 9.0,
        ..tie
    };
    assert_eq!(two.fastest(), "hier");
    // On two nodes both pay the same latencies (a tree of depth 1 is
    // the rail's ring of 2): at 1 kB they differ by bytes alone.
    let c = cluster(2, 8);
    assert!((c.hier_us(1e3) - c.tree_us(1e3)).abs() < 0.1);
}

/// The rings over every NIC: on one node the node's ring; with one GPU
/// per node the flat ring; past one node, the flat ring's network hop
/// carries `G` times less, so large all-reduces approach `G` NICs'
/// worth of bus bandwidth (or NVLink's, whichever is less), as NCCL's
/// published runs do (8 x 400 Gb/s: about 8 x 50 GB/s, bounded by
/// NVLink's 380 here).
#[test]
fn rings_over_every_nic() {
    for g in [1, 2, 8] {
        assert!(close(
            cluster(1, g).nic_rings_us(1e8),
            cluster(1, g).flat_ring_us(1e8)
        ));
    }
    for k in [2, 16] {
        assert!(close(
            cluster(k, 1).nic_rings_us(1e8),
            cluster(k, 1).flat_ring_us(1e8)
        ));
    }
    let c = cluster(2, 8);
    let d = 8e9;
    // 2(N-1) = 30 steps of max(13 + 5e8/380e3, 5 + 6.25e7/50e3) us.
    let step = (13.0 + d / 16.0 / 380e3f64).max(5.0 + d / 128.0 / 50e3);
    assert!(close(c.nic_rings_us(d), 30.0 * step));
    let bw = busbw_gbps(16, d, c.nic_rings_us(d));
    assert!(bw > 350.0 && bw < 380.0, "{bw}");
    assert!(c.nic_rings_us(d) < c.flat_ring_us(d) / 5.0);
}

/// Pipelining hier's phases pays every latency but only the slower
/// phase's bytes: never slower than hier, and at large sizes as fast as
/// its slower phase alone.
#[test]
fn hier_pipelined_pays_the_slower_phase() {
    for (k, g) in [(2, 8), (4, 4), (16, 8), (1, 8), (8, 1)] {
        for d in [0.0, 1e3, 1e6, 1e9] {
            let c = cluster(k, g);
            assert!(
                c.hier_pipe_us(d) <= c.hier_us(d) * (1.0 + 1e-12),
                "K={k} G={g} D={d}"
            );
        }
    }
    let c = cluster(2, 8);
    let d = 1e9;
    let latency = 14.0 * 13.0 + 2.0 * 5.0;
    let node = 2.0 * 7.0 / 8.0 * d / 380e3;
    let rail = d / 8.0 / 50e3;
    assert!(close(c.hier_pipe_us(d), latency + node.max(rail)));
}

/// The what-if of reduction in the switches: `D` once each way per GPU,
/// `D/G` per NIC, one latency of each link; nothing on one GPU.
#[test]
fn in_network_reduction_sends_each_byte_once() {
    assert_eq!(cluster(1, 1).in_network_us(1e6), 0.0);
    assert!(close(cluster(1, 8).in_network_us(1e9), 13.0 + 1e9 / 380e3));
    assert!(close(
        cluster(4, 8).in_network_us(1e9),
        18.0 + (1e9 / 380e3f64).max(1e9 / 8.0 / 50e3)
    ));
    assert!(close(cluster(4, 1).in_network_us(1e9), 5.0 + 1e9 / 50e3));
    assert!(close(busbw_gbps(2, 1e9, 1e3), 1000.0));
}

#[test]
fn render_names_every_assumption() {
    let t = render(1e8, "100MB", 8, &[1, 2, 128], NV, NET, "default");
    for w in [
        "assumes",
        "rail",
        "free",
        "double binary tree",
        "ring:nics",
        "what-if",
        "| 128 | 1024 |",
    ] {
        assert!(t.contains(w), "{w}: {t}");
    }
    assert_eq!(t.lines().filter(|l| l.starts_with("| ")).count(), 5);
}

/// Why `auto` takes `hier:G` over nodes of GPUs without pricing each call
/// (`algo::AlgoChoice::resolve_in`; on host memory it takes `hier:G:mpi`,
/// by measurement): under this model the hierarchical
/// all-reduce is never slower than the flat ring, whatever the links,
/// the layout or the size. The flat ring's `2(KG-1)` rounds are at
/// least `2(G-1) + 2(K-1)`, each paced by the slower link, and its
/// bytes through a link, `2(KG-1)/(KG)·D`, at least the node ring's
/// `2(G-1)/G·D` plus the rail's `2(K-1)/K·D/G`.
#[test]
fn the_hierarchical_all_reduce_is_never_slower_than_the_flat_ring() {
    let links = [
        NVLINK_H200,
        NETWORK_STATED,
        Link {
            alpha_us: 50.0,
            gbps: 10.0,
        },
        Link {
            alpha_us: 0.5,
            gbps: 900.0,
        },
    ];
    for intra in links {
        for inter in links {
            for (nodes, per_node) in [(1, 8), (2, 1), (2, 2), (2, 8), (4, 4), (128, 8), (16, 2)] {
                for d in [0.0, 8.0, 4096.0, 1e6, 64e6, 1e9] {
                    let c = Cluster {
                        nodes,
                        per_node,
                        intra,
                        inter,
                    };
                    let (flat, hier) = (c.flat_ring_us(d), c.hier_us(d));
                    assert!(
                            hier <= flat * (1.0 + 1e-12),
                            "K={nodes} G={per_node} D={d} {intra:?} {inter:?}: hier {hier} > flat {flat}"
                        );
                }
            }
        }
    }
}
