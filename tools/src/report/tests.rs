use super::fixtures::*;
use super::*;

#[test]
fn bandwidth_arithmetic() {
    let m = Measurement::new(ALL_REDUCE, GIB, 2, 2740.0, Some(0));
    let expect = 1_073_741_824.0 / 2740e-6 / 1e9;
    assert!((m.algbw - expect).abs() < 1e-9);
    assert!((m.algbw - 391.876).abs() < 1e-3);
    assert_eq!(m.busbw, m.algbw); // factor 1 for N = 2
    let m4 = Measurement::new(ALL_REDUCE, GIB, 4, 2740.0, None);
    assert!((m4.busbw - 1.5 * m4.algbw).abs() < 1e-9);
    assert_eq!(ALL_REDUCE.bus_factor(1), 0.0);
    assert_eq!(ALL_REDUCE.bus_factor(0), 0.0);
    assert_eq!(ALL_REDUCE.bus_factor(8), 1.75);
    assert_eq!(
        Measurement::new(ALL_REDUCE, GIB, 1, 2740.0, None).busbw,
        0.0
    );
    assert_eq!(algbw_gbps(1_000_000_000, 1e6), 1.0);
    assert_eq!(algbw_gbps(8, 0.0), 0.0);
}

#[test]
fn bus_factor_per_collective() {
    assert_eq!(REDUCE_SCATTER.bus_factor(8), 0.875);
    assert_eq!(ALL_GATHER.bus_factor(4), 0.75);
    assert_eq!(ALL_GATHER.bus_factor(1), 0.0);
    assert_eq!(REDUCE_SCATTER.bus_factor(0), 0.0);
    let rs = Measurement::new(REDUCE_SCATTER, GIB, 4, 2740.0, None);
    let ar = Measurement::new(ALL_REDUCE, GIB, 4, 2740.0, None);
    assert_eq!(rs.algbw, ar.algbw);
    assert!((rs.busbw - 0.75 * rs.algbw).abs() < 1e-9);
    assert!((ar.busbw - 2.0 * rs.busbw).abs() < 1e-9);
}

/// Rows carry typed collectives, types and ops, written as the names
/// they had as strings (issue 26): JSON, CSV and back.
#[test]
fn row_enums_are_written_by_name() {
    let mut rep = report();
    rep.rows = vec![row_of("ring", ALL_GATHER, "bf16", 64, 2.0)];
    rep.rows[0].redop = None;
    rep.rows
        .push(row_of("ring", REDUCE_SCATTER, "f8e5m2", 64, 2.0));
    let json = rep.to_json();
    for field in [
        "\"collective\": \"all-gather\"",
        "\"type\": \"bfloat16\"",
        "\"redop\": \"none\"",
        "\"collective\": \"reduce-scatter\"",
        "\"type\": \"f8e5m2\"",
        "\"redop\": \"sum\"",
    ] {
        assert!(json.contains(field), "{field}: {json}");
    }
    assert_eq!(Report::from_json(&json).unwrap(), rep);
    let csv = rep.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[1].starts_with("ring,,2,all-gather,64,16,bfloat16,none,"),
        "{csv}"
    );
    assert!(lines[2].starts_with("ring,,2,reduce-scatter,64,"), "{csv}");
    assert!(lines[2].contains(",f8e5m2,sum,"), "{csv}");
    assert_eq!(
        Combo::of(&rep.rows[0]).to_string(),
        "all-gather bfloat16 none"
    );
    let bad = json.replace("bfloat16", "bfloat17");
    assert!(Report::from_json(&bad).is_err());
}

#[test]
fn combos_in_order_of_first_appearance() {
    let mut rep = report();
    assert_eq!(rep.combos().len(), 1);
    assert_eq!(rep.combos()[0].to_string(), "all-reduce float sum");
    rep.rows.push(row_of("nccl", ALL_GATHER, "float", 64, 10.0));
    rep.rows.push(row_of("ring", ALL_REDUCE, "half", 64, 10.0));
    rep.rows.push(row_of("ring", ALL_GATHER, "float", 64, 10.0));
    let combos = rep.combos();
    let names: Vec<String> = combos.iter().map(Combo::to_string).collect();
    assert_eq!(
        names,
        [
            "all-reduce float sum",
            "all-gather float sum",
            "all-reduce half sum"
        ]
    );
    assert_eq!(rep.rows_of(&combos[1]).count(), 2);
    assert_eq!(rep.rows_of(&combos[0]).count(), 6);
    assert_eq!(rep.algos(), ["nccl", "ring"]);
}

#[test]
fn errors_name_the_flag_and_path() {
    let e = ReportError::WrongExtension {
        flag: "--plot",
        path: "out/plot.png".into(),
        found: Some("png".into()),
        expected: "svg",
    };
    let s = e.to_string();
    assert_eq!(
            s,
            "--plot out/plot.png: ends in .png, but this output is SVG: give a path ending in .svg (a device, a FIFO or /dev/stdout may be named as it is)"
        );
    let e = ReportError::SamePath {
        first: "-J/--json",
        second: "--csv",
        path: "a.out".into(),
    };
    assert!(e.to_string().starts_with("-J/--json and --csv both name"));
}
