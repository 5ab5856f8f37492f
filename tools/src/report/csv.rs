//! CSV: one line per row after a header line (RFC 4180 quoting).

use std::path::Path;

use super::output::{write_output, CSV_FLAG};
use super::{Report, ReportError};

/// The CSV header line (without the line break).
const CSV_HEADER: &str = "algo,path,ranks,collective,size,count,type,redop,\
     oop_time_us,oop_algbw,oop_busbw,oop_wrong,\
     ip_time_us,ip_algbw,ip_busbw,ip_wrong";

impl Report {
    /// Writes [`Report::to_csv`] to `path` as
    /// [`write_output`] does (a regular file is replaced
    /// atomically).
    pub fn write_csv(&self, path: &Path) -> Result<(), ReportError> {
        write_output(CSV_FLAG, path, self.to_csv().as_bytes())
    }

    /// One CSV line per row, after a header line naming the columns:
    /// `algo`, `path`, `ranks`, `collective`, `size`, `count`, `type`,
    /// `redop`, then `time_us`, `algbw`, `busbw`, `wrong` prefixed `oop_`
    /// (out-of-place) and `ip_` (in-place). Every line ends in `\n`. `None` values are empty cells; text cells are quoted when
    /// needed (RFC 4180).
    pub fn to_csv(&self) -> String {
        let mut s = String::from(CSV_HEADER);
        s.push('\n');
        for r in &self.rows {
            let mut cells = vec![
                csv_cell(&r.algo),
                r.path.as_deref().map(csv_cell).unwrap_or_default(),
                r.ranks.to_string(),
                csv_cell(r.collective.name()),
                r.size.to_string(),
                r.count.to_string(),
                csv_cell(r.dtype.name()),
                csv_cell(r.redop_name()),
            ];
            for m in [&r.out_of_place, &r.in_place] {
                match m {
                    Some(m) => {
                        cells.push(m.time_us.to_string());
                        cells.push(m.algbw.to_string());
                        cells.push(m.busbw.to_string());
                        cells.push(m.wrong.map(|w| w.to_string()).unwrap_or_default());
                    }
                    None => cells.extend(["", "", "", ""].map(String::from)),
                }
            }
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }
}

/// Quotes a CSV cell when it contains a comma, quote or line break.
fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
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
}
