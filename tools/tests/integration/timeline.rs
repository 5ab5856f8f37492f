//! Timelines of real runs (issue 12): `trace --timeline/--svg` on the CPU
//! (host timestamps, labelled as such), its bad inputs, `topo`, `compare`,
//! `bench --breakdown` and `theory --from-bench`, run as separate processes;
//! and the GPU timeline through the library (SKIPPED without 2 GPUs).

use crate::common::{cuda_only, cuda_skip_reason, pass};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::plan::Collective;
use ringreduce::{AlgoChoice, BackendChoice, Engine, EngineConfig, ReduceOp};
use ringreduce_tools::timeline::{self, RecordOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    std::env::var_os("RINGREDUCE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ringreduce")))
}

/// `ringreduce ARGS`: (exit code, stdout, stderr, wall time).
fn rr(args: &[&str]) -> Result<(Option<i32>, String, String, Duration), String> {
    let t0 = Instant::now();
    let o = Command::new(bin())
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", bin().display()))?;
    Ok((
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        t0.elapsed(),
    ))
}

fn scratch(tag: &str) -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!("rr-tl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    Ok(d)
}

/// Elements are properly nested and closed: a small XML tag checker (no
/// DTD, no CDATA; comments and declarations skipped).
pub fn well_formed_xml(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    let mut root_seen = false;
    while let Some(i) = rest.find('<') {
        let after = &rest[i + 1..];
        if let Some(c) = after.strip_prefix("!--") {
            let end = c.find("-->").ok_or("unclosed comment")?;
            rest = &c[end + 3..];
            continue;
        }
        if after.starts_with('?') || after.starts_with('!') {
            let end = after.find('>').ok_or("unclosed declaration")?;
            rest = &after[end + 1..];
            continue;
        }
        let end = after.find('>').ok_or("unclosed tag")?;
        let tag = &after[..end];
        if tag.contains('<') {
            return Err(format!("'<' inside a tag: <{tag}>"));
        }
        if let Some(name) = tag.strip_prefix('/') {
            let name = name.trim();
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else {
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            if name.is_empty() {
                return Err(format!("empty tag name: <{tag}>"));
            }
            if stack.is_empty() && root_seen {
                return Err(format!("a second root element <{name}>"));
            }
            root_seen = true;
            // Quotes balanced inside the tag.
            if tag.matches('"').count() % 2 != 0 {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &after[end + 1..];
    }
    // Text outside tags must not hold a bare '&' that is no entity.
    for (i, _) in text.match_indices('&') {
        let t = &text[i..];
        let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#"]
            .iter()
            .any(|e| t.starts_with(e));
        if !ok {
            return Err(format!("bare '&' at byte {i}: {:?}", &t[..t.len().min(20)]));
        }
    }
    ensure!(stack.is_empty(), "unclosed elements: {stack:?}");
    ensure!(root_seen, "no root element");
    Ok(())
}

/// The trace-event JSON of a run: the structure issue 12 asks for.
fn check_chrome(doc: &Value, ranks: usize, what: &str) -> Result<(), String> {
    let events = doc["traceEvents"]
        .as_array()
        .ok_or(format!("{what}: no traceEvents"))?;
    let xs: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    ensure!(!xs.is_empty(), "{what}: no slices");
    let ring = what.starts_with("ring");
    for x in &xs {
        let a = &x["args"];
        for k in ["path", "op", "rank", "call", "lane", "op kind", "bytes"] {
            ensure!(!a[k].is_null(), "{what}: slice without args.{k}: {x}");
        }
        let work = a["op kind"] == "copy" || a["op kind"] == "reduce";
        // The ring's copies and reduces are labelled with their place in
        // the schedule; every other path's with a phase or a note.
        if work && (ring || !a["phase"].is_null()) {
            for k in ["phase", "step", "chunk", "slice"] {
                ensure!(
                    !a[k].is_null(),
                    "{what}: a {} slice without args.{k}: {x}",
                    a["op kind"]
                );
            }
        } else if work {
            ensure!(
                !a["note"].is_null(),
                "{what}: a {} slice without phase or note: {x}",
                a["op kind"]
            );
        }
        if work
            && a["bytes"].as_u64().is_some_and(|b| b > 0)
            && x["dur"].as_f64().is_some_and(|d| d > 0.0)
        {
            ensure!(!a["GB/s"].is_null(), "{what}: no GB/s: {x}");
        }
    }
    for r in 0..ranks {
        ensure!(
            xs.iter().any(|x| x["pid"] == r),
            "{what}: rank {r} has no slice"
        );
    }
    let s = events.iter().filter(|e| e["ph"] == "s").count();
    let f = events.iter().filter(|e| e["ph"] == "f").count();
    ensure!(s == f, "{what}: {s} flow starts but {f} flow ends");
    let text = doc.to_string();
    ensure!(
        text.contains("host timestamps"),
        "{what}: the CPU timeline must say its times are host timestamps"
    );
    Ok(())
}

fn trace_cpu(dir: &Path, algo: &str, ranks: usize, size: &str) -> TestResult {
    let (j, s) = (
        dir.join(format!("{}-{ranks}.json", algo.replace(':', "-"))),
        dir.join(format!("{}-{ranks}.svg", algo.replace(':', "-"))),
    );
    let n = ranks.to_string();
    let args = [
        "trace",
        "--backend",
        "cpu",
        "--ranks",
        &n,
        "--size",
        size,
        "--algo",
        algo,
        "--calls",
        "2",
        "--warmup",
        "2",
        "--overhead-blocks",
        "2",
        "--overhead-iters",
        "3",
        "--timeline",
        j.to_str().ok_or("path")?,
        "--svg",
        s.to_str().ok_or("path")?,
    ];
    let (code, out, err, _) = rr(&args)?;
    ensure!(code == Some(0), "{args:?}: exit {code:?}\n{out}\n{err}");
    ensure!(
        out.contains("host timestamps")
            && out.contains("# order check: ")
            && !out.contains("out of the plan's order"),
        "{args:?}: the report must name the clock and pass the order check:\n{out}"
    );
    ensure!(
        out.contains("measurement overhead: "),
        "{args:?}: no overhead line:\n{out}"
    );
    let text = std::fs::read_to_string(&j).map_err(|e| format!("{}: {e}", j.display()))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{args:?}: JSON: {e}"))?;
    check_chrome(&doc, ranks, &format!("{algo} on {ranks}"))?;
    let svg = std::fs::read_to_string(&s).map_err(|e| format!("{}: {e}", s.display()))?;
    well_formed_xml(&svg).map_err(|e| format!("{algo} on {ranks}: SVG not well formed: {e}"))?;
    for r in 0..ranks {
        ensure!(
            svg.contains(&format!("rank {r} ")),
            "{algo}: rank {r} missing in the SVG"
        );
    }
    pass()
}

pub fn register(h: &mut Harness) {
    h.add("timeline::trace_timeline_cpu_every_path", || {
        let dir = scratch("paths")?;
        for (algo, n) in [
            ("ring", 2),
            ("ring:pipe2", 2),
            ("oneshot", 2),
            ("ps", 2),
            ("auto", 2),
            ("oneshot:flag", 2),
            ("ring:pipe2", 5),
            ("ps", 4),
            ("ring", 8),
        ] {
            trace_cpu(&dir, algo, n, "64KiB")?;
        }
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("timeline::trace_bad_inputs_fail_before_running", || {
        let dir = scratch("bad")?;
        let ok_svg = dir.join("x.svg");
        let ok = ok_svg.to_str().ok_or("path")?;
        // --timeline is JSON: it must end in .json.
        let ok_json = dir.join("x.json");
        let okj = ok_json.to_str().ok_or("path")?;
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (
                vec![
                    "trace",
                    "--backend",
                    "cpu",
                    "--timeline",
                    "/nonexistent-dir/t.json",
                    "--svg",
                    ok,
                ],
                "does not exist",
            ),
            (
                vec!["trace", "--backend", "cpu", "--svg", "/proc/t.svg"],
                "--svg",
            ),
            (
                vec![
                    "trace",
                    "--backend",
                    "cpu",
                    "--timeline",
                    okj,
                    "--calls",
                    "0",
                ],
                "--calls",
            ),
            (
                vec![
                    "trace",
                    "--backend",
                    "cpu",
                    "--count",
                    "0",
                    "--timeline",
                    okj,
                ],
                "0 elements",
            ),
            (
                vec!["trace", "--backend", "cpu", "--nccl", "--timeline", okj],
                "--nccl needs the cuda backend",
            ),
            (vec!["trace", "--nccl"], "for a real run"),
            (
                vec![
                    "trace",
                    "--backend",
                    "cpu",
                    "--algo",
                    "oneshot:flag",
                    "--ranks",
                    "4",
                    "--timeline",
                    okj,
                ],
                "oneshot:flag",
            ),
        ];
        for (args, msg) in cases {
            let (code, out, err, took) = rr(&args)?;
            ensure!(
                code.is_some_and(|c| c != 0),
                "{args:?} must fail: {out}\n{err}"
            );
            ensure!(
                err.to_lowercase().contains(&msg.to_lowercase()) && !err.contains("panicked"),
                "{args:?}: expected {msg:?} in stderr: {err}"
            );
            ensure!(
                !out.contains("# ringreduce trace:"),
                "{args:?} ran before refusing: {out}"
            );
            ensure!(took < Duration::from_secs(20), "{args:?} took {took:?}");
        }
        ensure!(
            !ok_svg.exists() && !ok_json.exists(),
            "a refused run must not leave its other output file behind"
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("timeline::topo", || {
        match cuda_skip_reason(1) {
            Some(_) => {
                // Without a GPU: auto says so and exits 0 (docs: README,
                // ALGORITHM §11); --backend cuda fails with the reason.
                let (code, out, err, _) = rr(&["topo"])?;
                ensure!(code == Some(0), "topo: {code:?}\n{out}\n{err}");
                ensure!(
                    out.contains("no CUDA driver"),
                    "topo must say there is no GPU: {out}"
                );
                let (code, _, err, _) = rr(&["topo", "--backend", "cuda"])?;
                ensure!(
                    code.is_some_and(|c| c != 0) && err.contains("CUDA"),
                    "topo --backend cuda without a GPU must fail: {code:?} {err}"
                );
            }
            None => {
                let (code, out, err, _) = rr(&["topo", "--size", "64MiB"])?;
                ensure!(code == Some(0), "topo: {code:?}\n{out}\n{err}");
                ensure!(
                    out.contains("peer-copy bandwidth") && out.contains("ring order"),
                    "{out}"
                );
            }
        }
        // The dry run measures on two host ranks.
        let (code, out, err, _) = rr(&[
            "topo",
            "--backend",
            "cpu",
            "--size",
            "1MiB",
            "--latency-iters",
            "20",
        ])?;
        ensure!(
            code == Some(0),
            "topo --backend cpu: {code:?}\n{out}\n{err}"
        );
        for want in [
            "peer-copy bandwidth, one direction",
            "both directions",
            "latency of a 4-byte copy",
            "ring order",
            "host0",
            "host1",
        ] {
            ensure!(
                out.contains(want),
                "topo --backend cpu: {want:?} missing:\n{out}"
            );
        }
        for (args, msg) in [
            (vec!["topo", "--size", "3"], "multiple of 4"),
            (vec!["topo", "--iters", "0"], "--iters"),
            (vec!["topo", "--ranks", "0"], "rank"),
        ] {
            let (code, _, err, _) = rr(&args)?;
            ensure!(
                code.is_some_and(|c| c != 0) && err.to_lowercase().contains(&msg.to_lowercase()),
                "{args:?}: {code:?} {err}"
            );
        }
        pass()
    });

    h.add("timeline::compare_ps_and_ring_bytes", || {
        let dir = scratch("compare")?;
        let plot = dir.join("c.svg");
        let (code, out, err, _) = rr(&[
            "compare",
            "--backend",
            "cpu",
            "--ranks",
            "2,4,8",
            "--size",
            "1MiB",
            "--plot",
            plot.to_str().ok_or("path")?,
        ])?;
        ensure!(code == Some(0), "compare: {code:?}\n{out}\n{err}");
        // The busiest rank's bytes, as the backend counted them, equal the
        // article's formulas: PS (N-1)D, ring 2(N-1)/N D (D = 1 MiB).
        for (n, ps, ring) in [
            (2, "1.00 MiB", "1.00 MiB"),
            (4, "3.00 MiB", "1.50 MiB"),
            (8, "7.00 MiB", "1.75 MiB"),
        ] {
            let row = |algo: &str| {
                out.lines()
                    .find(|l| l.starts_with(&format!("| {n} | {algo} ")))
                    .map(str::to_string)
            };
            let (p, r) = (
                row("ps").ok_or(format!("no ps row for N = {n}:\n{out}"))?,
                row("ring").ok_or(format!("no ring row for N = {n}:\n{out}"))?,
            );
            ensure!(
                p.contains(&format!(": {ps} / {ps} | (N-1)·D = {ps} |")),
                "N = {n} ps: want {ps} sent and received: {p}"
            );
            ensure!(
                r.contains(&format!(": {ring} / {ring} | 2(N-1)/N·D = {ring} |")),
                "N = {n} ring: want {ring}: {r}"
            );
        }
        let svg = std::fs::read_to_string(&plot).map_err(|e| e.to_string())?;
        well_formed_xml(&svg).map_err(|e| format!("compare SVG: {e}"))?;
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    h.add("timeline::bench_breakdown_and_theory_from_its_fit", || {
        let dir = scratch("fit")?;
        let j = dir.join("b.json");
        let js = j.to_str().ok_or("path")?;
        let (code, out, err, _) = rr(&[
            "bench",
            "--backend",
            "cpu",
            "--ranks",
            "2",
            // oneshot:fused forced up to 4 MiB, where its times grow
            // with its bytes even on a busy host (at 1-64 KiB alone they
            // need not: the "not fitted" line is model.rs's unit test).
            "--algo",
            "auto,ring,oneshot:fused",
            "-b",
            "1KiB",
            "-e",
            "4MiB",
            "-f",
            "4",
            "-n",
            "3",
            "-w",
            "1",
            "--blocks",
            "1",
            "--breakdown",
            "-J",
            js,
        ])?;
        ensure!(code == Some(0), "bench --breakdown: {code:?}\n{out}\n{err}");
        ensure!(
            out.contains("# Measured vs model, each path fitted to its own")
                && out.contains("# ring: 2(N-1)*alpha")
                && out.contains("# oneshot:fused: alpha + (N-1)*D*beta")
                && out.contains("# Where the time goes"),
            "bench --breakdown must print the fit and the split:\n{out}"
        );
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&j).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        ensure!(
            doc["header"]["models"]
                .as_array()
                .is_some_and(|m| !m.is_empty()),
            "the bench JSON must carry the fitted models"
        );
        let (code, out, err, _) = rr(&[
            "theory",
            "--from-bench",
            js,
            "--ranks",
            "2,4",
            "--size",
            "1MiB",
        ])?;
        ensure!(
            code == Some(0),
            "theory --from-bench: {code:?}\n{out}\n{err}"
        );
        ensure!(
            out.contains("models refitted from the rows of ")
                && out.contains("# Measured vs model, each path fitted to its own")
                && out.contains("(fitted, reduce included)"),
            "theory --from-bench must refit the rows and show each path's error:\n{out}"
        );
        let (code, _, err, _) = rr(&["theory", "--from-bench", "/nonexistent/b.json"])?;
        ensure!(
            code.is_some_and(|c| c != 0) && err.contains("/nonexistent/b.json"),
            "theory --from-bench of a missing file: {code:?} {err}"
        );
        // A file that is not a bench report: a bad argument, named by its
        // flag (it was once "an I/O error on the report").
        let bad = dir.join("not-a-report.json");
        std::fs::write(&bad, "{").map_err(|e| format!("write {}: {e}", bad.display()))?;
        let (code, _, err, _) = rr(&["theory", "--from-bench", &bad.to_string_lossy()])?;
        ensure!(
            code == Some(2)
                && err.contains("invalid argument: --from-bench")
                && err.contains("not a bench JSON report"),
            "theory --from-bench of a malformed file: {code:?} {err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        pass()
    });

    // On one GPU (NCCL needs a GPU per rank: one rank): NCCL's call on the
    // timeline, timed by the same source as the ring's ops. Where CUPTI
    // times the ring, it times NCCL's call too, from the records of what
    // NCCL launched (a slice of non-zero length: a record was tied to it).
    cuda_only(h, "timeline::nccl_on_the_same_clock", 1, || {
        let lib = match ringreduce::cuda::nccl::Nccl::load(None) {
            Ok(lib) => lib,
            Err(why) => return crate::common::skip(format!("NCCL not found: {why}")),
        };
        let mut cfg = EngineConfig::new(1, BackendChoice::Cuda);
        cfg.timeout = Duration::from_secs(30);
        let mut e = Engine::new(cfg).map_err(|e| e.to_string())?;
        e.nccl_init(&lib).map_err(|e| e.to_string())?;
        let o = RecordOptions {
            choice: "ring".parse::<AlgoChoice>().map_err(|e| e.to_string())?,
            collective: Collective::AllReduce,
            count: 1 << 20,
            in_place: false,
            op: ReduceOp::Sum,
            warmup: 2,
            calls: 2,
            overhead: None,
            nccl: true,
            isolated: false,
        };
        let r = timeline::record::<f32>(&mut e, &o).map_err(|e| e.to_string())?;
        let t = &r.timeline;
        let ours = t.timing_source().ok_or("no timing source")?;
        let nccl = t
            .nccl_timing_source()
            .ok_or("no timing source of NCCL's call")?;
        println!("  ring: {ours}; NCCL: {nccl}");
        let slices = t.slices()?;
        let theirs: Vec<_> = slices.iter().filter(|s| s.nccl).collect();
        ensure!(
            theirs.len() == 1,
            "NCCL's call as one slice: {}",
            theirs.len()
        );
        if ours.contains("CUPTI activity") {
            ensure!(nccl == "timing source: CUPTI activity", "NCCL: {nccl}");
            let d = theirs[0].end_ns - theirs[0].start_ns;
            let tied = d > 0.0;
            ensure!(tied, "NCCL's slice has no length: no record was tied to it");
            println!("  NCCL's call: {:.1} us", d / 1e3);
        }
        let problems = t.check(5_000.0);
        ensure!(problems.is_empty(), "{problems:#?}");
        pass()
    });

    // The LL ring's steps from the kernel's own clock: each part of its
    // kernel gets a span of its own (before, every part had the kernel's),
    // the receives one after the other, inside the kernel's time.
    cuda_only(
        h,
        "timeline::ll_kernel_steps_from_the_kernels_clock",
        1,
        || {
            // 3 ranks, or 2 on one GPU: rank threads sharing a GPU need 4
            // of its hardware queues each for ring:ll (8 by default).
            let n = 3.min(2 * crate::common::gpu_count());
            let mut e = crate::common::engine(BackendChoice::Cuda, n)?;
            let o = RecordOptions {
                choice: "ring:ll".parse::<AlgoChoice>().map_err(|e| e.to_string())?,
                collective: Collective::AllReduce,
                count: 1 << 18,
                in_place: false,
                op: ReduceOp::Sum,
                warmup: 2,
                calls: 2,
                overhead: None,
                nccl: false,
                isolated: false,
            };
            let r = timeline::record::<f32>(&mut e, &o).map_err(|e| e.to_string())?;
            let t = &r.timeline;
            let slices = t.slices()?;
            for rank in 0..n {
                let mut parts: Vec<_> = slices
                    .iter()
                    .filter(|s| s.rank == rank && s.call == 0 && !s.nccl && s.phase.is_some())
                    .collect();
                parts.sort_by_key(|s| s.part);
                ensure!(
                    parts.len() == 4 * (n - 1),
                    "rank {rank}: {} kernel parts, not {}",
                    parts.len(),
                    4 * (n - 1)
                );
                let receives: Vec<_> = parts.iter().skip(1).step_by(2).collect();
                for w in receives.windows(2) {
                    ensure!(
                        (w[1].start_ns + 1.0).total_cmp(&w[0].end_ns).is_ge(),
                        "rank {rank}: step {} starts before step {} ends: {:?} {:?}",
                        w[1].part / 2,
                        w[0].part / 2,
                        (w[1].start_ns, w[1].end_ns),
                        (w[0].start_ns, w[0].end_ns)
                    );
                }
                let (first, last) = (receives[0], receives[receives.len() - 1]);
                ensure!(
                    (first.start_ns, first.end_ns) != (last.start_ns, last.end_ns),
                    "rank {rank}: every step has the kernel's span (no step times)"
                );
                println!(
                    "  rank {rank}: steps {}",
                    receives
                        .iter()
                        .map(|s| format!("{:.1}", (s.end_ns - s.start_ns) / 1e3))
                        .collect::<Vec<_>>()
                        .join(" / ")
                );
            }
            let problems = t.check(5_000.0);
            ensure!(problems.is_empty(), "{problems:#?}");
            pass()
        },
    );

    // On 2 GPUs: the timeline of the pipelined ring and of 4 ranks, with
    // NCCL's call on the same clock, checked as on the CPU.
    cuda_only(h, "timeline::gpu_timeline_2_gpus", 2, || {
        for (algo, ranks, nccl) in [
            ("ring:pipe2", 2, true),
            ("ps", 2, false),
            ("ring", 4, false),
        ] {
            let mut cfg = EngineConfig::new(ranks, BackendChoice::Cuda);
            cfg.timeout = Duration::from_secs(30);
            let mut e = Engine::new(cfg).map_err(|e| e.to_string())?;
            let mut with_nccl = nccl;
            if nccl {
                match ringreduce::cuda::nccl::Nccl::load(None) {
                    Ok(lib) => e.nccl_init(&lib).map_err(|e| e.to_string())?,
                    Err(why) => {
                        println!("  (NCCL not found, its slice is left out: {why})");
                        with_nccl = false;
                    }
                }
            }
            let o = RecordOptions {
                choice: algo.parse::<AlgoChoice>().map_err(|e| e.to_string())?,
                collective: Collective::AllReduce,
                count: 1 << 20,
                in_place: false,
                op: ReduceOp::Sum,
                warmup: 3,
                calls: 3,
                overhead: Some((3, 10)),
                nccl: with_nccl,
                isolated: false,
            };
            let r = timeline::record::<f32>(&mut e, &o).map_err(|e| e.to_string())?;
            let t = &r.timeline;
            let problems = t.check(5_000.0);
            ensure!(problems.is_empty(), "{algo} on {ranks}: {problems:#?}");
            let slices = t.slices()?;
            let want: usize = t
                .calls
                .iter()
                .map(|c| {
                    c.plan
                        .ops
                        .iter()
                        .enumerate()
                        .map(|(r, ops)| {
                            ops.iter()
                                .map(|op| ringreduce::plan::interp::parts(r, op).len())
                                .sum::<usize>()
                        })
                        .sum::<usize>()
                })
                .sum();
            ensure!(
                slices.iter().filter(|s| !s.nccl).count() == want,
                "{algo}: one slice per op part"
            );
            if with_nccl {
                ensure!(
                    slices.iter().filter(|s| s.nccl).count() == ranks,
                    "{algo}: NCCL's call as one slice per rank"
                );
            }
            ensure!(
                t.clock().contains("GPU event") || t.clock().contains("CUPTI activity"),
                "{}",
                t.clock()
            );
            let text = timeline::chrome::to_string(t)?;
            let _: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            well_formed_xml(&timeline::svg::to_svg(t)?)?;
            if let Some(ov) = r.overhead {
                println!("  {algo} on {ranks}: {}", ov.line());
            }
        }
        pass()
    });
}
