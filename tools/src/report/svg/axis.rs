//! The panels' shared x range (log2 bytes) and its ticks, and the axis
//! type that places fixed ticks on values that are already logarithms.

use super::{min_max, PlotSeries};
use ringreduce::size::format_bytes;

/// The shared x range (log2 bytes) of both panels and its tick marks.
pub(super) struct XRange {
    pub(super) lo: f64,
    pub(super) hi: f64,
}

impl XRange {
    pub(super) fn of(series: &[PlotSeries]) -> Self {
        let (lo, hi) = min_max(
            series
                .iter()
                .flat_map(|s| s.points().chain(s.times()))
                .map(|p| p.0),
        )
        .unwrap_or((3.0, 30.0));
        XRange {
            lo: lo - 0.5,
            hi: hi + 0.5,
        }
    }

    /// Tick marks at integer powers of two; labels every `step` exponents,
    /// always on multiples of `step` so 1KiB / 1MiB / 1GiB are labelled
    /// when `step` divides 10; at most `max_labels` labels.
    pub(super) fn axis(&self, max_labels: i64) -> TickAxis {
        let e_lo = self.lo.ceil() as i64;
        let e_hi = self.hi.floor() as i64;
        let span = (e_hi - e_lo).max(0);
        let step = [1_i64, 2, 5, 10]
            .into_iter()
            .find(|s| span / s < max_labels.max(1))
            .unwrap_or(10);
        TickAxis {
            lo: self.lo,
            hi: self.hi,
            bold: (e_lo..=e_hi)
                .filter(|e| e.rem_euclid(step) == 0)
                .map(|e| e as f64)
                .collect(),
            light: (e_lo..=e_hi).map(|e| e as f64).collect(),
        }
    }
}

/// `8B`, `32KiB`, `1GiB` for an exponent of two.
pub(super) fn size_label(v: &f64) -> String {
    let e = v.round();
    if (0.0..64.0).contains(&e) {
        format_bytes(1_u64 << (e as u32))
    } else {
        String::new()
    }
}

/// A linear axis over values that are already logarithms, with fixed tick
/// positions (`bold` get labels and grid lines, `light` only grid lines).
pub(super) struct TickAxis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) bold: Vec<f64>,
    pub(super) light: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for TickAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return limit.0;
        }
        let frac = (value - self.lo) / span;
        limit.0 + (f64::from(limit.1 - limit.0) * frac).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}
