use super::*;

#[test]
fn messages_round_trip() {
    let p = Put {
        gen: 9,
        signal: Some(4),
        from: 1,
        to: 2,
        buf: 7,
        offset: 4096,
    };
    let m = p.encode(&[1, 2, 3]);
    let (q, d) = Put::decode(&m).unwrap();
    assert_eq!((q, d), (p, &[1u8, 2, 3][..]));
    let none = Put { signal: None, ..p };
    assert_eq!(Put::decode(&none.encode(&[])).unwrap().0, none);
    assert_eq!(decode_signal(&signal(3, 5, 6)).unwrap(), (3, 5, 6));
    assert_eq!(
        decode_failure(&failure(2, 1, "killed")).unwrap(),
        (2, 1, "killed".into())
    );
    assert!(Put::decode(&[0; 8]).is_err());
}
