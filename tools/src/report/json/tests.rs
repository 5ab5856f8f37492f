use super::super::fixtures::*;
use super::super::{Row, ALL_GATHER, ALL_REDUCE};
use super::*;

#[test]
fn json_round_trip() {
    let rep = report();
    let json = rep.to_json();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, rep);
    let path = temp_path("round_trip.json");
    rep.write_json(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(Report::from_json(&text).unwrap(), rep);
    assert!(json.contains("\"cold_start\"") && json.contains("\"rank_to_device\""));
    assert!(json.contains("\"collective\": \"all-reduce\""));
    assert!(json.contains("\"type\": \"float\""));
}

#[test]
fn model_and_breakdown_are_optional() {
    let mut rep = report();
    let old = rep.to_json();
    assert!(!old.contains("\"models\"") && !old.contains("\"breakdown\""));
    assert_eq!(Report::from_json(&old).unwrap(), rep);
    rep.header.models.push(super::super::ModelFit {
        path: "ring".into(),
        formula: crate::theory::Cost::Ring { slices: 1 }.formula(),
        alpha_us: 6.5,
        beta_gbps: 310.0,
        rows: 9,
        overlap: 0.7,
    });
    rep.breakdown.push(super::super::BreakdownRow {
        size: 1 << 20,
        path: "ring:pipe2".into(),
        calls: 3,
        model_us: Some(40.0),
        sweep_us: Some(42.0),
        wall_us: 50.0,
        issue_us: 10.0,
        wait_us: 5.0,
        copy_us: 20.0,
        reduce_us: 10.0,
        rest_us: 5.0,
        timing: "timing source: CUPTI activity".into(),
    });
    let back = Report::from_json(&rep.to_json()).unwrap();
    assert_eq!(back, rep);
    assert!(rep
        .render_header()
        .contains("# Model of ring: alpha = 6.50 us per round"));
}

#[test]
fn collectives_round_trip() {
    let mut rep = report();
    rep.rows.push(row_of("ring", ALL_GATHER, "half", 64, 3.0));
    let back = Report::from_json(&rep.to_json()).unwrap();
    assert_eq!(back, rep);
    assert_eq!(back.rows[6].collective, ALL_GATHER);
}

/// JSON written before rows had a collective loads as all-reduce.
#[test]
fn old_json_without_collective_loads() {
    let mut value: serde_json::Value = serde_json::from_str(&report().to_json()).unwrap();
    let rows = value["rows"].as_array_mut().unwrap();
    for r in rows.iter_mut() {
        r.as_object_mut().unwrap().remove("collective");
    }
    let old = serde_json::to_string(&value).unwrap();
    assert!(!old.contains("collective"));
    let back = Report::from_json(&old).unwrap();
    assert_eq!(back, report());
    assert!(back.rows.iter().all(|r: &Row| r.collective == ALL_REDUCE));
    assert!(matches!(
        Report::from_json("{\"rows\": 3}"),
        Err(ReportError::Json(_))
    ));
}
