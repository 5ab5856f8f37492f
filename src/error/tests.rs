use super::*;

#[test]
fn clones_keep_the_variant_and_the_text() {
    let errors = [
        Error::Poisoned {
            reason: "gone".into(),
        },
        Error::peer_failed(3, "rank 3: its process (pid 9) died", "rank 0 waiting"),
        Error::io(
            "/x",
            std::io::Error::new(std::io::ErrorKind::NotFound, "nope"),
        ),
        Error::Ranks(vec![
            Error::peer_failed(1, "boom", ""),
            Error::Worker {
                rank: 1,
                message: "boom".into(),
            },
        ]),
    ];
    for e in &errors {
        let d = e.clone();
        assert_eq!(d.to_string(), e.to_string());
        assert_eq!(d.is_fatal(), e.is_fatal());
        assert_eq!(d.rank(), e.rank());
        assert_eq!(std::mem::discriminant(&d), std::mem::discriminant(e));
    }
    assert!(errors[0].is_fatal());
    assert_eq!(errors[1].rank(), Some(3), "the failed rank");
    assert_eq!(
        errors[1].to_string(),
        "rank 3 failed: its process (pid 9) died (rank 0 waiting)"
    );
    // The root of several is the failure, not who noticed it.
    assert!(matches!(errors[3].root(), Error::Worker { rank: 1, .. }));
    assert_eq!(errors[3].rank(), Some(1));
}

/// Regression (issue 26): the kind of a wait is a typed field that
/// survives duplication and the steps' rewording, and the text of a
/// timeout is what it was.
#[test]
fn the_kind_of_a_wait_is_typed() {
    let t = Error::Timeout {
        rank: 2,
        what: "the other rank's push in an exchange kernel".into(),
        seconds: 3.0,
        wait: WaitKind::ExchangeKernel,
    };
    assert_eq!(t.wait_kind(), Some(WaitKind::ExchangeKernel));
    assert_eq!(t.clone().wait_kind(), Some(WaitKind::ExchangeKernel));
    assert_eq!(
            t.to_string(),
            "rank 2: waited more than 3 s for the other rank's push in an exchange kernel; \
             the collective is stuck (set the limit with RINGREDUCE_TIMEOUT or EngineConfig::timeout)"
        );
    let a = Error::Aborted {
        rank: 0,
        what: "waiting for the exchange".into(),
        wait: WaitKind::Host,
    };
    assert_eq!(a.wait_kind(), Some(WaitKind::Host));
    assert_eq!(
        a.to_string(),
        "rank 0: aborted while waiting for the exchange"
    );
    let both = Error::Ranks(vec![Error::peer_failed(1, "boom", ""), t]);
    assert_eq!(both.wait_kind(), Some(WaitKind::ExchangeKernel));
    assert_eq!(Error::ZeroRanks.wait_kind(), None);
}

/// Regression (issue 26): a broken invariant is its own variant, not a
/// plan error: it says it is a bug to report, crosses boundaries whole,
/// and does not make the engine unusable by itself.
#[test]
fn a_broken_invariant_is_an_internal_error() {
    let e = Error::internal("rank 1: call 7 vanished");
    assert_eq!(
        e.to_string(),
        "internal error: rank 1: call 7 vanished (a bug in ringreduce; please report it)"
    );
    assert!(e.is_internal() && !e.is_fatal());
    assert_eq!(e.rank(), None);
    let d = e.clone();
    assert!(matches!(&d, Error::Internal { what } if what == "rank 1: call 7 vanished"));
    assert!(Error::Ranks(vec![Error::peer_failed(0, "x", ""), d]).is_internal());
    let plan = Error::Plan("ring: plan for 4 ranks on 2 ranks".into());
    assert!(!plan.is_internal() && !plan.is_fatal());
    assert_eq!(
        plan.to_string(),
        "plan error: ring: plan for 4 ranks on 2 ranks"
    );
}
