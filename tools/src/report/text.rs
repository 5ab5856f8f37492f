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
mod tests;
