//! The CUPTI timeline's pure parts: external ids to plan ops, activity
//! records to spans.

use super::*;

fn ext(id: u64, corr: u32) -> Activity {
    Activity {
        kind: ActivityKind::External,
        start: 0,
        end: 0,
        correlation: corr,
        external: id,
        device: 0,
        stream: 0,
    }
}

fn rec(kind: ActivityKind, corr: u32, start: u64, end: u64) -> Activity {
    Activity {
        kind,
        start,
        end,
        correlation: corr,
        external: 0,
        device: 0,
        stream: 7,
    }
}

fn op(op: usize, parts: usize, mark: bool, after: &[usize]) -> OpRef {
    OpRef {
        op,
        parts,
        mark,
        after: after.to_vec(),
    }
}

/// Begin, a peer copy, a reduce after it, End: rank 2's ops 0..4.
fn ring_call() -> CuptiCall {
    let mut c = CuptiCall::new(4, 5.0);
    c.ops = vec![
        op(0, 1, true, &[]),
        op(1, 1, false, &[0]),
        op(2, 1, false, &[1]),
        op(3, 1, true, &[2]),
    ];
    c
}

fn host(t: u64) -> f64 {
    t as f64 + 1000.0
}

#[test]
fn each_call_gets_its_own_ids_and_maps_them_back_to_its_ops() {
    let a = ring_call();
    let b = ring_call();
    assert!(
        b.base >= a.base + 4,
        "ranges overlap: {} {}",
        a.base,
        b.base
    );
    for i in 0..4 {
        assert_eq!(a.index(a.id(i)), Some(i));
        assert_eq!(b.index(a.id(i)), None);
    }
    assert_eq!(a.index(a.id(4)), None);
    assert_eq!(a.index(0), None);
}

#[test]
fn records_become_the_spans_of_their_ops_and_marks_follow_their_predecessors() {
    let c = ring_call();
    let recs = vec![
        ext(c.id(1), 10),
        rec(ActivityKind::PeerCopy, 10, 100, 200),
        ext(c.id(2), 11),
        rec(ActivityKind::Kernel, 11, 210, 300),
        // Another call's kernel: not an op's span.
        rec(ActivityKind::Kernel, 99, 0, 5000),
    ];
    let v = spans(2, &c, &recs, &host).unwrap();
    let got: Vec<(usize, usize, usize, f64, f64)> = v
        .iter()
        .map(|t| (t.rank, t.op, t.part, t.start_ns, t.end_ns))
        .collect();
    assert_eq!(
        got,
        vec![
            (2, 0, 0, 1100.0, 1100.0),
            (2, 1, 0, 1100.0, 1200.0),
            (2, 2, 0, 1210.0, 1300.0),
            (2, 3, 0, 1300.0, 1300.0),
        ]
    );
}

#[test]
fn an_op_with_several_records_spans_them_all_and_each_part_gets_the_span() {
    let mut c = CuptiCall::new(1, 0.0);
    c.ops = vec![op(4, 2, false, &[])];
    let recs = vec![
        ext(c.id(0), 20),
        rec(ActivityKind::Memcpy, 20, 300, 350),
        rec(ActivityKind::Kernel, 20, 250, 320),
        rec(ActivityKind::Memset, 20, 340, 400),
    ];
    let v = spans(0, &c, &recs, &host).unwrap();
    assert_eq!(v.len(), 2);
    for (part, t) in v.iter().enumerate() {
        assert_eq!((t.op, t.part), (4, part));
        assert_eq!((t.start_ns, t.end_ns), (1250.0, 1400.0));
    }
}

#[test]
fn a_mark_waits_for_the_latest_of_the_ops_it_follows() {
    let mut c = CuptiCall::new(3, 0.0);
    c.ops = vec![
        op(0, 1, false, &[]),
        op(1, 1, false, &[]),
        op(2, 1, true, &[0, 1]),
    ];
    let recs = vec![
        ext(c.id(0), 1),
        ext(c.id(1), 2),
        rec(ActivityKind::Kernel, 1, 10, 90),
        rec(ActivityKind::PeerCopy, 2, 20, 60),
    ];
    let v = spans(1, &c, &recs, &host).unwrap();
    assert_eq!((v[2].start_ns, v[2].end_ns), (1090.0, 1090.0));
}

#[test]
fn a_work_op_without_a_record_is_an_error_naming_it() {
    let c = ring_call();
    let recs = vec![ext(c.id(1), 10), rec(ActivityKind::PeerCopy, 10, 100, 200)];
    let e = spans(3, &c, &recs, &host).unwrap_err();
    assert!(e.contains("rank 3's op 2"), "{e}");
    assert!(e.contains("2 records held 1 external correlations"), "{e}");
}

#[test]
fn another_calls_external_ids_do_not_claim_records() {
    let c = ring_call();
    let other = ring_call();
    let recs = vec![
        ext(other.id(1), 10),
        rec(ActivityKind::PeerCopy, 10, 100, 200),
    ];
    assert!(spans(0, &c, &recs, &host).is_err());
}

#[test]
fn a_call_of_marks_only_is_placed_where_it_was_issued() {
    let mut c = CuptiCall::new(2, 42.0);
    c.ops = vec![op(0, 1, true, &[]), op(1, 1, true, &[0])];
    let v = spans(0, &c, &[], &host).unwrap();
    assert!(v.iter().all(|t| t.start_ns == 42.0 && t.end_ns == 42.0));
}
