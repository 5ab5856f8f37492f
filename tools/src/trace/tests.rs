use super::*;

fn shape(coll: Collective, n: usize, count: usize) -> Shape {
    Shape {
        collective: coll,
        ranks: n,
        count,
        elem_size: 4,
        in_place: false,
    }
}

fn t(algo: &str, s: Shape) -> String {
    let c: AlgoChoice = algo.parse().unwrap();
    render(&c, &s, DataType::Float, ReduceOp::Sum).unwrap()
}

#[test]
fn ring_trace_ends_complete() {
    let out = t("ring", shape(Collective::AllReduce, 4, 8));
    assert!(out.starts_with("ring: all-reduce"), "{out}");
    // Steps count from 0, as in the formulas and the timeline labels.
    assert!(out.contains("reduce-scatter step 0 (steps 0-2):"), "{out}");
    assert!(!out.contains("step 3"), "{out}");
    assert!(out.contains("PASS"));
    let tail = out.split("all-gather step 2 (steps 0-2):").nth(1).unwrap();
    let table: Vec<&str> = tail
        .lines()
        .filter(|l| l.starts_with("  rank ") && l.contains('|'))
        .collect();
    assert_eq!(table.len(), 4);
    assert!(
        table.iter().all(|l| l.matches("ALL").count() == 4),
        "{tail}"
    );
    // The last step gives every rank exactly one chunk: one mark a row.
    assert!(table.iter().all(|l| l.matches('*').count() == 1), "{tail}");
    // The start table marks nothing.
    let start = out.split("Start:").nth(1).unwrap();
    let start = start.split("reduce-scatter").next().unwrap();
    assert!(!start.contains('*'), "{start}");
}

#[test]
fn pipelined_trace_shows_slices_once() {
    let out = t("ring:pipe2", shape(Collective::AllReduce, 2, 16));
    assert!(out.starts_with("ring:pipe2:"), "{out}");
    // One line per chunk listing both slices, not one line per slice.
    let step = out
        .split("reduce-scatter step 0 (the only step):")
        .nth(1)
        .unwrap();
    let copies: Vec<&str> = step
        .lines()
        .take_while(|l| !l.starts_with("        |"))
        .filter(|l| l.contains("->"))
        .collect();
    assert_eq!(copies.len(), 2, "{step}");
    assert!(copies[0].matches('[').count() == 2, "{step}");
    let plain = t("ring", shape(Collective::AllReduce, 2, 16));
    assert_ne!(plain.replace("ring:", ""), out.replace("ring:pipe2:", ""));
}

#[test]
fn pipelined_trace_draws_slices_against_time() {
    let out = t("ring:pipe2", shape(Collective::AllReduce, 2, 16));
    let view = out.split("Slices x time on rank 0").nth(1).unwrap();
    let row = |name: &str| -> String {
        view.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}: {view}"))
            .split('|')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect()
    };
    // Slice 1 moves while slice 0 is reduced: that overlap is the point.
    assert_eq!(row("copy   RS0 c0.0"), "C...");
    assert_eq!(row("copy   RS0 c0.1"), ".C..");
    assert_eq!(row("reduce RS0 c1.0"), ".R..");
    assert_eq!(row("reduce RS0 c1.1"), "..R.");
    assert_eq!(row("copy   AG0 c1.1"), "...C");
    assert!(
        view.contains("ends at 4 units") && view.contains("ends at 6."),
        "{view}"
    );
    // The plain ring has no slices and no such view.
    let plain = t("ring", shape(Collective::AllReduce, 4, 8));
    assert!(!plain.contains("Slices x time"), "{plain}");
}

#[test]
fn other_algorithms_and_collectives() {
    for algo in ["ps", "oneshot", "oneshot:fused", "oneshot:flag", "auto"] {
        for (n, c) in [(2, 3), (1, 4), (4, 8)] {
            if algo == "oneshot:flag" && n > 2 {
                continue;
            }
            let out = t(algo, shape(Collective::AllReduce, n, c));
            assert!(out.contains("PASS"), "{algo} {n} {c}: {out}");
        }
    }
    for coll in [Collective::ReduceScatter, Collective::AllGather] {
        for (n, c) in [(4, 3), (3, 1), (1, 2)] {
            let out = t("ring", shape(coll, n, c));
            assert!(out.contains("PASS") && out.contains(coll.name()), "{out}");
        }
    }
    let ps = t("ps", shape(Collective::AllReduce, 4, 8));
    assert!(ps.contains("gather:") && ps.contains("broadcast:"), "{ps}");
    assert!(
        ps.contains("rank 0: sent     96 B, received     96 B"),
        "{ps}"
    );
}

#[test]
fn limits() {
    let c = AlgoChoice::Auto;
    assert!(render(
        &c,
        &shape(Collective::AllReduce, 17, 4),
        DataType::Float,
        ReduceOp::Sum
    )
    .is_err());
    assert!(render(
        &c,
        &shape(Collective::AllReduce, 4, 5000),
        DataType::Float,
        ReduceOp::Sum
    )
    .is_err());
}
