//! The collectives' specification, run on every backend: every data type,
//! op, collective, path, size, rank count and place; the host-slice, device
//! buffer and per-rank APIs; engine reuse and back-to-back launches.

use crate::common::{algo, checked, comm, engine, pass, rank_counts, verify_outputs, Ctx};
use crate::ensure;
use crate::harness::{Harness, TestResult};
use ringreduce::element::DataType;
use ringreduce::{AlgoChoice, BackendChoice, Collective, Element, Engine, Error, ReduceOp};
use ringreduce_tools::verify::{self, Inputs};
use std::time::{Duration, Instant};

/// Every path by name (`ring:pipeK` with a K that divides nothing evenly).
const PATHS: [&str; 13] = [
    "ring",
    "ring:naive",
    "ring:pipe2",
    "ring:pipe5",
    "ring:flag",
    "ring:ll",
    "ring:simple",
    "oneshot",
    "oneshot:fused",
    "oneshot:flag",
    "ps",
    "hier:2",
    "hier:3",
];

/// NCCL counts of the type matrix: all-reduce, and reduce-scatter /
/// all-gather (per-rank counts).
const AR_COUNTS: [usize; 4] = [0, 1, 5, 1003];
const RS_AG_COUNTS: [usize; 4] = [0, 1, 3, 257];

fn counts_of(c: Collective) -> [usize; 4] {
    if c == Collective::AllReduce {
        AR_COUNTS
    } else {
        RS_AG_COUNTS
    }
}

/// The ops a collective takes (all-gather: none, run as `sum`).
fn ops_of(c: Collective) -> Vec<ReduceOp> {
    if c.reduces() {
        ReduceOp::ALL.to_vec()
    } else {
        vec![ReduceOp::Sum]
    }
}

/// Paths the type matrix also runs on every shape they take ([`refusal`]
/// says which): the hierarchical all-reduce, two ranks per node.
const MATRIX_PATHS: [&str; 1] = ["hier:2"];

/// Every op of every collective at every matrix count, with `auto`,
/// `ring:pipe2` and [`MATRIX_PATHS`] where they run, in and out of place,
/// exact inputs: 0 wrong.
fn type_matrix<T: Element>(e: &mut Engine) -> Result<(), String> {
    for collective in Collective::ALL {
        for op in ops_of(collective) {
            for count in counts_of(collective) {
                let extra = MATRIX_PATHS.iter().map(|p| algo(p));
                for choice in [AlgoChoice::Auto, algo("ring:pipe2")]
                    .into_iter()
                    .chain(extra)
                {
                    for in_place in [false, true] {
                        let name = choice.name();
                        let extra = MATRIX_PATHS.contains(&name.as_str());
                        if extra && refusal(&name, collective, e.ranks()).is_some() {
                            continue;
                        }
                        checked::<T>(
                            e,
                            &choice,
                            collective,
                            count,
                            in_place,
                            op,
                            Inputs::Exact,
                            11,
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// What a path must answer for a shape: `None` if it must run it, or a
/// fragment of the reason it must give for refusing.
fn refusal(path: &str, collective: Collective, ranks: usize) -> Option<&'static str> {
    if path == "ring:flag" {
        return if collective != Collective::AllReduce {
            Some("all-reduce only")
        } else if ranks > 2 {
            Some("two-rank")
        } else {
            None
        };
    }
    if path == "ring:ll" || path == "ring:simple" {
        return (collective != Collective::AllReduce).then_some("all-reduce only");
    }
    if path.starts_with("ring") {
        return None; // the ring does every collective, any shape
    }
    if path == "oneshot:fused" {
        return None; // every collective, in and out of place
    }
    if collective != Collective::AllReduce {
        return Some("all-reduce only");
    }
    if let Some(g) = path.strip_prefix("hier:") {
        let g: usize = g.parse().unwrap_or(0);
        return (g == 0 || ranks % g != 0).then_some("do not divide");
    }
    match path {
        "oneshot:flag" if ranks > 2 => Some("two-rank"),
        _ => None,
    }
}

/// Run `path` on a shape, or check its refusal names the path and the
/// reason.
#[allow(clippy::too_many_arguments)]
fn path_case<T: Element>(
    e: &mut Engine,
    path: &str,
    collective: Collective,
    count: usize,
    in_place: bool,
    op: ReduceOp,
    seed: u64,
) -> Result<(), String> {
    let choice = algo(path);
    let shape = e.shape::<T>(collective, count, in_place);
    let n = e.ranks();
    let want = refusal(path, collective, n);
    match (choice.resolve(&shape), want) {
        (Ok(a), None) => {
            ensure!(a.name() == path, "{path} resolved to {}", a.name());
            checked::<T>(e, &choice, collective, count, in_place, op, Inputs::Exact, seed)
        }
        (Ok(_), Some(why)) => Err(format!(
            "{path} accepted {collective} of {count} on {n} ranks (in place: {in_place}); it must refuse ({why})"
        )),
        (Err(err), None) => Err(format!(
            "{path} refused {collective} of {count} on {n} ranks (in place: {in_place}): {err}"
        )),
        (Err(err), Some(why)) => {
            let msg = err.to_string();
            ensure!(
                matches!(err, Error::BadArgument(_)),
                "refusal is not a BadArgument: {err:?}"
            );
            ensure!(
                msg.contains(path) && msg.contains("cannot run") && msg.contains(why),
                "the refusal must name the path ({path}) and the reason ({why:?}): {msg}"
            );
            // The engine refuses the call the same way, and still works after.
            let r = e.launch(Some(&choice), &shape, op);
            ensure!(r.is_err(), "{path}: the engine launched a refused shape");
            Ok(())
        }
    }
}

/// Run `f` with the engine's calls typed as the host type of `dtype`.
fn with_type(
    e: &mut Engine,
    dtype: DataType,
    f: &dyn Fn(&mut dyn AnyEngine) -> Result<(), String>,
) -> Result<(), String> {
    ringreduce::with_element!(dtype, T => f(&mut Typed::<T>(e, std::marker::PhantomData)))
}

/// The engine with its calls typed as `T`.
struct Typed<'a, T>(&'a mut Engine, std::marker::PhantomData<T>);

/// A type-erased view of `Engine` for the per-type bodies above.
trait AnyEngine {
    fn type_matrix(&mut self) -> Result<(), String>;
    #[allow(clippy::too_many_arguments)]
    fn checked(
        &mut self,
        choice: &AlgoChoice,
        collective: Collective,
        count: usize,
        in_place: bool,
        op: ReduceOp,
        kind: Inputs,
        seed: u64,
    ) -> Result<(), String>;
}

impl<T: Element> AnyEngine for Typed<'_, T> {
    fn type_matrix(&mut self) -> Result<(), String> {
        type_matrix::<T>(self.0)
    }
    fn checked(
        &mut self,
        choice: &AlgoChoice,
        collective: Collective,
        count: usize,
        in_place: bool,
        op: ReduceOp,
        kind: Inputs,
        seed: u64,
    ) -> Result<(), String> {
        checked::<T>(self.0, choice, collective, count, in_place, op, kind, seed)
    }
}

fn dedup(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Rank counts of the full type matrix: few, to keep the CPU run fast (1:
/// no peers; 2: commutative; 3: not a power of two; 4: a power of two).
fn matrix_ranks(b: BackendChoice) -> Vec<usize> {
    match b {
        BackendChoice::Cuda => {
            let r = rank_counts(b);
            dedup(vec![r[0], r[r.len() - 1]])
        }
        _ => vec![1, 2, 3, 4],
    }
}

/// Rank counts of the path sweep: 1..=6 on the CPU.
fn path_ranks(b: BackendChoice) -> Vec<usize> {
    match b {
        BackendChoice::Cuda => rank_counts(b),
        _ => (1..=6).collect(),
    }
}

/// Exact inputs for every rank (`count` elements each).
fn exact<T: Element>(op: ReduceOp, ranks: usize, count: usize, seed: u64) -> Vec<Vec<T>> {
    verify::make_inputs::<T>(Inputs::Exact, op, ranks, count, seed).expect("inputs")
}

/// The all-reduce reference of `inputs`, bitwise (exact inputs).
fn reduced<T: Element>(inputs: &[Vec<T>], op: ReduceOp) -> Vec<T> {
    verify::reference(inputs, op, Inputs::Exact).expect
}

/// The rank list of a per-rank timeout ("... for ranks [1, 2] to join ...").
fn missing_ranks(msg: &str) -> Option<Vec<usize>> {
    // "... for rank 2 to join ..." or "... for ranks 0, 1 and 3 to join ...".
    let before = msg.split(" to join").next()?;
    let list = before.rsplit(" for ").next()?;
    let list = list
        .strip_prefix("ranks ")
        .or_else(|| list.strip_prefix("rank "))?;
    list.replace(" and ", ", ")
        .split(',')
        .map(|x| x.trim().parse().ok())
        .collect()
}

/// Per-rank calls on `ranks[..callers]` only; every caller's outcome.
fn call_without_the_rest(
    ranks: &mut [ringreduce::Communicator],
    callers: usize,
) -> Vec<Result<ringreduce::CallInfo, Error>> {
    std::thread::scope(|s| {
        let t: Vec<_> = ranks[..callers]
            .iter_mut()
            .map(|h| {
                s.spawn(move || {
                    let mut o = vec![0; 4];
                    h.all_reduce(&[1; 4], &mut o, ReduceOp::Sum)
                })
            })
            .collect();
        t.into_iter().map(|t| t.join().expect("join")).collect()
    })
}

pub fn register(h: &mut Harness) {
    test_backend!(
        h,
        "backends::every_type_op_collective_exact",
        1,
        |b: BackendChoice| -> TestResult {
            // Every data type x every op x every collective (all-gather: sum
            // only) x counts x {auto, ring:pipe2} x {out of place, in place}.
            for n in matrix_ranks(b) {
                let mut e = engine(b, n)?;
                for dtype in DataType::ALL {
                    let r = with_type(&mut e, dtype, &|t| t.type_matrix());
                    r.ctx(format!("{n} ranks, {}", dtype.name()))?;
                }
            }
            // f32 sum on every rank count.
            for n in rank_counts(b) {
                let mut e = engine(b, n)?;
                for collective in Collective::ALL {
                    for count in counts_of(collective) {
                        for choice in [AlgoChoice::Auto, algo("ring:pipe2")] {
                            for in_place in [false, true] {
                                checked::<f32>(
                                    &mut e,
                                    &choice,
                                    collective,
                                    count,
                                    in_place,
                                    ReduceOp::Sum,
                                    Inputs::Exact,
                                    3,
                                )?;
                            }
                        }
                    }
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::every_path_counts_ranks_places",
        1,
        |b: BackendChoice| -> TestResult {
            // Every path x every collective x counts x ranks x places, for
            // f32 sum and int32 prod; a path that refuses a shape must say
            // which path and why, and must refuse exactly the shapes it
            // cannot run.
            const COUNTS: [usize; 7] = [0, 1, 3, 4, 5, 1023, 100_003];
            for n in path_ranks(b) {
                let mut f = engine(b, n)?;
                for path in PATHS {
                    for collective in Collective::ALL {
                        for count in COUNTS {
                            for in_place in [false, true] {
                                path_case::<f32>(
                                    &mut f,
                                    path,
                                    collective,
                                    count,
                                    in_place,
                                    ReduceOp::Sum,
                                    5,
                                )?;
                            }
                        }
                    }
                }
                let mut i = f;
                for path in PATHS {
                    for collective in Collective::ALL {
                        for count in COUNTS {
                            for in_place in [false, true] {
                                path_case::<i32>(
                                    &mut i,
                                    path,
                                    collective,
                                    count,
                                    in_place,
                                    ReduceOp::Prod,
                                    6,
                                )?;
                            }
                        }
                    }
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::random_floats_within_tolerance",
        1,
        |b: BackendChoice| -> TestResult {
            // Random inputs: the result depends on the reduction order, so
            // each element must lie within the order bound of its type.
            let ranks = match b {
                BackendChoice::Cuda => dedup(vec![3, 5, rank_counts(b)[0]]),
                _ => vec![3, 5],
            };
            for n in ranks {
                let mut e = engine(b, n)?;
                for dtype in [DataType::Float, DataType::Half, DataType::Bfloat16] {
                    let r = with_type(&mut e, dtype, &|t| {
                        for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Prod] {
                            for count in [1, 1003, 65_537] {
                                for in_place in [false, true] {
                                    for path in ["auto", "ring", "ring:pipe5", "oneshot", "ps"] {
                                        t.checked(
                                            &algo(path),
                                            Collective::AllReduce,
                                            count,
                                            in_place,
                                            op,
                                            Inputs::Random,
                                            42,
                                        )?;
                                    }
                                    t.checked(
                                        &AlgoChoice::Auto,
                                        Collective::ReduceScatter,
                                        count,
                                        in_place,
                                        op,
                                        Inputs::Random,
                                        43,
                                    )?;
                                }
                            }
                        }
                        Ok(())
                    });
                    r?;
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::large_auto_call",
        1,
        |b: BackendChoice| -> TestResult {
            // CPU: 16 Mi floats (64 MiB per rank) on 2 ranks; CUDA: 64 Mi
            // floats (256 MiB per rank) on the GPU count and twice it.
            let (count, ranks) = match b {
                BackendChoice::Cuda => {
                    let g = crate::common::gpu_count();
                    (64 << 20, dedup(vec![g, (2 * g).min(8)]))
                }
                _ => (16 << 20, vec![2]),
            };
            for n in ranks {
                let mut e = engine(b, n)?;
                for in_place in [false, true] {
                    checked::<f32>(
                        &mut e,
                        &AlgoChoice::Auto,
                        Collective::AllReduce,
                        count,
                        in_place,
                        ReduceOp::Sum,
                        Inputs::Exact,
                        3,
                    )?;
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::engine_reuse_grow_shrink_types",
        1,
        |b: BackendChoice| -> TestResult {
            // One engine: sizes grow and shrink, the collective, element type
            // (the call's type parameter: nothing converts the engine), op,
            // place and path change between calls; every
            // result is checked.
            use Collective::*;
            let n = match b {
                BackendChoice::Cuda => rank_counts(b)[0],
                _ => 3,
            };
            let steps: Vec<(DataType, Collective, usize, ReduceOp, bool, &str)> = vec![
                (DataType::Float, AllReduce, 10, ReduceOp::Sum, false, "ring"),
                (
                    DataType::Float,
                    AllReduce,
                    300_001,
                    ReduceOp::Sum,
                    true,
                    "auto",
                ),
                (
                    DataType::Float,
                    ReduceScatter,
                    7,
                    ReduceOp::Max,
                    false,
                    "ring:pipe2",
                ),
                (
                    DataType::Int32,
                    AllGather,
                    100_000,
                    ReduceOp::Sum,
                    false,
                    "ring",
                ),
                (
                    DataType::Int32,
                    AllReduce,
                    0,
                    ReduceOp::Prod,
                    true,
                    "oneshot",
                ),
                (DataType::Half, AllReduce, 16, ReduceOp::Min, false, "ps"),
                (
                    DataType::Half,
                    ReduceScatter,
                    50_000,
                    ReduceOp::Sum,
                    true,
                    "auto",
                ),
                (
                    DataType::Double,
                    AllReduce,
                    1003,
                    ReduceOp::Avg,
                    false,
                    "oneshot",
                ),
                (
                    DataType::Int8,
                    AllGather,
                    3,
                    ReduceOp::Sum,
                    true,
                    "ring:naive",
                ),
                (DataType::Float, AllReduce, 5, ReduceOp::Prod, false, "auto"),
                (
                    DataType::Float,
                    AllReduce,
                    400_000,
                    ReduceOp::Max,
                    false,
                    "ring:pipe5",
                ),
                (
                    DataType::Uint64,
                    ReduceScatter,
                    1,
                    ReduceOp::Min,
                    false,
                    "ring",
                ),
                (DataType::Float, AllReduce, 10, ReduceOp::Sum, true, "ring"),
            ];
            let mut e = engine(b, n)?;
            for (i, (dtype, coll, count, op, in_place, path)) in steps.into_iter().enumerate() {
                let r = with_type(&mut e, dtype, &|t| {
                    t.checked(
                        &algo(path),
                        coll,
                        count,
                        in_place,
                        op,
                        Inputs::Exact,
                        i as u64,
                    )
                });
                r.ctx(format!("step {i}"))?;
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::many_launches_one_synchronize",
        1,
        |b: BackendChoice| -> TestResult {
            let ranks = match b {
                BackendChoice::Cuda => dedup(vec![2, rank_counts(b)[0]]),
                _ => vec![2, 3],
            };
            for n in ranks {
                let mut e = engine(b, n)?;
                // (1) A burst per path and size: load, 7 launches, one
                // synchronize, check.
                for (count, path) in [
                    (1000, "oneshot"),
                    (4096, "oneshot"),
                    (1000, "ring:pipe2"),
                    (1000, "oneshot"),
                    (999, "oneshot:fused"),
                    (999, "oneshot"),
                    (999, "oneshot:flag"),
                    (100_003, "oneshot:flag"),
                    (5, "oneshot:flag"),
                    (5, "oneshot"),
                    (4096, "oneshot:flag"),
                    (4096, "ring:flag"),
                    (100_003, "ring:flag"),
                    (5, "ring:flag"),
                ] {
                    if (path == "oneshot:flag" || path == "ring:flag") && n > 2 {
                        continue;
                    }
                    let inputs = exact::<f32>(ReduceOp::Sum, n, count, 5);
                    let shape = e.load(Collective::AllReduce, &inputs, false).ctx("load")?;
                    e.poison(&shape).ctx("poison")?;
                    for _ in 0..7 {
                        e.launch(Some(&algo(path)), &shape, ReduceOp::Sum)
                            .ctx(path)?;
                    }
                    e.synchronize().ctx("synchronize")?;
                    let out = e.read_output(&shape).ctx("read")?;
                    verify_outputs(
                        &format!("{n} ranks {path} x7 count {count}"),
                        Collective::AllReduce,
                        &inputs,
                        &out,
                        ReduceOp::Sum,
                        Inputs::Exact,
                    )?;
                }
                // (2) One stream of launches of different paths and sizes on
                // the same buffers, chained one-shots interleaved with ring
                // calls, then one synchronize: every call computes a prefix
                // of the same reduction, so the output is the full one.
                let full = 4096;
                let inputs = exact::<f32>(ReduceOp::Sum, n, full, 8);
                let shape = e.load(Collective::AllReduce, &inputs, false).ctx("load")?;
                e.poison(&shape).ctx("poison")?;
                let mut seq: Vec<(usize, &str)> = vec![
                    (full, "oneshot"),
                    (full, "oneshot"),
                    (full, "oneshot"),
                    (1000, "ring"),
                    (1000, "oneshot"),
                    (1000, "oneshot"),
                    (full, "ring:pipe2"),
                    (999, "oneshot"),
                    (full, "oneshot"),
                    (full, "oneshot"),
                    (5, "ps"),
                    (full, "oneshot:fused"),
                    (3, "oneshot"),
                    (full, "oneshot"),
                ];
                if n == 2 {
                    seq.extend([
                        (full, "oneshot:flag"),
                        (full, "oneshot:flag"),
                        (17, "oneshot:flag"),
                        (full, "ring"),
                        (full, "oneshot:flag"),
                        (full, "oneshot"),
                        (full, "oneshot:flag"),
                        (full, "oneshot:flag"),
                        (full, "ring:flag"),
                        (full, "ring:flag"),
                        (full, "oneshot:flag"),
                        (17, "ring:flag"),
                        (full, "ring:flag"),
                    ]);
                }
                for (count, path) in &seq {
                    let s = e.shape::<f32>(Collective::AllReduce, *count, false);
                    e.launch(Some(&algo(path)), &s, ReduceOp::Sum)
                        .ctx(format!("{path} count {count}"))?;
                }
                e.synchronize().ctx("synchronize")?;
                let out = e.read_output(&shape).ctx("read")?;
                verify_outputs(
                    &format!("{n} ranks, mixed stream"),
                    Collective::AllReduce,
                    &inputs,
                    &out,
                    ReduceOp::Sum,
                    Inputs::Exact,
                )?;
                let send = e.read_input(&shape).ctx("read input")?;
                ensure!(send == inputs, "{n} ranks: a send buffer changed");
                // (3) In place: each call multiplies the buffers by n, so
                // after k calls without a synchronize every rank holds
                // n^(k-1) times the sum, exactly (small integers).
                for (count, path) in [
                    (1000, "oneshot:flag"),
                    (100_000, "oneshot:flag"),
                    (3, "oneshot:flag"),
                    (1000, "oneshot"),
                    (1_000_003, "oneshot:flag"),
                    (777, "ring"),
                ] {
                    if path == "oneshot:flag" && n > 2 {
                        continue;
                    }
                    let calls = 5;
                    let inputs = exact::<f32>(ReduceOp::Sum, n, count, 9);
                    let reference = verify::reference(&inputs, ReduceOp::Sum, Inputs::Exact)
                        .scaled((n as f64).powi(calls - 1));
                    let shape = e.load(Collective::AllReduce, &inputs, true).ctx("load")?;
                    for _ in 0..calls {
                        e.launch(Some(&algo(path)), &shape, ReduceOp::Sum)
                            .ctx(path)?;
                    }
                    e.synchronize().ctx("synchronize")?;
                    let out = e.read_output(&shape).ctx("read")?;
                    let v = verify::check(&out, &reference);
                    ensure!(
                        v.passed(),
                        "{n} ranks {path} x{calls} in place count {count}: {:?}",
                        v.first_wrong
                    );
                }
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::host_slice_api",
        1,
        |b: BackendChoice| -> TestResult {
            let n = match b {
                BackendChoice::Cuda => rank_counts(b)[0].max(2),
                _ => 3,
            };
            let c = 1001;
            let mut e = comm(b, n)?;
            let op = ReduceOp::Sum;
            // all_reduce with vectors.
            let send = exact::<f32>(op, n, c, 1);
            let want = reduced(&send, op);
            let mut recv = vec![vec![0.0f32; c]; n];
            let info = e.all_reduce(&send, &mut recv, op).ctx("all_reduce")?;
            ensure!(recv.iter().all(|v| *v == want), "all_reduce (Vec) wrong");
            ensure!(
                !info.path.as_str().is_empty() && info.traffic.len() == n,
                "call info: {info:?}"
            );
            ensure!(
                n == 1 || info.traffic.iter().all(|t| t.sent > 0 && t.received > 0),
                "traffic not counted: {info:?}"
            );
            // all_reduce with slices of one allocation each side.
            let flat_in: Vec<f32> = send.concat();
            let ins: Vec<&[f32]> = flat_in.chunks(c).collect();
            let mut flat_out = vec![0.0f32; n * c];
            {
                let mut outs: Vec<&mut [f32]> = flat_out.chunks_mut(c).collect();
                e.all_reduce(&ins, &mut outs, op)
                    .ctx("all_reduce (slices)")?;
            }
            ensure!(
                flat_out.chunks(c).all(|v| v == want.as_slice()),
                "all_reduce (slices) wrong"
            );
            // in place, vectors and slices.
            let mut bufs = send.clone();
            e.all_reduce_in_place(&mut bufs, op)
                .ctx("all_reduce_in_place")?;
            ensure!(bufs.iter().all(|v| *v == want), "all_reduce_in_place wrong");
            let mut flat = flat_in.clone();
            {
                let mut s: Vec<&mut [f32]> = flat.chunks_mut(c).collect();
                e.all_reduce_in_place(&mut s, op)
                    .ctx("all_reduce_in_place (slices)")?;
            }
            ensure!(
                flat.chunks(c).all(|v| v == want.as_slice()),
                "all_reduce_in_place (slices) wrong"
            );

            // reduce_scatter: n*c in, c out (chunk r of the reduction).
            let ei = &mut e;
            let op = ReduceOp::Max;
            let rs_in = exact::<i32>(op, n, n * c, 2);
            let rs_want = reduced(&rs_in, op);
            let mut rs_out = vec![vec![0i32; c]; n];
            ei.reduce_scatter(&rs_in, &mut rs_out, op)
                .ctx("reduce_scatter")?;
            for r in 0..n {
                ensure!(
                    rs_out[r] == rs_want[r * c..(r + 1) * c],
                    "reduce_scatter rank {r} wrong"
                );
            }
            verify_outputs(
                "reduce_scatter",
                Collective::ReduceScatter,
                &rs_in,
                &rs_out,
                op,
                Inputs::Exact,
            )?;
            let mut flat_rs = vec![0i32; n * c];
            {
                let ins: Vec<&[i32]> = rs_in.iter().map(Vec::as_slice).collect();
                let mut outs: Vec<&mut [i32]> = flat_rs.chunks_mut(c).collect();
                ei.reduce_scatter(&ins, &mut outs, op)
                    .ctx("reduce_scatter (slices)")?;
            }
            ensure!(flat_rs == rs_want, "reduce_scatter (slices) wrong");
            // reduce_scatter in place (NCCL): rank r's slice r holds chunk r.
            let mut rs_bufs = rs_in.clone();
            ei.reduce_scatter_in_place(&mut rs_bufs, op)
                .ctx("reduce_scatter_in_place")?;
            for r in 0..n {
                ensure!(
                    rs_bufs[r][r * c..(r + 1) * c] == rs_want[r * c..(r + 1) * c],
                    "reduce_scatter_in_place: rank {r}'s slice {r} is not chunk {r} of the reduction"
                );
            }
            // all_gather: c in, n*c out.
            let ag_in = exact::<i32>(ReduceOp::Sum, n, c, 3);
            let ag_want: Vec<i32> = ag_in.concat();
            let mut ag_out = vec![vec![0i32; n * c]; n];
            ei.all_gather(&ag_in, &mut ag_out).ctx("all_gather")?;
            ensure!(ag_out.iter().all(|v| *v == ag_want), "all_gather wrong");
            let mut flat_ag = vec![0i32; n * n * c];
            {
                let ins: Vec<&[i32]> = ag_in.iter().map(Vec::as_slice).collect();
                let mut outs: Vec<&mut [i32]> = flat_ag.chunks_mut(n * c).collect();
                ei.all_gather(&ins, &mut outs).ctx("all_gather (slices)")?;
            }
            ensure!(
                flat_ag.chunks(n * c).all(|v| v == ag_want.as_slice()),
                "all_gather (slices) wrong"
            );
            // all_gather in place (NCCL): slice r of rank r's buffer is its input.
            let mut ag_bufs: Vec<Vec<i32>> = (0..n)
                .map(|r| {
                    let mut v = vec![-77i32; n * c];
                    v[r * c..(r + 1) * c].copy_from_slice(&ag_in[r]);
                    v
                })
                .collect();
            ei.all_gather_in_place(&mut ag_bufs)
                .ctx("all_gather_in_place")?;
            ensure!(
                ag_bufs.iter().all(|v| *v == ag_want),
                "all_gather_in_place wrong"
            );

            // Length errors: typed, naming the rank; the engine works after.
            if n >= 2 {
                let mut bad = vec![vec![0i32; 10]; n];
                bad[n - 1].pop();
                let r = ei.all_reduce_in_place(&mut bad, ReduceOp::Sum);
                ensure!(
                    matches!(r, Err(Error::BufferSize { rank, expected: 10, found: 9, .. }) | Err(Error::LengthMismatch { rank, expected: 10, found: 9 }) if rank == n - 1),
                    "unequal in-place lengths: {r:?}"
                );
                let send = vec![vec![1i32; 8]; n];
                let mut recv = vec![vec![0i32; 8]; n];
                recv[1] = vec![0; 7];
                let r = ei.all_reduce(&send, &mut recv, ReduceOp::Sum);
                ensure!(
                    matches!(
                        r,
                        Err(Error::BufferSize {
                            rank: 1,
                            expected: 8,
                            found: 7,
                            ..
                        })
                    ),
                    "short recv: {r:?}"
                );
                let mut recv = vec![vec![0i32; 8]; n - 1];
                let r = ei.all_reduce(&send, &mut recv, ReduceOp::Sum);
                ensure!(
                    matches!(r, Err(Error::WrongBufferCount { .. })),
                    "one recv missing: {r:?}"
                );
                let rs_send = vec![vec![1i32; n * 4 + 1]; n];
                let mut rs_recv = vec![vec![0i32; 4]; n];
                let r = ei.reduce_scatter(&rs_send, &mut rs_recv, ReduceOp::Sum);
                ensure!(
                    r.is_err(),
                    "reduce_scatter of {} elements on {n} ranks accepted",
                    n * 4 + 1
                );
                let mut rs_bufs = vec![vec![1i32; n * 4 + 1]; n];
                let r = ei.reduce_scatter_in_place(&mut rs_bufs, ReduceOp::Sum);
                ensure!(
                    r.is_err(),
                    "reduce_scatter_in_place of {} elements on {n} ranks accepted",
                    n * 4 + 1
                );
                let mut ag_recv = vec![vec![0i32; n * 4 - 1]; n];
                let r = ei.all_gather(&vec![vec![1i32; 4]; n], &mut ag_recv);
                ensure!(
                    matches!(r, Err(Error::BufferSize { .. })),
                    "short all_gather recv: {r:?}"
                );
                let mut ag_bufs = vec![vec![1i32; n * 4 + 1]; n];
                let r = ei.all_gather_in_place(&mut ag_bufs);
                ensure!(
                    r.is_err(),
                    "all_gather_in_place of {} elements on {n} ranks accepted",
                    n * 4 + 1
                );
                let mut ok = vec![vec![2i32; 5]; n];
                ei.all_reduce_in_place(&mut ok, ReduceOp::Sum)
                    .ctx("after the errors")?;
                ensure!(
                    ok.iter().all(|v| v.iter().all(|&x| x == 2 * n as i32)),
                    "wrong after the errors"
                );
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::device_buffers",
        1,
        |b: BackendChoice| -> TestResult {
            let n = match b {
                BackendChoice::Cuda => rank_counts(b)[0].max(2),
                _ => 3,
            };
            let mut e = engine(b, n)?;
            let c = 1003;
            let op = ReduceOp::Sum;
            let send = e.alloc(c).ctx("alloc")?;
            let recv = e.alloc(c).ctx("alloc")?;
            ensure!(send.len() == c && !send.is_empty(), "len");
            let inputs = exact::<f32>(op, n, c, 4);
            for r in 0..n {
                e.write_buffer(&send, r, &inputs[r]).ctx("write_buffer")?;
            }
            let info = e
                .all_reduce_device(&send, &recv, c, op)
                .ctx("all_reduce_device")?;
            ensure!(!info.path.as_str().is_empty(), "no path in {info:?}");
            let outs: Vec<Vec<f32>> = (0..n)
                .map(|r| e.read_buffer(&recv, r))
                .collect::<Result<_, _>>()
                .ctx("read_buffer")?;
            verify_outputs(
                "all_reduce_device",
                Collective::AllReduce,
                &inputs,
                &outs,
                op,
                Inputs::Exact,
            )?;
            for r in 0..n {
                ensure!(
                    e.read_buffer(&send, r).ctx("read")? == inputs[r],
                    "rank {r}'s send buffer changed"
                );
            }
            // A count below the buffers' length uses their start.
            let part = 500;
            let small: Vec<Vec<f32>> = inputs.iter().map(|v| v[..part].to_vec()).collect();
            let poison = vec![f32::NAN; c];
            for r in 0..n {
                e.write_buffer(&recv, r, &poison).ctx("write")?;
            }
            e.all_reduce_device(&send, &recv, part, op).ctx("prefix")?;
            for r in 0..n {
                let got = e.read_buffer(&recv, r).ctx("read")?;
                ensure!(
                    got[..part] == reduced(&small, op)[..],
                    "prefix call wrong on rank {r}"
                );
                ensure!(
                    got[part..].iter().all(|x| x.is_nan()),
                    "prefix call wrote beyond its count on rank {r}"
                );
            }
            // In place: the same buffer as send and recv.
            e.all_reduce_device(&send, &send, c, op).ctx("in place")?;
            let want = reduced(&inputs, op);
            for r in 0..n {
                ensure!(
                    e.read_buffer(&send, r).ctx("read")? == want,
                    "in-place device all-reduce wrong on rank {r}"
                );
            }
            // Reduce-scatter and all-gather on device buffers, both places.
            let rs_in = exact::<f32>(op, n, n * 7, 5);
            let rs_want = reduced(&rs_in, op);
            let big = e.alloc(n * 7).ctx("alloc")?;
            let out7 = e.alloc(7).ctx("alloc")?;
            for r in 0..n {
                e.write_buffer(&big, r, &rs_in[r]).ctx("write")?;
            }
            e.collective_device(Collective::ReduceScatter, &big, &out7, 7, op)
                .ctx("reduce-scatter")?;
            for r in 0..n {
                ensure!(
                    e.read_buffer(&out7, r).ctx("read")? == rs_want[r * 7..(r + 1) * 7],
                    "device reduce-scatter rank {r}"
                );
            }
            e.collective_device(Collective::ReduceScatter, &big, &big, 7, op)
                .ctx("reduce-scatter in place")?;
            for r in 0..n {
                let got = e.read_buffer(&big, r).ctx("read")?;
                ensure!(
                    got[r * 7..(r + 1) * 7] == rs_want[r * 7..(r + 1) * 7],
                    "device reduce-scatter in place rank {r}"
                );
            }
            let ag_in = exact::<f32>(op, n, 7, 6);
            for r in 0..n {
                e.write_buffer(&out7, r, &ag_in[r]).ctx("write")?;
            }
            e.collective_device(Collective::AllGather, &out7, &big, 7, op)
                .ctx("all-gather")?;
            for r in 0..n {
                ensure!(
                    e.read_buffer(&big, r).ctx("read")? == ag_in.concat(),
                    "device all-gather rank {r}"
                );
            }
            for r in 0..n {
                let mut v = vec![0.5f32; n * 7];
                v[r * 7..(r + 1) * 7].copy_from_slice(&ag_in[r]);
                e.write_buffer(&big, r, &v).ctx("write")?;
            }
            e.collective_device(Collective::AllGather, &big, &big, 7, op)
                .ctx("all-gather in place")?;
            for r in 0..n {
                ensure!(
                    e.read_buffer(&big, r).ctx("read")? == ag_in.concat(),
                    "device all-gather in place rank {r}"
                );
            }
            // Errors: a buffer of another engine, too-small buffers, too
            // much data for a buffer.
            let mut other = engine(b, n)?;
            let foreign = other.alloc(c).ctx("alloc on the other engine")?;
            let r = e.all_reduce_device(&foreign, &recv, c, op);
            ensure!(
                matches!(r, Err(Error::BadArgument(ref m)) if m.contains("another engine")),
                "foreign send buffer: {r:?}"
            );
            let r = e.all_reduce_device(&send, &foreign, c, op);
            ensure!(r.is_err(), "foreign recv buffer accepted");
            ensure!(
                e.write_buffer(&foreign, 0, &[1.0]).is_err(),
                "write to a foreign buffer accepted"
            );
            ensure!(
                e.read_buffer(&foreign, 0).is_err(),
                "read of a foreign buffer accepted"
            );
            let r = e.all_reduce_device(&send, &out7, c, op);
            ensure!(
                matches!(r, Err(Error::BufferSize { .. })),
                "too-small recv: {r:?}"
            );
            let r = e.all_reduce_device(&out7, &recv, c, op);
            ensure!(
                matches!(r, Err(Error::BufferSize { .. })),
                "too-small send: {r:?}"
            );
            let r = e.collective_device(Collective::AllGather, &out7, &out7, 7, op);
            ensure!(
                matches!(r, Err(Error::BufferSize { .. })),
                "too-small in-place all-gather buffer: {r:?}"
            );
            let r = e.write_buffer(&out7, 0, &[0.0; 8]);
            ensure!(
                matches!(r, Err(Error::BufferSize { .. })),
                "8 elements into a buffer of 7: {r:?}"
            );
            // Free, and the engine still works.
            for buf in [send, recv, big, out7] {
                e.free(buf).ctx("free")?;
            }
            ensure!(
                e.free(foreign).is_err(),
                "freeing another engine's buffer accepted"
            );
            checked::<f32>(
                &mut e,
                &AlgoChoice::Auto,
                Collective::AllReduce,
                1000,
                false,
                op,
                Inputs::Exact,
                1,
            )?;
            pass()
        }
    );

    test_backend!(
        h,
        "backends::per_rank_call_style",
        1,
        // One handle per rank thread (the library's tests/api/comm.rs tests the
        // communicator in every mode).
        |b: BackendChoice| -> TestResult {
            let n = match b {
                BackendChoice::Cuda => rank_counts(b)[0].max(2),
                _ => 3,
            };
            let timeout = Duration::from_secs(1);
            let mut ranks = ringreduce::Communicator::per_rank(
                ringreduce::EngineConfig::new(n, b).timeout(timeout),
            )
            .ctx("per-rank handles")?;
            ensure!(
                ranks.len() == n
                    && ranks
                        .iter()
                        .enumerate()
                        .all(|(r, h)| h.rank() == r && h.size() == n),
                "handles"
            );
            let c = 37;
            // Every rank calls every collective from its own thread.
            let results: Vec<Result<(), String>> = std::thread::scope(|s| {
                let t: Vec<_> = ranks
                    .iter_mut()
                    .map(|h| {
                        s.spawn(move || -> Result<(), String> {
                            let r = h.rank() as i32;
                            let mine: Vec<i32> = (0..c as i32).map(|i| i * 3 + r).collect();
                            let mut out = vec![0; c];
                            h.all_reduce(&mine, &mut out, ReduceOp::Sum)
                                .ctx("all_reduce")?;
                            let want: Vec<i32> = (0..c as i32)
                                .map(|i| n as i32 * i * 3 + (0..n as i32).sum::<i32>())
                                .collect();
                            ensure!(out == want, "rank {r}: all_reduce {out:?}");
                            let mut buf = mine.clone();
                            h.all_reduce_in_place(&mut buf, ReduceOp::Max)
                                .ctx("all_reduce_in_place")?;
                            let want: Vec<i32> =
                                (0..c as i32).map(|i| i * 3 + n as i32 - 1).collect();
                            ensure!(buf == want, "rank {r}: all_reduce_in_place max");
                            let big: Vec<i32> = (0..(n * c) as i32).map(|i| i + r).collect();
                            let mut chunk = vec![0; c];
                            h.reduce_scatter(&big, &mut chunk, ReduceOp::Sum)
                                .ctx("reduce_scatter")?;
                            let want: Vec<i32> = (0..c)
                                .map(|i| {
                                    n as i32 * (r as usize * c + i) as i32
                                        + (0..n as i32).sum::<i32>()
                                })
                                .collect();
                            ensure!(chunk == want, "rank {r}: reduce_scatter");
                            let mut all = vec![0; n * c];
                            h.all_gather(&mine, &mut all).ctx("all_gather")?;
                            let want: Vec<i32> = (0..n as i32)
                                .flat_map(|q| (0..c as i32).map(move |i| i * 3 + q))
                                .collect();
                            ensure!(all == want, "rank {r}: all_gather");
                            Ok(())
                        })
                    })
                    .collect();
                t.into_iter()
                    .map(|t| t.join().unwrap_or_else(|_| Err("thread panicked".into())))
                    .collect()
            });
            for r in results {
                r?;
            }
            // A mismatched call (another op) errors on the callers.
            let (first, rest) = ranks.split_at_mut(1);
            let (h0, h1) = (&mut first[0], &mut rest[0]);
            let (r0, r1) = std::thread::scope(|s| {
                let (h0, h1) = (&mut *h0, &mut *h1);
                let a = s.spawn(move || {
                    let mut o = vec![0; 4];
                    h0.all_reduce(&[1; 4], &mut o, ReduceOp::Sum)
                });
                let b2 = s.spawn(move || {
                    std::thread::sleep(Duration::from_millis(100));
                    let mut o = vec![0; 4];
                    h1.all_reduce(&[1; 4], &mut o, ReduceOp::Max)
                });
                (a.join().expect("join"), b2.join().expect("join"))
            });
            // Both callers get the same typed Mismatch at once (it was a
            // BadArgument for the second caller only, and a timeout for the
            // first: issue 32 item 3).
            ensure!(
                matches!(&r0, Err(Error::Mismatch { rank: 1, .. }))
                    && matches!(&r1, Err(Error::Mismatch { rank: 1, .. })),
                "mismatched ops: rank 0 {r0:?}, rank 1 {r1:?}"
            );
            let texts = format!("{:?} {:?}", r0, r1);
            ensure!(
                texts.contains("sum") && texts.contains("max"),
                "the mismatch must say what each rank asked for: {texts}"
            );
            // A mismatched length likewise.
            let (r0, r1) = std::thread::scope(|s| {
                let (h0, h1) = (&mut *h0, &mut *h1);
                let a = s.spawn(move || {
                    let mut o = vec![0; 4];
                    h0.all_reduce(&[1; 4], &mut o, ReduceOp::Sum)
                });
                let b2 = s.spawn(move || {
                    std::thread::sleep(Duration::from_millis(100));
                    let mut o = vec![0; 5];
                    h1.all_reduce(&[1; 5], &mut o, ReduceOp::Sum)
                });
                (a.join().expect("join"), b2.join().expect("join"))
            });
            ensure!(
                matches!(&r0, Err(Error::Mismatch { rank: 1, .. }))
                    && matches!(&r1, Err(Error::Mismatch { rank: 1, .. })),
                "mismatched lengths: rank 0 {r0:?}, rank 1 {r1:?}"
            );
            // One rank never calls: the others time out naming it.
            let missing = n - 1;
            let t0 = Instant::now();
            let errs = call_without_the_rest(&mut ranks, missing);
            let took = t0.elapsed();
            for (r, res) in errs.iter().enumerate() {
                match res {
                    Err(err @ Error::Timeout { rank, .. }) => {
                        ensure!(*rank == r, "timeout names rank {rank}, expected {r}");
                        let named = missing_ranks(&err.to_string())
                            .ok_or(format!("no list of missing ranks in: {err}"))?;
                        ensure!(
                            named.contains(&missing),
                            "the timeout must name the missing rank {missing}: {err}"
                        );
                    }
                    other => {
                        return Err(format!(
                            "rank {r} without its peer: expected a timeout, got {other:?}"
                        ))
                    }
                }
            }
            ensure!(
                took < timeout + Duration::from_secs(5),
                "the timeout took {took:?}"
            );
            // Everyone calls again: refused on every rank (issue 41 item 1:
            // after a timeout the ranks' calls are out of step, so a late
            // rank can never be matched with another call's data).
            let ok: Vec<Result<Vec<i32>, Error>> = std::thread::scope(|s| {
                let t: Vec<_> = ranks
                    .iter_mut()
                    .map(|h| {
                        s.spawn(move || {
                            let mut o = vec![0; 4];
                            h.all_reduce(&[h.rank() as i32; 4], &mut o, ReduceOp::Sum)
                                .map(|_| o)
                        })
                    })
                    .collect();
                t.into_iter().map(|t| t.join().expect("join")).collect()
            });
            // The rank that never called meets, as its first call, the
            // first call it missed, and that call's failure.
            for (r, o) in ok.into_iter().enumerate() {
                ensure!(
                    matches!(&o, Err(Error::Poisoned { .. })) || (r == missing && o.is_err()),
                    "rank {r} after the timeout: {o:?}"
                );
            }
            pass()
        }
    );

    test_backend!(
        h,
        "backends::per_rank_timeout_names_only_the_missing_ranks",
        1,
        |b: BackendChoice| -> TestResult {
            // Was a library bug: with 3 ranks of which rank 2 never calls,
            // ranks 0 and 1 both time out; the first to give up withdrew its
            // part (the per-rank rendezvous, communicator/ranks.rs), so the second reported
            // the first as missing too ("ranks [0, 2]" or "ranks [1, 2]"),
            // although it did call. Fixed (issue 32, item 4).
            let n = 3;
            let mut ranks = ringreduce::Communicator::per_rank(
                ringreduce::EngineConfig::new(n, b).timeout(Duration::from_secs(1)),
            )
            .ctx("per-rank handles")?;
            for (r, res) in call_without_the_rest(&mut ranks, 2).iter().enumerate() {
                let err = match res {
                    Err(err @ Error::Timeout { .. }) => err.to_string(),
                    other => return Err(format!("rank {r}: expected a timeout, got {other:?}")),
                };
                let named =
                    missing_ranks(&err).ok_or(format!("no list of missing ranks in: {err}"))?;
                ensure!(named == vec![2], "LIBRARY BUG: rank {r}'s timeout names ranks {named:?} as missing; only rank 2 never called: {err}");
            }
            pass()
        }
    );
}
