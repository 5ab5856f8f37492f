use super::*;

fn point(algo: &str, ranks: usize, traffic: Vec<Traffic>) -> Point {
    let a = ringreduce::algo::parse(algo).unwrap();
    Point {
        ranks,
        algo: algo.into(),
        path: a.name(),
        load: a.load(),
        traffic,
        time_us: 5.0,
    }
}

#[test]
fn formulas() {
    let t = |sent, received| Traffic {
        sent,
        received,
        network: 0,
    };
    assert_eq!(
        point("ps", 4, vec![]).formula(4, 100),
        Some(("(N-1)·D", 300.0))
    );
    assert_eq!(
        point("ring:pipe2", 4, vec![]).formula(4, 100),
        Some(("2(N-1)/N·D", 150.0))
    );
    let p = point("ps", 3, vec![t(20, 20), t(10, 10), t(10, 10)]);
    assert_eq!(p.busiest(), (0, 20, 20));
    let tie = Point {
        traffic: vec![t(5, 5); 3],
        ..p.clone()
    };
    assert_eq!(tie.busiest(), (0, 5, 5));
    assert_eq!(p.others(), Some((10, 10)));
    let where_ = "cuda: 4 ranks on 1 GPUs";
    let svg = plot(&[p.clone(), Point { ranks: 4, ..p }], 10, where_).unwrap();
    assert!(svg.contains("<svg") && svg.contains("ps: measured") && svg.contains(where_));
}

/// The formula beside each path's counted bytes is its algorithm's
/// (issue 26: it was picked by the name's prefix, and the one-shots got
/// the ring's), and it is what the path's plan moves.
#[test]
fn traffic_comes_from_the_algorithm() {
    let d: u64 = 1 << 20;
    let count = (d / 4) as usize;
    let mut checked = 0;
    for a in ringreduce::algo::paths() {
        for n in [2, 3, 4, 8] {
            let shape = Shape::all_reduce(n, count, 4, false);
            if a.supports(&shape).is_err() {
                continue;
            }
            let load = a
                .load()
                .unwrap_or_else(|| panic!("{} has no load", a.name()));
            let plan = a.path(&shape).next(false).unwrap();
            let p = point(&a.name(), n, plan.traffic());
            let (_, s, r) = p.busiest();
            let (_, f) = p.formula(n, d).unwrap();
            assert!(
                (s.max(r) as f64 - f).abs() <= 16.0 * 2.0 * n as f64,
                "{} at N = {n}: the plan moves {s}/{r}, {load:?} says {f}",
                a.name()
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked}");
    let load = |s: &str| ringreduce::algo::parse(s).unwrap().load();
    assert_eq!(load("ps"), Some(Load::Root));
    for s in ["ring", "ring:naive", "ring:pipe4", "ring:flag"] {
        assert_eq!(load(s), Some(Load::Ring), "{s}");
    }
    for s in ["oneshot", "oneshot:fused", "oneshot:flag"] {
        assert_eq!(load(s), Some(Load::Everyone), "{s}");
    }
}
