//! The source line and the fallback's reason.

use super::*;

#[test]
fn the_source_line_says_which_source_timed_the_call_and_why_not_cupti() {
    assert_eq!(
        TimingSource::choose(Ok(())).line(),
        "timing source: CUPTI activity"
    );
    let ev = TimingSource::choose(Err(
        "cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED".into(),
    ));
    assert_eq!(
        ev.line(),
        "timing source: CUDA events (CUPTI: cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
    );
    assert_eq!(
        TimingSource::summary(&[TimingSource::Cupti, TimingSource::Cupti]),
        "timing source: CUPTI activity"
    );
    let mixed = TimingSource::summary(&[TimingSource::Cupti, ev.clone(), TimingSource::Cupti]);
    assert_eq!(
        mixed,
        "timing source: CUPTI activity + CUDA events (CUPTI: cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) (mixed)"
    );
    // One clause, so the part before the first "; " of a clock is the source.
    assert!(!mixed.contains("; "));
    let two = TimingSource::Events("not found: a (x); b (y)".into()).line();
    assert_eq!(
        two,
        "timing source: CUDA events (CUPTI: not found: a (x), b (y))"
    );
    let clock = clock_line(&[ev], 1500.0, 3000.0);
    assert!(
        clock.starts_with("timing source: CUDA events (CUPTI: "),
        "{clock}"
    );
    assert!(clock.contains("GPU event timestamps") && !clock.contains("cuptiGetTimestamp"));
    assert!(
        clock.contains("+/- 1.5 us") && clock.contains("3.0 us"),
        "{clock}"
    );
    let clock = clock_line(&[TimingSource::Cupti], 0.0, 0.0);
    assert!(clock.starts_with("timing source: CUPTI activity; CUPTI activity timestamps"));
}

#[test]
fn a_partial_timeline_says_so_in_its_source_line() {
    assert_eq!(TimingSource::cupti(CuptiKinds::All), TimingSource::Cupti);
    let k = TimingSource::cupti(CuptiKinds::Kernel).line();
    assert_eq!(
        k,
        "timing source: CUPTI activity, PARTIAL: kernels only (RINGREDUCE_CUPTI_KINDS=kernel, the other ops are shown as instants)"
    );
    // One clause (see the source line test).
    assert!(!k.contains("; "));
    let c = TimingSource::cupti(CuptiKinds::Copy).line();
    assert!(c.contains("PARTIAL: copies and memsets only"), "{c}");
    let clock = clock_line(&[TimingSource::cupti(CuptiKinds::Copy)], 0.0, 0.0);
    assert!(clock.contains("PARTIAL") && clock.contains("CUPTI activity timestamps"));
}
