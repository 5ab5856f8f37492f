use super::*;
use crate::report::fixtures::{header, row};

/// Of the priced paths of a report, one whose rows grow with the bytes
/// is fitted, one whose rows of several sizes do not grow (times that
/// fell from 124 to 79 us over 1-64 KiB, as once on a busy 2-core host)
/// is named as not fitted with its row count, and one with rows of a
/// single size is neither.
#[test]
fn a_path_whose_times_do_not_grow_is_named_not_fitted() {
    let mut rows = Vec::new();
    for (k, t) in [(10, 124.0), (12, 112.0), (14, 64.0), (16, 79.0)] {
        rows.push(row("oneshot:fused", None, 1 << k, t, t));
    }
    for k in [10u32, 14, 18, 22] {
        let t = 10.0 + (1u64 << k) as f64 / 1e3;
        rows.push(row("ring", None, 1 << k, t, t));
    }
    rows.push(row("ring:pipe2", None, 1 << 20, 50.0, 50.0));
    rows.push(row("ring:pipe2", None, 1 << 20, 51.0, 51.0));
    let rep = Report {
        header: header(),
        cold_start: vec![],
        rows,
        breakdown: vec![],
    };
    let contenders: Vec<Contender> = ["oneshot:fused", "ring", "ring:pipe2"]
        .iter()
        .map(|n| Contender::parse(n).expect("a contender"))
        .collect();
    let (fits, misses) = fit_models(&rep, &contenders);
    let fitted: Vec<&str> = fits.iter().map(|f| f.0.path.as_str()).collect();
    assert_eq!(fitted, ["ring"]);
    assert_eq!(misses, [("oneshot:fused".to_string(), 4)]);
    assert_eq!(refit(&rep).1, misses, "theory --from-bench says the same");
}
