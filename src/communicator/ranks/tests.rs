use super::*;

#[test]
fn every_rank_gets_the_same_failure_typed() {
    let worker = || Error::Worker {
        rank: 1,
        message: "step 2: injected failure".into(),
    };
    // One rank's failure: its own error for it, PeerFailed naming it for
    // the others.
    let f = Fail::Error(Error::of_ranks(vec![
        Error::peer_failed(1, "rank 1: step 2: injected failure", "rank 0 waiting"),
        worker(),
    ]));
    assert!(matches!(f.error_for(1), Error::Worker { rank: 1, .. }));
    for r in [0, 2] {
        let e = f.error_for(r);
        assert!(matches!(e, Error::PeerFailed { rank: 1, .. }), "{e:?}");
        assert_eq!(e.rank(), Some(1));
        assert!(e.is_fatal());
    }
    // A poisoned engine stays Poisoned for everyone.
    let f = Fail::Error(Error::Poisoned {
        reason: "a GPU could not be drained".into(),
    });
    for r in 0..3 {
        let e = f.error_for(r);
        assert!(matches!(e, Error::Poisoned { .. }) && e.is_fatal(), "{e:?}");
    }
    // A timeout names the missing ranks, each waiter as itself, and
    // tells the late rank its call failed.
    let f = Fail::Timeout {
        missing: vec![2],
        waiters: vec![0, 1],
        what: "the all-reduce (call 0)".into(),
        seconds: 1.0,
        hint: String::new(),
    };
    assert!(f.is_fatal());
    for r in 0..3 {
        let e = f.error_for(r);
        let waiter = if r == 2 { 0 } else { r };
        assert!(matches!(e, Error::Timeout { rank, .. } if rank == waiter));
        assert!(e.to_string().contains("rank 2 to join"), "{e}");
        assert_eq!(e.to_string().contains("came too late"), r == 2, "{e}");
    }
    // A rank's own bad arguments: its error for it, PeerArgument for
    // the others, and nothing fatal.
    let f = Fail::Own {
        rank: 1,
        error: Error::BufferSize {
            rank: 1,
            what: "output",
            expected: 4,
            found: 3,
        },
    };
    assert!(!f.is_fatal());
    assert!(matches!(f.error_for(1), Error::BufferSize { rank: 1, .. }));
    let e = f.error_for(0);
    assert!(matches!(e, Error::PeerArgument { rank: 1, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "rank 1 called with bad arguments: output has 3 elements, expected 4 (no data moved)"
    );
}
