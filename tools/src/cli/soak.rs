//! `ringreduce soak`: many random collectives, every result checked.
//!
//! Each call draws, from a seeded generator: the rank count (one engine per
//! rank count, reused), the collective, the data type, the op, the element
//! count (0, 1, odd, up to `--max-size`), the path (auto or any algorithm
//! that supports the call), in or out of place, and exact or random inputs.
//! It prints the per-call time percentiles, the slow outliers and every
//! failure; the exit status is non-zero if any call was wrong.

use super::{out, Common, Kinds};
use crate::bench::{self, Contender, ContenderKind};
use crate::verify::{Inputs, SplitMix64};
use ringreduce::algo::AlgoChoice;
use ringreduce::element::{DataType, Element, ReduceOp};
use ringreduce::engine::{Engine, EngineConfig};
use ringreduce::error::{Error, Result};
use ringreduce::plan::{Collective, Shape};
use ringreduce::size::format_bytes;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub kinds: Kinds,
    /// Number of collectives.
    #[arg(long, default_value_t = 1000)]
    pub calls: u64,
    /// Stop after this many seconds even if fewer calls ran (0: no limit).
    #[arg(long, default_value_t = 0.0)]
    pub seconds: f64,
    /// Rank counts to draw from, comma-separated (default: 1 to 5 on the
    /// CPU; the GPU count and twice it on CUDA).
    #[arg(long = "rank-counts", value_delimiter = ',')]
    pub rank_counts: Option<Vec<usize>>,
    /// Largest buffer per rank.
    #[arg(long, default_value = "1MiB", allow_hyphen_values = true)]
    pub max_size: String,
    // Paths to draw from besides auto: the registry's, in the help.
    #[arg(long, default_value = "all", help = soak_algo_help())]
    pub algo: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Draw nothing: run every collective x data type x op of -d/-o/
    /// --collective on every path of --algo that supports it (no auto),
    /// out of place and in place, with exact inputs (bitwise checks), at
    /// --max-size per rank; --calls is ignored. One rank count
    /// (--ranks, or the job's).
    #[arg(long)]
    pub every: bool,
}

fn soak_algo_help() -> String {
    format!(
        "Paths to draw from besides auto, comma-separated, or all ({})",
        super::path_list(&[])
    )
}

/// The paths `--algo` names: a list, or all of the algorithm registry's.
fn paths_of(algo: &str) -> Result<Vec<AlgoChoice>> {
    if algo.trim().eq_ignore_ascii_case("all") {
        return Ok(super::all_paths());
    }
    ringreduce::words::list_items(algo)
        .map_err(|e| Error::BadArgument(format!("--algo: {e}")))?
        .into_iter()
        .map(|p| p.parse().map_err(Error::BadArgument))
        .collect()
}

struct Stats {
    times: Vec<(f64, String)>,
    wrong: Vec<String>,
    calls: u64,
}

pub fn execute(a: SoakArgs) -> Result<bool> {
    let base = a.common.config()?;
    // What is not asked for is drawn from everything.
    let combos = a.kinds.parse_or_all()?;
    let max = super::size_arg("--max-size", &a.max_size)?;
    if max == 0 || max > 1 << 32 {
        return Err(Error::BadArgument(format!(
            "--max-size {:?}: must be between 1B and 4GiB",
            a.max_size
        )));
    }
    if a.calls == 0 {
        // A soak of no calls would print PASS having checked nothing.
        return Err(Error::BadArgument("--calls must be at least 1".into()));
    }
    if !(a.seconds.is_finite() && a.seconds >= 0.0 && a.seconds <= 1e7) {
        return Err(Error::BadArgument(format!(
            "--seconds must be 0 (no limit) to 10000000 (got {})",
            a.seconds
        )));
    }
    let paths = paths_of(&a.algo)?;
    let gpus = crate::cli::cuda::gpus().ok();
    // One process per rank: the job's size is the only rank count, and the
    // ranks decide together when to stop (they must make the same calls).
    let multi = base.process.is_some();
    let rank_counts = rank_counts_of(&a, &base, gpus)?;
    super::check_host_memory(
        6 * max as u128 * *rank_counts.iter().max().unwrap_or(&1) as u128,
        "the soak's largest call",
    )?;
    let mut soak = Soak {
        engines: BTreeMap::new(),
        rng: SplitMix64::new(a.seed),
        combos: combos.each(),
        rank_counts,
        paths,
        max,
        base,
        multi,
    };
    let mut stats = Stats {
        times: Vec::new(),
        wrong: Vec::new(),
        calls: 0,
    };
    let start = Instant::now();
    if a.every {
        return every(&mut soak, &mut stats, start);
    }
    let limit = (a.seconds > 0.0).then(|| Duration::from_secs_f64(a.seconds));
    out(format!(
        "ringreduce soak: {}, seed {}, rank counts {:?}, up to {} per rank, {} of call",
        ringreduce::words::counted(a.calls, "call"),
        a.seed,
        soak.rank_counts,
        format_bytes(max),
        ringreduce::words::counted(soak.combos.len(), "kind")
    ))?;
    for i in 0..a.calls {
        // The time limit stops the soak after its first call, never
        // before: a soak that ran no call has checked nothing.
        let late = i > 0 && limit.is_some_and(|l| start.elapsed() > l);
        let late = match soak.engines.values().next().filter(|_| multi) {
            Some(core) => core.any_process(late, "deciding whether to stop")?,
            None => late,
        };
        if late {
            break;
        }
        if !soak.call(i, &mut stats)? {
            break;
        }
        if (i + 1) % 200 == 0 && soak.base.process.as_ref().is_none_or(|s| s.rank == 0) {
            crate::note!(
                "soak: {} calls, {} wrong, {:.0} s",
                i + 1,
                stats.wrong.len(),
                start.elapsed().as_secs_f64()
            );
        }
    }
    report(&stats, start.elapsed())
}

/// `--every`: each combination once on each path, exact inputs, in and
/// out of place.
fn every(soak: &mut Soak, stats: &mut Stats, start: Instant) -> Result<bool> {
    let n = soak.rank_counts[0];
    let at = soak.placement(n)?;
    let paths: Vec<AlgoChoice> = soak
        .paths
        .iter()
        .filter(|p| !matches!(p, AlgoChoice::Auto))
        .cloned()
        .collect();
    let mut calls = Vec::new();
    for &(coll, dtype, op) in &soak.combos {
        let elem = dtype.size() as u64;
        let count = (soak.max / elem).max(1) as usize;
        let count = match coll {
            Collective::AllReduce => count,
            _ => (count / n.max(1)).max(1),
        };
        for choice in &paths {
            for in_place in [false, true] {
                let shape = Shape {
                    collective: coll,
                    ranks: n,
                    count,
                    elem_size: dtype.size(),
                    in_place,
                };
                if choice.resolve_in(&shape, &at).is_ok() {
                    calls.push((shape, dtype, op, choice.clone()));
                }
            }
        }
    }
    out(format!(
        "ringreduce soak --every: {} on {n} ranks ({} of call x {} x in and out of place, exact inputs), up to {} per rank",
        ringreduce::words::counted(calls.len(), "call"),
        ringreduce::words::counted(soak.combos.len(), "kind"),
        ringreduce::words::counted(paths.len(), "path"),
        format_bytes(soak.max)
    ))?;
    if calls.is_empty() {
        return Err(Error::BadArgument(
            "--every: no path of --algo runs any of the calls asked for".into(),
        ));
    }
    let mut per_path: BTreeMap<String, u64> = BTreeMap::new();
    for (i, (shape, dtype, op, choice)) in calls.into_iter().enumerate() {
        *per_path.entry(choice.name()).or_default() += 1;
        if !soak.run_call(
            i as u64,
            shape,
            dtype,
            op,
            choice,
            Inputs::Exact,
            i as u64,
            stats,
        )? {
            break;
        }
    }
    for (p, c) in &per_path {
        out(format!(
            "path {p}: {}",
            ringreduce::words::counted(*c, "call")
        ))?;
    }
    report(stats, start.elapsed())
}

/// The rank counts to draw from: `--rank-counts`, `--ranks`, the job's
/// size, or by backend.
fn rank_counts_of(a: &SoakArgs, base: &EngineConfig, gpus: Option<usize>) -> Result<Vec<usize>> {
    let multi = base.process.is_some();
    let rank_counts = match &a.rank_counts {
        _ if multi => match &a.rank_counts {
            Some(v) if v.iter().any(|&n| n != base.ranks) => {
                return Err(Error::BadArgument(format!(
                    "--rank-counts {v:?}: in a job of {} processes the rank count is {}",
                    base.ranks, base.ranks
                )))
            }
            _ => vec![base.ranks],
        },
        Some(v) => match a.common.ranks {
            Some(n) if v.iter().any(|&x| x != n) => {
                return Err(Error::BadArgument(format!(
                    "--ranks {n} and --rank-counts {v:?} disagree: give one of them"
                )))
            }
            _ if v.is_empty() => {
                return Err(Error::BadArgument(
                    "--rank-counts needs at least one".into(),
                ))
            }
            _ => v.clone(),
        },
        // --ranks given: the one rank count.
        None if a.common.ranks.is_some() => vec![base.ranks],
        None => match (base.backend, gpus) {
            (ringreduce::backend::BackendChoice::Cpu, _) | (_, None) => vec![1, 2, 3, 4, 5],
            (_, Some(g)) => vec![g, 2 * g],
        },
    };
    for &n in &rank_counts {
        if n == 0 || n > ringreduce::engine::MAX_RANKS {
            return Err(Error::BadArgument(format!("rank count {n} out of range")));
        }
    }
    Ok(rank_counts)
}

/// The soak's state: an engine per rank count, the generator and what it
/// draws from.
struct Soak {
    engines: BTreeMap<usize, Engine>,
    rng: SplitMix64,
    combos: Vec<(Collective, DataType, ReduceOp)>,
    rank_counts: Vec<usize>,
    paths: Vec<AlgoChoice>,
    max: u64,
    base: EngineConfig,
    multi: bool,
}

impl Soak {
    /// Draw call `i`, run it and check it into `stats`; false when the soak
    /// must stop (a failed call in a job of processes).
    fn call(&mut self, i: u64, stats: &mut Stats) -> Result<bool> {
        let (rank_counts, combos, paths) = (&self.rank_counts, &self.combos, &self.paths);
        let (max, rng) = (self.max, &mut self.rng);
        let n = rank_counts[(rng.next_u64() % rank_counts.len() as u64) as usize];
        let (coll, dtype, op) = combos[(rng.next_u64() % combos.len() as u64) as usize];
        let elem = dtype.size() as u64;
        let per_rank_max = (max / elem).max(1);
        let count = match rng.next_u64() % 6 {
            0 => 0,
            1 => 1,
            2 => (rng.next_u64() % 64) | 1,
            _ => rng.next_u64() % per_rank_max,
        } as usize;
        let count = match coll {
            Collective::AllReduce => count,
            _ => count / n.max(1),
        };
        let in_place = rng.next_u64() % 2 == 0;
        let kind = if rng.next_u64() % 2 == 0 {
            Inputs::Exact
        } else {
            Inputs::Random
        };
        let shape = Shape {
            collective: coll,
            ranks: n,
            count,
            elem_size: dtype.size(),
            in_place,
        };
        let pick =
            (rng.next_u64() % 2 == 0).then(|| (rng.next_u64() % paths.len() as u64) as usize);
        let seed = rng.next_u64();
        // A drawn path that cannot run this call, or not where the ranks
        // are (a path that spins on flags, with processes sharing a GPU),
        // leaves the call to auto.
        let at = self.placement(n)?;
        let choice = pick
            .map(|k| self.paths[k].clone())
            .filter(|p| p.resolve_in(&shape, &at).is_ok())
            .unwrap_or(AlgoChoice::Auto);
        self.run_call(i, shape, dtype, op, choice, kind, seed, stats)
    }

    /// Where the ranks of the engine of `n` ranks run (made on first use).
    fn placement(&mut self, n: usize) -> Result<ringreduce::algo::Placement> {
        if let std::collections::btree_map::Entry::Vacant(slot) = self.engines.entry(n) {
            let mut cfg = self.base.clone();
            cfg.ranks = n;
            cfg.algo = AlgoChoice::Auto;
            slot.insert(Engine::new(cfg)?);
        }
        self.engines
            .get(&n)
            .map(Engine::placement)
            .ok_or_else(|| Error::Plan("engine cache".into()))
    }

    /// Run call `i` of `shape` on path `choice` and check it into `stats`;
    /// false when the soak must stop (a failed call in a job of processes).
    #[allow(clippy::too_many_arguments)]
    fn run_call(
        &mut self,
        i: u64,
        shape: Shape,
        dtype: DataType,
        op: ReduceOp,
        choice: AlgoChoice,
        kind: Inputs,
        seed: u64,
        stats: &mut Stats,
    ) -> Result<bool> {
        let multi = self.multi;
        let (n, coll, count, in_place) =
            (shape.ranks, shape.collective, shape.count, shape.in_place);
        self.placement(n)?;
        let e = self
            .engines
            .get_mut(&n)
            .ok_or_else(|| Error::Plan("engine cache".into()))?;
        let desc = format!(
            "call {i}: {n} ranks {coll} {} {} count {count} {} {} {}",
            dtype.name(),
            op.name(),
            if in_place { "in place" } else { "out of place" },
            choice.name(),
            kind
        );
        let r = ringreduce::with_element!(dtype, T => one::<T>(e, &choice, shape, op, kind, seed));
        stats.calls += 1;
        match r {
            Ok((us, 0, _)) => stats.times.push((us, desc)),
            Ok((us, wrong, first)) => {
                out(format!("WRONG: {desc}: {wrong} wrong elements{first}"))?;
                stats.times.push((us, desc.clone()));
                stats.wrong.push(desc);
            }
            Err(e) => {
                out(format!("ERROR: {desc}: {e}"))?;
                stats.wrong.push(format!("{desc}: {e}"));
                if multi {
                    // The job is unusable after a failed call.
                    crate::note!("soak: stopping after a failed call: {e}");
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// One checked call; (microseconds, wrong elements).
fn one<T: Element>(
    e: &mut Engine,
    choice: &AlgoChoice,
    shape: Shape,
    op: ReduceOp,
    kind: Inputs,
    seed: u64,
) -> Result<(f64, u64, String)> {
    (|| {
        let n = shape.ranks;
        let inputs = crate::verify::make_inputs::<T>(kind, op, n, shape.input(0).len(), seed)?;
        let expect = bench::expected(shape.collective, &inputs, op, kind);
        let c = Contender {
            name: choice.name(),
            kind: ContenderKind::Engine(choice.clone()),
        };
        let t = Instant::now();
        let (wrong, v, _) = bench::checked_call(
            e,
            &c,
            shape.collective,
            shape.in_place,
            op,
            &inputs,
            &expect,
        )?;
        let first = match v.first_wrong {
            Some((r, i, g, w)) => format!(
                " (per rank {:?}; first: rank {r} element {i}: got {g}, expected {w})",
                v.wrong
            ),
            None => String::new(),
        };
        Ok((t.elapsed().as_secs_f64() * 1e6, wrong, first))
    })()
}

fn report(s: &Stats, elapsed: Duration) -> Result<bool> {
    let mut t: Vec<f64> = s.times.iter().map(|x| x.0).collect();
    t.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if t.is_empty() {
            return 0.0;
        }
        t[((t.len() - 1) as f64 * p).round() as usize]
    };
    out(format!(
        "calls: {} in {:.1} s; checked calls (load + run + read back + verify) p50 {:.0} us, p99 {:.0} us, max {:.0} us",
        s.calls,
        elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99),
        pct(1.0)
    ))?;
    let p99 = pct(0.99);
    let mut slow: Vec<&(f64, String)> = s.times.iter().filter(|x| x.0 > p99 && x.0 > 0.0).collect();
    slow.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (us, d) in slow.iter().take(5) {
        out(format!("slow: {us:.0} us: {d}"))?;
    }
    if s.wrong.is_empty() {
        out(format!(
            "PASS: 0 wrong of {}",
            ringreduce::words::counted(s.calls, "call")
        ))?;
        Ok(true)
    } else {
        out(format!(
            "FAIL: {} of {} calls wrong or failed",
            s.wrong.len(),
            s.calls
        ))?;
        Ok(false)
    }
}

#[cfg(test)]
mod tests;
