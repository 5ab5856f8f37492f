//! The command line as a new user hit it (issue 41 items 9 to 12): one
//! regression test per reported case, the case quoted in its comment.

use crate::cli::{bad, rr, run_cmd};
use crate::cli_env::rr_env;
use crate::common::{pass, skip};
use crate::ensure;
use crate::harness::Harness;
use std::process::Stdio;
use std::time::Duration;

pub fn register(h: &mut Harness) {
    h.add("cli_issue41::a_failed_allocation_is_an_error", || {
        // Item 9: "`RINGREDUCE_HOST_MEMORY=100TiB ringreduce run --backend
        // cpu --size 1TiB` aborts (exit 134, "memory allocation of
        // 1099511627776 bytes failed")".
        for args in [
            &["run", "--backend", "cpu", "--size", "1TiB"][..],
            &[
                "compare",
                "--backend",
                "cpu",
                "--ranks",
                "2",
                "--size",
                "1TiB",
            ][..],
            &[
                "bench",
                "--backend",
                "cpu",
                "-b",
                "1TiB",
                "-e",
                "1TiB",
                "--no-ceiling",
            ][..],
        ] {
            let ran = rr_env(&[("RINGREDUCE_HOST_MEMORY", "100TiB")], args);
            bad(&ran, args, "of host memory")?;
            ensure!(ran.code == Some(2), "{args:?}: {}", ran.show());
        }
        pass()
    });
    h.add(
        "cli_issue41::malformed_launcher_variables_are_refused",
        || {
            // Item 10: "`ringreduce env` calls malformed values of ... errors,
            // yet every command exits 0 and ignores them".
            for (var, value) in [
                ("RINGREDUCE_LOCAL_RANK", "abc"),
                ("RINGREDUCE_LOCAL_SIZE", "-2"),
                ("RINGREDUCE_RANKS_PER_NODE", "0"),
                ("RINGREDUCE_MPI", "maybe"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "x"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "1.5"),
                ("MPI_LOCALRANKID", "y"),
                ("MPI_LOCALNRANKS", "z"),
                ("SLURM_LOCALID", "q"),
            ] {
                for args in [
                    &["run", "--backend", "cpu", "--size", "4KiB"][..],
                    &[
                        "launch",
                        "-n",
                        "2",
                        "--",
                        "run",
                        "--backend",
                        "cpu",
                        "--size",
                        "4KiB",
                    ][..],
                ] {
                    let ran = rr_env(&[(var, value)], args);
                    bad(&ran, args, &format!("{var}=\"{value}\""))?;
                }
            }
            // Told to ignore them, a command does.
            let args = ["run", "--backend", "cpu", "--size", "4KiB"];
            let ran = rr_env(
                &[
                    ("RINGREDUCE_MULTIPROC", "0"),
                    ("RINGREDUCE_LOCAL_RANK", "abc"),
                ],
                &args,
            );
            ensure!(
                ran.code == Some(0),
                "RINGREDUCE_MULTIPROC=0: {}",
                ran.show()
            );
            pass()
        },
    );
    h.add(
        "cli_issue41::a_fault_for_a_rank_that_does_not_exist_is_refused",
        || {
            // Item 11: "`RINGREDUCE_FAULT=kill:rank=5` in a 2-rank job injects
            // nothing and says nothing."
            let args = [
                "launch",
                "-n",
                "2",
                "--timeout",
                "30",
                "--",
                "run",
                "--backend",
                "cpu",
                "--size",
                "4KiB",
            ];
            let ran = rr_env(&[("RINGREDUCE_FAULT", "kill:rank=5")], &args);
            bad(&ran, &args, "RINGREDUCE_FAULT")?;
            bad(&ran, &args, "rank 5")?;
            pass()
        },
    );
    h.add(
        "cli_issue41::a_build_without_mpi_refuses_the_variables_that_ask_for_it",
        || {
            // Issue 45, item 3: "A binary built without `mpi`, run under
            // mpirun with RINGREDUCE_RANKS_PER_NODE set, silently ignores
            // it ... times out waiting at joining the job with no hint."
            if cfg!(feature = "mpi") {
                return skip("this build has the mpi feature");
            }
            for (var, value) in [("RINGREDUCE_RANKS_PER_NODE", "2"), ("RINGREDUCE_MPI", "1")] {
                let args = ["run", "--backend", "cpu", "--size", "4KiB"];
                let t0 = std::time::Instant::now();
                let ran = rr_env(&[(var, value)], &args);
                bad(&ran, &args, var)?;
                bad(&ran, &args, "--features mpi")?;
                ensure!(
                    t0.elapsed() < std::time::Duration::from_secs(10),
                    "refused at once: {}",
                    ran.show()
                );
            }
            // RINGREDUCE_MPI=0 asks for nothing: accepted.
            let args = ["run", "--backend", "cpu", "--size", "4KiB"];
            let ran = rr_env(&[("RINGREDUCE_MPI", "0")], &args);
            ensure!(ran.code == Some(0), "{}", ran.show());
            pass()
        },
    );
    h.add("cli_issue41::messages_say_what_was_typed", || {
        // Item 12, one case each.
        // "`overlap --contenders ''` says "--algo needs contenders"."
        let args = ["overlap", "--backend", "cpu", "--contenders", ""];
        let ran = rr(&args);
        bad(&ran, &args, "--contenders")?;
        ensure!(!ran.err.contains("--algo"), "{}", ran.show());
        // "`-J /proc/self/mem` says the directory `/proc/self` does not
        // exist."
        let args = [
            "bench",
            "--backend",
            "cpu",
            "-b",
            "8",
            "-e",
            "8",
            "--no-ceiling",
            "-J",
            "/proc/self/mem",
        ];
        bad(&rr(&args), &args, "takes no new files")?;
        // "`bench -b 3 -e 5 -d double` echoes "-e 3B"."
        let args = [
            "bench",
            "--backend",
            "cpu",
            "-b",
            "3",
            "-e",
            "5",
            "-d",
            "double",
            "--no-ceiling",
        ];
        bad(&rr(&args), &args, "-b 3B -e 5B")?;
        // Negative values get the flag's own check, not clap's
        // "unexpected argument '-1'".
        for (args, says) in [
            (&["soak", "--rank-counts", "-1"][..], "--rank-counts"),
            (&["soak", "--seconds", "-1"][..], "--seconds"),
            (&["bench", "-w", "-1"][..], "--warmup"),
            (&["theory", "--alpha-us", "-1"][..], "--alpha-us"),
            (
                &["launch", "--grace", "-1", "-n", "2", "--", "true"][..],
                "--grace",
            ),
        ] {
            let ran = rr(args);
            bad(&ran, args, says)?;
            ensure!(
                !ran.err.contains("unexpected argument"),
                "{args:?}: {}",
                ran.show()
            );
        }
        let args = ["theory", "--alpha-us", "-1"];
        let ran = rr(&args);
        ensure!(
            !ran.err.contains("--link-gbps"),
            "only the wrong flag is named: {}",
            ran.show()
        );
        // "`run --timeout 1e-9` says "4 ranks failed" and then blames rank
        // 3 three times."
        // A wait checks its deadline once it naps (after its spins and
        // yields): a call whose waits all end sooner never times out, even
        // at 1 ns (it happened on CI at 4 MiB). Buffers of 32 MiB make the
        // waits long enough; three tries, and one of them must time out.
        let args = [
            "run",
            "--backend",
            "cpu",
            "--size",
            "32MiB",
            "--timeout",
            "1e-9",
        ];
        let mut ran = rr(&args);
        for _ in 0..2 {
            if ran.code == Some(2) {
                break;
            }
            ran = rr(&args);
        }
        ensure!(ran.code == Some(2), "{}", ran.show());
        let errors: Vec<&str> = ran
            .err
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        ensure!(
            errors.len() == 1 && !errors[0].contains("ranks failed"),
            "one error, the cause: {}",
            ran.show()
        );
        // "`RINGREDUCE_SIZE=0` says "the rank must be below the size"."
        let args = ["run", "--backend", "cpu"];
        let ran = rr_env(
            &[
                ("RINGREDUCE_RANK", "0"),
                ("RINGREDUCE_SIZE", "0"),
                ("RINGREDUCE_STORE", "/tmp/rr-issue41-none"),
            ],
            &args,
        );
        bad(&ran, &args, "at least 1 rank")?;
        // "`bench` with stdout closed (`>&-`) exits 0 having printed
        // nothing."
        let sh = format!(
            "exec {} bench --backend cpu -n 1 -b 8 -e 8 --no-ceiling >&-",
            crate::cli::bin().display()
        );
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(&sh).stdout(Stdio::null());
        let ran = run_cmd(c, Duration::from_secs(60));
        ensure!(
            ran.code == Some(2) && ran.err.contains("standard output was closed"),
            "bench >&-: {}",
            ran.show()
        );
        // `>/dev/null` is a place to write to: the run goes on.
        let sh = format!(
            "exec {} bench --backend cpu -n 1 -b 8 -e 8 --no-ceiling >/dev/null",
            crate::cli::bin().display()
        );
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(&sh);
        let ran = run_cmd(c, Duration::from_secs(60));
        ensure!(ran.code == Some(0), "bench >/dev/null: {}", ran.show());
        // "`env` lists RINGREDUCE_ALGO's accepted values without hier:G (a
        // hand-written list that drifted from algo::parse)."
        let ran = rr(&["env"]);
        let algo = ran
            .out
            .split("RINGREDUCE_ALGO")
            .nth(1)
            .and_then(|s| s.lines().find(|l| l.trim_start().starts_with("accepted:")))
            .unwrap_or_default();
        for name in ringreduce::algo::names() {
            ensure!(
                algo.contains(name),
                "env's RINGREDUCE_ALGO lacks {name}: {algo}"
            );
        }
        // "Under mpirun, `bench`'s header says the ranks are "each a thread
        // of this process"." (one process per rank under launch, as under
        // mpirun)
        let args = [
            "launch",
            "-n",
            "2",
            "--",
            "bench",
            "--backend",
            "cpu",
            "-b",
            "8",
            "-e",
            "8",
            "--no-ceiling",
        ];
        let ran = rr(&args);
        ensure!(
            ran.code == Some(0)
                && !ran.out.contains("each a thread of this process")
                && ran.out.contains("processes"),
            "{}",
            ran.show()
        );
        pass()
    });
}
