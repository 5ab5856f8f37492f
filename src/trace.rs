//! `ringreduce trace`: the ring all-reduce step by step, for students.
//!
//! The trace executes the same [`Plan`] the backends run (built by
//! [`crate::algo::ring`] from [`crate::schedule`]), in issue order, on a
//! symbolic model of each rank's memory: every element holds the set of
//! inputs summed into it so far. After each step it prints who sent which
//! chunk to whom and what every rank now holds. It then runs the real engine
//! on the CPU backend with exact inputs and shows the numbers.

use crate::algo::Algo;
use crate::engine::{Engine, EngineConfig};
use crate::error::Result;
use crate::plan::{Buf, OpKind, Plan};
use crate::schedule::{self, ChunkLayout, Phase};
use crate::size::format_bytes;
use std::fmt::Write;

/// Which inputs are summed in one element: bit r = rank r's input.
type Held = u64;

fn show(h: Held, n: usize) -> String {
    if h == 0 {
        return "-".into();
    }
    if n > 1 && h == (1u64 << n) - 1 {
        return "ALL".into();
    }
    (0..n)
        .filter(|r| h & (1 << r) != 0)
        .map(|r| format!("x{r}"))
        .collect::<Vec<_>>()
        .join("+")
}

/// Render the trace of `algo` for `count` f32 elements on `n` ranks: the
/// ring family step by step, the other algorithms op by op.
pub fn render_algo(algo: Algo, n: usize, count: usize) -> Result<String> {
    match algo {
        Algo::Ring { .. } => render_ring(algo, n, count),
        _ => render_other(algo, n, count),
    }
}

/// Render the trace of the plain ring all-reduce.
pub fn render(n: usize, count: usize) -> Result<String> {
    render_ring(Algo::RING, n, count)
}

fn render_ring(algo: Algo, n: usize, count: usize) -> Result<String> {
    let mut out = String::new();
    let plan: Plan = algo.plan(n, count, 4, false);
    plan.validate().map_err(crate::error::Error::Plan)?;
    let layout = ChunkLayout::new(count, n, 4);
    // Step order: (phase, step, copies before reduces, rank). The plan's
    // dependencies only point backwards in this order, so it is a valid
    // execution order, and it is the synchronous picture a student draws.
    let mut order: Vec<(usize, usize)> = (0..n)
        .flat_map(|r| (0..plan.ops[r].len()).map(move |k| (r, k)))
        .filter(|&(r, k)| plan.ops[r][k].label.phase.is_some())
        .collect();
    order.sort_by_key(|&(r, k)| {
        let op = &plan.ops[r][k];
        let phase = usize::from(op.label.phase == Some(Phase::AllGather));
        let kind = usize::from(matches!(op.kind, OpKind::Reduce { .. }));
        (phase, op.label.step, kind, r, op.label.slice)
    });
    let d = count * 4;

    let _ = writeln!(
        out,
        "Ring all-reduce: N = {n} ranks, count = {count} float ({} per rank), out of place",
        format_bytes(d as u64)
    );
    let _ = writeln!(out, "Rank r sends to rank (r+1) mod N. x_r is rank r's input; a cell lists the inputs summed in that chunk.");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Chunks (16-byte aligned boundaries where possible, remainder on the first chunks):"
    );
    for c in 0..n {
        let r = layout.range(c);
        let _ = writeln!(
            out,
            "  chunk {c}: elements {:>4}..{:<4} ({} elements)",
            r.start,
            r.end,
            r.len()
        );
    }
    let _ = writeln!(out);

    // Symbolic memory: recv content per rank per element (what the rank's
    // output currently holds; initially its own input, as the ring reads it).
    let mut held: Vec<Vec<Held>> = (0..n).map(|r| vec![1u64 << r; count]).collect();
    let mut scratch: Vec<Vec<Held>> = vec![vec![0; plan.scratch_len]; n];
    let state_table = |out: &mut String, held: &Vec<Vec<Held>>| {
        let w = 4 + 3 * n;
        let _ = write!(out, "        ");
        for c in 0..n {
            let _ = write!(out, "| {:<w$}", format!("chunk {c}"));
        }
        let _ = writeln!(out);
        for (r, h) in held.iter().enumerate() {
            let _ = write!(out, "  rank {r}");
            for c in 0..n {
                let range = layout.range(c);
                let cell = if range.is_empty() {
                    "(empty)".to_string()
                } else {
                    show(h[range.start], n)
                };
                let _ = write!(out, "| {cell:<w$}");
            }
            let _ = writeln!(out);
        }
    };
    let _ = writeln!(out, "Start: every rank holds only its own input.");
    state_table(&mut out, &held);

    // Group the issue order by (phase, step).
    let mut i = 0;
    while i < order.len() {
        let (r0, k0) = order[i];
        let key = plan.ops[r0][k0]
            .label
            .phase
            .map(|p| (p, plan.ops[r0][k0].label.step));
        let mut j = i;
        let mut lines = Vec::new();
        while j < order.len() {
            let (r, k) = order[j];
            let op = &plan.ops[r][k];
            let this = op.label.phase.map(|p| (p, op.label.step));
            if this != key && !matches!(op.kind, OpKind::Begin | OpKind::End) {
                break;
            }
            match &op.kind {
                OpKind::Copy { from, to, src, dst } => {
                    let r = *from;
                    let data: Vec<Held> = if src.buf == Buf::Scratch {
                        scratch[r][src.range.clone()].to_vec()
                    } else {
                        held[r][src.range.clone()].to_vec()
                    };
                    let what = data.first().map_or("-".into(), |h| show(*h, n));
                    if dst.buf == Buf::Scratch {
                        scratch[*to][dst.range.clone()].copy_from_slice(&data);
                    } else {
                        held[*to][dst.range.clone()].copy_from_slice(&data);
                    }
                    if !src.range.is_empty() {
                        lines.push(format!(
                            "  rank {r} -> rank {to}: chunk {} [{}..{}) = {what}{}",
                            op.label.chunk,
                            src.range.start,
                            src.range.end,
                            if dst.buf == Buf::Scratch {
                                "  (into scratch)"
                            } else {
                                "  (overwrites)"
                            }
                        ));
                    }
                }
                OpKind::ReducePeer { .. } => {}
                OpKind::Reduce { dst, b, .. } => {
                    for e in 0..dst.len() {
                        held[r][dst.range.start + e] |= scratch[r][b.range.start + e];
                    }
                    if !dst.range.is_empty() {
                        lines.push(format!(
                            "  rank {r} adds the received chunk {} (reduce kernel): now {}",
                            op.label.chunk,
                            show(held[r][dst.range.start], n)
                        ));
                    }
                }
                OpKind::Begin | OpKind::End => {}
            }
            j += 1;
        }
        if let Some((phase, step)) = key {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "{} step {} of {}:",
                phase.label(),
                step + 1,
                schedule::steps(n)
            );
            for l in &lines {
                let _ = writeln!(out, "{l}");
            }
            state_table(&mut out, &held);
            if phase == Phase::ReduceScatter && step + 1 == schedule::steps(n) {
                let owned: Vec<String> = (0..n)
                    .map(|r| format!("rank {r} owns chunk {}", schedule::owned_chunk(r, n)))
                    .collect();
                let _ = writeln!(out, "  Reduce-Scatter done: {}.", owned.join(", "));
            }
        }
        i = j.max(i + 1);
    }

    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Traffic per rank (bytes sent to / received from other ranks):"
    );
    let formula = schedule::ring_bytes_formula(n, d);
    traffic_lines(&mut out, &plan);
    let _ = writeln!(
        out,
        "  formula 2(N-1)/N * D = 2*{}/{} * {d} B = {formula:.1} B per rank (exact per rank when chunks are equal; the sum over ranks always matches)",
        n.saturating_sub(1),
        n
    );

    // The real thing, on the CPU backend, with exact inputs.
    let (inputs, recv, ok) = run_on_cpu(algo, n, count)?;
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "The same plan on the CPU backend, with x_r[i] = 10*(r+1) + i%10:"
    );
    let show_vals = |v: &[f32]| {
        let mut s: Vec<String> = v.iter().take(12).map(|x| format!("{x}")).collect();
        if v.len() > 12 {
            s.push("...".into());
        }
        s.join(" ")
    };
    for (r, v) in inputs.iter().enumerate() {
        let _ = writeln!(out, "  x{r}: {}", show_vals(v));
    }
    let _ = writeln!(out, "  every rank's result: {}", show_vals(&recv[0]));
    let _ = writeln!(
        out,
        "  {}",
        if ok {
            "PASS: all ranks equal the element-wise sum"
        } else {
            "FAIL"
        }
    );
    Ok(out)
}

/// The per-rank traffic lines of a plan.
fn traffic_lines(out: &mut String, plan: &Plan) {
    for (r, t) in plan.traffic(4).iter().enumerate() {
        let _ = writeln!(
            out,
            "  rank {r}: sent {:>6} B, received {:>6} B",
            t.sent, t.received
        );
    }
}

/// Run `algo` on the CPU backend with the exact inputs `x_r[i] = 10*(r+1) + i%10`;
/// returns the inputs, every rank's result, and whether all equal the sum.
#[allow(clippy::type_complexity)]
fn run_on_cpu(algo: Algo, n: usize, count: usize) -> Result<(Vec<Vec<f32>>, Vec<Vec<f32>>, bool)> {
    let inputs: Vec<Vec<f32>> = (0..n)
        .map(|r| (0..count).map(|i| (10 * (r + 1) + i % 10) as f32).collect())
        .collect();
    let mut got = vec![vec![0.0f32; count]; n];
    let mut cfg = EngineConfig::cpu(n);
    cfg.algo = crate::algo::AlgoChoice::Fixed(algo);
    Engine::<f32>::new(cfg)?.all_reduce(&inputs, &mut got)?;
    let want: Vec<f32> = (0..count)
        .map(|i| inputs.iter().map(|v| v[i]).sum())
        .collect();
    let ok = got.iter().all(|v| *v == want);
    Ok((inputs, got, ok))
}

/// Parameter server, one-shot (push or pull): op by op, whole buffers.
fn render_other(algo: Algo, n: usize, count: usize) -> Result<String> {
    let mut out = String::new();
    let plan = algo.plan(n, count, 4, false);
    plan.validate().map_err(crate::error::Error::Plan)?;
    let order = plan.issue_order().map_err(crate::error::Error::Plan)?;
    let d = count * 4;
    let _ = writeln!(
        out,
        "{}: N = {n} ranks, count = {count} float ({} per rank), out of place",
        algo.label(),
        format_bytes(d as u64)
    );
    let _ = writeln!(
        out,
        "These algorithms move whole buffers; x_r is rank r's input. Ops in issue order:"
    );
    if plan.flag_exchange(0).ok().flatten().is_some() {
        let _ = writeln!(
            out,
            "(On CUDA each rank's push and reduce run as ONE kernel, ptx/exchange_f32.ptx:
 the push is stores into the peer's scratch, then a flag raised in the peer's
 memory; the reduce starts once the peer's flag is up. No copy call, no event.)"
        );
    }
    // Symbolic memory per rank: send (the input), recv (None = not written
    // yet) and scratch, one value per element.
    let send: Vec<Held> = (0..n).map(|r| 1u64 << r).collect();
    let mut recv: Vec<Vec<Option<Held>>> = vec![vec![None; count]; n];
    let mut scratch: Vec<Vec<Held>> = vec![vec![0; plan.scratch_len]; n];
    let read =
        |buf: Buf, r: usize, e: usize, recv: &Vec<Vec<Option<Held>>>, scratch: &Vec<Vec<Held>>| {
            match buf {
                Buf::Send => send[r],
                Buf::Recv => recv[r][e].unwrap_or(send[r]),
                Buf::Scratch => scratch[r][e],
            }
        };
    let mut last_note = "";
    for &(r, k) in &order {
        let op = &plan.ops[r][k];
        if op.label.note != last_note && !matches!(op.kind, OpKind::Begin | OpKind::End) {
            last_note = op.label.note;
            let _ = writeln!(out, "\n{}:", last_note);
        }
        match &op.kind {
            OpKind::Copy { from, to, src, dst } if !src.range.is_empty() => {
                let v: Vec<Held> = src
                    .range
                    .clone()
                    .map(|e| read(src.buf, *from, e, &recv, &scratch))
                    .collect();
                for (i, e) in dst.range.clone().enumerate() {
                    match dst.buf {
                        Buf::Recv => recv[*to][e] = Some(v[i]),
                        _ => scratch[*to][e] = v[i],
                    }
                }
                let who = if r == *from { "pushes" } else { "pulls" };
                let _ = writeln!(
                    out,
                    "  rank {r} {who}: rank {from} {} [{}..{}) = {} -> rank {to} {} [{}..{})",
                    src.buf.name(),
                    src.range.start,
                    src.range.end,
                    show(v[0], n),
                    dst.buf.name(),
                    dst.range.start,
                    dst.range.end
                );
            }
            OpKind::Reduce { dst, a, b } | OpKind::ReducePeer { dst, a, b, .. }
                if !dst.range.is_empty() =>
            {
                let b_rank = match &op.kind {
                    OpKind::ReducePeer { from, .. } => *from,
                    _ => r,
                };
                for i in 0..dst.len() {
                    let x = read(a.buf, r, a.range.start + i, &recv, &scratch);
                    let y = read(b.buf, b_rank, b.range.start + i, &recv, &scratch);
                    recv[r][dst.range.start + i] = Some(x | y);
                }
                let owner = if b_rank == r {
                    String::new()
                } else {
                    format!("rank {b_rank}'s ")
                };
                let _ = writeln!(
                    out,
                    "  rank {r} reduce kernel: recv = {} + {owner}{} [{}..{}) -> {}",
                    a.buf.name(),
                    b.buf.name(),
                    b.range.start,
                    b.range.end,
                    show(recv[r][dst.range.start].unwrap_or(0), n)
                );
            }
            _ => {}
        }
    }
    let _ = writeln!(out, "\nEnd: every rank's recv holds:");
    for (r, v) in recv.iter().enumerate() {
        let _ = writeln!(
            out,
            "  rank {r}: {}",
            v.first()
                .map_or("-".into(), |h| show(h.unwrap_or(send[r]), n))
        );
    }
    let _ = writeln!(
        out,
        "\nTraffic per rank (bytes sent to / received from other ranks):"
    );
    traffic_lines(&mut out, &plan);
    let _ = writeln!(
        out,
        "  ring formula 2(N-1)/N * D = {:.1} B per rank; parameter-server root (N-1) * D = {} B each way",
        schedule::ring_bytes_formula(n, d),
        n.saturating_sub(1) * d
    );
    let (_, _, ok) = run_on_cpu(algo, n, count)?;
    let _ = writeln!(
        out,
        "\nThe same plan on the CPU backend, x_r[i] = 10*(r+1) + i%10: {}",
        if ok {
            "PASS: all ranks equal the element-wise sum"
        } else {
            "FAIL"
        }
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn trace_default_ends_complete() {
        let t = super::render(4, 8).unwrap();
        assert!(t.contains("all-gather step 3 of 3"));
        assert!(t.contains("PASS"));
        assert!(t.contains("rank 0 owns chunk 1"));
        // After the last step every cell is complete.
        let tail = t.split("all-gather step 3 of 3:").nth(1).unwrap();
        let table: Vec<&str> = tail
            .lines()
            .filter(|l| l.starts_with("  rank ") && l.contains('|'))
            .collect();
        assert_eq!(table.len(), 4);
        assert!(
            table.iter().all(|l| l.matches("ALL").count() == 4),
            "{tail}"
        );
    }

    #[test]
    fn trace_other_algorithms() {
        use crate::algo::Algo;
        for algo in [
            Algo::ParameterServer,
            Algo::ONESHOT,
            Algo::ONESHOT_PULL,
            Algo::OneShotFused,
            Algo::OneShotFlag,
        ] {
            for (n, c) in [(4, 8), (2, 3), (1, 4)] {
                let t = super::render_algo(algo, n, c).unwrap();
                assert!(t.contains("PASS"), "{t}");
                if n > 1 {
                    assert!(
                        t.contains(&format!("rank {} : ALL", n - 1).replace(" :", ":")),
                        "{t}"
                    );
                }
            }
        }
        let ps = super::render_algo(Algo::ParameterServer, 4, 8).unwrap();
        assert!(ps.contains("gather:") && ps.contains("broadcast:"), "{ps}");
        assert!(
            ps.contains("rank 0: sent     96 B, received     96 B"),
            "{ps}"
        );
    }

    #[test]
    fn trace_small_counts() {
        for (n, c) in [(1, 8), (3, 2), (5, 0), (2, 1)] {
            let t = super::render(n, c).unwrap();
            assert!(t.contains("PASS"), "{t}");
        }
    }
}
