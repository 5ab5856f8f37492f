//! JSON: the whole report (header, cold_start, rows), pretty-printed.

use std::path::Path;

use super::output::{write_output, JSON_FLAG};
use super::{Report, ReportError};

impl Report {
    /// Pretty-printed JSON of the whole report (header, cold_start, rows).
    pub fn to_json(&self) -> String {
        match serde_json::to_string_pretty(self) {
            Ok(s) => s,
            // Unreachable for these types; keep the output valid JSON anyway.
            Err(e) => serde_json::json!({ "error": e.to_string() }).to_string(),
        }
    }

    /// Parses a report written by [`Report::to_json`]; rows written before
    /// [`Row::collective`](super::Row::collective) existed load as all-reduce.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        Ok(serde_json::from_str(text)?)
    }

    /// Writes [`Report::to_json`] (plus a trailing newline) to `path`,
    /// as [`write_output`] does
    /// (a regular file is replaced atomically).
    pub fn write_json(&self, path: &Path) -> Result<(), ReportError> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        write_output(JSON_FLAG, path, s.as_bytes())
    }
}

#[cfg(test)]
mod tests;
