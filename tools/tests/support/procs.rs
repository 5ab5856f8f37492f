//! Processes of a test, found in `/proc` (shared by the mp and mpi test
//! suites, each of which includes this file).

use std::process::Command;
use std::time::{Duration, Instant};

/// The state letter and start time of a process (`None`: no such pid).
pub fn proc_state(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = stat.rsplit(')').next()?.split_whitespace();
    let state = f.next()?.chars().next()?;
    // Field 22 (starttime) is the 20th after the command's closing paren.
    let start = f.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Wait up to `limit` until none of the processes `tagged()` lists (the
/// test's, by its tag) is left; kill them and panic naming them if some
/// are.
///
/// A process seen once stays counted until it is a zombie or gone: an
/// exiting process drops its environment (`/proc/<pid>/environ` reads
/// empty, so `tagged()` no longer finds it) before it stops running, and a
/// store sweep in that window still sees it alive (the flake of
/// `a_killed_launcher_leaves_no_rank_behind`).
pub fn wait_gone(tag: &str, limit: Duration, tagged: impl Fn() -> Vec<u32>) {
    let t0 = Instant::now();
    let mut seen: Vec<(u32, u64)> = Vec::new();
    loop {
        for pid in tagged() {
            if let Some((_, start)) = proc_state(pid) {
                if !seen.contains(&(pid, start)) {
                    seen.push((pid, start));
                }
            }
        }
        seen.retain(|&(pid, start)| {
            proc_state(pid).is_some_and(|(st, s)| s == start && !matches!(st, 'Z' | 'X' | 'x'))
        });
        if seen.is_empty() {
            return;
        }
        if t0.elapsed() > limit {
            let left: Vec<u32> = seen.iter().map(|x| x.0).collect();
            for p in &left {
                let _ = Command::new("kill").arg("-9").arg(p.to_string()).status();
            }
            panic!("processes of {tag} left running: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
