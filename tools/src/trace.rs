//! `ringreduce trace`: a collective step by step, for students.
//!
//! The trace executes the plan the backends run, through the one plan
//! interpreter ([`ringreduce::plan::interp`]) on symbolic memory: every element
//! holds which inputs are summed in it. Ring paths are shown step by step
//! (who sends which chunk, and its slices, to whom, and what every rank holds
//! after the step); other paths op by op. It then runs the same plan on the
//! CPU backend with exact inputs and shows the numbers.

use crate::verify::{self, Inputs};
use ringreduce::algo::{plan_of, AlgoChoice};
use ringreduce::element::{DataType, Element, ReduceOp};
use ringreduce::engine::{Engine, EngineConfig};
use ringreduce::error::{Error, Result};
use ringreduce::plan::interp::{self, Effect, SymMem};
use ringreduce::plan::{Buf, Collective, KernelKind, OpKind, Plan, Region, Shape};
use ringreduce::schedule::{self, Phase};
use ringreduce::size::format_bytes;
use std::fmt::Write;

pub mod ideal;

/// Largest trace: ranks and elements.
pub const MAX_RANKS: usize = 16;
pub const MAX_COUNT: usize = 4096;
/// Widest slice x time view drawn, in time units.
const MAX_SLICE_UNITS: usize = 40;

/// Render the trace of `choice` for `shape` (element type `dtype`, op `op`).
pub fn render(choice: &AlgoChoice, shape: &Shape, dtype: DataType, op: ReduceOp) -> Result<String> {
    if shape.ranks == 0 {
        return Err(Error::ZeroRanks);
    }
    if shape.ranks > MAX_RANKS || shape.count > MAX_COUNT {
        return Err(Error::BadArgument(format!(
            "trace is for small examples: at most {MAX_RANKS} ranks and {MAX_COUNT} elements (got {} ranks, {} elements)",
            shape.ranks, shape.count
        )));
    }
    let plan = plan_of(choice, shape)?;
    let mut out = String::new();
    let n = shape.ranks;
    let bytes = shape.bytes();
    let _ = writeln!(
        out,
        "{}: {} on N = {n} ranks, count = {} {} ({} per rank), {}, {}",
        plan.name,
        shape.collective,
        shape.count,
        dtype.name(),
        format_bytes(bytes),
        if shape.in_place {
            "in place"
        } else {
            "out of place"
        },
        op.name()
    );
    if choice == &AlgoChoice::Auto {
        match ringreduce::algo::forced_algo()? {
            Some(v) => {
                let _ = writeln!(
                    out,
                    "(auto: {} forced by RINGREDUCE_ALGO={v}; --algo overrides it)",
                    plan.name
                );
            }
            None => {
                let _ = writeln!(out, "(auto chose {} for this size)", plan.name);
            }
        }
    }
    let ringlike = plan.ops.iter().enumerate().any(|(r, ops)| {
        ops.iter()
            .any(|o| interp::parts(r, o).iter().any(|p| p.label.phase.is_some()))
    });
    if ringlike {
        render_steps(&mut out, &plan);
        if plan.ops.iter().flatten().any(|o| o.label.slice > 0) {
            render_slices(&mut out, &plan)?;
        }
    } else {
        render_ops(&mut out, &plan);
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Traffic per rank (bytes sent to / received from other ranks):"
    );
    for (r, t) in plan.traffic().iter().enumerate() {
        let _ = writeln!(
            out,
            "  rank {r}: sent {:>6} B, received {:>6} B",
            t.sent, t.received
        );
    }
    let d = shape.count * shape.elem_size;
    match shape.collective {
        Collective::AllReduce => {
            let _ = writeln!(
                out,
                "  ring formula 2(N-1)/N * D = {:.1} B per rank; parameter-server root (N-1) * D = {} B each way",
                schedule::ring_bytes_formula(n, d),
                n.saturating_sub(1) * d
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "  ring formula (N-1)/N * total = {:.1} B per rank",
                schedule::ring_bytes_formula(n, d * n) / 2.0
            );
        }
    }
    let line = ringreduce::with_element!(dtype, T => run_on_cpu::<T>(choice, shape, op))?;
    let _ = writeln!(out);
    out.push_str(&line);
    Ok(out)
}

fn value_line(mem: &SymMem, r: usize, region: &Region, n: usize) -> String {
    mem.read(r, region)
        .first()
        .map_or("-".into(), |(_, v)| v.describe(n))
}

/// One part of one op of a ring plan: (rank, op index, part index).
type Part = (usize, usize, usize);

/// Where a part sorts in the synchronous picture: (phase, step, copy before
/// reduce, rank, chunk, slice). Phases: 0 begin, 1 other set-up, 2
/// reduce-scatter, 3 all-gather, 9 end.
fn step_key(plan: &Plan, &(r, i, k): &Part) -> (usize, usize, usize, usize, usize, usize) {
    let op = &plan.ops[r][i];
    let part = interp::parts(r, op)[k];
    let label = part.label;
    let phase = match label.phase {
        None if op.kind == OpKind::Begin => 0,
        None if op.kind == OpKind::End => 9,
        None => 1,
        Some(Phase::ReduceScatter) => 2,
        Some(Phase::AllGather) => 3,
    };
    // A receive (a reduce, or a kernel step's copy out of its own slot)
    // after the step's sends.
    let kind = usize::from(match part.effect {
        Some(Effect::Reduce { .. }) => true,
        Some(Effect::Copy { from, to, .. }) => from == to && part.step.is_some(),
        None => false,
    });
    (phase, label.step, kind, r, label.chunk, label.slice)
}

/// What every rank holds per chunk. A cell that differs from the previous
/// table (`prev`, updated here) gets a `*` when `mark` is set.
fn print_table(
    out: &mut String,
    plan: &Plan,
    mem: &SymMem,
    chunks: &[std::ops::Range<usize>],
    prev: &mut Vec<Vec<String>>,
    mark: bool,
) {
    let n = plan.shape.ranks;
    let w = 5 + 3 * n;
    let _ = write!(out, "        ");
    for c in 0..n {
        let _ = write!(out, "| {:<w$}", format!("chunk {c}"));
    }
    let _ = writeln!(out);
    let now: Vec<Vec<String>> = (0..n)
        .map(|r| (0..n).map(|c| held(mem, plan, chunks, r, c)).collect())
        .collect();
    for (r, row) in now.iter().enumerate() {
        let _ = write!(out, "  rank {r}");
        for (c, cell) in row.iter().enumerate() {
            let changed = mark && prev.get(r).and_then(|p| p.get(c)) != Some(cell);
            let shown = if changed {
                format!("{cell}*")
            } else {
                cell.clone()
            };
            let _ = write!(out, "| {shown:<w$}");
        }
        let _ = writeln!(out);
    }
    *prev = now;
}

/// Applies one group of parts (one step of one phase) to `mem` and returns
/// its lines: copies grouped per (rank, chunk) with their slices, reduces
/// likewise.
fn apply_group(mem: &mut SymMem, plan: &Plan, group: &[Part]) -> Vec<String> {
    let n = plan.shape.ranks;
    let mut lines: Vec<String> = Vec::new();
    let mut last: Option<(usize, usize, &'static str)> = None;
    for &(r, oi, pk) in group {
        let op = &plan.ops[r][oi];
        let part = interp::parts(r, op)[pk];
        let Some(e) = part.effect else {
            continue;
        };
        let chunk = part.label.chunk;
        let before = describe_effect(mem, &e, n);
        let _ = interp::apply(mem, &e);
        let (what, range, tag) = match e {
            Effect::Copy { from, src, to, dst }
                if from == to && matches!(src.buf, Buf::Scratch | Buf::Lines) =>
            {
                (
                    format!(
                        "rank {to} takes the received chunk {chunk} out of its slot: now {}",
                        value_line(mem, to, dst, n)
                    ),
                    dst.range.clone(),
                    "copy",
                )
            }
            Effect::Copy { from, src, to, dst } => (
                format!(
                    "rank {from} -> rank {to}: chunk {} = {before}{}",
                    chunk,
                    match dst.buf {
                        Buf::Scratch => "  (into scratch)",
                        Buf::Lines => "  (into its LL slot)",
                        _ => "  (overwrites)",
                    }
                ),
                src.range.clone(),
                "copy",
            ),
            Effect::Reduce { rank, dst, .. } => (
                format!(
                    "rank {rank} reduces the received chunk {} (reduce kernel): now {}",
                    chunk,
                    value_line(mem, rank, dst, n)
                ),
                dst.range.clone(),
                "reduce",
            ),
        };
        if last == Some((r, chunk, tag)) {
            // Another slice of the same chunk: add its range.
            if let Some(l) = lines.last_mut() {
                let _ = write!(l, " [{}..{})", range.start, range.end);
            }
        } else {
            lines.push(format!(
                "  {what}; slices: [{}..{})",
                range.start, range.end
            ));
            last = Some((r, chunk, tag));
        }
    }
    lines
}

/// Ring paths: grouped by phase and step, the synchronous picture a student
/// draws. Every dependency of the plan points backwards in this order, so it
/// is a valid execution order. Steps count from 0, as in the formulas and
/// the timeline's labels (RS0, AG0, ...).
fn render_steps(out: &mut String, plan: &Plan) {
    let s = plan.shape;
    let n = s.ranks;
    let _ = writeln!(
        out,
        "Rank r sends to rank (r+1) mod N. x_r is rank r's input; a cell lists the inputs combined in that chunk; * marks a cell the step changed."
    );
    let mut parts: Vec<Part> = Vec::new();
    for (r, ops) in plan.ops.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            for k in 0..interp::parts(r, op).len() {
                parts.push((r, i, k));
            }
        }
    }
    parts.sort_by_key(|p| step_key(plan, p));
    let mut mem = SymMem::new(plan);
    let layout_chunks = chunk_regions(plan);
    let _ = writeln!(out);
    let _ = writeln!(out, "Chunks:");
    for (c, reg) in layout_chunks.iter().enumerate() {
        let _ = writeln!(
            out,
            "  chunk {c}: elements {:>4}..{:<4} ({} elements)",
            reg.start,
            reg.end,
            reg.len()
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Start:");
    let mut prev = Vec::new();
    print_table(out, plan, &mem, &layout_chunks, &mut prev, false);
    let steps = schedule::steps(n);
    let span = if steps == 1 {
        "(the only step)".to_string()
    } else {
        format!("(steps 0-{})", steps - 1)
    };
    for group in parts.chunk_by(|a, b| {
        let (ka, kb) = (step_key(plan, a), step_key(plan, b));
        (ka.0, ka.1) == (kb.0, kb.1)
    }) {
        let (phase, step, ..) = step_key(plan, &group[0]);
        let lines = apply_group(&mut mem, plan, group);
        if let 2 | 3 = phase {
            let phase = if phase == 2 {
                Phase::ReduceScatter
            } else {
                Phase::AllGather
            };
            let _ = writeln!(out);
            let _ = writeln!(out, "{} step {step} {span}:", phase.label());
            for l in &lines {
                let _ = writeln!(out, "{l}");
            }
            print_table(out, plan, &mem, &layout_chunks, &mut prev, true);
        } else if !lines.is_empty() {
            let _ = writeln!(out);
            for l in &lines {
                let _ = writeln!(out, "{l}");
            }
        }
    }
}

/// Pipelined rings: rank 0's slices against time in the idealized schedule
/// ([`ideal`]), and the plain ring's time in the same units,
/// so that what the slices overlap is visible without a GPU.
fn render_slices(out: &mut String, plan: &Plan) -> Result<()> {
    let Some(spans) = ideal::schedule(plan) else {
        return Ok(());
    };
    let ops = &plan.ops[0];
    let unit = ops
        .iter()
        .find_map(|o| match &o.kind {
            OpKind::Copy { dst, .. } if o.label.phase.is_some() && !dst.is_empty() => {
                Some(dst.len())
            }
            _ => None,
        })
        .unwrap_or(1) as f64;
    let at = |t: f64| (t / unit).round() as usize;
    let mut rows: Vec<(usize, usize, String)> = Vec::new();
    for (op, sp) in ops.iter().zip(&spans[0]) {
        let Some(phase) = op.label.phase else {
            continue;
        };
        let what = match op.kind {
            OpKind::Copy { .. } => "copy  ",
            OpKind::Reduce { .. } => "reduce",
            _ => continue,
        };
        let tag = if phase == Phase::ReduceScatter {
            "RS"
        } else {
            "AG"
        };
        let name = format!(
            "{what} {tag}{} c{}.{}",
            op.label.step, op.label.chunk, op.label.slice
        );
        rows.push((at(sp.start), at(sp.end).max(at(sp.start) + 1), name));
    }
    rows.sort_by_key(|r| (r.0, r.1));
    let end = ideal::makespan(&spans);
    let units = at(end);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Slices x time on rank 0, an idealized schedule: copying or reducing one slice\n(here {} elements) takes one unit; the copy lane and the compute lane run at once\n(the copy engine and the SMs: two CUDA streams); every wait is the plan's, and\nnothing else costs time. C = a copy on the copy lane, R = a reduce on the compute lane.",
        unit as usize
    );
    if units > MAX_SLICE_UNITS {
        let _ = writeln!(
            out,
            "  (not drawn: {units} units, more than {MAX_SLICE_UNITS}; fewer ranks or elements draw it)"
        );
        rows.clear();
    } else {
        let _ = write!(out, "  {:<22}|", "op (step, chunk.slice)");
        for t in 0..units {
            let _ = write!(out, "{t:>3}");
        }
        let _ = writeln!(out);
    }
    for (a, b, name) in &rows {
        let mark = if name.starts_with("copy") { 'C' } else { 'R' };
        let _ = write!(out, "  {name:<22}|");
        for t in 0..units {
            let c = if (*a..*b).contains(&t) { mark } else { '.' };
            let _ = write!(out, "{c:>3}");
        }
        let _ = writeln!(out);
    }
    let plain: AlgoChoice = "ring".parse().map_err(Error::internal)?;
    let plain_end =
        ideal::schedule(&plan_of(&plain, &plan.shape)?).map(|s| ideal::makespan(&s) / unit);
    let _ = write!(
        out,
        "The call ends at {:.0} units (the last op of any rank)",
        end / unit
    );
    if let Some(p) = plain_end {
        let _ = write!(
            out,
            ";\nthe plain ring (whole chunks: a reduce waits for its whole chunk) ends at {p:.0}"
        );
    }
    let _ = writeln!(
        out,
        ".\nA real GPU adds a hand-off per slice (the alpha of `ringreduce theory`),\nwhich is why more slices do not always pay."
    );
    Ok(())
}

/// The chunk ranges of a ring plan, from its labels (first slice start to
/// last slice end of each chunk, in output coordinates of rank 0's view).
fn chunk_regions(plan: &Plan) -> Vec<std::ops::Range<usize>> {
    let s = plan.shape;
    let n = s.ranks;
    match s.collective {
        Collective::AllReduce => {
            let l = schedule::ChunkLayout::new(s.count, n, s.elem_size);
            (0..n).map(|c| l.range(c)).collect()
        }
        _ => (0..n).map(|c| c * s.count..(c + 1) * s.count).collect(),
    }
}

/// What rank r holds for chunk c: its output chunk where written, else its
/// input chunk.
fn held(
    mem: &SymMem,
    plan: &Plan,
    chunks: &[std::ops::Range<usize>],
    r: usize,
    c: usize,
) -> String {
    let s = plan.shape;
    let n = s.ranks;
    let range = chunks[c].clone();
    if range.is_empty() {
        return "(empty)".into();
    }
    let out = s.output(r);
    let out_region = match s.collective {
        Collective::ReduceScatter => {
            if c != r {
                let input = s.input(r);
                let reg = Region::new(
                    input.buf,
                    input.range.start + range.start..input.range.start + range.end,
                );
                return format!("({})", value_line(mem, r, &reg, n).replace("ALL", "-"));
            }
            out
        }
        _ => Region::new(
            out.buf,
            out.range.start + range.start..out.range.start + range.end,
        ),
    };
    let v = value_line(mem, r, &out_region, n);
    if v != "-" {
        return v;
    }
    if s.collective == Collective::AllReduce {
        let input = s.input(r);
        let reg = Region::new(
            input.buf,
            input.range.start + range.start..input.range.start + range.end,
        );
        return value_line(mem, r, &reg, n);
    }
    v
}

fn describe_effect(mem: &SymMem, e: &Effect<'_>, n: usize) -> String {
    match *e {
        Effect::Copy { from, src, .. } => value_line(mem, from, src, n),
        Effect::Reduce { rank, a, .. } => value_line(mem, rank, a, n),
    }
}

/// Other paths: op by op, in an issue order.
fn render_ops(out: &mut String, plan: &Plan) {
    let n = plan.ranks();
    let _ = writeln!(
        out,
        "These algorithms move whole buffers; x_r is rank r's input. Ops in issue order:"
    );
    if plan
        .ops
        .iter()
        .flatten()
        .any(|o| matches!(&o.kind, OpKind::Kernel(k) if k.kind == KernelKind::Exchange))
    {
        let _ = writeln!(
            out,
            "(Each exchange is ONE kernel per rank (ptx/reduce_<type>.ptx): it pushes its input
 into the peer's scratch with stores over NVLink, raises a flag in the peer's memory,
 waits for the peer's flag, then reduces. No copy call, no event.)"
        );
    }
    let Ok(order) = plan.issue_order() else {
        return;
    };
    let mut mem = SymMem::new(plan);
    let mut last_note = "";
    for (r, i, k) in order {
        let op = &plan.ops[r][i];
        let Some(e) = interp::parts(r, op)[k].effect else {
            continue;
        };
        if op.label.note != last_note {
            last_note = op.label.note;
            let _ = writeln!(out, "\n{last_note}:");
        }
        let before = describe_effect(&mem, &e, n);
        let _ = interp::apply(&mut mem, &e);
        match e {
            Effect::Copy { from, src, to, dst } if !src.is_empty() => {
                let who = if r == from { "pushes" } else { "pulls" };
                let _ = writeln!(
                    out,
                    "  rank {r} {who}: rank {from} {} [{}..{}) = {before} -> rank {to} {} [{}..{})",
                    src.buf.name(),
                    src.range.start,
                    src.range.end,
                    dst.buf.name(),
                    dst.range.start,
                    dst.range.end
                );
            }
            Effect::Reduce {
                rank,
                dst,
                a,
                b_rank,
                b,
                ..
            } if !dst.is_empty() => {
                let owner = if b_rank == rank {
                    String::new()
                } else {
                    format!("rank {b_rank}'s ")
                };
                let _ = writeln!(
                    out,
                    "  rank {rank} reduce kernel: {} = {} (op) {owner}{} [{}..{}) -> {}",
                    dst.buf.name(),
                    a.buf.name(),
                    b.buf.name(),
                    b.range.start,
                    b.range.end,
                    value_line(&mem, rank, dst, n)
                );
            }
            _ => {}
        }
    }
    let _ = writeln!(out, "\nEnd: every rank's output holds:");
    for r in 0..n {
        let _ = writeln!(
            out,
            "  rank {r}: {}",
            value_line(&mem, r, &plan.shape.output(r), n)
        );
    }
}

/// Run the plan on the CPU backend with exact inputs; a short report.
fn run_on_cpu<T: Element>(choice: &AlgoChoice, shape: &Shape, op: ReduceOp) -> Result<String> {
    let n = shape.ranks;
    let per_rank = shape.send_len().max(shape.input(0).len());
    let inputs: Vec<Vec<T>> = verify::make_inputs::<T>(Inputs::Exact, op, n, per_rank, 1)?;
    let mut cfg = EngineConfig::cpu(n);
    cfg.algo = choice.clone();
    let mut e = Engine::new(cfg)?;
    let sh = e.load(shape.collective, &inputs, shape.in_place)?;
    e.poison(&sh)?;
    e.run(None, &sh, op)?;
    let got = e.read_output(&sh)?;
    let v = match shape.collective {
        Collective::AllReduce => {
            verify::check(&got, &verify::reference(&inputs, op, Inputs::Exact))
        }
        Collective::ReduceScatter => {
            let refs = verify::reference_reduce_scatter(&inputs, op, Inputs::Exact);
            let mut total = verify::Verdict::default();
            for (r, rf) in refs.iter().enumerate() {
                let part = verify::check(std::slice::from_ref(&got[r]), rf);
                total.wrong.push(part.total_wrong());
            }
            total
        }
        Collective::AllGather => verify::check(&got, &verify::reference_all_gather(&inputs)),
        Collective::Broadcast { root } => {
            verify::check(&got, &verify::reference_broadcast(&inputs, root))
        }
    };
    let show = |v: &[T]| {
        let mut s: Vec<String> = v
            .iter()
            .take(12)
            .map(|x| format!("{}", x.to_f64()))
            .collect();
        if v.len() > 12 {
            s.push("...".into());
        }
        s.join(" ")
    };
    let mut out = String::new();
    let _ = writeln!(out, "The same plan on the CPU backend, with exact inputs:");
    for (r, v) in inputs.iter().enumerate() {
        let _ = writeln!(out, "  x{r}: {}", show(v));
    }
    let _ = writeln!(out, "  rank 0's output: {}", show(&got[0]));
    let _ = writeln!(
        out,
        "  {}",
        if v.passed() {
            "PASS: every rank's output is bitwise the expected result"
        } else {
            "FAIL"
        }
    );
    Ok(out)
}

#[cfg(test)]
mod tests;
