//! One process per rank, on the CPU backend: `ringreduce launch`, ranks
//! started the way `mpirun` starts them, and the fault cases (a rank killed
//! with SIGKILL in the middle of a collective, a rank that never starts, a
//! stale store, a killed or interrupted launcher). Every test checks that no
//! process of its run is left running.
//!
//! Each test tags the processes it starts with its own environment variable
//! (`RR_MP_TEST=<tag>`, inherited by the ranks) and looks for them in
//! `/proc`.

#[path = "../support/procs.rs"]
mod procs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringreduce");

fn tag(name: &str) -> String {
    format!(
        "{name}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    )
}

/// The processes (pid, environment) carrying `RR_MP_TEST=<tag>` that are
/// not zombies.
fn tagged(tag: &str) -> Vec<(u32, String)> {
    let want = format!("RR_MP_TEST={tag}");
    let mut v = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let env = String::from_utf8_lossy(&env).replace('\0', "\n");
        if !env.lines().any(|l| l == want) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next());
        if matches!(state, Some("Z") | Some("X") | None) {
            continue;
        }
        v.push((pid, env));
    }
    v
}

/// Wait up to `limit` until no tagged process is left; panic naming them
/// (see `procs::wait_gone`).
fn assert_none_left(tag: &str, limit: Duration) {
    procs::wait_gone(tag, limit, || {
        tagged(tag).into_iter().map(|x| x.0).collect()
    });
}

fn launch(tag: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("launch")
        .args(args)
        .env("RR_MP_TEST", tag)
        .env_remove("RINGREDUCE_FAULT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null());
    c
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `trace` under `launch` times only the process's own rank: the report
/// must not count the other ranks' ops as "not timed" or print an empty
/// breakdown for them (found by running it as a new user would).
#[test]
fn trace_in_a_rank_process_reports_only_its_own_rank() {
    let t = tag("trace2");
    let args: Vec<&str> =
        "-n 2 --timeout 30 -- trace --backend cpu --algo ring --size 64KiB --calls 2"
            .split(' ')
            .collect();
    let o = launch(&t, &args, &[]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("every time follows the plan's order"), "{out}");
    assert!(!out.contains("was not timed"), "{out}");
    assert!(out.contains("#   rank 0: wall"), "{out}");
    assert!(!out.contains("#   rank 1: wall"), "{out}");
    assert!(
        out.contains("only what rank 0 issued is counted here"),
        "{out}"
    );
    assert_none_left(&t, Duration::from_secs(2));
}

#[test]
fn four_ranks_run_on_the_cpu() {
    let t = tag("run4");
    let o = launch(
        &t,
        &[
            "-n",
            "4",
            "--timeout",
            "30",
            "--",
            "run",
            "--backend",
            "cpu",
            "--size",
            "1MiB",
        ],
        &[],
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("[rank 0] check     : PASS (0 wrong of 1048576 elements on 4 ranks"),
        "{out}"
    );
    assert!(out.contains("one process per rank"), "{out}");
    // Only rank 0 reports.
    assert!(
        !out.contains("[rank 1]") && !out.contains("[rank 3]"),
        "{out}"
    );
    assert_none_left(&t, Duration::from_secs(2));
}

#[test]
fn every_path_and_collective_across_processes() {
    // The soak draws every path (ring, pipelined ring, one-shots including
    // the pull and flag ones, parameter server), collective, type, op and
    // place, every result checked by every rank.
    for (n, seed) in [("2", "11"), ("3", "12")] {
        let t = tag("soak");
        let o = launch(
            &t,
            &[
                "-n",
                n,
                "--timeout",
                "30",
                "--",
                "soak",
                "--backend",
                "cpu",
                "--calls",
                "150",
                "--seed",
                seed,
                "--max-size",
                "64KiB",
            ],
            &[],
        )
        .output()
        .unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{n} ranks: {out}\n{err}");
        assert!(out.contains("[rank 0] PASS: 0 wrong of 150 calls"), "{out}");
        assert_none_left(&t, Duration::from_secs(2));
    }
}

#[test]
fn bench_across_processes() {
    let t = tag("bench");
    let dir = std::env::temp_dir().join(&t);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("b.json");
    let o = launch(
        &t,
        &[
            "-n",
            "2",
            "--timeout",
            "30",
            "--",
            "bench",
            "--backend",
            "cpu",
            "--algo",
            "ring,oneshot",
            "-b",
            "1KiB",
            "-e",
            "16KiB",
            "-n",
            "2",
            "-w",
            "1",
            "--blocks",
            "1",
            "--no-ceiling",
            "--cold-size",
            "4KiB",
            "-J",
            json.to_str().unwrap(),
        ],
        &[],
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("one process per rank: 2 processes"), "{out}");
    assert!(!out.contains("[rank 1]"), "{out}");
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"rows\""), "{j}");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_none_left(&t, Duration::from_secs(2));
}

#[test]
fn a_rank_killed_mid_collective_ends_the_job() {
    let t = tag("kill");
    let t0 = Instant::now();
    let o = launch(
        &t,
        &[
            "-n",
            "4",
            "--timeout",
            "20",
            "--",
            "run",
            "--backend",
            "cpu",
            "--size",
            "1MiB",
            "--iters",
            "50",
        ],
        // SIGKILL in rank 1's third call, after its Begin: the others are
        // inside the call, waiting for it.
        &[("RINGREDUCE_FAULT", "kill:rank=1:call=3")],
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(137),
        "worst status: SIGKILL\n{out}\n{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "ended by the survivors, not the timeout"
    );
    assert!(
        err.contains("launch: rank 1 was killed by SIGKILL"),
        "{err}"
    );
    for r in [0, 2, 3] {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("[rank {r}] error:")))
            .unwrap_or_else(|| panic!("rank {r} reports an error\n{err}"));
        // Typed: the failed rank is named as such (`PeerFailed`), not the
        // survivor (issue 32 item 7).
        assert!(line.contains("rank 1 failed"), "{line}");
    }
    assert_none_left(&t, Duration::from_secs(2));
}

/// Issue 41 item 3: a rank that panics (exit status 101) or exits with a
/// status of its own mid-job is named by every survivor, as the rank that
/// failed (`PeerFailed` naming it), never a healthy rank or the launcher's
/// abort; and the job ends well before the timeout.
fn a_rank_that_ends_badly_is_named_by_every_survivor(fault: &str, status: i32, how: &str) {
    let t = tag("badend");
    let t0 = Instant::now();
    let o = launch(
        &t,
        &[
            "-n",
            "3",
            "--timeout",
            "20",
            "--",
            "run",
            "--backend",
            "cpu",
            "--size",
            "64KiB",
            "--iters",
            "20",
        ],
        &[("RINGREDUCE_FAULT", fault)],
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(status), "{fault}\n{out}\n{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "{fault}: ended by the survivors, not the timeout ({:?})",
        t0.elapsed()
    );
    for r in [0, 2] {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("[rank {r}] error:")))
            .unwrap_or_else(|| panic!("{fault}: rank {r} reports an error\n{err}"));
        assert!(
            line.contains("rank 1 failed") && line.contains(how),
            "{fault}: rank {r} must name rank 1 ({how}): {line}\n{err}"
        );
        assert!(
            !line.contains("rank 0 failed") && !line.contains("rank 2 failed"),
            "{fault}: a survivor is blamed: {line}"
        );
    }
    assert_none_left(&t, Duration::from_secs(2));
}

#[test]
fn a_rank_that_panics_is_named_by_every_survivor() {
    a_rank_that_ends_badly_is_named_by_every_survivor(
        "panic:rank=1:call=3",
        101,
        "its process panicked",
    );
}

#[test]
fn a_rank_that_exits_is_named_by_every_survivor() {
    a_rank_that_ends_badly_is_named_by_every_survivor(
        "exit:rank=1:call=3:code=3",
        3,
        "its process",
    );
}

#[test]
fn an_external_sigkill_of_a_rank_ends_the_job() {
    let t = tag("extkill");
    let child = launch(
        &t,
        &[
            "-n",
            "3",
            "--timeout",
            "20",
            "--",
            "soak",
            "--backend",
            "cpu",
            "--calls",
            "100000000",
            "--seconds",
            "60",
            "--max-size",
            "256KiB",
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the ranks are busy, then kill rank 2 from outside.
    let t0 = Instant::now();
    let victim = loop {
        let rank2 = tagged(&t)
            .into_iter()
            .find(|(_, env)| env.lines().any(|l| l == "RINGREDUCE_RANK=2"));
        if let Some((pid, _)) = rank2 {
            if t0.elapsed() > Duration::from_millis(600) {
                break pid;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "ranks never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let killed_at = Instant::now();
    Command::new("kill")
        .arg("-9")
        .arg(victim.to_string())
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert!(killed_at.elapsed() < Duration::from_secs(15), "{err}");
    assert_eq!(o.status.code(), Some(137), "{out}\n{err}");
    assert!(err.contains("rank 2 was killed by SIGKILL"), "{err}");
    assert_none_left(&t, Duration::from_secs(2));
}

#[test]
fn a_rank_that_never_starts_ends_the_job() {
    let t = tag("nostart");
    let t0 = Instant::now();
    let o = launch(
        &t,
        &[
            "-n",
            "4",
            "--timeout",
            "20",
            "--",
            "run",
            "--backend",
            "cpu",
            "--size",
            "64KiB",
        ],
        &[("RINGREDUCE_FAULT", "nostart:rank=2")],
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(t0.elapsed() < Duration::from_secs(15));
    assert!(err.contains("launch: rank 2 exited with status 2"), "{err}");
    for r in [0, 1, 3] {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("[rank {r}] error:")) && l.contains("rank 2")),
            "rank {r} names rank 2\n{err}"
        );
    }
    assert_none_left(&t, Duration::from_secs(2));
}

/// A store directory as a crashed run leaves it.
fn stale_store(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("rr-stale-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        d.join("run-id"),
        "run crashed-run\nsize 2\ncreator 999999999 1\n",
    )
    .unwrap();
    std::fs::write(d.join("rank-0"), "999999999 1").unwrap();
    d
}

#[test]
fn a_stale_store_is_reported_not_reused() {
    // By the launcher, before any rank starts.
    let d = stale_store("launch");
    let t = tag("stale");
    let o = launch(
        &t,
        &[
            "-n",
            "2",
            "--store",
            d.to_str().unwrap(),
            "--",
            "run",
            "--backend",
            "cpu",
        ],
        &[],
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("stale store directory") && err.contains("crashed-run"),
        "{err}"
    );
    assert!(d.join("run-id").exists(), "left as it was");
    // By the ranks themselves (started with this run's id).
    let t0 = Instant::now();
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            Command::new(BIN)
                .args(["run", "--backend", "cpu", "--timeout", "10"])
                .env("RR_MP_TEST", &t)
                .env("RINGREDUCE_RANK", r.to_string())
                .env("RINGREDUCE_SIZE", "2")
                .env("RINGREDUCE_STORE", &d)
                .env("RINGREDUCE_RUN_ID", "this-run")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in ranks {
        let o = c.wait_with_output().unwrap();
        let (_, err) = text(&o);
        assert!(!o.status.success());
        assert!(
            err.contains("stale store directory") && err.contains("this-run"),
            "{err}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    std::fs::remove_dir_all(&d).unwrap();
    assert_none_left(&t, Duration::from_secs(2));
}

/// Start a long soak under the launcher and wait until its ranks run.
fn long_soak(t: &str, n: &str) -> std::process::Child {
    let child = launch(
        t,
        &[
            "-n",
            n,
            "--timeout",
            "20",
            "--grace",
            "1",
            "--",
            "soak",
            "--backend",
            "cpu",
            "--calls",
            "100000000",
            "--seconds",
            "60",
            "--max-size",
            "64KiB",
        ],
        &[],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    while tagged(t).len() < n.parse::<usize>().unwrap() + 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "ranks never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// What a killed job leaves in its store: only the small key files (no
/// shared segment). A store already gone (swept by another test's launcher,
/// `store::sweep_stale`) left nothing.
fn assert_only_keys_left(store: &Path) {
    let Ok(entries) = std::fs::read_dir(store) else {
        return;
    };
    let left: Vec<(String, u64)> = entries
        .flatten()
        .map(|e| {
            let len = e.metadata().map_or(0, |m| m.len());
            (e.file_name().to_string_lossy().into_owned(), len)
        })
        .collect();
    let bytes: u64 = left.iter().map(|x| x.1).sum();
    assert!(
        bytes < 4096,
        "{bytes} bytes left in {}: {left:?}",
        store.display()
    );
}

#[test]
fn a_killed_launcher_leaves_no_rank_behind() {
    let t = tag("launcher-killed");
    let child = long_soak(&t, "3");
    let store = tagged(&t)
        .iter()
        .find_map(|(_, env)| {
            env.lines()
                .find_map(|l| l.strip_prefix("RINGREDUCE_STORE=").map(PathBuf::from))
        })
        .expect("the ranks know the store");
    Command::new("kill")
        .arg("-9")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let _ = child.wait_with_output();
    assert_none_left(&t, Duration::from_secs(5));
    // The ranks the store names, as the sweep reads them: a rank already
    // exiting when the tagged processes were listed (its environment
    // gone, not yet a zombie) was not waited for above, and the sweep
    // rightly leaves a store with a live rank (seen once in CI, loaded).
    procs::wait_gone(&t, Duration::from_secs(10), || store_ranks(&store));
    // A launcher killed with SIGKILL cannot remove its store: what is left
    // is its small key files. The shared segments have no name at any
    // moment (a kill in the middle of a reserve once left a buffer here,
    // when segments were files unlinked after every peer mapped them).
    assert_only_keys_left(&store);
    // Nobody can remove it but the next launcher: it sweeps the stores
    // whose launcher and ranks are gone (or a concurrent test's did).
    let o = launch(&tag("sweeper"), &["-n", "1", "--", "theory"], &[])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(!store.exists(), "{} was not swept: {err}", store.display());
}

/// The pids in `store`'s rank files (`rank-*`: "pid start"), the ranks
/// that joined it.
fn store_ranks(store: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir(store)
        .map(|d| {
            d.flatten()
                .filter(|f| f.file_name().to_string_lossy().starts_with("rank-"))
                .filter_map(|f| std::fs::read_to_string(f.path()).ok())
                .filter_map(|t| t.split_whitespace().next()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The window the test above once hit: a segment exists and waits for its
/// peers to map it (here the control segment: rank 0 of 2 waits at the join
/// barrier for a rank 1 that never comes). Killed there, rank 0 leaves only
/// the store's key files: the segment never had a name (with files
/// unlinked after every peer mapped them, its 788 KB file stayed).
#[test]
fn a_rank_killed_while_its_segment_awaits_its_peers_leaves_no_segment() {
    let t = tag("segment-window");
    let store = std::env::temp_dir().join(&t);
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--backend",
            "cpu",
            "--size",
            "64KiB",
            "--timeout",
            "20",
        ])
        .env("RR_MP_TEST", &t)
        .env("RINGREDUCE_STORE", &store)
        .env("RINGREDUCE_RANK", "0")
        .env("RINGREDUCE_SIZE", "2")
        .env_remove("RINGREDUCE_RUN_ID")
        .env_remove("RINGREDUCE_FAULT")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !store.join("control-ready").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "rank 0 never published its segment"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    assert_only_keys_left(&store);
    std::fs::remove_dir_all(&store).unwrap();
}

#[test]
fn ctrl_c_stops_every_rank() {
    let t = tag("sigint");
    let child = long_soak(&t, "2");
    let t0 = Instant::now();
    Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("the launcher got SIGINT"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_none_left(&t, Duration::from_secs(2));
}

/// `SIGTERM` to the launcher reaches the ranks as `SIGTERM` (it was
/// forwarded as `SIGINT`, and the launcher exited 130 reporting SIGINT),
/// and the launcher exits 143, the shell's status for it.
#[test]
fn sigterm_to_the_launcher_is_sigterm_to_the_ranks() {
    let t = tag("sigterm");
    let child = long_soak(&t, "2");
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(err.contains("the launcher got SIGTERM"), "{err}");
    assert!(!err.contains("SIGINT"), "{err}");
    assert_none_left(&t, Duration::from_secs(2));
}

/// The stores `mpirun`-style ranks without a job id make: named after
/// the parent process (this test), under the default base.
fn parent_stores() -> Vec<PathBuf> {
    let suffix = format!("-ppid-{}", std::process::id());
    let mut v = Vec::new();
    for base in [PathBuf::from("/dev/shm"), std::env::temp_dir()] {
        if let Ok(d) = std::fs::read_dir(&base) {
            for e in d.flatten() {
                if e.file_name().to_string_lossy().ends_with(&suffix) {
                    v.push(e.path());
                }
            }
        }
    }
    v
}

/// An `mpirun`-style rank 0 whose peer never joins exits 2 naming how
/// ranks find each other without a job id, and removes the store it made
/// (it stayed in /dev/shm until a later `launch`).
#[test]
fn an_mpirun_rank_whose_peer_never_joins_leaves_no_store() {
    let t = tag("lonely");
    let o = Command::new(BIN)
        .args([
            "run",
            "--backend",
            "cpu",
            "--size",
            "4KiB",
            "--timeout",
            "2",
        ])
        .env("RR_MP_TEST", &t)
        .env("OMPI_COMM_WORLD_RANK", "0")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .env_remove("RINGREDUCE_STORE")
        .env_remove("PMIX_NAMESPACE")
        .env_remove("OMPI_MCA_ess_base_jobid")
        .env_remove("OMPI_MCA_orte_ess_jobid")
        .env_remove("SLURM_JOB_ID")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("RINGREDUCE_STORE") && err.contains("parent process"),
        "{err}"
    );
    assert!(parent_stores().is_empty(), "left: {:?}", parent_stores());
    assert_none_left(&t, Duration::from_secs(2));
}

/// Ranks started as `mpirun` starts them: no launcher, rank and size from
/// Open MPI's or PMI's variables, the store named after the job.
fn mpirun_style(vars: &[(&str, &str, &str)], job: (&str, &str)) {
    let t = tag("mpirun");
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            let mut c = Command::new(BIN);
            c.args([
                "run",
                "--backend",
                "cpu",
                "--size",
                "256KiB",
                "--timeout",
                "20",
                "-d",
                "int32",
                "-o",
                "max",
            ])
            .env("RR_MP_TEST", &t)
            .env_remove("RINGREDUCE_STORE")
            .env(job.0, job.1)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            for (rank, size, local) in vars {
                c.env(rank, r.to_string())
                    .env(size, "2")
                    .env(local, r.to_string());
            }
            c.spawn().unwrap()
        })
        .collect();
    let outs: Vec<Output> = ranks
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (r, o) in outs.iter().enumerate() {
        let (out, err) = text(o);
        assert!(o.status.success(), "rank {r}: {out}\n{err}");
        if r == 0 {
            assert!(
                out.contains("check     : PASS") && out.contains("2 processes"),
                "{out}"
            );
            let store = out
                .lines()
                .find_map(|l| l.split("key files under ").nth(1))
                .expect("the store is named");
            assert!(!Path::new(store.trim()).exists(), "rank 0 removed {store}");
        } else {
            assert!(out.is_empty(), "only rank 0 prints: {out}");
        }
    }
    assert_none_left(&t, Duration::from_secs(2));
}

#[test]
fn ranks_started_like_open_mpi() {
    let ns = tag("prterun-test@1");
    mpirun_style(
        &[(
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
        )],
        ("PMIX_NAMESPACE", &ns),
    );
}

#[test]
fn ranks_started_like_mpich() {
    let kvs = tag("kvs");
    mpirun_style(
        &[("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")],
        ("PMI_KVSNAME", &kvs),
    );
}

// -- the communicator in rank processes (issue 32 items 5 and 6) ------------

/// Set in the rank processes of `the_communicator_across_processes`: this
/// test binary, started again as every rank of a `ringreduce launch` job,
/// runs [`comm_rank`] with the backend.
const COMM_RANK: &str = "RR_MP_COMM_RANK";

/// One rank's checks; a failure panics (the rank exits 101 and the job
/// fails naming it).
fn comm_rank(which: &str) {
    use ringreduce::{BackendChoice, Communicator, Error, ReduceOp};
    let backend = if which == "cuda" {
        BackendChoice::Cuda
    } else {
        BackendChoice::Cpu
    };
    let mut c = Communicator::from_env(backend).expect("join the job");
    let (r, n) = (c.rank(), c.size());
    assert_eq!(n, 2);
    // Item 6: every element type of one communicator, each result in this
    // rank's own buffer.
    let mut x = vec![(r + 1) as f32; 3];
    c.all_reduce_in_place(&mut x, ReduceOp::Sum).expect("f32");
    assert_eq!(x, [3.0; 3], "rank {r}: f32");
    let mut y = vec![if r == 0 { 100i64 } else { 200 }; 2];
    c.all_reduce_in_place(&mut y, ReduceOp::Sum).expect("i64");
    assert_eq!(
        y, [300; 2],
        "rank {r}: i64 (was [[300, 300], [200, 200]] across ranks)"
    );
    let mut chunk = vec![0u32; 2];
    c.reduce_scatter(&[r as u32, r as u32, 10, 10], &mut chunk, ReduceOp::Sum)
        .expect("reduce_scatter");
    assert_eq!(chunk, [if r == 0 { 1 } else { 20 }; 2], "rank {r}: chunk");
    let mut all = vec![0i8; 4];
    c.all_gather(&[r as i8 * 3; 2], &mut all)
        .expect("all_gather");
    assert_eq!(all, [0, 0, 3, 3], "rank {r}: all_gather");
    let mut b = vec![r as f64 + 0.5; 5];
    let info = c.broadcast_in_place(&mut b, 1).expect("broadcast");
    assert_eq!(b, [1.5; 5], "rank {r}: broadcast ({})", info.path);
    let info = c.barrier().expect("barrier");
    assert_eq!(info.path, "barrier");
    // Item 5: a rank that asks for something else: one Mismatch on every
    // rank, at once, buffers untouched, and the job goes on.
    let t0 = std::time::Instant::now();
    let mut out = vec![-1.0f32; 4];
    let op = if r == 1 { ReduceOp::Max } else { ReduceOp::Sum };
    let res = c.all_reduce(&[1.0f32; 4], &mut out, op);
    match &res {
        Err(e @ Error::Mismatch { rank: 1, .. }) => {
            let t = e.to_string();
            assert!(
                t.contains("sum") && t.contains("max"),
                "rank {r}: the mismatch must name both calls: {t}"
            );
        }
        other => panic!(
            "LIBRARY BUG (issue 32 item 5): rank {r}, sum against max: {other:?} (was Ok with wrong data)"
        ),
    }
    assert_eq!(out, [-1.0; 4], "rank {r}: a failed call changed the output");
    let mut one = vec![0i32; if r == 1 { 5 } else { 4 }];
    let res = if r == 1 {
        c.all_reduce(&[1i32; 5], &mut one, ReduceOp::Sum)
    } else {
        c.all_reduce(&[1i32; 4], &mut one, ReduceOp::Sum)
    };
    assert!(
        matches!(res, Err(Error::Mismatch { rank: 1, .. })),
        "rank {r}, 4 against 5 elements: {res:?}"
    );
    let res = if r == 1 {
        c.all_gather(&[1.0f32; 2], &mut [0.0f32; 4])
    } else {
        c.all_reduce(&[1.0f32; 2], &mut [0.0f32; 2], ReduceOp::Sum)
    };
    assert!(
        matches!(res, Err(Error::Mismatch { rank: 1, .. })),
        "rank {r}, all-reduce against all-gather: {res:?}"
    );
    let res = c.broadcast_in_place(&mut [0u8; 3], r);
    assert!(
        matches!(res, Err(Error::Mismatch { rank: 1, .. })),
        "rank {r}, broadcasts from different roots: {res:?}"
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(10),
        "the mismatches took {:?}",
        t0.elapsed()
    );
    let mut z = vec![(r + 1) as u64; 2];
    c.all_reduce_in_place(&mut z, ReduceOp::Sum)
        .expect("the call after the mismatches");
    assert_eq!(z, [3; 2], "rank {r}");
    // Device buffers (on the CPU backend, shared memory).
    let d = c.alloc::<f32>(16).expect("alloc");
    c.write_buffer(&d, &[r as f32 + 1.0; 16]).expect("write");
    c.all_reduce_device(&d, &d, 16, ReduceOp::Sum)
        .expect("device all-reduce");
    let mut back = vec![0.0f32; 16];
    c.read_buffer(&d, &mut back).expect("read");
    assert_eq!(back, [3.0; 16], "rank {r}: device");
    c.free(d).expect("free");
    println!("\nrank {r}: ok");
}

/// The communicator with one rank per real process: every element type's
/// result in its own rank's buffer (item 6), every mismatch one error on
/// every rank (item 5). (A rank's handle takes its own buffer alone, by
/// its type: the engine underneath no longer has host-slice calls that
/// could be given every rank's buffers.)
/// On a machine with a GPU also on the CUDA backend (else SKIPPED).
#[test]
fn the_communicator_across_processes() {
    if let Ok(which) = std::env::var(COMM_RANK) {
        comm_rank(&which);
        return;
    }
    let me = std::env::current_exe().expect("the test binary");
    for which in ["cpu", "cuda"] {
        if which == "cuda" {
            // CUDA's probe, or "built without the cuda feature".
            if let Some(why) = ringreduce::BackendChoice::Auto.cpu_reason() {
                println!("the_communicator_across_processes[cuda] ... SKIPPED: no CUDA driver/GPU ({why})");
                continue;
            }
        }
        let t = tag(&format!("comm-{which}"));
        let o = launch(
            &t,
            &["-n", "2", "--timeout", "60", "--"],
            &[(COMM_RANK, which)],
        )
        .arg(&me)
        .args([
            "the_communicator_across_processes",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .output()
        .unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{which}: {out}\n{err}");
        for r in 0..2 {
            assert!(
                out.contains(&format!("[rank {r}] rank {r}: ok")),
                "{which}: rank {r} did not finish: {out}\n{err}"
            );
        }
        assert_none_left(&t, Duration::from_secs(5));
    }
}
