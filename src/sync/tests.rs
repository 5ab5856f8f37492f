use super::*;

#[test]
fn a_backoff_spins_then_yields_then_naps() {
    let mut b = Backoff::new(2, 4, Duration::ZERO);
    // Polls 1 to 3 spin or yield; from poll 4 on, every pause is a nap.
    let naps: Vec<bool> = (0..6).map(|_| b.next()).collect();
    assert_eq!(naps, [false, false, false, true, true, true]);
    b.pause();
    let mut no_yields = Backoff::new(3, 3, Duration::ZERO);
    assert!(!no_yields.next() && !no_yields.next() && no_yields.next());
}

fn board(n: usize, timeout_ms: u64) -> Arc<SignalBoard> {
    Arc::new(SignalBoard::new(
        n,
        AbortHandle::new(),
        Duration::from_millis(timeout_ms),
    ))
}

#[test]
fn a_failed_rank_releases_waiters() {
    let b = board(2, 60_000);
    let b2 = b.clone();
    let t = std::thread::spawn(move || b2.wait(1, 3, 0, &|| "rank 1's copy".into()));
    std::thread::sleep(Duration::from_millis(20));
    b.fail(3, 1, "injected");
    let r = t.join().expect("thread");
    let err = r.expect_err("released");
    assert!(
        matches!(err, Error::PeerFailed { rank: 1, .. }),
        "the failed rank, typed: {err:?}"
    );
    let e = err.to_string();
    assert!(
        e.contains("rank 1 failed: injected") && e.contains("rank 1's copy"),
        "{e}"
    );
    // A later call is not affected.
    b.publish(1, 4);
    assert!(b.wait(1, 4, 0, &|| String::new()).is_ok());
}

#[test]
fn waits_time_out() {
    let b = board(1, 50);
    let t0 = Instant::now();
    let e = b.wait(0, 1, 2, &|| "x".into()).expect_err("times out");
    assert!(matches!(e, Error::Timeout { rank: 2, .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn abort_releases_waiters_and_runs_hooks() {
    let abort = AbortHandle::new();
    let hit = Arc::new(AtomicBool::new(false));
    let h = hit.clone();
    abort.on_abort(move || h.store(true, Ordering::SeqCst));
    let b = Arc::new(SignalBoard::new(1, abort.clone(), Duration::from_secs(60)));
    let b2 = b.clone();
    let t = std::thread::spawn(move || b2.wait(0, 1, 0, &|| "y".into()));
    std::thread::sleep(Duration::from_millis(20));
    abort.abort();
    assert!(matches!(
        t.join().expect("thread"),
        Err(Error::Aborted { .. })
    ));
    assert!(hit.load(Ordering::SeqCst));
    // A halt (a peer died) runs only the device hooks, and aborts nothing.
    let other = AbortHandle::new();
    let (halted, aborted) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (h2, a2) = (halted.clone(), aborted.clone());
    other.on_halt(move || h2.store(true, Ordering::SeqCst));
    other.on_abort(move || a2.store(true, Ordering::SeqCst));
    other.halt_device();
    assert!(halted.load(Ordering::SeqCst) && !aborted.load(Ordering::SeqCst));
    assert!(!other.is_aborted());
}
