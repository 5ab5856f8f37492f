use super::*;

fn every_kind() -> Vec<CallDesc> {
    let mut v = vec![CallDesc::barrier()];
    for c in [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
        Collective::Broadcast { root: 3 },
    ] {
        for t in [DataType::ALL[0], DataType::ALL[DataType::ALL.len() - 1]] {
            for in_place in [false, true] {
                let d = CallDesc::host(c, t, ReduceOp::Max, in_place, 1 << 40);
                v.push(d);
                v.push(d.on_device());
            }
        }
    }
    v.push(CallDesc::buffers(CallKind::Alloc, DataType::ALL[2], 17));
    v.push(CallDesc::buffers(CallKind::Free, DataType::ALL[2], 17));
    v
}

#[test]
fn descriptors_round_trip_and_differ() {
    let all = every_kind();
    for d in &all {
        assert_eq!(CallDesc::decode(&d.encode()), Ok(*d), "{d}");
    }
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a.encode(), b.encode(), "{a} / {b}");
        }
    }
    assert!(CallDesc::decode(&[]).is_err());
    assert!(CallDesc::decode(&[0; WORDS * 8]).is_err());
    let mut bad = all[1].encode();
    bad[8] = 9;
    assert!(CallDesc::decode(&bad).is_err());
}

#[test]
fn descriptors_agree_or_name_the_first_that_differs() {
    let d = CallDesc::host(
        Collective::AllReduce,
        DataType::ALL[2],
        ReduceOp::Sum,
        false,
        4,
    );
    assert!(CallDesc::agree(&[(0, d), (1, d), (2, d)]).is_ok());
    let other = CallDesc { count: 5, ..d };
    match CallDesc::agree(&[(0, d), (1, d), (2, other)]) {
        Err(Error::Mismatch { rank: 2, asked }) => {
            assert_eq!(asked.len(), 3);
            assert!(asked[2].1.contains("5 elements"), "{asked:?}");
            assert!(asked[0].1.contains("all-reduce of 4 elements"), "{asked:?}");
        }
        other => panic!("{other:?}"),
    }
    // A rank at another step is named as such.
    let r = agree_decoded(&[(0, Ok(d)), (1, Err("something else".into()))]);
    assert!(
        matches!(&r, Err(Error::Mismatch { rank: 1, asked }) if asked[1].1 == "something else"),
        "{r:?}"
    );
    // The type and the root are part of the call.
    let f = CallDesc::host(
        Collective::AllReduce,
        DataType::ALL[7],
        ReduceOp::Sum,
        false,
        4,
    );
    assert!(CallDesc::agree(&[(0, d), (1, f)]).is_err());
    let b0 = CallDesc::host(
        Collective::Broadcast { root: 0 },
        DataType::ALL[2],
        ReduceOp::Sum,
        false,
        4,
    );
    let b1 = CallDesc::host(
        Collective::Broadcast { root: 1 },
        DataType::ALL[2],
        ReduceOp::Sum,
        false,
        4,
    );
    let e = CallDesc::agree(&[(0, b0), (1, b1)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("broadcast from rank 0") && e.contains("broadcast from rank 1"),
        "{e}"
    );
}
