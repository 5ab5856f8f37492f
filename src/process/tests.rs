use super::*;

#[test]
fn proc_ids() {
    let me = ProcId::me();
    assert!(me.alive() && me.start > 0);
    assert_eq!(ProcId::parse(&me.encode()), Some(me));
    let gone = ProcId {
        pid: me.pid,
        start: me.start + 1,
    };
    assert!(!gone.alive(), "a reused pid is not the same process");
}

#[test]
fn threads_as_a_job() {
    // Three "processes" (threads here) join one store and agree.
    let dir =
        std::env::temp_dir().join(format!("rr-job-{}-{}", std::process::id(), unique_suffix()));
    let t = Duration::from_secs(10);
    let hs: Vec<_> = (0..3)
        .map(|r| {
            let spec = JobSpec::new(r, 3, &dir);
            std::thread::spawn(move || {
                let job = Job::join(&spec, t).unwrap();
                let s = job.sum_u64(r as u64 + 1, "sum").unwrap();
                let m = job.max_f64(r as f64, "max").unwrap();
                let a = job.any(r == 2, "any").unwrap();
                (s, m, a)
            })
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), (6, 2.0, true));
    }
    assert!(!dir.exists(), "rank 0 removes the store it created");
}

#[test]
fn threads_as_a_job_through_a_key_value_store() {
    // No directory: the ranks meet through the caller's store, then the
    // control segment carries everything.
    let kv: Arc<dyn KeyValue> = Arc::new(LocalKeyValue::default());
    let t = Duration::from_secs(10);
    let hs: Vec<_> = (0..3)
        .map(|r| {
            let spec = JobSpec::with_key_value(r, 3, kv.clone());
            std::thread::spawn(move || {
                let job = Job::join(&spec, t).unwrap();
                assert_eq!(job.store_path(), None);
                let s = job.sum_u64(r as u64 + 1, "sum").unwrap();
                let g = job.allgather(&[r as u8; 3], "gather").unwrap();
                (s, g)
            })
        })
        .collect();
    for h in hs {
        let (s, g) = h.join().unwrap();
        assert_eq!(s, 6);
        assert_eq!(g, vec![vec![0; 3], vec![1; 3], vec![2; 3]]);
    }
    let v = kv.get(rendezvous::CONTROL_KEY, t).unwrap().unwrap();
    assert!(rendezvous::decode(&v).is_some());
}

#[test]
fn a_key_value_job_whose_rank_0_never_comes_times_out_naming_the_key() {
    let kv: Arc<dyn KeyValue> = Arc::new(LocalKeyValue::default());
    let e = Job::join(
        &JobSpec::with_key_value(1, 2, kv),
        Duration::from_millis(100),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Timeout { rank: 1, .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains(rendezvous::CONTROL_KEY) && m.contains("rank 0"),
        "{m}"
    );
}

#[test]
fn a_key_value_job_refuses_a_value_it_did_not_set() {
    let kv: Arc<dyn KeyValue> = Arc::new(LocalKeyValue::default());
    kv.set(rendezvous::CONTROL_KEY, b"something else").unwrap();
    let e = Job::join(&JobSpec::with_key_value(1, 2, kv), Duration::from_secs(5))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is not what rank 0 of a ringreduce job sets"),
        "{e}"
    );
}
