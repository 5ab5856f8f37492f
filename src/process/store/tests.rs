use super::*;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rr-store-{name}-{}-{}",
        std::process::id(),
        crate::process::unique_suffix()
    ));
    let _ = fs::remove_dir_all(&d);
    d
}

#[test]
fn a_killed_ranks_cuda_ipc_files_are_swept_others_kept() {
    // The driver's files of a process that is gone (a child that exited
    // and was reaped), of this live process, of another name, and a
    // pid that was not named: only the first set goes.
    let dir = tmp("cudashm");
    fs::create_dir_all(&dir).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let me = std::process::id();
    let names = [
        format!("cuda.shm.0.{dead:x}.1"),
        format!("cuda.shm.3.{dead:x}.12"),
        format!("cuda.shm.0.{me:x}.1"),
        format!("cuda.shm.0.{dead:x}"),
        format!("cuda.shm.0.{:x}.1", dead.wrapping_add(1_000_000)),
        format!("other.0.{dead:x}.1"),
    ];
    for n in &names {
        fs::write(dir.join(n), b"x").unwrap();
    }
    let mut removed = sweep_cuda_ipc_files(&dir, &[dead, me]);
    removed.sort();
    let mut want = vec![dir.join(&names[0]), dir.join(&names[1])];
    want.sort();
    assert_eq!(removed, want);
    for n in &names[2..] {
        assert!(dir.join(n).exists(), "{n} was removed");
    }
    // A missing directory is nothing to sweep.
    assert!(sweep_cuda_ipc_files(&dir.join("none"), &[dead]).is_empty());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stale_stores_are_swept_live_ones_kept() {
    let base = tmp("sweep");
    fs::DirBuilder::new().mode(0o700).create(&base).unwrap();
    let uid = crate::sys::proc::uid();
    let me = ProcId::me();
    let gone = ProcId {
        pid: me.pid,
        start: me.start + 1,
    };
    let store = |name: &str, creator: Option<ProcId>, rank: Option<ProcId>| {
        let d = base.join(name);
        fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        if let Some(c) = creator {
            let info = RunInfo {
                run: "r".into(),
                size: 2,
                creator: Some(c),
            };
            fs::write(d.join(RUN_FILE), info.encode()).unwrap();
        }
        if let Some(p) = rank {
            fs::write(d.join("rank-1"), p.encode()).unwrap();
        }
        fs::write(d.join("some-key"), b"x").unwrap();
        d
    };
    let stale = store(&format!("ringreduce-{uid}-a"), Some(gone), Some(gone));
    let live = store(&format!("ringreduce-{uid}-b"), Some(me), None);
    let rank_lives = store(&format!("ringreduce-{uid}-c"), Some(gone), Some(me));
    let being_made = store(&format!("ringreduce-{uid}-d"), None, None);
    let other_user = store(&format!("ringreduce-{}-e", uid + 1), Some(gone), None);
    let not_ours = store("something-else", Some(gone), None);
    assert_eq!(sweep_stale(&base), vec![stale.clone()]);
    assert!(!stale.exists());
    for kept in [&live, &rank_lives, &being_made, &other_user, &not_ours] {
        assert!(kept.exists(), "{} was removed", kept.display());
    }
    assert!(sweep_stale(&base.join("missing")).is_empty());
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn create_join_put_get() {
    let d = tmp("basic");
    let t = Duration::from_secs(5);
    let s = Store::create(&d, "run1", 2, t).unwrap();
    assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
    let a = Store::join(&d, Some("run1"), 0, 2, t).unwrap();
    let b = Store::join(&d, Some("run1"), 1, 2, t).unwrap();
    a.put("k", b"v1").unwrap();
    assert_eq!(b.get("k", 0, "a value").unwrap(), b"v1");
    a.put("k", b"v2").unwrap();
    assert_eq!(b.try_get("k").unwrap().unwrap(), b"v2");
    assert!(a.put("../x", b"").is_err());
    // A second rank 1 is refused.
    let e = Store::join(&d, Some("run1"), 1, 2, t)
        .unwrap_err()
        .to_string();
    assert!(e.contains("already joined"), "{e}");
    // Another run's rank is refused: stale.
    let e = Store::join(&d, Some("run2"), 0, 2, t)
        .unwrap_err()
        .to_string();
    assert!(e.contains("stale store"), "{e}");
    // A non-empty directory is never created over: this one is a
    // store whose creator (this process) is alive, so it is in use.
    let e = Store::create(&d, "run3", 2, t).unwrap_err().to_string();
    assert!(e.contains("a store in use") && e.contains("run1"), "{e}");
    s.remove();
    assert!(!d.exists());
}

#[test]
fn waits_are_bounded_and_name_the_rank() {
    let d = tmp("wait");
    let t = Duration::from_millis(200);
    let s = Store::create(&d, "r", 2, t).unwrap();
    let a = Store::join(&d, Some("r"), 0, 2, t).unwrap();
    let t0 = Instant::now();
    let e = a.get("nothing", 1, "the thing").unwrap_err().to_string();
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert!(
        e.contains("the thing from rank 1") && e.contains("never joined"),
        "{e}"
    );
    s.abort("rank 1 exited with status 2");
    let e = a.get("nothing", 1, "the thing").unwrap_err().to_string();
    assert!(e.contains("aborted: rank 1 exited"), "{e}");
    // Joining an aborted run fails at once.
    let e = Store::join(&d, Some("r"), 1, 2, t).unwrap_err().to_string();
    assert!(e.contains("aborted"), "{e}");
    s.remove();
}

#[test]
fn missing_store_times_out_and_public_dirs_are_refused() {
    let d = tmp("missing");
    let t = Duration::from_millis(100);
    let e = Store::join(&d, Some("x"), 1, 2, t).unwrap_err().to_string();
    assert!(e.contains("to be created"), "{e}");
    fs::create_dir(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    let e = Store::create(&d, "x", 2, t).unwrap_err().to_string();
    assert!(e.contains("0700"), "{e}");
    fs::remove_dir_all(&d).unwrap();
}
