//! The README's Layout table names paths that exist: every path in its
//! first column (files and folders, in backticks) is checked here, so a
//! move that forgets the table fails.

use std::path::Path;

#[test]
fn every_path_in_the_readme_layout_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let table = readme
        .split("\n## Layout\n")
        .nth(1)
        .expect("a Layout section")
        .split("\n## ")
        .next()
        .expect("its text");
    let mut checked = 0;
    let mut missing = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).expect("a first column");
        for path in first.split('`').skip(1).step_by(2) {
            checked += 1;
            if !root.join(path.trim_end_matches('/')).exists() {
                missing.push(path.to_string());
            }
        }
    }
    assert!(
        checked > 10,
        "the Layout table was not read ({checked} paths)"
    );
    assert!(
        missing.is_empty(),
        "README's Layout names paths that do not exist: {missing:?}"
    );
}
