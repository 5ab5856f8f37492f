//! Output files through the command line (issue 25, item 1): what `-J`,
//! `--csv`, `--plot`, `--timeline`, `--svg` do with devices, FIFOs,
//! `/dev/stdout`, symbolic links, hard links, long names, two names of one
//! file and wrong extensions (the rules: `tools/src/report/output.rs`).
//!
//! CI and the GPU machine run as root: these tests touch `/dev/null` only
//! by writing through it (and check it is still a device afterwards), and
//! never name `/dev/full` or replace `/dev/stdout`.

use crate::cli::{bad, command, entries, rr_in, run_cmd, scratch_dir, Ran};
use crate::common::pass;
use crate::ensure;
use crate::harness::Harness;
use std::ffi::OsString;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
}
