//! The library's layers, checked from its source: every `crate::<module>`
//! path in a file of `src/` (its code, not its comments or its unit tests)
//! must name a module of a lower layer than the file's own top-level
//! module. DESIGN.md ("The layers") says what each layer is.
//!
//! [`LAYERS`] lists every top-level module, lowest first; a new module must
//! be placed in it. Every import runs down, so no two modules import each
//! other, directly or around a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module of `src/`, lowest layer first. A module may use
/// only modules listed before it.
const LAYERS: &[&str] = &[
    // Words, numbers and the error type everything returns.
    "words",
    "schedule",
    "size",
    "error",
    "fault",
    // What a collective is: element types and ops, the plan IR; what a
    // caller runs on a rank's work stream.
    "element",
    "plan",
    "work",
    // The operating system, the environment's variables, host waits.
    "sys",
    "param",
    "sync",
    // The CUDA driver layer (the only `unsafe` besides sys).
    "cuda",
    // The algorithms that build plans, and the list of every environment
    // variable (declared in param and in algo).
    "algo",
    "settings",
    // One process per rank: the job, its store and control segment, the
    // world over nodes.
    "process",
    // How a rank reaches its peers.
    "transport",
    // The backends that run plans, and the rank threads they run on.
    "pool",
    "backend",
    // The engine (plan cache, buffers, dispatch) and the public handle.
    "engine",
    "communicator",
    // What programs around the library use from the operating system.
    "os",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code, without its comments. (Its unit tests are a file of
/// their own, `tests.rs`, which [`imports`] skips: see
/// [`unit_tests_are_files_of_their_own`].)
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `from -> to -> files`, between the top-level modules of `src/`.
fn imports(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<(String, String), Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for f in files {
        let rel = f
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        if rel == "lib.rs" || rel.ends_with("/tests.rs") {
            continue;
        }
        let from = rel
            .split('/')
            .next()
            .expect("a path")
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(&f).expect("a source file");
        let code = code(&text);
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `$crate::` (macros) and the crate root's items are not modules.
            if name != from && modules.contains(&name) && !code[..i].ends_with('$') {
                let files = edges.entry((from.clone(), name)).or_default();
                if !files.contains(&rel) {
                    files.push(rel.clone());
                }
            }
        }
    }
    edges
}

#[test]
fn every_import_runs_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("src/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            p.file_stem()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .filter(|m| m != "lib")
        .collect();
    let unplaced: Vec<_> = modules
        .iter()
        .filter(|m| !LAYERS.contains(&m.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules not placed in LAYERS (tests/layers.rs and DESIGN.md's layers): {unplaced:?}"
    );
    let gone: Vec<_> = LAYERS.iter().filter(|m| !modules.contains(**m)).collect();
    assert!(gone.is_empty(), "LAYERS names modules src/ lacks: {gone:?}");
    let at = |m: &str| LAYERS.iter().position(|x| *x == m).expect("placed");
    let edges = imports(&src, &modules);
    let mut up = Vec::new();
    for ((from, to), files) in &edges {
        if at(to) > at(from) {
            up.push(format!("{from} -> {to} (in {})", files.join(", ")));
        }
    }
    assert!(
        up.is_empty(),
        "imports that run back up the layers:\n  {}",
        up.join("\n  ")
    );
}

/// The checker itself: comments do not count, a path does.
#[test]
fn the_checker_reads_code_only() {
    let text = "use crate::a::X; // crate::b\n/// [`crate::c`]\nfn f() { crate::d::g() }\n";
    let c = code(text);
    assert!(c.contains("crate::a") && c.contains("crate::d"));
    assert!(!c.contains("crate::b") && !c.contains("crate::c"));
}

/// A module's unit tests live beside it (`pool.rs` -> `pool/tests.rs`,
/// `backend/mod.rs` -> `backend/tests.rs`): no file of `src/` holds a
/// test module inline, so a source file is only the code it ships, and the
/// layer check above reads code alone.
#[test]
fn unit_tests_are_files_of_their_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut inline = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a source file");
        let lines: Vec<&str> = text.lines().collect();
        for (i, w) in lines.windows(2).enumerate() {
            let is_mod = w[1].trim_start().starts_with("mod ")
                || w[1].trim_start().starts_with("pub(crate) mod ");
            if w[0].trim() == "#[cfg(test)]" && is_mod && w[1].trim_end().ends_with('{') {
                inline.push(format!("{}:{}", f.display(), i + 2));
            }
        }
        if f.file_name().is_some_and(|n| n != "tests.rs") && text.contains("#[test]") {
            inline.push(format!("{}: #[test] outside a tests.rs", f.display()));
        }
    }
    assert!(inline.is_empty(), "inline unit tests: {inline:#?}");
}
