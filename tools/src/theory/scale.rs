//! The projection past one machine: `K` nodes of `G` GPUs, an all-reduce of
//! `D` bytes per GPU, priced for the flat ring over all `K·G` ranks, the
//! hierarchical all-reduce (`hier:G`) and a double binary tree between the
//! nodes (pure math; `ringreduce theory --nodes K --gpus-per-node G`).
//!
//! Assumptions, each named again in [`render`]'s output:
//! * Two kinds of link, each `alpha + bytes / B` per message, full duplex:
//!   inside a node (NVLink between any two GPUs) and between nodes (one NIC
//!   per GPU, "rail-optimized": GPU `l` of every node on rail `l`, and the
//!   rails independent). The reduce is free (not priced).
//! * The flat ring is one ring over all `N = K·G` ranks, nodes in order,
//!   so `K` of its hops cross the network (none when `K = 1`). Its `2(N-1)`
//!   steps are synchronous: each lasts as long as the slowest hop,
//!   `alpha + (D/N)/B` of the network when `K > 1`.
//! * The hierarchical all-reduce runs its three phases one after the other:
//!   a ring of `G` inside the node (reduce-scatter and all-gather together
//!   `2(G-1)·alpha + 2(G-1)/G·D/B`), and on each rail in parallel a ring of
//!   `K` on `D/G` (`2(K-1)·alpha + 2(K-1)/K·(D/G)/B` of the network).
//! * The tree is NCCL's double binary tree between the nodes, on each
//!   rail's `D/G` after the same reduce-scatter inside the node (and before
//!   its all-gather): `2·ceil(log2 K)` network latencies (up the tree, then
//!   down) and `2·D/G` through each rank's NIC direction (it sends its
//!   reduced share up and the result down; the two trees, each on half the
//!   data, keep every NIC equally loaded), `D/G` on two nodes (each is the
//!   root of one tree and the leaf of the other). NCCL runs it as one
//!   pipeline, the node's phases included: every latency is paid, the
//!   bytes only of the slower of the node's ring and the network.
//! * The flat ring over all NICs (`ring:nics`, NCCL's rings between nodes)
//!   runs `G` rings at once, each over all `N` GPUs on `D/G` of the data,
//!   each leaving every node through a different GPU and so through a
//!   different NIC (NVIDIA/nccl#530): per step a GPU sends `D/(G·N)` on
//!   each of its rings, `D/N` in all over NVLink, and one ring's chunk
//!   `D/(G·N)` over its NIC. `2(N-1)` steps, each as slow as its slowest
//!   hop.
//! * `hier:pipe` is the hierarchical all-reduce with its phases pipelined
//!   (in slices, the rail's ring starts on a slice as soon as the node's
//!   reduce-scatter has it): every latency is paid, the bytes only of the
//!   slower phase.
//! * `nvls+sharp` is a what-if, not a path of this engine: reduction inside
//!   the switches (NVLink SHARP in the node, InfiniBand SHARP between
//!   nodes), each GPU sending its `D` into the node's switch once and
//!   reading the result once, each rail's NIC `D/G` each way; the two
//!   pipelined, one latency each.

use std::fmt::Write as _;

/// One kind of link: `alpha` per message plus `bytes / B`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Latency per message (per dependent step), microseconds.
    pub alpha_us: f64,
    /// Bandwidth per direction, GB/s (1e9 B/s).
    pub gbps: f64,
}

impl Link {
    /// The time of `rounds` messages in a row carrying `bytes` in all,
    /// microseconds.
    pub fn time_us(&self, rounds: f64, bytes: f64) -> f64 {
        rounds * self.alpha_us + bytes / (self.gbps * 1e3)
    }
}

/// Inside a node, unless a fit says otherwise: a ring step on 2 x H200
/// (13 us) and NVLink NV18's peer-copy ceiling (380 GB/s).
pub const NVLINK_H200: Link = Link {
    alpha_us: 13.0,
    gbps: 380.0,
};

/// Between nodes, stated (not measured): 400 Gb/s per rail (50 GB/s each
/// direction) and 5 us per message.
pub const NETWORK_STATED: Link = Link {
    alpha_us: 5.0,
    gbps: 50.0,
};

/// `K` nodes of `G` GPUs and their two kinds of link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cluster {
    /// `K`, at least 1.
    pub nodes: usize,
    /// `G`, at least 1.
    pub per_node: usize,
    /// Between two GPUs of a node.
    pub intra: Link,
    /// Between two nodes, per rail (one NIC per GPU).
    pub inter: Link,
}

/// The projected times of one all-reduce, microseconds: the paths of this
/// engine (`flat_ring_us`, `hier_us`) and the others priced beside them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    pub flat_ring_us: f64,
    pub hier_us: f64,
    pub tree_us: f64,
    /// `G` rings over all GPUs, one through each NIC (NCCL's).
    pub nic_rings_us: f64,
    /// `hier` with its phases pipelined.
    pub hier_pipe_us: f64,
    /// Reduction in the switches (a what-if).
    pub in_network_us: f64,
}

impl Cluster {
    /// `N = K·G`.
    pub fn ranks(&self) -> usize {
        self.nodes.max(1) * self.per_node.max(1)
    }

    /// The flat ring over all ranks: `2(N-1)` synchronous steps of `D/N`,
    /// each as slow as its slowest hop (the network when `K > 1`).
    pub fn flat_ring_us(&self, d: f64) -> f64 {
        let n = self.ranks() as f64;
        if n <= 1.0 {
            return 0.0;
        }
        let chunk = d / n;
        let mut step = 0.0f64;
        if self.per_node > 1 {
            step = step.max(self.intra.time_us(1.0, chunk));
        }
        if self.nodes > 1 {
            step = step.max(self.inter.time_us(1.0, chunk));
        }
        2.0 * (n - 1.0) * step
    }

    /// Reduce-scatter plus all-gather around the ring of the node's `G`
    /// GPUs on `D`: `2(G-1)·alpha + 2(G-1)/G·D/B`.
    pub fn intra_us(&self, d: f64) -> f64 {
        let g = self.per_node.max(1) as f64;
        self.intra.time_us(2.0 * (g - 1.0), 2.0 * (g - 1.0) / g * d)
    }

    /// The hierarchical all-reduce: the node's ring, then a ring of `K` on
    /// each rail's `D/G`: `2(K-1)·alpha + 2(K-1)/K·(D/G)/B` of the network.
    pub fn hier_us(&self, d: f64) -> f64 {
        let (g, k) = (self.per_node.max(1) as f64, self.nodes.max(1) as f64);
        let rail = d / g;
        self.intra_us(d)
            + self
                .inter
                .time_us(2.0 * (k - 1.0), 2.0 * (k - 1.0) / k * rail)
    }

    /// The double binary tree between the nodes on each rail's `D/G`,
    /// pipelined with the node's reduce-scatter and all-gather:
    /// `2(G-1)·alpha + 2·ceil(log2 K)·alpha_net` and the slower of
    /// `2(G-1)/G·D/B` and `2·(D/G)/B_net` (`D/G` on two nodes).
    pub fn tree_us(&self, d: f64) -> f64 {
        let g = self.per_node.max(1) as f64;
        let depth = tree_depth(self.nodes);
        let node = self.intra.time_us(0.0, 2.0 * (g - 1.0) / g * d);
        let net = match self.nodes {
            0 | 1 => 0.0,
            2 => self.inter.time_us(0.0, d / g),
            _ => self.inter.time_us(0.0, 2.0 * d / g),
        };
        2.0 * (g - 1.0) * self.intra.alpha_us + 2.0 * depth * self.inter.alpha_us + node.max(net)
    }

    /// `G` rings over all `N` GPUs at once, each on `D/G`, each crossing
    /// between nodes through its own NIC: `2(N-1)` steps of `D/N` over
    /// NVLink (the `G` rings' chunks together) and `D/(G·N)` over a NIC,
    /// each step as slow as its slower hop.
    pub fn nic_rings_us(&self, d: f64) -> f64 {
        let (n, g) = (self.ranks() as f64, self.per_node.max(1) as f64);
        if n <= 1.0 {
            return 0.0;
        }
        let mut step = 0.0f64;
        if self.per_node > 1 {
            step = step.max(self.intra.time_us(1.0, d / n));
        }
        if self.nodes > 1 {
            step = step.max(self.inter.time_us(1.0, d / (g * n)));
        }
        2.0 * (n - 1.0) * step
    }

    /// The hierarchical all-reduce with its phases pipelined: both
    /// phases' latencies, and the bytes of the slower phase only.
    pub fn hier_pipe_us(&self, d: f64) -> f64 {
        let (g, k) = (self.per_node.max(1) as f64, self.nodes.max(1) as f64);
        let latency = 2.0 * (g - 1.0) * self.intra.alpha_us + 2.0 * (k - 1.0) * self.inter.alpha_us;
        let node = self.intra.time_us(0.0, 2.0 * (g - 1.0) / g * d);
        let rail = self.inter.time_us(0.0, 2.0 * (k - 1.0) / k * d / g);
        latency + node.max(rail)
    }

    /// The what-if of reduction in the switches: each GPU's `D` into the
    /// node's switch once and the result back once (one NVLink latency,
    /// `D/B` each way), each rail's `D/G` into the network's switch and
    /// back (one network latency), pipelined.
    pub fn in_network_us(&self, d: f64) -> f64 {
        if self.ranks() <= 1 {
            return 0.0;
        }
        let g = self.per_node.max(1) as f64;
        let (mut latency, mut bytes) = (0.0f64, 0.0f64);
        if self.per_node > 1 {
            latency += self.intra.alpha_us;
            bytes = bytes.max(self.intra.time_us(0.0, d));
        }
        if self.nodes > 1 {
            latency += self.inter.alpha_us;
            bytes = bytes.max(self.inter.time_us(0.0, d / g));
        }
        latency + bytes
    }

    /// Every path priced.
    pub fn project(&self, d: f64) -> Projection {
        Projection {
            flat_ring_us: self.flat_ring_us(d),
            hier_us: self.hier_us(d),
            tree_us: self.tree_us(d),
            nic_rings_us: self.nic_rings_us(d),
            hier_pipe_us: self.hier_pipe_us(d),
            in_network_us: self.in_network_us(d),
        }
    }
}

/// nccl-tests' bus bandwidth of an all-reduce of `d` bytes on `n` ranks in
/// `us` microseconds: `2(n-1)/n · d / t`, GB/s.
pub fn busbw_gbps(n: usize, d: f64, us: f64) -> f64 {
    let n = n.max(1) as f64;
    if us <= 0.0 {
        return 0.0;
    }
    2.0 * (n - 1.0) / n * d / (us * 1e3)
}

/// `ceil(log2 K)`: the depth of a binary tree of `K` nodes (0 for one).
pub fn tree_depth(nodes: usize) -> f64 {
    let k = nodes.max(1);
    f64::from(usize::BITS - (k - 1).leading_zeros()) * f64::from(u8::from(k > 1))
}

impl Projection {
    /// Every path by name, this engine's first.
    pub fn all(&self) -> [(&'static str, f64); 6] {
        [
            ("ring", self.flat_ring_us),
            ("hier", self.hier_us),
            ("ring:nics", self.nic_rings_us),
            ("hier:pipe", self.hier_pipe_us),
            ("tree", self.tree_us),
            ("nvls+sharp", self.in_network_us),
        ]
    }

    /// The fastest of this engine's paths (`ring`, `hier`) by name, or
    /// `tie: a, b` when both take the least time (equal to a part in a
    /// billion: an exact tie of the model, as when one node leaves nothing
    /// to cross).
    pub fn fastest(&self) -> String {
        least(&self.all()[..2])
    }

    /// The fastest path priced, this engine's or not (the what-if of
    /// reduction in the switches left out), as [`Projection::fastest`].
    pub fn fastest_priced(&self) -> String {
        least(&self.all()[..5])
    }
}

/// The name of the least time of `all`, or `tie: a, b`.
fn least(all: &[(&str, f64)]) -> String {
    let min = all.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let best: Vec<&str> = all
        .iter()
        .filter(|x| x.1 <= min + min.abs() * 1e-9)
        .map(|x| x.0)
        .collect();
    match best.as_slice() {
        [one] => (*one).to_string(),
        many => format!("tie: {}", many.join(", ")),
    }
}

/// The assumptions, one line each, as [`render`] prints them.
pub fn assumptions(c: &Cluster, intra_from: &str) -> Vec<String> {
    vec![
        format!(
            "inside a node: alpha = {} us, B = {} GB/s per direction between any two GPUs ({intra_from})",
            c.intra.alpha_us, c.intra.gbps
        ),
        format!(
            "between nodes: alpha = {} us, B = {} GB/s per direction per rail (stated, not measured): one NIC per GPU, GPU l of every node on rail l, rails independent",
            c.inter.alpha_us, c.inter.gbps
        ),
        "the reduce is free; links are full duplex; every message pays alpha + bytes/B".into(),
        "ring: one ring over all K*G GPUs, nodes in order; 2(N-1) synchronous steps of D/N, each as slow as its slowest hop (the network once K > 1)".into(),
        "hier: ring of G in the node (2(G-1) alpha + 2(G-1)/G*D/B), then on every rail in parallel a ring of K on D/G (2(K-1) alpha + 2(K-1)/K*D/G/B), phases not overlapped".into(),
        "tree: the node's ring as hier, and between nodes NCCL's double binary tree on each rail's D/G: 2*ceil(log2 K) alpha (up, then down), 2*D/G through each NIC direction (its share up, the result down; D/G on 2 nodes), one pipeline with the node's phases (every latency, the slower phase's bytes)".into(),
        "ring:nics (NCCL's rings, not a path of this engine): G rings over all N GPUs at once on D/G each, each leaving a node through its own NIC; 2(N-1) steps of D/N over NVLink and D/(G*N) over a NIC, each as slow as its slower hop".into(),
        "hier:pipe: hier with its phases pipelined in slices: every latency, the bytes of the slower phase only".into(),
        "nvls+sharp (a what-if: reduction inside the switches): each GPU's D into the node's switch and back (alpha + D/B), each rail's D/G into the network's switch and back (alpha + D/G/B), pipelined".into(),
    ]
}

/// The projection table: one row per node count, at `d` bytes per GPU.
pub fn render(
    d: f64,
    d_label: &str,
    per_node: usize,
    nodes: &[usize],
    intra: Link,
    inter: Link,
    intra_from: &str,
) -> String {
    let mut s = String::new();
    let c0 = Cluster {
        nodes: 1,
        per_node,
        intra,
        inter,
    };
    // Writing into a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(
        s,
        "All-reduce of D = {d_label} ({d:.0} B) per GPU on K nodes of G = {per_node} GPUs (projected, not measured)"
    );
    for a in assumptions(&c0, intra_from) {
        let _ = writeln!(s, "  assumes {a}");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| K nodes | N GPUs | ring (us) | hier (us) | ring:nics (us) | hier:pipe (us) | tree (us) | nvls+sharp what-if (us) | fastest of ring, hier | fastest priced | its busbw (GB/s) | hier's bytes per GPU across nodes |"
    );
    let _ = writeln!(
        s,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |"
    );
    for &k in nodes {
        let c = Cluster { nodes: k, ..c0 };
        let p = c.project(d);
        let k_f = k.max(1) as f64;
        let across = 2.0 * (k_f - 1.0) / k_f * d / per_node.max(1) as f64;
        let best = p.all()[..5]
            .iter()
            .map(|x| x.1)
            .fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            s,
            "| {k} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {:.1} | {:.0} |",
            c.ranks(),
            p.flat_ring_us,
            p.hier_us,
            p.nic_rings_us,
            p.hier_pipe_us,
            p.tree_us,
            p.in_network_us,
            p.fastest(),
            p.fastest_priced(),
            busbw_gbps(c.ranks(), d, best),
            across
        );
    }
    s
}

#[cfg(test)]
mod tests;
