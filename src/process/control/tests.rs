use super::*;
use std::sync::Arc;

fn seg(name: &str, n: usize) -> (std::path::PathBuf, Vec<Arc<Control>>, Export) {
    let dir = std::env::temp_dir().join(format!(
        "rr-ctl-{name}-{}-{}",
        std::process::id(),
        super::super::unique_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let t = Duration::from_secs(5);
    let (c, ex) = Control::create("run", n, t).unwrap();
    let mut v = vec![Arc::new(c)];
    for r in 1..n {
        v.push(Arc::new(Control::open(ex.path(), "run", n, r, t).unwrap()));
    }
    for c in &v {
        c.register();
    }
    (dir, v, ex)
}

#[test]
fn allgather_any_length_and_barriers() {
    let (dir, v, _ex) = seg("ag", 3);
    let hs: Vec<_> = v
        .iter()
        .map(|c| {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut res = Vec::new();
                for round in 0..5usize {
                    // Payload lengths differ per rank and round, some
                    // longer than a mailbox.
                    let len = [0, 7, 100_000, 65_520, 3][(c.me + round) % 5];
                    let data: Vec<u8> = (0..len).map(|i| (i + c.me * 13 + round) as u8).collect();
                    res.push(c.allgather(&data, "test").unwrap());
                    c.barrier("test barrier").unwrap();
                }
                res
            })
        })
        .collect();
    let results: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    for res in &results {
        for (round, all) in res.iter().enumerate() {
            for (r, d) in all.iter().enumerate() {
                let len = [0, 7, 100_000, 65_520, 3][(r + round) % 5];
                let want: Vec<u8> = (0..len).map(|i| (i + r * 13 + round) as u8).collect();
                assert_eq!(d, &want, "round {round} rank {r}");
            }
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn failures_release_and_segments_are_checked() {
    let (dir, v, ex) = seg("fail", 2);
    assert!(v[0].health().is_none());
    v[1].record_failure(3, 1, "injected");
    v[0].record_failure(4, 0, "second: ignored");
    let h = v[0].health().unwrap();
    assert_eq!(
        h,
        JobFault::Failed {
            rank: 1,
            call: 3,
            why: "injected".into(),
            timed_out: None,
        }
    );
    assert!(
        h.to_string().contains("rank 1 failed in call 3: injected"),
        "{h}"
    );
    // A waiter is told which rank failed, typed.
    let e = v[0].barrier("b").unwrap_err();
    assert!(matches!(e, Error::PeerFailed { rank: 1, .. }), "{e:?}");
    let e = v[0].barrier("b").unwrap_err().to_string();
    assert!(e.contains("injected"), "{e}");
    let p = ex.path();
    let e = Control::open(p, "other run", 2, 1, Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("another run"), "{e}");
    let e = Control::open(p, "run", 3, 1, Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds") || e.contains("for 2 ranks"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_failed_rank_past_the_call_excuses_it_only_where_every_rank_sees_that() {
    // Rank 1 completed and agreed on call 5, then failed. On a job of
    // one machine every rank reads that, so a waiter in call 5 goes
    // on. As node 0 of a job over nodes the other nodes cannot read
    // it and fail call 5: so must this node's ranks (they would wait
    // for a rank of another node that gave up).
    for over_nodes in [false, true] {
        let (dir, v, ex) = seg("excuse", 2);
        let t = Duration::from_secs(5);
        let mut c = Control::open(ex.path(), "run", 2, 0, t).unwrap();
        if over_nodes {
            c.set_names(vec![0, 1]);
        }
        v[1].publish_drained(5);
        v[1].publish_agreed(5);
        v[1].record_failure(6, 1, "injected after call 5");
        let excused = SharedBoard::completed(&c, 1) >= 5;
        assert_eq!(excused, !over_nodes, "over nodes: {over_nodes}");
        let e = c.agreement_fault(5, "agreeing on call 5");
        assert_eq!(e.is_some(), over_nodes, "over nodes: {over_nodes}: {e:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// Ranks 0 and 1 are both gone: rank 1 ended badly (the launcher wrote
/// its abort for rank 1), rank 0 noticed and exited with no record.
/// Rank 2 names rank 1, the first, not rank 0, the lowest dead rank (a
/// CI run named a survivor that had exited), and every later check does
/// too (recorded).
#[test]
fn the_launchers_abort_names_the_first_rank_not_a_survivor_that_exited() {
    let (dir, mut v, _ex) = seg("abort-first", 3);
    let dead = || {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    for r in [0, 1] {
        v[r].rank_word(r, R_PID)
            .store(u64::from(dead()), Ordering::Relaxed);
    }
    let store =
        super::super::store::Store::create(&dir.join("store"), "run", 3, Duration::from_secs(5))
            .unwrap();
    store.abort_for(1, "its process exited with status 3");
    Arc::get_mut(&mut v[2]).unwrap().watch_store(store);
    for _ in 0..2 {
        let r = v[2].check(&|| "x".into());
        assert!(
            matches!(&r, Err(Error::PeerFailed { rank: 1, .. })),
            "{r:?}"
        );
    }
    assert_eq!(v[2].failure().map(|f| f.1), Some(1));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_dead_peer_is_named_by_check_even_with_the_engine_halted() {
    // Rank 1's process is gone (a child that exited and was reaped);
    // rank 0's check names it, before and after its device spins were
    // halted, and with its engine's abort handle watched.
    let (dir, v, _ex) = seg("dead", 2);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    v[1].rank_word(1, R_PID)
        .store(u64::from(pid), Ordering::Relaxed);
    let abort = AbortHandle::new();
    v[0].watch_abort(abort.clone());
    for _ in 0..3 {
        let r = v[0].check(&|| "x".into());
        assert!(
            matches!(&r, Err(Error::PeerFailed { rank: 1, .. })),
            "{r:?}"
        );
    }
    assert!(!abort.is_aborted());
    std::fs::remove_dir_all(dir).ok();
}

/// Over nodes a node's segment holds only its ranks, under their job
/// ranks (`names`): a wait for a peer's start or drain takes the job's
/// rank number and reads that peer's word. (It read the word of the
/// segment's rank with that number: on every node but the first the
/// ranks of `hier:G:mpi`, which read their node peers' inputs, each
/// waited out the timeout for the other.)
#[test]
fn over_nodes_a_wait_for_a_peer_reads_that_peers_word() {
    let t = Duration::from_secs(5);
    // Node 1 of a 2 x 2 job: segment ranks 0 and 1 are job ranks 2 and 3.
    let (mut a, ex) = Control::create("run", 2, t).unwrap();
    let mut b = Control::open(ex.path(), "run", 2, 1, t).unwrap();
    a.set_names(vec![2, 3]);
    b.set_names(vec![2, 3]);
    a.register();
    b.register();
    b.publish_begun(7);
    b.publish_drained(7);
    a.wait_begun(3, 7).expect("job rank 3 began call 7");
    a.wait_drained(3, 7, "input")
        .expect("job rank 3 drained call 7");
    // A rank of another node has no word here: an error naming it, at once.
    let e = a.wait_begun(0, 7).expect_err("rank 0 is on node 0");
    assert!(
        e.to_string()
            .contains("rank 0 is not in this node's control segment"),
        "{e}"
    );
}
