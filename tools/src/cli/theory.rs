//! `ringreduce theory`: Parameter Server vs Ring, traffic and alpha-beta time.

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
    /// Per-message latency alpha (microseconds) for the time model
    /// [default: 10].
    #[arg(long)]
    pub alpha_us: Option<f64>,
    /// Per-link bandwidth (GB/s, each direction) for the time model
    /// [default: 25].
    #[arg(long)]
    pub link_gbps: Option<f64>,
    /// Take alpha and the bandwidth from the model `ringreduce bench` fitted
    /// to its sweep (its -J/--json file).
    #[arg(long, conflicts_with_all = ["alpha_us", "link_gbps"])]
    pub from_bench: Option<PathBuf>,
}

/// alpha (µs) and bandwidth (GB/s) from a bench JSON file's fitted model.
fn from_bench(path: &std::path::Path) -> Result<(f64, f64, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let rep = Report::from_json(&text)
        .map_err(|e| Error::Report(format!("{}: not a bench JSON report: {e}", path.display())))?;
    let m = rep.header.model.ok_or_else(|| {
        Error::BadArgument(format!(
            "{}: no fitted model in this report (bench fits one to an engine contender's all-reduce rows on 2 or more ranks; JSON from before the fit existed has none)",
            path.display()
        ))
    })?;
    Ok((
        m.alpha_us,
        m.beta_gbps,
        format!(
            "model from {}: alpha = {:.2} us, B = {:.1} GB/s (fitted to {} {} rows of `{}`)",
            path.display(),
            m.alpha_us,
            m.beta_gbps,
            m.rows,
            m.algo,
            rep.header.command
        ),
    ))
}

/// The model's accepted link bandwidths (GB/s per direction).
const LINK_GBPS: std::ops::RangeInclusive<f64> = 1e-3..=1e6;
/// The model's accepted per-message latencies (µs).
const ALPHA_US: std::ops::RangeInclusive<f64> = 0.0..=1e9;

pub fn execute(a: TheoryArgs) -> Result<bool> {
    let d = super::size_arg("--size", &a.size)?;
    if a.ranks.is_empty() || a.ranks.contains(&0) {
        return Err(Error::BadArgument(
            "--ranks needs positive rank counts".into(),
        ));
    }
    if a.ranks.iter().any(|&n| n > 1 << 20) {
        return Err(Error::BadArgument("--ranks: at most 1048576".into()));
    }
    let (alpha_us, link_gbps, note) = match &a.from_bench {
        Some(p) => {
            let (x, y, note) = from_bench(p)?;
            (x, y, Some(note))
        }
        None => (
            a.alpha_us.unwrap_or(10.0),
            a.link_gbps.unwrap_or(25.0),
            None,
        ),
    };
    // Ranges a link can have (1 MB/s to 1 PB/s; 0 to 1000 s per message),
    // so that every time the table prints is a readable number.
    if !(LINK_GBPS.contains(&link_gbps) && ALPHA_US.contains(&alpha_us)) {
        return Err(Error::BadArgument(format!(
            "--link-gbps must be {} to {} GB/s (got {}) and --alpha-us {} to {} us (got {})",
            LINK_GBPS.start(),
            LINK_GBPS.end(),
            num(link_gbps),
            ALPHA_US.start(),
            ALPHA_US.end(),
            num(alpha_us)
        )));
    }
    let model = ringreduce::theory::AlphaBeta {
        alpha_us,
        link_gbps,
    };
    if let Some(n) = note {
        out(n)?;
    }
    out_raw(&ringreduce::theory::render(
        d as f64, &a.size, &a.ranks, &model,
    ))?;
    Ok(true)
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
mod tests {
    use super::num;

    #[test]
    fn numbers_are_brief() {
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(10.0), "10");
        assert_eq!(num(1e-300), "1e-300");
        assert_eq!(num(1e308), "1e308");
        assert_eq!(num(-2.5e12), "-2.5e12");
        assert_eq!(num(f64::INFINITY), "inf");
    }
}
