use crate::error::{Error, WaitKind};

/// Regression: naming the step keeps the kind of the wait.
#[test]
fn naming_the_step_keeps_the_kind_of_the_wait() {
    let e = Error::in_step(
        Error::Timeout {
            rank: 1,
            what: "rank 0's copy".into(),
            seconds: 2.0,
            wait: WaitKind::ExchangeKernel,
        },
        "step 3",
    );
    assert_eq!(e.wait_kind(), Some(WaitKind::ExchangeKernel));
    assert!(e.to_string().contains("rank 0's copy (at step 3)"), "{e}");
    let a = Error::in_step(
        Error::Aborted {
            rank: 1,
            what: "waiting".into(),
            wait: WaitKind::Completion,
        },
        "step 1",
    );
    assert_eq!(a.wait_kind(), Some(WaitKind::Completion));
}
