//! Where a timed call's op times came from ([`TimingSource`]: CUPTI, or
//! CUDA events and why not CUPTI) and how they were placed on the host
//! clock, and (`records.rs`, the `profiling` feature) the timeline from
//! CUPTI activity records (pure: no driver call).

use crate::backend::OpTime;
use crate::param::CuptiKinds;

/// A rank's timed calls since the last take (each call's op times and
/// source) and the half-width of its clock alignment (ns).
pub type RankTiming = (Vec<(Vec<OpTime>, TimingSource)>, f64);

/// Where a timed call's op times came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimingSource {
    /// CUPTI's activity records.
    Cupti,
    /// CUPTI's activity records of some kinds only
    /// (`RINGREDUCE_CUPTI_KINDS`): the ops of the others are instants.
    CuptiPartial(CuptiKinds),
    /// CUDA events between the ops; CUPTI was not used, for this reason.
    Events(String),
}

impl TimingSource {
    /// The line the timeline and `bench --breakdown` print.
    pub fn line(&self) -> String {
        match self {
            TimingSource::Cupti => "timing source: CUPTI activity".into(),
            TimingSource::CuptiPartial(k) => format!(
                "timing source: CUPTI activity, PARTIAL: {} (RINGREDUCE_CUPTI_KINDS={}, the other ops are shown as instants)",
                match k {
                    CuptiKinds::Copy => "copies and memsets only",
                    _ => "kernels only",
                },
                match k {
                    CuptiKinds::Copy => "copy",
                    CuptiKinds::Kernel => "kernel",
                    CuptiKinds::All => "all",
                }
            ),
            // One clause: a clock's first "; " ends its source.
            TimingSource::Events(why) => format!(
                "timing source: CUDA events (CUPTI: {})",
                why.replace("; ", ", ")
            ),
        }
    }

    /// The source of a call given CUPTI's state: `Ok` when CUPTI loaded
    /// and started the call's collection, else events with the reason.
    pub fn choose(cupti: std::result::Result<(), String>) -> Self {
        match cupti {
            Ok(()) => TimingSource::Cupti,
            Err(why) => TimingSource::Events(why),
        }
    }

    /// The source of a call CUPTI timed with the kinds `kinds`.
    #[cfg_attr(not(feature = "profiling"), allow(dead_code))]
    pub fn cupti(kinds: CuptiKinds) -> Self {
        match kinds {
            CuptiKinds::All => TimingSource::Cupti,
            k => TimingSource::CuptiPartial(k),
        }
    }

    /// One line for the sources of several ranks or calls: the same one,
    /// or every distinct one, in order.
    pub fn summary(sources: &[TimingSource]) -> String {
        let mut seen: Vec<&TimingSource> = Vec::new();
        for s in sources {
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
        match seen.as_slice() {
            [] => "timing source: none (no timed call)".into(),
            [one] => one.line(),
            many => {
                let each: Vec<String> = many
                    .iter()
                    .map(|s| s.line().replacen("timing source: ", "", 1))
                    .collect();
                format!("timing source: {} (mixed)", each.join(" + "))
            }
        }
    }
}

/// The timeline's `clock` text of a call whose ranks were timed from
/// `sources`: the source line, then how the times were placed on the host
/// clock (`widest`: the widest rank's alignment half-width, `skew`: how
/// far apart two ranks can be; ns).
pub fn clock_line(sources: &[TimingSource], widest: f64, skew: f64) -> String {
    let cupti = sources
        .iter()
        .any(|s| matches!(s, TimingSource::Cupti | TimingSource::CuptiPartial(_)));
    let events = sources.iter().any(|s| matches!(s, TimingSource::Events(_)));
    let mut v = vec![TimingSource::summary(sources)];
    if cupti {
        v.push("CUPTI activity timestamps of each op's kernel or copy (nothing added to the streams), placed on the host clock through cuptiGetTimestamp bracketed by host readings".into());
    }
    if events {
        v.push("GPU event timestamps (cuEventRecord on each op's stream), placed on the host clock through one anchor event per rank recorded on the idle GPU and bracketed by host readings, plus the events' ~0.5 us resolution".into());
    }
    v.push(format!(
        "widest bracket +/- {:.1} us; two ranks within {:.1} us of each other",
        widest / 1e3,
        skew / 1e3
    ));
    v.join("; ")
}

#[cfg(feature = "profiling")]
mod records;
#[cfg(feature = "profiling")]
pub use records::{spans, CuptiCall, OpRef};

#[cfg(test)]
mod tests;
