use super::*;

/// Regression (issue 26): a copy always records a signal, and the
/// builder returns that signal, not an `Option` that a caller had to
/// turn into a sentinel id (`SignalId(usize::MAX)`).
#[test]
fn a_copy_returns_its_own_signal() {
    let shape = Shape::all_reduce(2, 8, 4, false);
    let mut b = PlanBuilder::new("t", shape);
    let begin = b.begin_all();
    assert_eq!(begin, vec![SignalId(0), SignalId(1)]);
    let s = b.copy(
        0,
        Lane::Copy,
        (0, shape.input(0)),
        (1, shape.output(1)),
        vec![begin[0], begin[1]],
        Label::default(),
    );
    assert_eq!(s, SignalId(2));
    let plan = b.peek();
    assert_eq!(plan.ops[0].last().and_then(|op| op.signal), Some(s));
    assert_eq!(plan.signals[s.0].owner, 0);
    assert_eq!(plan.signals[s.0].lane, Lane::Copy);
    b.end(0, vec![s]);
    b.end(1, vec![s]);
    let plan = b.finish();
    assert!(plan
        .ops
        .iter()
        .flatten()
        .all(|op| op.waits.iter().all(|w| w.0 < plan.signals.len())));
}

/// The traffic is counted once per plan object: asked of the plan half
/// built (one copy) and again of the finished plan (two copies), the
/// finished plan reports both copies, and a clone counts afresh.
#[test]
fn a_peek_before_finish_does_not_fix_the_traffic() {
    let shape = Shape::all_reduce(2, 8, 4, false);
    let mut b = PlanBuilder::new("t", shape);
    let begin = b.begin_all();
    let s0 = b.copy(
        0,
        Lane::Copy,
        (0, shape.input(0)),
        (1, shape.output(1)),
        begin.clone(),
        Label::default(),
    );
    assert_eq!(b.peek().traffic()[0].sent, 32);
    let s1 = b.copy(
        1,
        Lane::Copy,
        (1, shape.input(1)),
        (0, shape.output(0)),
        begin,
        Label::default(),
    );
    b.end(0, vec![s0, s1]);
    b.end(1, vec![s0, s1]);
    let plan = b.finish();
    let t = plan.traffic();
    assert_eq!((t[0].sent, t[0].received), (32, 32));
    assert_eq!((t[1].sent, t[1].received), (32, 32));
    assert_eq!(plan.traffic(), t, "asked again");
    assert_eq!(plan.clone().traffic(), t, "a clone");
}
