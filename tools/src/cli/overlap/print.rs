//! The overlap benchmark's tables, target lines and timeline picture.

use super::*;

pub(super) fn print_config(c: &ConfigResult, p: &Settings, ranks: usize, cpu: bool) -> Result<()> {
    out("")?;
    let what = match c.kernel {
        "fma" => format!(
            "kernel fma: {} FMAs per element ({:.0} FLOP per byte written: compute-bound)",
            c.fmas_per_element,
            c.flop_per_bucket / (4.0 * c.bucket_elems as f64)
        ),
        _ => format!(
            "kernel mem: {} {}, {:.0} bytes of HBM traffic per element ({:.2} FLOP per byte: memory-bound)",
            c.passes,
            ringreduce::words::plural(c.passes, "pass", "passes"),
            c.hbm_bytes_per_bucket / c.bucket_elems as f64,
            c.flop_per_bucket / c.hbm_bytes_per_bucket
        ),
    };
    out(format!(
        "== {what}; {} x {} ({} floats), {}",
        ringreduce::words::counted(c.buckets, "bucket"),
        format_bytes(c.bucket_bytes),
        c.bucket_elems,
        ringreduce::words::counted(ranks, "rank")
    ))?;
    out(format!(
        "   model on one H200 ({:.0} TFLOP/s FP32 FMA, {:.1} TB/s HBM): {:.1} us per bucket, {:.1} us of compute per step{}",
        H200_FLOPS / 1e12,
        H200_HBM / 1e12,
        c.model_us_per_bucket,
        c.model_us_per_bucket * p.buckets as f64,
        if cpu { " (not this machine)" } else { "" }
    ))?;
    if cpu {
        // Nothing overlaps on the CPU (every kernel and call runs when
        // issued): an efficiency or a slowdown from these times would be
        // noise (once printed as 1124 % and -169 %).
        out("   overlap efficiency and slowdown: not computed on the CPU backend (nothing overlaps there; its times are not a measurement)")?;
    } else {
        out(format!(
            "   overlap efficiency = (compute + comm - step) / min(compute, comm); at most (B-1)/B = {:.1}% with {}",
            100.0 * c.max_efficiency,
            ringreduce::words::counted(c.buckets, "bucket")
        ))?;
    }
    out(format!(
        "   {:<10} {:<14} {:>10} {:>10} {:>10} {:>10} {:>8} {:>11} {:>11} {:>9} {:>8} {:>6}",
        "contender",
        "path",
        "compute",
        "comm",
        "step",
        "ideal",
        "overlap",
        "kern alone",
        "kern ovl",
        "slowdown",
        "checks",
        "wrong"
    ))?;
    out(format!(
        "   {:<10} {:<14} {:>10} {:>10} {:>10} {:>10} {:>8} {:>11} {:>11} {:>9} {:>8} {:>6}",
        "", "", "(us)", "(us)", "(us)", "(us)", "eff.", "(us)", "(us)", "", "", ""
    ))?;
    for r in &c.rows {
        let (eff, slow) = if cpu {
            ("-".to_string(), "-".to_string())
        } else {
            (
                format!("{:.1}%", 100.0 * r.efficiency),
                format!("{:+.1}%", 100.0 * r.slowdown),
            )
        };
        out(format!(
            "   {:<10} {:<14} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8} {:>11.1} {:>11.1} {:>9} {:>8} {:>6}",
            r.contender,
            r.path,
            r.compute_us,
            r.comm_us,
            r.step_us,
            r.ideal_us,
            eff,
            r.kernels_alone_us,
            r.kernels_overlapped_us,
            slow,
            r.bucket_checks,
            r.wrong + r.host_wrong
        ))?;
    }
    Ok(())
}

/// The targets, per configuration, when NCCL ran.
pub(super) fn print_targets(rep: &OverlapReport) -> Result<()> {
    let mut lines = Vec::new();
    for c in &rep.configs {
        let Some(nccl) = c.rows.iter().find(|r| r.contender == "nccl") else {
            continue;
        };
        let tag = format!("{} {}", c.kernel, format_bytes(c.bucket_bytes));
        for r in c.rows.iter().filter(|r| r.contender != "nccl") {
            lines.push(format!(
                "   {tag:<10} step {:<5} {:>9.1} us vs nccl {:>9.1} us: {:>5.2}x  {}",
                r.contender,
                r.step_us,
                nccl.step_us,
                r.step_us / nccl.step_us.max(1e-9),
                if r.step_us <= nccl.step_us {
                    "met (<= nccl)"
                } else {
                    "NOT met"
                }
            ));
        }
        if c.kernel == "fma" {
            if let Some(ring) = c.rows.iter().find(|r| r.contender == "ring") {
                let met = ring.slowdown <= 0.5 * nccl.slowdown.max(0.0);
                lines.push(format!(
                    "   {tag:<10} compute slowdown ring {:+.1}% vs nccl {:+.1}%: {}",
                    100.0 * ring.slowdown,
                    100.0 * nccl.slowdown,
                    if met { "met (<= half)" } else { "NOT met" }
                ));
            }
        }
    }
    if !lines.is_empty() {
        out("")?;
        out("targets (issue 16): overlapped step ringreduce <= NCCL; compute-bound kernel slowdown under the collective, ring <= half of NCCL's")?;
        for l in lines {
            out(l)?;
        }
    }
    Ok(())
}

/// The picture of each configuration's last overlapped step: per
/// contender and rank, the work stream's kernels and the collectives.
pub fn timeline_svg(rep: &OverlapReport) -> String {
    const W: f64 = 1100.0;
    const LEFT: f64 = 150.0;
    const ROW: f64 = 13.0;
    let plot = W - LEFT - 20.0;
    let mut body = String::new();
    let mut y = 30.0;
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    for cfg in &rep.timeline {
        // Each rank's times from its first kernel start; one scale per
        // configuration.
        let shifted: Vec<(String, usize, Vec<WorkSpan>)> = cfg
            .runs
            .iter()
            .flat_map(|run| {
                (0..rep.ranks).map(move |r| {
                    let t0 = extent(&run.spans, r, Some("kernel")).map_or(0.0, |e| e.0);
                    let spans = run
                        .spans
                        .iter()
                        .filter(|s| s.rank == r)
                        .map(|s| WorkSpan {
                            start_ns: s.start_ns - t0,
                            end_ns: s.end_ns - t0,
                            ..s.clone()
                        })
                        .collect();
                    (run.contender.clone(), r, spans)
                })
            })
            .collect();
        let tmax = shifted
            .iter()
            .flat_map(|(_, _, v)| v.iter().map(|s| s.end_ns))
            .fold(1.0, f64::max);
        body.push_str(&format!(
            "<text x=\"10\" y=\"{y}\" font-weight=\"bold\">{} kernel, {} buckets x {} (0 .. {:.1} us)</text>\n",
            cfg.kernel,
            rep.buckets,
            format_bytes(cfg.bucket_bytes),
            tmax / 1e3
        ));
        y += 8.0;
        for (name, r, spans) in &shifted {
            for (stream, color, label) in [
                ("work", "#4878a8", "kernels"),
                ("comm", "#e08a2c", "all-reduce"),
            ] {
                y += ROW;
                body.push_str(&format!(
                    "<text x=\"10\" y=\"{:.1}\" font-size=\"10\">{} r{r} {label}</text>\n",
                    y - 2.0,
                    esc(name)
                ));
                for s in spans.iter().filter(|s| s.stream == stream) {
                    let x = LEFT + plot * (s.start_ns / tmax).max(0.0);
                    let w = (plot * (s.end_ns - s.start_ns) / tmax).max(0.5);
                    body.push_str(&format!(
                        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{color}\" stroke=\"white\" stroke-width=\"0.5\"><title>{} {} {} rank {r}: {:.1} .. {:.1} us</title></rect>\n",
                        y - ROW + 2.0,
                        ROW - 3.0,
                        esc(name),
                        s.what,
                        s.index,
                        s.start_ns / 1e3,
                        s.end_ns / 1e3
                    ));
                    body.push_str(&format!(
                        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"8\" fill=\"white\">{}</text>\n",
                        x + 1.0,
                        y - 3.0,
                        if w > 10.0 {
                            s.index.to_string()
                        } else {
                            String::new()
                        }
                    ));
                }
            }
        }
        y += 25.0;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"16\">ringreduce overlap: one overlapped step per contender (blue: the bucket's compute kernel on the work stream; orange: its all-reduce; numbers: bucket)</text>\n{body}</svg>\n",
        y + 10.0
    )
}
