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
mod tests;
