//! The edges a new user hits (issue 25): a command never exits 0 having
//! done less than asked, a flag given explicitly is honoured or refused,
//! and every message names the right flag and cause. Each test is the
//! regression test of one reported case; the comment quotes it.

use crate::cli::{bad, command, rr, run_cmd, scratch_dir, Ran};
use crate::common::{cuda_skip_reason, pass, skip};
use crate::ensure;
use crate::harness::Harness;
use std::process::Stdio;
use std::time::Duration;

/// A run that must succeed (exit 0, no panic).
fn ok(ran: &Ran, args: &[&str]) -> Result<(), String> {
    ensure!(
        ran.code == Some(0) && !ran.panicked(),
        "{args:?} must succeed: {}",
        ran.show()
    );
    Ok(())
}

/// The CPU bench flags that keep a sweep short.
const QUICK: [&str; 9] = [
    "--backend",
    "cpu",
    "-n",
    "1",
    "-w",
    "0",
    "--blocks",
    "1",
    "--no-ceiling",
];

fn bench(extra: &[&str]) -> (Vec<String>, Ran) {
    let mut args: Vec<String> = vec!["bench".into()];
    args.extend(QUICK.iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = rr(&refs);
    (args, ran)
}

pub fn register(h: &mut Harness) {
    h.add("cli_edges::a_sweep_with_no_row_is_refused", || {
        // "`bench -b 1 -e 1` (float) prints no table at all" (and exited 0).
        let (args, ran) = bench(&["-b", "1", "-e", "1"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bad(&ran, &args, "gives no row")?;
        ensure!(ran.code == Some(2), "{}", ran.show());
        pass()
    });
    h.add(
        "cli_edges::every_table_asked_for_is_printed_or_named",
        || {
            // "`bench -d all -o all --collective all --ranks 3 -b 3 -e 13 -f 3`
            // prints 96 of 132 tables; the other 36 simply do not appear."
            let types = ["int8", "half", "float", "double"];
            let (args, ran) = bench(&[
                "-d",
                "int8,half,float,double",
                "--collective",
                "all",
                "--ranks",
                "3",
                "-b",
                "3",
                "-e",
                "13",
                "-f",
                "3",
                "--algo",
                "ring",
            ]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ok(&ran, &args)?;
            for coll in ["all-reduce", "reduce-scatter", "all-gather"] {
                for t in types {
                    // A row of the table (nccl-tests layout: size count type op)
                    // or a note that names the missing table.
                    let has_rows = ran.out.lines().any(|l| {
                        l.starts_with("# row")
                            && l.contains(coll)
                            && l.split_whitespace().any(|w| w == t)
                    });
                    let named = ran.err.contains(&format!("no {coll} {t} table"))
                        && ran.out.contains(&format!("no {coll} {t} table"));
                    ensure!(
                    has_rows ^ named,
                    "{coll} {t}: neither rows nor a note naming the missing table (or both): {}",
                    ran.show()
                );
                }
            }
            // 3 B holds no float on 3 ranks: the skipped row is named too.
            ensure!(
                ran.err.contains("all-reduce float: no row for 3B"),
                "{}",
                ran.show()
            );
            pass()
        },
    );
    h.add(
        "cli_edges::nccl_on_the_cpu_backend_is_refused_as_such",
        || {
            // "`bench --backend cpu --algo ring,nccl` says "NCCL library not
            // found" instead of "the CPU backend has no NCCL""; "`overlap
            // --backend cpu --contenders nccl` measures nothing and prints
            // `check: PASS (0 bucket checks ...)`".
            for args in [
                &["bench", "--backend", "cpu", "--algo", "ring,nccl"][..],
                &["overlap", "--backend", "cpu", "--contenders", "nccl"][..],
                &["overlap", "--backend", "cpu", "--contenders", "ring,nccl"][..],
            ] {
                let ran = rr(args);
                bad(&ran, args, "the cpu backend has no NCCL")?;
                ensure!(!ran.out.contains("PASS"), "{args:?}: {}", ran.show());
                ensure!(!ran.err.contains("not found"), "{args:?}: {}", ran.show());
            }
            pass()
        },
    );
    h.add(
        "cli_edges::a_named_nccl_library_is_checked_or_refused",
        || {
            // "`overlap --nccl-lib /nonexistent` ... ignored without a word".
            let args = [
                "overlap",
                "--backend",
                "cpu",
                "--nccl-lib",
                "/nonexistent/libnccl.so.2",
            ];
            let ran = rr(&args);
            bad(&ran, &args, "/nonexistent/libnccl.so.2")?;
            // trace: --nccl-lib without --nccl would be ignored.
            let args = [
                "trace",
                "--backend",
                "cpu",
                "--size",
                "4KiB",
                "--nccl-lib",
                "/nonexistent/libnccl.so.2",
            ];
            bad(&rr(&args), &args, "--nccl-lib")?;
            pass()
        },
    );
    h.add(
        "cli_edges::overlap_refuses_a_contender_before_its_header",
        || {
            // "`overlap --contenders oneshot:flag` with 4 ranks is refused only
            // after the header is printed".
            let args = [
                "overlap",
                "--backend",
                "cpu",
                "--ranks",
                "4",
                "--contenders",
                "oneshot:flag",
            ];
            let ran = rr(&args);
            bad(&ran, &args, "oneshot:flag")?;
            ensure!(
                ran.out.is_empty(),
                "printed before refusing: {}",
                ran.show()
            );
            pass()
        },
    );
    h.add("cli_edges::every_list_refuses_an_empty_item", || {
        // "`--bucket-size 16KiB,,32KiB` is accepted where `-d float,,half`
        // is refused".
        for args in [
            &[
                "overlap",
                "--backend",
                "cpu",
                "--bucket-size",
                "16KiB,,32KiB",
            ][..],
            &["bench", "--backend", "cpu", "-d", "float,,half"][..],
            &["bench", "--backend", "cpu", "--collective", "all-reduce,"][..],
            &["bench", "--backend", "cpu", "--algo", "ring,,ps"][..],
            &["soak", "--backend", "cpu", "--algo", ",ring"][..],
            &["overlap", "--backend", "cpu", "--kernel", "fma,"][..],
        ] {
            bad(&rr(args), args, "empty item")?;
        }
        pass()
    });
    h.add("cli_edges::soak_honours_explicit_ranks_and_kinds", || {
        // "`soak --ranks 3` ignores `--ranks` (the header says rank counts
        // [1..5]); `soak -d float -o sum --collective all-reduce` draws all
        // 132 kinds".
        let args = [
            "soak",
            "--backend",
            "cpu",
            "--ranks",
            "3",
            "-d",
            "float",
            "-o",
            "sum",
            "--collective",
            "all-reduce",
            "--calls",
            "20",
            "--max-size",
            "4KiB",
        ];
        let ran = rr(&args);
        ok(&ran, &args)?;
        ensure!(
            ran.out.contains("rank counts [3]") && ran.out.contains(", 1 kind of call"),
            "{}",
            ran.show()
        );
        // Both given and different: refused.
        let args = [
            "soak",
            "--backend",
            "cpu",
            "--ranks",
            "3",
            "--rank-counts",
            "2,4",
        ];
        bad(&rr(&args), &args, "--ranks")?;
        pass()
    });
    h.add("cli_edges::a_soak_always_checks_one_call", || {
        // A time limit shorter than one call stopped a soak before its
        // first call: "PASS: 0 wrong of 0 calls" checked nothing.
        let args = [
            "soak",
            "--backend",
            "cpu",
            "--calls",
            "50",
            "--seconds",
            "0.000001",
            "--max-size",
            "4KiB",
        ];
        let ran = rr(&args);
        ok(&ran, &args)?;
        ensure!(
            ran.out.contains("PASS: 0 wrong of 1 call\n"),
            "{}",
            ran.show()
        );
        pass()
    });
    h.add("cli_edges::launch_to_a_full_disk_is_not_a_success", || {
        // "`launch ... > /dev/full` loses every rank's output and exits 0
        // (every other command exits 2)". /dev/full is opened for writing
        // only, never replaced.
        let full = match std::fs::OpenOptions::new().write(true).open("/dev/full") {
            Ok(f) => f,
            Err(e) => return skip(format!("/dev/full: {e}")),
        };
        let mut c = command(&[
            "launch",
            "-n",
            "2",
            "--",
            "run",
            "--backend",
            "cpu",
            "--size",
            "4KiB",
        ]);
        c.stdout(Stdio::from(full)).stderr(Stdio::piped());
        let mut child = c.spawn().map_err(|e| format!("spawn: {e}"))?;
        let err = crate::cli::drain(child.stderr.take().ok_or("stderr")?);
        let st = child.wait().map_err(|e| e.to_string())?;
        let err = err.join().unwrap_or_default();
        ensure!(st.code() == Some(2), "exit {:?}: {err}", st.code());
        ensure!(err.contains("could not be written to stdout"), "{err}");
        // The same for a command of its own.
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .map_err(|e| e.to_string())?;
        let mut c = command(&["run", "--backend", "cpu", "--size", "4KiB"]);
        c.stdout(Stdio::from(full)).stderr(Stdio::null());
        let st = c.status().map_err(|e| e.to_string())?;
        ensure!(
            st.code() == Some(2),
            "run > /dev/full: exit {:?}",
            st.code()
        );
        pass()
    });
    h.add("cli_edges::flags_for_gpus_are_refused_without_one", || {
        // "Flags ignored without a word: `topo --ranks 100000` without a
        // GPU, `run --devices 0,0,1` on the CPU backend".
        let args = ["topo", "--ranks", "100000"];
        bad(&rr(&args), &args, "at most 256")?;
        for args in [
            &["run", "--backend", "cpu", "--devices", "0,0,1"][..],
            &["bench", "--backend", "cpu", "--devices", "0"][..],
            &["topo", "--backend", "cpu", "--devices", "0"][..],
            &[
                "compare",
                "--backend",
                "cpu",
                "--devices",
                "0",
                "--ranks",
                "2",
            ][..],
        ] {
            bad(&rr(args), args, "--devices picks GPUs")?;
        }
        // --ranks without a GPU is honoured: the ring order is shown.
        if cuda_skip_reason(1).is_some() {
            let args = ["topo", "--ranks", "3"];
            let ran = rr(&args);
            ok(&ran, &args)?;
            ensure!(ran.out.contains("mod 3"), "{}", ran.show());
        }
        pass()
    });
    h.add(
        "cli_edges::launch_refuses_commands_that_are_no_rank",
        || {
            // "`launch -n 2 -- topo` (also compare, overlap, launch) says "rank
            // 0 could not be started (topo): No such file or directory"".
            for cmd in ["topo", "compare", "overlap", "launch"] {
                let args = ["launch", "-n", "2", "--", cmd];
                let ran = rr(&args);
                bad(&ran, &args, "does not run as a rank of a job")?;
                ensure!(!ran.err.contains("No such file"), "{}", ran.show());
            }
            pass()
        },
    );
    h.add(
        "cli_edges::overlap_as_a_rank_of_a_job_refuses_at_once",
        || {
            // `overlap` under mpirun, or under launch with the binary's path
            // as the command, failed in every rank with "write into rank 0's
            // buffer: it lives in rank 0's process (this process is rank
            // 1)": it runs every rank in one process. Every rank now refuses
            // by name, at once.
            let exe = crate::cli::bin().to_string_lossy().into_owned();
            let args = [
                "launch",
                "-n",
                "2",
                "--timeout",
                "20",
                "--",
                &exe,
                "overlap",
                "--backend",
                "cpu",
            ];
            let t0 = std::time::Instant::now();
            let ran = rr(&args);
            bad(&ran, &args, "overlap runs every rank in one process")?;
            ensure!(ran.err.contains("rank 1 of a job of 2"), "{}", ran.show());
            ensure!(!ran.err.contains("write into"), "{}", ran.show());
            ensure!(
                t0.elapsed() < Duration::from_secs(15),
                "took {:?}",
                t0.elapsed()
            );
            pass()
        },
    );
    h.add(
        "cli_edges::a_store_that_is_no_store_is_not_called_stale",
        || {
            // "`launch --store DIR` with a non-empty directory that is not a
            // store calls it a "stale store directory" and suggests `rm -r DIR`".
            let d = scratch_dir("notastore")?;
            std::fs::write(d.join("my-notes.txt"), "keep me").map_err(|e| e.to_string())?;
            let dir = d.to_string_lossy().into_owned();
            let args = [
                "launch",
                "-n",
                "2",
                "--store",
                &dir,
                "--",
                "run",
                "--backend",
                "cpu",
            ];
            let ran = rr(&args);
            bad(&ran, &args, "is not a ringreduce store")?;
            ensure!(
                !ran.err.contains("rm -r") && !ran.err.contains("stale"),
                "{}",
                ran.show()
            );
            ensure!(d.join("my-notes.txt").exists(), "the file was touched");
            let _ = std::fs::remove_dir_all(&d);
            pass()
        },
    );
    h.add("cli_edges::sizes_and_counts_name_their_flag", || {
        // "Size errors do not name their flag and mix units: `--count abc`
        // gives `invalid size "abc"`, `--count 1.5` "not a whole number of
        // bytes", `--size -1` clap's "unexpected argument '-1'"";
        // "`theory --link-gbps 1e-300` prints 300-digit numbers".
        for (args, want) in [
            (&["run", "--count", "abc"][..], "--count \"abc\""),
            (
                &["run", "--count", "1.5"][..],
                "not a whole number of elements",
            ),
            (
                &["run", "--size", "-1"][..],
                "--size \"-1\": a size cannot be negative",
            ),
            (
                &["trace", "--count", "-3"][..],
                "a count cannot be negative",
            ),
            (&["bench", "-b", "8", "-e", "4XB"][..], "-e/--maxbytes"),
            (&["soak", "--max-size", "0"][..], "--max-size"),
            (&["check", "--sizes", "1KiB,-4"][..], "--sizes"),
            (&["compare", "--size", "6"][..], "--size"),
            (&["theory", "--size", "abc"][..], "--size"),
        ] {
            let ran = rr(args);
            bad(&ran, args, want)?;
            ensure!(!ran.err.contains("unexpected argument"), "{}", ran.show());
        }
        let args = ["theory", "--link-gbps", "1e-300"];
        let ran = rr(&args);
        bad(&ran, &args, "got 1e-300")?;
        ensure!(ran.err.len() < 300, "{}", ran.show());
        pass()
    });
    h.add(
        "cli_edges::a_missing_cuda_backend_is_named_not_nccl",
        || {
            // "`trace --backend cuda --nccl` without a driver blames `--nccl`".
            if cuda_skip_reason(1).is_none() {
                return skip("a CUDA driver is present (the case needs its absence)");
            }
            let args = ["trace", "--backend", "cuda", "--nccl", "--size", "4KiB"];
            let ran = rr(&args);
            bad(&ran, &args, "the CUDA backend is unavailable")?;
            ensure!(!ran.err.contains("--nccl needs"), "{}", ran.show());
            pass()
        },
    );
    h.add("cli_edges::counted_nouns_and_cpu_headers", || {
        // ""1 ranks", "1 elements", "ranks 0, 1 was killed"; bench on the
        // CPU prints "Rank 0 -> device 0"; launch says the buffers are
        // under /dev/shm (they are memfds)".
        let args = [
            "run",
            "--backend",
            "cpu",
            "--ranks",
            "1",
            "--count",
            "1",
            "--inputs",
            "exact",
        ];
        let ran = rr(&args);
        ok(&ran, &args)?;
        ensure!(
            ran.out.contains("1 rank,") && ran.out.contains("1 element on 1 rank"),
            "{}",
            ran.show()
        );
        ensure!(
            !ran.out.contains("1 ranks") && !ran.out.contains("1 elements"),
            "{}",
            ran.show()
        );
        let (args, ran) = bench(&["-b", "8", "-e", "8", "--algo", "ring"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&ran, &args)?;
        ensure!(
            !ran.out.contains("-> device") && ran.out.contains("host threads"),
            "{}",
            ran.show()
        );
        let args = [
            "launch",
            "-n",
            "2",
            "--",
            "run",
            "--backend",
            "cpu",
            "--size",
            "4KiB",
        ];
        let ran = rr(&args);
        ok(&ran, &args)?;
        ensure!(
            ran.out.contains("memfd") && !ran.out.contains("shared memory under"),
            "{}",
            ran.show()
        );
        let args = ["launch", "-n", "2", "--", "sh", "-c", "kill -9 $$"];
        let ran = rr(&args);
        ensure!(
            ran.err.contains("ranks 0, 1 were killed by SIGKILL"),
            "{}",
            ran.show()
        );
        pass()
    });
    h.add("cli_edges::run_and_trace_take_one_kind_and_say_so", || {
        // "`run --help` and `trace --help` say `-d`/`-o`/`--collective`
        // take "comma-separated, or all", and both refuse lists".
        for cmd in ["run", "trace"] {
            let ran = rr(&[cmd, "--help"]);
            ensure!(ran.code == Some(0), "{}", ran.show());
            ensure!(
                !ran.out.contains("comma-separated, or all"),
                "{cmd} --help: {}",
                ran.out
            );
            let args = [cmd, "--backend", "cpu", "-d", "float,half"];
            bad(&rr(&args), &args, "one value")?;
        }
        pass()
    });
    h.add("cli_edges::run_shows_the_ring_by_default", || {
        // "The README's first command does not show the ring": auto picked
        // the parameter server at 4 ranks x 4 MiB.
        let args = ["run", "--backend", "cpu", "--size", "64KiB"];
        let ran = rr(&args);
        ok(&ran, &args)?;
        ensure!(
            ran.out.contains("algorithm : ring (the default"),
            "{}",
            ran.show()
        );
        pass()
    });
    h.add("cli_edges::readme_commands_name_only_real_paths", || {
        // "README's `trace` line names `oneshot:pull` (unknown)": every
        // path a README or docs command names must parse.
        let root = crate::common::repo_root();
        let Ok(readme) = std::fs::read_to_string(root.join("README.md")) else {
            return skip(format!("the source tree is not at {}", root.display()));
        };
        let mut checked = 0;
        for line in readme.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                if *w == "--algo" || *w == "--contenders" {
                    if let Some(v) = words.get(i + 1) {
                        // `--algo ring:graph`): in running text.
                        let v = v.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
                        // `ring|ring:pipeK|oneshot`: alternatives, K a
                        // placeholder.
                        for alt in v.split('|') {
                            ringreduce_tools::bench::parse_contenders(
                                "--algo",
                                &alt.replace("pipeK", "pipe4"),
                            )
                            .map_err(|e| format!("README: {line}\n{e}"))?;
                            checked += 1;
                        }
                    }
                }
            }
            // Paths named in the trace line's comment.
            if line.trim_start().starts_with("ringreduce trace") {
                if let Some(c) = line.split('#').nth(1) {
                    for w in c.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == ':')) {
                        if w.starts_with("oneshot") || w.starts_with("ring:") {
                            w.replace("pipeK", "pipe4")
                                .parse::<ringreduce::AlgoChoice>()
                                .map_err(|e| format!("README: {line}\n{e}"))?;
                            checked += 1;
                        }
                    }
                }
            }
        }
        ensure!(checked > 3, "found only {checked} paths in the README");
        pass()
    });
    h.add(
        "cli_edges::rank_processes_read_only_landed_inputs[cuda]",
        || {
            // Found on one H200
            // (results/2026-12-01-h200x1-s10/2026-12-01-h200x1-s10.log.xz): two rank
            // processes on a GPU, `oneshot:fused` (auto's path out of place
            // on 2 ranks) read the tail of a peer's input before the peer's
            // host-to-device copy had landed: about 6 wrong calls in 1500
            // (results/2026-12-01-h200x1-s10-ab/2026-12-01-h200x1-s10-ab.log.xz);
            // 0 after the fix.
            if let Some(why) = cuda_skip_reason(1) {
                return skip(why);
            }
            let args = [
                "launch",
                "-n",
                "2",
                "--timeout",
                "30",
                "--",
                "soak",
                "--backend",
                "cuda",
                "--algo",
                "oneshot:fused",
                "--calls",
                "1500",
                "--seconds",
                "60",
                "--max-size",
                "64KiB",
            ];
            let ran = run_cmd(command(&args), Duration::from_secs(120));
            ok(&ran, &args)?;
            ensure!(
                ran.out.contains("PASS: 0 wrong of 1500 calls"),
                "{}",
                ran.show()
            );
            pass()
        },
    );
    h.add(
        "cli_edges::rank_threads_read_only_landed_inputs[cuda]",
        || {
            // Found on one H100 (results/2026-12-06-h200x1-host-ordered/,
            // call 3): two rank threads of one process on a GPU, `auto`
            // (`oneshot:fused`) out of place at 1 MiB right after the
            // `ring:pipe2` row: 26880 and 26752 of 524288 elements wrong in
            // two of two sweeps. A host write's copy had not landed when the
            // ranks' non-blocking streams read it (nothing orders their work
            // after the default stream's DMA); every host write now waits
            // for it. The same sweep, twice.
            if let Some(why) = cuda_skip_reason(1) {
                return skip(why);
            }
            let args = four_paths_on_one_gpu("2", "64KiB", "16MiB");
            for _ in 0..2 {
                let ran = run_cmd(command(&args), Duration::from_secs(120));
                ok(&ran, &args)?;
                ensure!(
                    !ran.out.contains("FAILED") && ran.out.contains("Out of bounds values : 0 OK"),
                    "{}",
                    ran.show()
                );
            }
            pass()
        },
    );
    h.add(
        "cli_edges::rank_threads_spin_only_with_a_queue_each[cuda]",
        || {
            // Found on one H100 and one H200
            // (results/2026-12-06-h100x1-ll-stop/): 4 rank threads on one
            // GPU, `bench --algo ring:ll,ring,ring:pipe2,auto` stopped within
            // its first 1 to 5 sweeps: with the driver's 8 hardware queues two
            // ranks' streams shared one, and an LL kernel waited there
            // behind the kernel that waited for its lines. With the default
            // queues `ring:ll` now refuses by name (empty cells, a note
            // naming CUDA_DEVICE_MAX_CONNECTIONS) and `auto` takes no
            // spinning path; with 16 queues `ring:ll` runs, three sweeps.
            if let Some(why) = cuda_skip_reason(1) {
                return skip(why);
            }
            let args = four_paths_on_one_gpu("4", "16", "64KiB");
            for _ in 0..2 {
                let mut c = command(&args);
                c.env_remove("CUDA_DEVICE_MAX_CONNECTIONS");
                let ran = run_cmd(c, Duration::from_secs(120));
                ok(&ran, &args)?;
                ensure!(
                    ran.out
                        .contains("ring:ll leaves its all-reduce cells empty")
                        && ran
                            .out
                            .contains("CUDA_DEVICE_MAX_CONNECTIONS to at least 16")
                        && !ran.out.contains("FAILED"),
                    "{}",
                    ran.show()
                );
            }
            for _ in 0..3 {
                let mut c = command(&args);
                c.env("CUDA_DEVICE_MAX_CONNECTIONS", "16");
                let ran = run_cmd(c, Duration::from_secs(120));
                ok(&ran, &args)?;
                ensure!(
                    !ran.out.contains("leaves its")
                        && !ran.out.contains("FAILED")
                        && ran.out.contains("Out of bounds values : 0 OK"),
                    "{}",
                    ran.show()
                );
            }
            pass()
        },
    );
    h.add(
        "cli_edges::bench_names_only_the_cells_it_leaves_empty",
        || {
            // Found trying `hier:2:mpi` under mpirun: bench printed
            // "hier:2:mpi leaves its all-reduce cells empty: ... runs on
            // host memory (the CPU backend)" on the CPU backend, then
            // measured every cell: its first look at the refusals, before
            // the engine, judged the paths at a made-up place (GPUs).
            let bench = |algo: &'static str| {
                let args = [
                    "bench",
                    "--backend",
                    "cpu",
                    "--ranks",
                    "4",
                    "--algo",
                    algo,
                    "-b",
                    "4KiB",
                    "-e",
                    "4KiB",
                    "-n",
                    "2",
                    "-w",
                    "1",
                    "--no-ceiling",
                ];
                let ran = run_cmd(command(&args), Duration::from_secs(120));
                ok(&ran, &args).map(|()| ran)
            };
            let ran = bench("hier:2:mpi,ring")?;
            ensure!(
                !ran.out.contains("leaves its")
                    && ran
                        .out
                        .lines()
                        .any(|l| l.trim_end().ends_with("hier:2:mpi"))
                    && ran.out.contains("Out of bounds values : 0 OK"),
                "{}",
                ran.show()
            );
            // A refusal of the path itself is still said, once, before
            // anything runs: hier:3 cannot cut 4 ranks into nodes.
            let ran = bench("hier:3,ring")?;
            ensure!(
                ran.out
                    .matches("hier:3 leaves its all-reduce cells empty")
                    .count()
                    == 1,
                "{}",
                ran.show()
            );
            pass()
        },
    );
    h.add(
        "cli_edges::the_readme_overlap_line_is_honest_on_the_cpu",
        || {
            // "README's `overlap --bucket-size 4MiB,25MiB,100MiB` on the CPU
            // backend ... prints efficiencies of 1124 % and -169 % beside "at
            // most 75.0 %"".
            let args = ["overlap", "--backend", "cpu", "--bucket-size", "64KiB"];
            let ran = run_cmd(command(&args), Duration::from_secs(180));
            ok(&ran, &args)?;
            ensure!(
                ran.out.contains("not computed on the CPU backend")
                    && !ran.out.contains("at most (B-1)/B"),
                "{}",
                ran.show()
            );
            pass()
        },
    );
    h.add("cli_edges::ranks_sharing_stderr_never_split_a_line", || {
        // Under `mpirun -np 4` a refused call printed "error: error:
        // invalid argument: ..." and "invalid argument: ..." lines:
        // each rank wrote its message in pieces, and the ranks'
        // pieces interleaved on the shared pipe. Eight processes at
        // once, twenty times, one pipe: every line must be whole.
        // One shell starts the eight at once on its own stderr: one pipe
        // for all of them.
        let script = "for round in $(seq 20); do for i in 1 2 3 4 5 6 7 8; do \"$0\" run --backend cpu --ranks 4 --algo hier:3 --size 1KiB >/dev/null & done; wait; done";
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(crate::cli::bin())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("sh: {e}"))?;
        let lines = String::from_utf8_lossy(&out.stderr).into_owned();
        let want = "error: invalid argument: hier:3 cannot run this call";
        let bad: Vec<&str> = lines.lines().filter(|l| !l.starts_with(want)).collect();
        ensure!(
            lines.lines().count() == 160 && bad.is_empty(),
            "{} lines, {} split, e.g. {:?}",
            lines.lines().count(),
            bad.len(),
            bad.first()
        );
        pass()
    });
}

/// `bench` of the copy-engine rings, the LL ring and `auto` on `ranks` rank
/// threads sharing GPU 0, `min` to `max`: the sweep the GPU records of
/// 2026-12-06 found two defects with (inputs not landed, and the hardware
/// queues).
fn four_paths_on_one_gpu(
    ranks: &'static str,
    min: &'static str,
    max: &'static str,
) -> Vec<&'static str> {
    vec![
        "bench",
        "--backend",
        "cuda",
        "--devices",
        "0",
        "--ranks",
        ranks,
        "-b",
        min,
        "-e",
        max,
        "-f",
        "4",
        "-n",
        "20",
        "-w",
        "5",
        "--blocks",
        "3",
        "--no-ceiling",
        "--timeout",
        "5",
        "--algo",
        "ring:ll,ring,ring:pipe2,auto",
    ]
}
