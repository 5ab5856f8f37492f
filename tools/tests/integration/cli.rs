//! The command line, run as a separate process: the README's commands, every
//! command on the CPU, bad inputs (a message and a non-zero exit, never a
//! panic, never a crash on memory), closed pipes, output files, traces,
//! soak and theory.

use crate::common::{cuda_skip_reason, pass, skip};
use crate::ensure;
use crate::harness::Harness;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The CLI under test: `RINGREDUCE_BIN` (the staged binary on the GPU
/// machine) or the one cargo built with this test.
pub(crate) fn bin() -> PathBuf {
    std::env::var_os("RINGREDUCE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ringreduce")))
}

/// How a run ended.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The exit code (`None`: killed by a signal).
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
    pub(crate) out: String,
    pub(crate) err: String,
    pub(crate) took: Duration,
    pub(crate) timed_out: bool,
}

impl Ran {
    /// A one-line summary for failure messages.
    pub(crate) fn show(&self) -> String {
        format!(
            "exit {:?} signal {:?} after {:.1?}{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            self.signal,
            self.took,
            if self.timed_out {
                " (KILLED: too slow)"
            } else {
                ""
            },
            tail(&self.out),
            tail(&self.err)
        )
    }

    pub(crate) fn panicked(&self) -> bool {
        self.err.contains("panicked") || self.out.contains("panicked")
    }
}

pub(crate) fn tail(s: &str) -> &str {
    let n = s.len();
    let mut start = n.saturating_sub(3000);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The most of a child's stream kept in memory: its first and its last
/// [`KEPT`] bytes (a child that floods its output cannot exhaust the test's
/// memory before the time limit kills it).
const KEPT: usize = 8 << 20;

/// Read `r` to its end on a thread of its own: all of it, or its head and
/// tail with a line saying how much was left out between them.
pub(crate) fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let (mut head, mut tail) = (Vec::new(), std::collections::VecDeque::new());
        let (mut left_out, mut buf) = (0usize, vec![0u8; 64 << 10]);
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut chunk = &buf[..n];
            if head.len() < KEPT {
                let k = chunk.len().min(KEPT - head.len());
                head.extend_from_slice(&chunk[..k]);
                chunk = &chunk[k..];
            }
            tail.extend(chunk.iter().copied());
            if tail.len() > KEPT {
                let excess = tail.len() - KEPT;
                tail.drain(..excess);
                left_out += excess;
            }
        }
        let mut s = String::from_utf8_lossy(&head).into_owned();
        if left_out > 0 {
            s += &format!("\n[... {left_out} bytes left out ...]\n");
        }
        s + &String::from_utf8_lossy(tail.make_contiguous())
    })
}

/// Wait for `child`, killing it after `limit`.
pub(crate) fn wait_for(
    child: &mut Child,
    limit: Duration,
    t0: Instant,
) -> (Option<std::process::ExitStatus>, bool) {
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return (Some(st), false),
            Ok(None) => {}
            Err(_) => return (None, false),
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            return (child.wait().ok(), true);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Run `cmd` to the end (killed after `limit`).
pub(crate) fn run_cmd(mut cmd: Command, limit: Duration) -> Ran {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin().display()));
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let (st, timed_out) = wait_for(&mut child, limit, t0);
    Ran {
        code: st.and_then(|s| s.code()),
        signal: st.and_then(|s| s.signal()),
        out: out.join().unwrap_or_default(),
        err: err.join().unwrap_or_default(),
        took: t0.elapsed(),
        timed_out,
    }
}

pub(crate) fn command<S: AsRef<OsStr>>(args: &[S]) -> Command {
    let mut c = Command::new(bin());
    c.args(args);
    c
}

/// `ringreduce ARGS` with a 3-minute limit.
pub(crate) fn rr(args: &[&str]) -> Ran {
    run_cmd(command(args), Duration::from_secs(180))
}

/// `ringreduce ARGS` in directory `dir`.
pub(crate) fn rr_in<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Ran {
    let mut c = command(args);
    c.current_dir(dir);
    run_cmd(c, Duration::from_secs(180))
}

/// `ringreduce ARGS` with at most 16 GiB of address space (`ulimit -v`), for
/// the inputs that ask for absurd amounts of memory: a command that tries
/// to allocate them dies of it here instead of swamping the machine.
pub(crate) fn rr_guarded(args: &[&str], limit: Duration) -> Ran {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("ulimit -v 16777216 && exec \"$0\" \"$@\"")
        .arg(bin())
        .args(args);
    run_cmd(c, limit)
}

/// A fresh scratch directory under the system temp directory.
pub(crate) fn scratch_dir(tag: &str) -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!("rr-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    Ok(d)
}

pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Spawn `args` with stdout piped, read its first line, close the pipe, and
/// require a quiet end: exit 0 (or a non-zero exit without a panic), never
/// killed by a signal, within `limit`.
pub(crate) fn closed_pipe(args: &[&str], limit: Duration) -> Result<(), String> {
    let mut c = command(args);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = c.spawn().map_err(|e| format!("spawn: {e}"))?;
    let err = drain(child.stderr.take().ok_or("stderr")?);
    let mut first = String::new();
    {
        let mut reader = BufReader::new(child.stdout.take().ok_or("stdout")?);
        reader
            .read_line(&mut first)
            .map_err(|e| format!("read: {e}"))?;
        // Dropping the reader closes the pipe, as `| head -1` does.
    }
    let (st, timed_out) = wait_for(&mut child, limit, t0);
    let err = err.join().unwrap_or_default();
    ensure!(
        !timed_out,
        "{args:?} | head -1: still running after {limit:?}"
    );
    ensure!(!first.is_empty(), "{args:?}: no first line");
    let st = st.ok_or("no exit status")?;
    ensure!(
        st.signal().is_none(),
        "{args:?} | head -1: killed by signal {:?}\n{err}",
        st.signal()
    );
    ensure!(
        !err.contains("panicked"),
        "{args:?} | head -1 panicked:\n{err}"
    );
    ensure!(
        st.code() == Some(0) || !err.contains("Broken pipe"),
        "{args:?} | head -1: exit {:?} with a broken-pipe error instead of a quiet end:\n{err}",
        st.code()
    );
    Ok(())
}

/// A bad input: non-zero exit, `msg` in stderr, no panic, not killed, quick.
pub(crate) fn bad(ran: &Ran, args: &[&str], msg: &str) -> Result<(), String> {
    ensure!(
        !ran.timed_out && ran.signal.is_none(),
        "{args:?} must fail with a message, not hang or crash: {}",
        ran.show()
    );
    ensure!(
        ran.code.is_some_and(|c| c != 0),
        "{args:?} must fail: {}",
        ran.show()
    );
    ensure!(!ran.panicked(), "{args:?} panicked: {}", ran.show());
    ensure!(
        ran.err.to_lowercase().contains(&msg.to_lowercase()),
        "{args:?}: expected {msg:?} in stderr: {}",
        ran.show()
    );
    Ok(())
}

pub fn register(h: &mut Harness) {
    h.add("cli::a_flooding_child_is_kept_to_its_head_and_tail", || {
        // A child that floods its output (Open MPI once printed 5.4 GB
        // from one rank) is read to the end, but only its first and last
        // KEPT bytes stay in memory.
        let mut c = Command::new("head");
        c.args(["-c", &(3 * KEPT).to_string(), "/dev/zero"]);
        let ran = run_cmd(c, Duration::from_secs(60));
        ensure!(ran.code == Some(0), "head: {:?}", ran.code);
        let marker = format!("[... {} bytes left out ...]", KEPT);
        ensure!(
            ran.out.contains(&marker),
            "no marker in {} bytes",
            ran.out.len()
        );
        ensure!(
            ran.out.len() == 2 * KEPT + marker.len() + 2,
            "kept {} bytes",
            ran.out.len()
        );
        pass()
    });
    h.add("cli::gpu_check_modes_are_documented", || {
        // Every mode scripts/gpu-check.sh runs is in its header (which `help`
        // prints), the header names no mode the script lacks, and
        // CONTRIBUTING.md names only modes that exist (it listed `full`,
        // `quick`, `confirm`, `flag` and `final` long after they were gone).
        let root = crate::common::repo_root();
        if !root.join("scripts/gpu-check.sh").exists() {
            // The staged binary on the GPU machine, away from the source
            // tree, like the other tests that read the sources.
            return skip(format!("the source tree is not at {}", root.display()));
        }
        let script = std::fs::read_to_string(root.join("scripts/gpu-check.sh"))
            .map_err(|e| format!("scripts/gpu-check.sh: {e}"))?;
        let contributing = std::fs::read_to_string(root.join("CONTRIBUTING.md"))
            .map_err(|e| format!("CONTRIBUTING.md: {e}"))?;
        let word_after = |text: &str, pat: &str| -> Vec<String> {
            text.match_indices(pat)
                .map(|(i, _)| {
                    text[i + pat.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase())
                        .collect::<String>()
                })
                .filter(|w| !w.is_empty())
                .collect()
        };
        let mut runs = word_after(&script, "\"$MODE\" = ");
        runs.sort();
        runs.dedup();
        let header: String = script
            .lines()
            .take_while(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let mut listed = word_after(&header, "gpu-check.sh ");
        listed.sort();
        listed.dedup();
        ensure!(
            runs.len() > 5 && runs == listed,
            "modes the script runs {runs:?} and modes its header lists {listed:?} differ"
        );
        for m in word_after(&contributing, "gpu-check.sh ") {
            ensure!(
                runs.contains(&m),
                "CONTRIBUTING.md names gpu-check mode {m:?}, which does not exist"
            );
        }
        pass()
    });
    h.add("cli::bench_default_contenders_without_nccl", || {
        // Regression (a new user's report): `bench` with no --algo on a
        // machine without a GPU stopped with "NCCL library not found": the
        // default contenders are auto,nccl. On the CPU backend they are auto
        // alone, with a note; NCCL asked for by name is still an error.
        let ran = rr(&[
            "bench",
            "--backend",
            "cpu",
            "-b",
            "8",
            "-e",
            "64",
            "-n",
            "2",
            "-w",
            "1",
            "--no-ceiling",
        ]);
        ensure!(
            ran.code == Some(0)
                && ran.err.contains("nccl left out of the default contenders")
                && ran.out.contains("# algo: auto [")
                && !ran.out.lines().any(|l| l.starts_with("# algo: nccl")),
            "bench with the default contenders on the cpu: {}",
            ran.show()
        );
        let args = [
            "bench",
            "--backend",
            "cpu",
            "--algo",
            "auto,nccl",
            "-e",
            "64",
        ];
        bad(&rr(&args), &args, "NCCL")?;
        // So is a library named with --nccl-lib, default contenders or not.
        let args = [
            "bench",
            "--backend",
            "cpu",
            "--nccl-lib",
            "/nonexistent/libnccl.so.2",
        ];
        bad(&rr(&args), &args, "/nonexistent/libnccl.so.2")?;
        pass()
    });
    h.add("cli::readme_commands", || {
        // README: `cargo run --release -- run` and `cargo test --release`.
        let readme = crate::common::repo_root().join("README.md");
        if let Ok(text) = std::fs::read_to_string(&readme) {
            ensure!(
                text.contains("cargo run --release -- run")
                    && text.contains("cargo test --release"),
                "README.md no longer shows the two commands"
            );
        }
        // The first command (the second is this test suite).
        let ran = rr(&["run"]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("check     : PASS"),
            "run: {}",
            ran.show()
        );
        ensure!(
            ran.out.contains("backend   : "),
            "run must say which backend ran: {}",
            ran.show()
        );
        if cuda_skip_reason(1).is_some() {
            ensure!(
                ran.out.contains("using cpu") && ran.out.contains("backend   : cpu"),
                "without a GPU, run must fall back to the CPU and say so: {}",
                ran.show()
            );
        }
        pass()
    });

    h.add("cli::docs_sh_commands_run_on_cpu", || {
        // Every `ringreduce ...` line of a ```sh block in README.md and
        // docs/*.md (not the records under docs/results or docs/history)
        // runs on the CPU backend and exits 0; commands that need a GPU or
        // NCCL are skipped with the reason printed. Then every relative
        // link of the docs resolves (scripts/check-doc-links.sh).
        let root = crate::common::repo_root();
        let Ok(readme) = std::fs::read_to_string(root.join("README.md")) else {
            return skip(format!("the source tree is not at {}", root.display()));
        };
        let mut docs = vec![("README.md".to_string(), readme)];
        let mut names: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
            .map_err(|e| format!("docs/: {e}"))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        names.sort();
        for p in names {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            docs.push((
                format!(
                    "docs/{}",
                    p.file_name().unwrap_or_default().to_string_lossy()
                ),
                text,
            ));
        }
        let dir = scratch_dir("docs-commands")?;
        let mut ran_count = 0;
        for (file, text) in &docs {
            for line in sh_block_commands(text) {
                let words: Vec<&str> = line.split_whitespace().skip(1).collect();
                if let Some(why) = needs_gpu(&words) {
                    println!("    skipped `{line}` ({file}): {why}");
                    continue;
                }
                let ran = rr_in(&dir, &words);
                ensure!(
                    ran.code == Some(0) && !ran.panicked(),
                    "{file}: `{line}`: {}",
                    ran.show()
                );
                ran_count += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        ensure!(
            ran_count >= 3,
            "only {ran_count} commands found in ```sh blocks"
        );
        let mut links = Command::new("bash");
        links.arg(root.join("scripts/check-doc-links.sh"));
        let ran = run_cmd(links, Duration::from_secs(120));
        if ran.err.contains("python3: command not found") {
            return skip("python3 not found: links not checked");
        }
        ensure!(ran.code == Some(0), "check-doc-links.sh: {}", ran.show());
        pass()
    });

    h.add("cli::run_passes_on_cpu", || {
        let cases: Vec<(Vec<&str>, Option<&str>)> = vec![
            (vec![], None),
            (vec!["--ranks", "5", "--count", "1003"], None),
            (vec!["--ranks", "1"], None),
            (vec!["--count", "0"], None),
            (vec!["--ranks", "6", "--count", "3", "--in-place"], None),
            (
                vec![
                    "--ranks", "3", "--size", "1MiB", "--inputs", "exact", "--algo", "ps",
                ],
                Some("ps"),
            ),
            (vec!["-d", "half", "--count", "1000"], None),
            (
                vec!["-d", "int8", "-o", "max", "--count", "1001", "--in-place"],
                None,
            ),
            (
                vec![
                    "-d", "bfloat16", "-o", "avg", "--ranks", "4", "--inputs", "exact", "--count",
                    "4097",
                ],
                None,
            ),
            (
                vec![
                    "-d", "f8e4m3", "-o", "min", "--ranks", "3", "--count", "100",
                ],
                None,
            ),
            (
                vec![
                    "-d", "uint64", "-o", "prod", "--ranks", "2", "--count", "77", "--inputs",
                    "exact",
                ],
                None,
            ),
            (
                vec![
                    "--collective",
                    "reduce-scatter",
                    "--ranks",
                    "3",
                    "--count",
                    "100",
                ],
                None,
            ),
            (
                vec![
                    "--collective",
                    "reduce-scatter",
                    "--ranks",
                    "4",
                    "--count",
                    "50",
                    "--in-place",
                    "-d",
                    "double",
                ],
                None,
            ),
            (
                vec![
                    "--collective",
                    "all-gather",
                    "--ranks",
                    "4",
                    "--count",
                    "33",
                    "--in-place",
                ],
                None,
            ),
            (
                vec!["--algo", "ring:pipe3", "--ranks", "4", "--size", "64KiB"],
                Some("ring:pipe3"),
            ),
            (
                vec![
                    "--algo",
                    "ring:naive",
                    "--ranks",
                    "3",
                    "--count",
                    "10",
                    "--in-place",
                ],
                Some("ring:naive"),
            ),
            (
                vec![
                    "--algo",
                    "oneshot:flag",
                    "--ranks",
                    "2",
                    "--count",
                    "100",
                    "--in-place",
                ],
                Some("oneshot:flag"),
            ),
            (
                vec!["--algo", "oneshot:fused", "--ranks", "3", "--count", "100"],
                Some("oneshot:fused"),
            ),
            (
                vec![
                    "--algo",
                    "oneshot",
                    "--ranks",
                    "5",
                    "--count",
                    "999",
                    "--in-place",
                ],
                Some("oneshot"),
            ),
        ];
        for (args, path) in cases {
            let mut a = vec!["run", "--backend", "cpu", "--iters", "2"];
            a.extend(args.iter().copied());
            let ran = rr(&a);
            // A call of 0 elements compares nothing: not a PASS (issue 25,
            // "a check that checked nothing is not a PASS"), but no error.
            let verdict = if args.contains(&"0") {
                "check     : nothing to compare (0 elements)"
            } else {
                "check     : PASS"
            };
            ensure!(
                ran.code == Some(0) && ran.out.contains(verdict),
                "{a:?}: {}",
                ran.show()
            );
            ensure!(
                ran.out.contains("backend   : cpu"),
                "{a:?} must print the backend used: {}",
                ran.show()
            );
            if let Some(p) = path {
                ensure!(
                    ran.out.contains(&format!("algorithm : {p}")),
                    "{a:?} must print the path that ran: {}",
                    ran.show()
                );
            }
        }
        pass()
    });

    h.add("cli::bad_inputs_exit_nonzero_with_a_message", || {
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (
                vec!["run", "--backend", "cpu", "--ranks", "0"],
                "at least 1",
            ),
            (
                vec!["run", "--backend", "cpu", "--size", "4XB"],
                "unknown suffix",
            ),
            (
                vec!["run", "--backend", "cpu", "--size", "5"],
                "whole number of float",
            ),
            (
                vec!["run", "--backend", "cpu", "--algo", "tree"],
                "unknown algorithm",
            ),
            (
                vec!["run", "--backend", "cpu", "--algo", "ring:pipe0"],
                "ring:pipe0",
            ),
            (
                vec![
                    "run",
                    "--backend",
                    "cpu",
                    "--algo",
                    "oneshot:flag",
                    "--ranks",
                    "4",
                ],
                "two-rank",
            ),
            (vec!["run", "--backend", "cpu", "-d", "float99"], "float99"),
            (vec!["run", "--backend", "cpu", "-o", "xor"], "xor"),
            (
                vec!["run", "--backend", "cpu", "--inputs", "fuzzy"],
                "fuzzy",
            ),
            (
                vec!["run", "--backend", "cpu", "--collective", "scatter"],
                "unknown collective",
            ),
            (
                vec!["run", "--backend", "cpu", "-d", "float,half"],
                "takes one value",
            ),
            (vec!["theory", "--ranks", "0"], "positive"),
            (vec!["theory", "--nodes", "2"], "--gpus-per-node"),
            (
                vec![
                    "run",
                    "--backend",
                    "cpu",
                    "--ranks",
                    "3",
                    "--algo",
                    "hier:2",
                ],
                "do not divide",
            ),
            (
                vec!["run", "--backend", "cpu", "--algo", "hier:0"],
                "hier:G",
            ),
            (vec!["trace", "--ranks", "0"], "at least 1"),
            (vec!["trace", "--ranks", "17"], "small examples"),
            (
                vec![
                    "bench",
                    "--backend",
                    "cpu",
                    "--algo",
                    "ring",
                    "-b",
                    "1MiB",
                    "-e",
                    "1KiB",
                ],
                "minbytes",
            ),
            (
                vec![
                    "bench",
                    "--backend",
                    "cpu",
                    "--algo",
                    "ring",
                    "-b",
                    "0",
                    "-e",
                    "64",
                ],
                "minbytes",
            ),
            (vec!["bench", "-b", "0", "-e", "64"], "minbytes"),
            (
                vec!["bench", "--backend", "cpu", "--algo", "ring", "-f", "1"],
                "stepfactor",
            ),
            (
                vec!["bench", "--backend", "cpu", "--algo", "ring", "-n", "0"],
                "iters",
            ),
            (
                vec!["bench", "--backend", "cpu", "--algo", "ring,tree"],
                "tree",
            ),
            (
                vec![
                    "bench",
                    "--backend",
                    "cpu",
                    "--algo",
                    "ring:graph",
                    "--collective",
                    "reduce-scatter",
                ],
                "CUDA graphs",
            ),
            (vec!["check", "--ranks", "0"], "at least 1"),
            (vec!["check", "--sizes", "3"], "whole number"),
            (vec!["check", "--ranks", "100000"], "at most"),
            (vec!["check", "--algo", "nccl"], "nccl"),
            // Regression: on a machine without a GPU, check listed every
            // place it looked for libnccl; it needs GPUs before any library.
            (vec!["check", "--backend", "cpu"], "NCCL needs GPUs"),
            (
                vec!["soak", "--backend", "cpu", "--max-size", "0"],
                "max-size",
            ),
            (
                vec!["soak", "--backend", "cpu", "--rank-counts", "0"],
                "rank count",
            ),
            // Regression: PASS after checking nothing.
            (vec!["soak", "--backend", "cpu", "--calls", "0"], "--calls"),
        ];
        for (args, msg) in &cases {
            let ran = rr(args);
            bad(&ran, args, msg)?;
            ensure!(
                ran.took < Duration::from_secs(10),
                "{args:?} took {:?} to fail; argument errors come first",
                ran.took
            );
            if args[0] == "check" && *msg != "nccl" {
                ensure!(
                    !ran.err.contains("NCCL library"),
                    "{args:?}: an argument error, not an NCCL error: {}",
                    ran.show()
                );
            }
        }
        // Absurd sizes: a clear memory error with exit code 2, never an
        // allocation abort (SIGABRT) or the OOM killer (SIGKILL).
        let memory: Vec<Vec<&str>> = vec![
            vec!["run", "--backend", "cpu", "--size", "1TiB"],
            vec!["run", "--backend", "cpu", "--count", "99999999999999"],
            vec![
                "run",
                "--backend",
                "cpu",
                "--collective",
                "all-gather",
                "--count",
                "99999999999999",
            ],
            // The memory check comes before any allocation: at once.
            vec!["bench", "--backend", "cpu", "-b", "8GiB", "-e", "8GiB"],
        ];
        for args in &memory {
            let ran = rr_guarded(args, Duration::from_secs(60));
            bad(&ran, args, "memory")?;
            ensure!(
                ran.code == Some(2),
                "{args:?}: exit code {:?}, expected 2: {}",
                ran.code,
                ran.show()
            );
            ensure!(
                ran.took < Duration::from_secs(10),
                "{args:?} took {:?}: the memory check must come first",
                ran.took
            );
        }
        pass()
    });

    h.add("cli::bench_cold_size_is_checked_against_memory", || {
        // LIBRARY BUG (see the report): `bench --cold-size 1TiB` is not
        // checked against host memory; the cold-start measurement
        // (bench::cold_start_engine -> verify::make_inputs) allocates it and
        // the process dies of an allocation failure (SIGABRT).
        let args = [
            "bench",
            "--backend",
            "cpu",
            "--algo",
            "ring",
            "-b",
            "8",
            "-e",
            "64",
            "--no-ceiling",
            "--cold-size",
            "1TiB",
        ];
        let ran = rr_guarded(&args, Duration::from_secs(60));
        bad(&ran, &args, "memory").map_err(|e| format!("LIBRARY BUG: {e}"))?;
        ensure!(
            ran.code == Some(2),
            "LIBRARY BUG: exit {:?}: {}",
            ran.code,
            ran.show()
        );
        pass()
    });

    h.add("cli::processes_sharing_a_gpu[cuda]", || {
        // Rank processes on one GPU take turns on it: their waits on each
        // other are made on the host, so every path that runs there gives
        // exact results in and out of place; the paths whose kernels spin
        // on another rank's flags refuse by name; `auto` in place on 2
        // ranks runs the copy-engine one-shot (one hand-off between them).
        if let Some(why) = cuda_skip_reason(1) {
            return skip(why);
        }
        let l = ["launch", "-n", "2", "--timeout", "60", "--"];
        let soak = [
            "soak",
            "--backend",
            "cuda",
            "--devices",
            "0",
            "--every",
            "--max-size",
            "16KiB",
            "-d",
            "float,int8",
        ];
        let ran = rr(&[&l[..], &soak[..]].concat());
        ensure!(
            ran.code == Some(0) && ran.out.contains("PASS: 0 wrong"),
            "{}",
            ran.show()
        );
        let run = [
            "run",
            "--backend",
            "cuda",
            "--devices",
            "0",
            "--size",
            "64KiB",
            "--in-place",
        ];
        // (`run` takes the ring unless asked for auto.)
        let ran = rr(&[&l[..], &run[..], &["--algo", "auto"][..]].concat());
        ensure!(
            ran.code == Some(0)
                && ran.out.contains("PASS")
                && ran.out.contains("algorithm : oneshot (auto"),
            "{}",
            ran.show()
        );
        for path in ["oneshot:flag", "ring:ll"] {
            let ran = rr(&[&l[..], &run[..], &["--algo", path][..]].concat());
            ensure!(
                ran.code != Some(0)
                    && format!("{}{}", ran.out, ran.err)
                        .contains(&format!("{path} cannot run here"))
                    && format!("{}{}", ran.out, ran.err).contains("take turns"),
                "{path}: {}",
                ran.show()
            );
        }
        pass()
    });

    h.add("cli::cuda_backend_without_a_driver", || {
        if cuda_skip_reason(1).is_none() {
            return skip("a CUDA driver and a GPU are present on this machine");
        }
        let ran = rr(&["run", "--backend", "cuda"]);
        ensure!(
            ran.code == Some(2) && ran.err.contains("CUDA backend is unavailable"),
            "{}",
            ran.show()
        );
        ensure!(!ran.panicked(), "{}", ran.show());
        let ran = rr(&["run", "--backend", "auto", "--count", "100"]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("using cpu"),
            "auto must fall back and say so: {}",
            ran.show()
        );
        pass()
    });

    h.add("cli::closed_pipe_ends_quietly", || {
        closed_pipe(&["run", "--backend", "cpu"], Duration::from_secs(60))?;
        closed_pipe(
            &["trace", "--ranks", "16", "--count", "4096"],
            Duration::from_secs(60),
        )?;
        closed_pipe(
            &[
                "bench",
                "--backend",
                "cpu",
                "--algo",
                "ring",
                "-b",
                "8",
                "-e",
                "64KiB",
                "-n",
                "2",
                "-w",
                "1",
                "--blocks",
                "1",
                "--cold-size",
                "4KiB",
                "--no-ceiling",
            ],
            Duration::from_secs(60),
        )?;
        closed_pipe(&["theory"], Duration::from_secs(30))?;
        closed_pipe(
            &["soak", "--backend", "cpu", "--calls", "50"],
            Duration::from_secs(60),
        )?;
        pass()
    });

    h.add("cli::non_utf8_output_path", || {
        // A path that is not UTF-8 must not panic: either the report is
        // written to exactly that path, or the command fails naming it.
        let dir = scratch_dir("nonutf8")?;
        let mut name = dir.as_os_str().as_bytes().to_vec();
        name.extend_from_slice(b"/out-\xff\xfe.json");
        let path = OsStr::from_bytes(&name).to_os_string();
        let mut args: Vec<OsString> = [
            "bench",
            "--backend",
            "cpu",
            "--algo",
            "ring",
            "-b",
            "8",
            "-e",
            "64",
            "-n",
            "2",
            "-w",
            "1",
            "--blocks",
            "1",
            "--cold-size",
            "4KiB",
            "--no-ceiling",
            "-J",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push(path.clone());
        let ran = run_cmd(command(&args), Duration::from_secs(120));
        ensure!(
            !ran.panicked() && ran.signal.is_none() && !ran.timed_out,
            "non-UTF-8 -J: {}",
            ran.show()
        );
        match ran.code {
            Some(0) => {
                let text = std::fs::read(Path::new(&path))
                    .map_err(|e| format!("exit 0 but no report at the non-UTF-8 path: {e}"))?;
                ensure!(
                    serde_json::from_slice::<serde_json::Value>(&text).is_ok(),
                    "the report is not JSON"
                );
            }
            _ => ensure!(
                ran.err.contains("out-") && ran.err.contains(".json"),
                "the error must name the path: {}",
                ran.show()
            ),
        }
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli::output_paths_are_checked_before_measuring", || {
        let dir = scratch_dir("outputs")?;
        let quick = [
            "bench",
            "--backend",
            "cpu",
            "--algo",
            "ring",
            "-b",
            "8",
            "-e",
            "64KiB",
            "-n",
            "2",
            "-w",
            "1",
        ];
        let with = |extra: &[&str]| -> Vec<String> {
            quick.iter().chain(extra).map(|s| s.to_string()).collect()
        };
        // A missing directory: at once, nothing written.
        let a = with(&["-J", "/nonexistent/dir/x.json"]);
        let ran = rr_in(&dir, &a);
        bad(&ran, &["-J", "/nonexistent/dir/x.json"], "/nonexistent/dir")?;
        ensure!(
            ran.took < Duration::from_secs(1),
            "-J into a missing directory took {:?} to fail",
            ran.took
        );
        ensure!(
            !ran.out.contains("# row"),
            "it measured before failing: {}",
            ran.show()
        );
        // The same path twice names both flags.
        let a = with(&["-J", "same", "--csv", "same"]);
        let ran = rr_in(&dir, &a);
        bad(&ran, &["-J", "same", "--csv", "same"], "same")?;
        ensure!(
            ran.err.contains("-J") && ran.err.contains("--csv"),
            "must name both flags: {}",
            ran.show()
        );
        // The plot is SVG only.
        let a = with(&["--plot", "out.png"]);
        let ran = rr_in(&dir, &a);
        bad(&ran, &["--plot", "out.png"], "svg")?;
        ensure!(
            ran.err.contains("out.png"),
            "must name the path: {}",
            ran.show()
        );
        // A bad plot path fails before any other file is written.
        let a = with(&[
            "-J",
            "x.json",
            "--csv",
            "x.csv",
            "--plot",
            "/nonexistent/x.svg",
        ]);
        let ran = rr_in(&dir, &a);
        bad(&ran, &["--plot", "/nonexistent/x.svg"], "/nonexistent")?;
        ensure!(
            !ran.out.contains("# row"),
            "it measured before failing: {}",
            ran.show()
        );
        ensure!(
            entries(&dir).is_empty(),
            "files were written before the error: {:?}",
            entries(&dir)
        );
        // overlap names its own flags (it once reported --timeline as --csv).
        let ran = rr_in(
            &dir,
            &[
                "overlap",
                "--backend",
                "cpu",
                "--timeline",
                "/nonexistent/t.json",
            ],
        );
        bad(&ran, &["overlap", "--timeline"], "/nonexistent")?;
        ensure!(
            ran.err.contains("--timeline") && !ran.err.contains("--csv"),
            "overlap must name --timeline: {}",
            ran.show()
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli::bench_cpu_writes_json_csv_svg", || {
        let dir = scratch_dir("bench")?;
        let (j, c, s) = (dir.join("b.json"), dir.join("b.csv"), dir.join("b.svg"));
        let (js, cs, ss) = (
            j.to_string_lossy(),
            c.to_string_lossy(),
            s.to_string_lossy(),
        );
        let ran = rr(&[
            "bench",
            "--backend",
            "cpu",
            "--ranks",
            "3",
            "--algo",
            "ring,auto",
            "-d",
            "float,int32",
            "-o",
            "sum,max",
            "--collective",
            "all",
            "-b",
            "8",
            "-e",
            "4KiB",
            "-f",
            "8",
            "-n",
            "2",
            "-w",
            "1",
            "--blocks",
            "1",
            "--cold-size",
            "4KiB",
            "-J",
            &js,
            "--csv",
            &cs,
            "--plot",
            &ss,
        ]);
        ensure!(ran.code == Some(0), "{}", ran.show());
        ensure!(
            ran.out.contains("CPU timings") && ran.out.contains("busbw"),
            "{}",
            ran.show()
        );
        // One table per (collective, type, op); all-gather has no op.
        let mut combos = Vec::new();
        for coll in ["all-reduce", "reduce-scatter", "all-gather"] {
            for ty in ["float", "int32"] {
                let ops: &[&str] = if coll == "all-gather" {
                    &["none"]
                } else {
                    &["sum", "max"]
                };
                for op in ops {
                    combos.push((coll, ty, *op));
                }
            }
        }
        let tables = ran
            .out
            .lines()
            .filter(|l| l.starts_with("# Collective:"))
            .count();
        ensure!(
            tables == combos.len(),
            "{tables} tables, expected {}: {}",
            combos.len(),
            ran.show()
        );
        for (coll, ty, op) in &combos {
            let head = format!("# Collective: {coll}  type: {ty}  op: {op}");
            ensure!(ran.out.contains(&head), "no table {head:?}: {}", ran.show());
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&j).map_err(|e| e.to_string())?)
                .map_err(|e| format!("JSON: {e}"))?;
        ensure!(json["header"]["ranks"] == 3, "header: {}", json["header"]);
        let rows = json["rows"].as_array().ok_or("no rows")?;
        for (coll, ty, op) in &combos {
            let n = rows
                .iter()
                .filter(|r| r["collective"] == *coll && r["type"] == *ty && r["redop"] == *op)
                .count();
            ensure!(n > 0, "no JSON rows for {coll} {ty} {op}");
        }
        for r in rows {
            ensure!(r["algo"] == "ring" || r["algo"] == "auto", "row algo: {r}");
            ensure!(
                r["out_of_place"]["wrong"] == 0 && r["in_place"]["wrong"] == 0,
                "wrong results in a bench row: {r}"
            );
        }
        let csv = std::fs::read_to_string(&c).map_err(|e| e.to_string())?;
        ensure!(
            csv.lines().count() == rows.len() + 1,
            "CSV: {} lines for {} rows",
            csv.lines().count(),
            rows.len()
        );
        let head = csv.lines().next().unwrap_or("");
        ensure!(
            head.contains("collective") && head.contains("type") && head.contains("redop"),
            "CSV header: {head}"
        );
        let svg = std::fs::read_to_string(&s).map_err(|e| e.to_string())?;
        ensure!(svg.contains("<svg") && svg.contains("ring"), "SVG");
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli::bench_path_that_cannot_run_a_collective", || {
        // LIBRARY BUG (see the report): `bench --algo ring,ps --collective
        // all` measures rows, then dies at the first reduce-scatter row with
        // "ps cannot run this call" (cli::bench::execute does not check the
        // paths against the collectives up front, and bench::measure_row
        // turns only Error::Unsupported into an empty cell). Either the
        // command refuses before measuring, or it leaves those cells empty.
        let ran = rr(&[
            "bench", "--backend", "cpu", "--ranks", "3", "--algo", "ring,ps", "--collective", "all", "-b", "64", "-e", "256",
            "-f", "4", "-n", "2", "-w", "1", "--blocks", "1", "--cold-size", "4KiB", "--no-ceiling",
        ]);
        ensure!(!ran.panicked() && ran.signal.is_none(), "{}", ran.show());
        match ran.code {
            Some(0) => ensure!(
                ran.out.contains("# Collective: reduce-scatter") && ran.out.contains("# Collective: all-gather"),
                "{}",
                ran.show()
            ),
            _ => ensure!(
                ran.err.contains("ps") && !ran.out.contains("# row"),
                "LIBRARY BUG: a path that cannot run a requested collective must be refused before measuring (or get empty cells): {}",
                ran.show()
            ),
        }
        pass()
    });

    h.add("cli::trace_paths", || {
        let ran = rr(&["trace"]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("PASS"),
            "{}",
            ran.show()
        );
        ensure!(
            // Steps count from 0 (the formulas' and the timeline's RS0).
            ran.out.contains("reduce-scatter step 0 (steps 0-2)")
                && ran.out.contains("all-gather step 2 (steps 0-2)"),
            "{}",
            ran.show()
        );
        // ring:pipe2: one line per chunk, listing each of its slices once.
        let ran = rr(&[
            "trace",
            "--algo",
            "ring:pipe2",
            "--ranks",
            "3",
            "--count",
            "12",
        ]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("PASS") && ran.out.starts_with("ring:pipe2"),
            "{}",
            ran.show()
        );
        let mut lines = 0;
        for l in ran.out.lines().filter(|l| l.contains("slices:")) {
            lines += 1;
            let list = l.rsplit("slices:").next().unwrap_or("");
            let ranges: Vec<&str> = list.split_whitespace().collect();
            ensure!(ranges.len() == 2, "two slices per chunk of 4 elements: {l}");
            ensure!(ranges[0] != ranges[1], "a slice listed twice: {l}");
            let parse = |r: &str| -> Option<(usize, usize)> {
                let r = r.strip_prefix('[')?.strip_suffix(')')?;
                let (a, b) = r.split_once("..")?;
                Some((a.parse().ok()?, b.parse().ok()?))
            };
            let (a, b) = (
                parse(ranges[0]).ok_or(l.to_string())?,
                parse(ranges[1]).ok_or(l.to_string())?,
            );
            ensure!(
                a.1 == b.0 && a.1 - a.0 == 2 && b.1 - b.0 == 2,
                "slices must tile the chunk: {l}"
            );
        }
        // 2(N-1) steps x N ranks copy lines + (N-1) x N reduce lines.
        ensure!(
            lines == 2 * 2 * 3 + 2 * 3,
            "{lines} lines with slices: {}",
            ran.show()
        );
        // The parameter server, op by op.
        let ran = rr(&["trace", "--algo", "ps", "--ranks", "4", "--count", "8"]);
        ensure!(
            ran.code == Some(0)
                && ran.out.contains("PASS")
                && ran.out.starts_with("ps: all-reduce on N = 4"),
            "{}",
            ran.show()
        );
        ensure!(
            ran.out.contains("gather") && ran.out.contains("broadcast"),
            "{}",
            ran.show()
        );
        // The flag exchange on 2 ranks.
        let ran = rr(&[
            "trace",
            "--algo",
            "oneshot:flag",
            "--ranks",
            "2",
            "--count",
            "6",
        ]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("PASS") && ran.out.contains("exchange"),
            "{}",
            ran.show()
        );
        // Reduce-scatter: only the reduce-scatter half; rank r ends with chunk r.
        let ran = rr(&[
            "trace",
            "--collective",
            "reduce-scatter",
            "--ranks",
            "3",
            "--count",
            "2",
        ]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("PASS"),
            "{}",
            ran.show()
        );
        ensure!(
            ran.out.starts_with("ring: reduce-scatter on N = 3")
                && ran.out.contains("reduce-scatter step 1 (steps 0-1)")
                && !ran.out.contains("all-gather step"),
            "{}",
            ran.show()
        );
        for (r, s) in [(0, "x0+x2"), (1, "x0+x1"), (2, "x1+x2")] {
            ensure!(
                ran.out.contains(&format!("now {s}")),
                "rank {r}'s first partial sum {s} missing: {}",
                ran.show()
            );
        }
        // oneshot:flag refuses 4 ranks, with the reason.
        let a = ["trace", "--algo", "oneshot:flag", "--ranks", "4"];
        let ran = rr(&a);
        bad(&ran, &a, "two-rank")?;
        ensure!(ran.err.contains("oneshot:flag"), "{}", ran.show());
        pass()
    });

    h.add("cli::soak_cpu_passes", || {
        let ran = rr(&["soak", "--backend", "cpu", "--calls", "300", "--seed", "1"]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("PASS: 0 wrong of 300 calls"),
            "{}",
            ran.show()
        );
        ensure!(
            !ran.out.contains("WRONG") && !ran.out.contains("ERROR"),
            "{}",
            ran.show()
        );
        pass()
    });

    h.add("cli::theory_reproduces_the_seed", || {
        let ran = rr(&["theory", "--size", "100MB", "--ranks", "4,16,64"]);
        ensure!(ran.code == Some(0), "{}", ran.show());
        for n in [
            "300.0", "150.0", "1500.0", "187.5", "6300.0", "196.9", "200.0",
        ] {
            ensure!(ran.out.contains(n), "missing {n} in\n{}", ran.out);
        }
        pass()
    });

    h.add("cli::theory_projects_past_one_machine", || {
        // The projection of docs/SCALE-OUT.md: its table is this command's
        // output, line for line.
        let args = [
            "theory",
            "--nodes",
            "1,2,4,8,16,32,64,128",
            "--gpus-per-node",
            "8",
            "--size",
            "100MB",
        ];
        let ran = rr(&args);
        ensure!(ran.code == Some(0), "{}", ran.show());
        for w in [
            "| 128 | 1024 |",
            "assumes between nodes",
            "double binary tree",
        ] {
            ensure!(ran.out.contains(w), "missing {w} in\n{}", ran.out);
        }
        let doc = crate::common::repo_root().join("docs/SCALE-OUT.md");
        let Ok(text) = std::fs::read_to_string(&doc) else {
            return skip(format!("{} not found (staged test binary?)", doc.display()));
        };
        ensure!(
            text.contains(&format!("ringreduce {}", args.join(" "))),
            "SCALE-OUT.md does not show the command"
        );
        for line in ran.out.lines().filter(|l| l.starts_with("| ")) {
            ensure!(text.contains(line), "SCALE-OUT.md lacks the row {line}");
        }
        pass()
    });

    h.add(
        "cli::theory_checks_the_model_against_published_results",
        || {
            // SCALE-OUT.md's calibration table is this command's output, line
            // for line; every row names its source and the model's error.
            let ran = rr(&["theory", "--published"]);
            ensure!(ran.code == Some(0), "{}", ran.show());
            let rows: Vec<&str> = ran
                .out
                .lines()
                .filter(|l| l.starts_with("| ") && l.contains(" % |"))
                .collect();
            ensure!(rows.len() >= 10, "{}", ran.out);
            for r in &rows {
                ensure!(
                    r.contains("nccl") || r.contains("aws"),
                    "a row without its source: {r}"
                );
            }
            // The published machines' constants are the sources': no
            // other argument applies, and each is refused by name.
            for extra in [
                &["--nodes", "2"][..],
                &["--size", "0"],
                &["--ranks", "4"],
                &["--net-gbps", "1"],
            ] {
                let bad = rr(&[&["theory", "--published"][..], extra].concat());
                ensure!(
                    bad.code == Some(2) && bad.err.contains("cannot be used with"),
                    "{extra:?}: {}",
                    bad.show()
                );
            }
            let doc = crate::common::repo_root().join("docs/SCALE-OUT.md");
            let Ok(text) = std::fs::read_to_string(&doc) else {
                return skip(format!("{} not found (staged test binary?)", doc.display()));
            };
            ensure!(
                text.contains("$ ringreduce theory --published"),
                "SCALE-OUT.md does not show the command"
            );
            for line in ran.out.lines().filter(|l| l.starts_with("| ")) {
                ensure!(text.contains(line), "SCALE-OUT.md lacks the row {line}");
            }
            pass()
        },
    );

    h.add("cli::hier_runs_and_traces_on_the_cpu", || {
        let ran = rr(&[
            "run",
            "--backend",
            "cpu",
            "--ranks",
            "4",
            "--algo",
            "hier:2",
            "--size",
            "64KiB",
            "--inputs",
            "exact",
        ]);
        ensure!(
            ran.code == Some(0) && ran.out.contains("hier:2") && ran.out.contains("PASS"),
            "{}",
            ran.show()
        );
        let ran = rr(&["trace", "--algo", "hier:2", "--ranks", "4", "--count", "8"]);
        ensure!(
            ran.code == Some(0)
                && ran.out.contains("rail reduce-scatter (between nodes)")
                && ran.out.contains("PASS"),
            "{}",
            ran.show()
        );
        pass()
    });

    h.add("cli::theory_names_the_ps_below_its_crossover", || {
        // 4 ranks of 1 MiB: the PS's two rounds beat the ring's six steps
        // (as auto chooses); at 64 MiB the ring's bytes win.
        for (size, winner) in [("1MiB", " PS"), ("64MiB", " ring")] {
            let ran = rr(&["theory", "--size", size, "--ranks", "4"]);
            ensure!(ran.code == Some(0), "{}", ran.show());
            let row = ran
                .out
                .lines()
                .rfind(|l| l.trim_start().starts_with("4 |"))
                .ok_or_else(|| format!("no N = 4 time row in\n{}", ran.out))?;
            ensure!(row.ends_with(winner), "{size}: {row}");
            ensure!(row.contains(" MB |"), "the crossover size: {row}");
        }
        pass()
    });

    h.add("cli::trace_draws_the_idealized_schedule", || {
        let dir = scratch_dir("ideal-svg")?;
        let svg = dir.join("ideal.svg");
        let svg_s = svg.to_string_lossy().to_string();
        let ran = rr(&[
            "trace",
            "--algo",
            "ring:pipe2",
            "--ranks",
            "3",
            "--count",
            "24",
            "--ideal-svg",
            &svg_s,
        ]);
        ensure!(ran.code == Some(0), "{}", ran.show());
        ensure!(
            ran.out.contains("Slices x time"),
            "the trace is printed too: {}",
            ran.show()
        );
        let text = std::fs::read_to_string(&svg).map_err(|e| format!("{svg_s}: {e}"))?;
        ensure!(
            text.starts_with("<svg")
                && text.contains("not a measurement")
                && text.contains(">RS0 c0.0<"),
            "not the idealized picture"
        );
        // A folder that does not exist, and a real run asked for as well.
        let bad = dir.join("no-such-dir").join("x.svg");
        let ran = rr(&["trace", "--ideal-svg", &bad.to_string_lossy()]);
        ensure!(
            ran.code == Some(2) && ran.err.contains("--ideal-svg") && !ran.panicked(),
            "{}",
            ran.show()
        );
        let ran = rr(&["trace", "--ideal-svg", &svg_s, "--svg", &svg_s]);
        ensure!(ran.code == Some(2) && !ran.panicked(), "{}", ran.show());
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli::docs_show_the_real_trace", || {
        // The docs paste `ringreduce trace` output whole: the course quotes
        // excerpts (checked by docs::quoted_outputs_are_what_the_tools_print)
        // and docs/TRACES.md (or DESIGN.md) the whole output; it must be
        // what the engine prints, for every one of these commands.
        let root = crate::common::repo_root();
        let mut text = String::new();
        for name in ["docs/ALGORITHM.md", "docs/TRACES.md", "docs/DESIGN.md"] {
            let Ok(t) = std::fs::read_to_string(root.join(name)) else {
                return skip(format!("{name} not found (staged test binary?)"));
            };
            text.push_str(&t);
        }
        let cmds: [&[&str]; 4] = [
            &["trace"],
            &["trace", "--algo", "ps", "--ranks", "4", "--count", "8"],
            &[
                "trace",
                "--algo",
                "oneshot:flag",
                "--ranks",
                "2",
                "--count",
                "6",
            ],
            &[
                "trace",
                "--algo",
                "ring:pipe2",
                "--ranks",
                "2",
                "--count",
                "16",
            ],
        ];
        let mut stale = Vec::new();
        for args in cmds {
            let ran = rr(args);
            ensure!(ran.code == Some(0), "{args:?}: {}", ran.show());
            if !text.contains(ran.out.trim_end()) {
                stale.push(args.join(" "));
            }
        }
        ensure!(
            stale.is_empty(),
            "the docs (ALGORITHM.md, TRACES.md, DESIGN.md) no longer show the whole output of: {}; paste it again",
            stale.join("; ")
        );
        pass()
    });
}

/// The `ringreduce ...` lines of the ```sh (or bash, shell) blocks of a
/// markdown text, without a leading `$ ` or a trailing `# comment`.
fn sh_block_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<bool> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(lang) = t.strip_prefix("```") {
            block = match block {
                None => Some(matches!(lang.trim(), "sh" | "bash" | "shell" | "console")),
                Some(_) => None,
            };
            continue;
        }
        if block != Some(true) {
            continue;
        }
        let t = t.strip_prefix("$ ").unwrap_or(t);
        let t = t.split(" #").next().unwrap_or(t).trim();
        if t.starts_with("ringreduce ") || t == "ringreduce" {
            out.push(t.to_string());
        }
    }
    out
}

/// Why a documented command cannot run on the CPU backend, if it cannot.
pub(crate) fn needs_gpu(words: &[&str]) -> Option<&'static str> {
    if words
        .windows(2)
        .any(|w| w[0] == "--backend" && w[1] == "cuda")
    {
        return Some("--backend cuda needs a GPU");
    }
    if words
        .iter()
        .any(|w| w.to_ascii_lowercase().contains("nccl"))
    {
        return Some("NCCL needs a GPU");
    }
    if words.first() == Some(&"check") {
        return Some("check compares against NCCL on a GPU");
    }
    if words.first() == Some(&"launch") && !words.contains(&"cpu") {
        return Some("launch of a GPU job");
    }
    if words
        .iter()
        .any(|w| w.contains(['|', '>', '<', '`', '$', '"', '\'']))
    {
        return Some("shell syntax this test does not interpret");
    }
    None
}
