use super::*;

const SIZES: [f64; 5] = [1.0, 8.0, 4096.0, 1e6, 1.5e9];

fn model() -> Model {
    Model {
        alpha_us: 13.0,
        link_gbps: 380.0,
        reduce_gbps: 1400.0,
    }
}

#[test]
fn one_rank_exchanges_nothing() {
    for a in Algo::ALL {
        for n in [0, 1] {
            let t = a.terms(n, 1e6);
            assert_eq!(
                (t.rounds, t.link_bytes, t.reduce_bytes),
                (0.0, 0.0, 0.0),
                "{a:?}"
            );
        }
    }
}

#[test]
fn the_engines_paths_cost_what_bench_fits() {
    for n in 2..=64 {
        for d in SIZES {
            assert_eq!(Algo::Ring.terms(n, d), Cost::Ring { slices: 1 }.terms(n, d));
            assert_eq!(Algo::Ps.terms(n, d), Cost::ParameterServer.terms(n, d));
            assert_eq!(Algo::OneShot.terms(n, d), Cost::OneShot.terms(n, d));
        }
    }
}

#[test]
fn without_a_reducing_switch_no_rank_sends_less_than_the_lower_bound() {
    for n in 2..=130 {
        for d in SIZES {
            let bound = 2.0 * (n as f64 - 1.0) / n as f64 * d;
            for a in Algo::ALL {
                let sent = a.terms(n, d).link_bytes;
                if a.needs_reducing_switch() {
                    assert_eq!(sent, d, "{a:?} sends D once");
                } else {
                    assert!(
                        sent >= bound * (1.0 - 1e-12),
                        "{a:?} N={n}: {sent} < {bound}"
                    );
                }
            }
        }
    }
    // The ring, the sharded PS / two-shot and Rabenseifner (N a power of
    // two) reach it.
    for n in [2, 4, 16, 64] {
        let bound = 2.0 * (n as f64 - 1.0) / n as f64;
        for a in [
            Algo::Ring,
            Algo::PsSharded,
            Algo::TwoShot,
            Algo::Rabenseifner,
        ] {
            assert!(
                (a.terms(n, 1.0).link_bytes - bound).abs() < 1e-12,
                "{a:?} N={n}"
            );
        }
    }
}

#[test]
fn the_literatures_costs_at_known_points() {
    let d = 1.0;
    // Rabenseifner on 16 ranks: 2 lg 16 = 8 rounds, 15/8 D sent, 15/16 D reduced.
    let r = Algo::Rabenseifner.terms(16, d);
    assert_eq!(
        (r.rounds, r.link_bytes, r.reduce_bytes),
        (8.0, 15.0 / 8.0, 15.0 / 16.0)
    );
    // Recursive doubling on 8: 3 rounds of D.
    let r = Algo::RecursiveDoubling.terms(8, d);
    assert_eq!((r.rounds, r.link_bytes, r.reduce_bytes), (3.0, 3.0, 3.0));
    // On 6 (not a power of two): the fold onto 4 (2 rounds of D) plus a
    // round in and a round out.
    let r = Algo::RecursiveDoubling.terms(6, d);
    assert_eq!((r.rounds, r.link_bytes, r.reduce_bytes), (4.0, 4.0, 3.0));
    let r = Algo::Rabenseifner.terms(6, d);
    assert_eq!(
        (r.rounds, r.link_bytes, r.reduce_bytes),
        (6.0, 2.0 + 1.5, 1.0 + 0.75)
    );
    // The single-port PS pays N-1 rounds each way; the N-port PS two.
    assert_eq!(Algo::PsSinglePort.terms(8, d).rounds, 14.0);
    assert_eq!(Algo::Ps.terms(8, d).rounds, 2.0);
    // The double binary tree: every rank sends 2D (D/2 up and D down in
    // the tree where it is inner, D/2 up in the other), 2 lg N deep.
    let r = Algo::DoubleBinaryTree.terms(8, d);
    assert_eq!((r.rounds, r.link_bytes, r.reduce_bytes), (6.0, 2.0, 1.0));
    // A chain of 8: 14 hops deep.
    assert_eq!(Algo::Chain.terms(8, d).rounds, 14.0);
}

#[test]
fn small_calls_go_to_one_round_and_large_ones_to_the_lower_bound() {
    let m = model();
    for n in [2, 4, 8, 64] {
        let small = fastest(&m, n, 8.0);
        assert!(small.contains(&Algo::OneShot), "N={n}: {small:?}");
        let large = fastest(&m, n, 1e10);
        let bound = 2.0 * (n as f64 - 1.0) / n as f64;
        assert!(
            large
                .iter()
                .all(|a| (a.terms(n, 1.0).link_bytes - bound).abs() < 1e-12),
            "N={n}: {large:?}"
        );
    }
    // At N = 2 the ring, Rabenseifner, the sharded PS and the two-shot are
    // one exchange: all tie.
    let two = fastest(&m, 2, 1e10);
    for a in [
        Algo::Ring,
        Algo::Rabenseifner,
        Algo::PsSharded,
        Algo::TwoShot,
    ] {
        assert!(two.contains(&a), "{two:?}");
    }
    // A reducing switch is never a winner (no machine here has one).
    for d in SIZES {
        assert!(!fastest(&m, 8, d).contains(&Algo::InNetwork));
    }
}

#[test]
fn the_catalog_prices_every_algorithm_and_names_the_fastest() {
    let mut s = String::new();
    render(&mut s, 1048576.0, "1MiB", &[2, 4, 8], &model());
    for a in Algo::ALL {
        assert!(s.contains(a.name()), "{a:?} missing:\n{s}");
        assert!(s.contains(a.formula()), "{a:?}'s formula missing");
        assert!(s.contains(a.assumption()), "{a:?}'s assumption missing");
    }
    // 1 MiB is one of the winners' rows, once.
    assert_eq!(s.matches("\n      1MiB |").count(), 1, "{s}");
    let mut one = String::new();
    render(&mut one, 8.0, "8B", &[1], &model());
    assert!(one.contains("one rank exchanges nothing"));
}
