//! `ringreduce theory`: Parameter Server vs Ring, traffic and alpha-beta time.

use super::out_raw;
use crate::error::{Error, Result};
use crate::size::parse_size;

#[derive(clap::Args, Debug)]
pub struct TheoryArgs {
    /// Data per rank D (decimal MB as in the seed: 100MB = 1e8 bytes).
    #[arg(long, default_value = "100MB")]
    pub size: String,
    /// Rank counts to tabulate.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64")]
    pub ranks: Vec<usize>,
    /// Per-message latency alpha (microseconds) for the time model.
    #[arg(long, default_value_t = 10.0)]
    pub alpha_us: f64,
    /// Per-link bandwidth (GB/s, each direction) for the time model.
    #[arg(long, default_value_t = 25.0)]
    pub link_gbps: f64,
}

pub fn execute(a: TheoryArgs) -> Result<bool> {
    let d = parse_size(&a.size)?;
    if a.ranks.is_empty() || a.ranks.contains(&0) {
        return Err(Error::BadArgument(
            "--ranks needs positive rank counts".into(),
        ));
    }
    if a.ranks.iter().any(|&n| n > 1 << 20) {
        return Err(Error::BadArgument("--ranks: at most 1048576".into()));
    }
    if !a.link_gbps.is_finite() || a.link_gbps <= 0.0 || !a.alpha_us.is_finite() || a.alpha_us < 0.0
    {
        return Err(Error::BadArgument(
            "--link-gbps must be > 0 and --alpha-us >= 0".into(),
        ));
    }
    let model = crate::theory::AlphaBeta {
        alpha_us: a.alpha_us,
        link_gbps: a.link_gbps,
    };
    out_raw(&crate::theory::render(d as f64, &a.size, &a.ranks, &model))?;
    Ok(true)
}
