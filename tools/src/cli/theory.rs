//! `ringreduce theory`: Parameter Server vs Ring, traffic and
//! alpha-beta-gamma time, with the size where the ring overtakes the PS;
//! then every all-reduce algorithm priced with the same constants
//! (`theory::catalog`), and where the constants come from.

use super::{out, out_raw};
use crate::report::Report;
use ringreduce::error::{Error, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct TheoryArgs {
    /// Data per rank D (decimal MB as in the seed: 100MB = 1e8 bytes).
    #[arg(long, default_value = "100MB", allow_hyphen_values = true)]
    pub size: String,
    /// Rank counts to tabulate.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64")]
    pub ranks: Vec<usize>,
    /// Latency per dependent round, alpha (microseconds) [default: 13,
    /// a ring step on 2 x H200: 12-14 us with 4 and 8 ranks].
    #[arg(long)]
    pub alpha_us: Option<f64>,
    /// Per-link bandwidth B (GB/s, each direction) [default: 380, the
    /// peer-copy ceiling of NVLink NV18 between two H200; the seed's PCIe
    /// Gen4 x16 is about 26].
    #[arg(long)]
    pub link_gbps: Option<f64>,
    /// Reduce throughput G (GB/s of input reduced) [default: 1400, the PTX
    /// reduce kernel on an H200; `inf`: free].
    #[arg(long)]
    pub reduce_gbps: Option<f64>,
    /// Price the paths `ringreduce bench` measured with their own fitted
    /// models (its -J/--json file); the others keep the model above.
    #[arg(long)]
    pub from_bench: Option<PathBuf>,
    /// Project past one machine: node counts K to tabulate (with
    /// --gpus-per-node; default 1,2,4,... up to 1024 GPUs). Prices the flat
    /// ring, the hierarchical all-reduce and a double binary tree.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<usize>,
    /// GPUs per node G of the projection (--nodes); inside a node the
    /// links are --alpha-us and --link-gbps, or the ring's fit of
    /// --from-bench.
    #[arg(long)]
    pub gpus_per_node: Option<usize>,
    /// Network bandwidth between nodes per rail, GB/s each direction
    /// (stated, not measured) [default: 50, 400 Gb/s per NIC].
    #[arg(long, default_value_t = crate::theory::scale::NETWORK_STATED.gbps)]
    pub net_gbps: f64,
    /// Network latency between nodes per message, microseconds (stated,
    /// not measured).
    #[arg(long, default_value_t = crate::theory::scale::NETWORK_STATED.alpha_us)]
    pub net_alpha_us: f64,
    /// Check the scale-out model against published nccl-tests results:
    /// each figure with its source, the model's value and the error (the
    /// machines' constants are the sources', so no other argument applies).
    #[arg(long, conflicts_with_all = [
        "nodes", "gpus_per_node", "from_bench", "size", "ranks", "alpha_us",
        "link_gbps", "reduce_gbps", "net_gbps", "net_alpha_us",
    ])]
    pub published: bool,
}

/// The fits of a bench JSON file's paths, refitted from its rows with
/// today's [`crate::theory::fit`] (a file keeps the models of the
/// fit that wrote it; its rows are the measurement), and a line saying
/// where they came from. Prints each path's measured vs model table.
fn from_bench(path: &std::path::Path) -> Result<(Vec<crate::theory::Fit>, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: std::sync::Arc::new(e),
    })?;
    // A malformed input is a bad argument, not a report this run failed to
    // write.
    let rep = Report::from_json(&text).map_err(|e| {
        Error::BadArgument(format!(
            "--from-bench {}: not a bench JSON report: {e}",
            path.display()
        ))
    })?;
    let (fitted, misses) = super::bench::model::refit(&rep);
    let fits: Vec<crate::theory::Fit> = fitted
        .iter()
        .map(|(m, _)| m)
        .filter(|m| !m.path.ends_with(":graph"))
        .filter_map(super::bench::model::as_fit)
        .collect();
    if fits.is_empty() {
        let held = super::bench::model::fit_inputs(&rep);
        return Err(Error::BadArgument(match held.is_empty() {
            true => format!(
                "{}: the report has no out-of-place all-reduce rows of an engine path to fit a model to",
                path.display()
            ),
            false => format!(
                "{}: no model could be fitted to its rows ({}); a fit needs out-of-place all-reduce rows of a path the model prices at two or more sizes on 2 or more ranks, whose times follow the path's cost formula",
                path.display(),
                held.join("; ")
            ),
        }));
    }
    let h = &rep.header;
    let load = crate::theory::ring_link_load(&h.rank_to_device).max(1);
    super::bench::model::out_models(&rep, &fitted, &misses, h.ranks, load)?;
    let note = format!(
        "models refitted from the rows of {} (`{}`): {}",
        path.display(),
        h.command,
        fitted
            .iter()
            .map(|(m, _)| format!("{} {} rows", m.path, m.rows))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((fits, note))
}

/// The model's accepted link bandwidths (GB/s per direction).
const LINK_GBPS: std::ops::RangeInclusive<f64> = 1e-3..=1e6;
/// The model's accepted per-message latencies (µs).
const ALPHA_US: std::ops::RangeInclusive<f64> = 0.0..=1e9;

pub fn execute(a: TheoryArgs) -> Result<bool> {
    if a.published {
        out_raw(&crate::theory::published::render())?;
        return Ok(true);
    }
    let d = super::size_arg("--size", &a.size)?;
    if a.ranks.is_empty() || a.ranks.contains(&0) {
        return Err(Error::BadArgument(
            "--ranks needs positive rank counts".into(),
        ));
    }
    if a.ranks.iter().any(|&n| n > 1 << 20) {
        return Err(Error::BadArgument("--ranks: at most 1048576".into()));
    }
    let (fits, note) = match &a.from_bench {
        Some(p) => {
            let (f, note) = from_bench(p)?;
            (f, Some(note))
        }
        None => (Vec::new(), None),
    };
    let model = crate::theory::Model {
        alpha_us: a
            .alpha_us
            .unwrap_or(crate::theory::scale::NVLINK_H200.alpha_us),
        link_gbps: a
            .link_gbps
            .unwrap_or(crate::theory::scale::NVLINK_H200.gbps),
        reduce_gbps: a.reduce_gbps.unwrap_or(1400.0),
    };
    check_model(&model)?;
    if let Some(n) = note {
        out(n)?;
    }
    if a.gpus_per_node.is_some() || !a.nodes.is_empty() {
        return project(&a, d as f64, &model, &fits);
    }
    let pricing = crate::theory::Pricing { model, fits };
    out_raw(&crate::theory::render(
        d as f64, &a.size, &a.ranks, &pricing,
    ))?;
    out(constants_source(&a))?;
    Ok(true)
}

/// Where each constant of the model comes from: the flag that set it, or
/// the record (or derivation) behind its default.
fn constants_source(a: &TheoryArgs) -> String {
    let alpha = match a.alpha_us {
        Some(_) => "--alpha-us",
        None => "a ring step fitted on 2 x H200, 4 and 8 ranks, 2026-11-30 (docs/results/2026-11-30-h200x2-s8-final)",
    };
    let link = match a.link_gbps {
        Some(_) => "--link-gbps",
        None => "NVLink NV18's peer-copy ceiling between two H200, 364.5-392 GB/s measured 2026-11-29/30 (478 GB/s nominal: 18 links of 26.56)",
    };
    let reduce = match a.reduce_gbps {
        Some(_) => "--reduce-gbps",
        None => "a float4 add kernel on one H200, 4.1 TB/s over its three passes (two reads, one write), so about 1.4 TB/s of input reduced (the GPU machine's set-up notes, 2026-11-29)",
    };
    format!("\nConstants: alpha: {alpha};\n  B: {link};\n  G: {reduce}.")
}

/// `theory --nodes K --gpus-per-node G`: the scale-out projection.
fn project(
    a: &TheoryArgs,
    d: f64,
    model: &crate::theory::Model,
    fits: &[crate::theory::Fit],
) -> Result<bool> {
    use crate::theory::scale::{render, Link};
    let g = a.gpus_per_node.ok_or_else(|| {
        Error::BadArgument("--nodes needs --gpus-per-node (G GPUs in each node)".into())
    })?;
    if !(1..=1024).contains(&g) {
        return Err(Error::BadArgument(format!(
            "--gpus-per-node must be 1 to 1024 (got {g})"
        )));
    }
    let nodes: Vec<usize> = if a.nodes.is_empty() {
        (0..=10)
            .map(|i| 1usize << i)
            .take_while(|k| k * g <= 1024)
            .collect()
    } else {
        a.nodes.clone()
    };
    if nodes.iter().any(|&k| k == 0 || k * g > 1 << 20) {
        return Err(Error::BadArgument(format!(
            "--nodes needs positive node counts, at most {} GPUs in all",
            1 << 20
        )));
    }
    let inter = Link {
        alpha_us: a.net_alpha_us,
        gbps: a.net_gbps,
    };
    if !LINK_GBPS.contains(&inter.gbps) || !ALPHA_US.contains(&inter.alpha_us) {
        return Err(Error::BadArgument(format!(
            "--net-gbps must be {} to {} GB/s (got {}) and --net-alpha-us {} to {} us (got {})",
            LINK_GBPS.start(),
            LINK_GBPS.end(),
            num(inter.gbps),
            ALPHA_US.start(),
            ALPHA_US.end(),
            num(inter.alpha_us)
        )));
    }
    let ring_fit = fits
        .iter()
        .find(|f| f.cost == crate::theory::Cost::Ring { slices: 1 });
    let (intra, from) = match ring_fit {
        Some(f) => (
            Link {
                alpha_us: f.alpha_us,
                gbps: f.link_gbps,
            },
            "the ring's fit of --from-bench, reduce included".to_string(),
        ),
        None if a.from_bench.is_some() => {
            return Err(Error::BadArgument(
                "--from-bench: the report has no fit of the plain ring (bench --algo ring), which prices the links inside a node".into(),
            ))
        }
        None => (
            Link {
                alpha_us: model.alpha_us,
                gbps: model.link_gbps,
            },
            if a.alpha_us.is_none() && a.link_gbps.is_none() {
                "defaults: a ring step on 2 x H200 and NVLink NV18's peer-copy ceiling".to_string()
            } else {
                "--alpha-us and --link-gbps".to_string()
            },
        ),
    };
    out_raw(&render(d, &a.size, g, &nodes, intra, inter, &from))?;
    Ok(true)
}

/// Ranges a link can have (1 MB/s to 1 PB/s; 0 to 1000 s per round; a
/// reduce from 1 MB/s, or free), so that every time the table prints is a
/// readable number.
fn check_model(m: &crate::theory::Model) -> Result<()> {
    let (lo, hi) = (LINK_GBPS.start(), LINK_GBPS.end());
    let mut wrong = Vec::new();
    if !LINK_GBPS.contains(&m.link_gbps) {
        wrong.push(format!(
            "--link-gbps must be {lo} to {hi} GB/s (got {})",
            num(m.link_gbps)
        ));
    }
    if !(m.reduce_gbps == f64::INFINITY || LINK_GBPS.contains(&m.reduce_gbps)) {
        wrong.push(format!(
            "--reduce-gbps must be {lo} to {hi} GB/s or inf (got {})",
            num(m.reduce_gbps)
        ));
    }
    if !ALPHA_US.contains(&m.alpha_us) {
        wrong.push(format!(
            "--alpha-us must be {} to {} us (got {})",
            ALPHA_US.start(),
            ALPHA_US.end(),
            num(m.alpha_us)
        ));
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(Error::BadArgument(wrong.join("; "))),
    }
}

/// A number a user typed, echoed back briefly: `0.5`, `1e-300`, `1e308`
/// (Rust's `{}` writes every digit of `1e-300`).
fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e9).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

#[cfg(test)]
mod tests;
