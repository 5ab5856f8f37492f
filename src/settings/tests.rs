use super::*;

#[test]
fn every_variable_is_declared_once_with_docs() {
    let all = all();
    let mut names: Vec<&str> = all.iter().map(|p| p.name()).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "a variable is declared twice");
    for p in &all {
        assert!(!p.doc().is_empty() && !p.accepted().is_empty() && !p.default().is_empty());
    }
    // Listed in the order of their groups.
    let order: Vec<usize> = all
        .iter()
        .map(|p| Group::ALL.iter().position(|g| *g == p.group()).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    assert!(names.contains(&FAULT_NAME));
}
