use super::*;
use approx::{assert_abs_diff_eq, assert_relative_eq};

const D: f64 = 100e6;

fn mb1(bytes: f64) -> String {
    format!("{:.1}", bytes / MB)
}

/// A small `D` prints in kB or bytes, never as `0.1 MB` (64 KiB printed
/// 0.1 MB for the ring at every N).
#[test]
fn small_sizes_keep_their_digits() {
    let m = AlphaBeta {
        alpha_us: 5.0,
        link_gbps: 25.0,
    };
    let out = render(65536.0, "64KiB", &[4], &Pricing::of(m.into()));
    assert!(
        out.contains("Ring per rank sent (kB)") && out.contains(" 98.3 |"),
        "{out}"
    );
    assert!(
        out.contains("196.6") && out.contains("2D = 131.1 kB"),
        "{out}"
    );
    let out = render(8.0, "8B", &[2], &Pricing::of(m.into()));
    assert!(out.contains("(B)") && out.contains("2D = 16.0 B"), "{out}");
    let out = render(1048576.0, "1MiB", &[2], &Pricing::of(m.into()));
    assert!(out.contains("(MB)") && out.contains("2D = 2.1 MB"), "{out}");
}

#[test]
fn seed_table_numbers() {
    let rows = load_table(D, &[4, 16, 64]);
    let got: Vec<(usize, String, String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.ranks,
                mb1(r.ps_root_in_bytes),
                mb1(r.ps_root_out_bytes),
                mb1(r.ring_per_rank_sent_bytes),
                mb1(r.ring_per_rank_recv_bytes),
            )
        })
        .collect();
    let want = [
        (4, "300.0", "300.0", "150.0", "150.0"),
        (16, "1500.0", "1500.0", "187.5", "187.5"),
        (64, "6300.0", "6300.0", "196.9", "196.9"),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want.iter()) {
        assert_eq!(g.0, w.0);
        assert_eq!((g.1.as_str(), g.2.as_str()), (w.1, w.2));
        assert_eq!((g.3.as_str(), g.4.as_str()), (w.3, w.4));
    }
    // Exact values (all representable).
    assert_eq!(ps_root_bytes(4, D), 300e6);
    assert_eq!(ring_per_rank_bytes(4, D), 150e6);
    assert_eq!(ring_per_rank_bytes(16, D), 187.5e6);
    assert_eq!(ring_per_rank_bytes(64, D), 196.875e6);
}

#[test]
fn render_contains_seed_numbers() {
    let m = AlphaBeta {
        alpha_us: 5.0,
        link_gbps: 25.0,
    };
    let out = render(D, "100 MB", &[4, 16, 64], &Pricing::of(m.into()));
    for needle in [
        "300.0",
        "150.0",
        "1500.0",
        "187.5",
        "6300.0",
        "196.9",
        "O(N)",
        "2D = 200.0 MB",
    ] {
        assert!(out.contains(needle), "missing {needle} in:\n{out}");
    }
    assert!(out.is_ascii());
    // Ring wins at every N > 1 for a large message.
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" ring")).count(),
        3,
        "{out}"
    );
    // Explanation paragraph is at most 6 lines, between the title and the table.
    let para: Vec<&str> = out
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(!para.is_empty() && para.len() <= 6);
}

#[test]
fn ring_limit_is_2d() {
    let r = ring_per_rank_bytes(1_000_000, D);
    assert_relative_eq!(r, 2.0 * D, max_relative = 1e-4);
    assert!(r < 2.0 * D);
}

#[test]
fn single_rank_has_no_traffic() {
    let m = AlphaBeta {
        alpha_us: 5.0,
        link_gbps: 25.0,
    };
    let row = load_table(D, &[1])[0];
    assert_eq!(row.ps_root_in_bytes, 0.0);
    assert_eq!(row.ps_root_out_bytes, 0.0);
    assert_eq!(row.ring_per_rank_sent_bytes, 0.0);
    assert_eq!(row.ring_per_rank_recv_bytes, 0.0);
    assert_eq!(ring_time_us(1, D, &m), 0.0);
    assert_eq!(ps_time_us(1, D, &m), 0.0);
    assert_eq!(ring_per_rank_bytes(0, D), 0.0);
    assert_eq!(ps_root_bytes(0, D), 0.0);
}

#[test]
fn alpha_beta_times() {
    let m = AlphaBeta {
        alpha_us: 10.0,
        link_gbps: 100.0,
    };
    // N=4, D=100 MB, B=100 GB/s: D/B = 1000 us.
    // ring: 6*10 + 1.5*1000 = 1560; PS, two rounds: 2*10 + 6*1000 = 6020.
    assert_abs_diff_eq!(ring_time_us(4, D, &m), 1560.0, epsilon = 1e-9);
    assert_abs_diff_eq!(ps_time_us(4, D, &m), 6020.0, epsilon = 1e-9);
    // N=2: ring 2*10 + 1000; PS 2*10 + 2000.
    assert_abs_diff_eq!(ring_time_us(2, D, &m), 1020.0, epsilon = 1e-9);
    assert_abs_diff_eq!(ps_time_us(2, D, &m), 2020.0, epsilon = 1e-9);
}

#[test]
fn fit_recovers_the_model() {
    let m = AlphaBeta {
        alpha_us: 7.5,
        link_gbps: 320.0,
    };
    let pts: Vec<(usize, f64, f64)> = (10..=28)
        .map(|k| {
            let d = (1u64 << k) as f64;
            (4, d, ring_time_us(4, d, &m))
        })
        .collect();
    let f = fit_ring(&pts).unwrap();
    assert_abs_diff_eq!(f.alpha_us, 7.5, epsilon = 1e-6);
    assert_abs_diff_eq!(f.link_gbps, 320.0, epsilon = 1e-6);
    // Latency only: alpha from the small sizes, a huge bandwidth.
    assert_eq!(fit_ring(&pts[..1]).err(), Some(NoFit::OneSize));
    assert_eq!(fit_ring(&[]).err(), Some(NoFit::OneSize));
    assert_eq!(
        fit_ring(&[(2, 8.0, 10.0), (2, 8.0, 11.0)]).err(),
        Some(NoFit::OneSize)
    );
    // Times that fall as the bytes grow: no per-byte term, and fit
    // says so (bench --breakdown reports such a path as not fitted).
    let falling = [
        (2, 1024.0, 124.0),
        (2, 4096.0, 112.0),
        (2, 16384.0, 64.0),
        (2, 65536.0, 79.0),
    ];
    assert_eq!(fit_ring(&falling).err(), Some(NoFit::NoPerByteTerm));
    assert_eq!(
        fit(Cost::OneShot, &falling).err(),
        Some(NoFit::NoPerByteTerm)
    );
    assert_eq!(
        fit(Cost::OneShot, &falling[..1]).err(),
        Some(NoFit::OneSize)
    );
    // Data that would need a negative alpha: alpha clamps to 0.
    let f = fit_ring(&[(2, 1e6, 1.0), (2, 2e6, 4.0)]).unwrap();
    assert_eq!(f.alpha_us, 0.0);
    assert!(f.link_gbps > 0.0);
}

/// The PS pays two rounds and the ring 2(N-1): with a latency that
/// matters, the PS wins small sizes, the ring large ones, and they
/// cross where the times are equal.
#[test]
fn the_ps_wins_below_the_crossover_and_the_ring_above() {
    let p = Pricing::of(Model {
        alpha_us: 10.0,
        link_gbps: 370.0,
        reduce_gbps: 1000.0,
    });
    let ring = Cost::Ring { slices: 1 };
    let mib = 1048576.0;
    assert!(p.time_us(Cost::ParameterServer, 4, mib) < p.time_us(ring, 4, mib));
    assert!(p.time_us(Cost::ParameterServer, 4, 64.0 * mib) > p.time_us(ring, 4, 64.0 * mib));
    let x = p.crossover(Cost::ParameterServer, ring, 4).unwrap();
    let (a, b) = (
        p.time_us(Cost::ParameterServer, 4, x),
        p.time_us(ring, 4, x),
    );
    assert_relative_eq!(a, b, max_relative = 1e-9);
    assert!(x > mib && x < 64.0 * mib, "{x}");
    // On 2 ranks both pay two rounds: the ring wins at every size.
    assert_eq!(p.crossover(Cost::ParameterServer, ring, 2), None);
    // Free latency: the ring wins everywhere.
    let free = Pricing::of(Model {
        alpha_us: 0.0,
        ..p.model
    });
    assert_eq!(free.crossover(Cost::ParameterServer, ring, 4), None);
}

/// `theory --size 1kB` no longer prints ties labelled ring: the PS is
/// faster at small sizes, and the table names it.
#[test]
fn render_names_the_fastest_and_the_crossover() {
    let p = Pricing::of(Model {
        alpha_us: 10.0,
        link_gbps: 370.0,
        reduce_gbps: 1000.0,
    });
    // Two ranks at 1 kB: both are two rounds of alpha and the bytes
    // are nothing; the ratio prints 1.00x, and neither is named.
    let two = render(1e3, "1kB", &[2], &p);
    let row = two
        .lines()
        .rfind(|l| l.trim_start().starts_with('2') && l.matches('|').count() == 5)
        .unwrap_or_default();
    assert!(row.contains("1.00x") && row.ends_with(" tie"), "{two}");
    let out = render(1e3, "1kB", &[1, 4, 16], &p);
    // The time table's rows: a rank count, then six more columns.
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .filter(|l| l.matches('|').count() == 5)
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows[0].ends_with(" tie"), "{}", rows[0]);
    assert!(rows[1].ends_with(" PS"), "{}", rows[1]);
    assert!(rows[1].contains(" MB |"), "a crossover size: {}", rows[1]);
    assert!(rows[2].ends_with(" PS"), "{}", rows[2]);
    assert!(!out.contains("winner: ring"));
}

/// A fitted path is priced by its fit, the others by the model.
#[test]
fn pricing_prefers_a_paths_fit() {
    let model = Model {
        alpha_us: 10.0,
        link_gbps: 100.0,
        reduce_gbps: f64::INFINITY,
    };
    let f = Fit {
        cost: Cost::ParameterServer,
        alpha_us: 1.0,
        link_gbps: 1000.0,
        overlap: 0.0,
    };
    let p = Pricing {
        model,
        fits: vec![f],
    };
    assert_abs_diff_eq!(
        p.time_us(Cost::ParameterServer, 2, 1e6),
        2.0 + 2.0,
        epsilon = 1e-9
    );
    assert_abs_diff_eq!(
        p.time_us(Cost::OneShot, 2, 1e6),
        10.0 + 10.0,
        epsilon = 1e-9
    );
}

/// The fit recovers each cost's own parameters from its own times.
#[test]
fn fit_recovers_every_cost() {
    let m = Model {
        alpha_us: 6.5,
        link_gbps: 250.0,
        reduce_gbps: f64::INFINITY,
    };
    for c in [
        Cost::Ring { slices: 1 },
        Cost::Ring { slices: 4 },
        Cost::ParameterServer,
        Cost::OneShot,
    ] {
        let pts: Vec<(usize, f64, f64)> = (10..=28)
            .map(|k| {
                let d = (1u64 << k) as f64;
                (4, d, m.time_us(c, 4, d))
            })
            .collect();
        let f = fit(c, &pts).unwrap();
        assert_eq!(f.cost, c);
        assert_abs_diff_eq!(f.alpha_us, 6.5, epsilon = 1e-6);
        assert_abs_diff_eq!(f.link_gbps, 250.0, epsilon = 1e-6);
        assert_relative_eq!(f.time_us(4, 1e6), m.time_us(c, 4, 1e6), max_relative = 1e-9);
    }
}

/// Times from an overlapped model (the latency of the rounds partly
/// hidden under the transfer) give back its overlap and parameters.
#[test]
fn fit_recovers_an_overlap() {
    for (c, o) in [
        (Cost::Ring { slices: 1 }, 0.8),
        (Cost::Ring { slices: 2 }, 1.0),
        (Cost::ParameterServer, 0.4),
        (Cost::OneShot, 0.95),
    ] {
        let truth = Fit {
            cost: c,
            alpha_us: 12.0,
            link_gbps: 300.0,
            overlap: o,
        };
        let pts: Vec<(usize, f64, f64)> = (12..=28)
            .map(|k| {
                let d = (1u64 << k) as f64;
                (4, d, truth.time_us(4, d))
            })
            .collect();
        let f = fit(c, &pts).unwrap();
        assert_abs_diff_eq!(f.overlap, o, epsilon = 1e-9);
        assert_relative_eq!(f.alpha_us, 12.0, max_relative = 1e-3);
        assert_relative_eq!(f.link_gbps, 300.0, max_relative = 1e-3);
    }
}

/// A path whose time stays flat up to a knee and then grows with the
/// size (what one GPU shows): the sum misses the knee by more than a
/// quarter, the overlapped fit does not.
#[test]
fn the_overlap_draws_the_knee_the_sum_misses() {
    let ring = Cost::Ring { slices: 1 };
    // 40 us flat, then 300 GB/s per link direction (2 ranks: D bytes).
    let pts: Vec<(usize, f64, f64)> = (16..=28)
        .map(|k| {
            let d = (1u64 << k) as f64;
            (2, d, (d / 300e3).max(40.0))
        })
        .collect();
    let worst = |f: &dyn Fn(f64) -> f64| {
        pts.iter()
            .filter(|p| p.1 >= 1048576.0)
            .map(|&(_, d, t)| (f(d) / t - 1.0).abs())
            .fold(0.0, f64::max)
    };
    let sum = fit_ring(&pts).unwrap();
    assert!(worst(&|d| ring_time_us(2, d, &sum)) > 0.25);
    let f = fit(ring, &pts).unwrap();
    assert!(f.overlap > 0.9, "{f:?}");
    assert!(worst(&|d| f.time_us(2, d)) < 0.05, "{f:?}");
}

/// The crossover of two fits that are not affine in the size is still
/// where their times are equal.
#[test]
fn crossover_of_overlapped_fits() {
    let fit_of = |cost, alpha_us, link_gbps| Fit {
        cost,
        alpha_us,
        link_gbps,
        overlap: 0.9,
    };
    let ring = Cost::Ring { slices: 1 };
    let p = Pricing {
        model: Model {
            alpha_us: 10.0,
            link_gbps: 300.0,
            reduce_gbps: f64::INFINITY,
        },
        fits: vec![
            fit_of(Cost::ParameterServer, 12.0, 1000.0),
            fit_of(ring, 15.0, 300.0),
        ],
    };
    let x = p.crossover(Cost::ParameterServer, ring, 4).unwrap();
    assert_relative_eq!(
        p.time_us(Cost::ParameterServer, 4, x),
        p.time_us(ring, 4, x),
        max_relative = 1e-9
    );
    assert!(p.time_us(Cost::ParameterServer, 4, x / 2.0) < p.time_us(ring, 4, x / 2.0));
    assert!(p.time_us(Cost::ParameterServer, 4, x * 2.0) > p.time_us(ring, 4, x * 2.0));
}
