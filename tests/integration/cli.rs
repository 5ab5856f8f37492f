//! The command line: the README's commands, bad inputs, theory, CPU bench.

use crate::common::pass;
use crate::ensure;
use crate::harness::{Harness, Outcome};
use std::process::Command;

fn rr(args: &[&str]) -> (i32, String, String) {
    // RINGREDUCE_BIN lets the staged test binary find the staged CLI on the GPU machine.
    let bin = std::env::var("RINGREDUCE_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_ringreduce").to_string());
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("run ringreduce");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn register(h: &mut Harness) {
    h.add("cli::run_passes_on_cpu", || {
        for args in [
            vec![],
            vec!["--ranks", "5", "--count", "1003"],
            vec!["--ranks", "1"],
            vec!["--count", "0"],
            vec!["--ranks", "8", "--count", "3", "--in-place"],
            vec![
                "--ranks", "3", "--size", "1MiB", "--inputs", "exact", "--algo", "ps",
            ],
        ] {
            let mut a = vec!["run", "--backend", "cpu"];
            a.extend(args.iter().copied());
            let (code, out, err) = rr(&a);
            ensure!(
                code == 0 && out.contains("PASS"),
                "{a:?}: exit {code}\n{out}\n{err}"
            );
            ensure!(
                out.contains("backend   : cpu"),
                "must print the backend used: {out}"
            );
        }
        pass()
    });
    h.add("cli::bad_inputs_exit_nonzero_with_message", || {
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
                vec!["run", "--backend", "cpu", "--count", "99999999999999999999"],
                "invalid size",
            ),
            (
                vec!["run", "--backend", "cpu", "--count", "4611686018427387904"],
                "does not fit",
            ),
            (
                vec!["run", "--backend", "cpu", "--algo", "tree"],
                "unknown algorithm",
            ),
            (vec!["theory", "--ranks", "0"], "positive"),
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
        ];
        for (a, msg) in cases {
            let (code, out, err) = rr(&a);
            ensure!(code != 0, "{a:?} must fail: {out}");
            ensure!(!err.contains("panicked"), "{a:?} panicked: {err}");
            ensure!(
                err.contains(msg),
                "{a:?}: expected {msg:?} in stderr: {err}"
            );
        }
        pass()
    });
    h.add("cli::cuda_backend_without_driver", || {
        if crate::common::cuda_skip_reason(1).is_none() {
            return Ok(Outcome::Skip(
                "a CUDA driver is present on this machine".into(),
            ));
        }
        let (code, _, err) = rr(&["run", "--backend", "cuda"]);
        ensure!(
            code == 2 && err.contains("CUDA backend is unavailable"),
            "exit {code}: {err}"
        );
        let (code, out, _) = rr(&["run", "--backend", "auto", "--count", "100"]);
        ensure!(
            code == 0 && out.contains("using cpu"),
            "auto must fall back and say so: {out}"
        );
        pass()
    });
    h.add("cli::nccl_missing_is_a_clear_error", || {
        let (code, _, err) = rr(&[
            "check",
            "--backend",
            "cpu",
            "--ranks",
            "2",
            "--nccl-lib",
            "/nonexistent/libnccl.so.2",
        ]);
        ensure!(
            code == 2 && err.contains("/nonexistent/libnccl.so.2"),
            "exit {code}: {err}"
        );
        pass()
    });
    h.add("cli::theory_reproduces_the_seed", || {
        let (code, out, err) = rr(&["theory", "--size", "100MB", "--ranks", "4,16,64"]);
        ensure!(code == 0, "{err}");
        for n in [
            "300.0", "150.0", "1500.0", "187.5", "6300.0", "196.9", "200.0",
        ] {
            ensure!(out.contains(n), "missing {n} in\n{out}");
        }
        pass()
    });
    h.add("cli::trace_default", || {
        let (code, out, err) = rr(&["trace"]);
        ensure!(code == 0 && out.contains("PASS"), "{out}{err}");
        ensure!(
            out.contains("reduce-scatter step 1 of 3") && out.contains("all-gather step 3 of 3"),
            "{out}"
        );
        pass()
    });
    h.add("cli::docs_show_the_real_trace", || {
        // docs/ALGORITHM.md pastes `ringreduce trace` output; it must still be
        // what the engine prints.
        let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ALGORITHM.md");
        let Ok(text) = std::fs::read_to_string(&doc) else {
            return Ok(Outcome::Skip(format!(
                "{} not found (staged test binary?)",
                doc.display()
            )));
        };
        for args in [
            vec!["trace"],
            vec!["trace", "--algo", "ps", "--ranks", "4", "--count", "8"],
            vec![
                "trace",
                "--algo",
                "oneshot:flag",
                "--ranks",
                "2",
                "--count",
                "6",
            ],
        ] {
            let (code, out, err) = rr(&args);
            ensure!(code == 0, "{err}");
            ensure!(
                text.contains(out.trim_end()),
                "docs/ALGORITHM.md no longer shows the output of {args:?}; paste it again"
            );
        }
        pass()
    });
    h.add("cli::bench_cpu_writes_json_csv_svg", || {
        let dir = std::env::temp_dir().join(format!("rr-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let (j, c, s) = (dir.join("b.json"), dir.join("b.csv"), dir.join("b.svg"));
        let (code, out, err) = rr(&[
            "bench",
            "--backend",
            "cpu",
            "--ranks",
            "4",
            "--algo",
            "ring,ps,ring:pipe2",
            "-b",
            "8",
            "-e",
            "256KiB",
            "-f",
            "4",
            "-n",
            "3",
            "-w",
            "1",
            "--cold-size",
            "64KiB",
            "-J",
            j.to_str().unwrap_or(""),
            "--csv",
            c.to_str().unwrap_or(""),
            "--plot",
            s.to_str().unwrap_or(""),
        ]);
        ensure!(code == 0, "exit {code}: {out}{err}");
        ensure!(
            out.contains("CPU timings") && out.contains("busbw"),
            "{out}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&j).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        let rows = json["rows"].as_array().map_or(0, Vec::len);
        ensure!(
            rows == 3 * 8,
            "expected 24 rows (8 sizes x 3 algos), got {rows}"
        );
        ensure!(json["header"]["ranks"] == 4, "header: {}", json["header"]);
        ensure!(
            json["rows"][0]["type"] == "float" && json["rows"][0]["redop"] == "sum",
            "row fields: {}",
            json["rows"][0]
        );
        ensure!(
            json["rows"].as_array().is_some_and(|r| r
                .iter()
                .all(|x| x["out_of_place"]["wrong"] == 0 && x["in_place"]["wrong"] == 0)),
            "wrong results in bench"
        );
        let csv = std::fs::read_to_string(&c).map_err(|e| e.to_string())?;
        ensure!(csv.lines().count() == 25, "csv lines");
        let svg = std::fs::read_to_string(&s).map_err(|e| e.to_string())?;
        ensure!(
            svg.contains("<svg") && svg.contains("ring") && svg.contains("ps"),
            "svg"
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });
}
