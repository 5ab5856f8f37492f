//! Parameter Server vs Ring AllReduce: time models (pure math) over the
//! traffic each algorithm moves (`ringreduce::algo::cost`: `D` bytes per
//! rank, `N` ranks, every quantity 0 for `N <= 1`).
//!
//! [`Model`] adds time, alpha-beta-gamma: `alpha` per dependent round
//! (latency), `bytes / B` through the busiest link direction and `bytes / G`
//! reduced. Each algorithm's [`Cost`] says how many of each it pays: the
//! ring `2(N-1)` rounds, the PS two (gather, then broadcast), a one-shot
//! one; so the PS, which moves more, wins below a crossover size
//! ([`Pricing::crossover`]) and the ring above it. [`fit`] fits one path's
//! alpha and bandwidth to its own measured rows.
//!
//! Sizes are in bytes; the rendered tables use decimal megabytes
//! (1 MB = 1e6 B) and bandwidths are decimal GB/s (1 GB/s = 1e9 B/s).

pub mod catalog;
pub mod published;
pub mod scale;

pub use ringreduce::algo::cost::{ps_root_bytes, ring_link_load, ring_per_rank_bytes, Cost, Terms};

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

/// Alpha-beta (latency-bandwidth) cost model.
///
/// Every point-to-point message costs `alpha_us` microseconds of latency plus
/// `bytes / B`, where `B = link_gbps * 1e9` bytes/s is the bandwidth of each
/// rank's link in each direction (links are full duplex: a rank can send and
/// receive at `B` simultaneously). Reduction arithmetic is treated as free;
/// [`Model`] adds its cost (gamma) and prices every [`Cost`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlphaBeta {
    /// Per-message latency in microseconds.
    pub alpha_us: f64,
    /// Per-link, per-direction bandwidth in GB/s (1e9 B/s).
    pub link_gbps: f64,
}

/// Alpha-beta-gamma: `alpha` per dependent round (latency, including the
/// hand-off between ranks), `1/B` per byte through a link direction,
/// `1/G` per byte reduced. `time = rounds*alpha + link_bytes/B +
/// reduce_bytes/G` ([`Terms`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Microseconds per dependent round.
    pub alpha_us: f64,
    /// Per-link, per-direction bandwidth in GB/s (1e9 B/s).
    pub link_gbps: f64,
    /// Reduce throughput in GB/s of input reduced (1e9 B/s); infinite:
    /// the reduce is free (or folded into `link_gbps` by a fit).
    pub reduce_gbps: f64,
}

impl From<AlphaBeta> for Model {
    fn from(m: AlphaBeta) -> Model {
        Model {
            alpha_us: m.alpha_us,
            link_gbps: m.link_gbps,
            reduce_gbps: f64::INFINITY,
        }
    }
}

impl Model {
    /// The time of `cost` for `n` ranks of `d` bytes, microseconds.
    pub fn time_us(&self, cost: Cost, n: usize, d: f64) -> f64 {
        let t = cost.terms(n, d);
        // bytes / (gbps * 1e9 B/s) seconds = bytes / (gbps * 1e3) us
        t.rounds * self.alpha_us
            + t.link_bytes / (self.link_gbps * 1e3)
            + t.reduce_bytes / (self.reduce_gbps * 1e3)
    }
}

/// One path's fit: alpha, an effective bandwidth and an overlap, for that
/// path's own [`Cost`] (see [`fit`]).
///
/// With latency `l = rounds·alpha` and transfer `b = link_bytes/B`, the
/// time is `max(l, b) + (1 - overlap)·min(l, b)`: `overlap = 0` is the
/// classic alpha-beta sum `l + b` (every round's latency exposed, as in
/// Thakur, Rabenseifner and Gropp), `overlap = 1` the roofline `max(l, b)`
/// (the latency of the rounds hidden under the transfer, or the transfer
/// under the latency). A real path sits between: its time stays flat up to
/// a knee (latency-bound) and then grows with `D`, which a sum of the two
/// terms cannot draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub cost: Cost,
    /// Microseconds per dependent round.
    pub alpha_us: f64,
    /// Effective GB/s per link direction: on one path at one rank count the
    /// bytes reduced grow with the bytes moved, so a fit cannot tell the
    /// link from the reduce; this bandwidth includes the reduce.
    pub link_gbps: f64,
    /// The fraction of the smaller of the two terms hidden under the larger
    /// (0 to 1).
    pub overlap: f64,
}

impl Fit {
    /// The fitted time, microseconds.
    pub fn time_us(&self, n: usize, d: f64) -> f64 {
        let t = self.cost.terms(n, d);
        overlapped(
            t.rounds * self.alpha_us,
            t.link_bytes / (self.link_gbps * 1e3),
            self.overlap,
        )
    }
}

/// `max(l, b) + (1 - o)·min(l, b)`: two costs of which the fraction `o` of
/// the smaller runs under the larger.
fn overlapped(l: f64, b: f64, o: f64) -> f64 {
    l.max(b) + (1.0 - o) * l.min(b)
}

/// Fits `cost`'s model to measured all-reduces of ONE path: each point is
/// `(N, D bytes per rank, time µs)`, modelled as
/// `max(l, b) + (1 - overlap)·min(l, b)` with `l = rounds·alpha` and
/// `b = link_bytes/B`, the path's own terms ([`Cost::terms`]; see [`Fit`]).
/// Least squares on the relative error (each point weighted by 1/time², so
/// a sweep over many decades of sizes fits the small ones as well as the
/// large ones), with `alpha >= 0`: the sum (`overlap = 0`) in closed form,
/// then every overlap from 0 to 1 in steps of 0.05, each with alpha and B
/// found by a coordinate search from the sum's, keeping the best.
/// [`NoFit`] says why there is none.
pub fn fit(cost: Cost, points: &[(usize, f64, f64)]) -> Result<Fit, NoFit> {
    let pts = fit_points(cost, points)?;
    let (a, c) = fit_sum(&pts)?;
    let mut best = (relative_loss(&pts, a, c, 0.0), a, c, 0.0);
    for step in 1..=20 {
        let o = f64::from(step) / 20.0;
        let (loss, a, c) = search(&pts, a.max(1e-3), c, o);
        if loss < best.0 {
            best = (loss, a, c, o);
        }
    }
    let (_, a, c, overlap) = best;
    Ok(Fit {
        cost,
        alpha_us: a,
        // c µs/byte = 1 / (gbps * 1e3)
        link_gbps: 1.0 / (c * 1e3),
        overlap,
    })
}

/// Why [`fit`] (or [`fit_ring`]) gave no model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoFit {
    /// Fewer than two usable points of different sizes: nothing to fit,
    /// and none expected (a bench of one size).
    OneSize,
    /// The times do not grow with the bytes: the per-byte term came out
    /// zero or negative (noise at small sizes can do that).
    NoPerByteTerm,
}

/// The usable points as `(rounds, link_bytes, time µs)` of `cost`;
/// [`NoFit::OneSize`] without two of different sizes.
fn fit_points(cost: Cost, points: &[(usize, f64, f64)]) -> Result<Vec<(f64, f64, f64)>, NoFit> {
    let pts: Vec<(f64, f64, f64)> = points
        .iter()
        .filter(|&&(n, d, t)| n >= 2 && d > 0.0 && t.is_finite() && t > 0.0)
        .map(|&(n, d, t)| {
            let x = cost.terms(n, d);
            (x.rounds, x.link_bytes, t)
        })
        .collect();
    let distinct = pts
        .iter()
        .any(|p| (p.1 - pts[0].1).abs() > 1e-9 * pts[0].1.max(1.0));
    if pts.len() >= 2 && distinct {
        Ok(pts)
    } else {
        Err(NoFit::OneSize)
    }
}

/// Σ ((model - t) / t)² over `(rounds, link_bytes, t)` points, for alpha
/// `a` µs, `c` µs per byte and overlap `o`.
fn relative_loss(pts: &[(f64, f64, f64)], a: f64, c: f64, o: f64) -> f64 {
    pts.iter()
        .map(|&(r, l, t)| {
            let e = (overlapped(r * a, l * c, o) - t) / t;
            e * e
        })
        .sum()
}

/// Alpha and µs per byte minimising [`relative_loss`] at overlap `o`, by a
/// coordinate search on their logarithms from `(a, c)` (steps halving from
/// a factor e down to 1e-4; bounded). The loss is piecewise smooth in the
/// two parameters, so a search is simpler and as good here as a solver.
fn search(pts: &[(f64, f64, f64)], a: f64, c: f64, o: f64) -> (f64, f64, f64) {
    let (mut la, mut lc) = (a.ln(), c.ln());
    let mut loss = relative_loss(pts, a, c, o);
    let mut step = 1.0;
    for _ in 0..10_000 {
        if step < 1e-4 {
            break;
        }
        let better = [(step, 0.0), (-step, 0.0), (0.0, step), (0.0, -step)]
            .into_iter()
            .map(|(da, dc)| (la + da, lc + dc))
            .map(|(x, y)| (relative_loss(pts, x.exp(), y.exp(), o), x, y))
            .find(|&(l, _, _)| l < loss);
        match better {
            Some((l, x, y)) => (loss, la, lc) = (l, x, y),
            None => step /= 2.0,
        }
    }
    (loss, la.exp(), lc.exp())
}

/// The sum form's fit in closed form: `(alpha µs, µs per byte)`, alpha
/// clamped at 0; [`NoFit::NoPerByteTerm`] without a positive bandwidth.
fn fit_sum(pts: &[(f64, f64, f64)]) -> Result<(f64, f64), NoFit> {
    let (mut s11, mut s12, mut s22, mut s1t, mut s2t) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x1, x2, t) in pts {
        let w = 1.0 / (t * t);
        s11 += w * x1 * x1;
        s12 += w * x1 * x2;
        s22 += w * x2 * x2;
        s1t += w * x1 * t;
        s2t += w * x2 * t;
    }
    let det = s11 * s22 - s12 * s12;
    // (alpha µs per round, c µs per byte)
    let (mut a, mut c) = if det.abs() > 1e-300 {
        ((s1t * s22 - s2t * s12) / det, (s11 * s2t - s12 * s1t) / det)
    } else {
        (0.0, s2t / s22)
    };
    if a < 0.0 {
        a = 0.0;
        c = s2t / s22;
    }
    if c > 0.0 && c.is_finite() {
        Ok((a, c))
    } else {
        Err(NoFit::NoPerByteTerm)
    }
}

/// Fits the ring's classic alpha-beta sum (`2(N-1)·alpha + 2(N-1)/N·D /
/// B`, no overlap) to measured all-reduces of the plain ring: [`fit`]'s
/// closed-form first stage with [`Cost::Ring`] of one slice.
pub fn fit_ring(points: &[(usize, f64, f64)]) -> Result<AlphaBeta, NoFit> {
    let (a, c) = fit_sum(&fit_points(Cost::Ring { slices: 1 }, points)?)?;
    Ok(AlphaBeta {
        alpha_us: a,
        link_gbps: 1.0 / (c * 1e3),
    })
}

/// Ring AllReduce time in microseconds:
/// `2(N-1)*alpha + 2(N-1)/N * D / B` (the [`Cost::Ring`] terms with the
/// reduce free).
///
/// Assumptions: `2(N-1)` synchronous steps (N-1 Reduce-Scatter, N-1
/// All-Gather); in each step every rank sends one `D/N` chunk to its right
/// neighbour while receiving one from its left neighbour, so with full-duplex
/// links a step costs `alpha + (D/N)/B`. Returns 0 for `n <= 1`.
pub fn ring_time_us(n: usize, d: f64, m: &AlphaBeta) -> f64 {
    Model::from(*m).time_us(Cost::Ring { slices: 1 }, n, d)
}

/// Parameter Server time in microseconds:
/// `2*alpha + 2(N-1) * D / B` (the [`Cost::ParameterServer`] terms with
/// the reduce free).
///
/// Assumptions: the root's single link is the bottleneck, and the call is
/// two dependent rounds. Gather: the N-1 workers send their `D`-byte
/// messages at the same time (one round, one `alpha`), all entering through
/// the root's inbound direction, `(N-1)*D/B`. Broadcast: the result leaves
/// through the root's outbound direction, another `alpha + (N-1)*D/B`.
/// Full duplex does not let the two rounds overlap, because the reduction
/// must finish before the broadcast can start. Returns 0 for `n <= 1`.
pub fn ps_time_us(n: usize, d: f64, m: &AlphaBeta) -> f64 {
    Model::from(*m).time_us(Cost::ParameterServer, n, d)
}

/// What prices each [`Cost`] in [`render`]: one [`Model`] for every path,
/// and the fits of a `bench` run for the paths it measured (a fitted path
/// uses its own fit, the others the model).
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    pub model: Model,
    pub fits: Vec<Fit>,
}

impl Pricing {
    /// One model for every path.
    pub fn of(model: Model) -> Pricing {
        Pricing {
            model,
            fits: Vec::new(),
        }
    }

    /// The time of `cost` for `n` ranks of `d` bytes, microseconds.
    pub fn time_us(&self, cost: Cost, n: usize, d: f64) -> f64 {
        match self.fits.iter().find(|f| f.cost == cost) {
            Some(f) => f.time_us(n, d),
            None => self.model.time_us(cost, n, d),
        }
    }

    /// The size per rank at which `b` starts to be faster than `a` on `n`
    /// ranks, when `a` has the smaller fixed cost and the larger cost per
    /// byte (the parameter server against the ring): the `D` where their
    /// times are equal. `None` when one of them wins at every size.
    pub fn crossover(&self, a: Cost, b: Cost, n: usize) -> Option<f64> {
        // `b - a` in µs: positive while `a` is faster. A fitted time is not
        // affine in D (see [`Fit`]), so look for the first sign change on
        // a grid of sizes (1 B to 1 TiB, 16 points per doubling), then
        // bisect it.
        let gap = |d: f64| self.time_us(b, n, d) - self.time_us(a, n, d);
        if gap(1.0) <= 0.0 {
            return None;
        }
        let grid = (0..=40 * 16).map(|i| 2f64.powf(f64::from(i) / 16.0));
        let mut lo = 1.0;
        let hi = grid.clone().find(|&d| gap(d) <= 0.0)?;
        if let Some(below) = grid.take_while(|&d| d < hi).last() {
            lo = below;
        }
        let mut hi = hi;
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if gap(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(hi)
    }

    /// How each path is priced, one line.
    fn describe(&self) -> String {
        let m = &self.model;
        let mut s = format!(
            "alpha = {} us per round, B = {} GB/s per link direction, G = {} GB/s reduced",
            short(m.alpha_us),
            short(m.link_gbps),
            if m.reduce_gbps.is_finite() {
                short(m.reduce_gbps)
            } else {
                "inf".into()
            }
        );
        for f in &self.fits {
            let _ = write!(
                s,
                "; {}: alpha = {} us, B = {} GB/s, overlap {:.2} (fitted, reduce included)",
                cost_name(f.cost),
                short(f.alpha_us),
                short(f.link_gbps),
                f.overlap
            );
        }
        s
    }
}

/// The path a cost is named after in the tables.
fn cost_name(c: Cost) -> String {
    match c {
        Cost::Ring { slices: 0 | 1 } => "ring".into(),
        Cost::Ring { slices } => format!("ring:pipe{slices}"),
        Cost::ParameterServer => "ps".into(),
        Cost::OneShot => "oneshot".into(),
        Cost::Hier { per_node } => format!("hier:{per_node}"),
    }
}

/// `D` for a table cell: `1.5 MB`, `64 kB`, `-`.
fn size_cell(d: Option<f64>) -> String {
    match d {
        None => "-".into(),
        Some(d) if d >= 1e9 => format!("{:.1} GB", d / 1e9),
        Some(d) if d >= 1e6 => format!("{:.1} MB", d / 1e6),
        Some(d) if d >= 1e3 => format!("{:.1} kB", d / 1e3),
        Some(d) => format!("{d:.0} B"),
    }
}

/// Human-readable comparison: formula summary, traffic table (decimal MB, one
/// decimal), the `N -> inf` limit, and an alpha-beta-gamma time table of the
/// parameter server and the ring, with the faster and the size from which
/// the ring beats the parameter server.
pub fn render(d_bytes: f64, d_label: &str, ranks: &[usize], pricing: &Pricing) -> String {
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
         sends = receives 2(N-1)/N*D, which tends to 2D as N grows.\n",
    );
    let _ = writeln!(s);
    load_rows(&mut s, d_bytes, ranks);
    let _ = writeln!(s);
    time_rows(&mut s, d_bytes, ranks, pricing);
    let _ = writeln!(s);
    catalog::render(&mut s, d_bytes, d_label, ranks, &pricing.model);
    s
}

/// The traffic table's unit for messages of `d_bytes`: MB from 1 MB, kB
/// from 1 kB, else bytes, so that a small `D` never prints as `0.1 MB`.
fn traffic_unit(d_bytes: f64) -> (&'static str, f64) {
    if d_bytes >= 1e6 {
        ("MB", MB)
    } else if d_bytes >= 1e3 {
        ("kB", 1e3)
    } else {
        ("B", 1.0)
    }
}

/// The traffic table.
fn load_rows(s: &mut String, d_bytes: f64, ranks: &[usize]) {
    let (unit, per) = traffic_unit(d_bytes);
    let _ = writeln!(
        s,
        "{:>6} | {:>16} | {:>16} | {:>23} | {:>13}",
        "N",
        format!("PS root in ({unit})"),
        format!("PS root out ({unit})"),
        format!("Ring per rank sent ({unit})"),
        "Ring/PS ratio"
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
            row.ps_root_in_bytes / per,
            row.ps_root_out_bytes / per,
            row.ring_per_rank_sent_bytes / per,
            ratio
        );
    }
    let limit = format!("2D = {:.1} {unit}", 2.0 * d_bytes / per);
    let _ = writeln!(
        s,
        "{:>6} | {:>16} | {:>16} | {:>23} | {:>13}",
        "N->inf", "O(N)", "O(N)", limit, "-> 0"
    );
}

/// The time table: the PS and the ring, the faster, and the crossover.
fn time_rows(s: &mut String, d_bytes: f64, ranks: &[usize], pricing: &Pricing) {
    const RING: Cost = Cost::Ring { slices: 1 };
    let _ = writeln!(
        s,
        "Time (alpha-beta-gamma: rounds*alpha + bytes over the busiest link/B + bytes reduced/G):\n\
         ring {}\n\
         PS   {} (two rounds: gather, then broadcast)\n\
         {}",
        RING.formula(),
        Cost::ParameterServer.formula(),
        pricing.describe()
    );
    let _ = writeln!(
        s,
        "{:>6} | {:>12} | {:>12} | {:>8} | {:>14} | {:>6}",
        "N", "PS (us)", "ring (us)", "PS/ring", "ring from D =", "winner"
    );
    let _ = writeln!(s, "{}", table_rule(&[6, 12, 12, 8, 14, 6]));
    for &n in ranks {
        let ps = pricing.time_us(Cost::ParameterServer, n, d_bytes);
        let ring = pricing.time_us(RING, n, d_bytes);
        let ratio = if ring > 0.0 {
            format!("{:.2}x", ps / ring)
        } else {
            "-".to_string()
        };
        // Within the ratio's printed precision (1.00x) neither wins.
        let winner = if ring > 0.0 && (ps / ring - 1.0).abs() < 0.005 {
            "tie"
        } else if ring < ps {
            "ring"
        } else if ps < ring {
            "PS"
        } else {
            "tie"
        };
        let from = size_cell(pricing.crossover(Cost::ParameterServer, RING, n));
        let _ = writeln!(
            s,
            "{n:>6} | {ps:>12.1} | {ring:>12.1} | {ratio:>8} | {from:>14} | {winner:>6}"
        );
    }
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

#[cfg(test)]
mod tests;
