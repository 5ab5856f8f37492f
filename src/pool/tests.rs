use super::*;

#[test]
fn round_trips_and_reuses_threads() {
    let mut p: RankThreads<u64, (usize, u64, std::thread::ThreadId)> =
        RankThreads::spawn(4, "t", |rank, inbox| {
            inbox.ready(Ok(()));
            inbox.serve(|x| Ok((rank, x * 2, std::thread::current().id())));
        })
        .unwrap();
    let a = p.run(vec![1, 2, 3, 4]).unwrap();
    let b = p.run_each(|r| r as u64).unwrap();
    for r in 0..4 {
        assert_eq!(a[r].0, r);
        assert_eq!(a[r].1, 2 * (r as u64 + 1));
        assert_eq!(b[r].1, 2 * r as u64);
        assert_eq!(a[r].2, b[r].2, "same thread reused");
    }
}

#[test]
fn the_last_calls_phases_are_one_call_in_order() {
    let mut p: RankThreads<u64, u64> = RankThreads::spawn(2, "t", |_, inbox| {
        inbox.ready(Ok(()));
        inbox.serve(|x| {
            std::thread::sleep(Duration::from_millis(x));
            Ok(x)
        });
    })
    .unwrap();
    assert_eq!(p.last_phases().calls, 0, "no call yet");
    p.run(vec![2, 2]).unwrap();
    let ph = p.last_phases();
    assert_eq!(ph.calls, 1);
    // Each handler slept 2 ms; the round holds the last answer.
    assert!(ph.handler_ns >= 2 * 2_000_000, "{ph:?}");
    assert!(
        ph.round_ns >= ph.last_done_ns && ph.last_done_ns >= 2_000_000,
        "{ph:?}"
    );
    p.run(vec![0, 0]).unwrap();
    assert_eq!(p.last_phases().calls, 1, "not accumulated");
}

#[test]
fn setup_error_is_reported() {
    let r: Result<RankThreads<(), ()>> = RankThreads::spawn(3, "t", |rank, inbox| {
        if rank == 1 {
            inbox.ready(Err(Error::BadArgument("no device".into())));
        } else {
            inbox.ready(Ok(()));
            inbox.serve(|_| Ok(()));
        }
    });
    assert!(matches!(r, Err(Error::BadArgument(_))));
}

#[test]
fn panic_becomes_error() {
    let mut p: RankThreads<bool, ()> = RankThreads::spawn(2, "t", |_, inbox| {
        inbox.ready(Ok(()));
        inbox.serve(|boom| {
            if boom {
                panic!("kaboom");
            }
            Ok(())
        });
    })
    .unwrap();
    let e = p.run(vec![false, true]).unwrap_err();
    assert!(e.to_string().contains("kaboom"), "{e}");
    // The pool still works afterwards.
    p.run(vec![false, false]).unwrap();
}

#[test]
fn deferred_rounds_answer_in_order_and_must_be_settled() {
    let mut p: RankThreads<u64, u64> = RankThreads::spawn(3, "t", |rank, inbox| {
        inbox.ready(Ok(()));
        inbox.serve(move |x| {
            std::thread::sleep(Duration::from_micros(200));
            if x == 7 && rank == 1 {
                return Err(Error::BadArgument("seven".into()));
            }
            Ok(x * 10 + rank as u64)
        });
    })
    .unwrap();
    assert!(
        p.run_deferred(vec![1, 1, 1]).unwrap().is_none(),
        "nothing before"
    );
    assert!(p.is_pending());
    // A plain round is refused while one is pending: its answers would
    // be lost.
    assert!(matches!(p.run(vec![0, 0, 0]), Err(Error::Internal { .. })));
    for k in 2..=8u64 {
        let before = p
            .run_deferred(vec![k; 3])
            .unwrap()
            .expect("the round before");
        let want: Vec<u64> = (0..3).map(|r| (k - 1) * 10 + r).collect();
        if k - 1 == 7 {
            assert!(matches!(before[1], Err(Error::BadArgument(_))));
            assert_eq!(*before[0].as_ref().unwrap(), want[0]);
        } else {
            let got: Vec<u64> = before.into_iter().map(|r| r.unwrap()).collect();
            assert_eq!(got, want, "round {}", k - 1);
        }
    }
    let last = p.settle().unwrap().expect("round 8");
    assert_eq!(*last[2].as_ref().unwrap(), 82);
    assert!(!p.is_pending() && p.settle().unwrap().is_none());
    assert_eq!(p.run(vec![9, 9, 9]).unwrap(), vec![90, 91, 92]);
    assert_eq!(p.last_phases().calls, 1);
}

/// One rank thread that sleeps the milliseconds it is sent (a driver
/// call that takes that long).
fn sleeper() -> RankThreads<u64, ()> {
    RankThreads::spawn(1, "t", |_, inbox| {
        inbox.ready(Ok(()));
        inbox.serve(|ms| {
            std::thread::sleep(Duration::from_millis(ms));
            Ok(())
        });
    })
    .unwrap()
}

#[test]
fn a_watch_ends_the_wait_for_a_stuck_thread() {
    // The rank thread sleeps 30 s (a driver call behind a dead peer);
    // the watch fires at once: the caller returns the watch's error
    // after the grace, and the pool is broken.
    let mut p = sleeper();
    p.run(vec![1]).unwrap();
    p.set_watch(Some(Box::new(|| {
        Some(Error::peer_failed(1, "its process (pid 1) died", ""))
    })));
    // A thread that answers within the grace is still waited for.
    p.run(vec![100]).unwrap();
    let t = Instant::now();
    let r = p.run(vec![30_000]);
    assert!(matches!(r, Err(Error::PeerFailed { rank: 1, .. })), "{r:?}");
    assert!(t.elapsed() < WATCH_GRACE + Duration::from_secs(2));
    assert!(p.broken().is_some());
    // Dropping the broken pool leaves the sleeping thread running and
    // counts it: the command line then ends without the exit handlers
    // (the CUDA driver's would wait for such a thread).
    let before = threads_left_stuck();
    let t = Instant::now();
    drop(p);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(threads_left_stuck() > before);
}

#[test]
fn a_watch_that_keeps_firing_ends_rounds_that_each_complete() {
    // After a peer died, each round still completes within the grace
    // (the halted GPU work drains 100 ms at a time, as on a GPU whose
    // launch queue was full): the grace counts from the first
    // sighting, across rounds, so the caller gets the watch's error
    // about a second after it, not never (issue 32 item 10, seen on
    // an H200).
    let mut p = sleeper();
    let dead = Arc::new(AtomicBool::new(false));
    let d = dead.clone();
    p.set_watch(Some(Box::new(move || {
        d.load(Ordering::Relaxed)
            .then(|| Error::peer_failed(1, "its process (pid 1) died", ""))
    })));
    // A watch that does not fire costs nothing and ends nothing.
    for _ in 0..3 {
        p.run(vec![100]).unwrap();
    }
    dead.store(true, Ordering::Relaxed);
    let t = Instant::now();
    let mut rounds = 0;
    let err = loop {
        rounds += 1;
        match p.run(vec![100]) {
            Ok(_) => assert!(t.elapsed() < Duration::from_secs(5), "never ended"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::PeerFailed { rank: 1, .. }), "{err:?}");
    assert!(
        t.elapsed() < WATCH_GRACE + Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert!(rounds >= 5, "{rounds} rounds");
    // Every later round ends at once: with the same error, or (when
    // the grace ran out while a round was under way, and its thread
    // might be stuck) as a broken pool.
    let t = Instant::now();
    let r = p.run(vec![100]);
    assert!(
        matches!(
            r,
            Err(Error::PeerFailed { rank: 1, .. }) | Err(Error::Poisoned { .. })
        ),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_millis(50));
    // Once the watch clears, the pool goes on (it was never broken).
    dead.store(false, Ordering::Relaxed);
    if p.broken().is_none() {
        p.run(vec![1]).unwrap();
    }
}

#[test]
fn ten_deferred_rounds_run_back_to_back() {
    // Each handler takes 2 ms: ten deferred rounds take about 20 ms of
    // the workers' time, and the caller is never idle between them
    // waiting for an answer it does not need yet.
    let mut p: RankThreads<(), ()> = RankThreads::spawn(2, "t", |_, inbox| {
        inbox.ready(Ok(()));
        inbox.serve(|()| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        });
    })
    .unwrap();
    let t = Instant::now();
    for _ in 0..10 {
        if let Some(r) = p.run_deferred(vec![(), ()]).unwrap() {
            assert!(r.iter().all(|x| x.is_ok()));
        }
    }
    p.settle().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(20));
    assert!(t.elapsed() < Duration::from_secs(5));
}
