//! nccl-tests-style text: the `#` preamble, one table per algorithm, the
//! comparison with a reference contender and the cold-start table, grouped by
//! (collective, type, op) combination.

use std::fmt::Write as _;

use super::{
    first_appearances, Combo, Measurement, Report, Row, ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER,
};
use ringreduce::size::format_bytes;

impl Report {
    /// `#`-prefixed run metadata, in the spirit of the nccl-tests preamble.
    pub fn render_header(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        let _ = writeln!(s, "# {} {}", h.tool, h.version);
        let _ = writeln!(s, "# Date: {}", h.date);
        let _ = writeln!(s, "# Command: {}", h.command);
        for hw in &h.hardware {
            let _ = writeln!(s, "# Hardware: {hw}");
        }
        let _ = writeln!(s, "# Driver: {}", h.driver.as_deref().unwrap_or("n/a"));
        let _ = writeln!(
            s,
            "# NCCL version: {}",
            h.nccl_version.as_deref().unwrap_or("n/a")
        );
        if h.on_cpu() {
            // Host threads: no device to name.
            let _ = writeln!(
                s,
                "# Backend: {}  ranks: {}  devices: none (host threads)",
                h.backend, h.ranks
            );
            let _ = writeln!(s, "#");
            // The backend says how its ranks run: threads of this process,
            // or one process per rank (launch, mpirun), over nodes or not.
            let how = h.backend.strip_prefix("cpu").unwrap_or(&h.backend);
            let how = how.trim_start_matches(':').trim();
            let _ = writeln!(
                s,
                "# Using host memory: ranks 0..{} on the CPU backend ({how})",
                h.ranks.saturating_sub(1)
            );
        } else {
            let _ = writeln!(
                s,
                "# Backend: {}  ranks: {}  devices: {}",
                h.backend, h.ranks, h.devices
            );
            let _ = writeln!(s, "#");
            let _ = writeln!(s, "# Using devices");
            for (rank, dev) in h.rank_to_device.iter().enumerate() {
                let _ = writeln!(s, "#  Rank {rank:>2} -> device {dev:>2}");
            }
        }
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# Timing: {}  warmup iters: {}  iters: {}",
            h.timing, h.warmup, h.iters
        );
        match h.link_ceiling_gbps {
            Some(c) => {
                let _ = writeln!(s, "# Peer-copy link ceiling: {c:.2} GB/s");
            }
            None => {
                let _ = writeln!(s, "# Peer-copy link ceiling: not measured");
            }
        }
        let _ = writeln!(
            s,
            "# algbw = size / time (GB/s = 1e9 B/s); busbw = algbw * {} (0 for N = 1)",
            self.factor_text()
        );
        for note in &h.notes {
            let _ = writeln!(s, "# Note: {note}");
        }
        for m in &h.models {
            let _ = writeln!(
                s,
                "# Model of {}: alpha = {:.2} us per round, beta = {:.1} GB/s per link direction, overlap {:.2} (fitted to its {} rows; {})",
                m.path, m.alpha_us, m.beta_gbps, m.overlap, m.rows, m.formula
            );
        }
        s
    }

    /// The busbw factors of the collectives present: `2(N-1)/N` when there are
    /// only all-reduce rows (or none), else one factor per collective.
    fn factor_text(&self) -> String {
        let collectives = first_appearances(self.rows.iter().map(|r| r.collective.name()));
        if collectives.iter().all(|c| *c == ALL_REDUCE.name()) {
            return "2(N-1)/N".into();
        }
        let parts: Vec<String> = collectives
            .iter()
            .map(|c| {
                let f = if *c == REDUCE_SCATTER.name() || *c == ALL_GATHER.name() {
                    "(N-1)/N"
                } else {
                    "2(N-1)/N"
                };
                format!("{f} for {c}")
            })
            .collect();
        parts.join(", ")
    }

    /// nccl-tests-style block for one algorithm: a `# algo:` line, the three
    /// nccl-tests header lines, one data line per row (path appended when
    /// present), the out-of-bounds count (when anything was checked) and
    /// `# Avg bus bandwidth` (mean busbw over all out-of-place and in-place
    /// measurements, as nccl-tests computes it). Only the rows of `combo`.
    pub fn render_algo_table(&self, combo: &Combo, algo: &str) -> String {
        let rows: Vec<&Row> = self.rows_of(combo).filter(|r| r.algo == algo).collect();
        let mut paths: Vec<&str> = Vec::new();
        for p in rows.iter().filter_map(|r| r.path.as_deref()) {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        let mut s = String::new();
        if paths.is_empty() {
            let _ = writeln!(s, "# algo: {algo}");
        } else {
            let _ = writeln!(s, "# algo: {algo} [{}]", paths.join(", "));
        }
        let _ = writeln!(s, "#");
        for line in nccl_header_lines() {
            let _ = writeln!(s, "{line}");
        }
        let mut bw_sum = 0.0;
        let mut bw_count = 0_usize;
        let mut checked = false;
        let mut wrong_total = 0_u64;
        for r in &rows {
            let _ = writeln!(s, "{}", nccl_data_line(r));
            for m in [&r.out_of_place, &r.in_place].into_iter().flatten() {
                bw_sum += m.busbw;
                bw_count += 1;
                if let Some(w) = m.wrong {
                    checked = true;
                    wrong_total = wrong_total.saturating_add(w);
                }
            }
        }
        if checked {
            let verdict = if wrong_total == 0 { "OK" } else { "FAILED" };
            let _ = writeln!(s, "# Out of bounds values : {wrong_total} {verdict}");
        }
        let avg = if bw_count > 0 {
            bw_sum / bw_count as f64
        } else {
            0.0
        };
        let _ = writeln!(s, "# Avg bus bandwidth    : {}", fmt_g(avg));
        let _ = writeln!(s, "#");
        s
    }

    /// Table comparing every algorithm other than `reference` with it, one
    /// line per (size, row): busbw out-of-place / in-place for both, and the
    /// speed ratio `algo / reference` (algbw ratio at the same size and rank
    /// count, i.e. the inverse time ratio; > 1 means faster than the
    /// reference; defined even for N = 1 where busbw is 0). `-` marks missing
    /// values. All lines start with `#`. Only the rows of `combo`.
    pub fn render_comparison(&self, combo: &Combo, reference: &str) -> String {
        let mut s = String::new();
        let rows: Vec<&Row> = self.rows_of(combo).collect();
        if !rows.iter().any(|r| r.algo == reference) {
            let _ = writeln!(s, "# Comparison: reference '{reference}' has no rows");
            return s;
        }
        let mut keys: Vec<(u64, usize)> = rows.iter().map(|r| (r.size, r.ranks)).collect();
        keys.sort_unstable();
        keys.dedup();

        let headers: Vec<String> = vec![
            "size".into(),
            "ranks".into(),
            "algo".into(),
            "path".into(),
            "oop busbw".into(),
            format!("{reference} oop"),
            "oop ratio".into(),
            "ip busbw".into(),
            format!("{reference} ip"),
            "ip ratio".into(),
        ];
        let left = [
            false, false, true, true, false, false, false, false, false, false,
        ];
        let mut cells: Vec<Vec<String>> = Vec::new();
        for (size, ranks) in keys {
            let at = |r: &&&Row| r.size == size && r.ranks == ranks;
            let Some(refrow) = rows.iter().filter(at).find(|r| r.algo == reference) else {
                continue;
            };
            for r in rows.iter().filter(at).filter(|r| r.algo != reference) {
                let mut line = vec![
                    format_bytes(size),
                    ranks.to_string(),
                    r.algo.clone(),
                    r.path.clone().unwrap_or_else(|| "-".into()),
                ];
                for (m, rm) in [
                    (&r.out_of_place, &refrow.out_of_place),
                    (&r.in_place, &refrow.in_place),
                ] {
                    line.push(opt_num(m.as_ref().map(|m| m.busbw), 2));
                    line.push(opt_num(rm.as_ref().map(|m| m.busbw), 2));
                    line.push(ratio(m.as_ref(), rm.as_ref()));
                }
                cells.push(line);
            }
        }
        let _ = writeln!(
            s,
            "# Comparison vs {reference}: busbw in GB/s; ratio = algo / {reference} speed (>1 = faster)"
        );
        s.push_str(&hash_table(&headers, &cells, &left));
        s
    }

    /// Cold-start table: algo | size | setup (ms) | first call (ms) |
    /// setup+first (ms) | steady (us), plus `(setup+first) / nccl's` when an
    /// `"nccl"` entry exists (same size if available, else the first one).
    /// Empty string when there are no cold-start entries.
    pub fn render_cold_start(&self) -> String {
        if self.cold_start.is_empty() {
            return String::new();
        }
        let nccl_for = |size: u64| {
            let mut nccl = self.cold_start.iter().filter(|c| c.algo == "nccl");
            let first = nccl.clone().next();
            nccl.find(|c| c.size == size).or(first)
        };
        let has_nccl = self.cold_start.iter().any(|c| c.algo == "nccl");
        let mut headers: Vec<String> = [
            "algo",
            "size",
            "setup (ms)",
            "first call (ms)",
            "setup+first (ms)",
            "steady (us)",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect();
        if has_nccl {
            headers.push("vs nccl".into());
        }
        let mut left = vec![true, false, false, false, false, false];
        if has_nccl {
            left.push(false);
        }
        let cells: Vec<Vec<String>> = self
            .cold_start
            .iter()
            .map(|c| {
                let total = c.setup_ms + c.first_call_ms;
                let mut line = vec![
                    c.algo.clone(),
                    format_bytes(c.size),
                    format!("{:.3}", c.setup_ms),
                    format!("{:.3}", c.first_call_ms),
                    format!("{total:.3}"),
                    format!("{:.2}", c.steady_us),
                ];
                if has_nccl {
                    let r = nccl_for(c.size)
                        .map(|n| n.setup_ms + n.first_call_ms)
                        .filter(|t| *t > 0.0)
                        .map(|t| format!("{:.2}x", total / t))
                        .unwrap_or_else(|| "-".into());
                    line.push(r);
                }
                line
            })
            .collect();
        let mut s = String::from(
            "# Cold start (setup = init before the first call; first call includes lazy init; steady = per call after warm-up)\n",
        );
        s.push_str(&hash_table(&headers, &cells, &left));
        s.push_str("#\n");
        s
    }

    /// Everything: header, cold start, then for each (collective, type, op)
    /// combination present (order of first appearance): a `# Collective:`
    /// line naming it, one table per algorithm (order of first appearance)
    /// and, when `reference` names an algorithm with rows in the
    /// combination, the comparison table (plus graph replays vs
    /// `nccl:graph` when both are present).
    pub fn render_all(&self, reference: Option<&str>) -> String {
        let mut s = self.render_header();
        s.push_str("#\n");
        s.push_str(&self.render_cold_start());
        for combo in self.combos() {
            let _ = writeln!(
                s,
                "# Collective: {}  type: {}  op: {}",
                combo.collective, combo.dtype, combo.redop
            );
            let algos = first_appearances(self.rows_of(&combo).map(|r| r.algo.as_str()));
            for algo in &algos {
                s.push_str(&self.render_algo_table(&combo, algo));
            }
            if let Some(r) = reference.filter(|r| algos.contains(r)) {
                s.push_str(&self.render_comparison(&combo, r));
            }
            // Graph replays compared with graph replays, as a second comparison.
            if algos.contains(&"nccl:graph")
                && algos
                    .iter()
                    .any(|a| a.ends_with(":graph") && *a != "nccl:graph")
            {
                s.push_str("#\n");
                s.push_str(&self.render_comparison(&combo, "nccl:graph"));
            }
        }
        s
    }
}

/// The three nccl-tests column header lines (each 116 characters wide).
fn nccl_header_lines() -> [String; 3] {
    [
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
            "", "", "", "", ""
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}",
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong"
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
            "(GB/s)", ""
        ),
    ]
}

/// One nccl-tests data line (`%12li  %12li  %8s  %6s  %6i` + two result
/// blocks), with `  <path>` appended when the row has one.
fn nccl_data_line(r: &Row) -> String {
    let mut s = format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
        r.size,
        r.count,
        r.dtype.name(),
        r.redop_name(),
        -1
    );
    for m in [&r.out_of_place, &r.in_place] {
        match m {
            Some(m) => {
                let wrong = m
                    .wrong
                    .map(|w| w.to_string())
                    .unwrap_or_else(|| "N/A".into());
                let _ = write!(
                    s,
                    "  {:>7}  {:>6.2}  {:>6.2}  {:>5}",
                    fmt_time(m.time_us),
                    m.algbw,
                    m.busbw,
                    wrong
                );
            }
            None => s.push_str(&" ".repeat(32)),
        }
    }
    if let Some(p) = &r.path {
        let _ = write!(s, "  {p}");
    }
    s
}

/// nccl-tests time format: `%7.0f` from 10000 us, `%7.1f` from 100 us, else `%7.2f`.
fn fmt_time(us: f64) -> String {
    if us >= 10000.0 {
        format!("{us:>7.0}")
    } else if us >= 100.0 {
        format!("{us:>7.1}")
    } else {
        format!("{us:>7.2}")
    }
}

/// C `%g` (6 significant digits, trailing zeros removed) for ordinary magnitudes.
fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        return format!("{v:.5e}");
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn opt_num(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// `"1.50x"`: algbw of `m` over algbw of the reference `r`.
fn ratio(m: Option<&Measurement>, r: Option<&Measurement>) -> String {
    match (m, r) {
        (Some(m), Some(r)) if r.algbw > 0.0 && m.algbw.is_finite() => {
            format!("{:.2}x", m.algbw / r.algbw)
        }
        _ => "-".into(),
    }
}

/// A `# `-prefixed table with two spaces between columns; `left[i]` selects
/// left alignment for column `i` (right otherwise).
fn hash_table(headers: &[String], rows: &[Vec<String>], left: &[bool]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let fmt_line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if left.get(i).copied().unwrap_or(false) {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        format!("# {}", parts.join("  ").trim_end())
    };
    let mut s = String::new();
    let _ = writeln!(s, "{}", fmt_line(headers));
    for row in rows {
        let _ = writeln!(s, "{}", fmt_line(row));
    }
    s
}

#[cfg(test)]
mod tests {
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
}
