use super::*;

#[test]
fn rank_lists() {
    assert_eq!(rank_list(&[]), "no rank");
    assert_eq!(rank_list(&[2]), "rank 2");
    assert_eq!(rank_list(&[1, 2]), "ranks 1 and 2");
    assert_eq!(rank_list(&[0, 1, 3]), "ranks 0, 1 and 3");
}

#[test]
fn singular_only_for_one() {
    assert_eq!(counted(1usize, "rank"), "1 rank");
    assert_eq!(counted(0usize, "rank"), "0 ranks");
    assert_eq!(counted(2u64, "element"), "2 elements");
    assert_eq!(plural(1usize, "was", "were"), "was");
    assert_eq!(plural(2usize, "was", "were"), "were");
}

#[test]
fn lists_refuse_empty_items() {
    assert_eq!(list_items("a, b ,c").unwrap(), vec!["a", "b", "c"]);
    assert_eq!(list_items("a").unwrap(), vec!["a"]);
    for bad in ["", " ", "a,,b", "a,", ",a"] {
        assert!(list_items(bad).is_err(), "{bad:?}");
    }
}
