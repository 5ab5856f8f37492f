//! The environment (`src/param.rs`): a malformed or out-of-range
//! `RINGREDUCE_*` variable is an error naming the variable, its value and
//! what is accepted, in every command and in `Engine::new`, never a panic
//! and never ignored; an empty value counts as unset; `ringreduce env`
//! lists every variable; a path forced by `RINGREDUCE_ALGO` says so.
//!
//! Each case runs a process with the variable set (the library reads a
//! setting once per process, and the test runner's own environment stays
//! as it is).

use crate::cli::{bad, command, rr, run_cmd, Ran};
use crate::common::{cuda_skip_reason, pass, skip};
use crate::ensure;
use crate::harness::Harness;
use ringreduce::{Engine, EngineConfig, Error};
use std::time::Duration;

/// `ringreduce ARGS` with the variables `vars` set (on top of the test's
/// environment).
pub(crate) fn rr_env(vars: &[(&str, &str)], args: &[&str]) -> Ran {
    let mut c = command(args);
    for (k, v) in vars {
        c.env(k, v);
    }
    run_cmd(c, Duration::from_secs(180))
}

/// `ringreduce ARGS` with only the variables `vars` (a clean environment).
fn rr_only(vars: &[(&str, &str)], args: &[&str]) -> Ran {
    let mut c = command(args);
    c.env_clear();
    for (k, v) in vars {
        c.env(k, v);
    }
    run_cmd(c, Duration::from_secs(180))
}

/// A refused variable: exit 2 (not 1, not a signal), no panic, and stderr
/// names the variable and the value and says what is accepted.
fn refused(ran: &Ran, what: &str, var: &str, value: &str) -> Result<(), String> {
    bad(ran, &[what], var)?;
    ensure!(
        ran.code == Some(2),
        "{what}: {var}={value:?} must exit 2: {}",
        ran.show()
    );
    ensure!(
        ran.err.contains(&format!("{var}={value:?}")) && ran.err.contains("accepted: "),
        "{what}: the message must name {var}, the value {value:?} and what is accepted: {}",
        ran.show()
    );
    Ok(())
}

/// The commands that read RINGREDUCE_TIMEOUT, each as small as it runs.
const COMMANDS: [&[&str]; 6] = [
    &["run", "--backend", "cpu", "--count", "8"],
    &[
        "soak",
        "--backend",
        "cpu",
        "--calls",
        "2",
        "--max-size",
        "1KiB",
    ],
    &[
        "bench",
        "--backend",
        "cpu",
        "-b",
        "8",
        "-e",
        "8",
        "-n",
        "1",
        "-w",
        "0",
        "--no-ceiling",
    ],
    &["trace"],
    &["trace", "--backend", "cpu", "--count", "8", "--calls", "1"],
    &[
        "launch",
        "-n",
        "2",
        "--",
        "run",
        "--backend",
        "cpu",
        "--count",
        "8",
    ],
];

/// The child of `cli_env::engine_new_refuses_a_bad_environment_timeout`,
/// in a process of its own with RINGREDUCE_TIMEOUT set: the library itself,
/// no command line.
fn engine_child(value: &str) -> Result<(), String> {
    let is_ours = |e: &Error| matches!(e, Error::Env { var, value: v, .. } if *var == "RINGREDUCE_TIMEOUT" && v == value);
    // Building the configuration must not panic (it did for 1e308).
    let cfg = EngineConfig::cpu(2);
    ensure!(
        cfg.timeout == Duration::from_secs(60),
        "EngineConfig::cpu falls back to 60 s, got {:?}",
        cfg.timeout
    );
    match Engine::new(cfg) {
        Err(e) if is_ours(&e) => {
            let m = e.to_string();
            ensure!(
                m.contains("RINGREDUCE_TIMEOUT") && m.contains(value) && m.contains("at most"),
                "{m}"
            );
        }
        Err(e) => {
            return Err(format!(
                "Engine::new: expected the RINGREDUCE_TIMEOUT error, got {e}"
            ))
        }
        Ok(_) => return Err(format!("Engine::new accepted RINGREDUCE_TIMEOUT={value:?}")),
    }
    // An explicit timeout does not hide a malformed environment.
    let mut cfg = EngineConfig::cpu(2);
    cfg.timeout = Duration::from_secs(5);
    match Engine::new(cfg) {
        Err(e) if is_ours(&e) => {}
        other => {
            return Err(format!(
                "Engine::new with EngineConfig::timeout set: {:?}",
                other.err()
            ))
        }
    }
    // Nor does the per-process communicator.
    let dir = std::env::temp_dir().join(format!("rr-env-comm-{}", std::process::id()));
    let spec = ringreduce::JobSpec::new(0, 1, &dir);
    let cfg = EngineConfig::job(spec, ringreduce::BackendChoice::Cpu);
    match ringreduce::Communicator::join(cfg) {
        Err(e) if is_ours(&e) => {}
        other => return Err(format!("Communicator::join: {:?}", other.err())),
    }
    ensure!(
        !dir.exists(),
        "Communicator::join made its store before it failed"
    );
    ensure!(
        EngineConfig::cpu(2).timeout == Duration::from_secs(60),
        "default_timeout"
    );
    Ok(())
}

/// Marks the re-run of this binary as the child of the library test.
const CHILD: &str = "RR_CLI_ENV_CHILD";

pub fn register(h: &mut Harness) {
    h.add(
        "cli_env::bad_timeout_variable_is_refused_by_every_command",
        || {
            // Issue 25: 1e308 (anything from about 2e19) panicked with "cannot
            // convert float seconds to Duration" in run, soak, bench, trace and
            // launch; 0, abc, -1 and inf were silently ignored.
            for value in ["1e308", "2e19", "abc", "0", "-1", "inf", "NaN", "10000001"] {
                for args in COMMANDS {
                    let ran = rr_env(&[("RINGREDUCE_TIMEOUT", value)], args);
                    refused(
                        &ran,
                        &format!("RINGREDUCE_TIMEOUT={value} {}", args.join(" ")),
                        "RINGREDUCE_TIMEOUT",
                        value,
                    )?;
                }
            }
            pass()
        },
    );
    h.add("cli_env::empty_variables_count_as_unset", || {
        // As NCCL reads its variables: `RINGREDUCE_TIMEOUT=` is 60 s.
        for v in ["", "  "] {
            let ran = rr_env(
                &[
                    ("RINGREDUCE_TIMEOUT", v),
                    ("RINGREDUCE_HOST_MEMORY", v),
                    ("RINGREDUCE_ALGO", v),
                ],
                &["run", "--backend", "cpu", "--count", "8"],
            );
            ensure!(
                ran.code == Some(0)
                    && ran.out.contains("check     : PASS")
                    && ran.out.contains("algorithm : ring (the default"),
                "empty variables {v:?}: {}",
                ran.show()
            );
        }
        pass()
    });
    h.add("cli_env::timeout_argument_states_its_range", || {
        // `--timeout` said "must be a positive number of seconds (got
        // 10000000)" without the limit; it takes what RINGREDUCE_TIMEOUT
        // takes.
        for (args, got) in [
            (
                &["run", "--backend", "cpu", "--timeout", "20000000"][..],
                "got 20000000",
            ),
            (&["run", "--backend", "cpu", "--timeout", "0"][..], "got 0"),
            (
                &["launch", "-n", "2", "--timeout", "inf", "--", "run"][..],
                "got inf",
            ),
            (&["trace", "--backend", "cpu", "--timeout=-1"][..], "got -1"),
        ] {
            let ran = rr(args);
            bad(
                &ran,
                args,
                "--timeout must be a number of seconds greater than 0 and at most 10000000",
            )?;
            bad(&ran, args, got)?;
        }
        // The limit itself is accepted.
        let ran = rr(&[
            "run",
            "--backend",
            "cpu",
            "--count",
            "8",
            "--timeout",
            "1e7",
        ]);
        ensure!(ran.code == Some(0), "--timeout 1e7: {}", ran.show());
        pass()
    });
    h.add("cli_env::huge_second_arguments_are_refused", || {
        // The same panic as RINGREDUCE_TIMEOUT=1e308 ("cannot convert float
        // seconds to Duration"), from arguments: soak --seconds, launch
        // --grace.
        for args in [
            &["soak", "--backend", "cpu", "--seconds", "1e308"][..],
            &["soak", "--backend", "cpu", "--seconds", "inf"][..],
            &["launch", "-n", "1", "--grace", "1e308", "--", "run"][..],
        ] {
            bad(&rr(args), args, "must be 0")?;
        }
        pass()
    });
    h.add("cli_env::bad_host_memory_variable_is_refused", || {
        for value in ["abc", "-1", "0", "1e308", "4XB"] {
            for args in [
                &["run", "--backend", "cpu", "--count", "8"][..],
                &["bench", "--backend", "cpu", "-e", "8", "--no-ceiling"][..],
                &["launch", "-n", "2", "--", "run", "--backend", "cpu"][..],
            ] {
                let ran = rr_env(&[("RINGREDUCE_HOST_MEMORY", value)], args);
                refused(
                    &ran,
                    &format!("RINGREDUCE_HOST_MEMORY={value} {}", args.join(" ")),
                    "RINGREDUCE_HOST_MEMORY",
                    value,
                )?;
            }
        }
        // A good value is used: too little memory stops the run.
        let ran = rr_env(
            &[("RINGREDUCE_HOST_MEMORY", "1KiB")],
            &["run", "--backend", "cpu", "--size", "1MiB"],
        );
        bad(&ran, &["run with 1KiB of host memory"], "host memory")?;
        pass()
    });
    h.add("cli_env::bad_algo_and_job_variables_are_refused", || {
        for (var, value) in [
            ("RINGREDUCE_ALGO", "garbage"),
            ("RINGREDUCE_ALGO", "ring:graph"),
            ("RINGREDUCE_PTX_JIT", "yes"),
            ("CUDA_DEVICE_MAX_CONNECTIONS", "0"),
            ("RINGREDUCE_DEVICES", "0,,1"),
            ("RINGREDUCE_MULTIPROC", "no"),
            ("RINGREDUCE_RANK", "abc"),
            ("RINGREDUCE_SIZE", "-1"),
            ("OMPI_COMM_WORLD_RANK", "1e308"),
        ] {
            let ran = rr_env(
                &[(var, value)],
                &["run", "--backend", "cpu", "--count", "8"],
            );
            refused(&ran, &format!("{var}={value} run"), var, value)?;
        }
        pass()
    });
    h.add("cli_env::bad_fault_variable_is_refused", || {
        // RINGREDUCE_FAULT=garbage was silently ignored.
        for value in [
            "garbage",
            "kill",
            "kill:rank=x",
            "kill:rank=1:call=0",
            "nostart:rank=1:op=2",
        ] {
            for args in [
                &["run", "--backend", "cpu", "--count", "8"][..],
                &[
                    "launch",
                    "-n",
                    "2",
                    "--",
                    "run",
                    "--backend",
                    "cpu",
                    "--count",
                    "8",
                ][..],
            ] {
                let ran = rr_env(&[("RINGREDUCE_FAULT", value)], args);
                refused(
                    &ran,
                    &format!("RINGREDUCE_FAULT={value} {}", args.join(" ")),
                    "RINGREDUCE_FAULT",
                    value,
                )?;
            }
        }
        pass()
    });
    h.add(
        "cli_env::engine_new_refuses_a_bad_environment_timeout",
        || {
            // The library: EngineConfig::cpu panicked for RINGREDUCE_TIMEOUT=1e308
            // (Duration::from_secs_f64); Engine::new must return an error naming
            // the variable. The check runs in a copy of this test binary started
            // with the variable set (a setting is read once per process).
            if let Some(value) = std::env::var_os(CHILD) {
                engine_child(&value.to_string_lossy())?;
                return pass();
            }
            let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
            for value in ["1e308", "abc", "inf", "-1", "0"] {
                let mut c = std::process::Command::new(&me);
                c.arg("cli_env::engine_new_refuses_a_bad_environment_timeout")
                    .env(CHILD, value)
                    .env("RINGREDUCE_TIMEOUT", value);
                let ran = run_cmd(c, Duration::from_secs(60));
                ensure!(
                    ran.code == Some(0)
                        && ran.out.contains("1 passed, 0 failed")
                        && !ran.panicked(),
                    "the library under RINGREDUCE_TIMEOUT={value}: {}",
                    ran.show()
                );
            }
            pass()
        },
    );
    h.add(
        "cli_env::engine_new_refuses_an_out_of_range_timeout",
        || {
            // EngineConfig::timeout is checked like the variable: Duration::MAX
            // overflowed the CUDA backend's deadlines (a panic), zero failed every wait.
            for t in [
                Duration::MAX,
                Duration::from_secs(20_000_000),
                Duration::ZERO,
            ] {
                let mut cfg = EngineConfig::cpu(2);
                cfg.timeout = t;
                match Engine::new(cfg) {
                    Err(Error::BadArgument(m)) => ensure!(
                        m.contains("EngineConfig::timeout must be")
                            && m.contains("at most 10000000"),
                        "{m}"
                    ),
                    other => return Err(format!("timeout {t:?}: {:?}", other.err())),
                }
            }
            let mut cfg = EngineConfig::cpu(2);
            cfg.timeout = Duration::from_secs(10_000_000);
            Engine::new(cfg).map_err(|e| format!("the limit itself: {e}"))?;
            pass()
        },
    );
    h.add("cli_env::env_lists_every_variable", || {
        let ran = rr_only(
            &[
                ("RINGREDUCE_TIMEOUT", "5"),
                ("RINGREDUCE_ALGO", ""),
                ("RINGREDUCE_TIMOUT", "7"),
                ("NCCL_DEBUG", "WARN"),
            ],
            &["env"],
        );
        ensure!(ran.code == Some(0), "env: {}", ran.show());
        let o = &ran.out;
        for name in [
            "RINGREDUCE_TIMEOUT",
            "RINGREDUCE_ALGO",
            "RINGREDUCE_PTX_JIT",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "RINGREDUCE_DEVICES",
            "RINGREDUCE_HOST_MEMORY",
            "RINGREDUCE_FAULT",
            "RINGREDUCE_MULTIPROC",
            "RINGREDUCE_RANK",
            "RINGREDUCE_SIZE",
            "RINGREDUCE_LOCAL_RANK",
            "RINGREDUCE_LOCAL_SIZE",
            "RINGREDUCE_STORE",
            "RINGREDUCE_RUN_ID",
            "OMPI_COMM_WORLD_RANK",
            "PMI_RANK",
            "SLURM_LOCALID",
            "PMIX_NAMESPACE",
            "NCCL_HOME",
            "RINGREDUCE_BIN",
        ] {
            ensure!(
                o.lines().any(|l| l.starts_with(name)),
                "env does not list {name}: {}",
                ran.show()
            );
        }
        for want in [
            "RINGREDUCE_TIMEOUT=5  (environment)",
            "accepted: a number of seconds greater than 0 and at most 10000000",
            "RINGREDUCE_ALGO=  (empty: counts as unset, auto)",
            "RINGREDUCE_PTX_JIT  (unset: 0)",
            "RINGREDUCE_TIMOUT=7  (no such variable: a typo?)",
            "NCCL_DEBUG=WARN",
        ] {
            ensure!(o.contains(want), "env: expected {want:?}: {}", ran.show());
        }
        pass()
    });
    h.add("cli_env::env_exits_2_naming_each_bad_variable", || {
        let ran = rr_only(
            &[
                ("RINGREDUCE_TIMEOUT", "1e308"),
                ("RINGREDUCE_HOST_MEMORY", "-1"),
                ("RINGREDUCE_RANK", "x"),
            ],
            &["env"],
        );
        ensure!(
            ran.code == Some(2) && !ran.panicked(),
            "env with bad variables must exit 2: {}",
            ran.show()
        );
        for (var, value) in [
            ("RINGREDUCE_TIMEOUT", "1e308"),
            ("RINGREDUCE_HOST_MEMORY", "-1"),
            ("RINGREDUCE_RANK", "x"),
        ] {
            ensure!(
                ran.err
                    .matches(&format!("error: environment variable {var}={value:?}"))
                    .count()
                    == 1,
                "stderr must name {var} once: {}",
                ran.show()
            );
            ensure!(
                ran.out
                    .contains(&format!("{var}={value}  (environment: INVALID, ")),
                "the listing must mark {var}: {}",
                ran.show()
            );
        }
        pass()
    });
    h.add(
        "cli_env::forced_algo_is_named_in_the_algorithm_line",
        || {
            // Issue 25 item 4: RINGREDUCE_ALGO=ps still printed "(auto; choose
            // with --algo)".
            let forced = "forced by RINGREDUCE_ALGO=ps";
            let env = [("RINGREDUCE_ALGO", "ps")];
            let ran = rr_env(
                &env,
                &["run", "--backend", "cpu", "--ranks", "3", "--count", "64"],
            );
            ensure!(
                ran.code == Some(0)
                    && ran.out.contains(&format!(
                        "algorithm : ps (auto, {forced}; --algo overrides it)"
                    )),
                "run: {}",
                ran.show()
            );
            // --algo with a path overrides it, and says nothing of it.
            let ran = rr_env(
                &env,
                &[
                    "run",
                    "--backend",
                    "cpu",
                    "--ranks",
                    "3",
                    "--count",
                    "64",
                    "--algo",
                    "ring",
                ],
            );
            ensure!(
                ran.code == Some(0)
                    && ran.out.contains("algorithm : ring\n")
                    && !ran.out.contains("RINGREDUCE_ALGO"),
                "run --algo ring: {}",
                ran.show()
            );
            let ran = rr_env(&env, &["trace", "--algo", "auto"]);
            ensure!(
                ran.code == Some(0) && ran.out.contains(&format!("(auto: ps {forced}")),
                "trace: {}",
                ran.show()
            );
            let ran = rr_env(
                &env,
                &[
                    "trace",
                    "--algo",
                    "auto",
                    "--backend",
                    "cpu",
                    "--count",
                    "64",
                    "--calls",
                    "1",
                ],
            );
            ensure!(
                ran.code == Some(0) && ran.out.contains(&format!("# algorithm: auto, {forced}")),
                "trace --backend cpu: {}",
                ran.show()
            );
            let ran = rr_env(
                &env,
                &[
                    "bench",
                    "--backend",
                    "cpu",
                    "-b",
                    "64",
                    "-e",
                    "64",
                    "-n",
                    "1",
                    "-w",
                    "0",
                    "--no-ceiling",
                ],
            );
            ensure!(
                ran.code == Some(0)
                    && ran
                        .out
                        .contains(&format!("# Note: algorithm: auto, {forced}"))
                    && ran.out.contains("# algo: auto [ps]"),
                "bench: {}",
                ran.show()
            );
            pass()
        },
    );
    h.add("cli_env::bench_auto_without_a_gpu_estimates_as_cpu", || {
        // Issue 25 item 6: without a GPU, `bench --backend auto` estimated
        // 2.25 GiB for 2 ranks x 256 MiB and `--backend cpu` 3.75 GiB (the
        // CPU backend's copies), though both run the same CPU backend.
        if cuda_skip_reason(1).is_none() {
            return skip("a GPU is present: auto runs CUDA here");
        }
        let mut said = Vec::new();
        for b in ["auto", "cpu"] {
            let args = [
                "bench",
                "--backend",
                b,
                "--ranks",
                "2",
                "-b",
                "256MiB",
                "-e",
                "256MiB",
                "--no-ceiling",
            ];
            let ran = rr_env(&[("RINGREDUCE_HOST_MEMORY", "1GiB")], &args);
            bad(&ran, &args, "needs 3.75GiB of host memory")?;
            said.push(ran.err);
        }
        ensure!(said[0] == said[1], "auto and cpu differ: {said:?}");
        pass()
    });
}
