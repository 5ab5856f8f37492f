use super::*;

/// Every published point is within 25 % of the model, or says why
/// not; and a stated gap is a real one (the reason goes when the
/// model comes within reach).
#[test]
fn every_point_is_within_a_quarter_or_explained() {
    for p in POINTS {
        let e = error(p);
        assert_eq!(
            p.gap.is_some(),
            !within(p),
            "{} {} x {} {} B: model {:.1} against {:.1} ({:+.0} %)",
            p.run.source,
            p.run.nodes,
            p.run.per_node,
            p.bytes,
            model_busbw(p),
            p.busbw,
            100.0 * e
        );
    }
    let t = render();
    assert_eq!(
        t.lines()
            .filter(|l| l.starts_with("| ") && l.contains(" % |"))
            .count(),
        POINTS.len()
    );
}
