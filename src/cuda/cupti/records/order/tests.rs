use super::*;

/// A rank's calls: (op, lane, stream, class), in issue order; op `i`
/// has external id 100 + i.
fn calls(spec: &[(usize, usize, u32, Class)]) -> Vec<Issued> {
    spec.iter()
        .map(|&(op, lane, stream, class)| Issued {
            external: 100 + op as u64,
            op,
            lane,
            stream,
            class: Some(class),
        })
        .collect()
}

/// The records CUPTI would write for `issued`: correlation ids in
/// issue order with gaps (other threads' calls), start times in issue
/// order per stream.
fn recorded(issued: &[Issued]) -> Vec<Activity> {
    issued
        .iter()
        .enumerate()
        .map(|(k, c)| Activity {
            kind: match c.class {
                Some(Class::Kernel) => ActivityKind::Kernel,
                _ if k % 2 == 0 => ActivityKind::PeerCopy,
                _ => ActivityKind::Memcpy,
            },
            start: 1000 + 10 * k as u64,
            end: 1005 + 10 * k as u64,
            correlation: 7 + 3 * k as u32,
            external: 0,
            device: 0,
            stream: c.stream,
        })
        .collect()
}

/// The tie as (correlation id, external id), sorted.
fn pairs(v: &[Activity]) -> Vec<(u32, u64)> {
    let mut p: Vec<(u32, u64)> = v.iter().map(|a| (a.correlation, a.external)).collect();
    p.sort_unstable();
    p
}

/// What the tie must give: each call's record to its op.
fn truth(issued: &[Issued], recs: &[Activity]) -> Vec<(u32, u64)> {
    let mut p: Vec<(u32, u64)> = issued
        .iter()
        .zip(recs)
        .filter(|(c, _)| c.external != 0)
        .map(|(c, r)| (r.correlation, c.external))
        .collect();
    p.sort_unstable();
    p
}

/// Every permutation of `v`, by Heap's algorithm.
fn permutations<T: Clone>(v: &[T]) -> Vec<Vec<T>> {
    fn go<T: Clone>(k: usize, a: &mut Vec<T>, out: &mut Vec<Vec<T>>) {
        if k <= 1 {
            out.push(a.clone());
            return;
        }
        for i in 0..k - 1 {
            go(k - 1, a, out);
            if k % 2 == 0 {
                a.swap(i, k - 1);
            } else {
                a.swap(0, k - 1);
            }
        }
        go(k - 1, a, out);
    }
    let mut a = v.to_vec();
    let mut out = Vec::new();
    go(a.len(), &mut a, &mut out);
    out
}

/// A ring-like rank: two lanes, copies and reduces interleaved, three
/// streams (a third lane with one kernel), a work-less op skipped.
fn ring() -> Vec<Issued> {
    use Class::{Copy, Kernel};
    calls(&[
        (0, 0, 11, Copy),
        (1, 0, 11, Kernel),
        (2, 1, 12, Copy),
        (4, 0, 11, Copy),
        (5, 1, 12, Kernel),
        (6, 2, 19, Kernel),
        (7, 0, 11, Kernel),
    ])
}

#[test]
fn records_in_any_order_tie_each_call_to_its_op() {
    let issued = ring();
    let recs = recorded(&issued);
    let want = truth(&issued, &recs);
    let all = permutations(&recs);
    assert_eq!(all.len(), 5040);
    for p in &all {
        let got = tie_by_order(3, &issued, p).map(|v| pairs(&v));
        assert_eq!(got.as_ref(), Ok(&want), "records {p:?}");
    }
}

#[test]
fn records_of_other_ops_and_external_records_are_left_alone() {
    let mut issued = ring();
    // A call no op owns (external 0): its record is passed over.
    issued.insert(
        3,
        Issued {
            external: 0,
            op: 3,
            lane: 0,
            stream: 11,
            class: None,
        },
    );
    let mut recs = recorded(&issued);
    recs.push(Activity {
        kind: ActivityKind::External,
        start: 0,
        end: 0,
        correlation: 1,
        external: 5,
        device: 0,
        stream: 0,
    });
    recs.reverse();
    let got = tie_by_order(0, &issued, &recs).map(|v| pairs(&v));
    let want = truth(&issued, &recorded(&issued));
    assert_eq!(got, Ok(want));
}

#[test]
fn a_missing_record_is_an_error_naming_the_rank_and_an_op_never_a_tie() {
    let issued = ring();
    let recs = recorded(&issued);
    for gone in 0..recs.len() {
        let rest: Vec<Activity> = recs
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != gone)
            .map(|(_, a)| *a)
            .collect();
        // Every order of the records left.
        for rest in permutations(&rest) {
            let e = tie_by_order(2, &issued, &rest)
                .expect_err(&format!("record {gone} missing must not tie"));
            assert!(e.contains("rank 2's op "), "{e}");
            assert!(e.contains("no tie by order"), "{e}");
            // The op named is on the stream that lost the record, at or
            // after the missing call (never an op of another stream).
            let lost = &issued[gone];
            let named: Vec<&Issued> = issued
                .iter()
                .filter(|c| e.contains(&format!("op {} (lane {}", c.op, c.lane)))
                .collect();
            assert_eq!(named.len(), 1, "{e}");
            assert_eq!(named[0].stream, lost.stream, "{e}");
            assert!(named[0].op >= lost.op, "{e}");
        }
    }
}

#[test]
fn the_last_missing_record_names_its_own_op() {
    let issued = ring();
    let mut recs = recorded(&issued);
    recs.pop();
    let e = tie_by_order(1, &issued, &recs).unwrap_err();
    assert!(
            e.starts_with("no CUPTI record of rank 1's op 7 (lane 0, call 3 of its stream): CUPTI stream 11 holds 3 records for the 4 kernels and copies rank 1 issued there"),
            "{e}"
        );
}

#[test]
fn an_extra_record_or_a_foreign_stream_is_an_error() {
    let issued = ring();
    let mut recs = recorded(&issued);
    let mut extra = recs[6];
    extra.correlation = 999;
    recs.push(extra);
    let e = tie_by_order(0, &issued, &recs).unwrap_err();
    assert!(
        e.contains("1 extra CUPTI records after rank 0's op 7"),
        "{e}"
    );
    let mut recs = recorded(&issued);
    recs[0].stream = 42;
    let e = tie_by_order(0, &issued, &recs).unwrap_err();
    assert!(e.contains("rank 0's stream 42"), "{e}");
    assert!(e.contains("issued on CUPTI streams 11, 12, 19"), "{e}");
    let mut recs = recorded(&issued);
    recs[1].correlation = recs[0].correlation;
    let e = tie_by_order(0, &issued, &recs).unwrap_err();
    assert!(e.contains("no tie by order"), "{e}");
}

#[test]
fn a_swapped_class_is_an_error_not_a_tie() {
    let issued = ring();
    let mut recs = recorded(&issued);
    recs[1].kind = ActivityKind::Memset;
    let e = tie_by_order(0, &issued, &recs).unwrap_err();
    assert!(
            e.starts_with("rank 0's op 1 (lane 0, call 1 of its stream) issued a kernel but the record in its place is a copy"),
            "{e}"
        );
}

#[test]
fn no_call_and_no_record_is_an_empty_tie() {
    assert_eq!(tie_by_order(0, &[], &[]), Ok(Vec::new()));
}
