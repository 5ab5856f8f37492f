//! Output files through the command line (issue 25, item 1): what `-J`,
//! `--csv`, `--plot`, `--timeline`, `--svg` do with devices, FIFOs,
//! `/dev/stdout`, symbolic links, hard links, long names, two names of one
//! file and wrong extensions (the rules: `tools/src/report/output.rs`),
//! and with stdout (or stdout and stderr) closed early: every file is
//! still written (the rule: `tools/src/cli/mod.rs`, `Out`).
//!
//! CI and the GPU machine run as root: these tests touch `/dev/null` only
//! by writing through it (and check it is still a device afterwards), and
//! never name `/dev/full` or replace `/dev/stdout`.

use crate::cli::{bad, command, drain, entries, rr_in, run_cmd, scratch_dir, wait_for, Ran};
use crate::common::pass;
use crate::ensure;
use crate::harness::Harness;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A quick `bench` on the CPU (one row size sweep 8-64 B, one call).
const BENCH: [&str; 19] = [
    "bench",
    "--backend",
    "cpu",
    "--ranks",
    "2",
    "-b",
    "8",
    "-e",
    "64",
    "-n",
    "1",
    "-w",
    "0",
    "--algo",
    "ring",
    "--blocks",
    "1",
    "--no-ceiling",
    "--cold-size=4KiB",
];

/// A quick `trace` of real calls on the CPU.
const TRACE: [&str; 7] = ["trace", "--backend", "cpu", "--ranks", "2", "--count", "64"];

/// `base` followed by `extra`, as the command's arguments.
fn args(base: &[&str], extra: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    base.iter()
        .map(OsString::from)
        .chain(extra.iter().map(|a| a.as_ref().to_os_string()))
        .collect()
}

/// Runs `ringreduce ARGS` in `dir` (1-minute limit).
fn run_in(dir: &Path, a: &[OsString]) -> Ran {
    let mut c = command(a);
    c.current_dir(dir);
    run_cmd(c, Duration::from_secs(60))
}

fn ok(ran: &Ran, what: &str) -> Result<(), String> {
    ensure!(
        ran.code == Some(0) && !ran.panicked(),
        "{what}: {}",
        ran.show()
    );
    Ok(())
}

fn dev_null_is_a_device() -> Result<(), String> {
    let m = std::fs::symlink_metadata("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    ensure!(
        m.file_type().is_char_device(),
        "/dev/null is no longer a character device: {m:?}"
    );
    Ok(())
}

fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok()
}

fn mkfifo(p: &Path) -> Result<(), String> {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .map_err(|e| format!("mkfifo: {e}"))?;
    ensure!(st.success(), "mkfifo {} failed", p.display());
    Ok(())
}

/// Opens the FIFO `p` for reading without blocking, before the command
/// runs: the command's open for writing then finds a reader, and its small
/// output waits in the pipe's buffer (64 KiB). Unlike a blocking reader
/// thread, this cannot hang the test when the command never opens the FIFO
/// (the old code renamed a file over it).
fn fifo_reader(p: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// What is waiting in the FIFO (after the writer closed it).
fn drain_fifo(mut f: std::fs::File) -> Vec<u8> {
    use std::io::Read;
    let mut v = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = f.read(&mut buf) {
        v.extend_from_slice(&buf[..n]);
    }
    v
}

fn ino(p: &Path) -> Result<u64, String> {
    std::fs::metadata(p)
        .map(|m| m.ino())
        .map_err(|e| format!("{}: {e}", p.display()))
}

fn read(p: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// How a test closes the command's output early.
#[derive(Clone, Copy, Debug)]
enum Close {
    /// Stdout's read end dropped right after the spawn, before the command
    /// writes anything (`| true`).
    AtOnce,
    /// Stdout's first line read, then its read end dropped (`| head -1`).
    AfterFirstLine,
    /// Stdout and stderr both one pipe, closed after the first line
    /// (`2>&1 | head -1`): the progress lines on stderr meet a closed pipe
    /// too.
    BothAfterFirstLine,
}

/// Runs `ringreduce ARGS` in `dir` with its output closed early as `close`
/// says, and requires the documented end: exit status 0 (what the command
/// returns when it succeeds, a closed pipe changing nothing), no signal, no
/// panic, no "Broken pipe" message, within 60 s. The caller then checks
/// the files.
fn closed_early(dir: &Path, a: &[OsString], close: Close) -> Result<(), String> {
    let limit = Duration::from_secs(60);
    let both = matches!(close, Close::BothAfterFirstLine);
    let mut c = if both {
        // stderr into the same pipe as stdout, as the shell's `2>&1` does.
        let mut c = std::process::Command::new("sh");
        c.arg("-c")
            .arg("exec \"$0\" \"$@\" 2>&1")
            .arg(crate::cli::bin())
            .args(a);
        c
    } else {
        command(a)
    };
    c.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(if both { Stdio::null() } else { Stdio::piped() });
    let t0 = Instant::now();
    let mut child = c.spawn().map_err(|e| format!("spawn: {e}"))?;
    let err = child.stderr.take().map(drain);
    let mut first = String::new();
    match close {
        Close::AtOnce => drop(child.stdout.take()),
        Close::AfterFirstLine | Close::BothAfterFirstLine => {
            // Dropping the reader closes the pipe, as `| head -1` does.
            let mut r = BufReader::new(child.stdout.take().ok_or("stdout")?);
            r.read_line(&mut first).map_err(|e| format!("read: {e}"))?;
        }
    }
    let (st, timed_out) = wait_for(&mut child, limit, t0);
    let err = err
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    let what = format!("{a:?} with {close:?}");
    ensure!(!timed_out, "{what}: still running after {limit:?}");
    let st = st.ok_or(format!("{what}: no exit status"))?;
    ensure!(
        st.signal().is_none(),
        "{what}: killed by signal {:?}\n{err}",
        st.signal()
    );
    ensure!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{what}: a panic or a broken-pipe message:\n{err}"
    );
    ensure!(
        st.code() == Some(0),
        "{what}: exit {:?}, 0 expected (the first line: {first:?})\n{err}",
        st.code()
    );
    Ok(())
}

/// Runs `base` with `files` (each `(flag, name)`) under every way of
/// closing the output early, in a fresh directory each time, and requires
/// each file written and well formed (`check(name, bytes)`).
fn files_despite_closed_stdout(
    tag: &str,
    base: &[&str],
    files: &[(&str, &str)],
    also: &[&str],
) -> Result<(), String> {
    for close in [
        Close::AtOnce,
        Close::AfterFirstLine,
        Close::BothAfterFirstLine,
    ] {
        let dir = scratch_dir(&format!("{tag}-{close:?}"))?;
        let extra: Vec<&dyn AsRef<std::ffi::OsStr>> = files
            .iter()
            .flat_map(|(f, n)| [f as &dyn AsRef<std::ffi::OsStr>, n as _])
            .collect();
        closed_early(&dir, &args(base, &extra), close)?;
        for name in files.iter().map(|(_, n)| *n).chain(also.iter().copied()) {
            let got = read(&dir.join(name)).map_err(|e| format!("{close:?}: {e}"))?;
            well_formed(name, &got).map_err(|e| format!("{base:?} with {close:?}: {e}"))?;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// A JSON file parses, an SVG file is a whole SVG document, a CSV file
/// starts with its header.
fn well_formed(name: &str, got: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(got);
    let ok = if name.ends_with(".json") {
        is_json(got)
    } else if name.ends_with(".svg") {
        text.starts_with("<svg") && text.trim_end().ends_with("</svg>")
    } else if name.ends_with(".csv") {
        text.starts_with("algo,path,") && text.lines().count() > 1
    } else {
        return Err(format!("{name}: no check for this kind of file"));
    };
    ensure!(ok, "{name} is not well formed: {}", crate::cli::tail(&text));
    Ok(())
}

pub fn register(h: &mut Harness) {
    h.add("cli_outputs::dev_null_is_written_through", || {
        // Regression: as root, `-J /dev/null` replaced the device node with
        // a regular file (the machine's /dev/null became a plain file).
        let dir = scratch_dir("out-null")?;
        let null = Path::new("/dev/null");
        let a = args(&BENCH, &[&"-J", &null, &"--csv", &null, &"--plot", &null]);
        ok(&run_in(&dir, &a), "bench -J/--csv/--plot /dev/null")?;
        dev_null_is_a_device()?;
        let a = args(&TRACE, &[&"--timeline", &null, &"--svg", &null]);
        ok(&run_in(&dir, &a), "trace --timeline/--svg /dev/null")?;
        dev_null_is_a_device()?;
        ensure!(entries(&dir).is_empty(), "files left: {:?}", entries(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::json_to_dev_stdout", || {
        // Regression: `-J /dev/stdout` renamed a file over the symlink. It
        // goes to the command's stdout now, after the text report.
        let dir = scratch_dir("out-stdout")?;
        let a = args(&BENCH, &[&"-J", &"/dev/stdout"]);
        let ran = run_in(&dir, &a);
        ok(&ran, "bench -J /dev/stdout")?;
        let at = ran
            .out
            .rfind("\n{\n")
            .ok_or(format!("no JSON in stdout: {}", ran.show()))?;
        ensure!(
            ran.out[..at].contains("# algo: ring") && is_json(&ran.out.as_bytes()[at..]),
            "stdout must be the text report, then the JSON: {}",
            ran.show()
        );
        let link = std::fs::symlink_metadata("/dev/stdout").map_err(|e| e.to_string())?;
        ensure!(
            link.file_type().is_symlink(),
            "/dev/stdout is no longer a symlink"
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::json_to_fifo", || {
        // Regression: a FIFO was replaced by a regular file. It is written
        // through now, and its name needs no .json.
        let dir = scratch_dir("out-fifo")?;
        let fifo = dir.join("results");
        mkfifo(&fifo)?;
        let reader = fifo_reader(&fifo)?;
        let ran = run_in(&dir, &args(&BENCH, &[&"-J", &fifo]));
        let got = drain_fifo(reader);
        ok(&ran, "bench -J FIFO")?;
        ensure!(is_json(&got), "the FIFO's reader got no JSON: {got:?}");
        let m = std::fs::symlink_metadata(&fifo).map_err(|e| e.to_string())?;
        ensure!(m.file_type().is_fifo(), "the FIFO was replaced: {m:?}");
        ensure!(entries(&dir) == ["results"], "{:?}", entries(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::overlap_writes_through_its_module", || {
        // overlap wrote with std::fs::write (truncating a FIFO's or a
        // device's name was fine, but its --timeline picture went next to
        // the JSON even for /dev/null: /dev/null.svg, as root). Its outputs
        // go through the output module now, and a written-through
        // --timeline gets no picture.
        let dir = scratch_dir("out-overlap")?;
        let fifo = dir.join("numbers");
        mkfifo(&fifo)?;
        let reader = fifo_reader(&fifo)?;
        let stray = Path::new("/dev/null.svg");
        let stray_before = stray.exists();
        let a = args(
            &["overlap", "--backend", "cpu"],
            &[&"--json", &fifo, &"--timeline", &"/dev/null"],
        );
        let ran = run_in(&dir, &a);
        let got = drain_fifo(reader);
        ok(&ran, "overlap --json FIFO --timeline /dev/null")?;
        ensure!(is_json(&got), "the FIFO's reader got no JSON");
        ensure!(
            ran.err.contains("no SVG next to it"),
            "overlap must say the picture was not written: {}",
            ran.show()
        );
        ensure!(
            stray_before || !stray.exists(),
            "overlap created /dev/null.svg"
        );
        dev_null_is_a_device()?;
        ensure!(entries(&dir) == ["numbers"], "{:?}", entries(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::symlinks_are_followed_and_kept", || {
        // Regression: `link.json -> real.json` became a regular file and
        // real.json was left as it was.
        let dir = scratch_dir("out-links")?;
        let runs = dir.join("runs");
        std::fs::create_dir(&runs).map_err(|e| e.to_string())?;
        std::fs::write(runs.join("real.json"), "old").map_err(|e| e.to_string())?;
        let pairs = [
            ("link.json", "runs/real.json"),
            // Dangling: the command creates the target.
            ("link.csv", "runs/new.csv"),
            ("link.svg", "runs/new.svg"),
            ("tl.json", "runs/tl.json"),
            ("tl.svg", "runs/tl.svg"),
        ];
        for (l, t) in pairs {
            symlink(t, dir.join(l)).map_err(|e| e.to_string())?;
        }
        let a = args(
            &BENCH,
            &[
                &"-J",
                &"link.json",
                &"--csv",
                &"link.csv",
                &"--plot",
                &"link.svg",
            ],
        );
        ok(&run_in(&dir, &a), "bench through symlinks")?;
        let a = args(&TRACE, &[&"--timeline", &"tl.json", &"--svg", &"tl.svg"]);
        ok(&run_in(&dir, &a), "trace through symlinks")?;
        for (l, t) in pairs {
            let link = dir.join(l);
            let to = std::fs::read_link(&link).map_err(|e| format!("{l}: {e}"))?;
            ensure!(to == Path::new(t), "{l} now points to {}", to.display());
        }
        ensure!(
            is_json(&read(&runs.join("real.json"))?),
            "real.json not replaced"
        );
        ensure!(
            is_json(&read(&runs.join("tl.json"))?),
            "tl.json not written"
        );
        let csv = String::from_utf8_lossy(&read(&runs.join("new.csv"))?).into_owned();
        ensure!(csv.starts_with("algo,path,"), "new.csv: {csv}");
        ensure!(
            entries(&runs) == ["new.csv", "new.svg", "real.json", "tl.json", "tl.svg"],
            "{:?}",
            entries(&runs)
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::hard_link_keeps_its_identity", || {
        // Regression: a hard-linked output was replaced, so its other name
        // kept the old contents. It is written in place now.
        let dir = scratch_dir("out-hard")?;
        let (a_path, b_path) = (dir.join("a.json"), dir.join("b.json"));
        std::fs::write(&a_path, "old").map_err(|e| e.to_string())?;
        std::fs::hard_link(&a_path, &b_path).map_err(|e| e.to_string())?;
        let before = ino(&a_path)?;
        ok(
            &run_in(&dir, &args(&BENCH, &[&"-J", &a_path])),
            "bench -J hard link",
        )?;
        ensure!(ino(&a_path)? == before, "a.json got a new inode");
        ensure!(is_json(&read(&b_path)?), "b.json does not see the report");
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::longest_file_name", || {
        // Regression: names of 241-255 bytes failed with "File name too
        // long" (the temporary file's name embedded the file's).
        let dir = scratch_dir("out-long")?;
        let name = format!("{}.json", "r".repeat(250));
        let p: PathBuf = dir.join(&name);
        ok(
            &run_in(&dir, &args(&BENCH, &[&"-J", &p])),
            "bench -J 255-byte name",
        )?;
        ensure!(is_json(&read(&p)?), "no report");
        ok(
            &run_in(&dir, &args(&BENCH, &[&"-J", &p])),
            "bench -J 255-byte name, again (replace)",
        )?;
        ensure!(entries(&dir) == [name], "{:?}", entries(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::same_file_by_two_names_is_refused", || {
        // Regression: the same-file check compared names, so a symlink or a
        // hard link to another output passed.
        let dir = scratch_dir("out-same")?;
        std::fs::write(dir.join("real.json"), "old").map_err(|e| e.to_string())?;
        symlink("real.json", dir.join("link.csv")).map_err(|e| e.to_string())?;
        std::fs::hard_link(dir.join("real.json"), dir.join("hard.csv"))
            .map_err(|e| e.to_string())?;
        for other in ["link.csv", "hard.csv"] {
            let a = args(&BENCH, &[&"-J", &"real.json", &"--csv", &other]);
            let ran = run_in(&dir, &a);
            bad(
                &ran,
                &["-J", "real.json", "--csv", other],
                "both name the file",
            )?;
            ensure!(ran.code == Some(2), "exit 2 expected: {}", ran.show());
            ensure!(!ran.out.contains("# algo"), "it measured: {}", ran.show());
        }
        ensure!(
            read(&dir.join("real.json"))? == b"old",
            "real.json was written"
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::wrong_extension_is_refused", || {
        // Regression: only the plot's extension was checked (`-J o.csv`,
        // `--csv o.json`, `--timeline x.csv` were accepted).
        let dir = scratch_dir("out-ext")?;
        let cases: [(&[&str], &str, &str, &str); 5] = [
            (&BENCH, "-J", "out.csv", ".json"),
            (&BENCH, "--csv", "out.json", ".csv"),
            (&BENCH, "--plot", "out.png", ".svg"),
            (&TRACE, "--timeline", "x.csv", ".json"),
            (&TRACE, "--svg", "x.json", ".svg"),
        ];
        for (base, flag, name, want) in cases {
            let ran = run_in(&dir, &args(base, &[&flag, &name]));
            bad(&ran, &[flag, name], want)?;
            ensure!(
                ran.code == Some(2),
                "{flag} {name}: exit 2 expected: {}",
                ran.show()
            );
            let found = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
            ensure!(
                ran.err.contains(flag)
                    && ran.err.contains(name)
                    && ran.err.contains(&format!("ends in .{found}")),
                "{flag} {name}: the message must name the flag, the path and both extensions: {}",
                ran.show()
            );
        }
        // overlap's outputs too.
        let a = ["overlap", "--backend", "cpu", "--json", "o.csv"];
        let ran = rr_in(&dir, &a);
        bad(&ran, &a, ".json")?;
        ensure!(
            entries(&dir).is_empty(),
            "files written: {:?}",
            entries(&dir)
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("cli_outputs::closed_stdout_bench_writes_its_files", || {
        // Regression: with stdout closed early (`bench ... -J out.json |
        // head -1`) the command ended quietly at its next print, before
        // writing -J, --csv and --plot.
        files_despite_closed_stdout(
            "closed-bench",
            &BENCH,
            &[("-J", "o.json"), ("--csv", "o.csv"), ("--plot", "o.svg")],
            &[],
        )?;
        pass()
    });

    h.add("cli_outputs::closed_stdout_trace_writes_its_files", || {
        // Regression: `trace --svg x.svg | head -1` wrote no SVG.
        files_despite_closed_stdout(
            "closed-trace",
            &TRACE,
            &[("--timeline", "t.json"), ("--svg", "t.svg")],
            &[],
        )?;
        pass()
    });

    h.add("cli_outputs::closed_stdout_compare_writes_its_plot", || {
        // Regression: `compare --plot p.svg | head -1` wrote no plot, and
        // with stderr closed too its progress line panicked (exit 101).
        files_despite_closed_stdout(
            "closed-compare",
            &[
                "compare",
                "--backend",
                "cpu",
                "--ranks",
                "2,3",
                "--size",
                "1KiB",
                "-n",
                "1",
                "-w",
                "0",
            ],
            &[("--plot", "p.svg")],
            &[],
        )?;
        pass()
    });

    h.add(
        "cli_outputs::closed_stdout_overlap_writes_its_files",
        || {
            // Regression: overlap's --json and --timeline (and the picture next
            // to it) were not written with stdout closed; with stderr closed
            // too its notes panicked (exit 101).
            files_despite_closed_stdout(
                "closed-overlap",
                &[
                    "overlap",
                    "--backend",
                    "cpu",
                    "--ranks",
                    "2",
                    "--buckets",
                    "2",
                    "--bucket-size",
                    "1KiB",
                    "--steps",
                    "1",
                    "--warmup",
                    "0",
                ],
                &[("--json", "o.json"), ("--timeline", "tl.json")],
                &["tl.svg"],
            )?;
            pass()
        },
    );

    h.add("cli_outputs::json_to_closed_dev_stdout", || {
        // Regression: `-J /dev/stdout | head -1` exited 2 with "Broken
        // pipe" (the JSON written through to a closed stdout); the files
        // named next to it were lost. Nobody reads that stdout: a quiet
        // end, exit 0, and the CSV written.
        for close in [Close::AtOnce, Close::AfterFirstLine] {
            let dir = scratch_dir(&format!("closed-devstdout-{close:?}"))?;
            let a = args(&BENCH, &[&"-J", &"/dev/stdout", &"--csv", &"o.csv"]);
            closed_early(&dir, &a, close)?;
            well_formed("o.csv", &read(&dir.join("o.csv"))?)?;
            // `-J /dev/stdout` alone is no file pending: a quiet end, exit 0.
            closed_early(&dir, &args(&BENCH, &[&"-J", &"/dev/stdout"]), close)?;
            let _ = std::fs::remove_dir_all(&dir);
        }
        pass()
    });
}
