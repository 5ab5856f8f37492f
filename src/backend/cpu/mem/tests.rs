use super::*;
use crate::plan::{Plan, Shape};

/// Nodes of `g` consecutive ranks; nothing is sent.
struct Blocks(usize);

impl crate::transport::Wire for Blocks {
    fn node(&self, rank: usize) -> usize {
        rank / self.0
    }
    fn put_message(
        &self,
        _: usize,
        _: usize,
        _: BufId,
        _: usize,
        _: Option<usize>,
        _: u64,
        _: &[u8],
        _: &mut Vec<u8>,
    ) {
    }
    fn send_put(&self, _: usize, _: usize, msg: Vec<u8>) -> Result<Vec<u8>> {
        Ok(msg)
    }
    fn signal(&self, _: usize, _: usize, _: usize, _: u64) -> Result<()> {
        Ok(())
    }
}

/// Every wait of a rank on a signal published on another node is
/// satisfied on its own node: the put that carries it lands there, or
/// the publisher forwards it to a rank there.
fn every_remote_wait_reaches_its_node(plan: &Plan, g: usize) {
    let wire: Arc<dyn crate::transport::Wire> = Arc::new(Blocks(g));
    let n = plan.ranks();
    let tables: Vec<NetRun> = (0..n)
        .map(|p| NetRun::new(wire.clone(), plan, p..p + 1))
        .collect();
    // Who publishes each signal, and whether as a put to which node.
    let mut publisher: HashMap<usize, (usize, Option<usize>)> = HashMap::new();
    for (p, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            for part in interp::parts(p, op) {
                if let Some(s) = part.signal {
                    let put = match part.effect {
                        Some(interp::Effect::Copy { to, .. }) if to / g != p / g => Some(to / g),
                        _ => None,
                    };
                    publisher.insert(s.0, (p, put));
                }
            }
        }
    }
    let mut remote = 0;
    for (r, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            for part in net_parts(true, r, op) {
                for w in part.waits {
                    let (p, put) = publisher[&w.0];
                    if p / g == r / g {
                        continue;
                    }
                    remote += 1;
                    let forwarded = tables[p]
                        .forward
                        .get(&w.0)
                        .is_some_and(|to| to.iter().any(|&t| t / g == r / g));
                    assert!(
                        put == Some(r / g) || forwarded,
                        "{}: rank {r} waits on signal {} of rank {p}, which never reaches node {}",
                        plan.name,
                        w.0,
                        r / g
                    );
                }
            }
        }
    }
    assert!(remote > 0, "{}: no wait crosses the nodes", plan.name);
}

#[test]
fn the_forwarding_tables_cover_every_wait_across_nodes() {
    for (n, g) in [(4, 2), (6, 2), (6, 3), (8, 4), (4, 1)] {
        let s = Shape::all_reduce(n, 1000, 4, false);
        every_remote_wait_reaches_its_node(
            &crate::algo::hier::plan(&s, g, crate::algo::hier::Rail::Ring),
            g,
        );
        every_remote_wait_reaches_its_node(&crate::algo::ring::plan(&s, 1, 2), g);
        every_remote_wait_reaches_its_node(&crate::algo::ring::plan(&s, 4, 2), g);
        for collective in [
            crate::plan::Collective::ReduceScatter,
            crate::plan::Collective::AllGather,
        ] {
            let s = Shape {
                collective,
                in_place: true,
                ..Shape::all_reduce(n, 300, 4, true)
            };
            every_remote_wait_reaches_its_node(&crate::algo::ring::plan(&s, 1, 2), g);
        }
    }
}

/// A process is told whether a call sends it anything from another node:
/// the rail of `hier:1:mpi` is the MPI library's own all-reduce, so over
/// nodes of one rank its plan sends no message at all; the rings of
/// `hier:G` and the flat ring send every process puts and signals. (The
/// network receiver naps while nothing comes.)
#[test]
fn a_call_tells_each_process_whether_messages_come() {
    let wire: Arc<dyn crate::transport::Wire> = Arc::new(Blocks(1));
    let s = Shape::all_reduce(4, 1000, 4, false);
    let rail_only = crate::algo::hier::plan(&s, 1, crate::algo::hier::Rail::Mpi);
    let ring_rail = crate::algo::hier::plan(&s, 1, crate::algo::hier::Rail::Ring);
    let ring = crate::algo::ring::plan(&s, 1, 2);
    for p in 0..4 {
        assert!(!NetRun::new(wire.clone(), &rail_only, p..p + 1).incoming);
        assert!(NetRun::new(wire.clone(), &ring_rail, p..p + 1).incoming);
        assert!(NetRun::new(wire.clone(), &ring, p..p + 1).incoming);
    }
    // Two nodes of two ranks: `hier:2`'s rail ring sends puts across.
    let two: Arc<dyn crate::transport::Wire> = Arc::new(Blocks(2));
    let hier = crate::algo::hier::plan(&s, 2, crate::algo::hier::Rail::Ring);
    for p in 0..4 {
        assert!(NetRun::new(two.clone(), &hier, p..p + 1).incoming);
    }
}

/// Where rank processes keep every core busy, a plan splits its large
/// steps across the pool only when one rank works while the others wait:
/// the parameter server (its root reduces everything) does, the rings and
/// `hier:G` (every rank works every step) do not, at any size or N.
#[test]
fn only_uneven_plans_split_where_processes_fill_the_cores() {
    for n in [2, 3, 4, 8] {
        for count in [n, 1000, 1 << 20] {
            let s = Shape::all_reduce(n, count, 4, false);
            let ps = crate::algo::ps::plan(&s);
            assert!(splits(&ps), "ps n={n} count={count}");
            assert!(!splits(&crate::algo::ring::plan(&s, 1, 2)), "ring n={n}");
            assert!(
                !splits(&crate::algo::ring::plan(&s, 2, 2)),
                "ring:pipe2 n={n}"
            );
            if n % 2 == 0 && n > 2 {
                for rail in [crate::algo::hier::Rail::Ring, crate::algo::hier::Rail::Mpi] {
                    let h = crate::algo::hier::plan(&s, 2, rail);
                    assert!(!splits(&h), "hier:2 {rail:?} n={n}");
                }
            }
        }
    }
    // A plan that writes nothing has nothing to split.
    let empty = crate::algo::ring::plan(&Shape::all_reduce(4, 0, 4, false), 1, 2);
    assert!(!splits(&empty));
}
