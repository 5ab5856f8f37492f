use super::*;
use ringreduce::algo::plan_of;
use ringreduce::algo::AlgoChoice;
use ringreduce::plan::Shape;

fn span_of(algo: &str, n: usize, count: usize) -> f64 {
    let c: AlgoChoice = algo.parse().unwrap();
    let plan = plan_of(&c, &Shape::all_reduce(n, count, 4, false)).unwrap();
    makespan(&schedule(&plan).unwrap())
}

#[test]
fn the_plain_ring_serializes_copy_and_reduce() {
    // 2 ranks, 16 elements: chunks of 8. Reduce-scatter: copy 8, then
    // reduce 8; all-gather: copy 8. Nothing overlaps within a step.
    assert_eq!(span_of("ring", 2, 16), 24.0);
    // 4 ranks, 32 elements: chunks of 8; 3 steps of copy + reduce,
    // 3 steps of copy.
    assert_eq!(span_of("ring", 4, 32), 3.0 * 16.0 + 3.0 * 8.0);
}

#[test]
fn pipelining_hides_all_but_one_slice_per_step() {
    // ring:pipe2, 2 ranks, chunks of 8 in slices of 4: slice 1's copy
    // runs under slice 0's reduce. RS: copies 0-4, 4-8; reduces 4-8,
    // 8-12; AG: copies 8-12 (after reduce 0), 12-16.
    assert_eq!(span_of("ring:pipe2", 2, 16), 16.0);
    for (n, count) in [(2, 64), (3, 96), (4, 128), (5, 160)] {
        let plain = span_of("ring", n, count);
        let piped = span_of("ring:pipe2", n, count);
        let four = span_of("ring:pipe4", n, count);
        assert!(piped < plain, "{n} ranks: pipe2 {piped} vs ring {plain}");
        // More slices never cost time here (no hand-off is priced); with 2
        // ranks the copy lane is already busy throughout with 2.
        assert!(four <= piped, "{n} ranks: pipe4 {four} vs pipe2 {piped}");
    }
}

#[test]
fn every_op_runs_after_what_it_waits_for() {
    for algo in ["ring", "ring:pipe2", "ring:pipe4", "ps", "oneshot"] {
        let c: AlgoChoice = algo.parse().unwrap();
        let plan = plan_of(&c, &Shape::all_reduce(4, 64, 4, false)).unwrap();
        let spans = schedule(&plan).unwrap();
        let mut ends = vec![None; plan.signals.len()];
        for (r, ops) in plan.ops.iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                if let Some(s) = op.signal {
                    ends[s.0] = Some(spans[r][i].end);
                }
            }
        }
        for (r, ops) in plan.ops.iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                for s in &op.waits {
                    let t = ends[s.0].expect("a waited signal is recorded");
                    assert!(spans[r][i].start >= t, "{algo}: rank {r} op {i}");
                }
            }
        }
    }
}

#[test]
fn the_pictures_timeline_holds_every_op_at_its_scheduled_time() {
    use ringreduce::element::{DataType, ReduceOp};
    let c: AlgoChoice = "ring:pipe2".parse().unwrap();
    let shape = Shape::all_reduce(3, 24, 4, false);
    let t = timeline(&c, &shape, DataType::Float, ReduceOp::Sum).unwrap();
    assert!(t.is_ideal());
    let plan = plan_of(&c, &shape).unwrap();
    let spans = schedule(&plan).unwrap();
    let ops = &t.calls[0].times.ops;
    assert_eq!(ops.len(), plan.ops.iter().map(Vec::len).sum::<usize>());
    for o in ops {
        let s = spans[o.rank][o.op];
        assert_eq!((o.start_ns, o.end_ns), (s.start * UNIT_NS, s.end * UNIT_NS));
    }
    // The picture says what it is, and labels the ops.
    let svg = crate::timeline::svg::to_svg(&t).unwrap();
    assert!(svg.contains("not a measurement") && svg.contains("units of the idealized schedule"));
    assert!(
        svg.contains(">RS0 c0.0<") && svg.contains(">AG1 c2.1<"),
        "labelled boxes"
    );
    assert!(!svg.contains("timed call"));
}
