use super::*;
use crate::algo::{plan_of, AlgoChoice};
use crate::plan::Shape;

/// The ops that start an op: its lane's last and the recorders of the
/// own signals it waits on; complete only when every wait is on an own
/// signal already recorded and the lane had an op before.
#[test]
fn an_ops_predecessors_are_its_lanes_last_and_its_own_signals_recorders() {
    let shape = Shape::all_reduce(2, 64, 4, false);
    let ring = AlgoChoice::Fixed(crate::algo::parse("ring").unwrap());
    let plan = plan_of(&ring, &shape).unwrap();
    let own = |r: usize| {
        (0..plan.signals.len())
            .find(|&s| plan.signals[s].owner == r)
            .map(SignalId)
            .unwrap()
    };
    let (mine, theirs) = (own(0), own(1));
    let peer = Wait::Peer {
        signal: theirs,
        owner: 1,
    };
    // (the lane's last op, the waits, whether the own signal was
    // recorded (by op 7)) -> (the ops that start it, all of them?)
    type Case<'a> = (Option<usize>, Vec<Wait>, bool, &'a [usize], bool);
    let cases: [Case; 4] = [
        // The lane's first op, no wait: nothing starts it.
        (None, vec![], true, &[], false),
        // After the lane's op 3, on an own signal recorded by op 7.
        (Some(3), vec![Wait::Local(mine)], true, &[3, 7], true),
        // Also on the peer's signal: not all that starts it.
        (Some(3), vec![peer, Wait::Local(mine)], true, &[3, 7], false),
        // On an own signal no op recorded yet.
        (Some(3), vec![Wait::Local(mine)], false, &[3], false),
    ];
    for (last, waits, recorded, want, all) in cases {
        let mut ends = vec![None; plan.signals.len()];
        ends[mine.0] = recorded.then_some(7);
        let mut out = Vec::new();
        let got = predecessors(&plan, 0, last, &ends, waits.into_iter(), &mut out);
        assert_eq!((out.as_slice(), got), (want, all), "{last:?}");
    }
}
