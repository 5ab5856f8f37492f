//! What an algorithm costs, in bytes and rounds (pure math): the traffic
//! formulas of the Parameter Server and the ring, and each algorithm's
//! [`Cost`] (its alpha-beta-gamma terms), which `bench` fits to measured
//! rows and the `theory` command prices.
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

/// The shape of an all-reduce algorithm's cost: what it pays in dependent
/// rounds, in bytes over the busiest link direction and in bytes reduced on
/// its critical path, as functions of `N` and `D`. Each algorithm names its
/// own ([`super::Algorithm::cost`]); `ringreduce theory` prices it.
///
/// The alpha-beta-gamma costs are Thakur, Rabenseifner and Gropp's
/// ("Optimization of Collective Communication Operations in MPICH", 2005);
/// the ring's `2(N-1)/N·D` is the lower bound on what each rank must send
/// (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for
/// clusters of workstations", 2009).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// Reduce-Scatter then All-Gather around the ring, each chunk cut into
    /// `slices` pieces (`ring:pipeK`). Every step moves `D/N` over each
    /// link, so the link carries `2(N-1)/N·D` whatever `K` is; slicing lets
    /// the reduce of slice k run under the copy of slice k+1, so only one
    /// slice's reduce per Reduce-Scatter step is exposed, `(N-1)/(NK)·D`;
    /// and every slice is a hand-off of its own (a copy, then a wait on
    /// another rank's event): `2(N-1)·K` rounds. `K = 1` is the plain
    /// ring: `2(N-1)` steps, `2(N-1)/N·D` moved and `(N-1)/N·D` reduced.
    Ring {
        /// The slices per chunk (`K`).
        slices: usize,
    },
    /// The parameter server: every worker sends its `D` bytes to the root
    /// at once (one round), the root reduces the `N-1` inputs and sends the
    /// result back (a second round). The root's link carries `(N-1)·D` each
    /// way, one direction after the other, and it reduces `(N-1)·D`.
    ParameterServer,
    /// The one-shots: every rank's input goes to every other rank at once
    /// (one round), and each rank reduces the `N-1` inputs it received:
    /// `(N-1)·D` in over each rank's link, `(N-1)·D` reduced.
    OneShot,
    /// The hierarchical all-reduce (`hier:G`) on one machine, where every
    /// link is alike: a ring of `G` inside the node on `D`, then a ring of
    /// `K = N/G` on a rail on `D/G`. `2(G-1) + 2(K-1)` rounds,
    /// `2(G-1)/G·D + 2(K-1)/K·D/G` over the busiest link direction (the
    /// two rings run one after the other), `(G-1)/G·D + (K-1)/K·D/G`
    /// reduced. Between machines the two rings see different links:
    /// `theory --nodes` prices them separately.
    Hier {
        /// The ranks per node (`G`).
        per_node: usize,
    },
}

/// The three quantities a [`Cost`] charges for one all-reduce.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Terms {
    /// Dependent rounds (each pays `alpha`).
    pub rounds: f64,
    /// Bytes through the busiest link direction on the critical path.
    pub link_bytes: f64,
    /// Bytes reduced on the critical path.
    pub reduce_bytes: f64,
}

impl Cost {
    /// The terms for `n` ranks of `d` bytes each (all 0 for `n <= 1`).
    pub fn terms(self, n: usize, d: f64) -> Terms {
        if n <= 1 {
            return Terms {
                rounds: 0.0,
                link_bytes: 0.0,
                reduce_bytes: 0.0,
            };
        }
        let m = n as f64 - 1.0;
        match self {
            Cost::Ring { slices } => {
                let k = slices.max(1) as f64;
                Terms {
                    rounds: 2.0 * m * k,
                    link_bytes: 2.0 * m * d / n as f64,
                    reduce_bytes: m * d / (n as f64 * k),
                }
            }
            Cost::ParameterServer => Terms {
                rounds: 2.0,
                link_bytes: 2.0 * m * d,
                reduce_bytes: m * d,
            },
            Cost::OneShot => Terms {
                rounds: 1.0,
                link_bytes: m * d,
                reduce_bytes: m * d,
            },
            Cost::Hier { per_node } => {
                let g = per_node.clamp(1, n) as f64;
                let k = n as f64 / g;
                Terms {
                    rounds: 2.0 * (g - 1.0) + 2.0 * (k - 1.0),
                    link_bytes: 2.0 * (g - 1.0) / g * d + 2.0 * (k - 1.0) / k * d / g,
                    reduce_bytes: (g - 1.0) / g * d + (k - 1.0) / k * d / g,
                }
            }
        }
    }

    /// The formula in the article's notation.
    pub fn formula(self) -> String {
        match self {
            Cost::Ring { slices: 0 | 1 } => {
                "2(N-1)*alpha + 2(N-1)/N*D*beta + (N-1)/N*D*gamma".into()
            }
            Cost::Ring { slices } => {
                format!("2(N-1)*{slices}*alpha + 2(N-1)/N*D*beta + (N-1)/({slices}N)*D*gamma")
            }
            Cost::ParameterServer => "2*alpha + 2(N-1)*D*beta + (N-1)*D*gamma".into(),
            Cost::OneShot => "alpha + (N-1)*D*beta + (N-1)*D*gamma".into(),
            Cost::Hier { per_node } => format!(
                "2(G-1+K-1)*alpha + (2(G-1)/G*D + 2(K-1)/K*D/G)*beta \
                 + ((G-1)/G*D + (K-1)/K*D/G)*gamma, G = {per_node}, K = N/G"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
