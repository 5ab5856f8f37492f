//! The sweep itself: every (collective, type, op), every size and
//! contender, each row streamed as a `#` line as it is measured.

use super::{out, Args, BenchArgs};
use crate::bench::{self, Contender};
use crate::report::{self, Report, Row};
use indicatif::{ProgressBar, ProgressStyle};
use ringreduce::element::{Element, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::error::Result;
use ringreduce::plan::Collective;
use ringreduce::size::format_bytes;
use std::io::IsTerminal;

/// Every (collective, type, op) of the sweep, its rows into `rep`.
pub(super) fn sweep(
    e: Engine,
    a: &BenchArgs,
    x: &Args,
    root: bool,
    info: &ringreduce::backend::BackendInfo,
    rep: &mut Report,
) -> Result<Engine> {
    let (ranks, big) = (x.ranks, x.big);
    let (sizes, contenders) = (&x.sizes, &x.contenders);
    let jobs = x.combos.each();
    let total = (jobs.len() * sizes.len() * contenders.len()) as u64;
    let pb = (root && std::io::stderr().is_terminal() && total > 8).then(|| {
        let pb = ProgressBar::new(total);
        pb.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}<{eta}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    });
    out(format!(
        "# ringreduce bench: {ranks} ranks, {}; rows as they are measured (tables follow):",
        info.describe
    ))?;
    let mut core = e;
    let sweep = Sweep {
        sizes,
        contenders,
        big,
        iters: a.iters,
        warmup: a.warmup,
        blocks: a.blocks as usize,
        check: a.check != 0,
        pb: pb.as_ref(),
    };
    for (coll, dtype, op) in jobs {
        let rows =
            ringreduce::with_element!(dtype, T => sweep_rows::<T>(&mut core, &sweep, coll, op));
        rep.rows.extend(rows?);
    }
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    Ok(core)
}

struct Sweep<'a> {
    sizes: &'a [u64],
    contenders: &'a [Contender],
    big: u64,
    iters: usize,
    warmup: usize,
    blocks: usize,
    check: bool,
    pb: Option<&'a ProgressBar>,
}

fn sweep_rows<T: Element>(
    e: &mut Engine,
    s: &Sweep<'_>,
    coll: Collective,
    op: ReduceOp,
) -> Result<Vec<Row>> {
    let n = e.ranks();
    let mut rows = Vec::new();
    for &size in s.sizes {
        let count = bench::count_for(coll, size, T::DTYPE.size(), n);
        if count == 0 && size > 0 {
            continue; // smaller than one element per rank
        }
        let (iters, warmup) = if size > s.big {
            (s.iters.clamp(1, 5), s.warmup.min(2))
        } else {
            (s.iters, s.warmup)
        };
        for c in s.contenders {
            if let Some(pb) = s.pb {
                pb.set_message(format!(
                    "{} {} {} {}",
                    coll,
                    T::DTYPE.name(),
                    c.name,
                    format_bytes(size)
                ));
            }
            let row = bench::measure_row::<T>(
                e,
                c,
                coll,
                count,
                op,
                (warmup, iters, s.blocks),
                s.check,
                7,
            )?;
            out(stream_line(&row))?;
            rows.push(row);
            if let Some(pb) = s.pb {
                pb.inc(1);
            }
        }
    }
    Ok(rows)
}

/// One measured row, as a `#` line (parsers of nccl-tests output skip it;
/// the tables at the end hold the same numbers).
fn stream_line(r: &Row) -> String {
    let cell = |m: &Option<report::Measurement>| match m {
        Some(m) => format!(
            "{:>10.2} us {:>8.2} GB/s busbw {:>6}",
            m.time_us,
            m.busbw,
            m.wrong.map_or("N/A".into(), |w| w.to_string())
        ),
        None => format!("{:>40}", "-"),
    };
    format!(
        "# row {:<14} {:<14} {:>8} {:>10} {:>5} | out {} | in {} | {}",
        r.collective.name(),
        r.algo,
        r.dtype.name(),
        format_bytes(r.size),
        r.redop_name(),
        cell(&r.out_of_place),
        cell(&r.in_place),
        r.path.as_deref().unwrap_or("")
    )
}
