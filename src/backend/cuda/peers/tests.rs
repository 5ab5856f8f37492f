use super::*;

#[test]
fn events_grow_in_powers_of_two_from_64_within_the_board() {
    assert_eq!(events_to_grow(10, 64, None).unwrap(), None);
    assert_eq!(events_to_grow(10, 0, None).unwrap(), Some(64));
    assert_eq!(events_to_grow(65, 64, None).unwrap(), Some(128));
    assert_eq!(events_to_grow(1000, 128, None).unwrap(), Some(1024));
    // Between processes the job's board bounds it.
    assert_eq!(events_to_grow(90, 0, Some(96)).unwrap(), Some(96));
    assert_eq!(events_to_grow(10, 0, Some(32)).unwrap(), Some(32));
    let e = events_to_grow(200, 0, Some(128)).unwrap_err().to_string();
    assert!(e.contains("200 signals") && e.contains("holds 128"), "{e}");
}

#[test]
fn only_replaced_or_unknown_peer_buffers_are_reopened() {
    let known = |r: usize| r != 2;
    assert_eq!(
        to_reopen(4, &[false, true, false, false], known),
        vec![1, 2]
    );
    assert_eq!(to_reopen(3, &[false; 3], |_| true), Vec::<usize>::new());
    // A release closes every rank's.
    assert_eq!(to_reopen(3, &[true; 3], |_| true), vec![0, 1, 2]);
    // A rank that said nothing counts as replaced.
    assert_eq!(to_reopen(3, &[false], |_| true), vec![1, 2]);
}

#[test]
fn event_handles_round_trip() {
    let hs: Vec<IpcEventHandle> = (0..3u8).map(|i| IpcEventHandle([i; 64])).collect();
    let b = encode_events(&hs);
    assert_eq!(b.len(), 3 * 64);
    let back = decode_events(&b);
    assert_eq!(back.len(), 3);
    assert!(back.iter().zip(&hs).all(|(a, b)| a.0 == b.0));
    assert!(decode_events(&b[..100]).len() == 1);
}
