//! Every all-reduce algorithm the course compares, priced with one
//! alpha-beta-gamma model: the ones the engine runs (the PS, the ring, the
//! one-shot) and the ones it does not (recursive doubling, Rabenseifner's
//! halving-doubling, the trees, the sharded PS, the two-shot, reduction
//! inside the network).
//!
//! Each [`Algo`] says what it pays for `N` ranks of `D` bytes ([`Terms`]:
//! dependent rounds, bytes a rank sends on the critical path, bytes
//! reduced on it), under which assumption, and where its cost comes from.
//! The engine's own three take their terms from
//! [`Cost::terms`](ringreduce::algo::cost::Cost::terms), the formulas
//! `bench` fits, so the two never disagree.
//!
//! The costs follow Thakur, Rabenseifner and Gropp ("Optimization of
//! Collective Communication Operations in MPICH", 2005) for recursive
//! doubling, Rabenseifner and the binomial tree; Sanders, Speck and
//! Träff ("Two-tree algorithms for full bandwidth broadcast, reduction and
//! scan", 2009) for the double binary tree NCCL uses between nodes. A
//! `lg` is `ceil(log2 N)`; where an algorithm needs a power of two, `N`
//! that is not one pays MPICH's fold first (the extra ranks hand their
//! data to a partner, one round and `D` bytes, and get the result back at
//! the end, one more).

use super::{Cost, Model, Terms};

/// An all-reduce algorithm, as the course prices it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// The parameter server whose root takes the `N-1` messages of a round
    /// at once (the engine's `ps`: its copies are issued together).
    Ps,
    /// The same parameter server in the single-port model: the root takes
    /// one message at a time, `N-1` rounds in, `N-1` out.
    PsSinglePort,
    /// The sharded parameter server (BytePS, every rank also the server of
    /// `1/N` of the buffer): each rank sends each peer its shard at once,
    /// reduces its own, and sends it back to every peer.
    PsSharded,
    /// The ring: Reduce-Scatter then All-Gather, `2(N-1)` steps of `D/N`.
    Ring,
    /// Recursive doubling: `lg N` rounds, each exchanging the whole buffer
    /// with the partner `2^k` away and reducing it.
    RecursiveDoubling,
    /// Rabenseifner: Reduce-Scatter by recursive halving, All-Gather by
    /// recursive doubling; the ring's bytes in `2 lg N` rounds.
    Rabenseifner,
    /// A binomial tree: reduce to a root, then broadcast, whole buffers,
    /// not pipelined (MPICH's small-message reduce + bcast).
    BinomialTree,
    /// NCCL's double binary tree between nodes: two trees each carrying
    /// half the buffer, every rank a leaf in one, pipelined in chunks.
    DoubleBinaryTree,
    /// A pipelined chain (reduce along it, broadcast back): what NCCL's
    /// tree is inside one node.
    Chain,
    /// The one-shot: every rank reads (or is sent) every peer's whole
    /// input at once and reduces them (the engine's `oneshot`).
    OneShot,
    /// The two-shot: a one-shot Reduce-Scatter of `D/N` shards, then a
    /// one-shot All-Gather; in one node it is the sharded PS.
    TwoShot,
    /// Reduction inside the network (NVLink SHARP / NVLS, InfiniBand
    /// SHARP): each rank sends `D` once to the switch, which reduces and
    /// multicasts the result.
    InNetwork,
}

impl Algo {
    /// Every algorithm, in the course's order.
    pub const ALL: [Algo; 12] = [
        Algo::Ps,
        Algo::PsSinglePort,
        Algo::PsSharded,
        Algo::Ring,
        Algo::RecursiveDoubling,
        Algo::Rabenseifner,
        Algo::BinomialTree,
        Algo::DoubleBinaryTree,
        Algo::Chain,
        Algo::OneShot,
        Algo::TwoShot,
        Algo::InNetwork,
    ];

    /// Its name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Ps => "PS",
            Algo::PsSinglePort => "PS, single-port",
            Algo::PsSharded => "sharded PS",
            Algo::Ring => "ring",
            Algo::RecursiveDoubling => "recursive doubling",
            Algo::Rabenseifner => "Rabenseifner",
            Algo::BinomialTree => "binomial tree",
            Algo::DoubleBinaryTree => "double binary tree",
            Algo::Chain => "chain",
            Algo::OneShot => "one-shot",
            Algo::TwoShot => "two-shot",
            Algo::InNetwork => "in-network",
        }
    }

    /// Its cost in the article's notation (`lg` = ceil(log2 N); the
    /// power-of-two fold not written).
    pub fn formula(self) -> &'static str {
        match self {
            Algo::Ps => "2*alpha + 2(N-1)*D*beta + (N-1)*D*gamma",
            Algo::PsSinglePort => "2(N-1)*alpha + 2(N-1)*D*beta + (N-1)*D*gamma",
            Algo::PsSharded | Algo::TwoShot => "2*alpha + 2(N-1)/N*D*beta + (N-1)/N*D*gamma",
            Algo::Ring => "2(N-1)*alpha + 2(N-1)/N*D*beta + (N-1)/N*D*gamma",
            Algo::RecursiveDoubling => "lg*alpha + lg*D*beta + lg*D*gamma",
            Algo::Rabenseifner => "2lg*alpha + 2(N-1)/N*D*beta + (N-1)/N*D*gamma",
            Algo::BinomialTree => "2lg*alpha + 2lg*D*beta + lg*D*gamma",
            Algo::DoubleBinaryTree => "2lg*alpha + 2D*beta + D*gamma",
            Algo::Chain => "2(N-1)*alpha + 2D*beta + D*gamma",
            Algo::OneShot => "alpha + (N-1)*D*beta + (N-1)*D*gamma",
            Algo::InNetwork => "2*alpha + D*beta",
        }
    }

    /// What the cost assumes.
    pub fn assumption(self) -> &'static str {
        match self {
            Algo::Ps => "the root takes N-1 messages at once (its link still shared)",
            Algo::PsSinglePort => "one message at a time per rank (Thakur et al.)",
            Algo::PsSharded => "every rank reaches every peer at once (a switch)",
            Algo::Ring => "single-port: one neighbour each way",
            Algo::RecursiveDoubling => "single-port; N not a power of two: +2 rounds, +2D sent",
            Algo::Rabenseifner => "single-port; N not a power of two: +2 rounds, +2D sent",
            Algo::BinomialTree => "single-port, whole buffers, not pipelined",
            Algo::DoubleBinaryTree => "pipelined, chunk latency not charged; 3 neighbours",
            Algo::Chain => "pipelined, chunk latency not charged",
            Algo::OneShot => "every rank reaches every peer at once (a switch)",
            Algo::TwoShot => "as the sharded PS, by loads and stores in one node",
            Algo::InNetwork => "a switch that reduces (NVLS, SHARP); not run here",
        }
    }

    /// The terms for `n` ranks of `d` bytes (all 0 for `n <= 1`).
    pub fn terms(self, n: usize, d: f64) -> Terms {
        if n <= 1 {
            return Terms {
                rounds: 0.0,
                link_bytes: 0.0,
                reduce_bytes: 0.0,
            };
        }
        let nf = n as f64;
        let m = nf - 1.0;
        let lg = f64::from(n.next_power_of_two().trailing_zeros());
        let t = |rounds: f64, link_bytes: f64, reduce_bytes: f64| Terms {
            rounds,
            link_bytes,
            reduce_bytes,
        };
        // MPICH's fold for N not a power of two: the extra ranks hand their
        // D to a partner (a round, D sent, D reduced) and get the result
        // back at the end (a round, D sent), around a run on the largest
        // power of two below N.
        let folded = |inner: &dyn Fn(f64) -> Terms| -> Terms {
            if n.is_power_of_two() {
                return inner(lg);
            }
            let p = (n.next_power_of_two() / 2) as f64;
            let x = inner(p.log2());
            t(x.rounds + 2.0, x.link_bytes + 2.0 * d, x.reduce_bytes + d)
        };
        match self {
            Algo::Ps => Cost::ParameterServer.terms(n, d),
            Algo::PsSinglePort => t(2.0 * m, 2.0 * m * d, m * d),
            Algo::PsSharded | Algo::TwoShot => t(2.0, 2.0 * m / nf * d, m / nf * d),
            Algo::Ring => Cost::Ring { slices: 1 }.terms(n, d),
            Algo::RecursiveDoubling => folded(&|l| t(l, l * d, l * d)),
            Algo::Rabenseifner => folded(&|l| {
                let p = 2f64.powf(l);
                t(2.0 * l, 2.0 * (p - 1.0) / p * d, (p - 1.0) / p * d)
            }),
            Algo::BinomialTree => t(2.0 * lg, 2.0 * lg * d, lg * d),
            Algo::DoubleBinaryTree => t(2.0 * lg, 2.0 * d, d),
            Algo::Chain => t(2.0 * m, 2.0 * d, d),
            Algo::OneShot => Cost::OneShot.terms(n, d),
            Algo::InNetwork => t(2.0, d, 0.0),
        }
    }

    /// Whether it needs a switch that reduces (so it is left out of the
    /// winners: no machine here has one).
    pub fn needs_reducing_switch(self) -> bool {
        self == Algo::InNetwork
    }

    /// The time of `n` ranks of `d` bytes under `model`, microseconds.
    pub fn time_us(self, model: &Model, n: usize, d: f64) -> f64 {
        let t = self.terms(n, d);
        t.rounds * model.alpha_us
            + t.link_bytes / (model.link_gbps * 1e3)
            + t.reduce_bytes / (model.reduce_gbps * 1e3)
    }
}

/// The fastest algorithms for `n` ranks of `d` bytes under `model`, among
/// those that need no reducing switch: the best, and every other within
/// one part in a million of it (at `N = 2` the ring, Rabenseifner and the
/// sharded PS are the same exchange), in the course's order.
pub fn fastest(model: &Model, n: usize, d: f64) -> Vec<Algo> {
    let times: Vec<(Algo, f64)> = Algo::ALL
        .into_iter()
        .filter(|a| !a.needs_reducing_switch())
        .map(|a| (a, a.time_us(model, n, d)))
        .collect();
    let best = times.iter().map(|&(_, t)| t).fold(f64::INFINITY, f64::min);
    times
        .into_iter()
        .filter(|&(_, t)| t <= best * (1.0 + 1e-6))
        .map(|(a, _)| a)
        .collect()
}

/// The sizes of the winners' table: 8 B to 1 GiB, and `d` where it is
/// not one of them.
fn winner_sizes(d: f64) -> Vec<f64> {
    let mut v: Vec<f64> = [
        8.0,
        4096.0,
        262_144.0,
        4_194_304.0,
        67_108_864.0,
        1_073_741_824.0,
    ]
    .into_iter()
    .collect();
    if !v.contains(&d) && d >= 1.0 {
        v.push(d);
        v.sort_by(f64::total_cmp);
    }
    v
}

/// The catalog for [`super::render`]: every algorithm's time at `d` for
/// each of `ranks` (the fastest marked), its cost and assumption, then
/// the fastest per size and rank count.
pub fn render(s: &mut String, d: f64, d_label: &str, ranks: &[usize], model: &Model) {
    use std::fmt::Write as _;
    let ns: Vec<usize> = ranks.iter().copied().filter(|&n| n >= 2).collect();
    if ns.is_empty() {
        let _ = writeln!(s, "Every all-reduce algorithm: one rank exchanges nothing.");
        return;
    }
    let _ = writeln!(
        s,
        "Every all-reduce algorithm, the same constants (us at D = {d_label}; * the fastest\n\
         without a reducing switch; lg = ceil(log2 N)):"
    );
    let name_w = Algo::ALL.iter().map(|a| a.name().len()).max().unwrap_or(0);
    let mut head = format!("{:<name_w$}", "algorithm");
    let mut widths = vec![name_w];
    for &n in &ns {
        let _ = write!(head, " | {:>10}", format!("N={n}"));
        widths.push(10);
    }
    let _ = writeln!(s, "{head} | cost");
    widths.push(45);
    let _ = writeln!(s, "{}", super::table_rule(&widths));
    let winners: Vec<Vec<Algo>> = ns.iter().map(|&n| fastest(model, n, d)).collect();
    for a in Algo::ALL {
        let mut row = format!("{:<name_w$}", a.name());
        for (i, &n) in ns.iter().enumerate() {
            let star = if winners[i].contains(&a) { "*" } else { " " };
            let _ = write!(row, " | {:>9}{star}", time_cell(a.time_us(model, n, d)));
        }
        let _ = writeln!(s, "{row} | {}", a.formula());
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "What each cost assumes:");
    for a in Algo::ALL {
        let _ = writeln!(s, "  {:<name_w$}  {}", a.name(), a.assumption());
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "The fastest by size per rank and rank count (same constants; no reducing switch):"
    );
    let sizes = winner_sizes(d);
    let cells: Vec<Vec<String>> = sizes
        .iter()
        .map(|&size| {
            ns.iter()
                .map(|&n| {
                    let names: Vec<&str> =
                        fastest(model, n, size).iter().map(|a| a.name()).collect();
                    names.join(" = ")
                })
                .collect()
        })
        .collect();
    let mut widths = vec![10];
    for (i, &n) in ns.iter().enumerate() {
        let w = cells.iter().map(|r| r[i].len()).max().unwrap_or(0);
        widths.push(w.max(format!("N={n}").len()));
    }
    let mut head = format!("{:>10}", "D");
    for (i, &n) in ns.iter().enumerate() {
        let _ = write!(head, " | {:<w$}", format!("N={n}"), w = widths[i + 1]);
    }
    let _ = writeln!(s, "{}", head.trim_end());
    let _ = writeln!(s, "{}", super::table_rule(&widths));
    for (size, row_cells) in sizes.iter().zip(&cells) {
        let mut row = format!("{:>10}", ringreduce::size::format_bytes(*size as u64));
        for (i, c) in row_cells.iter().enumerate() {
            let _ = write!(row, " | {:<w$}", c, w = widths[i + 1]);
        }
        let _ = writeln!(s, "{}", row.trim_end());
    }
    s.push_str(
        "\nThe model charges bytes per rank, not which links they cross: where ranks are\n\
         linked to their neighbours only (a ring of links), the algorithms that talk to\n\
         farther partners share links, and the ring (or the chain) is the one that\n\
         reaches the lower bound, 2(N-1)/N*D sent per rank (in-network reduction: D).\n",
    );
}

/// A time for the catalog: four significant digits up to 10^6 us.
fn time_cell(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3e}", us)
    } else if us >= 100.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

#[cfg(test)]
mod tests;
