use super::*;
use crate::plan::Shape;

#[test]
fn only_pull_paths_read_a_peers_send_buffer() {
    let s = Shape::all_reduce(3, 100, 4, false);
    let fused = crate::algo::fused::plan(&s);
    assert_eq!(send_readers(&fused, 0), vec![1, 2]);
    let ring = crate::algo::ring::plan(&s, 2, 2);
    assert!(send_readers(&ring, 0).is_empty(), "the ring pushes");
}
