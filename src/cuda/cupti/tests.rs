use super::*;

#[test]
fn cupti_off_or_missing_is_a_reason_not_a_failure() {
    let how = Settings::default();
    let off = init(Some(Path::new("0")), how).err().unwrap_or_default();
    assert_eq!(off, "off (RINGREDUCE_CUPTI=0)");
    let missing = init(Some(Path::new("/nonexistent/libcupti.so.13")), how)
        .err()
        .unwrap_or_default();
    assert!(
        missing.starts_with("not found: /nonexistent/libcupti.so.13 ("),
        "{missing}"
    );
}

#[test]
fn a_popped_op_files_the_correlation_ids_its_calls_got() {
    // No callback runs in a test: the ids it would have seen while op
    // `id` was open (what `Cupti::push` sets).
    let c = u32::MAX - 10;
    let id = u64::MAX - 500;
    OPEN.with(|o| o.set(id));
    SEEN.with(|s| s.borrow_mut().clear());
    SEEN.with(|s| s.borrow_mut().extend([c, c - 1]));
    let mut ties = Vec::new();
    assert_eq!(close(&mut ties), Ok(()));
    assert_eq!(ties, [(c, id), (c - 1, id)]);
    // Closed: a second close is an error, and files nothing.
    assert!(close(&mut ties).is_err());
    assert_eq!(ties.len(), 2);
    records::store().records.push(Activity {
        kind: ActivityKind::Kernel,
        start: 5,
        end: 9,
        correlation: c - 1,
        external: 0,
        device: 0,
        stream: 0,
    });
    let (mine, _) = records::take(&ties);
    let kinds: Vec<ActivityKind> = mine.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            ActivityKind::Kernel,
            ActivityKind::External,
            ActivityKind::External
        ],
        "{mine:?}"
    );
    let (again, _) = records::take(&ties);
    assert!(again.iter().all(|a| a.kind == ActivityKind::External));
}

#[test]
fn a_take_hands_over_only_the_records_of_its_ties() {
    // Ids and correlation ids no real call uses in this test process.
    let base = u64::MAX - 100;
    let a = |kind, corr| Activity {
        kind,
        start: 1,
        end: 2,
        correlation: corr,
        external: 0,
        device: 0,
        stream: 0,
    };
    records::store().records.extend([
        a(ActivityKind::Kernel, u32::MAX - 1),
        a(ActivityKind::PeerCopy, u32::MAX - 2),
    ]);
    let (mine, _) = records::take(&[(u32::MAX - 1, base)]);
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert!(mine.iter().all(|r| r.correlation == u32::MAX - 1));
    let (other, _) = records::take(&[(u32::MAX - 2, base + 50)]);
    assert_eq!(other.len(), 2, "{other:?}");
    assert_eq!(other[0].kind, ActivityKind::PeerCopy);
}

#[test]
fn a_take_by_streams_hands_over_the_records_on_them() {
    let a = |corr, stream| Activity {
        kind: ActivityKind::Kernel,
        start: 1,
        end: 2,
        correlation: corr,
        external: 0,
        device: 0,
        stream,
    };
    // Stream ids no real stream has in this test process.
    let (s1, s2) = (u32::MAX - 3, u32::MAX - 4);
    records::store()
        .records
        .extend([a(1, s1), a(2, s2), a(3, s1)]);
    let (mine, _) = records::take_streams(&|s| s == s1);
    assert_eq!(
        mine.iter().map(|r| r.correlation).collect::<Vec<_>>(),
        [1, 3]
    );
    let (other, _) = records::take_streams(&|s| s == s2);
    assert_eq!(other.len(), 1);
}
