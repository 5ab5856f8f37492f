use super::super::fixtures::*;
use super::super::REDUCE_SCATTER;
use super::*;

#[test]
fn csv_header_and_rows() {
    let mut rep = report();
    rep.rows[0].path = Some("a,b".into());
    rep.rows[1].in_place = None;
    let path = temp_path("rows.csv");
    rep.write_csv(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(text, rep.to_csv());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + rep.rows.len());
    assert_eq!(
            lines[0],
            "algo,path,ranks,collective,size,count,type,redop,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong"
        );
    assert!(lines[1].starts_with("nccl,\"a,b\",2,all-reduce,8,2,float,sum,18.47,"));
    assert!(lines[1].ends_with(",")); // in-place wrong = None
    assert!(lines[2].starts_with("ring,ring:pipe4,2,all-reduce,8,2,float,sum,30,"));
    assert!(lines[2].ends_with(",0,,,,"));
    assert!(lines[3].starts_with("nccl,,2,all-reduce,1048576,262144,"));
    // Every line has the header's 16 cells (the quoted comma is one cell).
    for l in &lines[2..] {
        assert_eq!(l.split(',').count(), 16, "{l}");
    }
}

#[test]
fn csv_collective_and_quoting() {
    let mut rep = report();
    // (A row's type is typed: `bf16` is written by its name.)
    rep.rows = vec![row_of("x\"y", REDUCE_SCATTER, "bf16", 64, 2.0)];
    let csv = rep.to_csv();
    let line = csv.lines().nth(1).unwrap_or_default();
    assert!(
        line.starts_with("\"x\"\"y\",,2,reduce-scatter,64,16,bfloat16,sum,2,"),
        "{line}"
    );
    assert_eq!(csv_cell("a\nb"), "\"a\nb\"");
    assert_eq!(csv_cell("plain"), "plain");
}
