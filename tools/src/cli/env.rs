//! `ringreduce env`: every environment variable ringreduce reads
//! (declared in `src/param.rs`), with its value, where the value came from, what is
//! accepted and what it does; exit 2 naming each malformed one.

use super::out;
use ringreduce::error::{Error, Result};
use ringreduce::param::{self, Declared, Group};
use std::ffi::OsString;

#[derive(clap::Args, Debug)]
pub struct EnvArgs {}

/// A value for a line: as it is when it is plain, quoted otherwise.
fn shown(v: &OsString) -> String {
    let s = v.to_string_lossy();
    if v.to_str().is_some()
        && !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"')
    {
        s.into_owned()
    } else {
        format!("{s:?}")
    }
}

/// The first line of a declared variable's entry, and its error if its
/// value is refused.
fn entry(p: &dyn Declared) -> (String, Option<Error>) {
    let name = p.name();
    let set = p.set();
    match (&set, p.check()) {
        (_, Err(e)) => {
            let why = match &e {
                Error::Env { reason, .. } => reason.clone(),
                other => other.to_string(),
            };
            let v = set.as_ref().map(shown).unwrap_or_default();
            (
                format!("{name}={v}  (environment: INVALID, {why})"),
                Some(e),
            )
        }
        (Some(v), Ok(())) if p.raw().is_none() => (
            format!(
                "{name}={}  (empty: counts as unset, {})",
                if v.is_empty() {
                    String::new()
                } else {
                    shown(v)
                },
                p.default()
            ),
            None,
        ),
        (Some(v), Ok(())) => (format!("{name}={}  (environment)", shown(v)), None),
        (None, Ok(())) => (format!("{name}  (unset: {})", p.default()), None),
    }
}

pub fn execute(_a: EnvArgs) -> Result<bool> {
    out("# ringreduce env: the environment variables ringreduce reads, with their values and where each came from")?;
    out(
        "# (an empty value counts as unset; a malformed one is an error naming it, never ignored)",
    )?;
    let all = ringreduce::settings::all();
    let mut errors = Vec::new();
    for g in Group::ALL {
        out("")?;
        out(format!("## {}", g.title()))?;
        for p in all.iter().filter(|p| p.group() == g) {
            let (line, err) = entry(*p);
            out(line)?;
            out(format!("    {}", p.doc()))?;
            out(format!("    accepted: {}", p.accepted()))?;
            errors.extend(err);
        }
    }
    out("")?;
    out("## read by the test suites only")?;
    for (name, doc, value) in param::test_only() {
        match value {
            Some(v) => out(format!("{name}={}  (environment)", shown(&v)))?,
            None => out(format!("{name}  (unset)"))?,
        }
        out(format!("    {doc}"))?;
    }
    let unknown = ringreduce::settings::undeclared();
    if !unknown.is_empty() {
        out("")?;
        out("## other RINGREDUCE_* variables in the environment: not read by this build")?;
        for (k, v) in &unknown {
            out(format!(
                "{k}={}  (no such variable: a typo?)",
                shown(&OsString::from(v))
            ))?;
        }
    }
    let nccl: Vec<(String, String)> = param::reported()
        .into_iter()
        .filter(|(k, _)| k.starts_with("NCCL_") && k != param::NCCL_HOME.name)
        .collect();
    out("")?;
    out("## NCCL_* variables in the environment (read by NCCL itself; bench and overlap record them)")?;
    if nccl.is_empty() {
        out("none")?;
    }
    for (k, v) in &nccl {
        out(format!("{k}={}", shown(&OsString::from(v))))?;
    }
    // Each malformed variable once on stderr; the last one is the error.
    match errors.pop() {
        None => Ok(true),
        Some(last) => {
            for e in &errors {
                crate::note!("error: {e}");
            }
            Err(last)
        }
    }
}
