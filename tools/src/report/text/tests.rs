use super::super::fixtures::*;
use super::*;

/// Width of every nccl-tests table line (without an appended path).
const TABLE_WIDTH: usize = 116;

fn combo() -> Combo {
    Combo::of(&report().rows[0])
}

#[test]
fn nccl_layout_exact() {
    let lines = nccl_header_lines();
    assert_eq!(
            lines[0],
            "#                                                              out-of-place                       in-place          "
        );
    assert_eq!(
            lines[1],
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
        );
    assert_eq!(
            lines[2],
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
        );
    let r = Row {
        algo: "nccl".into(),
        path: None,
        ranks: 2,
        size: 8,
        count: 2,
        collective: ALL_REDUCE,
        dtype: ringreduce::element::DataType::Float,
        redop: Some(ringreduce::element::ReduceOp::Sum),
        out_of_place: Some(Measurement::new(ALL_REDUCE, 8, 2, 18.47, Some(0))),
        in_place: Some(Measurement::new(ALL_REDUCE, 8, 2, 18.29, Some(0))),
    };
    assert_eq!(
            nccl_data_line(&r),
            "           8             2     float     sum      -1    18.47    0.00    0.00      0    18.29    0.00    0.00      0"
        );
}

/// (end column, token) of every whitespace-separated token except a leading '#'.
fn token_ends(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line
        .char_indices()
        .chain(std::iter::once((line.len(), ' ')))
    {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push((i, &line[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out.into_iter().filter(|(_, t)| *t != "#").collect()
}

#[test]
fn rendered_table_aligns_under_titles() {
    let rep = report();
    let table = rep.render_algo_table(&combo(), "nccl");
    let lines: Vec<&str> = table.lines().collect();
    let hdr = lines
        .iter()
        .position(|l| l.contains("out-of-place"))
        .unwrap_or(usize::MAX);
    assert!(hdr < lines.len(), "{table}");
    let titles = token_ends(lines[hdr + 1]);
    assert_eq!(titles.len(), 13);
    let data: Vec<&str> = lines[hdr + 3..]
        .iter()
        .copied()
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(data.len(), 3, "{table}");
    for l in &lines[hdr..hdr + 3] {
        assert_eq!(l.len(), TABLE_WIDTH);
    }
    for d in &data {
        assert_eq!(d.len(), TABLE_WIDTH, "{d:?}");
        let toks = token_ends(d);
        assert_eq!(toks.len(), 13, "{d:?}");
        for (t, h) in toks.iter().zip(&titles) {
            assert_eq!(t.0, h.0, "{:?} not under {:?}", t.1, h.1);
        }
    }
    // Time formats switch like nccl-tests; unchecked in-place prints N/A.
    assert!(data[1].contains("   150.0 "), "{}", data[1]);
    assert!(data[2].contains("   2740.0 "), "{}", data[2]);
    assert!(data[0].ends_with("  N/A"));
    assert!(table.starts_with("# algo: nccl\n"));
    assert!(table.contains("# Out of bounds values : 0 OK\n"));
    assert!(table.contains("# Avg bus bandwidth    : "));

    // Ring rows carry a path after the last column and use %7.0f above 10 ms.
    let ring = rep.render_algo_table(&combo(), "ring");
    assert!(ring.starts_with("# algo: ring [ring:pipe4, ring:pipe1]\n"));
    let last = ring.lines().rfind(|l| !l.starts_with('#')).unwrap_or("");
    assert!(last.ends_with("  ring:pipe1"));
    assert_eq!(&last[TABLE_WIDTH..], "  ring:pipe1");
    assert!(last.contains("   12346 "), "{last}");
}

#[test]
fn avg_bus_bandwidth_is_mean_of_all_measurements() {
    let rep = Report {
        header: header(),
        cold_start: vec![],
        rows: vec![Row {
            out_of_place: Some(Measurement {
                time_us: 1.0,
                algbw: 1.0,
                busbw: 10.0,
                wrong: None,
            }),
            in_place: Some(Measurement {
                time_us: 1.0,
                algbw: 1.0,
                busbw: 20.5,
                wrong: None,
            }),
            ..row("x", None, 8, 1.0, 1.0)
        }],
        breakdown: vec![],
    };
    let t = rep.render_algo_table(&combo(), "x");
    assert!(t.contains("# Avg bus bandwidth    : 15.25\n"), "{t}");
    assert!(!t.contains("Out of bounds"));
    assert_eq!(fmt_g(220.9214), "220.921");
    assert_eq!(fmt_g(0.5), "0.5");
}

#[test]
fn comparison_ratio() {
    let rep = report();
    let c = rep.render_comparison(&combo(), "nccl");
    // 1 MiB: ring 100 us vs nccl 150 us out-of-place -> 1.50x; in-place 200 vs 160 -> 0.80x.
    let line = c.lines().find(|l| l.contains("1MiB")).unwrap_or_default();
    assert!(line.contains("1.50x"), "{c}");
    assert!(line.contains("0.80x"), "{c}");
    assert!(line.contains("ring:pipe4"));
    assert!(c.lines().all(|l| l.starts_with('#')));
    assert_eq!(c.lines().count(), 2 + 3); // title + header + 3 sizes
    assert!(!c.lines().skip(2).any(|l| l.contains(" nccl ")));

    // Missing measurement -> "-".
    let mut rep2 = rep.clone();
    rep2.rows[3].in_place = None;
    let c2 = rep2.render_comparison(&combo(), "nccl");
    let line2 = c2.lines().find(|l| l.contains("1MiB")).unwrap_or_default();
    assert!(
        line2.contains("1.50x") && line2.trim_end().ends_with('-'),
        "{c2}"
    );

    assert!(rep
        .render_comparison(&combo(), "mpi")
        .contains("has no rows"));
}

#[test]
fn cold_start_table() {
    let c = report().render_cold_start();
    assert!(c.contains("setup+first (ms)") && c.contains("vs nccl"));
    let ring = c
        .lines()
        .find(|l| l.starts_with("# ring"))
        .unwrap_or_default();
    assert!(ring.contains("50.000") && ring.contains("0.10x"), "{c}");
    let nccl = c
        .lines()
        .find(|l| l.starts_with("# nccl"))
        .unwrap_or_default();
    assert!(nccl.contains("500.000") && nccl.contains("1.00x"), "{c}");
    let mut rep = report();
    rep.cold_start.retain(|c| c.algo != "nccl");
    assert!(!rep.render_cold_start().contains("vs nccl"));
    rep.cold_start.clear();
    assert_eq!(rep.render_cold_start(), "");
}

#[test]
fn render_all_sections_in_order() {
    let rep = report();
    let all = rep.render_all(Some("nccl"));
    let pos = |s: &str| all.find(s).unwrap_or(usize::MAX);
    assert!(pos("# ringreduce 0.1.0") < pos("# Cold start"));
    assert!(pos("# Cold start") < pos("# Collective: all-reduce  type: float  op: sum\n"));
    assert!(pos("# Collective: all-reduce") < pos("# algo: nccl"));
    assert!(pos("# algo: nccl") < pos("# algo: ring"));
    assert!(pos("# algo: ring") < pos("# Comparison vs nccl"));
    assert!(pos("# Comparison vs nccl") < all.len());
    assert!(!rep.render_all(Some("mpi")).contains("Comparison"));
    assert!(!rep.render_all(None).contains("Comparison"));
    let h = rep.render_header();
    assert!(h.lines().all(|l| l.starts_with('#')));
    for s in [
        "2025-01-01",
        "ringreduce bench",
        "NVIDIA H200",
        "560.35",
        "2.23.4",
        "Rank  1 -> device  1",
        "cuda events",
        "350.00 GB/s",
        "busbw = algbw * 2(N-1)/N (0 for N = 1)\n",
    ] {
        assert!(h.contains(s), "missing {s} in\n{h}");
    }
}

/// One combination: the sections as before, plus the single heading line.
#[test]
fn one_combination_adds_only_the_heading() {
    let rep = report();
    let all = rep.render_all(Some("nccl"));
    let c = combo();
    let expect = format!(
        "{}#\n{}# Collective: all-reduce  type: float  op: sum\n{}{}{}",
        rep.render_header(),
        rep.render_cold_start(),
        rep.render_algo_table(&c, "nccl"),
        rep.render_algo_table(&c, "ring"),
        rep.render_comparison(&c, "nccl"),
    );
    assert_eq!(all, expect);
    assert_eq!(all.matches("# Collective:").count(), 1);
}

#[test]
fn one_block_per_combination() {
    let mut rep = report();
    rep.rows
        .push(row_of("nccl", ALL_GATHER, "float", 1 << 20, 50.0));
    rep.rows
        .push(row_of("ring", ALL_GATHER, "float", 1 << 20, 40.0));
    rep.rows
        .push(row_of("ring", ALL_REDUCE, "half", 1 << 20, 40.0));
    let all = rep.render_all(Some("nccl"));
    let heads: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("# Collective:"))
        .collect();
    assert_eq!(
        heads,
        [
            "# Collective: all-reduce  type: float  op: sum",
            "# Collective: all-gather  type: float  op: sum",
            "# Collective: all-reduce  type: half  op: sum",
        ]
    );
    // nccl has rows in the first two combinations only: two comparisons.
    assert_eq!(all.matches("# Comparison vs nccl").count(), 2);
    assert_eq!(all.matches("# algo: ring").count(), 3);
    // The all-gather block: its own rows, 1 MiB at (N-1)/N.
    let ag = &all[all.find(heads[1]).unwrap_or(0)..all.find(heads[2]).unwrap_or(0)];
    let data: Vec<&str> = ag.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(data.len(), 2, "{ag}");
    assert!(data.iter().all(|l| l.contains("   1048576 ")));
    let cmp = ag.lines().find(|l| l.contains("1MiB")).unwrap_or_default();
    assert!(cmp.contains("1.25x"), "{ag}"); // 50 us / 40 us
                                            // The header explains both factors.
    assert!(
        all.contains(
            "busbw = algbw * 2(N-1)/N for all-reduce, (N-1)/N for all-gather (0 for N = 1)"
        ),
        "{}",
        rep.render_header()
    );
    // Row order inside a combination is kept; other combinations excluded.
    let t = rep.render_algo_table(&Combo::of(&rep.rows[8]), "ring");
    assert_eq!(t.lines().filter(|l| !l.starts_with('#')).count(), 1);
}
