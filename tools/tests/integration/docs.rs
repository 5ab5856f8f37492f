//! The docs quote what the tools print: every `$ ringreduce ...` quoted with
//! its output in a fenced block of README.md or docs/*.md is run, and what
//! the block shows must be what the command prints (an excerpt may leave
//! lines out with a `...` line; the rest must appear verbatim and in order).
//! Deterministic commands (the symbolic `trace`, `theory`) are compared
//! line by line; quoted errors must end non-zero with the quoted message.
//! Every indented command line of the docs runs on the CPU too.

use crate::cli::{needs_gpu, rr_in, scratch_dir};
use crate::common::{pass, skip};
use crate::ensure;
use crate::harness::Harness;

/// A quoted run: the command (without `$ `) and the lines shown after it,
/// up to the next `$ ` line or the end of its fenced block.
#[derive(Debug)]
struct Quoted {
    cmd: String,
    shown: Vec<String>,
}

fn quoted_runs(text: &str) -> Vec<Quoted> {
    let mut out: Vec<Quoted> = Vec::new();
    let mut in_block = false;
    let mut current: Option<Quoted> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            out.extend(current.take());
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.extend(current.take());
            let cmd = cmd.split(" #").next().unwrap_or(cmd).trim();
            if cmd.starts_with("ringreduce ") || cmd == "ringreduce" {
                current = Some(Quoted {
                    cmd: cmd.to_string(),
                    shown: Vec::new(),
                });
            }
            continue;
        }
        if let Some(q) = current.as_mut() {
            q.shown.push(line.to_string());
        }
    }
    out
}

/// The 4-space indented `ringreduce ...` lines outside fenced blocks (with
/// `\` continuations joined).
fn indented_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<String> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        if let Some(p) = pending.as_mut() {
            let t = line.trim();
            p.push(' ');
            p.push_str(t.trim_end_matches('\\').trim());
            if !t.ends_with('\\') {
                out.extend(pending.take());
            }
            continue;
        }
        if let Some(cmd) = line.strip_prefix("    ringreduce ") {
            let c = format!("ringreduce {}", cmd.trim_end_matches('\\').trim());
            if cmd.trim_end().ends_with('\\') {
                pending = Some(c);
            } else {
                out.push(c);
            }
        }
    }
    out
}

/// Whether `shown` is an excerpt of `printed`: its parts between `...`
/// lines appear in `printed` in order, each as consecutive lines (trailing
/// spaces ignored). Returns the first part that does not, if any.
fn excerpt_mismatch(shown: &[String], printed: &str) -> Option<String> {
    let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
    let mut at = 0;
    let mut shown = shown.to_vec();
    while shown.last().is_some_and(|l| l.trim().is_empty()) {
        shown.pop();
    }
    for part in shown.split(|l| l.trim() == "...") {
        if part.is_empty() {
            continue;
        }
        let part: Vec<&str> = part.iter().map(|l| l.trim_end()).collect();
        let found = (at..=printed.len().saturating_sub(part.len()))
            .find(|&i| printed[i..].starts_with(&part));
        match found {
            Some(i) => at = i + part.len(),
            None => return Some(part.join("\n")),
        }
    }
    None
}

/// The docs to read: README.md and docs/*.md (not the records).
fn docs() -> Result<Vec<(String, String)>, String> {
    let root = crate::common::repo_root();
    let mut docs = Vec::new();
    if let Ok(t) = std::fs::read_to_string(root.join("README.md")) {
        docs.push(("README.md".to_string(), t));
    }
    let mut names: Vec<_> = std::fs::read_dir(root.join("docs"))
        .map_err(|e| format!("docs/: {e}"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    names.sort();
    for p in names {
        let t = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let name = format!(
            "docs/{}",
            p.file_name().unwrap_or_default().to_string_lossy()
        );
        docs.push((name, t));
    }
    Ok(docs)
}

/// `line` with every number (digits, with a decimal point or an exponent)
/// written `#`: what a run prints that varies from machine to machine and
/// run to run, so that a quoted output can be compared by its shape.
fn masked(line: &str) -> String {
    let mut out = String::new();
    let cs: Vec<char> = line.trim_end().chars().collect();
    let mut i = 0;
    while i < cs.len() {
        if cs[i].is_ascii_digit() {
            while i < cs.len() && (cs[i].is_ascii_digit() || cs[i] == '.') {
                i += 1;
            }
            // An exponent: e-7, e+3, e12.
            if i + 1 < cs.len() && cs[i] == 'e' {
                let j = i + 1 + usize::from(cs[i + 1] == '-' || cs[i + 1] == '+');
                if j < cs.len() && cs[j].is_ascii_digit() {
                    i = j;
                    while i < cs.len() && cs[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            out.push('#');
        } else {
            out.push(cs[i]);
            i += 1;
        }
    }
    out
}

/// The README's output of its first command (`run`, the fenced block after
/// "Output of the first command"): its lines, in order.
fn readme_run_output(readme: &str) -> Option<Vec<String>> {
    let at = readme.find("Output of the first command")?;
    let rest = &readme[at..];
    let open = rest.find("```")?;
    let body = &rest[open + 3..];
    let body = &body[body.find('\n')? + 1..];
    let close = body.find("```")?;
    Some(body[..close].lines().map(str::to_string).collect())
}

pub fn register(h: &mut Harness) {
    h.add("docs::the_readmes_run_output_is_what_run_prints", || {
        let root = crate::common::repo_root();
        let Ok(readme) = std::fs::read_to_string(root.join("README.md")) else {
            return skip("the source tree's README is not here (staged test binary?)");
        };
        if crate::common::gpu_count() > 0 {
            return skip("the README quotes `run` on a machine without a GPU");
        }
        let shown = readme_run_output(&readme)
            .ok_or_else(|| "README.md: no output of the first command".to_string())?;
        ensure!(
            shown.len() >= 8,
            "README.md: the quoted run has {} lines",
            shown.len()
        );
        let dir = scratch_dir("docs-run")?;
        let ran = rr_in(&dir, &["run"]);
        let _ = std::fs::remove_dir_all(&dir);
        ensure!(
            ran.code == Some(0) && !ran.panicked(),
            "run: {}",
            ran.show()
        );
        // Every line the README shows, numbers aside, in the order printed.
        let printed: Vec<String> = ran.out.lines().map(masked).collect();
        let mut at = 0;
        for line in &shown {
            let want = masked(line);
            match printed[at..].iter().position(|p| *p == want) {
                Some(i) => at += i + 1,
                None => ensure!(
                    false,
                    "README.md shows\n  {line}\nbut `run` prints (numbers as #):\n{}",
                    printed.join("\n")
                ),
            }
        }
        pass()
    });

    h.add("docs::masking_numbers", || {
        ensure!(
            masked("steady    : 2084.0 us per call (median of 10); err 2.384e-7  ")
                == "steady    : # us per call (median of #); err #",
            "{}",
            masked("steady    : 2084.0 us per call (median of 10); err 2.384e-7")
        );
        ensure!(
            masked("4MiB x2, 2(N-1)/N*D") == "#MiB x#, #(N-#)/N*D",
            "mask"
        );
        ensure!(masked("sent 6291456 B") == "sent # B", "mask");
        pass()
    });

    h.add("docs::quoted_outputs_are_what_the_tools_print", || {
        let docs = match docs() {
            Ok(d) if !d.is_empty() => d,
            _ => return skip("the source tree's docs are not here (staged test binary?)"),
        };
        let dir = scratch_dir("docs-quoted")?;
        let mut compared = 0;
        for (file, text) in &docs {
            for q in quoted_runs(text) {
                let words: Vec<&str> = q.cmd.split_whitespace().skip(1).collect();
                if let Some(why) = needs_gpu(&words) {
                    println!("    skipped `{}` ({file}): {why}", q.cmd);
                    continue;
                }
                let ran = rr_in(&dir, &words);
                ensure!(!ran.panicked(), "{file}: `{}`: {}", q.cmd, ran.show());
                let error = q.shown.first().is_some_and(|l| l.starts_with("error:"));
                if error {
                    ensure!(
                        ran.code.is_some_and(|c| c != 0),
                        "{file}: `{}` is quoted failing but exits 0: {}",
                        q.cmd,
                        ran.show()
                    );
                    if let Some(part) = excerpt_mismatch(&q.shown, &ran.err) {
                        ensure!(
                            false,
                            "{file}: `{}` no longer prints\n{part}\nit prints: {}",
                            q.cmd,
                            ran.err
                        );
                    }
                    compared += 1;
                    continue;
                }
                ensure!(ran.code == Some(0), "{file}: `{}`: {}", q.cmd, ran.show());
                let symbolic = words.first() == Some(&"trace")
                    && !words
                        .iter()
                        .any(|w| ["--backend", "--timeline", "--svg"].contains(w));
                if symbolic || words.first() == Some(&"theory") {
                    if let Some(part) = excerpt_mismatch(&q.shown, &ran.out) {
                        ensure!(
                            false,
                            "{file}: `{}` no longer prints what the doc shows:\n{part}\n--- it prints:\n{}",
                            q.cmd,
                            ran.out
                        );
                    }
                    compared += 1;
                }
            }
            for cmd in indented_commands(text) {
                let words: Vec<&str> = cmd.split_whitespace().skip(1).collect();
                if let Some(why) = needs_gpu(&words) {
                    println!("    skipped `{cmd}` ({file}): {why}");
                    continue;
                }
                // Output paths under docs/ land in the scratch directory.
                let _ = std::fs::create_dir_all(dir.join("docs"));
                let ran = rr_in(&dir, &words);
                ensure!(
                    ran.code == Some(0) && !ran.panicked(),
                    "{file}: `{cmd}`: {}",
                    ran.show()
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        ensure!(
            compared >= 8,
            "only {compared} quoted outputs compared: the docs quote more"
        );
        pass()
    });

    h.add("docs::excerpt_matching", || {
        let printed = "a\nb \nc\nd\ne\n";
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        ensure!(
            excerpt_mismatch(&s(&["a", "b", "...", "d"]), printed).is_none(),
            "excerpt check"
        );
        ensure!(
            excerpt_mismatch(&s(&["b", "c", "d", "e", ""]), printed).is_none(),
            "excerpt check"
        );
        // Out of order, a changed line, lines not consecutive.
        ensure!(
            excerpt_mismatch(&s(&["d", "...", "a"]), printed).is_some(),
            "excerpt check"
        );
        ensure!(
            excerpt_mismatch(&s(&["a", "x"]), printed).is_some(),
            "excerpt check"
        );
        ensure!(
            excerpt_mismatch(&s(&["a", "c"]), printed).is_some(),
            "excerpt check"
        );
        let q =
            quoted_runs("```\n$ ringreduce theory --size 1MiB\nx\n...\ny\n```\n$ ringreduce no\n");
        ensure!(q.len() == 1 && q[0].shown == s(&["x", "...", "y"]), "{q:?}");
        let c =
            indented_commands("    ringreduce trace --a \\\n        --b c\n\n    ringreduce x\n");
        ensure!(c == ["ringreduce trace --a --b c", "ringreduce x"], "{c:?}");
        pass()
    });
}
