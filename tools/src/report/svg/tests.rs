use super::super::fixtures::*;
use super::super::{Header, ALL_GATHER};
use super::*;

#[test]
fn svg_written_with_each_algo() {
    let rep = report();
    let path = temp_path("plot.svg");
    rep.write_svg(&path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(svg.contains("<svg"));
    for name in [
        "nccl",
        "ring (ring:pipe4 / ring:pipe1)",
        "peer-copy ceiling",
        "1MiB",
        "1GiB",
        "NVIDIA H200",
        "bus bandwidth",
        "time per call",
        "100 µs",
        "all-reduce (float, sum) · 2 ranks · cuda",
    ] {
        assert!(svg.contains(name), "missing {name}");
    }
    // No data at all still yields a valid (empty) chart.
    let empty = Report {
        header: Header {
            hardware: vec![],
            link_ceiling_gbps: None,
            ..header()
        },
        cold_start: vec![],
        rows: vec![],
        breakdown: vec![],
    };
    let path2 = temp_path("empty.svg");
    empty.write_svg(&path2).unwrap();
    let svg2 = std::fs::read_to_string(&path2).unwrap();
    let _ = std::fs::remove_file(&path2);
    assert!(svg2.contains("<svg") && svg2.contains("no results"));
}

#[test]
fn svg_bad_path_is_an_error() {
    let path = std::env::temp_dir()
        .join("ringreduce_no_such_dir_x9")
        .join("plot.svg");
    assert!(matches!(
        report().write_svg(&path),
        Err(ReportError::Write { .. })
    ));
    let png = temp_path("plot.png");
    assert!(matches!(
        report().write_svg(&png),
        Err(ReportError::WrongExtension { .. })
    ));
    assert!(!png.exists());
}

#[test]
fn title_lines_fit_the_width() {
    let width = f64::from(SVG_WIDTH - 2 * PAD);
    let mut rep = report();
    let [a, b] = rep.title_lines(rep.combos().first(), width);
    assert_eq!(a, "all-reduce (float, sum) · 2 ranks · cuda");
    assert_eq!(
        b,
        "NVIDIA H200 · 560.35 · NCCL 2.23.4 · one rank per GPU · 2025-01-01"
    );
    rep.header.hardware = vec!["NVIDIA H200".into(); 8];
    rep.header.backend = "cuda: GPU0 NVIDIA H200, GPU1 NVIDIA H200".into();
    let [a, b] = rep.title_lines(rep.combos().first(), width);
    assert_eq!(a, "all-reduce (float, sum) · 2 ranks · cuda");
    assert!(b.starts_with("8 × NVIDIA H200 · "), "{b}");
    // Ranks sharing GPUs, and the CPU backend, say they are virtual.
    rep.header.ranks = 4;
    rep.header.rank_to_device = vec![0, 0, 1, 1];
    let [_, b] = rep.title_lines(rep.combos().first(), width);
    assert!(b.contains("virtual ranks: 4 on 2 GPUs"), "{b}");
    rep.header.backend = "cpu: 4 ranks in this process".into();
    let [_, b] = rep.title_lines(rep.combos().first(), width);
    assert!(b.contains("virtual ranks in host memory"), "{b}");
    rep.header.backend = "cuda: GPU0 NVIDIA H200, GPU1 NVIDIA H200".into();
    // Far too long: both lines shortened with an ellipsis.
    rep.header.hardware = vec!["Very Wide Machine ".repeat(40)];
    rep.header.backend = "W".repeat(300);
    // (A row's collective is typed: the long name goes in its combo.)
    let mut combo = rep.combos()[0].clone();
    combo.collective = "all-reduce-".repeat(20);
    let lines = rep.title_lines(Some(&combo), width);
    for (line, font) in lines.iter().zip([TITLE_FONT, SUBTITLE_FONT]) {
        assert!(text_width(line, rendered(font)) <= width, "{line}");
        assert!(line.ends_with('…'), "{line}");
    }
    // The plot's own title: the rows' combination, shortened too.
    let lines = rep.title_lines(rep.combos().first(), width);
    let svg = rep.to_svg().unwrap();
    assert!(svg.contains(lines[0].as_str()) && svg.contains(lines[1].as_str()));
}

#[test]
fn text_width_and_fit() {
    assert_eq!(text_width("", 20.0), 0.0);
    assert!((text_width("iW", 10.0) - 12.67).abs() < 1e-9);
    assert_eq!(fit_text("short", 14.0, 1000.0), "short");
    let cut = fit_text("abcdefghij", 10.0, 30.0);
    assert!(
        cut.ends_with('…') && text_width(&cut, 10.0) <= 30.0,
        "{cut}"
    );
    assert_eq!(fit_text("abc", 10.0, 0.0), "…");
}

#[test]
fn legend_labels_name_the_paths() {
    let rows = [
        row("auto", Some("oneshot:fused"), 8, 5.0, 5.0),
        row("auto", Some("oneshot:fused"), 64, 5.0, 5.0),
        row("auto", Some("ring:pipe2"), 1 << 20, 50.0, 50.0),
        row("nccl", None, 8, 5.0, 5.0),
        row("ps", Some("ps"), 8, 5.0, 5.0),
        row("ring", Some("oneshot:pull/oneshot"), 8, 5.0, 5.0),
    ];
    let refs: Vec<&Row> = rows.iter().collect();
    let labels: Vec<String> = plot_series(&refs).into_iter().map(|s| s.label).collect();
    assert_eq!(
        labels,
        [
            "auto (oneshot:fused / ring:pipe2)",
            "nccl",
            "ps",
            "ring (oneshot:pull / oneshot)"
        ]
    );
    // Many paths: as many as fit, then "+N more".
    let many: Vec<Row> = (0..12)
        .map(|i| {
            row(
                "auto",
                Some(&format!("ring:pipe{i}-with-a-long-name")),
                8 << i,
                5.0,
                5.0,
            )
        })
        .collect();
    let refs: Vec<&Row> = many.iter().collect();
    let label = series_label("auto", &refs, LEGEND_LABEL_MAX);
    assert!(
        label.starts_with("auto (ring:pipe0-with-a-long-name / "),
        "{label}"
    );
    assert!(label.ends_with(" more)"), "{label}");
    assert!(text_width(&label, rendered(LEGEND_FONT)) <= LEGEND_LABEL_MAX);
}

#[test]
fn plots_the_first_combination_and_names_the_others() {
    let mut rep = report();
    rep.rows
        .push(row_of("only-in-ag", ALL_GATHER, "float", 64, 3.0));
    let svg = rep.to_svg().unwrap();
    assert!(!svg.contains("only-in-ag"));
    assert!(svg.contains("not plotted (see the JSON/CSV): all-gather float sum"));
}

#[test]
fn series_best_per_size_and_log_time() {
    let rows = [
        row("a", None, 1024, 10.0, 1000.0),
        row("a", None, 1024, 20.0, 100.0),
    ];
    let refs: Vec<&Row> = rows.iter().collect();
    let s = plot_series(&refs);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].oop_t, [(10.0, 1.0)]);
    assert_eq!(s[0].ip_t, [(10.0, 2.0)]);
    assert_eq!(s[0].oop_bw.len(), 1);
    assert!((s[0].oop_bw[0].1 - 1024.0 / 10e3).abs() < 1e-12);
}

#[test]
fn axis_labels() {
    assert_eq!(time_label(10.0), "10 µs");
    assert_eq!(time_label(2.0), "2 µs");
    assert_eq!(time_label(0.5), "0.5 µs");
    assert_eq!(time_label(2000.0), "2 ms");
    assert_eq!(time_label(1.5e6), "1.5 s");
    assert_eq!(time_label(100_000.0), "100 ms");
    assert_eq!(size_label(&10.0), "1KiB");
    assert_eq!(size_label(&30.0), "1GiB");
    let x = XRange { lo: 2.5, hi: 30.5 };
    let axis = x.axis(9);
    assert_eq!(axis.bold, [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]);
    assert_eq!(axis.light.len(), 28);
}
