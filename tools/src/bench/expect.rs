//! What a checked call must produce ([`Expect`], from the inputs or
//! recomputed on the CPU) and the checks of the outputs against it, per
//! process and gathered over the job.

use crate::verify::{self, Inputs, Reference, Verdict};
use ringreduce::algo::AlgoChoice;
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::Collective;

/// What every rank's output must be.
pub enum Expect<T> {
    /// The same on every rank (all-reduce, all-gather).
    Same(Reference<T>),
    /// One per rank (reduce-scatter).
    PerRank(Vec<Reference<T>>),
}

/// The expected outputs of `collective` on `inputs`.
pub fn expected<T: Element>(
    collective: Collective,
    inputs: &[Vec<T>],
    op: ReduceOp,
    kind: Inputs,
) -> Expect<T> {
    match collective {
        Collective::AllReduce => Expect::Same(verify::reference(inputs, op, kind)),
        Collective::ReduceScatter => {
            Expect::PerRank(verify::reference_reduce_scatter(inputs, op, kind))
        }
        Collective::AllGather => Expect::Same(verify::reference_all_gather(inputs)),
        Collective::Broadcast { root } => Expect::Same(verify::reference_broadcast(inputs, root)),
    }
}

/// The expected outputs of `calls` in-place calls of `collective` back to
/// back on the same buffers (a graph replay runs [`GRAPH_CALLS`](ringreduce::engine::GRAPH_CALLS)): each call
/// works on what the previous one left. All-reduce reduces its own result;
/// reduce-scatter reduces chunk r of every rank's buffer, of which rank r's
/// already holds the previous result (NCCL's in-place layout: rank r's
/// output is chunk r of its input); all-gather leaves its inputs as they
/// were. Tolerances after the first call are those of random inputs (the
/// intermediate results are no longer exact-valued).
pub fn expected_in_place<T: Element>(
    collective: Collective,
    inputs: &[Vec<T>],
    op: ReduceOp,
    calls: usize,
) -> Expect<T> {
    let mut ins = inputs.to_vec();
    let mut r = expected(collective, &ins, op, Inputs::Exact);
    for _ in 1..calls {
        match (&r, collective) {
            (Expect::Same(rf), Collective::AllReduce) => {
                ins = vec![rf.expect.clone(); inputs.len()];
            }
            (Expect::PerRank(refs), _) => {
                for (k, rf) in refs.iter().enumerate() {
                    let c = rf.expect.len();
                    if let Some(dst) = ins.get_mut(k).and_then(|b| b.get_mut(k * c..(k + 1) * c)) {
                        dst.copy_from_slice(&rf.expect);
                    }
                }
            }
            _ => {}
        }
        r = expected(collective, &ins, op, Inputs::Random);
    }
    r
}

/// The outputs of `calls` in-place calls of `path` back to back, run on
/// the CPU backend (which executes the same plan, op for op, in the same
/// order of reduction): the reference for replays whose later calls read
/// what the earlier ones left in the buffer. Bitwise.
pub fn expected_on_cpu<T: Element>(
    path: &str,
    collective: Collective,
    inputs: &[Vec<T>],
    op: ReduceOp,
    calls: usize,
) -> Result<Expect<T>> {
    use ringreduce::engine::EngineConfig;
    let choice: AlgoChoice = path
        .parse()
        .map_err(|m| Error::BadArgument(format!("path {path} of the reference run: {m}")))?;
    let mut cpu = Engine::new(EngineConfig::cpu(inputs.len()))?;
    let shape = cpu.load(collective, inputs, true)?;
    for _ in 0..calls {
        cpu.run(Some(&choice), &shape, op)?;
    }
    let refs = cpu
        .read_output(&shape)?
        .into_iter()
        .map(|expect| Reference {
            expect,
            bound: None,
            bitwise: true,
            ranks: inputs.len(),
            op,
        })
        .collect();
    Ok(Expect::PerRank(refs))
}

/// Check every rank's output.
pub fn check_outputs<T: Element>(outputs: &[Vec<T>], e: &Expect<T>) -> Verdict {
    check_outputs_at(outputs, e, 0)
}

/// Check the outputs of ranks `base..` (a process of a multi-process job
/// holds only its own rank's).
pub fn check_outputs_at<T: Element>(outputs: &[Vec<T>], e: &Expect<T>, base: usize) -> Verdict {
    match e {
        Expect::Same(r) => verify::check(outputs, r).at_rank(base),
        Expect::PerRank(refs) => {
            let mut v = Verdict {
                bitwise: refs.iter().all(|r| r.bitwise),
                ..Verdict::default()
            };
            let refs = refs.get(base..).unwrap_or(&[]);
            for (r, (o, rf)) in outputs.iter().zip(refs).enumerate() {
                let r = r + base;
                let part = verify::check(std::slice::from_ref(o), rf);
                v.wrong.push(part.total_wrong());
                v.max_abs_err = v.max_abs_err.max(part.max_abs_err);
                v.max_rel_err = v.max_rel_err.max(part.max_rel_err);
                if v.first_wrong.is_none() {
                    v.first_wrong = part.first_wrong.map(|(_, i, g, w)| (r, i, g, w));
                }
            }
            v
        }
    }
}

/// Compare two sets of outputs (ringreduce vs NCCL).
pub fn compare_outputs<T: Element>(a: &[Vec<T>], b: &[Vec<T>], e: &Expect<T>) -> Verdict {
    compare_outputs_at(a, b, e, 0)
}

/// Compare the outputs of ranks `base..` (see [`check_outputs_at`]).
pub fn compare_outputs_at<T: Element>(
    a: &[Vec<T>],
    b: &[Vec<T>],
    e: &Expect<T>,
    base: usize,
) -> Verdict {
    match e {
        Expect::Same(r) => verify::compare(a, b, r).at_rank(base),
        Expect::PerRank(refs) => {
            let mut v = Verdict {
                bitwise: refs.iter().all(|r| r.bitwise),
                ..Verdict::default()
            };
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let r = i + base;
                let Some(rf) = refs.get(r) else { break };
                let part = verify::compare(std::slice::from_ref(x), std::slice::from_ref(y), rf);
                v.wrong.push(part.total_wrong());
                v.max_abs_err = v.max_abs_err.max(part.max_abs_err);
                if v.first_wrong.is_none() {
                    v.first_wrong = part.first_wrong.map(|(_, i, g, w)| (r, i, g, w));
                }
            }
            v
        }
    }
}

/// The verdict of every process of the job (in one process: `v`);
/// collective in a multi-process job.
pub fn gather_verdict(e: &Engine, v: Verdict) -> Result<Verdict> {
    if e.job_spec().is_none() {
        return Ok(v);
    }
    let all = e.gather(&v.encode(), "gathering the verdicts")?;
    let parts = all
        .iter()
        .map(|b| Verdict::decode(b).ok_or_else(|| Error::internal("a process sent a bad verdict")))
        .collect::<Result<Vec<_>>>()?;
    Ok(Verdict::join(parts))
}
