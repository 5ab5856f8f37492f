//! The algorithms, one file each. Each is a pure function from
//! (ranks, count, in/out of place, options) to a [`Plan`] that any backend runs.

pub mod oneshot;
pub mod ps;
pub mod ring;

use crate::plan::{Buf, Label, Lane, Plan, PlanBuilder, Region, SignalId};

/// A concrete algorithm with its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algo {
    /// Ring: Reduce-Scatter + All-Gather, chunks cut into `slices` pipeline
    /// slices, `slots` scratch buffers used by step parity.
    Ring {
        slices: usize,
        slots: usize,
        lanes: usize,
    },
    /// Parameter server with rank 0 as root.
    ParameterServer,
    /// Every rank pushes its whole buffer to every other rank (in `slices`
    /// pieces), then reduces each piece as it lands.
    ///
    /// `chain`: consecutive unsliced one-shot calls of the same size skip the
    /// cross-rank start fence, using the two scratch halves alternately (see
    /// [`oneshot`]); `false` fences every call.
    OneShot { slices: usize, chain: bool },
    /// Out of place: every rank pulls every other rank's send buffer and
    /// reduces, with no cross-rank event (in `slices` pieces: pulls on the
    /// copy stream, each piece reduced as it lands); in place: the chained
    /// one-shot.
    OneShotPull { slices: usize },
    /// Out of place: the reduce kernel reads the other ranks' send buffers
    /// through peer access (no copy call, no event); in place: the flag
    /// one-shot ([`Algo::OneShotFlag`]).
    OneShotFused,
    /// 2 ranks: the chained push one-shot, run by the CUDA backend as one
    /// kernel per rank that pushes, raises a flag in the peer's memory, waits
    /// for the peer's flag and reduces (no copy call, no event); in place
    /// and out of place. Other rank counts: [`Algo::ONESHOT`].
    OneShotFlag,
}

impl Algo {
    /// The plain ring of the mission: one copy and one reduce per step.
    pub const RING: Algo = Algo::Ring {
        slices: 1,
        slots: 2,
        lanes: 1,
    };

    /// One copy and one kernel per peer.
    pub const ONESHOT: Algo = Algo::OneShot {
        slices: 1,
        chain: true,
    };

    /// The unsliced pull one-shot.
    pub const ONESHOT_PULL: Algo = Algo::OneShotPull { slices: 1 };

    /// Short name shown in output, e.g. `ring`, `ring:pipe4`, `ps`, `oneshot`.
    pub fn label(&self) -> String {
        match self {
            Algo::Ring {
                slices: 1,
                lanes: 1,
                ..
            } => "ring".into(),
            Algo::Ring {
                slices, lanes: 1, ..
            } => format!("ring:pipe{slices}"),
            Algo::Ring { slices, lanes, .. } => format!("ring:pipe{slices}x{lanes}"),
            Algo::ParameterServer => "ps".into(),
            Algo::OneShot {
                slices: 1,
                chain: true,
            } => "oneshot".into(),
            Algo::OneShot { slices: 1, .. } => "oneshot:fenced".into(),
            Algo::OneShot { slices, .. } => format!("oneshot:pipe{slices}"),
            Algo::OneShotPull { slices: 1 } => "oneshot:pull".into(),
            Algo::OneShotPull { slices } => format!("oneshot:pull{slices}"),
            Algo::OneShotFused => "oneshot:fused".into(),
            Algo::OneShotFlag => "oneshot:flag".into(),
        }
    }

    /// Build the plan for `ranks` ranks and `count` elements of `elem_size` bytes.
    pub fn plan(&self, ranks: usize, count: usize, elem_size: usize, in_place: bool) -> Plan {
        match *self {
            Algo::Ring {
                slices,
                slots,
                lanes,
            } => ring::plan(ranks, count, elem_size, in_place, slices, slots, lanes),
            Algo::ParameterServer => ps::plan(ranks, count, in_place),
            Algo::OneShot { slices, .. } => {
                oneshot::plan(ranks, count, elem_size, in_place, slices, 0, true)
            }
            Algo::OneShotPull { slices } => {
                oneshot::pull_plan(ranks, count, elem_size, in_place, slices)
            }
            Algo::OneShotFused => oneshot::fused_plan(ranks, count, elem_size, in_place),
            Algo::OneShotFlag => oneshot::flag_plan(ranks, count, elem_size, in_place, 0, true),
        }
    }
}

/// What the user asks for; `Auto` picks by size (see [`choose`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlgoChoice {
    Auto,
    Fixed(Algo),
}

impl std::str::FromStr for AlgoChoice {
    type Err = String;
    /// `auto`, `ring`, `ring:pipeK`, `ps`, `oneshot`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        Ok(match s.as_str() {
            "auto" => AlgoChoice::Auto,
            "ring" => AlgoChoice::Fixed(Algo::RING),
            "ps" | "parameter-server" => AlgoChoice::Fixed(Algo::ParameterServer),
            "oneshot" | "one-shot" => AlgoChoice::Fixed(Algo::ONESHOT),
            "oneshot:pull" => AlgoChoice::Fixed(Algo::ONESHOT_PULL),
            "oneshot:fused" => AlgoChoice::Fixed(Algo::OneShotFused),
            "oneshot:flag" => AlgoChoice::Fixed(Algo::OneShotFlag),
            "oneshot:fenced" => AlgoChoice::Fixed(Algo::OneShot {
                slices: 1,
                chain: false,
            }),
            other => {
                let slices = |k: &str| -> Result<usize, String> {
                    k.parse()
                        .ok()
                        .filter(|&k| (1..=64).contains(&k))
                        .ok_or_else(|| format!("bad slice count in {other:?} (1..=64)"))
                };
                if let Some(k) = other.strip_prefix("ring:pipe") {
                    let (k, lanes) = match k.split_once('x') {
                        Some((k, "2")) => (k, 2),
                        Some((k, "1")) => (k, 1),
                        Some(_) => {
                            return Err(format!("bad copy-lane count in {other:?} (x1 or x2)"))
                        }
                        None => (k, 1),
                    };
                    AlgoChoice::Fixed(Algo::Ring {
                        slices: slices(k)?,
                        slots: 2,
                        lanes,
                    })
                } else if let Some(k) = other.strip_prefix("oneshot:pull") {
                    AlgoChoice::Fixed(Algo::OneShotPull { slices: slices(k)? })
                } else if let Some(k) = other.strip_prefix("oneshot:pipe") {
                    AlgoChoice::Fixed(Algo::OneShot {
                        slices: slices(k)?,
                        chain: false,
                    })
                } else {
                    return Err(format!(
                        "unknown algorithm {other:?} (expected auto, ring, ring:pipeK, ring:pipeKx2, oneshot, oneshot:pull, oneshot:pullK, oneshot:fused, oneshot:flag, oneshot:fenced, oneshot:pipeK, ps)"
                    ));
                }
            }
        })
    }
}

/// Size-based choice for `Auto`, from the 2 x H200 runs of 2026-11-29
/// (docs/perf-notes.md): for 2 ranks up to 16 MiB the fused one-shot (out of
/// place the kernel reads the peer's send buffer: 1.4x-2.7x NCCL from 8 B to
/// 8 MiB, 307 GB/s at 16 MiB vs 227 for ring:pipe2; in place the flag
/// one-shot, one exchange kernel per rank: 6.7-10 us per call up to 1 MiB
/// vs NCCL's 12-18, 1.13x NCCL at 16 MiB); then ring:pipe2 up to 512 MiB
/// (1.24x NCCL at 32-256 MiB, where the flag one-shot falls to 0.9x) and
/// ring:pipe4 from 1 GiB (383 GB/s, 99% of the ceiling).
/// The thresholds are in bytes per rank.
pub fn choose(ranks: usize, bytes: usize) -> Algo {
    if ranks <= 2 && bytes <= ONESHOT_MAX_BYTES {
        return Algo::OneShotFused;
    }
    let slices = if bytes >= PIPE4_MIN_BYTES { 4 } else { 2 };
    Algo::Ring {
        slices,
        slots: 2,
        lanes: 1,
    }
}

/// The path forced by the environment variable `RINGREDUCE_ALGO` (read once),
/// if it is set to a fixed algorithm. An unparsable value is reported once on
/// stderr and ignored.
pub fn forced() -> Option<Algo> {
    static FORCED: std::sync::OnceLock<Option<Algo>> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| {
        let v = std::env::var("RINGREDUCE_ALGO").ok()?;
        match v.parse::<AlgoChoice>() {
            Ok(AlgoChoice::Fixed(a)) => Some(a),
            Ok(AlgoChoice::Auto) => None,
            Err(e) => {
                eprintln!("ringreduce: ignoring RINGREDUCE_ALGO: {e}");
                None
            }
        }
    })
}

/// Up to this size, 2 ranks use the one-shot path (pull out of place, chained
/// push in place).
pub const ONESHOT_MAX_BYTES: usize = 16 << 20;

/// From this size the ring cuts each chunk into 4 slices instead of 2.
pub const PIPE4_MIN_BYTES: usize = 1 << 30;

/// Plans for 1 rank or 0 elements: only the out-of-place local copy.
fn local_copy_only(mut b: PlanBuilder, begin: &[SignalId]) -> Plan {
    let plan_count = b.finish_ref().count;
    let ranks = begin.len();
    let out_of_place = b.input() == Buf::Send;
    for (r, &bg) in begin.iter().enumerate() {
        let mut end = vec![];
        if out_of_place && plan_count > 0 {
            end.extend(b.copy(
                r,
                Lane::Copy,
                r,
                Region::new(Buf::Send, 0..plan_count),
                Region::new(Buf::Recv, 0..plan_count),
                vec![bg],
                Label {
                    note: "local copy",
                    ..Label::default()
                },
            ));
        }
        b.end(r, end);
    }
    debug_assert_eq!(ranks, b.finish_ref().ranks);
    b.finish()
}

/// Not an all-reduce: every rank's compute lane waits until every other
/// rank's has reached this point (a Begin each, and an End waiting for all
/// of them). The engine issues it before replaying captured flag one-shot
/// calls that do not continue a chain.
pub fn fence_plan(ranks: usize) -> Plan {
    let mut b = PlanBuilder::new("fence", ranks, 0, false);
    let begin = b.begin_all();
    for r in 0..ranks {
        b.end(r, begin.clone());
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn all_algos() -> Vec<Algo> {
        let mut v = vec![
            Algo::OneShotFused,
            Algo::OneShotFlag,
            Algo::ONESHOT_PULL,
            Algo::OneShotPull { slices: 3 },
            Algo::ParameterServer,
            Algo::ONESHOT,
            Algo::OneShot {
                slices: 3,
                chain: false,
            },
        ];
        for slices in [1, 2, 3, 4] {
            for slots in [1, 2] {
                for lanes in [1, 2] {
                    v.push(Algo::Ring {
                        slices,
                        slots,
                        lanes,
                    });
                }
            }
        }
        v
    }

    /// Every plan of every algorithm is deadlock-free, race-free, bracketed by
    /// Begin/End, and sums every input exactly once (symbolic execution).
    #[test]
    fn plans_validate_small() {
        for algo in all_algos() {
            for n in 1..=6 {
                for count in [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 64, 67] {
                    for in_place in [false, true] {
                        let p = algo.plan(n, count, 4, in_place);
                        if let Err(e) = p.validate() {
                            panic!(
                                "{} n={n} count={count} in_place={in_place}: {e}",
                                algo.label()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn plans_validate_up_to_9_ranks() {
        for algo in [
            Algo::RING,
            Algo::Ring {
                slices: 2,
                slots: 2,
                lanes: 1,
            },
            Algo::ParameterServer,
            Algo::ONESHOT,
        ] {
            for n in 7..=9 {
                for count in [0, 5, 36, 100] {
                    for in_place in [false, true] {
                        let p = algo.plan(n, count, 4, in_place);
                        p.validate().unwrap_or_else(|e| panic!("{e}"));
                    }
                }
            }
        }
    }

    /// Chained one-shot calls (first fenced, then unfenced with alternating
    /// scratch halves) are race-free among themselves and next to any fenced
    /// plan, in place and out of place.
    #[test]
    fn oneshot_chains_are_race_free() {
        let os = |n, c, ip, parity, fenced| oneshot::plan(n, c, 4, ip, 1, parity, fenced);
        for n in 2..=5 {
            for count in [1, 5, 64] {
                for ip in [false, true] {
                    let first = os(n, count, ip, 0, true);
                    let a = os(n, count, ip, 1, false);
                    let b = os(n, count, ip, 0, false);
                    for p in [&first, &a, &b] {
                        p.validate().unwrap_or_else(|e| panic!("{e}"));
                    }
                    Plan::validate_sequence(&[&first, &a, &b, &a, &b])
                        .unwrap_or_else(|e| panic!("n={n} count={count}: {e}"));
                    // The chain only needs the same size: in and out of place may alternate.
                    let a_other = os(n, count, !ip, 1, false);
                    Plan::validate_sequence(&[&first, &a_other, &b])
                        .unwrap_or_else(|e| panic!("mixed places n={n} count={count}: {e}"));
                    // Another collective before and after a chain (fenced).
                    for other in all_algos() {
                        let x = other.plan(n, count, 4, ip);
                        let again = os(n, count, ip, 1, true);
                        Plan::validate_sequence(&[&x, &first, &a, &b, &x, &again, &b])
                            .unwrap_or_else(|e| {
                                panic!("{} n={n} count={count}: {e}", other.label())
                            });
                    }
                }
            }
        }
    }

    /// The pull one-shot has no cross-rank event at all; it must still be
    /// race-free next to every other plan, before and after.
    #[test]
    fn pull_oneshot_next_to_anything_is_race_free() {
        for n in 2..=4 {
            for count in [1, 7, 64] {
                let pull = Algo::ONESHOT_PULL.plan(n, count, 4, false);
                pull.validate().unwrap_or_else(|e| panic!("{e}"));
                let piped = Algo::OneShotPull { slices: 3 }.plan(n, count, 4, false);
                piped.validate().unwrap_or_else(|e| panic!("{e}"));
                Plan::validate_sequence(&[&piped, &pull, &piped, &piped])
                    .unwrap_or_else(|e| panic!("pull chains n={n}: {e}"));
                let fused = Algo::OneShotFused.plan(n, count, 4, false);
                fused.validate().unwrap_or_else(|e| panic!("{e}"));
                for other in all_algos() {
                    for ip in [false, true] {
                        let x = other.plan(n, count, 4, ip);
                        Plan::validate_sequence(&[&x, &pull, &pull, &x, &pull])
                            .unwrap_or_else(|e| panic!("{} ip={ip} n={n}: {e}", other.label()));
                        Plan::validate_sequence(&[&x, &fused, &fused, &x, &fused]).unwrap_or_else(
                            |e| panic!("fused after {} ip={ip} n={n}: {e}", other.label()),
                        );
                    }
                }
            }
        }
    }

    /// The engine's rules are needed, and the sequence check catches their
    /// violation: a call writing the half its predecessor is reading, and a
    /// chain continued with a different size (the halves move), both race.
    #[test]
    fn broken_chains_are_races() {
        let first = oneshot::plan(2, 64, 4, false, 1, 0, true);
        let same_half = oneshot::plan(2, 64, 4, false, 1, 0, false);
        assert!(Plan::validate_sequence(&[&first, &same_half]).is_err());
        let other_size = oneshot::plan(2, 16, 4, false, 1, 1, false);
        assert!(Plan::validate_sequence(&[&first, &other_size]).is_err());
        let same_size = oneshot::plan(2, 64, 4, false, 1, 1, false);
        assert!(Plan::validate_sequence(&[&first, &same_size]).is_ok());
    }

    #[test]
    fn ring_traffic_is_the_schedule() {
        use crate::schedule::{ring_bytes_per_rank, ChunkLayout};
        for n in 1..=9 {
            for count in [0, 3, 100, 1003] {
                let p = Algo::Ring {
                    slices: 3,
                    slots: 2,
                    lanes: 1,
                }
                .plan(n, count, 4, false);
                let l = ChunkLayout::new(count, n, 4);
                let t = p.traffic(4);
                for r in 0..n {
                    assert_eq!(t[r].sent as usize, ring_bytes_per_rank(&l, r, 4));
                    assert_eq!(t[r].received, t[crate::schedule::left(r, n)].sent);
                }
            }
        }
    }

    #[test]
    fn ps_root_traffic() {
        let p = Algo::ParameterServer.plan(4, 100, 4, false);
        let t = p.traffic(4);
        assert_eq!(t[0].received, 3 * 400);
        assert_eq!(t[0].sent, 3 * 400);
        assert_eq!(t[1].sent, 400);
        assert_eq!(t[1].received, 400);
    }

    #[test]
    fn parse_choice() {
        assert_eq!(
            "ring".parse::<AlgoChoice>(),
            Ok(AlgoChoice::Fixed(Algo::RING))
        );
        assert_eq!(
            "ring:pipe4".parse::<AlgoChoice>(),
            Ok(AlgoChoice::Fixed(Algo::Ring {
                slices: 4,
                slots: 2,
                lanes: 1
            }))
        );
        assert!("ring:pipe0".parse::<AlgoChoice>().is_err());
        assert!("tree".parse::<AlgoChoice>().is_err());
    }

    /// Flag one-shot chains (first fenced, then alternating halves) are
    /// race-free among themselves and next to every other plan; every rank of
    /// every 2-rank flag plan has the exact push/reduce shape the exchange
    /// kernel implements, and other rank counts get the plain chained plan.
    #[test]
    fn flag_oneshot_chains_and_shape() {
        let fl = |n, c, ip, parity, fenced| oneshot::flag_plan(n, c, 4, ip, parity, fenced);
        for count in [1, 2, 3, 5, 8, 64, 67] {
            for ip in [false, true] {
                let first = fl(2, count, ip, 0, true);
                let a = fl(2, count, ip, 1, false);
                let b = fl(2, count, ip, 0, false);
                for p in [&first, &a, &b] {
                    p.validate().unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(p.algo, Some(Algo::OneShotFlag));
                    for r in 0..2 {
                        let f = p.flag_exchange(r).unwrap().unwrap();
                        assert_eq!(f.peer, 1 - r);
                        assert_eq!(f.my_slot.range.start % 4, 0, "slot not 16-byte aligned");
                        assert_eq!(f.peer_slot.range.start % 4, 0);
                        assert_eq!(f.dst.len(), count);
                    }
                    // Rank 0's push lands where rank 1's reduce reads.
                    let (f0, f1) = (
                        p.flag_exchange(0).unwrap().unwrap(),
                        p.flag_exchange(1).unwrap().unwrap(),
                    );
                    assert_eq!(f0.peer_slot, f1.my_slot);
                    assert_eq!(f1.peer_slot, f0.my_slot);
                }
                Plan::validate_sequence(&[&first, &a, &b, &a, &b])
                    .unwrap_or_else(|e| panic!("count={count}: {e}"));
                for other in all_algos() {
                    let x = other.plan(2, count, 4, ip);
                    Plan::validate_sequence(&[&x, &first, &a, &b, &x, &first, &a])
                        .unwrap_or_else(|e| panic!("{} count={count}: {e}", other.label()));
                    // In place the fused one-shot is the flag plan too.
                    if x.algo != Some(Algo::OneShotFlag) {
                        assert_eq!(x.flag_exchange(0), Ok(None), "{}", other.label());
                    } else {
                        assert!(other == Algo::OneShotFlag || (other == Algo::OneShotFused && ip));
                    }
                }
            }
        }
        for n in [1, 3, 4] {
            let p = Algo::OneShotFlag.plan(n, 16, 4, true);
            assert_ne!(p.algo, Some(Algo::OneShotFlag), "n={n}");
            p.validate().unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(
            Algo::OneShotFlag.plan(2, 0, 4, false).flag_exchange(0),
            Ok(None)
        );
    }

    /// A flag plan whose shape the kernel would not reproduce is an error.
    #[test]
    fn flag_exchange_rejects_other_shapes() {
        let good = oneshot::flag_plan(2, 8, 4, true, 0, true);
        // Someone else waits on rank 0's push: the kernel has no event for it.
        let mut p = good.clone();
        let push0 = p.ops[0]
            .iter()
            .find_map(|op| match op.kind {
                crate::plan::OpKind::Copy { .. } => op.signal,
                _ => None,
            })
            .unwrap();
        let end1 = p.ops[1].len() - 1;
        p.ops[1][end1].waits.push(push0);
        assert!(p.flag_exchange(0).is_err());
        // The reduce does not follow the push.
        let mut q = good.clone();
        q.ops[1].swap(1, 2);
        assert!(q.flag_exchange(1).is_err());
        // A flag-marked plan for 3 ranks.
        let mut t = Algo::ONESHOT.plan(3, 8, 4, false);
        t.algo = Some(Algo::OneShotFlag);
        assert!(t.flag_exchange(0).is_err());
    }

    /// What a graph replay issues: a fence (unless a chain on half 0 of this
    /// size came just before), then the captured flag calls on halves 1 and
    /// 0, unfenced, again and again; next to any other plan.
    #[test]
    fn graph_replays_after_a_fence_are_race_free() {
        let fence = fence_plan(2);
        fence.issue_order().unwrap();
        for count in [1, 5, 64] {
            for ip in [false, true] {
                let p1 = oneshot::flag_plan(2, count, 4, ip, 1, false);
                let p0 = oneshot::flag_plan(2, count, 4, ip, 0, false);
                for other in all_algos() {
                    let x = other.plan(2, count, 4, ip);
                    Plan::validate_sequence(&[
                        &x, &fence, &p1, &p0, &p1, &p0, &x, &fence, &p1, &p0,
                    ])
                    .unwrap_or_else(|e| panic!("{} count={count}: {e}", other.label()));
                }
                // The halves matter: the same half twice in a row is a race.
                assert!(Plan::validate_sequence(&[&p0, &p0, &p0]).is_err());
            }
        }
    }
}
