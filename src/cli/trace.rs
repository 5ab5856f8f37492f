//! `ringreduce trace`: a small collective step by step (CPU, symbolic).

use super::{out_raw, Kinds};
use crate::algo::AlgoChoice;
use crate::error::{Error, Result};
use crate::plan::Shape;

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    #[arg(long, default_value_t = 4)]
    pub ranks: usize,
    /// Elements per rank (NCCL's count).
    #[arg(long, default_value_t = 8)]
    pub count: usize,
    /// Work in place.
    #[arg(long)]
    pub in_place: bool,
    #[command(flatten)]
    pub kinds: Kinds,
    /// Algorithm to trace: ring, ring:naive, ring:pipeK, ps, oneshot,
    /// oneshot:fused, oneshot:flag, auto.
    #[arg(long, default_value = "ring")]
    pub algo: String,
}

pub fn execute(a: TraceArgs) -> Result<bool> {
    if a.ranks == 0 {
        return Err(Error::ZeroRanks);
    }
    let (dtype, op, collective) = a.kinds.single()?;
    let choice: AlgoChoice = a.algo.parse().map_err(Error::BadArgument)?;
    let shape = Shape {
        collective,
        ranks: a.ranks,
        count: a.count,
        elem_size: dtype.size(),
        in_place: a.in_place,
    };
    let text = crate::trace::render(&choice, &shape, dtype, op)?;
    out_raw(&text)?;
    Ok(!text.contains("\n  FAIL"))
}
