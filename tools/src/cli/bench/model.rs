//! The tables at the end of `bench`: the alpha-beta-gamma model fitted to
//! each path's own rows (with its error per size), and `--breakdown`'s
//! split of the auto path's calls.

use super::out;
use crate::bench::{self, Contender};
use crate::report::{self, Report, Row};
use crate::theory::NoFit;
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::{Error, Result};
use ringreduce::plan::Collective;
use ringreduce::size::format_bytes;

/// The cost shape of a path as rows name it (`ring:pipe2`, `ps`, and
/// `X:graph` for X replayed from CUDA graphs): its algorithm's
/// ([`ringreduce::algo::Algorithm::cost`]).
fn cost_of(path: &str) -> Option<crate::theory::Cost> {
    let base = path.strip_suffix(":graph").unwrap_or(path);
    ringreduce::algo::parse(base).ok()?.cost()
}

/// The path a row's out-of-place cell measured: `auto`'s rows by the path
/// it chose (a row names `out/in` when the two differ), graph replays as
/// `X:graph`.
fn row_path(r: &Row) -> String {
    let path = match r.path.as_deref().and_then(|p| p.split('/').next()) {
        Some(p) => p.trim().to_string(),
        None => r.algo.clone(),
    };
    if r.algo.ends_with(":graph") && !path.ends_with(":graph") {
        format!("{path}:graph")
    } else {
        path
    }
}

/// What a report holds to fit models to, per engine path (the path each
/// out-of-place all-reduce row ran): its rows, sizes and rank counts, in
/// words (for the error when no model could be fitted).
pub(crate) fn fit_inputs(rep: &Report) -> Vec<String> {
    let mut seen: Vec<(String, usize, Vec<u64>, Vec<usize>)> = Vec::new();
    for r in rep.rows.iter().filter(|r| {
        r.collective == report::ALL_REDUCE
            && r.out_of_place.is_some()
            && Contender::parse(&r.algo)
                .is_ok_and(|c| matches!(c.kind, bench::ContenderKind::Engine(_)))
    }) {
        let path = row_path(r);
        let i = match seen.iter().position(|s| s.0 == path) {
            Some(i) => i,
            None => {
                seen.push((path, 0, Vec::new(), Vec::new()));
                seen.len() - 1
            }
        };
        let s = &mut seen[i];
        s.1 += 1;
        if !s.2.contains(&r.size) {
            s.2.push(r.size);
        }
        if !s.3.contains(&r.ranks) {
            s.3.push(r.ranks);
        }
    }
    seen.into_iter()
        .map(|(path, rows, sizes, ranks)| {
            let priced = cost_of(&path).is_some();
            format!(
                "{path}: {} of {} on {} rank{}{}",
                ringreduce::words::counted(rows, "row"),
                ringreduce::words::counted(sizes.len(), "size"),
                ranks
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                if ranks == [1] { "" } else { "s" },
                if priced {
                    ""
                } else {
                    " (a path the model does not price)"
                }
            )
        })
        .collect()
}

/// [`fit_models`] of a report read back (`theory --from-bench`): its
/// contenders are named by its rows.
pub(crate) fn refit(rep: &Report) -> Fits {
    let contenders: Vec<Contender> = rep
        .rows
        .iter()
        .filter_map(|r| Contender::parse(&r.algo).ok())
        .collect();
    fit_models(rep, &contenders)
}

/// Each fitted model with its rows, and each priced path that had rows of
/// two sizes or more but no fit (its times did not grow with its bytes, as
/// noise at small sizes can make them) with its row count.
pub(crate) type Fits = (Vec<(report::ModelFit, Vec<Row>)>, Vec<(String, usize)>);

/// The model fitted to each engine path's own out-of-place all-reduce rows
/// (of the first type and op among them; `auto`'s rows counted under the
/// path each ran), in order of first appearance, with those rows; and the
/// paths that could not be fitted.
pub(super) fn fit_models(rep: &Report, contenders: &[Contender]) -> Fits {
    let engine = |algo: &str| {
        contenders
            .iter()
            .any(|c| c.name == algo && matches!(c.kind, bench::ContenderKind::Engine(_)))
    };
    let Some(first) = rep
        .rows
        .iter()
        .find(|r| engine(&r.algo) && r.collective == report::ALL_REDUCE)
    else {
        return (Vec::new(), Vec::new());
    };
    let mut groups: Vec<(String, Vec<Row>)> = Vec::new();
    for r in rep.rows.iter().filter(|r| {
        engine(&r.algo)
            && r.collective == report::ALL_REDUCE
            && r.dtype == first.dtype
            && r.redop == first.redop
            && r.size > 0
            && r.out_of_place.is_some()
    }) {
        let path = row_path(r);
        match groups.iter_mut().find(|g| g.0 == path) {
            Some(g) => g.1.push(r.clone()),
            None => groups.push((path, vec![r.clone()])),
        }
    }
    let (mut fits, mut misses) = (Vec::new(), Vec::new());
    for (path, rows) in groups {
        let Some(cost) = cost_of(&path) else {
            continue;
        };
        let pts: Vec<(usize, f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((r.ranks, r.size as f64, r.out_of_place.as_ref()?.time_us)))
            .collect();
        match crate::theory::fit(cost, &pts) {
            Ok(f) => fits.push((
                report::ModelFit {
                    path,
                    formula: cost.formula(),
                    alpha_us: f.alpha_us,
                    beta_gbps: f.link_gbps,
                    rows: pts.len(),
                    overlap: f.overlap,
                },
                rows,
            )),
            Err(NoFit::NoPerByteTerm) => misses.push((path, pts.len())),
            // Rows of one size give no fit to expect: say nothing.
            Err(NoFit::OneSize) => {}
        }
    }
    (fits, misses)
}

/// A report's model of a path as the library's [`crate::theory::Fit`].
pub(crate) fn as_fit(m: &report::ModelFit) -> Option<crate::theory::Fit> {
    Some(crate::theory::Fit {
        cost: cost_of(&m.path)?,
        alpha_us: m.alpha_us,
        link_gbps: m.beta_gbps,
        overlap: m.overlap,
    })
}

/// A fitted path's time for `size` bytes per rank on `ranks` ranks (µs).
pub(super) fn model_us(m: &report::ModelFit, ranks: usize, size: u64) -> Option<f64> {
    Some(as_fit(m)?.time_us(ranks, size as f64))
}

/// The measured-vs-model table of every fitted path, with the model's
/// error per size and the largest error from 1 MiB on.
/// `load`: ring hops on the busiest link direction
/// ([`crate::theory::ring_link_load`], 1 with one rank per GPU).
pub(crate) fn out_models(
    rep: &Report,
    fits: &[(report::ModelFit, Vec<Row>)],
    misses: &[(String, usize)],
    ranks: usize,
    load: usize,
) -> Result<()> {
    let ceiling = rep.header.link_ceiling_gbps;
    out("# Measured vs model, each path fitted to its own out-of-place rows: l = rounds*alpha, b = link bytes/beta (the reduce folded into beta), time = max(l, b) + (1 - overlap)*min(l, b); least squares on the relative error, alpha >= 0")?;
    for (m, rows) in fits {
        out_model(m, rows, ranks, load, ceiling)?;
    }
    for (path, rows) in misses {
        out(format!(
            "# {path}: not fitted: its times do not grow with its bytes ({rows} rows; at these sizes noise can hide the per-byte term: measure larger sizes or more iterations)"
        ))?;
    }
    Ok(())
}

/// One path's rows against its model.
fn out_model(
    m: &report::ModelFit,
    rows: &[Row],
    ranks: usize,
    load: usize,
    ceiling: Option<f64>,
) -> Result<()> {
    out(format!(
        "# {}: {} with alpha = {:.2} us per round, beta = {:.1} GB/s per link direction{}, overlap {:.2} ({} rows)",
        m.path,
        m.formula,
        m.alpha_us,
        m.beta_gbps,
        match ceiling {
            Some(c) if c > 0.0 => format!(" ({:.0}% of the peer-copy ceiling)", 100.0 * m.beta_gbps / c),
            _ => String::new(),
        },
        m.overlap,
        m.rows
    ))?;
    out(format!(
        "# {:>10} {:<20} {:>13} {:>11} {:>8} {:>15}",
        "size", "path", "measured(us)", "model(us)", "error", "link-bound(us)"
    ))?;
    let mut worst: Option<f64> = None;
    for r in rows {
        let (Some(t), Some(model)) = (
            r.out_of_place.as_ref().map(|x| x.time_us),
            model_us(m, r.ranks, r.size),
        ) else {
            continue;
        };
        let err = 100.0 * (model / t.max(1e-9) - 1.0);
        if r.size >= 1 << 20 {
            worst = Some(worst.map_or(err.abs(), |w: f64| w.max(err.abs())));
        }
        let bound = match ceiling {
            Some(c) if c > 0.0 => format!(
                "{:.2}",
                load as f64 * crate::theory::ring_per_rank_bytes(ranks, r.size as f64) / (c * 1e3)
            ),
            _ => "-".into(),
        };
        out(format!(
            "# {:>10} {:<20} {:>13.2} {:>11.2} {:>7.1}% {:>15}",
            format_bytes(r.size),
            m.path,
            t,
            model,
            err,
            bound
        ))?;
    }
    if let Some(w) = worst {
        out(format!(
            "# {}: largest model error from 1 MiB on: {w:.1}%",
            m.path
        ))?;
    }
    Ok(())
}

/// The breakdown table.
pub(super) fn out_breakdown(rows: &[report::BreakdownRow]) -> Result<()> {
    out("# Where the time goes: the auto path, 3 calls per size each on idle devices, timelines averaged over calls and ranks (us):")?;
    out("#   call = host issue (launch to the first op) + waiting for a peer + copy + reduce (not under a copy) + rest")?;
    let mut sources: Vec<&str> = Vec::new();
    for b in rows.iter().filter(|b| !b.timing.is_empty()) {
        if !sources.contains(&b.timing.as_str()) {
            sources.push(&b.timing);
        }
    }
    for s in sources {
        out(format!("#   {s}"))?;
    }
    out(format!(
        "# {:>10} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "size", "path", "model", "sweep", "call", "issue", "wait", "copy", "reduce", "rest"
    ))?;
    let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}"));
    for b in rows {
        out(format!(
            "# {:>10} {:<16} {:>9} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
            format_bytes(b.size),
            b.path,
            f(b.model_us),
            f(b.sweep_us),
            b.wall_us,
            b.issue_us,
            b.wait_us,
            b.copy_us,
            b.reduce_us,
            b.rest_us
        ))?;
    }
    Ok(())
}

/// `bench --breakdown`: for every size, 3 isolated timed calls of the auto
/// path, split by [`crate::timeline::Timeline::breakdown`].
pub(super) fn breakdown_rows<T: Element>(
    e: &mut Engine,
    sizes: &[u64],
    (coll, _, op): (Collective, ringreduce::element::DataType, ReduceOp),
    rep: &Report,
    warmup: usize,
) -> Result<Vec<report::BreakdownRow>> {
    breakdown_sizes::<T>(e, sizes, (coll, op), rep, warmup)
}

fn breakdown_sizes<T: Element>(
    e: &mut Engine,
    sizes: &[u64],
    (coll, op): (Collective, ReduceOp),
    rep: &Report,
    warmup: usize,
) -> Result<Vec<report::BreakdownRow>> {
    let n = e.ranks();
    let mut v = Vec::new();
    for &size in sizes {
        let count = bench::count_for(coll, size, T::DTYPE.size(), n);
        if count == 0 {
            continue;
        }
        let o = crate::timeline::RecordOptions {
            choice: ringreduce::algo::AlgoChoice::Auto,
            collective: coll,
            count,
            in_place: false,
            op,
            warmup: warmup.clamp(1, 5),
            calls: 3,
            overhead: None,
            nccl: false,
            isolated: true,
        };
        let rec = crate::timeline::record::<T>(e, &o)?;
        let t = &rec.timeline;
        let splits: Vec<crate::timeline::Split> = t
            .breakdown()
            .map_err(Error::Plan)?
            .into_iter()
            .flat_map(|c| c.ranks)
            .collect();
        let s = crate::timeline::Split::mean(&splits);
        let path = t
            .calls
            .first()
            .map_or("-".to_string(), |c| c.plan.name.clone());
        let shape_bytes = e.shape::<T>(coll, count, false).bytes();
        let sweep_us = rep
            .rows
            .iter()
            .find(|r| r.algo == "auto" && r.size == shape_bytes && r.collective == coll)
            .and_then(|r| r.out_of_place.as_ref())
            .map(|m| m.time_us);
        // The model of the path that ran, if the sweep fitted it.
        let model = match coll {
            Collective::AllReduce => rep
                .header
                .models
                .iter()
                .find(|m| m.path == path)
                .and_then(|m| model_us(m, n, shape_bytes)),
            _ => None,
        };
        crate::note!(
            "breakdown: {} {path}: call {:.1} us",
            format_bytes(shape_bytes),
            s.wall_ns / 1e3
        );
        v.push(report::BreakdownRow {
            size: shape_bytes,
            path,
            calls: 3,
            model_us: model,
            sweep_us,
            wall_us: s.wall_ns / 1e3,
            issue_us: s.issue_ns / 1e3,
            wait_us: s.wait_ns / 1e3,
            copy_us: s.copy_ns / 1e3,
            reduce_us: s.reduce_ns / 1e3,
            rest_us: s.rest_ns / 1e3,
            timing: t.timing_source().unwrap_or_default(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests;
