use super::*;
use clap::Parser;

#[derive(Parser)]
struct T {
    #[command(flatten)]
    a: OverlapArgs,
}

fn args(extra: &[&str]) -> OverlapArgs {
    let mut v = vec!["overlap", "--backend", "cpu"];
    v.extend_from_slice(extra);
    T::parse_from(v).a
}

/// The CI variant: both kernels, two sizes, ring and auto on 2 and 3
/// ranks; every bucket of every step checked, 0 wrong.
#[test]
fn cpu_overlap_checks_every_bucket() {
    for ranks in ["2", "3"] {
        let a = args(&[
            "--ranks",
            ranks,
            "--buckets",
            "3",
            "--bucket-size",
            "4KiB,48KiB",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--fmas",
            "32",
            "--passes",
            "2",
        ]);
        let rep = run(&a).unwrap();
        assert_eq!(rep.wrong(), 0);
        assert_eq!(rep.configs.len(), 4);
        // The default contenders (ring,auto,nccl) leave NCCL out on the
        // CPU, with a note; asked for by name it is refused (the
        // integration test nccl_on_the_cpu_backend_is_refused_as_such).
        assert!(
            rep.notes
                .iter()
                .any(|n| n.contains("nccl left out of the default contenders")),
            "{:?}",
            rep.notes
        );
        for c in &rep.configs {
            assert_eq!(c.rows.len(), 2, "nccl is skipped on the CPU");
            for r in &c.rows {
                // 3 phases x 3 steps x 3 buckets x ranks.
                let nr: u64 = ranks.parse().unwrap();
                assert_eq!(r.bucket_checks, 3 * 3 * 3 * nr);
                assert_eq!(r.host_checked_elements, nr * 3 * c.bucket_elems as u64);
                assert_eq!(r.samples.step_us.len(), 2);
            }
        }
        // The timeline: every kernel ends before its bucket's all-reduce
        // starts (host order on the CPU).
        for cfg in &rep.timeline {
            for run in &cfg.runs {
                for s in run.spans.iter().filter(|s| s.what == "collective") {
                    let k = run
                        .spans
                        .iter()
                        .find(|k| k.what == "kernel" && k.index == s.index && k.rank == s.rank)
                        .unwrap();
                    assert!(k.end_ns <= s.start_ns);
                }
            }
        }
        assert!(timeline_svg(&rep).contains("<rect"));
    }
}

#[test]
fn arguments_are_checked_before_anything_runs() {
    let bad = |extra: &[&str]| settings(&args(extra), true).unwrap_err().to_string();
    assert!(bad(&["--bucket-size", "100"]).contains("multiple of 16"));
    assert!(bad(&["--fmas", "33"]).contains("multiple of 32"));
    assert!(bad(&["--kernel", "gemm"]).contains("unknown kernel"));
    assert!(bad(&["--contenders", "nccl:graph"]).contains("no graphs"));
    assert!(bad(&["--comm-priority", "low"]).contains("high or default"));
    assert!(bad(&["--steps", "0"]).contains("at least 1"));
    let p = settings(&args(&[]), false).unwrap();
    assert_eq!(
        (p.buckets, p.sizes.clone(), p.fma_iters, p.passes),
        (8, vec![25 << 20], 16, 4)
    );
}

#[test]
fn the_model_matches_the_ptx_header() {
    // 25 MiB, 512 FMAs per element: 100 us; 4 passes: 71 us.
    let n = (25 << 20) / 4;
    let (_, _, fma) = model(KernelKind::Fma, n, 16, 4);
    let (_, _, mem) = model(KernelKind::Mem, n, 16, 4);
    assert!((fma - 100.2).abs() < 0.5, "{fma}");
    assert!((mem - 71.0).abs() < 0.5, "{mem}");
}
