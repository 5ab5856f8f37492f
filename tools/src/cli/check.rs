//! `ringreduce check`: the same inputs through ringreduce and NCCL, every
//! output compared element by element, for every requested collective,
//! data type, op, size, place and path.

use super::cuda::Nccl;
use super::{check_host_memory, out, Common, Kinds};
use crate::bench::{self, Contender, ContenderKind};
use crate::verify::{self, Inputs};
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::Collective;
use ringreduce::size::format_bytes;
use std::path::PathBuf;

/// `--algo`'s help: every path of the algorithm registry.
fn algo_help() -> String {
    format!(
        "ringreduce paths to compare with NCCL, comma-separated (auto, {})",
        super::path_list(&[])
    )
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub kinds: Kinds,
    /// Path to libnccl.so.2 (overrides NCCL_HOME, the linker path and
    /// Python wheels).
    #[arg(long)]
    pub nccl_lib: Option<PathBuf>,
    /// Sizes per rank (nccl-tests' convention: reduce-scatter and
    /// all-gather sizes are the whole buffer), comma-separated.
    #[arg(
        long,
        allow_hyphen_values = true,
        value_delimiter = ',',
        default_value = "4KiB,4MiB,256MiB,1GiB+12",
        conflicts_with = "counts"
    )]
    pub sizes: Vec<String>,
    /// Element counts per rank instead of sizes (NCCL's count: all-reduce
    /// elements, reduce-scatter's output, all-gather's input), comma-separated,
    /// so that every type gets e.g. exactly one element.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub counts: Option<Vec<String>>,
    /// Inputs: random (tolerance where the order matters) or exact (bitwise).
    #[arg(long, default_value = "random")]
    pub inputs: String,
    // ringreduce paths: the algorithm registry's, in the help.
    #[arg(long, default_value = "auto", help = algo_help())]
    pub algo: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

struct Plan {
    /// Sizes in bytes, or (with `by_count`) NCCL counts.
    sizes: Vec<u64>,
    by_count: bool,
    contenders: Vec<Contender>,
    kind: Inputs,
    seed: u64,
}

pub fn execute(a: CheckArgs) -> Result<bool> {
    // Every argument first.
    let cfg = a.common.config()?;
    let combos = a.kinds.parse()?;
    let by_count = a.counts.is_some();
    let sizes: Vec<u64> = match &a.counts {
        Some(c) => c
            .iter()
            .map(|s| super::count_arg("--counts", s))
            .collect::<Result<_>>()?,
        None => a
            .sizes
            .iter()
            .map(|s| super::size_arg("--sizes", s))
            .collect::<Result<_>>()?,
    };
    if sizes.is_empty() {
        return Err(Error::BadArgument("--sizes needs at least one size".into()));
    }
    let kind: Inputs = a.inputs.parse().map_err(Error::BadArgument)?;
    let contenders = bench::parse_contenders("--algo", &a.algo)?;
    if contenders.iter().any(|c| c.is_nccl() || c.is_graph()) {
        return Err(Error::BadArgument(
            "check compares ringreduce paths with NCCL: --algo takes paths such as auto, ring, oneshot:flag (not nccl or graphs)".into(),
        ));
    }
    let mut shapes = Vec::new();
    for &(coll, dtype, _) in &combos.each() {
        for &s in &sizes {
            let e = dtype.size() as u64;
            let unit = match coll {
                Collective::AllReduce => e,
                _ => e * cfg.ranks as u64,
            };
            let count = if by_count {
                usize::try_from(s)
                    .map_err(|_| Error::BadArgument(format!("count {s} too large")))?
            } else {
                bench::count_for(coll, s, dtype.size(), cfg.ranks)
            };
            if !by_count && s % unit != 0 {
                return Err(Error::BadArgument(format!(
                    "--sizes {}: not a whole number of {} {} elements{}",
                    format_bytes(s),
                    dtype.name(),
                    coll,
                    if coll == Collective::AllReduce {
                        ""
                    } else {
                        " per rank"
                    }
                )));
            }
            let shape = ringreduce::plan::Shape {
                collective: coll,
                ranks: cfg.ranks,
                count,
                elem_size: dtype.size(),
                in_place: false,
            };
            shapes.push((s, shape));
        }
    }
    // A library named with --nccl-lib is an argument: checked first.
    let named = match &a.nccl_lib {
        Some(p) => Some(Nccl::load(Some(p.as_path()))?),
        None => None,
    };
    // check exists to compare with NCCL, which needs a GPU: say so before
    // looking for the library.
    if let Some(why) = cfg.backend.cpu_reason() {
        return Err(Error::BadArgument(format!(
            "check compares ringreduce's outputs with NCCL's, and NCCL needs GPUs ({why}); \
             without one, `run` and `soak` check every result against a CPU reference"
        )));
    }
    for (s, shape) in &shapes {
        // Inputs, reference, ringreduce's and NCCL's outputs.
        let need = crate::cli::run::host_bytes(shape, false) * 3 / 2;
        check_host_memory(need, &format!("check at {}", format_bytes(*s)))?;
    }
    let nccl = match named {
        Some(n) => n,
        None => Nccl::load(None)?,
    };
    out(format!(
        "NCCL {} from {}",
        nccl.version_string()?,
        nccl.path().display()
    ))?;
    let mut core = Engine::new(cfg)?;
    out(format!("backend: {}", core.describe()))?;
    super::cuda::nccl_init(&mut core, &nccl)?;
    let plan = Plan {
        sizes,
        by_count,
        contenders,
        kind,
        seed: a.seed,
    };
    let mut all_ok = true;
    let mut compared = 0usize;
    for (coll, dtype, op) in combos.each() {
        let (ok, n) =
            ringreduce::with_element!(dtype, T => check_table::<T>(&mut core, &plan, coll, op))?;
        compared += n;
        all_ok &= ok;
    }
    // A check that compared nothing (every row empty or skipped) is not
    // a pass.
    out(match (all_ok, compared) {
        (true, 0) => "NOTHING COMPARED: every row was empty or skipped",
        (true, _) => "PASS: ringreduce matches NCCL",
        (false, _) => "FAIL",
    })?;
    Ok(all_ok && compared > 0)
}

/// One (collective, type, op): a table of every size, place and path.
fn check_table<T: Element>(
    e: &mut Engine,
    p: &Plan,
    coll: Collective,
    op: ReduceOp,
) -> Result<(bool, usize)> {
    let n = e.ranks();
    let dtype = T::DTYPE;
    let bitwise = verify::is_bitwise(
        dtype,
        if coll.reduces() { op } else { ReduceOp::Max },
        n,
        p.kind,
    );
    out(String::new())?;
    out(format!(
        "# {coll}, {}, {}: comparison {}",
        dtype.name(),
        if coll.reduces() { op.name() } else { "-" },
        if bitwise || coll == Collective::AllGather {
            "bitwise (the result cannot depend on the order of the reduction)"
        } else {
            "within the summation-order bound (see verify.rs) of each element"
        }
    ))?;
    out(format!(
        "{:>12} {:>12} {:>6} {:>24} {:>22} {:>12} {:>12} {:>6}",
        "size", "count", "place", "path", "#wrong per rank", "max |r-n|", "max |n-ref|", "result"
    ))?;
    let nccl = Contender {
        name: "nccl".into(),
        kind: ContenderKind::Nccl(ringreduce::backend::NcclBuffers::Plain),
    };
    let mut all_ok = true;
    let t0 = std::time::Instant::now();
    let mut rows = 0usize;
    let mut compared = 0usize;
    for &size in &p.sizes {
        let count = if p.by_count {
            size as usize
        } else {
            bench::count_for(coll, size, dtype.size(), n)
        };
        let size = e.shape::<T>(coll, count, false).bytes();
        let per_rank = e.shape::<T>(coll, count, false).input(0).len();
        let inputs = verify::make_inputs::<T>(p.kind, op, n, per_rank, p.seed)?;
        let expect = bench::expected(coll, &inputs, op, p.kind);
        for in_place in [false, true] {
            let (nw, nv, nccl_out) =
                bench::checked_call(e, &nccl, coll, in_place, op, &inputs, &expect)?;
            for c in &p.contenders {
                let shape = e.shape::<T>(coll, count, in_place);
                let path = match &c.kind {
                    ContenderKind::Engine(choice) => match e.path_name(Some(choice), &shape) {
                        Ok(path) => path,
                        Err(err) => {
                            out(format!(
                                "{:>12} {:>12} {:>6} {:>24} skipped: {err}",
                                format_bytes(size),
                                count,
                                if in_place { "in" } else { "out" },
                                c.name
                            ))?;
                            continue;
                        }
                    },
                    _ => c.name.clone(),
                };
                let (rw, _, ring_out) =
                    bench::checked_call(e, c, coll, in_place, op, &inputs, &expect)?;
                // One process per rank: each compares its own rank, rank 0
                // prints every rank's.
                let base = e.local_ranks().start;
                let v = bench::compare_outputs_at(&ring_out, &nccl_out, &expect, base);
                let v = bench::gather_verdict(e, v)?;
                let ok = v.passed() && rw == 0 && nw == 0;
                all_ok &= ok;
                rows += 1;
                // A row of 0 elements compares nothing: not counted as one
                // that matched.
                let compared_any = ring_out.iter().any(|o| !o.is_empty());
                compared += usize::from(compared_any);
                out(format!(
                    "{:>12} {:>12} {:>6} {:>24} {:>22} {:>12.3e} {:>12.3e} {:>6}",
                    format_bytes(size),
                    count,
                    if in_place { "in" } else { "out" },
                    path,
                    format!("{:?}", v.wrong),
                    v.max_abs_err,
                    nv.max_abs_err,
                    match (ok, compared_any) {
                        (true, true) => "OK",
                        (true, false) => "empty",
                        (false, _) => "FAIL",
                    }
                ))?;
                if !ok {
                    if let Some((r, i, g, w)) = v.first_wrong {
                        out(format!("             first difference: rank {r} element {i}: ringreduce {g}, NCCL {w}"))?;
                    }
                    if nw > 0 {
                        out(format!("             NCCL itself was wrong in {nw} elements against the reference"))?;
                    }
                }
            }
        }
    }
    out(format!(
        "# {rows} rows in {:.2} s",
        t0.elapsed().as_secs_f64()
    ))?;
    Ok((all_ok, compared))
}
