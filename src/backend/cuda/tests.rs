use super::*;
use crate::backend::Binding;
use crate::element::{DataType, ReduceOp};
use crate::plan::Shape;

fn call(plan: &Arc<crate::plan::Plan>, bind: &Arc<Vec<Binding>>, op: ReduceOp) -> Call {
    Call {
        plan: plan.clone(),
        dtype: DataType::Float,
        op,
        bind: bind.clone(),
        timing: false,
    }
}

#[test]
fn held_calls_send_a_call_once_and_replace_in_turn() {
    let shape = Shape::all_reduce(2, 64, 4, false);
    let a = Arc::new(crate::algo::ring::plan(&shape, 1, 1));
    let b = Arc::new(crate::algo::ring::plan(&shape, 2, 1));
    let bind = Arc::new(vec![Binding::DEFAULT; 2]);
    let mut h = HeldCalls::<Call>::default();
    let (ka, sent) = h.key(&call(&a, &bind, ReduceOp::Sum));
    assert!(sent.is_some(), "first use sends the call");
    let (k, sent) = h.key(&call(&a, &bind, ReduceOp::Sum));
    assert!(
        k == ka && sent.is_none(),
        "a repeated call sends only its key"
    );
    let (kb, sent) = h.key(&call(&b, &bind, ReduceOp::Sum));
    assert!(sent.is_some() && kb != ka, "another plan is another call");
    let (kop, sent) = h.key(&call(&a, &bind, ReduceOp::Max));
    assert!(sent.is_some() && kop != ka, "another op is another call");
    // The same buffers under a new binding address: sent again.
    let other = Arc::new(vec![Binding::DEFAULT; 2]);
    assert!(h.key(&call(&a, &other, ReduceOp::Sum)).1.is_some());
    // Full: the oldest key is reused, and that call is sent again later.
    let plans: Vec<_> = (0..HeldCalls::<Call>::MAX)
        .map(|_| Arc::new(crate::algo::ring::plan(&shape, 1, 1)))
        .collect();
    let keys: Vec<usize> = plans
        .iter()
        .map(|p| h.key(&call(p, &bind, ReduceOp::Sum)).0)
        .collect();
    assert!(keys.iter().all(|&k| k < HeldCalls::<Call>::MAX));
    let (k, sent) = h.key(&call(&a, &bind, ReduceOp::Sum));
    assert!(
        sent.is_some() && k < HeldCalls::<Call>::MAX,
        "evicted, sent again"
    );
}

#[cfg(feature = "nccl")]
#[test]
fn held_nccl_calls_are_the_same_call_on_the_same_buffers_and_shape() {
    let bind = Arc::new(vec![Binding::DEFAULT; 2]);
    let nc = |count: usize, in_place: bool, bind: &Arc<Vec<Binding>>| NcclCall {
        collective: crate::plan::Collective::AllReduce,
        count,
        dtype: DataType::Float,
        op: ReduceOp::Sum,
        in_place,
        bind: bind.clone(),
        buffers: crate::backend::NcclBuffers::Plain,
    };
    let mut h = HeldCalls::<NcclCall>::default();
    let (k, sent) = h.key(&nc(64, false, &bind));
    assert!(sent.is_some());
    let (k2, sent) = h.key(&nc(64, false, &bind));
    assert!(
        k2 == k && sent.is_none(),
        "a repeated call sends only its key"
    );
    assert!(h.key(&nc(65, false, &bind)).1.is_some(), "another count");
    assert!(h.key(&nc(64, true, &bind)).1.is_some(), "in place");
    let other = Arc::new(vec![Binding::DEFAULT; 2]);
    assert!(h.key(&nc(64, false, &other)).1.is_some(), "other buffers");
}

/// Regression (issue 26): an exchange kernel that gave up is told by
/// the kind of the wait, not by "exchange" in the text: a host wait
/// that names an exchange step is not one, a kernel's wait with any
/// text is.
#[test]
fn an_exchange_that_gave_up_is_known_by_its_kind_not_its_text() {
    let timeout = |what: &str, wait| Error::Timeout {
        rank: 1,
        what: what.into(),
        seconds: 1.0,
        wait,
    };
    let host = timeout("rank 0's exchange step 2 (at step 3)", WaitKind::Host);
    assert!(!exchange_gave_up(&host), "{host}");
    let kernel = timeout("the peer", WaitKind::ExchangeKernel);
    assert!(exchange_gave_up(&kernel));
    let aborted = Error::Aborted {
        rank: 0,
        what: "waiting for the other rank's push".into(),
        wait: WaitKind::ExchangeKernel,
    };
    assert!(exchange_gave_up(&aborted));
    assert!(exchange_gave_up(&Error::Ranks(vec![
        host.clone(),
        kernel.clone()
    ])));
    assert!(!exchange_gave_up(&Error::Ranks(vec![host])));
}

#[test]
fn a_kernels_give_up_is_kept_beside_the_calls_own_error() {
    // Regression (found on an H200 after typed wait kinds): a drain
    // whose pending call failed on the host (a stalled rank) returned
    // only that error, and the other rank's "exchange kernel gave up"
    // from the same drain was lost, so the flags were never reset.
    let host = |r| Error::Timeout {
        rank: r,
        what: "its stall (at oneshot:flag op 1 (exchange))".into(),
        seconds: 2.0,
        wait: WaitKind::Host,
    };
    let kernel = Error::Timeout {
        rank: 0,
        what: "the other rank's push in an exchange kernel".into(),
        seconds: 2.0,
        wait: WaitKind::ExchangeKernel,
    };
    let e = both(host(1), kernel);
    assert!(exchange_gave_up(&e), "{e}");
    assert_eq!(e.rank(), Some(1), "the call's own error comes first");
    let nested = both(Error::Ranks(vec![host(1), host(2)]), host(3));
    assert!(
        matches!(&nested, Error::Ranks(v) if v.len() == 3),
        "{nested:?}"
    );
}

/// A call's host copies go in rounds of the rank threads: small ones
/// together, each large one alone, in their order.
#[test]
fn host_copies_go_small_together_large_alone() {
    let max = front::BATCHED_COPY_MAX;
    let rounds = |lens: &[usize]| front::rounds(lens.iter().copied());
    assert_eq!(rounds(&[]), Vec::<Vec<usize>>::new());
    assert_eq!(rounds(&[8, 8, 8, 8]), vec![vec![0, 1, 2, 3]]);
    assert_eq!(rounds(&[max, max + 1]), vec![vec![0], vec![1]]);
    assert_eq!(
        rounds(&[4, max + 1, 4, 4, 1 << 24, 0]),
        vec![vec![0], vec![1], vec![2, 3], vec![4], vec![5]]
    );
}
