//! Parameter Server vs Ring AllReduce: traffic and time models (pure math).
//!
//! Every rank holds `D` bytes (`d`) and there are `N` ranks (`n`).
//!
//! * **Parameter Server (PS)**: every worker sends its `D` bytes to one root,
//!   the root reduces them and sends the `D`-byte result back to every worker.
//!   The root receives `(N-1)*D` and sends `(N-1)*D` per round, so its load
//!   grows `O(N)`.
//! * **Ring AllReduce**: Reduce-Scatter then All-Gather, `2(N-1)` steps of
//!   `D/N` bytes each. Every rank sends `2(N-1)/N*D` and receives the same,
//!   which tends to `2D` as `N -> inf`: the per-rank load is bounded.
//!
//! For `N <= 1` there is nothing to exchange and every quantity is 0.
//!
//! The [`AlphaBeta`] model adds time: `alpha` per message (latency) plus
//! `bytes / B` on a link of bandwidth `B` (see [`ring_time_us`] and
//! [`ps_time_us`] for the exact assumptions).
//!
//! Sizes are in bytes; the rendered tables use decimal megabytes
//! (1 MB = 1e6 B) and bandwidths are decimal GB/s (1 GB/s = 1e9 B/s).

use std::fmt::Write as _;

/// Bytes per decimal megabyte.
const MB: f64 = 1e6;

/// Traffic for one round at a given rank count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadRow {
    /// Number of ranks `N`.
    pub ranks: usize,
    /// Bytes the PS root receives: `(N-1)*D`.
    pub ps_root_in_bytes: f64,
    /// Bytes the PS root sends: `(N-1)*D`.
    pub ps_root_out_bytes: f64,
    /// Bytes each ring rank sends: `2(N-1)/N*D`.
    pub ring_per_rank_sent_bytes: f64,
    /// Bytes each ring rank receives: `2(N-1)/N*D`.
    pub ring_per_rank_recv_bytes: f64,
}

/// One [`LoadRow`] per entry of `ranks`, in the given order.
pub fn load_table(d_bytes: f64, ranks: &[usize]) -> Vec<LoadRow> {
    ranks
        .iter()
        .map(|&n| LoadRow {
            ranks: n,
            ps_root_in_bytes: ps_root_bytes(n, d_bytes),
            ps_root_out_bytes: ps_root_bytes(n, d_bytes),
            ring_per_rank_sent_bytes: ring_per_rank_bytes(n, d_bytes),
            ring_per_rank_recv_bytes: ring_per_rank_bytes(n, d_bytes),
        })
        .collect()
}

/// Bytes one ring rank sends (and, equally, receives): `2(N-1)/N * D`.
/// Returns 0 for `n <= 1`.
pub fn ring_per_rank_bytes(n: usize, d: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let nf = n as f64;
    2.0 * (nf - 1.0) / nf * d
}

/// Bytes the PS root receives (and, equally, sends): `(N-1) * D`.
/// Returns 0 for `n <= 1`.
pub fn ps_root_bytes(n: usize, d: f64) -> f64 {
    n.saturating_sub(1) as f64 * d
}

/// How many ring hops share the busiest link direction when rank `r` runs
/// on device `map[r]` and sends to rank `(r + 1) % N`: the largest number of
/// hops from one device to another one (hops within a device use no link).
/// Every hop carries `2(N-1)/N * D`, so a ring call needs at least
/// `load * 2(N-1)/N * D / ceiling`, and its busbw is at most
/// `ceiling / load`. One rank per GPU gives 1; ranks dealt round-robin onto
/// 2 GPUs give N/2 (every hop crosses); ranks in blocks give 1. Returns 0
/// when no hop crosses (one device, or fewer than 2 ranks).
pub fn ring_link_load(map: &[usize]) -> usize {
    let n = map.len();
    if n < 2 {
        return 0;
    }
    let mut hops: std::collections::BTreeMap<(usize, usize), usize> = Default::default();
    for r in 0..n {
        let (a, b) = (map[r], map[(r + 1) % n]);
        if a != b {
            *hops.entry((a, b)).or_default() += 1;
        }
    }
    hops.into_values().max().unwrap_or(0)
}

/// Alpha-beta (latency-bandwidth) cost model.
///
/// Every point-to-point message costs `alpha_us` microseconds of latency plus
/// `bytes / B`, where `B = link_gbps * 1e9` bytes/s is the bandwidth of each
/// rank's link in each direction (links are full duplex: a rank can send and
/// receive at `B` simultaneously). Reduction arithmetic is treated as free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlphaBeta {
    /// Per-message latency in microseconds.
    pub alpha_us: f64,
    /// Per-link, per-direction bandwidth in GB/s (1e9 B/s).
    pub link_gbps: f64,
}

impl AlphaBeta {
    /// Microseconds to move `bytes` over one link direction.
    fn transfer_us(&self, bytes: f64) -> f64 {
        // bytes / (gbps * 1e9 B/s) seconds = bytes / (gbps * 1e3) us
        bytes / (self.link_gbps * 1e3)
    }
}

/// Ring AllReduce time in microseconds:
/// `2(N-1)*alpha + 2(N-1)/N * D / B`.
///
/// Assumptions: `2(N-1)` synchronous steps (N-1 Reduce-Scatter, N-1
/// All-Gather); in each step every rank sends one `D/N` chunk to its right
/// neighbour while receiving one from its left neighbour, so with full-duplex
/// links a step costs `alpha + (D/N)/B`. Returns 0 for `n <= 1`.
pub fn ring_time_us(n: usize, d: f64, m: &AlphaBeta) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let steps = 2.0 * (n as f64 - 1.0);
    steps * m.alpha_us + m.transfer_us(ring_per_rank_bytes(n, d))
}

/// Parameter Server time in microseconds:
/// `2(N-1)*alpha + 2(N-1) * D / B`.
///
/// Assumptions: the root's single link is the bottleneck. Gather: the N-1
/// workers' `D`-byte messages all enter through the root's inbound direction,
/// `(N-1)*D/B`, and the root handles N-1 messages (`(N-1)*alpha`). Broadcast:
/// the result leaves through the root's outbound direction as N-1 messages,
/// another `(N-1)*alpha + (N-1)*D/B`. Full duplex does not let the two phases
/// overlap, because the reduction must finish before the broadcast can start
/// (no chunk-level pipelining is modelled). Returns 0 for `n <= 1`.
pub fn ps_time_us(n: usize, d: f64, m: &AlphaBeta) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let msgs = n as f64 - 1.0;
    2.0 * msgs * m.alpha_us + 2.0 * m.transfer_us(ps_root_bytes(n, d))
}

/// Human-readable comparison: formula summary, traffic table (decimal MB, one
/// decimal), the `N -> inf` limit, and an alpha-beta time table with the winner.
pub fn render(d_bytes: f64, d_label: &str, ranks: &[usize], model: &AlphaBeta) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(
        s,
        "Parameter Server vs Ring AllReduce, D = {d_label} per rank ({d_bytes:.0} B, 1 MB = 1e6 B)"
    );
    let _ = writeln!(s);
    s.push_str(
        "PS: every worker sends its D bytes to one root, which reduces and sends D back\n\
         to each worker: root in = root out = (N-1)*D per round, growing O(N).\n\
         Ring: Reduce-Scatter then All-Gather, 2(N-1) steps of D/N bytes; every rank\n\
         sends = receives 2(N-1)/N*D, which tends to 2D as N grows.\n\
         Time (alpha-beta, B per link per direction): ring 2(N-1)*alpha + 2(N-1)/N*D/B;\n\
         PS 2(N-1)*alpha + 2(N-1)*D/B (gather must end before broadcast starts).\n",
    );
    let _ = writeln!(s);

    let _ = writeln!(
        s,
        "{:>6} | {:>16} | {:>16} | {:>23} | {:>13}",
        "N", "PS root in (MB)", "PS root out (MB)", "Ring per rank sent (MB)", "Ring/PS ratio"
    );
    let _ = writeln!(s, "{}", table_rule(&[6, 16, 16, 23, 13]));
    for row in load_table(d_bytes, ranks) {
        let ratio = if row.ps_root_out_bytes > 0.0 {
            format!(
                "{:.3}",
                row.ring_per_rank_sent_bytes / row.ps_root_out_bytes
            )
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            s,
            "{:>6} | {:>16.1} | {:>16.1} | {:>23.1} | {:>13}",
            row.ranks,
            row.ps_root_in_bytes / MB,
            row.ps_root_out_bytes / MB,
            row.ring_per_rank_sent_bytes / MB,
            ratio
        );
    }
    let limit = format!("2D = {:.1} MB", 2.0 * d_bytes / MB);
    let _ = writeln!(
        s,
        "{:>6} | {:>16} | {:>16} | {:>23} | {:>13}",
        "N->inf", "O(N)", "O(N)", limit, "-> 0"
    );
    let _ = writeln!(s);

    let _ = writeln!(
        s,
        "alpha-beta model: alpha = {} us per message, B = {} GB/s per link (full duplex)",
        short(model.alpha_us),
        short(model.link_gbps)
    );
    let _ = writeln!(
        s,
        "{:>6} | {:>14} | {:>14} | {:>9} | {:>6}",
        "N", "PS time (us)", "Ring time (us)", "PS/Ring", "winner"
    );
    let _ = writeln!(s, "{}", table_rule(&[6, 14, 14, 9, 6]));
    for &n in ranks {
        let ps = ps_time_us(n, d_bytes, model);
        let ring = ring_time_us(n, d_bytes, model);
        let speedup = if ring > 0.0 {
            format!("{:.2}x", ps / ring)
        } else {
            "-".to_string()
        };
        let winner = if ring < ps {
            "ring"
        } else if ps < ring {
            "PS"
        } else {
            "tie"
        };
        let _ = writeln!(
            s,
            "{:>6} | {:>14.1} | {:>14.1} | {:>9} | {:>6}",
            n, ps, ring, speedup, winner
        );
    }
    s
}

/// `------+------...` separator matching `" | "`-joined columns of these widths.
fn table_rule(widths: &[usize]) -> String {
    widths
        .iter()
        .map(|w| "-".repeat(*w))
        .collect::<Vec<_>>()
        .join("-+-")
}

/// A model parameter as given (`10`, `2.5`) or, when it came from a fit,
/// to four significant digits.
fn short(x: f64) -> String {
    let s = format!("{x}");
    if s.len() <= 6 {
        return s;
    }
    let digits = (3 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:.digits$}")
}

/// Fits the ring's alpha-beta model to measured all-reduces: each point is
/// `(N, D bytes per rank, time µs)`, modelled as
/// `2(N-1)·alpha + 2(N-1)/N·D / B`. Least squares on the relative error
/// (each point weighted by 1/time², so a sweep over many decades of sizes
/// fits the small ones as well as the large ones), with `alpha >= 0`.
/// `None` without two points of different sizes, or when the data do not
/// give a positive bandwidth.
pub fn fit_ring(points: &[(usize, f64, f64)]) -> Option<AlphaBeta> {
    let pts: Vec<(f64, f64, f64)> = points
        .iter()
        .filter(|&&(n, d, t)| n >= 2 && d > 0.0 && t.is_finite() && t > 0.0)
        .map(|&(n, d, t)| (2.0 * (n as f64 - 1.0), ring_per_rank_bytes(n, d), t))
        .collect();
    let distinct = pts
        .iter()
        .any(|p| (p.1 - pts[0].1).abs() > 1e-9 * pts[0].1.max(1.0));
    if pts.len() < 2 || !distinct {
        return None;
    }
    let (mut s11, mut s12, mut s22, mut s1t, mut s2t) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x1, x2, t) in &pts {
        let w = 1.0 / (t * t);
        s11 += w * x1 * x1;
        s12 += w * x1 * x2;
        s22 += w * x2 * x2;
        s1t += w * x1 * t;
        s2t += w * x2 * t;
    }
    let det = s11 * s22 - s12 * s12;
    // (alpha µs per step, c µs per byte)
    let (mut a, mut c) = if det.abs() > 1e-300 {
        ((s1t * s22 - s2t * s12) / det, (s11 * s2t - s12 * s1t) / det)
    } else {
        (0.0, s2t / s22)
    };
    if a < 0.0 {
        a = 0.0;
        c = s2t / s22;
    }
    if !(c > 0.0 && c.is_finite()) {
        return None;
    }
    Some(AlphaBeta {
        alpha_us: a,
        // c µs/byte = 1 / (gbps * 1e3)
        link_gbps: 1.0 / (c * 1e3),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn ring_link_load_counts_the_busiest_direction() {
        assert_eq!(ring_link_load(&[]), 0);
        assert_eq!(ring_link_load(&[0]), 0);
        assert_eq!(ring_link_load(&[0, 0, 0]), 0);
        assert_eq!(ring_link_load(&[0, 1]), 1);
        assert_eq!(ring_link_load(&[0, 1, 2, 3]), 1);
        // Round-robin on 2 GPUs: every hop crosses, N/2 per direction.
        assert_eq!(ring_link_load(&[0, 1, 0, 1]), 2);
        assert_eq!(ring_link_load(&[0, 1, 0, 1, 0, 1, 0, 1]), 4);
        // Blocks: one hop each way.
        assert_eq!(ring_link_load(&[0, 0, 1, 1]), 1);
        assert_eq!(ring_link_load(&[0, 0, 0, 0, 1, 1, 1, 1]), 1);
        // Odd rank counts on 2 GPUs, round-robin: (N-1)/2 hops one way.
        assert_eq!(ring_link_load(&[0, 1, 0]), 1);
        assert_eq!(ring_link_load(&[0, 1, 0, 1, 0]), 2);
    }

    use super::*;
    use approx::{assert_abs_diff_eq, assert_relative_eq};

    const D: f64 = 100e6;

    fn mb1(bytes: f64) -> String {
        format!("{:.1}", bytes / MB)
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
        let out = render(D, "100 MB", &[4, 16, 64], &m);
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
        // ring: 6*10 + 1.5*1000 = 1560; PS: 6*10 + 6*1000 = 6060.
        assert_abs_diff_eq!(ring_time_us(4, D, &m), 1560.0, epsilon = 1e-9);
        assert_abs_diff_eq!(ps_time_us(4, D, &m), 6060.0, epsilon = 1e-9);
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
        assert!(fit_ring(&pts[..1]).is_none());
        assert!(fit_ring(&[]).is_none());
        assert!(fit_ring(&[(2, 8.0, 10.0), (2, 8.0, 11.0)]).is_none());
        // Data that would need a negative alpha: alpha clamps to 0.
        let f = fit_ring(&[(2, 1e6, 1.0), (2, 2e6, 4.0)]).unwrap();
        assert_eq!(f.alpha_us, 0.0);
        assert!(f.link_gbps > 0.0);
    }
}
